#!/bin/sh
# Gathers (E[idx[b], d]) and their gradients against numpy and PyTorch on
# 1 to 4 ranks, each looked up and replicated (tests/e2e/gather.py).
: "${PYTHON:=/usr/bin/python3}" "${srcdir:=.}"
exec "$PYTHON" "$srcdir/tests/e2e/gather.py" "$@"
