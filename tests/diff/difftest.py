#!/usr/bin/python3
"""
difftest.py: differential testing of trac (issue 34).

Random valid programs (gen.py), each compiled at -O0, -O1 and -O2 into one
executable planned for 1, 2 and 3 ranks (-P 1,2,3) and run on 1, 2 and 3
ranks, and planned and run through the IA interpreter (interp_run) where
the interpreter computes what the executable does: every run must agree
with the others within the tolerance the program states (`#@ tol`), or all
fail with status 1 and the same message.  A disagreement, a crash, an
internal error or a valid program trac rejects is reduced (reduce.py) to a
small program, written to the findings folder with the inputs' seed; kept
under tests/diff/regress/, `--replay` runs it in make check.

    difftest.py --seconds N [--seed S]      generate and check for N seconds
    difftest.py --programs N [--seed S]     ... N programs
    difftest.py --replay FILE.tra ...       the regression programs
    difftest.py --seed S --groups A-B ...   only a campaign's groups A to B
                                            (as numbered in its progress lines)
    options: --group G (programs per compiled file), --findings DIR,
             --report FILE (constructs covered, how often), --no-reduce,
             --reduce-seconds N (per finding), --require-coverage

Many programs share one compile: a group of G units (each with its own
names) is one .tra file, one executable per level.  When a group fails,
each of its units is checked alone to find the one that does.

Environment: TRAC, MPIRUN, INTERP_RUN (the interpreter driver; without it
the interpreter is left out), KEEP (keep the work folder).
Exit status 0 when nothing was found (known failures, `#@ xfail`, are
reported as expected), 1 otherwise.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import numpy as np            # noqa: E402
import gen                    # noqa: E402
import inputs                 # noqa: E402

TRAC = os.environ.get("TRAC", "trac")
MPIRUN = os.environ.get("MPIRUN", "mpirun")
INTERP = os.environ.get("INTERP_RUN", "")
if not os.environ.get("TRAC_STDLIB_DIR"):
    os.environ["TRAC_STDLIB_DIR"] = os.path.join(HERE, "..", "..", "stdlib")
LEVELS = (0, 1, 2)
TIMES = Counter()       # seconds spent compiling, running, interpreting
RANKS = (1, 2, 3)
RUN_TIMEOUT = 120
FAST_CFLAGS = "-O1 -fno-math-errno"    # half the groups: mpicc's -O3 is most of a compile


def mpi_env(base):
    return dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_orte_tmpdir_base=base,
                OMPI_MCA_btl="self,vader", OMPI_MCA_btl_vader_single_copy_mechanism="none")


# ---- what a program states about itself (#@ lines) ----

def meta(text):
    m = dict(seed=0, block=0, tol={}, scale={}, rankdep=set(), nointerp=set(), error=None, xfail=None, cflags=None)
    for line in text.split("\n"):
        s = line.strip()
        if not s.startswith("#@"):
            continue
        w = s[2:].split()
        if not w:
            continue
        if w[0] == "seed":
            m["seed"] = int(w[1])
        elif w[0] == "block":
            m["block"] = int(w[1])
        elif w[0] == "tol":
            m["tol"][w[1]] = float(w[2])
        elif w[0] == "scale":
            m["scale"][w[1]] = float(w[2])
        elif w[0] == "rankdep":
            m["rankdep"] |= set(w[1:])
        elif w[0] == "nointerp":
            m["nointerp"] |= set(w[1:])
        elif w[0] == "error":
            m["error"] = " ".join(w[1:])
        elif w[0] == "cflags":
            m["cflags"] = " ".join(w[1:])
        elif w[0] == "xfail":
            m["xfail"] = " ".join(w[1:])
    return m


def unit_text(u):
    """A unit's text with what the checker needs to know about it.

    An output's tolerance is relative: the dtype's epsilon times the square
    root of the unit's operation count (u.cost), capped.  Relative to what:
    rounding errors are relative to the values an output is computed from,
    not to the output, which may be far smaller (W - 0.125 * G with G = 8 W
    summed in another order: -1.1e-16 against 0).  So the scale is the
    larger of the outputs' values and the generator's bound on the values
    it is computed from (`#@ scale`, gen.Ten.bound)."""
    lines = [u.text.rstrip("\n")]
    f32 = gen.rounded_in_f32(u)
    for name, dtype, exact, t in u.outputs:
        # the coarser of the output's type and the unit's, and of what it is
        # computed from: an f64 output of an f32 unit converts values rounded
        # in f32 (f64(T[j, i]), T a product of f32s summed in another order
        # at another level); so does one computed from an f32 tensor
        coarse = "f32" if "f32" in (dtype, u.fdt) or name in f32 else "f64"
        tl = 0.0 if exact or dtype[0] == "i" else \
            min(gen.EPS[coarse] * 64 * u.cost ** 0.5, 2e-3 if coarse == "f32" else 1e-9)
        lines.append("#@ tol %s %.3g" % (name, tl))
        if tl:
            lines.append("#@ scale %s %.3g" % (name, t.bound()))
    names = " ".join(n for n, _, _, _ in u.outputs)
    if u.rank_dependent and names:
        lines.append("#@ rankdep " + names)
    if not u.interp_ok and names:
        lines.append("#@ nointerp " + names)
    if u.error:
        lines.append("#@ error " + u.error)
    return "\n".join(lines) + "\n"


# ---- running one program in every configuration ----

class Work:
    def __init__(self, root):
        self.root = root
        self.n = 0
        self.env = mpi_env(os.path.join(root, "ompi"))
        os.makedirs(os.path.join(root, "ompi"), exist_ok=True)

    def folder(self, tag):
        self.n += 1
        d = os.path.join(self.root, "%s-%d" % (tag, self.n))
        os.makedirs(d)
        return d


MPI_NOISE = re.compile(r"MPI_ABORT|errorcode|ORTE|^\[|^-+$|^NOTE:|^You may|^exactly when|^Primary job|^mpirun|"
                       r"^process|^a non-zero|^the job|^Process name|^Exit code|^\s*$")


def first_error(stderr):
    """The line of stderr that says what went wrong (not mpirun's noise)."""
    lines = [l.strip() for l in stderr.split("\n") if not MPI_NOISE.search(l.strip())]
    for want in ("internal error", "error", "trac:"):
        for l in lines:
            if want in l:
                return l
    return lines[0] if lines else ""


def norm_msg(msg):
    """A message without what changes as a program is reduced: locations,
    op numbers, the temporary folder."""
    msg = re.sub(r"^[^:\s]*\.tra:\d+:\d+: ", "", msg)
    msg = re.sub(r"^prog\d: ", "", msg)          # the executable's name
    msg = re.sub(r"\b(op|TRA op|IA op|line) \d+", r"\1 N", msg)
    msg = re.sub(r"/tmp/\S+", "PATH", msg)
    return msg


def compile_prog(w, d, src, level, block, emit_c=False, cflags=None):
    exe = os.path.join(d, "prog%d%s" % (level, ".c" if emit_c else ""))
    args = [TRAC, "-O%d" % level, "-P", ",".join(map(str, RANKS))]
    if block:
        args += ["--block", str(block)]
    if emit_c:
        args.append("-S")
    args += [src, "-o", exe]
    t0 = time.time()
    env = dict(os.environ)
    cflags = os.environ.get("DIFF_CFLAGS", cflags)
    if cflags:
        env["CFLAGS"] = cflags
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
    except subprocess.TimeoutExpired:
        return None, ("hang", "trac -O%d" % level, "trac ran over 600 s")
    finally:
        TIMES["compile"] += time.time() - t0
    if p.returncode == 0:
        return exe, None
    msg = first_error(p.stderr)
    kind = "reject" if p.returncode == 1 and "internal error" not in p.stderr else "crash"
    if p.returncode < 0:
        msg = "signal %d" % -p.returncode
    return None, (kind, "trac -O%d" % level, norm_msg(msg), p.stderr[-3000:])


def run_exe(w, exe, files, info, nranks, tag):
    cwd = w.folder(tag)
    # a file named on the command line is linked as in-FILE: an input that
    # is also an output is then not read from its output's default file
    # (NAME.npy), which the executable refuses to write over
    args = []
    for name, f in files.items():
        link = f if info["decls"][name]["path"] else "in-" + f
        os.symlink(os.path.join(os.path.dirname(exe), "in", f), os.path.join(cwd, link))
        if not info["decls"][name]["path"]:
            args.append("%s=%s" % (name, link))
    cmd = [exe, "--quiet"] + args if nranks == 1 else [MPIRUN, "-np", str(nranks), exe, "--quiet"] + args
    t0 = time.time()
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=w.env, timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, ("hang", tag, "ran over %d s" % RUN_TIMEOUT)
    finally:
        TIMES["run%d" % nranks] += time.time() - t0
    if p.returncode != 0:
        return None, ("exit", p.returncode, norm_msg(first_error(p.stderr)), p.stderr[-2000:])
    out = {}
    import scipy.sparse as sp
    for f in os.listdir(cwd):
        path = os.path.join(cwd, f)
        if os.path.islink(path):
            continue
        name = f.rsplit(".", 1)[0]
        if not f.endswith((".npy", ".npz")):
            continue
        with open(path, "rb") as fh:
            magic = fh.read(6)
        try:
            if magic == b"\x93NUMPY":
                out[name] = np.load(path)
            else:
                out[name] = sp.load_npz(path).toarray()
        except Exception as e:
            return None, ("badfile", f, repr(e)[:200])
        if f.endswith(".npz") and magic == b"\x93NUMPY":
            out[name + " (.npy in a .npz file)"] = np.zeros(1)
    # an output's name, not its file's
    byfile = {}
    for n, path in info["outputs"].items():
        byfile[(path or n + ".npy").rsplit(".", 1)[0]] = n
    return {byfile.get(k, k): v for k, v in out.items()}, None


def run_interp(w, src, rawdir, block, configs):
    outdir = w.folder("interp")
    args = [INTERP, src, rawdir, outdir, str(block)] + ["%d:%d" % c for c in configs]
    t0 = time.time()
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return None, ("hang", "interp", "over 600 s")
    finally:
        TIMES["interp"] += time.time() - t0
    if p.returncode not in (0,):
        if p.returncode == 1:
            return None, ("reject", "interp", norm_msg(first_error(p.stderr)), p.stderr[-2000:])
        return None, ("interp", p.returncode, norm_msg(first_error(p.stderr)), p.stderr[-2000:])
    res = {}
    for lv, s in configs:
        d = os.path.join(outdir, "%d-%d" % (lv, s))
        res[(lv, s)] = {f[:-4]: np.fromfile(os.path.join(d, f), dtype=np.float64)
                        for f in os.listdir(d)} if os.path.isdir(d) else {}
    return res, None


def differ(a, b, tol, bound=0.0):
    """None when a and b agree within tol, relative to the larger of their
    values and bound (what they are computed from: `#@ scale`), else why."""
    a = np.asarray(a)
    b = np.asarray(b)
    if a.shape != b.shape:
        if a.size == b.size and a.size:
            a = a.reshape(b.shape)
        else:
            return "shape %s against %s" % (a.shape, b.shape)
    if a.dtype != b.dtype and a.dtype.kind != "f" or b.dtype.kind != "f" and a.dtype != b.dtype:
        if not (a.dtype.kind == "f" and b.dtype.kind == "f"):
            return "type %s against %s" % (a.dtype, b.dtype)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    na, nb = np.isnan(a64), np.isnan(b64)
    if (na != nb).any():
        return "NaN at %d elements in one only" % int((na != nb).sum())
    fin = ~(na | nb)
    a64, b64 = a64[fin], b64[fin]
    if a64.size == 0:
        return None
    inf = np.isinf(a64) | np.isinf(b64)
    if (a64[inf] != b64[inf]).any():
        return "infinities differ"
    a64, b64 = a64[~inf], b64[~inf]
    if a64.size == 0:
        return None
    scale = max(np.abs(b64).max(), np.abs(a64).max(), bound)
    err = np.abs(a64 - b64).max()
    if err <= tol * scale or err == 0:
        return None
    i = int(np.abs(a64 - b64).argmax())
    return "max difference %.3g (relative %.3g > tol %.3g) at flat %d: %r against %r" % (
        err, err / scale if scale else err, tol, i, a64[i], b64[i])


class Check:
    """One program, every configuration: its findings, each a tuple whose
    first elements are its signature."""
    def __init__(self, w, text, seed, block, levels=LEVELS, ranks=RANKS, interp=True, emit_c=False):
        self.w, self.text, self.seed, self.block = w, text, seed, block
        self.m = meta(text)
        self.findings = []
        self.runs = 0
        d = w.folder("prog")
        self.d = d
        src = os.path.join(d, "prog.tra")
        with open(src, "w") as f:
            f.write(text)
        os.makedirs(os.path.join(d, "in"))
        raw = os.path.join(d, "raw")
        os.makedirs(raw)
        try:
            files, info = inputs.write_inputs(text, seed, os.path.join(d, "in"), raw=raw)
        except Exception as e:          # a declaration inputs.py cannot read: not trac's finding
            self.findings.append(("harness", "inputs", repr(e)))
            return
        self.outs = {}
        fails = {}
        for lv in levels:
            exe, err = compile_prog(w, d, src, lv, block, emit_c, self.m["cflags"])
            if err:
                self.findings.append(err)
                continue
            if emit_c:
                continue
            for n in ranks:
                out, err = run_exe(w, exe, files, info, n, "O%d-%d" % (lv, n))
                self.runs += 1
                if err:
                    fails[(lv, n)] = err
                else:
                    self.outs[(lv, n)] = out
        if emit_c:
            return
        self.compare(fails, info)
        if interp and INTERP and not self.m["error"]:
            cfg = [(lv, n) for lv in levels for n in ranks]
            res, err = run_interp(w, src, raw, block, cfg)
            self.runs += len(cfg)
            if err:
                self.findings.append(err)
            else:
                self.compare_interp(res, info)

    def compare(self, fails, info):
        want = self.m["error"]
        if fails and self.outs:
            (c, e) = sorted(fails.items())[0]
            self.findings.append(("runfail", "O%d/%d" % c, e[1], e[2], e[3] if len(e) > 3 else ""))
            return
        if fails:
            msgs = {(e[1], e[2]) for e in fails.values()}
            if len(msgs) > 1:
                self.findings.append(("errors-differ", "", " | ".join(sorted("%s %s" % m for m in msgs))))
            elif not want or want not in next(iter(msgs))[1] or next(iter(msgs))[0] != 1:
                (c, e) = sorted(fails.items())[0]
                self.findings.append(("runfail", "all", e[1], e[2], e[3] if len(e) > 3 else ""))
            return
        if want and self.outs:
            self.findings.append(("no-error", "", "expected a run-time error: " + want))
            return
        keys = sorted(self.outs)
        if not keys:
            return
        for c in keys:
            ref = min(k for k in keys if k[1] == c[1]) if True else keys[0]
            base = keys[0]
            for name, v in self.outs[c].items():
                tol = self.m["tol"].get(name, 1e-3)
                r = base if name not in self.m["rankdep"] else ref
                if r == c:
                    continue
                if name not in self.outs[r]:
                    self.findings.append(("disagree", "O%d/%d" % c, "O%d/%d" % r, name, "missing output"))
                    continue
                why = differ(v, self.outs[r][name], tol, self.m["scale"].get(name, 0.0))
                if why:
                    self.findings.append(("disagree", "O%d/%d" % c, "O%d/%d" % r, name, why))
            missing = set(self.outs[base]) - set(self.outs[c])
            for name in sorted(missing):
                self.findings.append(("disagree", "O%d/%d" % c, "O%d/%d" % base, name, "missing output"))

    def compare_interp(self, res, info):
        """The interpreter's plans agree with each other, and with the
        executable where it computes what the executable does."""
        keys = sorted(res)
        if not keys:
            return
        base = keys[0]
        exe = self.outs.get((0, 1), {})
        for c in keys:
            for name, v in res[c].items():
                tol = max(self.m["tol"].get(name, 1e-3), 1e-5)
                if c != base and name in res[base]:
                    why = differ(v, res[base][name], max(tol, 1e-9), self.m["scale"].get(name, 0.0))
                    if why:
                        self.findings.append(("disagree", "I%d/%d" % c, "I%d/%d" % base, name, why))
                if c == base and name in exe and name not in self.m["nointerp"]:
                    # the interpreter's exact values in the output's type: an f32
                    # program's exp(94.2) is inf, the interpreter's 8e40 (seed 1157)
                    if np.asarray(exe[name]).dtype == np.float32:
                        with np.errstate(over="ignore"):
                            v = v.astype(np.float32)
                    why = differ(v, np.asarray(exe[name], dtype=np.float64).reshape(-1), tol,
                                 self.m["scale"].get(name, 0.0))
                    if why:
                        self.findings.append(("disagree", "I%d/%d" % c, "O0/1", name, why))


def signature(f):
    """What a reduction must keep of finding f."""
    if f[0] == "disagree":
        return (f[0], f[1], f[2])
    if f[0] == "runfail":
        return f[:4]
    return f[:3]


# ---- generating ----

def make_group(seed, g, k):
    units, texts = [], []
    for j in range(g):
        useed = seed * 1000 + k * 100 + j
        u = gen.generate(useed, "u%d" % j, error=False)
        units.append(u)
    return units


def group_program(units, seed, block, cflags=None):
    head = ["#@ seed %d" % seed, "#@ block %d" % block] + (["#@ cflags " + cflags] if cflags else [])
    imports = sorted(set().union(*(u.imports for u in units)))
    head += ['import "%s";' % f for f in imports]
    for u in units:
        head += u.defs
    return "\n".join(head) + "\n" + "".join(unit_text(u) for u in units)


def unit_of(units, finding):
    for f in finding[1:]:
        if isinstance(f, str):
            m = re.search(r"\b[A-Z](u\d+)_\d+", f)
            if m:
                return m.group(1)
    return None


def main():
    sys.stdout.reconfigure(line_buffering=True)
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=0)
    ap.add_argument("--programs", type=int, default=0)
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    ap.add_argument("--group", type=int, default=20)
    ap.add_argument("--findings", default="difftest-findings")
    ap.add_argument("--report", default="")
    ap.add_argument("--no-reduce", action="store_true")
    ap.add_argument("--reduce-seconds", type=float, default=600)
    ap.add_argument("--require-coverage", action="store_true")
    ap.add_argument("--errors", type=float, default=0.05, help="fraction of groups that are error programs")
    ap.add_argument("--replay", nargs="*")
    ap.add_argument("--reduce", metavar="FILE", help="reduce FILE, keeping its first finding")
    ap.add_argument("--groups", metavar="A-B", help="only groups A to B of the campaign (1 is the first)")
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="trac-diff.")
    w = Work(root)
    try:
        if a.replay is not None:
            return replay(w, a.replay)
        if a.reduce:
            import reduce as red
            with open(a.reduce) as f:
                text = f.read()
            m = meta(text)
            c = Check(w, text, m["seed"], m["block"])
            if not c.findings:
                print("%s: no finding to keep" % a.reduce)
                return 1
            print("keeping: " + fmt(c.findings[0]))
            small = red.reduce(w, text, m["seed"], m["block"], c.findings[0], a.reduce_seconds, Check, signature)
            out = a.reduce.rsplit(".", 1)[0] + ".min.tra"
            with open(out, "w") as f:
                f.write(small)
            print("reduced to %d lines: %s" % (small.count("\n"), out))
            return 0
        return campaign(w, a)
    finally:
        if not os.environ.get("KEEP"):
            shutil.rmtree(root, True)
        else:
            print("work folder kept:", root)


