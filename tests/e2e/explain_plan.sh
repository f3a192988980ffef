#!/bin/sh
# --explain -P N shows the plan an executable runs on N ranks, however the
# executable was compiled: a count's plan is a function of the program, the
# count and the options (HACKING.md "One executable, every rank count").
# tests/e2e/gcn2.tra compiled with the default counts runs on 1 to 4 ranks
# under --profile; its planned bytes and peak are those --explain -P N
# prints.  (Before, a count's search also tried the blocks of the count
# planned before it: -P 3 alone planned 2.9e5 bytes a step, the list 0.)
. "$srcdir/tests/e2e/lib.sh"

"$PYTHON" - <<'PY' || exit 1
import numpy as np, scipy.sparse as sp
r = np.random.default_rng(5)
V, F, C = 150, 30, 4
sp.save_npz("a.npz", sp.random(V, V, density=0.05, random_state=5, format="csr", dtype=np.float32))
np.save("x.npy", r.standard_normal((V, F)).astype("f4"))
np.save("y.npy", np.eye(C, dtype="f4")[r.integers(0, C, V)])
np.save("m.npy", (r.random(V) < 0.5).astype("f4"))
PY
"$TRAC" "$TOP/tests/e2e/gcn2.tra" -o gcn2 || { fail "trac gcn2.tra"; finish; }

# field NAME FILE: the value of NAME= on --profile's summary line
field() { sed -n "s/^summary: .* $1=\([^ ]*\).*/\1/p" "$2"; }

for np in 1 2 3 4; do
	"$TRAC" --explain=json -P $np "$TOP/tests/e2e/gcn2.tra" >explain$np.json || { fail "--explain -P $np"; continue; }
	if ! run $np ./gcn2 A=a.npz X=x.npy Y=y.npy M=m.npy P=p.npy W1.out=w1.npy W2.out=w2.npy --profile >prof$np.txt 2>&1; then
		fail "gcn2 on $np ranks"; cat prof$np.txt; continue
	fi
	"$PYTHON" - explain$np.json "$(field planned_ranks prof$np.txt)" "$(field pred_sent prof$np.txt)" \
		"$(field pred_peak prof$np.txt)" <<'PY' || fail "$np ranks: the executable's plan is not --explain -P $np's"
import json, sys
d = json.load(open(sys.argv[1]))
ranks, sent, peak = int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
close = lambda a, b: abs(a - b) <= 1e-5 * max(abs(a), abs(b), 1)
ok = ranks == d["ranks"] and close(sent, d["total_bytes_sent"]) and close(peak, d["peak_bytes_per_rank"])
if not ok:
    print("run: planned for %d ranks, %g bytes sent, peak %g; --explain: %d ranks, %g bytes, peak %g"
          % (ranks, sent, peak, d["ranks"], d["total_bytes_sent"], d["peak_bytes_per_rank"]))
sys.exit(0 if ok else 1)
PY
done
[ "$FAILS" = 0 ] && pass "--explain -P N is the plan the executable runs on N ranks (1 to 4)"
finish
