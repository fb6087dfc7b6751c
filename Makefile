# durable: PGXS build.  The version lives in durable.control only.
#
# Out-of-tree builds work: Debian's pg_buildext runs, in an empty build
# directory, "make -f <source>/Makefile VPATH=<source>".  Every source, the
# control file and the scripts are therefore named from this Makefile's own
# directory (durable_src, empty in the tree, so that the commands there are
# what they always were), and what is built (objects, bitcode, durable.so,
# the example worker) is named relative to the current directory.
#
# Two libraries are built.  durable-$(EXTVERSION).so holds all of durable's
# code, and the scripts of this version bind their functions to it: a
# version's library is a file of its own, so that the library of the
# version before it, preloaded by a running server, goes on serving that
# version's functions after the files are replaced, and ALTER EXTENSION
# durable UPDATE moves every call to the new library without a restart
# (docs/design.md section 14; the steps in docs/operations.md).  durable.so
# is the name shared_preload_libraries keeps from version to version: a
# loader that loads the library of its own version (src/loader).
durable_src := $(filter-out ./,$(dir $(firstword $(MAKEFILE_LIST))))

EXTENSION  = durable
EXTVERSION = $(shell sed -n "s/^default_version *= *'\(.*\)'/\1/p" $(durable_src)$(EXTENSION).control)

