#!/usr/bin/env python3
"""example.py: the data and the check of one example, for examples/Makefile.

    example.py gen NAME DIR      write DIR/NAME.in/X.npy for every input X that
                                 DIR/NAME.tensors lists (the tensors part of the
                                 program's --help): NAME.py's data(shapes, rng)
                                 if it has one, else uniform(-1, 1) as in the
                                 TRA paper, from a fixed seed
    example.py check NAME DIR    compare DIR/NAME.out/Y.npy with NAME.py's
                                 reference(**inputs)["Y"] for every output Y, or
                                 call NAME.py's check(**tensors); exit 1 if wrong

NAME.py lives beside NAME.tra and defines reference() or check(); every
array it gets is float64.  TOLERANCE (default 1e-5) bounds the largest
error relative to the largest reference value.
"""
import importlib.util
import os
import re
import sys

import numpy as np

sys.dont_write_bytecode = True     # no __pycache__ beside the examples

HERE = os.path.dirname(os.path.abspath(__file__))


def tensors(name, dir):
    """{tensor: (role, dtype, shape)} from DIR/NAME.tensors: the inputs and
    the outputs (a param that is also an output is an output here)."""
    out = {}
    with open(os.path.join(dir, name + ".tensors")) as f:
        for line in f:
            m = re.match(r"\s+(\w+)\s+([a-z,]+)\s+(f32|f64|i32|i64)\s+\(([^)]*)\)", line)
            roles = m.group(2).split(",") if m else []
            if "input" in roles or "output" in roles:
                shape = tuple(int(d) for d in m.group(4).split(",") if d.strip())
                out[m.group(1)] = ("input" if "input" in roles else "output",
                                   {"f32": np.float32, "f64": np.float64, "i32": np.int32,
                                    "i64": np.int64}[m.group(3)], shape)
    return out


def module(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def gen(name, dir):
    ts = tensors(name, dir)
    mod = module(name)
    rng = np.random.default_rng(0)
    shapes = {t: shape for t, (role, _, shape) in ts.items() if role == "input"}
    if hasattr(mod, "data"):
        data = mod.data(shapes, rng)
    else:
        data = {t: rng.uniform(-1, 1, shape) for t, shape in shapes.items()}
    os.makedirs(os.path.join(dir, name + ".in"), exist_ok=True)
    for t, (role, dtype, shape) in ts.items():
        if role != "input":
            continue
        a = np.asarray(data[t], dtype=dtype)
        if a.shape != shape:
            sys.exit("%s: data() made %s with shape %s, the program reads %s" % (name, t, a.shape, shape))
        np.save(os.path.join(dir, name + ".in", t + ".npy"), a)


def check(name, dir):
    ts = tensors(name, dir)
    mod = module(name)
    got = {}
    for t, (role, _, _) in ts.items():
        sub = {"input": ".in", "output": ".out"}.get(role)
        if sub:
            got[t] = np.load(os.path.join(dir, name + sub, t + ".npy")).astype(np.float64)
    if hasattr(mod, "check"):
        ok = mod.check(**got)
        print("%s: %s" % (name, "ok" if ok else "WRONG"))
        return ok
    tol = getattr(mod, "TOLERANCE", 1e-5)
    inputs = {t: got[t] for t, (role, _, _) in ts.items() if role == "input"}
    want = mod.reference(**inputs)
    ok = True
    for t, ref in want.items():
        ref = np.asarray(ref, dtype=np.float64)
        if got[t].shape != ref.shape:
            print("%s: %s has shape %s, numpy's has %s: WRONG" % (name, t, got[t].shape, ref.shape))
            ok = False
            continue
        err = np.abs(got[t] - ref).max() / max(np.abs(ref).max(), 1e-300)
        good = err <= tol
        ok &= good
        print("%s: %s %s, max relative error %.2g against numpy (tolerance %.0e): %s"
              % (name, t, "x".join(map(str, ref.shape)), err, tol, "ok" if good else "WRONG"))
    return ok


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("gen", "check"):
        sys.exit("usage: example.py gen|check NAME DIR")
    what, name, dir = sys.argv[1:]
    if what == "gen":
        gen(name, dir)
    else:
        sys.exit(0 if check(name, dir) else 1)