def replay(w, files):
    fails = xfails = 0
    for path in files:
        with open(path) as f:
            text = f.read()
        m = meta(text)
        c = Check(w, text, m["seed"], m["block"])
        name = os.path.basename(path)
        if m["xfail"]:
            if c.findings:
                print("XFAIL %s: %s (known: %s)" % (name, fmt(c.findings[0]), m["xfail"]))
                xfails += 1
            else:
                print("XPASS %s: a known failure passes; drop its '#@ xfail' line" % name)
                fails += 1
            continue
        if c.findings:
            fails += 1
            print("FAIL %s" % name)
            for f in c.findings[:5]:
                print("  " + fmt(f))
        else:
            print("ok %s (%d runs)" % (name, c.runs))
    print("%d passed, %d failed" % (len(files) - fails - xfails, fails) + (", %d expected failures" % xfails
                                                                            if xfails else ""))
    return 1 if fails else 0


def suspects(units, text, finding):
    """The units a finding names: by a tensor's name (uN in it), else by
    the line of an error's location."""
    ids = set()
    for x in finding[1:]:
        ids |= set(re.findall(r"\b[A-Za-z]+(u\d+)_\d+", str(x)))
    if not ids:
        lines = [int(m) for x in finding[1:] for m in re.findall(r"prog\.tra:(\d+):", str(x))]
        if lines:
            src = text.split("\n")
            for ln in lines:
                for k in range(min(ln, len(src)) - 1, -1, -1):
                    m = re.search(r"\b[A-Z](u\d+)_\d+", src[k])
                    if m:
                        ids.add(m.group(1))
                        break
    return [u for u in units if u.uid in ids]


