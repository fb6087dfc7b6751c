# Shared set-up for durable's commands (tools/test, tools/demo, tools/bench):
# Debian packages, build and install, and a throwaway PostgreSQL server that
# is stopped and removed on exit, on failure and on interrupt.
#
# Source it; it defines functions and PG_BIN, and changes nothing by itself.

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# The PostgreSQL major of this Debian release: the one its "postgresql"
# package depends on (15 on Debian 12, 17 on 13, 18 on unstable); without
# apt's package lists (a container that never ran apt-get update), the one
# the release is known to ship.
default_pg_major() {
	local major version_id=
	major=$(apt-cache depends postgresql 2>/dev/null |
		sed -n 's/^ *Depends: postgresql-\([0-9][0-9]*\)$/\1/p' | head -n 1)
	if [ -z "$major" ]; then
		[ -r /etc/os-release ] && version_id=$(. /etc/os-release && echo "${VERSION_ID:-}")
		case $version_id in
			12) major=15 ;;
			13) major=17 ;;
			'') major=18 ;;	# testing and unstable have no VERSION_ID
			*) die "cannot tell which PostgreSQL Debian $version_id ships; set PG_MAJOR" ;;
		esac
	fi
	echo "$major"
}
PG_MAJOR=${PG_MAJOR:-$(default_pg_major)} || exit 1
# PG_BIN may name another installation of that major (a relocated copy, an
# assert-enabled build); its pg_config then decides where durable installs.
PG_BIN=${PG_BIN:-/usr/lib/postgresql/$PG_MAJOR/bin}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# CI builds treat every warning as an error; -Wextra's unused-parameter
# warnings are PostgreSQL's own headers', not ours.
DURABLE_CFLAGS=${DURABLE_CFLAGS:--Wall -Wextra -Werror -Wno-unused-parameter}

# What the demo needs: a server, the headers and a compiler to build
# durable and the example worker, and the Python its agent scene runs with.
DURABLE_DEMO_PACKAGES=(
	"postgresql-$PG_MAJOR"
	"postgresql-server-dev-$PG_MAJOR"
	make
	gcc
	python3-psycopg
)
# What the tests need besides.
DURABLE_PACKAGES=(
	"${DURABLE_DEMO_PACKAGES[@]}"
	"postgresql-$PG_MAJOR-pgtap"
	"postgresql-$PG_MAJOR-cron"
	libtap-parser-sourcehandler-pgtap-perl
	libipc-run-perl
	libdbd-pg-perl
	pgbouncer
	prometheus
	# metrics/postgres_exporter.yaml, run by 021_metrics
	prometheus-postgres-exporter
	# pgdurable (clients/python) is built offline and installed into a venv
	python3-build
	python3-setuptools
	python3-wheel
	python3-venv
)
# From 18 on, Debian ships PostgreSQL's JIT (llvmjit) in a package of its
# own, which the postgresql package only recommends: 026_jit
# needs a server that can compile.
if ((PG_MAJOR >= 18)); then
	DURABLE_PACKAGES+=("postgresql-$PG_MAJOR-jit")
fi
# Node.js and npm for the JavaScript reference worker.  A Node.js from
# elsewhere (NodeSource) brings its own npm, and Debian's npm package would
# conflict with it: only what is missing is asked for.
DURABLE_NODE_PACKAGES=()
command -v node >/dev/null 2>&1 || DURABLE_NODE_PACKAGES+=(nodejs)
command -v npm >/dev/null 2>&1 || DURABLE_NODE_PACKAGES+=(npm)
DURABLE_PACKAGES+=("${DURABLE_NODE_PACKAGES[@]}")

