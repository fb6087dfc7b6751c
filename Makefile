# durable: PGXS build.  The version lives in durable.control only.

EXTENSION  = durable
EXTVERSION = $(shell sed -n "s/^default_version *= *'\(.*\)'/\1/p" $(EXTENSION).control)

MODULE_big = durable
OBJS       = $(patsubst %.c,%.o,$(sort $(wildcard src/*/*.c)))
DATA       = $(sort $(wildcard durable--*.sql))
PGFILEDESC = "durable - recovery authority for durable execution"

PG_CPPFLAGS = -I$(srcdir)/src -DDURABLE_VERSION=\"$(EXTVERSION)\"

REGRESS      = $(patsubst sql/%.sql,%,$(sort $(wildcard sql/*.sql)))
REGRESS_OPTS = --load-extension=$(EXTENSION)

ISOLATION      = $(patsubst test/isolation/specs/%.spec,%,$(sort $(wildcard test/isolation/specs/*.spec)))
ISOLATION_OPTS = --inputdir=test/isolation --load-extension=$(EXTENSION)

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS does not track header dependencies
$(OBJS): $(wildcard src/*.h src/*/*.h)

# The example worker program, on libpq (PGXS builds one program or one
# module, so it has a rule of its own).
WORKER = examples/durable_worker
EXTRA_CLEAN = $(WORKER)
all: $(WORKER)
$(WORKER): examples/durable_worker.c
	$(CC) $(CFLAGS) $(PG_CFLAGS) -I$(shell $(PG_CONFIG) --includedir) -o $@ $< \
		-L$(shell $(PG_CONFIG) --libdir) -lpq

# pgTAP contracts; needs the pgtap extension on the server and pg_prove.
.PHONY: pgtap prove_installcheck
pgtap:
	pg_prove --ext .sql -r test/pgtap

# Perl TAP tests with PostgreSQL::Test::Cluster, without --enable-tap-tests.
# TAP_TESTDIR must be writable by the user that runs initdb.  PG 15's
# PostgreSQL::Test::Utils puts its clusters and logs under TESTDIR/tmp_check,
# PG 16's and later ones under TESTDATADIR and TESTLOGDIR: both are given.
TAP_TESTDIR ?= $(CURDIR)
prove_installcheck:
	rm -rf '$(TAP_TESTDIR)/tmp_check'
	cd $(srcdir) && TESTDIR='$(TAP_TESTDIR)' \
		TESTDATADIR='$(TAP_TESTDIR)/tmp_check' TESTLOGDIR='$(TAP_TESTDIR)/tmp_check/log' \
		PATH="$(bindir):$$PATH" \
		PG_REGRESS='$(top_builddir)/src/test/regress/pg_regress' \
		$(PROVE) -I $(pgxsdir)/src/test/perl/ -I test/perl $(PROVE_FLAGS) $(or $(PROVE_TESTS),test/t/*.pl)
