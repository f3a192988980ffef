#!/bin/sh
# The TRA paper's predicted costs (Tables 4, 6 and 9) against trac's cost
# model, and the plans trac chooses on the paper's workloads (the
# paper_*.tra programs, at the paper's sizes and cluster sizes, costed with
# machine models of its clusters, r5d.model and r5dn.model), read from
# `trac --explain=json`.
#
#   the paper's plans   each plan the paper compares, as it states it: its
#                       input layouts pinned (--place), its strategies forced
#                       (--strategy), blocks that fit its formulas (--block).
#                       trac's floats moved must be the paper's number (to
#                       its two printed digits) or, where the paper's
#                       formula leaves terms out, the documented count (each
#                       such row says why); and of the plans the paper
#                       compares on a workload, the one it measured fastest
#                       must be the one trac predicts fastest, or within 10%
#                       of it (a tie, as trac's search counts ties; only two
#                       general matrices needs it, where the paper's own
#                       Table 4 ties all three plans)
#   trac's choice       nothing pinned: the strategy trac picks (printed),
#                       that it moves no more floats than the paper's fastest
#                       plan, params' placements where they tell the plan,
#                       and that it sends no more bytes than the initial
#                       plan of Table 1 (-O0)
#
# A table of every row is printed; the expectations live here, beside the
# reasons (UPDATE=1 rewrites nothing).
set -u
: "${TRAC:?}" "${srcdir:=.}" "${PYTHON:=/usr/bin/python3}"
dir="$srcdir/tests/golden"
cd "$dir" || exit 1

"$PYTHON" - "$TRAC" <<'PY'
import concurrent.futures, json, os, subprocess, sys

trac = sys.argv[1]
fails = []
rows = []
done = {}

def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)

def prefetch(jobs):
    """explain several programs at once (the unpinned searches are slow)"""
    cmds = [(prog, tuple(args)) for prog, args in jobs]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as ex:
        for key, out in zip(cmds, ex.map(lambda c: run([trac, "--explain=json", *c[1], c[0]]), cmds)):
            done[key] = out

def explain(prog, *args):
    out = done.get((prog, tuple(args))) or run([trac, "--explain=json", *args, prog])
    if out.returncode != 0:
        fails.append("%s %s: trac failed: %s" % (prog, " ".join(args), out.stderr.strip()))
        return None
    return json.loads(out.stdout)

def line(prog, start):
    """the line of the statement that starts so"""
    with open(prog) as f:
        for i, l in enumerate(f, 1):
            if l.startswith(start):
                return i
    fails.append("%s: no statement '%s'" % (prog, start))
    return 0

def bcast(d):
    return sum(o["floats_moved"] for o in d["ops"] if o["kind"] == "bcast")

def close(x, want, digits):
    """x agrees with want to the digits the paper prints (exact: digits 0)"""
    if digits == 0:
        return abs(x - want) <= 1e-9 * abs(want)
    return float("%.*e" % (digits - 1, x)) == float("%.*e" % (digits - 1, want))

def check(name, x, want, digits, note=""):
    ok = x is not None and close(x, want, digits)
    rows.append((name, want, x, "ok" if ok else "DIFFERS", note))
    if not ok:
        fails.append("%s: %s, expected %.3g %s" % (name, "none" if x is None else "%.4g" % x, want, note))

def pinned(prog, ranks, machine, places, strategies, blocks=()):
    args = ["-P", str(ranks), "--machine", machine]
    for p in places:
        args += ["--place", p]
    for s in strategies:
        args += ["--strategy", s]
    for b in blocks:
        args += ["--block", b]
    return explain(prog, *args)

# the paper's plans per workload: name -> (floats moved, predicted seconds)
paper_plans = {}
fastest = {}            # workload -> the plan the paper measured fastest

def fastest_check(workload, names, ties=()):
    plans = {n: paper_plans.get((workload, n)) for n in names}
    if None in plans.values():
        return
    best = min(plans, key=lambda n: plans[n][1])
    want = fastest[workload]
    ok = plans[want][1] <= plans[best][1] * 1.10
    note = ", ".join("%s %.4g s" % (n, plans[n][1]) for n in names)
    rows.append(("%s: the paper's fastest" % workload, want, best, "ok" if ok else "DIFFERS",
                 "predicted " + note + (" (a tie)" if ok and best != want else "")))
    if not ok:
        fails.append("%s: trac predicts %s fastest, the paper measured %s (%s)" % (workload, best, want, note))

