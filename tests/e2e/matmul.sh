#!/bin/sh
# End to end: examples/matmul.tra compiled at -O0 and -O2, f32 and f64,
# extents that do not divide by the chunk size, run on 1, 2, 3 and 4 ranks
# and compared with numpy (max relative error 1e-5 for f32, 1e-12 for f64).
. "$srcdir/tests/e2e/lib.sh"

"$PYTHON" - <<'PY' || exit 1
import numpy as np
r = np.random.default_rng(1)
for t in ("f4", "f8"):
    np.save("a_%s.npy" % t, r.standard_normal((1000, 700)).astype(t))
    np.save("b_%s.npy" % t, r.standard_normal((700, 300)).astype(t))
PY
sed 's/^input A\[I, K\];/input A[I, K] : f64;/; s/^input B\[K, J\];/input B[K, J] : f64;/' \
	"$TOP/examples/matmul.tra" >matmul64.tra
grep -q 'f64' matmul64.tra || { fail "could not make the f64 variant"; finish; }

check() {   # check NAME DTYPE TOL
	"$PYTHON" - "$@" <<'PY'
import sys, numpy as np
name, t, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
a = np.load("a_%s.npy" % t).astype(np.float64)
b = np.load("b_%s.npy" % t).astype(np.float64)
c = np.load("c.npy")
assert c.dtype == np.dtype(t), "dtype %s, expected %s" % (c.dtype, t)
assert c.shape == (1000, 300), "shape %s" % (c.shape,)
ref = a @ b
err = np.abs(c - ref).max() / np.abs(ref).max()
print("%s: max relative error %.3g" % (name, err))
sys.exit(0 if err <= tol else 1)
PY
}

for variant in "f4 $TOP/examples/matmul.tra 1e-5" "f8 matmul64.tra 1e-12"; do
	set -- $variant
	t=$1 src=$2 tol=$3
	for flags in "-O2" "-O0 --block 128" "-O2 --block 96"; do
		if ! "$TRAC" $flags -D I=1000 -D K=700 -D J=300 "$src" -o mm; then
			fail "trac $flags $src"
			continue
		fi
		for np in 1 2 3 4; do
			rm -f c.npy
			if ! run $np ./mm A=a_$t.npy B=b_$t.npy C=c.npy; then
				fail "$t $flags on $np ranks: the program failed"
			elif ! check "$t $flags np=$np" $t $tol; then
				fail "$t $flags on $np ranks: wrong result"
			fi
		done
	done
done

# the executable runs as a single rank without mpirun
rm -f c.npy
"$TRAC" -D I=1000 -D K=700 -D J=300 "$TOP/examples/matmul.tra" -o mm &&
	./mm A=a_f4.npy B=b_f4.npy C=c.npy && check "without mpirun" f4 1e-5 || fail "without mpirun"
finish
