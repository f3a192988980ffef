#!/bin/sh
# Every construct of the language against numpy on 1, 2 and 4 ranks
# (tests/e2e/language.py holds the cases).
: "${PYTHON:=/usr/bin/python3}" "${srcdir:=.}"
exec "$PYTHON" "$srcdir/tests/e2e/language.py" "$@"