# trac's own choices (nothing pinned): run those slow searches in parallel first
choices = (
    # program, ranks, machine, the statement named, params' placements
    ("paper_mm_general.tra", 10, "r5d.model", "C[", None),
    ("paper_mm_common.tra", 10, "r5d.model", "C[", None),
    ("paper_mm_twolarge.tra", 10, "r5d.model", "C[", None),
    ("paper_nn_wide.tra", 8, "r5d.model", "proj[", None),
    ("paper_nn_large.tra", 8, "r5d.model", "proj[", None),
    ("paper_ffnn_speech.tra", 5, "r5dn.model", "a1[", {"W1": "part(1)"}),
    ("paper_ffnn_xml.tra", 5, "r5dn.model", "a1[", {"W1": "part(0)", "W2": "part(1)"}),
)
# --mem-per-rank on two large dims: 5G fits a plan (a 5 x 2 grid of blocks
# by replication: 4.8e9 bytes a rank) though the cheapest needs more; in 4G
# nothing fits in memory and the plan runs out of core (issue 32): 4G a rank
# in memory at its peak, the rest in spill files
budgets = (("5G", True), ("4G", False))
mem_args = lambda b: ["-P", "10", "--machine", "r5d.model", "--mem-per-rank", b]
prefetch([(c[0], pre + ["-P", str(c[1]), "--machine", c[2]]) for c in choices
          for pre in ([], ["-O0"], ["--objective", "floats"])] +
         [("paper_mm_twolarge.tra", mem_args(b)) for b, _ in budgets])

