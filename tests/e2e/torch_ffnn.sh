#!/bin/sh
# The FFNN training step against PyTorch autograd (tests/e2e/torch_ffnn.py);
# without torch, lib.sh's skip (a failure under CI=true).
. "$srcdir/tests/e2e/lib.sh"
if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
	skip "the FFNN against PyTorch autograd (no torch in $PYTHON; Debian: python3-torch)"
	finish
fi
"$PYTHON" "$TOP/tests/e2e/torch_ffnn.py" "$@" || fail "tests/e2e/torch_ffnn.py exited $?"
finish
