#!/bin/sh
# One executable for every rank count, at scale: examples compiled once
# (small sizes that no block divides, the default plans: 1-8 ranks and the
# powers of two to 1024) run on 1, 2, 3, 4, 8 and 16 ranks (oversubscribed)
# and on 4 over TCP (as between machines), each run under the plan made for
# its rank count (--profile says which), every result the same up to
# rounding, and the first right against numpy
# (where the example has a numpy reference).  Then the fallback (a count
# with no plan of its own: the largest planned count below it, and a notice)
# and a checkpoint written on 2 ranks resumed on 4.
. "$srcdir/tests/e2e/lib.sh"
: "${MAKE:=make}"
unset MAKEFLAGS MFLAGS MAKELEVEL

mkdir ex
cp "$TOP/examples/Makefile" "$TOP/examples/"*.tra "$TOP/examples/"*.py ex/
# each example and its small sizes
examples="matmul mttkrp attention ffnn gcn_sparse logreg"
flags() {
	case $1 in
	matmul) echo "-D I=37 -D K=29 -D J=41" ;;
	mttkrp) echo "-D I=13 -D J=11 -D K=9 -D R=5" ;;
	attention) echo "-D T=37 -D D=19 -D E=7" ;;
	ffnn) echo "-D N=53 -D D=23 -D H=17 -D L=5" ;;
	gcn_sparse) echo "-D V=61 -D F=13 -D H=9 -D C=3" ;;
	logreg) echo "-D N=101 -D D=7" ;;
	esac
}
counts="1 2 3 4 8 16"