# ---- Table 4: matmul on 10 nodes ----
# The thesis's layouts: BMM both on dim 0 (B broadcast), CMM A on dim 1 and
# B on dim 0, RMM both on dim 0.  Blocks: K in 10; I and J in 5 for RMM
# (Front(Y)[1] |X| + Front(X)[0] |Y| = 5|X| + 5|Y| fits every cell); BMM's
# and CMM's costs do not depend on them, I in 10 keeps BMM's ranks busy.
# The paper measured CMM fastest for two general matrices at 10 nodes (a
# tie in its Table 4), CMM for a common large dim, BMM for two large dims.
table4 = {
    "general": (40000, 40000, 40000, 1.6e10, 1.6e10, 1.6e10, "CMM"),
    "common": (10000, 640000, 10000, 6.4e10, 1.0e9, 6.4e10, "CMM"),
    "twolarge": (80000, 10000, 80000, 8.0e9, 6.4e10, 8.0e9, "BMM"),
}
for w, (I, K, J, bmm, cmm, rmm, fast) in table4.items():
    prog = "paper_mm_%s.tra" % w
    fastest["mm " + w] = fast
    for name, strat, layout, ni, want in (("BMM", "broadcast-right", ("part(0)", "part(0)"), 10, bmm),
                                         ("CMM", "co-partition", ("part(1)", "part(0)"), 5, cmm),
                                         ("RMM", "replicate", ("part(0)", "part(0)"), 5, rmm)):
        d = pinned(prog, 10, "r5d.model", ["A=" + layout[0], "B=" + layout[1]], ["%d=%s" % (line(prog, "C["), strat)],
                   ["A=%dx%d" % (I // ni, K // 10), "B=%dx%d" % (K // 10, J // 5)])
        check("Table 4 %s %s" % (w, name), d and d["total_floats_moved"], want, 0)
        if d:
            paper_plans["mm " + w, name] = (d["total_floats_moved"], d["predicted_seconds"])
    fastest_check("mm " + w, ("BMM", "CMM", "RMM"))

# ---- Table 6: nearest neighbours on 8 nodes ----
# Opt4Horizontal: xq, X, A on dim 0; xq and A broadcast.  Opt4Vertical: xq
# and A on dim 0, X on dim 1; xq broadcast, the projection by co-partition.
# The off-diagonal cells are swapped in the paper (digest A.3, erratum 7):
# D*D*8 = 8.0e10 belongs to Horizontal on the D = 1e5 set, N*D*8 = 7.2e10
# to Vertical on the N = 1.5e6 set; trac gives the formulas' numbers.  The
# paper measured Horizontal fastest on the first set, Vertical on the second.
def nn(prog, horizontal):
    if horizontal:
        return (["xq=part(0)", "X=part(0)", "A=part(0)"],
                ["%d=broadcast-right" % line(prog, "diff["), "%d=broadcast-right" % line(prog, "proj[")])
    return (["xq=part(0)", "X=part(1)", "A=part(0)"],
            ["%d=broadcast-right" % line(prog, "diff["), "%d=co-partition" % line(prog, "proj[")])
fastest["nn wide"], fastest["nn large"] = "Horizontal", "Vertical"
for w, horizontal, want, note in (
        ("wide", True, 2.9e8, ""),
        ("wide", False, 7.2e10, "(paper prints 8.0e10: erratum 7)"),
        ("large", True, 8.0e10, "(paper prints 7.2e10: erratum 7)"),
        ("large", False, 4.8e9, "")):
    name = "Horizontal" if horizontal else "Vertical"
    prog = "paper_nn_%s.tra" % w
    d = pinned(prog, 8, "r5d.model", *nn(prog, horizontal))
    check("Table 6 %s %s" % (w, name), d and d["total_floats_moved"], want, 2, note)
    if d:
        paper_plans["nn " + w, name] = (d["total_floats_moved"], d["predicted_seconds"])
for w in ("wide", "large"):
    fastest_check("nn " + w, ("Horizontal", "Vertical"))

# ---- Table 9: FFNN on 5 nodes ----
# TRA-DP: X, Y, W1, W2 on dim 0; W1 and W2 broadcast; the weight gradients
# by co-partition on n.  TRA-MP (the thesis): X, Y on dim 1, W1 on dim 0,
# W2 on dim 1; a1 by co-partition, a2 and gW2 broadcasting a1, g1 by
# co-partition, gW1 broadcasting g1b.
# The paper's numbers are its broadcasts: TRA-DP (s+1)(DH+HL) counts W1 and
# W2 broadcast (s(DH+HL)) and one gradient shuffle of DH+HL; TRA-MP 2NHs
# counts the two broadcasts.  trac's broadcasts are exactly those; beside
# them it counts every shuffle of partial sums, each of the s sites' copy:
# the gradient shuffle is s(DH+HL) (the paper's own CMM counts I*J*s so),
# and TRA-MP's two co-partition contractions shuffle N*H per site holding
# partial sums.  The paper measured TRA-DP fastest for speech, TRA-MP for
# XML; its costs rank them so, and so must trac's.
def ffnn_plan(prog, layout, strategies):
    stmts = ("a1[", "a2[", "gW2[", "g1[", "gW1[")
    return layout, ["%d=%s" % (line(prog, st), x) for st, x in zip(stmts, strategies)]
dp = (["X=part(0)", "Y=part(0)", "W1=part(0)", "W2=part(0)"],
      ["broadcast-right", "broadcast-right", "co-partition", "broadcast-right", "co-partition"])
mp = (["X=part(1)", "Y=part(1)", "W1=part(0)", "W2=part(1)"],
      ["co-partition", "broadcast-left", "broadcast-left", "co-partition", "broadcast-right"])
s = 5
ffnn = {"speech": (10000, 1600, 100000, 10, 9.7e8, 1.0e10, "TRA-DP"),
        "xml": (1000, 597540, 1000, 14588, 3.7e9, 1.0e7, "TRA-MP")}
for w, (N, D, H, L, tdp, tmp, fast) in ffnn.items():
    W = D * H + H * L
    prog = "paper_ffnn_%s.tra" % w
    fastest["ffnn " + w] = fast
    d = pinned(prog, s, "r5dn.model", *ffnn_plan(prog, *dp), ["W1=%dx%d" % (-(-D // s), -(-H // s))])
    check("Table 9 %s TRA-DP broadcasts" % w, d and bcast(d), s * W, 2, "= s(DH+HL), the paper's first term")
    check("Table 9 %s TRA-DP total" % w, d and d["total_floats_moved"], 2 * s * W, 0,
          "(paper %.2g: its gradient shuffle counted once)" % tdp)
    if d:
        paper_plans["ffnn " + w, "TRA-DP"] = (d["total_floats_moved"], d["predicted_seconds"])
    d = pinned(prog, s, "r5dn.model", *ffnn_plan(prog, *mp))
    check("Table 9 %s TRA-MP broadcasts" % w, d and bcast(d), tmp, 2, "= 2NHs, the paper's")
    if d:
        paper_plans["ffnn " + w, "TRA-MP"] = (d["total_floats_moved"], d["predicted_seconds"])
    dpf, mpf = paper_plans.get(("ffnn " + w, "TRA-DP")), paper_plans.get(("ffnn " + w, "TRA-MP"))
    if dpf and mpf:
        cheaper = "TRA-DP" if dpf[0] < mpf[0] else "TRA-MP"
        rows.append(("Table 9 %s: fewer floats" % w, fast, cheaper, "ok" if cheaper == fast else "DIFFERS",
                     "TRA-DP %.3g, TRA-MP %.3g" % (dpf[0], mpf[0])))
        if cheaper != fast:
            fails.append("Table 9 %s: %s moves fewer floats, the paper measured %s faster" % (w, cheaper, fast))
    fastest_check("ffnn " + w, ("TRA-DP", "TRA-MP"))

# Amazon-XML with X read where it is needed (issue 16): --place X=all is
# every rank reading the file itself, which moves nothing between ranks
# (its time counts, at file_read_bandwidth_Bps).  With W1 on h, trac's
# plan moves no more floats than TRA-MP's 2NHs, at H = 1000 and 7000.
for H, paper in ((1000, 1.0e7), (7000, 7.0e7)):
    d = explain("paper_ffnn_xml.tra", "-P", str(s), "--machine", "r5dn.model", "--place", "X=all",
                "--place", "W1=part(1)", "-D", "H=%d" % H)
    x = d and d["total_floats_moved"]
    ok = x is not None and x <= paper * 1.005
    rows.append(("Table 9 xml H=%d, X read everywhere" % H, paper, x, "ok" if ok else "DIFFERS",
                 "at most TRA-MP's 2NHs"))
    if not ok:
        fails.append("Table 9 xml H=%d with X read everywhere: %s floats, the paper's TRA-MP %.3g" % (H, x, paper))

# Amazon-XML under --objective floats (issue 16): nothing pinned, plans
# ranked by floats moved among those that spread the work, inputs free
# where they are needed (the search offers each input read whole by every
# rank).  trac's own plan moves no more floats than TRA-MP's 2NHs, at
# H = 1000 and 7000, placed as issue 16 reads the paper's plan: X read
# whole by every rank (no floats between ranks), W1 on h, and W2 on l
# (floats alone would read and hold everything on every rank and move
# nothing: bench/README.md).
for H, paper in ((1000, 1.0e7), (7000, 7.0e7)):
    d = explain("paper_ffnn_xml.tra", "-P", str(s), "--machine", "r5dn.model", "--objective", "floats",
                "-D", "H=%d" % H)
    x = d and d["total_floats_moved"]
    ok = x is not None and x <= paper * 1.005 and d["objective"] == "floats"
    rows.append(("Table 9 xml H=%d, --objective floats" % H, paper, x, "ok" if ok else "DIFFERS",
                 "at most TRA-MP's 2NHs; %.3g s predicted" % d["predicted_seconds"] if d else ""))
    if not ok:
        fails.append("Table 9 xml H=%d under --objective floats: %s floats, the paper's TRA-MP %.3g" % (H, x, paper))
    if d:
        got = {o["text"].split()[1]: o["placement"] for o in d["ops"] if o["kind"] == "read"}
        got.update({p["name"]: p["placement"] for p in d["params"]})
        got = "X %s, W1 %s, W2 %s" % (got.get("X"), got.get("W1"), got.get("W2"))
        want = "X all, W1 part(1), W2 part(1)"
        rows.append(("Table 9 xml H=%d, --objective floats" % H, "placed", got == want and "placed" or got,
                     "ok" if got == want else "DIFFERS", want))
        if got != want:
            fails.append("Table 9 xml H=%d under --objective floats: %s, expected %s" % (H, got, want))

# ---- trac's own choices: nothing pinned ----
workload = {"paper_mm_general.tra": "mm general", "paper_mm_common.tra": "mm common",
            "paper_mm_twolarge.tra": "mm twolarge", "paper_nn_wide.tra": "nn wide",
            "paper_nn_large.tra": "nn large", "paper_ffnn_speech.tra": "ffnn speech",
            "paper_ffnn_xml.tra": "ffnn xml"}
for prog, ranks, machine, start, params in choices:
    args = ["-P", str(ranks), "--machine", machine]
    d = explain(prog, *args)
    t1 = explain(prog, "-O0", *args)
    if not d or not t1:
        continue
    w = workload[prog]
    ln = line(prog, start)
    st = [x for x in d["statements"] if x["line"] == ln][0]["strategy"]
    rows.append((w + ": trac's plan", "-", st, "", "line %d; %.3g floats, %.3g s predicted" %
                 (ln, d["total_floats_moved"], d["predicted_seconds"])))
    paper = paper_plans.get((w, fastest[w]))
    if paper:
        ok = d["total_floats_moved"] <= paper[0] * (1 + 1e-9)
        rows.append((w + ": floats vs the paper's", paper[0], d["total_floats_moved"], "ok" if ok else "MORE",
                     "its fastest plan, " + fastest[w]))
        if not ok:
            fails.append("%s: trac's plan moves %.3g floats, the paper's fastest %.3g" % (w, d["total_floats_moved"],
                         paper[0]))
    for p, want in (params or {}).items():
        got = [x["placement"] for x in d["params"] if x["name"] == p][0]
        rows.append((w + ": " + p, want, got, "ok" if got == want else "DIFFERS", "placement"))
        if got != want:
            fails.append("%s: %s placed %s, expected %s" % (prog, p, got, want))
    ok = d["total_bytes_sent"] <= t1["total_bytes_sent"] * (1 + 1e-9)
    rows.append((w + ": bytes vs Table 1", t1["total_bytes_sent"], d["total_bytes_sent"], "ok" if ok else "MORE", ""))
    if not ok:
        fails.append("%s: the searched plan sends %.3g bytes, Table 1's %.3g" % (prog, d["total_bytes_sent"],
                     t1["total_bytes_sent"]))
    # under --objective floats: no more floats than the default's plan (its
    # seconds printed beside, for bench/README.md's table), its work spread
    # as well, within the objective's 30% tie (floats alone would put it all
    # on one rank, or every rank)
    f = explain(prog, "--objective", "floats", *args)
    if f:
        ok = f["busiest_rank_flops"] <= d["busiest_rank_flops"] / 0.7
        rows.append((w + ": --objective floats, busiest rank", d["busiest_rank_flops"], f["busiest_rank_flops"],
                     "ok" if ok else "MORE", "flops, at most the default's / 0.7"))
        if not ok:
            fails.append("%s --objective floats: the busiest rank does %.3g flops, the default's %.3g" %
                         (prog, f["busiest_rank_flops"], d["busiest_rank_flops"]))
        ok = f["total_floats_moved"] <= d["total_floats_moved"] * (1 + 1e-9) and f["objective"] == "floats"
        rows.append((w + ": --objective floats", d["total_floats_moved"], f["total_floats_moved"],
                     "ok" if ok else "MORE", "%.3g s predicted (default %.3g s); line %d %s" %
                     (f["predicted_seconds"], d["predicted_seconds"], ln,
                      [x for x in f["statements"] if x["line"] == ln][0]["strategy"])))
        if not ok:
            fails.append("%s --objective floats: %.3g floats, the default's plan %.3g" % (prog, f["total_floats_moved"],
                         d["total_floats_moved"]))

for b, fits in budgets:
    out = done[("paper_mm_twolarge.tra", tuple(mem_args(b)))]
    lim = float(b[:-1]) * 2 ** 30
    if fits:
        d = json.loads(out.stdout) if out.returncode == 0 else None
        ok = d is not None and d["peak_bytes_per_rank"] <= lim
        rows.append(("mm twolarge --mem-per-rank " + b, lim, d and d["peak_bytes_per_rank"], "ok" if ok else "OVER",
                     "the plan's peak bytes a rank"))
        if not ok:
            fails.append("--mem-per-rank %s: %s" % (b, out.stderr.strip() or "a plan over the budget"))
    else:
        d = json.loads(out.stdout) if out.returncode == 0 else None
        ok = (d is not None and abs(d.get("mem_budget_bytes_per_rank", 0) - lim) <= 1e-6 * lim
              and d["resident_peak_bytes_per_rank"] <= lim * (1 + 1e-6)
              and d["spill_written_bytes_per_rank"] > 0)
        rows.append(("mm twolarge --mem-per-rank " + b + ", out of core", lim,
                     d and d.get("resident_peak_bytes_per_rank"), "ok" if ok else "OVER",
                     "resident peak a rank; %.3g bytes spilled" % (d and d.get("spill_written_bytes_per_rank") or 0)))
        if not ok:
            fails.append("--mem-per-rank %s: exit %d, %s" % (b, out.returncode, out.stderr.strip() or
                         "no out-of-core plan within the budget"))

def fmt(x):
    return x if isinstance(x, str) else "%.3g" % x
width = max(len(r[0]) for r in rows)
print("%-*s  %12s  %12s" % (width, "check", "expected", "trac"))
for name, want, got, status, note in rows:
    print("%-*s  %12s  %12s  %-7s %s" % (width, name, fmt(want), "-" if got is None else fmt(got), status, note))
for f in fails:
    print("FAIL", f)
sys.exit(1 if fails else 0)
PY