MODULE_big = durable-$(EXTVERSION)
OBJS       = $(patsubst $(durable_src)%.c,%.o,$(sort $(filter-out $(durable_src)src/loader/%,$(wildcard $(durable_src)src/*/*.c))))
LOADER     = durable$(DLSUFFIX)

# PostgreSQL loads libraries with RTLD_GLOBAL: in a session that runs a
# version's library beside the preloaded library of the version before it,
# this library's calls of its own functions, and its reads of its own
# variables, would otherwise bind to that library's, which came first.
SHLIB_LINK = -Wl,-Bsymbolic
DATA       = $(notdir $(sort $(wildcard $(durable_src)durable--*.sql)))
PGFILEDESC = "durable - recovery authority for durable execution"

PG_CPPFLAGS = -I$(srcdir)/src -DDURABLE_VERSION=\"$(EXTVERSION)\" \
	-DDURABLE_LIBRARY=\"$(MODULE_big)\"

REGRESS      = $(patsubst $(durable_src)sql/%.sql,%,$(sort $(wildcard $(durable_src)sql/*.sql)))
REGRESS_OPTS = --load-extension=$(EXTENSION)

ISOLATION      = $(patsubst $(durable_src)test/isolation/specs/%.spec,%,$(sort $(wildcard $(durable_src)test/isolation/specs/*.spec)))
ISOLATION_OPTS = --inputdir=$(durable_src)test/isolation --use-existing

# The example worker program (its rule is below); set before PGXS is
# included, which reads EXTRA_CLEAN as it is included.
WORKER      = examples/durable_worker
EXTRA_CLEAN = $(WORKER) $(LOADER) src/loader/loader.o

# Sources are found by file type, not through VPATH: VPATH searches for
# targets too, so an out-of-tree build from a source tree that was also
# built in place would take that tree's objects and durable.so as up to
# date and build nothing.  PGXS installs the control file and the scripts
# from $(srcdir), which it sets, with VPATH empty, to this Makefile's
# directory.
override VPATH :=
vpath %.c $(durable_src)
vpath %.control $(durable_src)

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# The isolation specs share one teardown, a function of their database
# (test/isolation/reset.sql): so installcheck makes that database itself
# (test/test_db.sql, as pg_regress would, in TEST_LOCALE when given) and
# the specs run in it with --use-existing.  tools/test runs its *-en_US
# suites, regress too, in such a database of TEST_LOCALE.
TEST_LOCALE ?=
installcheck: test-db
.PHONY: test-db
test-db:
ifneq ($(strip $(ISOLATION)$(TEST_LOCALE)),)
	$(bindir)/psql -X -q -v ON_ERROR_STOP=1 -d postgres -v db='$(ISOLATION_TESTDB)' \
		-v locale='$(TEST_LOCALE)' -f $(durable_src)test/test_db.sql >/dev/null
endif

# PGXS does not track header dependencies
$(OBJS) src/loader/loader.o: $(wildcard $(durable_src)src/*.h $(durable_src)src/*/*.h)

# The loader: one object, no bitcode (it has nothing to inline).  PGXS
# builds one MODULE_big and MODULES by their own names, so it has rules of
# its own, as the worker program does.
all: $(LOADER)
$(LOADER): src/loader/loader.o
	$(CC) $(CFLAGS) $< $(LDFLAGS) $(LDFLAGS_SL) -shared -o $@
src/loader/loader.o: | src/loader
install: install-loader
.PHONY: install-loader uninstall-loader
install-loader: $(LOADER) installdirs
	$(INSTALL_SHLIB) $(LOADER) '$(DESTDIR)$(pkglibdir)/'
uninstall: uninstall-loader
uninstall-loader:
	rm -f '$(DESTDIR)$(pkglibdir)/$(LOADER)'

# An out-of-tree build makes the directories of its objects and bitcode.
OBJDIRS = $(patsubst %/,%,$(sort $(dir $(OBJS)) src/loader/))
$(OBJS) $(OBJS:.o=.bc): | $(OBJDIRS)
$(OBJDIRS):
	$(MKDIR_P) $@

# The example worker program, on libpq, for the tests that kill it and for
# tools/demo: built only where asked ("make worker"), not by "all", so that
# a package build does not need it.  (PGXS builds one program or one
# module, so it has a rule of its own.)
.PHONY: worker
worker: $(WORKER)
$(WORKER): examples/durable_worker.c
	@$(MKDIR_P) $(@D)
	$(CC) $(CFLAGS) $(PG_CFLAGS) -I$(shell $(PG_CONFIG) --includedir) -o $@ $< \
		-L$(shell $(PG_CONFIG) --libdir) -lpq

# The install script of the current version, durable--$(EXTVERSION).sql,
# and the update script to it are built from src/sql (one file per object,
# in the order of src/sql/manifest) by tools/sql-scripts, and checked in:
# PGXS and the Debian package install them as data, and neither make nor
# make install builds them, so that a package build needs nothing else.
# After changing a source, run "make sql-scripts" and commit what it wrote
# (tools/test layers fails while a checked-in script differs).
.PHONY: sql-scripts
sql-scripts:
	$(durable_src)tools/sql-scripts

# pgTAP contracts; needs the pgtap extension on the server and pg_prove.
.PHONY: pgtap prove_installcheck
pgtap:
	pg_prove --ext .sql -r $(durable_src)test/pgtap

# Perl TAP tests with PostgreSQL::Test::Cluster, without --enable-tap-tests.
# They run the example worker program, so it is built first.
# TAP_TESTDIR must be writable by the user that runs initdb.  PG 15's
# PostgreSQL::Test::Utils puts its clusters and logs under TESTDIR/tmp_check,
# PG 16's and later ones under TESTDATADIR and TESTLOGDIR: both are given.
TAP_TESTDIR ?= $(CURDIR)
prove_installcheck: worker
	rm -rf '$(TAP_TESTDIR)/tmp_check'
	cd $(srcdir) && TESTDIR='$(TAP_TESTDIR)' \
		TESTDATADIR='$(TAP_TESTDIR)/tmp_check' TESTLOGDIR='$(TAP_TESTDIR)/tmp_check/log' \
		PATH="$(bindir):$$PATH" PG_CONFIG='$(PG_CONFIG)' \
		PG_REGRESS='$(top_builddir)/src/test/regress/pg_regress' \
		$(PROVE) -I $(pgxsdir)/src/test/perl/ -I test/perl $(PROVE_FLAGS) $(or $(PROVE_TESTS),test/t/*.pl)
