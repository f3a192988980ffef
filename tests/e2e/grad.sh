#!/bin/sh
# grad(loss, W) against central finite differences (tests/e2e/grad.py).
: "${PYTHON:=/usr/bin/python3}" "${srcdir:=.}"
exec "$PYTHON" "$srcdir/tests/e2e/grad.py" "$@"
