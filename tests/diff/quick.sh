#!/bin/sh
# A short seeded run of the differential tests (issue 34): seed 34's first
# 320 programs (321: nine compiled groups, 40 programs to a compile, one a
# program that must fail), compiled at -O0, -O1 and -O2, run on 1, 2 and 3
# ranks and through the IA interpreter.  The same programs every time, on
# every machine, however fast: no time budget (one made a fast CI machine
# test programs a slower local run never reached).  About 3 minutes on an
# idle 2-core machine (2 min 55 s of CPU; 9 minutes of wall time on the
# development machine shared at load 8).  Each compile and run has its own
# time limit (difftest.py).  The long run is `make difftest`.
: "${PYTHON:=/usr/bin/python3}" "${srcdir:=.}" "${top_builddir:=.}"
INTERP_RUN="$top_builddir/tests/diff/interp_run"; export INTERP_RUN
# the C compiler at -O1: a third of the time of trac's -O3 on these many
# small kernels; `make difftest` compiles as trac does by default
: "${DIFF_CFLAGS=-O1 -fno-math-errno}"; export DIFF_CFLAGS
F=$(mktemp -d "${TMPDIR:-/tmp}/trac-diff-quick.XXXXXX") || exit 1
trap 'rm -rf "$F"' EXIT
"$PYTHON" "$srcdir/tests/diff/difftest.py" --programs 320 --group 40 --seed 34 \
	--no-reduce --findings "$F" --report "$F/report.txt"
st=$?
for f in "$F"/*.tra; do
	[ -f "$f" ] && { echo "--- $f"; cat "$f"; }
done
exit $st
