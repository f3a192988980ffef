#!/bin/sh
# demo.sh: compile examples/matmul.tra, show its plan, run it under
# `mpirun -np 2` on random inputs and check the result against numpy.
# Run by `make demo` from the build folder.
set -eu
: "${TRAC:=./trac}" "${PYTHON:=/usr/bin/python3}" "${MPIRUN:=mpirun}" "${srcdir:=.}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=demo-matmul
mkdir -p "$dir"
sizes="-D I=2000 -D K=1500 -D J=1000"

echo "== trac --explain (2 ranks): the plan"
"$TRAC" $sizes -P 2 --explain "$srcdir/examples/matmul.tra" | sed -n '1p;/^statement/,$p'
echo
echo "== compiling"
"$TRAC" $sizes -P 2 "$srcdir/examples/matmul.tra" -o "$dir/matmul"
echo "$TRAC $sizes -P 2 $srcdir/examples/matmul.tra -o $dir/matmul"
"$PYTHON" -c "
import numpy as np
r = np.random.default_rng(0)
np.save('$dir/a.npy', r.standard_normal((2000, 1500)).astype(np.float32))
np.save('$dir/b.npy', r.standard_normal((1500, 1000)).astype(np.float32))"
echo
echo "== running on 2 ranks"
cd "$dir"
rm -f c.npy
"$MPIRUN" -np 2 ./matmul A=a.npy B=b.npy C=c.npy --profile
echo
echo "== checking against numpy"
"$PYTHON" -c "
import numpy as np
a = np.load('a.npy').astype(np.float64); b = np.load('b.npy').astype(np.float64)
c = np.load('c.npy'); ref = a @ b
err = np.abs(c - ref).max() / np.abs(ref).max()
print('C = A B: shape %s, max relative error %.2e vs numpy: %s' % (c.shape, err, 'OK' if err < 1e-5 else 'WRONG'))
raise SystemExit(0 if err < 1e-5 else 1)"
