#!/bin/sh
# --profile, the EXPLAIN ANALYZE of a compiled program: on the matmul example
# planned for 2 ranks, the bytes each op sends are the plan's prediction
# (chunks; keys are counted apart), bytes received equal bytes sent, the
# peak of chunk memory is the plan's peak per rank, and a run on another
# rank count than the plan's says so.
. "$srcdir/tests/e2e/lib.sh"

"$PYTHON" - <<'PY' || exit 1
import numpy as np
r = np.random.default_rng(3)
np.save("a.npy", r.standard_normal((300, 200)).astype("f4"))
np.save("b.npy", r.standard_normal((200, 250)).astype("f4"))
PY
"$TRAC" -P 2 --block 100 -D I=300 -D K=200 -D J=250 "$TOP/examples/matmul.tra" -o mm ||
	{ fail "trac"; finish; }

# field NAME FILE: the value of NAME= on the summary line
field() { sed -n "s/^summary: .* $1=\([^ ]*\).*/\1/p" "$2"; }

for np in 1 2 3; do
	if ! run $np ./mm A=a.npy B=b.npy C=c.npy --profile >prof$np.txt 2>&1; then
		fail "--profile on $np ranks"; cat prof$np.txt; continue
	fi
	grep -q '^summary: ' prof$np.txt || fail "$np ranks: no summary line"
	[ "$(field sent prof$np.txt)" = "$(field recvd prof$np.txt)" ] ||
		fail "$np ranks: bytes sent and received differ"
	if [ $np = 2 ]; then
		grep -q '^note: planned for' prof$np.txt && fail "2 ranks: a note about the plan's ranks"
		# every op that moves data sends exactly the predicted chunk bytes
		awk '/^bytes: / && !/kind=write/ {
			split($0, f, /[ =]/)
			for (i = 1; i < length(f); i++) { if (f[i] == "chunks") c = f[i + 1]; if (f[i] == "pred") p = f[i + 1] }
			if (c != p) { print "op " $2 ": chunks " c " predicted " p; bad = 1 }
			n++ }
			END { exit bad || n == 0 }' prof2.txt || fail "2 ranks: bytes differ from the plan"
		[ "$(field peak prof2.txt)" = "$(field pred_peak prof2.txt)" ] ||
			fail "2 ranks: peak $(field peak prof2.txt) but the plan says $(field pred_peak prof2.txt)"
	else
		grep -q "^note: planned for 2 ranks, run on $np" prof$np.txt ||
			fail "$np ranks: no note that the plan was for 2 ranks"
	fi
done
[ "$FAILS" = 0 ] && pass "--profile: bytes, peak memory and the plan's rank count"

# TRAC_PROFILE=1 does the same as --profile
TRAC_PROFILE=1 run 1 ./mm A=a.npy B=b.npy C=c.npy | grep -q '^summary: ' || fail "TRAC_PROFILE=1"
finish
