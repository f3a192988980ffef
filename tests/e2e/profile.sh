#!/bin/sh
# --profile, the EXPLAIN ANALYZE of a compiled program: on the matmul example
# planned for 2 ranks, the bytes each op sends are the plan's prediction
# (chunks; keys are counted apart), bytes received equal bytes sent, the
# peak of chunk memory is the plan's peak per rank, a run on another rank
# count than the plan's says so, and each op's floor (the roofline) is the
# machine model's.
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

# The roofline: each op's floor is the machine model's least time for it.
# Under a model whose best f32 gemm is 2 GFLOP/s, whose files move 1 MB/s
# and whose memory is all but free, the 1-rank matmul's join (2 * 300 * 200
# * 250 flops) has a floor of 0.015 s whatever ran, reading A (300 x 200
# f32) 0.24 s, B 0.2 s and writing C 0.3 s; an op's roofline is its floor
# over its seconds, and the summary's floor_s is the floors' sum.
cat >m.model <<'EOF'
gemm_f32_gflops_b64=1
gemm_f32_gflops_b256=2
gemm_f64_gflops_b256=1
memcpy_bandwidth_Bps=1e15
file_read_bandwidth_Bps=1e6
file_write_bandwidth_Bps=1e6
EOF
if "$TRAC" -P 1 --machine m.model -D I=300 -D K=200 -D J=250 "$TOP/examples/matmul.tra" -o mm1 &&
   run 1 ./mm1 A=a.npy B=b.npy C=c.npy --profile >roof.txt 2>&1; then
	# from the row's end: roofline, floor s, ..., seconds the 11th
	awk 'BEGIN { want["join"] = "0.015000"; want["read A"] = "0.240000"; want["read B"] = "0.200000"
		     want["write C"] = "0.300000" }
	     /^ +[0-9]+  / { what = $2 == "join" ? "join" : $3 " " $4
		if (!(what in want)) next
		seen++
		if ($(NF - 1) != want[what]) { print what ": floor " $(NF - 1) ", want " want[what]; bad = 1 }
		if (($(NF - 1) / $(NF - 10) - $NF) ^ 2 > 1e-4 * $NF ^ 2 + 1e-6) {
			print what ": roofline " $NF " for " $(NF - 1) " / " $(NF - 10); bad = 1 } }
	     /^summary: / { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
	     END { if (seen != 4) { print seen " of the 4 rows"; bad = 1 }
		if (v["floor_s"] != "0.755000") { print "floor_s " v["floor_s"] ", want 0.755000"; bad = 1 }
		if ((v["floor_s"] / v["total_s"] / v["roofline"] - 1) ^ 2 > 1e-4) { print "roofline " v["roofline"]; bad = 1 }
		exit bad }' roof.txt || { fail "--profile's roofline"; cat roof.txt; }
	grep -q '^roofline: the ops. floors' roof.txt || fail "no roofline line"
	[ "$FAILS" = 0 ] && pass "--profile: each op's floor and roofline"
else
	fail "the roofline's program"; cat roof.txt
fi

# Start-up: a job whose ranks all run on this host opens no PML but ob1
# (the runtime names it: opening the others, cm and its network MTLs,
# took 0.2-0.3 s of MPI_Init), one rank and two alike; the user's own
# choice of PMLs wins
opened() { grep 'components_open: found loaded component' "$1" | sed 's/.*component //' | sort -u | tr '\n' ' '; }
for np in 1 2; do
	OMPI_MCA_pml_base_verbose=10 run $np ./mm A=a.npy B=b.npy C=c.npy >pml$np.txt 2>&1 ||
		{ fail "$np ranks with the PML's messages"; cat pml$np.txt; }
	if grep -q 'components_open: found loaded component' pml$np.txt; then
		[ "$(opened pml$np.txt)" = "ob1 " ] ||
			fail "$np ranks under mpirun opened PMLs besides ob1: $(opened pml$np.txt)"
		[ "$FAILS" = 0 ] && pass "$np ranks under mpirun: ob1 alone"
	fi
done
OMPI_MCA_pml='^v' OMPI_MCA_pml_base_verbose=10 run 2 ./mm A=a.npy B=b.npy C=c.npy >pmlu.txt 2>&1 ||
	{ fail "2 ranks with the user's PMLs"; cat pmlu.txt; }
if grep -q 'components_open: found loaded component' pmlu.txt; then
	opened pmlu.txt | grep -q 'cm ' || fail "the user's OMPI_MCA_pml was not kept: $(opened pmlu.txt)"
fi

# The communication buffers' peak is the most held at once, not what every
# exchange received in all: a gather's and a scatter's buffers are freed
# after each step (gather.c's exchange counted them live for the rest of
# the run, so 40 steps of a look-up and its scatter-add showed 40 steps'
# bytes).  The table split by rows, the batch by --block: both exchange.
cat >emb.tra <<'EOF2'
size V = 4000, D = 16, B = 3000;
input idx[B] : i64;
param E[V, D] = normal(0, 1);
repeat 40 {
    l = sum[b, d](E[idx[b], d] ** 2);
    dE = grad(l, E);
    E[v, d] -= 0.01 * dE[v, d];
}
output E;
EOF2
"$PYTHON" -c 'import numpy as np; np.save("idx.npy", np.random.default_rng(1).integers(0, 4000, 3000))' &&
	"$TRAC" -P 2 --block 1500 --strategy 5=lookup emb.tra -o emb || fail "emb: trac"
if run 2 ./emb idx=idx.npy E.out=e.npy --profile >emb.txt 2>&1; then
	b=$(field buffers emb.txt) r=$(field recvd emb.txt)
	awk -v b="$b" -v r="$r" 'BEGIN { exit !(r > 0 && b > 0 && b < r / 8) }' ||
		fail "emb: communication buffers' peak $b against $r bytes received in all (40 steps)"
else
	fail "emb: --profile on 2 ranks"; cat emb.txt
fi

# The backward ops are labelled by the statement they differentiate
# ("grad: l = sum[b, d](E[idx[b], d] ** 2);"), not all by the first grad
# statement, and --explain says the same of them ("(grad of line 5)")
grep -q '^ *[0-9]* *[a-z]* *grad: l = sum\[b, d\](E\[' emb.txt ||
	{ fail "emb: no op labelled 'grad: l = ...'"; grep '^ *[0-9]' emb.txt; }
"$TRAC" -P 2 --block 1500 --strategy 5=lookup --explain emb.tra | grep -q '(grad of line 5)' ||
	fail "emb: --explain names no op's forward statement"

# TRAC_PROFILE=1 does the same as --profile
TRAC_PROFILE=1 run 1 ./mm A=a.npy B=b.npy C=c.npy | grep -q '^summary: ' || fail "TRAC_PROFILE=1"
finish
