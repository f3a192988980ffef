"""Checks a --trace file against the run's --profile output (tests/e2e/trace.sh).

    trace.py TRACE PROFILE NP [--loop COUNT] [--dropped]

TRACE must be Chrome trace JSON with one process per rank (process_name
"rank N"), its spans on one lane nested as a tree (each span within its
parent or after it), the op spans in program order with none overlapping,
every send, receive, wait, read and write inside an op span (or a
checkpoint, itself inside an iteration), and the bytes of the send spans of each op, summed over the
ranks, what --profile says the op sent (its `bytes:` lines and the
summary's sent=; likewise recvd=).  Under a memory budget the spill I/O
thread's spans are on lane 1 (tid 1), one at a time, and their bytes are
the summary's spill_written= and spill_read=.  With --loop COUNT, each rank's repeat
block has COUNT iteration spans, in order, inside it, each holding ops.
With --dropped, the file must say that spans were dropped.
"""
import decimal
import json
import re
import sys

path, prof_path, np = sys.argv[1], sys.argv[2], int(sys.argv[3])
loop = int(sys.argv[sys.argv.index("--loop") + 1]) if "--loop" in sys.argv else None
dropped = "--dropped" in sys.argv
errors = []


def err(msg):
    errors.append(msg)


def ns(x):
    """ts and dur are microseconds with three decimals: exact nanoseconds"""
    return int(decimal.Decimal(x) * 1000)


with open(path, encoding="utf-8") as f:
    doc = json.load(f, parse_float=decimal.Decimal)
if doc.get("displayTimeUnit") != "ms":
    err("displayTimeUnit is not ms")
events = doc["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
if names != {r: "rank %d" % r for r in range(np)}:
    err("processes %s, expected rank 0..%d" % (names, np - 1))

# --profile: per op, bytes sent over all ranks; totals
prof = open(prof_path).read()
op_sent = {int(m.group(1)): int(m.group(2)) for m in re.finditer(r"^bytes: op=(\d+) kind=\S+ sent=(\d+)", prof, re.M)}
summary = dict(kv.split("=", 1) for kv in re.search(r"^summary: (.*)$", prof, re.M).group(1).split())
nops = len(re.findall(r"^ +\d+  \S", prof, re.M))

spans = [e for e in events if e["ph"] == "X"]
for e in spans:
    lane_ok = e["tid"] == 0 or (e["tid"] == 1 and e["cat"] == "spill")
    if not lane_ok or not 0 <= e["pid"] < np or ns(e["ts"]) < 0 or ns(e["dur"]) < 0:
        err("bad span %s" % e)
# under a memory budget, the spill I/O thread's reads and writes: lane 1,
# one at a time, their bytes what --profile counts
spilled = {"spill write": 0, "spill read": 0}
for r in range(np):
    io = sorted((e for e in spans if e["pid"] == r and e["tid"] == 1), key=lambda e: ns(e["ts"]))
    for a, b in zip(io, io[1:]):
        if ns(b["ts"]) < ns(a["ts"]) + ns(a["dur"]):
            err("rank %d: spill I/O spans overlap at %s" % (r, b["ts"]))
    for e in io:
        spilled[e["name"]] += int(e["args"]["bytes"])
if "spill_written" in summary and (spilled["spill write"] != int(summary["spill_written"]) or
                                   spilled["spill read"] != int(summary["spill_read"])):
    err("spill spans: %s; --profile: written=%s read=%s" % (spilled, summary["spill_written"], summary["spill_read"]))
spans = [e for e in spans if e["tid"] == 0]
sent_by_op, sent, recvd = {}, 0, 0
for r in range(np):
    mine = sorted((e for e in spans if e["pid"] == r), key=lambda e: (ns(e["ts"]), -ns(e["dur"])))
    # one lane: every span within the one open before it, or after it
    stack = []
    for e in mine:
        t0, t1 = ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])
        while stack and t0 >= stack[-1][1]:
            stack.pop()
        if stack and t1 > stack[-1][1]:
            err("rank %d: %s [%d, %d] overlaps %s [%d, %d]" % (r, e["name"], t0, t1, stack[-1][2]["name"], *stack[-1][:2]))
        e["parents"] = [s[2] for s in stack]
        stack.append((t0, t1, e))
    ops = [e for e in mine if e["cat"] == "op"]
    seq = [e["args"]["op"] for e in ops]
    if dropped:
        continue            # spans are missing: the file says so, below
    if loop is None and seq != list(range(nops)):
        err("rank %d: ops %s, expected 0..%d in order" % (r, seq, nops - 1))
    for a, b in zip(ops, ops[1:]):
        if ns(b["ts"]) < ns(a["ts"]) + ns(a["dur"]):
            err("rank %d: op %d starts before op %d ends" % (r, b["args"]["op"], a["args"]["op"]))
    for e in mine:
        if e["name"] == "checkpoint":
            if not e["parents"] or e["parents"][-1]["name"] != "iteration":
                err("rank %d: checkpoint at %s is in no iteration" % (r, e["ts"]))
        elif e["cat"] in ("comm", "io", "init"):
            inside = [p for p in e["parents"] if p["cat"] == "op" or p["name"] == "checkpoint"]
            if not inside:
                err("rank %d: %s at %s is in no op" % (r, e["name"], e["ts"]))
            op = next((p for p in reversed(e["parents"]) if p["cat"] == "op"), None)
            if e["name"] == "send":
                b = int(e["args"]["bytes"])
                sent += b
                if op is not None:
                    sent_by_op[op["args"]["op"]] = sent_by_op.get(op["args"]["op"], 0) + b
            elif e["name"] == "recv":
                recvd += int(e["args"]["bytes"])
    if loop is not None:
        reps = [e for e in mine if e["name"] == "repeat"]
        its = [e for e in mine if e["name"] == "iteration"]
        if len(reps) != 1 or [e["args"]["iteration"] for e in its] != list(range(1, loop + 1)):
            err("rank %d: %d repeat spans, iterations %s" % (r, len(reps), [e["args"]["iteration"] for e in its]))
        for it in its:
            if reps and reps[0] not in it["parents"]:
                err("rank %d: iteration %s outside its repeat block" % (r, it["args"]["iteration"]))
            if not any(it in e["parents"] for e in ops):
                err("rank %d: iteration %s holds no op" % (r, it["args"]["iteration"]))

if not dropped:
    if {k: v for k, v in sent_by_op.items() if v} != {k: v for k, v in op_sent.items() if v}:
        err("send spans' bytes per op %s, --profile says %s" % (sent_by_op, op_sent))
    if sent != int(summary["sent"]) or recvd != int(summary["recvd"]):
        err("send spans %d bytes, recv spans %d; --profile: sent=%s recvd=%s" % (sent, recvd, summary["sent"], summary["recvd"]))
    if doc["otherData"]["events_dropped"] != 0:
        err("events dropped: %s" % doc["otherData"]["events_dropped"])
else:
    full = [e for e in events if e["ph"] == "i" and e["name"].startswith("trace full")]
    if doc["otherData"]["events_dropped"] == 0 or not full:
        err("no word in the file of spans dropped")
if errors:
    print("\n".join(errors[:20]))
    sys.exit(1)
print("%s: %d ranks, %d spans, %d bytes sent in send spans, %d written to and %d read from spill files"
      % (path, np, len(spans), sent, spilled["spill write"], spilled["spill read"]))
