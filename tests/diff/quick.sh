#!/bin/sh
# A short seeded run of the differential tests (issue 34): the same random
# programs every time (up to 240, 40 to a compile), compiled at -O0, -O1 and -O2, run on
# 1, 2 and 3 ranks and through the IA interpreter; at most about 3 minutes
# (it stops early on a slow machine).  The long run is `make difftest`.
: "${PYTHON:=/usr/bin/python3}" "${srcdir:=.}" "${top_builddir:=.}"
INTERP_RUN="$top_builddir/tests/diff/interp_run"; export INTERP_RUN
# the C compiler at -O1: a third of the time of trac's -O3 on these many
# small kernels; `make difftest` compiles as trac does by default
: "${DIFF_CFLAGS=-O1 -fno-math-errno}"; export DIFF_CFLAGS
F=$(mktemp -d "${TMPDIR:-/tmp}/trac-diff-quick.XXXXXX") || exit 1
trap 'rm -rf "$F"' EXIT
"$PYTHON" "$srcdir/tests/diff/difftest.py" --programs 240 --seconds 150 --group 40 --seed 34 \
	--no-reduce --findings "$F" --report "$F/report.txt"
st=$?
for f in "$F"/*.tra; do
	[ -f "$f" ] && { echo "--- $f"; cat "$f"; }
done
exit $st
