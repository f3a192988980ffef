#!/bin/sh
# The FFNN training step against PyTorch autograd (tests/e2e/torch_ffnn.py).
: "${PYTHON:=/usr/bin/python3}" "${srcdir:=.}"
exec "$PYTHON" "$srcdir/tests/e2e/torch_ffnn.py" "$@"
