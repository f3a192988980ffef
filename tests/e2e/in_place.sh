#!/bin/sh
# Elementwise ops made in place (ir/ia.c, ia_elementwise_in_place): a join
# or map whose input dies at it writes its output into that input's chunks
# (TrtJoin.inplace, trt_map_in_place).  Checked: the emitted C makes the
# chain exp(T / s) * X and the update's product in place, never a param's
# load (its chunks are the param's value); the weights after three steps on
# 1, 2 and 3 ranks against numpy; and a run of the same program with the
# param's value printed each step (a load read again after the update).
. "$srcdir/tests/e2e/lib.sh"

cat >prog.tra <<'TRA'
size N = 1000, M = 300;
input X[N, M];
input B[M];
param W[N, M] = ones;
repeat 3 {
    T[i, j] = W[i, j] * X[i, j] + B[j];
    s[i] = sum[j](T[i, j]);
    U[i, j] = exp(T[i, j] / s[i]) * X[i, j];
    W[i, j] -= 0.5 * U[i, j];
    print W;
}
output W;
TRA
"$TRAC" -P 1,2,3 prog.tra -o prog || { fail "trac prog.tra"; finish; }
"$TRAC" -P 2 -S prog.tra -o prog.c || { fail "trac -S prog.tra"; finish; }
# the loads of W, and every join or map made in place, with its inputs
loads=$(sed -n 's/^\tTrtRel \*\(r[0-9]*\) = var[0-9]*;$/\1/p' prog.c | sort -u)
[ -n "$loads" ] || fail "no load of W in the emitted C"
grep -q "trt_map_in_place\|\.inplace = " prog.c && pass "the emitted C makes some ops in place" ||
	fail "the emitted C makes no op in place"
bad=0
for r in $loads; do
	# a join in place of its left (1) or right (2): that side must not be a load
	awk -v r="$r" '/static const TrtJoin join[0-9]+ = .*\.inplace = [12]/ { side = $NF; sub(/};/, "", side); next }
		side && /trt_join\(/ { split($0, a, /[(,]/); if ((side == 1 && a[2] == r) || (side == 2 && a[3] ~ " " r "$")) bad = 1; side = 0 }
		/trt_map_in_place\(/ { split($0, a, /[(,]/); if (a[2] == r) bad = 1 }
		END { exit bad }' prog.c || bad=1
done
[ $bad = 0 ] && pass "no op is made in place of a param's load" || fail "an op is made in place of a param's load"

"$PYTHON" - <<'PY' || fail "writing the inputs"
import numpy as np
r = np.random.default_rng(3)
np.save("X.npy", r.random((1000, 300), dtype=np.float32))
np.save("B.npy", r.random(300, dtype=np.float32))
PY
for n in 1 2 3; do
	run $n ./prog X=X.npy B=B.npy W.out=W$n.npy >out$n 2>&1 || { fail "the run on $n ranks"; cat out$n; continue; }
	"$PYTHON" - "$n" <<'PY' && pass "W after 3 steps on $n ranks is numpy's" || fail "W after 3 steps on $n ranks differs from numpy's"
import sys
import numpy as np
X = np.load("X.npy").astype(np.float64); B = np.load("B.npy").astype(np.float64)
W = np.ones_like(X)
for _ in range(3):
    T = W * X + B
    s = T.sum(1, keepdims=True)
    W = W - 0.5 * np.exp(T / s) * X
got = np.load("W%s.npy" % sys.argv[1])
sys.exit(0 if np.allclose(got, W, rtol=1e-4, atol=1e-5) else 1)
PY
done
finish
