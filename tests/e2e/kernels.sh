#!/bin/sh
# The block kernels codegen emits (BLIS gemm on strided views, tiled
# reducing loops) against numpy.einsum on 1, 2 and 3 ranks
# (tests/e2e/kernels.py holds the cases).
: "${PYTHON:=/usr/bin/python3}" "${srcdir:=.}"
exec "$PYTHON" "$srcdir/tests/e2e/kernels.py" "$@"
