#!/bin/sh
# --trace=FILE, a timeline in Chrome's trace format: the matmul example
# (planned for 2 ranks: join, shuffle, aggregation; for 4: a two-phase
# schedule), a small training loop with --checkpoint and one of gathers
# (looked up, their gradients scatter-adds), on 1, 2 and 4
# ranks with --profile beside it; tests/e2e/trace.py checks each file (one
# process per rank, spans nested, ops in order, the bytes of the send spans
# what --profile measured).  Then --trace FILE spelt apart, a full buffer
# (TRAC_TRACE_EVENTS), and the errors: a folder that does not exist, a
# folder for FILE, no FILE.
. "$srcdir/tests/e2e/lib.sh"
CHECK=$TOP/tests/e2e/trace.py

"$PYTHON" - <<'PY' || exit 1
import numpy as np
r = np.random.default_rng(5)
np.save("a.npy", r.standard_normal((300, 200)).astype("f4"))
np.save("b.npy", r.standard_normal((200, 250)).astype("f4"))
np.save("x.npy", r.standard_normal((50, 7)).astype("f4"))
np.save("y.npy", r.standard_normal(50).astype("f4"))
np.save("e.npy", r.standard_normal((13, 5)).astype("f4"))
np.save("idx.npy", r.integers(0, 13, 7))
PY
cat >gath.tra <<'EOF'
size V = 13, D = 5, B = 7;
input idx[B] : i64;
input E0[V, D];
param E[V, D] = zeros;
E[v, d] = E0[v, d];
repeat 2 {
    Z[b, d] = E[idx[b], d];
    loss = sum[b, d](Z[b, d] * Z[b, d]);
    dE = grad(loss, E);
    E[v, d] -= 0.1 * dE[v, d];
}
output E;
EOF
cat >train.tra <<'EOF'
size N = 50, D = 7, H = 5;
input X[N, D];
input Y[N];
param W[D, H] = normal(0, 0.3);
param v[H] = uniform(-0.5, 0.5);
repeat 3 {
    Z[n, h] = tanh(X[n, d] * W[d, h]);
    p[n] = Z[n, h] * v[h];
    loss = sum[n]((p[n] - Y[n]) * (p[n] - Y[n])) / N;
    print loss;
    dW = grad(loss, W);
    dv = grad(loss, v);
    W[d, h] -= 0.01 * dW[d, h];
    v[h] -= 0.01 * dv[h];
}
output W; output v;
EOF
"$TRAC" -P 2 --block 100 -D I=300 -D K=200 -D J=250 "$TOP/examples/matmul.tra" -o mm2 &&
	"$TRAC" -P 4 --block 100 --strategy 11=two-phase -D I=300 -D K=200 -D J=250 \
		"$TOP/examples/matmul.tra" -o mm4 &&
	"$TRAC" -P 2 --block 25 train.tra -o train &&
	"$TRAC" --block 3 --strategy 7=lookup gath.tra -o gath || { fail "trac"; finish; }

for np in 1 2 4; do
	for prog in mm2 mm4 train gath; do
		case $prog in
		train) args="X=x.npy Y=y.npy --checkpoint ck --quiet" opt="--loop 3" ;;
		gath) args="idx=idx.npy E0=e.npy E.out=eo.npy" opt="--loop 2" ;;
		*) args="A=a.npy B=b.npy C=c.npy" opt= ;;
		esac
		rm -f t.json
		if ! run $np ./$prog $args --profile --trace=t.json >prof.txt 2>err.txt; then
			fail "$prog on $np ranks with --trace"; cat err.txt
		elif ! out=$("$PYTHON" "$CHECK" t.json prof.txt $np $opt 2>&1); then
			fail "$prog on $np ranks: $out"
		elif [ $prog = mm4 ] && ! grep -q '"kind":"twophase"' t.json; then
			fail "$prog on $np ranks: no two-phase op in the trace"
		else
			pass "$prog on $np ranks: $out"
		fi
	done
done
ls -a | grep -q '^\.t\.json\.' && fail "a temporary trace file was left behind"

# --trace FILE, apart; without --profile the same spans, ops not lined up
rm -f t.json
run 2 ./mm2 A=a.npy B=b.npy C=c.npy --trace t.json && [ -s t.json ] &&
	"$PYTHON" -c 'import json, sys; d = json.load(open("t.json")); sys.exit(not any(e.get("cat") == "op" for e in d["traceEvents"]))' &&
	pass "--trace FILE" || fail "--trace FILE"

# a file name JSON must escape: a quote, a backslash, a tab, a byte that
# is not UTF-8 (U+FFFD in the file)
odd=$(printf 'c"\\\t\377.npy')
rm -f t.json
if run 2 ./mm2 A=a.npy B=b.npy "C=$odd" --trace=t.json &&
	"$PYTHON" -c 'import json, sys
d = json.load(open("t.json", encoding="utf-8"))
files = [e["args"]["file"] for e in d["traceEvents"] if e.get("cat") == "io" and e["name"] == "write"]
sys.exit(files != ["c\"\\\t\ufffd.npy"])'; then
	pass "a file name escaped in JSON"
else
	fail "a file name escaped in JSON"
fi

# a full buffer: later spans are dropped, and the file says so
rm -f t.json
if TRAC_TRACE_EVENTS=5 run 2 ./mm2 A=a.npy B=b.npy C=c.npy --profile --trace=t.json >prof.txt 2>err.txt &&
	out=$("$PYTHON" "$CHECK" t.json prof.txt 2 --dropped 2>&1); then
	pass "TRAC_TRACE_EVENTS=5: $out"
else
	fail "TRAC_TRACE_EVENTS=5: $out"; cat err.txt
fi

# errors: one line, status 1, before the run (no output written)
mkdir adir
expect_error() {    # expect_error LINE ARGS...
	want=$1; shift
	for np in 0 1 2; do
		rm -f c.npy
		if [ $np = 0 ]; then
			timeout 60 ./mm2 A=a.npy B=b.npy C=c.npy "$@" </dev/null >out 2>err
		else
			timeout 60 "$MPIRUN" -q -np $np ./mm2 A=a.npy B=b.npy C=c.npy "$@" </dev/null >out 2>err
		fi
		status=$?
		mpi_noise err
		if [ $status != 1 ] || [ "$(cat err)" != "$want" ]; then
			fail "$* on $np ranks: status $status, stderr:"; cat err; echo "expected: $want"
		elif [ -e c.npy ]; then
			fail "$* on $np ranks: the program ran"
		else
			pass "$* on $np ranks: $want"
		fi
	done
}
expect_error "mm2: --trace nodir/t.json: No such file or directory" --trace=nodir/t.json
expect_error "mm2: --trace adir: Is a directory" --trace adir
expect_error "mm2: --trace needs a file" --trace
expect_error "mm2: --trace needs a file" --trace=
TRAC_TRACE_EVENTS=x expect_error "mm2: TRAC_TRACE_EVENTS needs a count of events (1 or more), found 'x'" --trace=t.json
ls -a adir | grep -q '^\.' && [ "$(ls -a adir | wc -l)" -gt 2 ] && fail "a temporary file was left in adir"

./mm2 --help | grep -q -- '^  --trace FILE' || fail "--help does not list --trace FILE"
finish
