#!/bin/sh
# A trac-compiled program given bad inputs: one line naming the tensor, the
# file, what was expected and what was found; exit status 1 on 1 and 3 ranks;
# nothing left at the output path.  One row per case:
#   NAME | ARGUMENTS | the line expected on stderr
. "$srcdir/tests/e2e/lib.sh"

"$TRAC" -D I=6 -D K=5 -D J=4 "$TOP/examples/matmul.tra" -o mm || { fail "trac"; finish; }
"$PYTHON" - <<'PY' || exit 1
import numpy as np
np.save("a.npy", np.ones((6, 5), np.float32))
np.save("b.npy", np.ones((5, 4), np.float32))
np.save("a64.npy", np.ones((6, 5), np.float64))
np.save("at.npy", np.ones((5, 6), np.float32))
np.save("fortran.npy", np.asfortranarray(np.ones((6, 5), np.float32)))
np.save("big.npy", np.ones((6, 5), ">f4"))
with open("a.npy", "rb") as f:
    data = f.read()
with open("short.npy", "wb") as f:
    f.write(data[:-7])
with open("text.npy", "w") as f:
    f.write("not an array\n")
PY
mkdir adir

cases='missing file|A=nope.npy B=b.npy C=c.npy|mm: input A (nope.npy): No such file or directory
wrong dtype|A=a64.npy B=b.npy C=c.npy|mm: input A (a64.npy): dtype <f4 expected, found <f8
wrong shape|A=at.npy B=b.npy C=c.npy|mm: input A (at.npy): shape (6, 5) expected, found (5, 6)
fortran order|A=fortran.npy B=b.npy C=c.npy|mm: input A (fortran.npy): Fortran order not supported; save the array in C order
big endian|A=big.npy B=b.npy C=c.npy|mm: input A (big.npy): big-endian data not supported; expected <f4, found >f4
truncated|A=short.npy B=b.npy C=c.npy|mm: input A (short.npy): file is truncated: 120 bytes of data expected, 113 found
not npy|A=text.npy B=b.npy C=c.npy|mm: input A (text.npy): not a .npy file
directory|A=adir B=b.npy C=c.npy|mm: input A (adir): is a directory
named twice|A=a.npy A=a.npy B=b.npy C=c.npy|mm: tensor A given twice ('"'"'A=a.npy'"'"' and '"'"'A=a.npy'"'"')
unknown name|A=a.npy B=b.npy Z=z.npy C=c.npy|mm: unknown tensor '"'"'Z'"'"' in '"'"'Z=z.npy'"'"' (tensors: C A B)
no input|B=b.npy C=c.npy|mm: input A: no file given (add A=path.npy; see --help)
output folder|A=a.npy B=b.npy C=nodir/c.npy|mm: output C (nodir/c.npy): No such file or directory'

echo "$cases" | while IFS='|' read -r name args want; do
	for np in 0 1 3; do
		rm -f c.npy
		if [ $np = 0 ]; then
			timeout 60 ./mm $args </dev/null >out 2>err
		else
			timeout 60 "$MPIRUN" -q -np $np ./mm $args </dev/null >out 2>err
		fi
		status=$?
		if [ $status != 1 ]; then
			echo "FAIL: $name on $np ranks: exit status $status, expected 1"; cat err; echo x >>failed
		elif [ "$(cat err)" != "$want" ]; then
			echo "FAIL: $name on $np ranks: stderr"; cat err; echo "expected: $want"; echo x >>failed
		elif [ -e c.npy ]; then
			echo "FAIL: $name on $np ranks: an output was written"; echo x >>failed
		else
			echo "ok: $name on $np ranks"
		fi
	done
done
[ -f failed ] && FAILS=$(wc -l <failed)
finish
