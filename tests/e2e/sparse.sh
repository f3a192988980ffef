#!/bin/sh
# Sparse inputs against scipy and PyTorch on 1 to 4 ranks
# (tests/e2e/sparse.py holds the cases).
: "${PYTHON:=/usr/bin/python3}" "${srcdir:=.}"
exec "$PYTHON" "$srcdir/tests/e2e/sparse.py" "$@"
