#!/bin/sh
# The programs the differential tests found bugs with (tests/diff/regress/),
# each at -O0, -O1 and -O2 on 1, 2 and 3 ranks and through the IA
# interpreter: every run must agree.  A known failure ('#@ xfail' in its
# file) is reported as XFAIL, and as a failure once it passes.
: "${PYTHON:=/usr/bin/python3}" "${srcdir:=.}" "${top_builddir:=.}"
INTERP_RUN="$top_builddir/tests/diff/interp_run"; export INTERP_RUN
exec "$PYTHON" "$srcdir/tests/diff/difftest.py" --replay "$srcdir"/tests/diff/regress/*.tra
