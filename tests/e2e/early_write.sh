#!/bin/sh
# An output written early (trt_write_early): a join whose result only the
# write after it reads writes its chunks into the output's temporary file as
# it computes them (rank 0's, whole in the file; the last in two row
# panels).  Checked: codegen marks such a join and no other; the file is
# the unstreamed program's bit for bit and numpy's product to rounding, on
# 1 and 2 ranks, one chunk or several; a run killed in the middle of the
# product leaves the previous file, and with SIGTERM no temporary.
. "$srcdir/tests/e2e/lib.sh"

cat >mm.tra <<'EOF'
size N = 1200;
input A[N, N];
input B[N, N];
C[i, j] = A[i, k] * B[k, j];
output C;
EOF
# the same product, read again after it is written: not written early
cat >mm2.tra <<'EOF'
size N = 1200;
input A[N, N];
input B[N, N];
C[i, j] = A[i, k] * B[k, j];
r[i] = C[i, j];
output C;
output r;
EOF
"$PYTHON" -c '
import numpy as np
g = np.random.default_rng(7)
np.save("A.npy", g.uniform(-1, 1, (1200, 1200)).astype(np.float32))
np.save("B.npy", g.uniform(-1, 1, (1200, 1200)).astype(np.float32))
' || exit 1

"$TRAC" -P 1,2 -S mm.tra -o mm.c || fail "trac -S mm.tra"
"$TRAC" -P 1,2 -S mm2.tra -o mm2.c || fail "trac -S mm2.tra"
if grep -q 'trt_write_early(' mm.c && ! grep -q 'trt_write_early(' mm2.c; then
	pass "codegen writes early the product only the write reads, not the one read again"
else
	fail "trt_write_early: $(grep -c 'trt_write_early(' mm.c) in mm.c, $(grep -c 'trt_write_early(' mm2.c) in mm2.c"
fi

# same (streamed) against mm2 (not), and both against numpy
check() {       # check WHAT NP FLAGS...
	what=$1 np=$2; shift 2
	"$TRAC" -P "$np" "$@" mm.tra -o mm || { fail "$what: trac mm.tra"; return; }
	"$TRAC" -P "$np" "$@" mm2.tra -o mm2 || { fail "$what: trac mm2.tra"; return; }
	rm -f C.npy C2.npy
	run "$np" ./mm A=A.npy B=B.npy C=C.npy >out 2>err || { fail "$what: mm: $(cat err)"; return; }
	run "$np" ./mm2 A=A.npy B=B.npy C=C2.npy r=r.npy >out 2>err || { fail "$what: mm2: $(cat err)"; return; }
	if ! cmp -s C.npy C2.npy; then
		fail "$what: written early, C differs from the program that reads it again"
	elif ls -a | grep -q '^\.C'; then
		fail "$what: a temporary is left: $(ls -a | grep '^\.C')"
	elif "$PYTHON" -c '
import numpy as np
a, b, c = (np.load(f) for f in ("A.npy", "B.npy", "C.npy"))
want = a.astype(np.float64) @ b.astype(np.float64)
assert c.dtype == np.float32 and c.shape == want.shape
assert np.abs(c - want).max() <= 1e-5 * np.abs(a).max() * np.abs(b).max() * 1200, np.abs(c - want).max()
'; then
		pass "$what: C written early is the unstreamed C bit for bit, numpy's product to rounding"
	else
		fail "$what: C is not numpy's product"
	fi
}
check "1 rank, one chunk" 1
check "1 rank, chunks of 600 rows" 1 --block C=600x1200
check "2 ranks" 2
check "2 ranks, chunks of 300 rows" 2 --block C=300x1200

# killed in the middle of the product: the temporary is made before it
cat >big.tra <<'EOF'
size N = 4000;
param A[N, N] = uniform(-1, 1);
param B[N, N] = uniform(-1, 1);
C[i, j] = A[i, k] * B[k, j];
output C;
EOF
"$TRAC" -P 1 big.tra -o big || fail "trac big.tra"
"$PYTHON" -c 'import numpy as np; np.save("C.npy", np.zeros(3, np.float32))' || exit 1
cp C.npy previous.npy
has_temp() { ls -a | grep -q '^\.C\.npy\.'; }
for sig in KILL TERM; do
	"$MPIRUN" -np 1 ./big C=C.npy >out 2>err &
	job=$!
	n=0
	while ! has_temp && [ $n -lt 400 ]; do sleep 0.05; n=$((n + 1)); done
	sleep 0.2
	if ! kill -s $sig $(pgrep -P $job -x big) 2>/dev/null; then
		fail "SIG$sig: the run ended before the kill"
		wait $job
		continue
	fi
	wait $job
	if ! cmp -s C.npy previous.npy; then
		fail "SIG$sig in the product: the previous output was changed"
	elif [ $sig = TERM ] && has_temp; then
		fail "SIGTERM in the product: a temporary is left: $(ls -a | grep '^\.C')"
	else
		pass "SIG$sig in the product: the previous output is intact$([ $sig = TERM ] && echo ', no temporary left')"
	fi
	rm -f .C.npy.*
done
finish