# compile once, make the data; the outputs of each run in NAME.np/
for e in $examples; do
	if ! $MAKE -C ex --no-print-directory O=b TRAC="$TRAC" PYTHON="$PYTHON" TRACFLAGS= \
		"${e}_FLAGS=$(flags $e)" "b/$e.in/stamp" >make-$e.log 2>&1; then
		cat make-$e.log
		fail "$e: compiling and making its data"
		continue
	fi
	args=$(awk -v e=$e '$2 == "input" { print $1 "=ex/b/" e ".in/" $1 ".npy" }' ex/b/$e.tensors)
	outs=$(awk '$2 == "output" { print $1 }' ex/b/$e.tensors)
	for np in $counts tcp; do
		n=$np
		mca=
		[ $np = tcp ] && n=4 mca="--mca btl self,tcp --mca btl_tcp_if_include lo"
		mkdir -p $e.$np
		oargs=
		for o in $outs; do oargs="$oargs $o=$e.$np/$o.npy"; done
		# shellcheck disable=SC2086
		if ! "$MPIRUN" $mca -np $n ex/b/$e $args $oargs --quiet --profile >$e.$np/log 2>&1; then
			cat $e.$np/log
			fail "$e on $np ranks"
			continue
		fi
		grep -q "^summary: ranks=$n planned_ranks=$n " $e.$np/log ||
			fail "$e on $np ranks: not the plan for $n ($(grep '^summary' $e.$np/log))"
		grep -q "no plan for" $e.$np/log && fail "$e on $np ranks: a fallback notice"
	done
	# the 1-rank run against numpy (example.py reads ex/b/NAME.out/); the
	# training examples' own checks (accuracy) need their full sizes
	grep -q '^def reference' ex/$e.py || continue
	mkdir -p ex/b/$e.out && cp $e.1/*.npy ex/b/$e.out/
	"$PYTHON" ex/example.py check $e ex/b >check-$e.log 2>&1 || { cat check-$e.log; fail "$e: against numpy"; }
done

# every run the same as the 1-rank run, up to rounding
if "$PYTHON" - $examples <<EOF
import glob, os, sys
import numpy as np
bad = 0
for e in sys.argv[1:]:
    for f in sorted(glob.glob(e + ".1/*.npy")):
        ref = np.load(f).astype(np.float64)
        scale = max(np.abs(ref).max(), 1e-30)
        for np_ in "$counts tcp".split()[1:]:
            g = os.path.join(e + "." + np_, os.path.basename(f))
            if not os.path.exists(g):
                print("%s: no %s" % (e, g)); bad += 1; continue
            err = np.abs(np.load(g).astype(np.float64) - ref).max() / scale
            if not err <= 1e-4:
                print("%s: %s on %s ranks differs from 1 rank's by %.3g" % (e, os.path.basename(f), np_, err)); bad += 1
sys.exit(1 if bad else 0)
EOF
then
	pass "$(echo $examples): compiled once, run under its own plan on $(echo $counts) ranks and over TCP, the same results"
else
	fail "results differ across rank counts"
fi

# a count with no plan: the plan for the largest count below it, said once
"$TRAC" -P 1,2,4 $(flags matmul) ex/matmul.tra -o mm124 || fail "trac -P 1,2,4"
args=$(awk '$2 == "input" { print $1 "=ex/b/matmul.in/" $1 ".npy" }' ex/b/matmul.tensors)
# shellcheck disable=SC2086
if run 3 ./mm124 $args C=c3.npy --profile >fb.log 2>&1 &&
	[ "$(grep -c 'mm124: no plan for 3 ranks (plans for 1,2,4): running the plan for 2 on all 3' fb.log)" = 1 ] &&
	grep -q '^summary: ranks=3 planned_ranks=2 ' fb.log &&
	"$PYTHON" -c "
import numpy as np, sys
sys.exit(0 if np.allclose(np.load('c3.npy'), np.load('matmul.1/C.npy'), rtol=1e-4, atol=1e-5) else 1)"; then
	pass "3 ranks, plans for 1, 2 and 4: the plan for 2, a notice, the same result"
else
	cat fb.log
	fail "the fallback on 3 ranks"
fi

# a checkpoint written on 2 ranks resumes on 4: ck0 is ck without its
# second block (the same tensors), so its checkpoint is after the first
# block, and ck resumed from it runs the second on 4 ranks
cat >ck.tra <<'EOF'
size N = 37, D = 7, H = 5, T = 6;
input X[N, D];
input Y[N];
param W[D, H] = normal(0, 0.3);
param v[H] = uniform(-0.5, 0.5);
repeat 5 {
    p[n] = tanh(X[n, d] * W[d, h]) * v[h];
    loss = sum[n]((p[n] - Y[n]) * (p[n] - Y[n])) / N;
    dW = grad(loss, W);
    dv = grad(loss, v);
    W[d, h] -= 0.05 * dW[d, h];
    v[h] -= 0.05 * dv[h];
}
repeat T {
    q[n] = tanh(X[n, d] * W[d, h]) * v[h];
    loss2 = sum[n]((q[n] - Y[n]) * (q[n] - Y[n])) / N;
    dW2 = grad(loss2, W);
    dv2 = grad(loss2, v);
    W[d, h] -= 0.05 * dW2[d, h];
    v[h] -= 0.05 * dv2[h];
}
output W; output v;
EOF
awk '/^repeat T/ { skip = 1 } !skip { print } skip && /^}/ { skip = 0 }' ck.tra >ck0.tra
"$PYTHON" -c "
import numpy as np
r = np.random.default_rng(1)
np.save('X.npy', r.uniform(-1, 1, (37, 7)).astype('f4')); np.save('Y.npy', r.uniform(-1, 1, 37).astype('f4'))"
if "$TRAC" -P 2,4 ck.tra -o ck && "$TRAC" -P 2,4 ck0.tra -o ck0 &&
	run 2 ./ck X=X.npy Y=Y.npy W.out=W.whole.npy v.out=v.whole.npy --quiet &&
	run 2 ./ck0 X=X.npy Y=Y.npy W.out=W.half.npy v.out=v.half.npy --quiet --checkpoint ck.bin &&
	run 4 ./ck X=X.npy Y=Y.npy W.out=W.res.npy v.out=v.res.npy --resume ck.bin >res.log 2>&1 &&
	grep -q 'resumed from ck.bin after iteration 5 of 5 (written on 2 ranks)' res.log &&
	"$PYTHON" -c "
import numpy as np, sys
ok = all(np.allclose(np.load(t + '.res.npy'), np.load(t + '.whole.npy'), rtol=1e-4, atol=1e-6) and
         not np.allclose(np.load(t + '.half.npy'), np.load(t + '.whole.npy'), rtol=1e-4, atol=1e-6) for t in 'Wv')
sys.exit(0 if ok else 1)"; then
	pass "a checkpoint written on 2 ranks resumes on 4, the plan for 4, the same result"
else
	cat res.log 2>/dev/null
	fail "a checkpoint from 2 ranks resumed on 4"
fi
finish