# Install the Debian packages that are missing (as root), or print the exact
# command and stop (as anyone else).
ensure_packages() {
	local missing=() pkg
	for pkg in "${DURABLE_PACKAGES[@]}" "$@"; do
		dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' ||
			missing+=("$pkg")
	done
	((${#missing[@]})) || return 0
	if [ "$(id -u)" -ne 0 ]; then
		printf 'durable needs these Debian packages; install them and run again:\n' >&2
		printf '  sudo apt-get install -y %s\n' "${missing[*]}" >&2
		exit 1
	fi
	log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt_wait update -qq >/dev/null
	# A package's postinst starts no service (PostgreSQL's main cluster,
	# Prometheus, PgBouncer): the tests start their own, on ports of their own.
	local guard=
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && guard=1
	fi
	apt_wait install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	local rc=$?
	[ -z "$guard" ] || rm -f /usr/sbin/policy-rc.d
	[ "$rc" -eq 0 ] || die "apt-get install ${missing[*]} failed"
}

# The node modules of the TypeScript client (clients/ts, whose npm ci also
# compiles it to clients/ts/dist), of the example worker that uses it
# (examples/ts) and of the console (console/, which the metrics test runs),
# from the npm registry, as each package-lock.json pins them (npm ci), when
# they are missing or older than the lock file; the client is compiled
# again when a source is newer than what was compiled.  Without them the
# tests that run them fail and say so; everything else runs.
ensure_node_modules() {
	local dir
	for dir in "$REPO/clients/ts" "$REPO/examples/ts" "$REPO/console"; do
		[ -d "$dir/node_modules/pg" ] && [ ! "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ] &&
			continue
		log "installing the node modules of ${dir#"$REPO"/} (npm ci)"
		(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
			log "npm ci in ${dir#"$REPO"/} failed: the tests that run it will fail"
	done
	dir=$REPO/clients/ts
	[ -d "$dir/node_modules/typescript" ] || return 0
	if [ ! -f "$dir/dist/index.js" ] ||
		[ -n "$(find "$dir/src" "$dir/tsconfig.json" -newer "$dir/dist/index.js" | head -n 1)" ]; then
		log "compiling clients/ts (tsc)"
		(cd "$dir" && npm run --silent prepare >/dev/null) || log "tsc in clients/ts failed: the tests that run it will fail"
	fi
}

# apt-get, waiting up to two minutes while another apt or dpkg holds a lock
apt_wait() {
	apt-get -o DPkg::Lock::Timeout=120 "$@"
}

# The non-C locale some suites run in a second time (tools/test).
TEST_LOCALE=${TEST_LOCALE:-en_US.UTF-8}

# Generate an operating-system locale if it is missing (as root, with the
# locales package), or print the commands and stop (as anyone else).
ensure_locale() {
	local want=$1
	# locale -a spells it en_US.utf8
	locale -a 2>/dev/null | grep -qix "$(printf '%s' "$want" | sed 's/UTF-8$/utf8/I')" && return 0
	if [ "$(id -u)" -ne 0 ]; then
		printf 'the tests need the locale %s; generate it and run again:\n' "$want" >&2
		printf '  sudo sh -c "echo %s UTF-8 >>/etc/locale.gen && locale-gen"\n' "$want" >&2
		exit 1
	fi
	ensure_packages locales
	log "generating the locale $want"
	if grep -qE "^# *$want( |$)" /etc/locale.gen; then
		sed -i -E "s/^# *($want( |$))/\1/" /etc/locale.gen
	elif ! grep -qE "^$want( |$)" /etc/locale.gen; then
		echo "$want UTF-8" >>/etc/locale.gen
	fi
	locale-gen >/dev/null || die "locale-gen failed"
}

# Build warning-free and install into the server's directories, and build
# the example worker program (examples/durable_worker, "make worker": the
# TAP tests and tools/demo run it; "make" alone does not build it).  Object
# files built against one installation never go into another: the stamp
# file names the installation of the last build, and when PG_BIN names
# another one (or there is no stamp) the tree is cleaned first.
BUILD_STAMP=$REPO/.build-installation
build_and_install() {
	local installation
	export PATH="$PG_BIN:$PATH"
	installation="$(cd "$PG_BIN" && pwd -P) $("$PG_BIN/pg_config" --version)"
	if [ "$(cat "$BUILD_STAMP" 2>/dev/null)" != "$installation" ]; then
		log "cleaning the build tree: its last build was not for $PG_BIN (or is unknown)"
		rm -f "$BUILD_STAMP"
		make -C "$REPO" -s clean >/dev/null 2>&1
	fi
	log "building durable for $("$PG_BIN/pg_config" --version)"
	make -C "$REPO" -s PG_CFLAGS="$DURABLE_CFLAGS" all worker >/dev/null || die "build failed"
	printf '%s\n' "$installation" >"$BUILD_STAMP"
	if [ -w "$("$PG_BIN/pg_config" --pkglibdir)" ]; then
		make -C "$REPO" -s install >/dev/null || die "install failed"
	elif sudo -n true 2>/dev/null; then
		sudo make -C "$REPO" -s install >/dev/null || die "install failed"
	else
		die "cannot write to $("$PG_BIN/pg_config" --pkglibdir); run: sudo make -C $REPO install"
	fi
}

# PostgreSQL refuses to run as root: as root, run the server and everything
# that starts one as the postgres system user.
if [ "$(id -u)" -eq 0 ]; then
	as_server_user() { runuser -u postgres -- "$@"; }
	SERVER_USER=postgres
else
	as_server_user() { "$@"; }
	SERVER_USER=$(id -un)
fi

# A free TCP port on loopback, so that two runs never share a server.
free_port() {
	local port
	for _ in $(seq 200); do
		port=$((20000 + RANDOM % 30000))
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "$port"; return; }
	done
	die "no free port found"
}

# Stop every server started under WORKDIR (ours and the TAP tests'), then
# remove it.  Runs on every exit.
cleanup_workdir() {
	local pidfile
	[ -n "${WORKDIR:-}" ] && [ -d "$WORKDIR" ] || return 0
	while IFS= read -r pidfile; do
		as_server_user "$PG_BIN/pg_ctl" -D "$(dirname "$pidfile")" -m immediate -w stop >/dev/null 2>&1 ||
			kill -9 "$(head -n 1 "$pidfile")" 2>/dev/null
	done < <(find "$WORKDIR" -name postmaster.pid 2>/dev/null)
	rm -rf "$WORKDIR"
}

make_workdir() {
	WORKDIR=$(mktemp -d "${TMPDIR:-/tmp}/durable.XXXXXX")
	chmod 755 "$WORKDIR"
	[ "$SERVER_USER" = "$(id -un)" ] || chown "$SERVER_USER" "$WORKDIR"
	trap cleanup_workdir EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

# Start a throwaway server with durable preloaded; sets PGHOST, PGPORT,
# PGUSER and PGDATA.  Extra postgresql.conf lines may be given as arguments.
start_server() {
	local line
	export PGPORT=$(free_port)
	export PGHOST=$WORKDIR
	export PGUSER=$SERVER_USER
	export PGDATA=$WORKDIR/data
	export PGDATABASE=postgres
	as_server_user "$PG_BIN/initdb" -D "$PGDATA" -A trust -U "$SERVER_USER" \
		--no-sync -E UTF8 --locale=C >"$WORKDIR/initdb.log" 2>&1 ||
		{ cat "$WORKDIR/initdb.log" >&2; die "initdb failed"; }
	{
		echo "port = $PGPORT"
		echo "listen_addresses = ''"
		echo "unix_socket_directories = '$WORKDIR'"
		echo "shared_preload_libraries = 'durable'"
		echo "durable.database = 'postgres'"
		echo "max_connections = 100"
		echo "fsync = off"
		echo "log_line_prefix = '%m [%p] '"
		for line in "$@"; do echo "$line"; done
	} >>"$PGDATA/postgresql.conf"
	# -c: a backend that crashes leaves a core (where the kernel's
	# core_pattern puts it) for its stack
	as_server_user "$PG_BIN/pg_ctl" -D "$PGDATA" -l "$WORKDIR/server.log" -c -w start >/dev/null ||
		{ cat "$WORKDIR/server.log" >&2; die "server did not start"; }
	log "throwaway server on port $PGPORT (data in $PGDATA)"
}
