#!/bin/sh
# A training curve (issue 31, item 5): a param written element by element
# at the loop counters' positions, an output like any param, against
# numpy; and, being a param, it is in every checkpoint, so a run resumed
# from one has the whole curve, the epochs before the checkpoint included.
. "$srcdir/tests/e2e/lib.sh"

cat >curve.tra <<'TRA'
size N = 7, D = 3, E = 5, NB = 2, B = 4;
input X[N, D];
input T[N];
param W[D] = zeros;
param losses[E, NB] = zeros;
repeat e in E {
    repeat b in NB {                    # the last batch runs past X: zeros
        Xb[n in B, d] = X[b*B + n, d];
        Tb[n in B] = T[b*B + n];
        R[n] = Xb[n, d] * W[d] - Tb[n];
        loss = sum[n](R[n] * R[n]) / B;
        losses[e, b] = loss;
        dW = grad(loss, W);
        W[d] -= 0.1 * dW[d];
    }
}
output W; output losses;
TRA
"$PYTHON" - <<'PY' || exit 1
import numpy as np
r = np.random.default_rng(3)
X, T = r.standard_normal((7, 3)).astype(np.float32), r.standard_normal(7).astype(np.float32)
np.save("x.npy", X); np.save("t.npy", T)
Xp, Tp = np.zeros((8, 3)), np.zeros(8)
Xp[:7], Tp[:7] = X, T
W, L = np.zeros(3), np.zeros((5, 2))
for e in range(5):
    for b in range(2):
        Xb, Tb = Xp[b * 4:b * 4 + 4], Tp[b * 4:b * 4 + 4]
        R = Xb @ W - Tb
        L[e, b] = (R * R).sum() / 4
        W -= 0.1 * 2 * Xb.T @ R / 4
np.save("want.npy", L)
PY
"$TRAC" --block 2 curve.tra -o curve || { fail "trac curve.tra"; finish; }

for np in 1 2 3; do
	run $np ./curve X=x.npy T=t.npy losses.out=l$np.npy W.out=w$np.npy >out 2>err || { fail "$np ranks: exit $?"; cat err; continue; }
	"$PYTHON" -c 'import numpy as np, sys
got, want = np.load(sys.argv[1]), np.load("want.npy")
sys.exit(0 if got.shape == (5, 2) and np.allclose(got, want, rtol=2e-5, atol=1e-6) else "%s\n%s" % (got, want))' l$np.npy &&
		pass "the curve on $np rank(s) is numpy's" || fail "the curve on $np rank(s)"
done

# checkpoints after epochs 2 and 4, then a run resumed from the last: only
# epoch 5 runs, and the curve still has every epoch
run 2 ./curve X=x.npy T=t.npy losses.out=c.npy W.out=cw.npy --checkpoint ck --checkpoint-every 2 >out 2>err ||
	{ fail "checkpointed run: exit $?"; cat err; }
for np in 2 3; do
	run $np ./curve X=x.npy T=t.npy losses.out=r$np.npy W.out=rw$np.npy --resume ck >out 2>err ||
		{ fail "resume on $np ranks: exit $?"; cat err; continue; }
	grep -q "^resumed from ck after iteration 4 of 5" out || { fail "resume on $np ranks: no resume message"; cat out; }
	if [ $np = 2 ]; then
		cmp -s r2.npy l2.npy && cmp -s rw2.npy w2.npy &&
			pass "resumed on 2 ranks: the curve and W bit for bit the uninterrupted run's" ||
			fail "resumed on 2 ranks: outputs differ from the uninterrupted run's"
	else
		"$PYTHON" -c 'import numpy as np, sys
sys.exit(0 if np.allclose(np.load("r3.npy"), np.load("want.npy"), rtol=2e-5, atol=1e-6) else 1)' &&
			pass "resumed on 3 ranks: the whole curve" || fail "resumed on 3 ranks: the curve"
	fi
done
finish