def isolate(w, units, text, seed, block, findings):
    """(unit, its program alone, its findings, runs) for the units that
    fail alone; when none does, the whole group."""
    if len(units) == 1:
        return [(units[0], text, findings, 0)]
    cf = meta(text)["cflags"]
    out = []
    tried = set()
    for f in findings:
        sus = suspects(units, text, f)
        if not sus:
            continue
        for u in sus:
            if u.uid in tried:
                continue
            tried.add(u.uid)
            t1 = group_program([u], seed, block, cf)
            c1 = Check(w, t1, seed, block)
            if c1.findings:
                out.append((u, t1, c1.findings, c1.runs))
    if out:                 # every unit a finding names that fails alone, not the first only
        return out
    # no unit named: halves of the group, as trac -S where the finding is trac's
    f = findings[0]
    emit = f[0] in ("crash", "reject", "hang") and str(f[1]).startswith("trac -O")
    levels = [int(f[1][7:])] if emit else LEVELS
    group = list(units)
    while len(group) > 1:
        half = group[:len(group) // 2]
        t1 = group_program(half, seed, block, cf)
        c1 = Check(w, t1, seed, block, levels=levels, emit_c=emit)
        if any(signature(g) == signature(f) for g in c1.findings):
            group = half
            continue
        t2 = group_program(group[len(group) // 2:], seed, block, cf)
        c2 = Check(w, t2, seed, block, levels=levels, emit_c=emit)
        if any(signature(g) == signature(f) for g in c2.findings):
            group = group[len(group) // 2:]
            continue
        break
    t1 = group_program(group, seed, block, cf)
    c1 = Check(w, t1, seed, block)
    return [(group[0] if len(group) == 1 else None, t1, c1.findings or findings, c1.runs)]


def fmt(f):
    return " ".join(str(x) for x in f[:5]).replace("\n", " ")[:400]


def known_failures():
    """(pattern, file) of the known failures not fixed yet: an `#@ known
    REGEX` line in a regression program marked `#@ xfail`.  A campaign
    reports a finding that matches one as known, not as new."""
    out = []
    for path in sorted(glob.glob(os.path.join(HERE, "regress", "*.tra"))):
        with open(path) as f:
            for line in f:
                if line.startswith("#@ known "):
                    out.append((re.compile(line[len("#@ known "):].strip()), os.path.basename(path)))
    return out


def campaign(w, a):
    import random
    import reduce as red
    known = known_failures()
    nknown = Counter()
    rng = random.Random(a.seed)
    t0 = time.time()
    cover = Counter()
    programs = runs = groups = 0
    found = []
    nagain = 0
    os.makedirs(a.findings, exist_ok=True)
    k = 0
    first, last = (int(x) for x in (a.groups + "-" + a.groups).split("-")[:2]) if a.groups else (1, 0)
    while True:
        if a.seconds and time.time() - t0 >= a.seconds:
            break
        if a.programs and programs >= a.programs:
            break
        if last and k >= last:
            break
        if not a.seconds and not a.programs and not last and k >= 1:
            break
        k += 1
        gseed = a.seed * 10000 + k
        block = rng.choice([0, 0, 2, 3, 4])
        error = k % 8 == 3 or rng.random() < a.errors      # now and then a program that must fail
        cflags = rng.choice([None, FAST_CFLAGS])
        if k < first:                   # skipped, its random choices made all the same
            continue
        if error:
            u = gen.generate(gseed, "u0", error=True)
            units = [u]
        else:
            units = make_group(gseed, a.group, 0)
        for u in units:
            cover.update(u.c)
        text = group_program(units, gseed, block, cflags)
        c = Check(w, text, gseed, block)
        programs += len(units)
        runs += c.runs
        groups += 1
        cc = os.environ.get("DIFF_CFLAGS", cflags)
        print("[%5.0fs] group %d: %d program(s), block %d%s, %d runs%s" % (
            time.time() - t0, k, len(units), block, ", cc " + cc if cc else "", c.runs,
            ", %d finding(s)" % len(c.findings) if c.findings else ""))
        sys.stdout.flush()
        if not c.findings:
            continue
        for f in c.findings:
            print("          " + fmt(f))
        culprits = isolate(w, units, text, gseed, block, c.findings)
        runs += sum(r for _, _, _, r in culprits)
        culprits = [(u, t1, fs) for u, t1, fs, _ in culprits]
        for u, t1, fs in culprits:
            sig = signature(fs[0])
            kn = [f for pat, f in known if pat.search(" ".join(map(str, fs[0][1:4])))]
            if kn:
                nknown[kn[0]] += 1
                print("[%5.0fs] known (%s): %s" % (time.time() - t0, kn[0], fmt(fs[0])))
                continue
            if any(sig == s for s, _ in found):
                # the same kind in the same configurations, maybe another
                # bug (the signature names no tensor): kept, not reduced
                path = os.path.join(a.findings, "again-%d-%d.tra" % (a.seed, nagain))
                nagain += 1
                with open(path, "w") as f:
                    f.write("# %s\n" % fmt(fs[0]))
                    f.write(t1)
                print("[%5.0fs] again: %s (%s)" % (time.time() - t0, fmt(fs[0]), path))
                continue
            print("[%5.0fs] FOUND %s" % (time.time() - t0, fmt(fs[0])))
            small = t1
            if not a.no_reduce:
                small = red.reduce(w, t1, gseed, block, fs[0], a.reduce_seconds, Check, signature)
            path = os.path.join(a.findings, "found-%d-%d.tra" % (a.seed, len(found)))
            with open(path, "w") as f:
                f.write("# %s\n" % fmt(fs[0]))
                f.write(small)
            print("          reduced to %d lines: %s" % (small.count("\n"), path))
            found.append((sig, path))
        sys.stdout.flush()
    el = time.time() - t0
    rep = report(cover, programs, runs, groups, el, found)
    if nknown:
        rep += "known failures met again (tests/diff/regress/, not fixed yet): " + \
            ", ".join("%s %d time(s)" % kv for kv in sorted(nknown.items())) + "\n"
    print(rep)
    if a.report:
        with open(a.report, "w") as f:
            f.write(rep)
    missing = [c for c in gen.CONSTRUCTS if not cover[c]]
    if a.require_coverage and missing:
        print("constructs never made: " + " ".join(missing))
        return 1
    return 1 if found else 0


def report(cover, programs, runs, groups, el, found):
    lines = ["difftest: %d programs in %d compiled groups, %d runs (3 levels x 3 rank counts and the interpreter), "
             "%.0f s, %d finding(s)" % (programs, groups, runs, el, len(found))]
    lines.append("seconds: " + ", ".join("%s %.0f" % kv for kv in sorted(TIMES.items())))
    for sig, path in found:
        lines.append("  %s: %s" % (path, " ".join(map(str, sig))))
    lines.append("constructs covered (uses of each):")
    width = max(len(c) for c in gen.CONSTRUCTS)
    row = []
    for c in gen.CONSTRUCTS:
        row.append("%-*s %6d" % (width, c, cover[c]))
        if len(row) == 3:
            lines.append("  " + "   ".join(row))
            row = []
    if row:
        lines.append("  " + "   ".join(row))
    missing = [c for c in gen.CONSTRUCTS if not cover[c]]
    lines.append("never made: " + (" ".join(missing) if missing else "none"))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
