#!/bin/sh
# IST loops (issue 15): `repeat b in NB split H1, H2 every J` compiled once
# for 1 to 4 ranks; on 1 rank byte for byte the ordinary loop, on 2 to 4 the
# splits (a fresh partition each round, the same on every rank), the bytes
# each exchange sent and the trained params against a numpy
# reimplementation of the thesis's Algorithms 1 and 2 (tests/e2e/ist.py).
. "${srcdir:-.}/tests/e2e/lib.sh"

if out=$("$PYTHON" "$TOP/tests/e2e/ist.py" 2>&1); then
	pass "IST loops on 1 to 4 ranks against numpy"
else
	fail "IST loops on 1 to 4 ranks against numpy"
fi
echo "$out"
finish
