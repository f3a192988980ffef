# lib.sh: helpers for the end-to-end tests (sourced).
#   TRAC, MPIRUN, PYTHON come from `make check` (tests' environment).
set -u
: "${TRAC:?}" "${MPIRUN:=mpirun}" "${PYTHON:=/usr/bin/python3}" "${srcdir:=.}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# quiet Open MPI's warnings about this sandbox's network interfaces
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
TOP=$(cd "$srcdir" && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/trac-test.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || exit 1
# Open MPI's session directory in this test's own folder: tests run side
# by side (make -j2 check) otherwise race to create /tmp/ompi.HOST.UID
export OMPI_MCA_orte_tmpdir_base="$TMP"
# a trac with no model file (an installed one, or --machine host) never
# measures the machine in a test (its plans would depend on the timing), and
# its cache is the test's own (tests/e2e/install.sh checks the calibration)
export TRAC_CALIBRATE=0 XDG_CACHE_HOME="$TMP/cache"
FAILS=0 SKIPS=0

fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
pass() { echo "ok: $*"; }

# skip WHAT: a check this machine cannot run, for a tool it lacks.  The
# one rule for every test: CI installs every tool a test uses
# (.ci/packages), so under CI=true a skip is a failure (a check that skips
# in CI never runs); elsewhere it says so, and the test ends SKIP (status
# 77) rather than PASS unless something failed.
skip() {
	if [ "${CI:-}" = true ]; then
		fail "$* (cannot run, and CI=true: a check CI skips never runs; .ci/packages lists what it needs)"
	else
		echo "skip: $*"
		SKIPS=$((SKIPS + 1))
	fi
}

# run NP PROGRAM ARGS...: the program under mpirun on NP ranks
run() {
	np=$1; shift
	"$MPIRUN" -np "$np" "$@"
}

# mpi_noise FILE: FILE without the lines libevent inside Open MPI may print
# as ranks tear down under load ("[warn] Epoll MOD(1) on fd N failed"):
# not the program's output
mpi_noise() {
	grep -v '^\[warn\] Epoll ' "$1" >"$1.mine"
	mv "$1.mine" "$1"
}

finish() {
	if [ "$FAILS" -ne 0 ]; then
		echo "$FAILS failure(s)"
		exit 1
	fi
	if [ "$SKIPS" -ne 0 ]; then
		echo "$SKIPS check(s) skipped: SKIP"
		exit 77
	fi
	exit 0
}
