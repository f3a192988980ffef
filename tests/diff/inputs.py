"""inputs.py: the files a .tra program of the generator reads, from its text
and a seed alone (so a reduced program keeps its inputs).

    files = write_inputs(text, seed, folder)     # {name: file name}, in folder
    decls = parse(text)                          # sizes, inputs, params, outputs

What an input holds is said by the `#@` line gen.py writes beside it:
    #@ NAME grid                   multiples of 1/8 in [-2, 2]
    #@ NAME int LO HI [oob]        integers in [LO, HI) (HI a number or a
                                   size); oob: one element is HI, out of range
    #@ NAME sparse FMT DENSITY     grid values at DENSITY, row 0 empty and an
                                   empty 3x3 block; FMT csr, csc, coo, csr-z,
                                   coo-z (compressed .npz) or npy (dense)
An input without one is grid.  Each tensor's values depend only on the seed
and its name.
"""
import os
import re
import zlib

import numpy as np

DT = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64}

SIZE_RE = re.compile(r"\bsize\s+([^;]*);")
DECL_RE = re.compile(r"^\s*(input|param)\s+(\w+)\s*(?:\[([^\]]*)\])?\s*(?::\s*([\w ]+?))?\s*(?:=\s*(.*?))?\s*;",
                     re.M)
OUT_RE = re.compile(r'^\s*output\s+(\w+)\s*(?:=\s*"([^"]*)")?\s*;', re.M)
NOTE_RE = re.compile(r"^\s*#@\s*(\w+)\s+(.*)$", re.M)


def strip_comments(text):
    out = []
    for line in text.split("\n"):
        if line.lstrip().startswith("#"):
            out.append("")
            continue
        out.append(re.sub(r"(#|//).*$", "", line))
    return "\n".join(out)


def eval_size(expr, sizes):
    expr = re.sub(r"\b([A-Za-z_]\w*)\b", lambda m: str(sizes[m.group(1)]), expr)
    return int(eval(expr.replace("/", "//"), {"__builtins__": {}}))


def parse(text):
    code = strip_comments(text)
    sizes = {}
    for m in SIZE_RE.finditer(code):
        for part in re.split(r",(?![^()]*\))", m.group(1)):
            name, _, expr = part.partition("=")
            sizes[name.strip()] = eval_size(expr.strip(), sizes)
    decls = {}
    for m in DECL_RE.finditer(code):
        kind, name, dims, ty, init = m.groups()
        ty = (ty or "").split()
        dtype = next((t for t in ty if t in DT), "f32")
        shape = tuple(eval_size(d.strip(), sizes) for d in dims.split(",")) if dims and dims.strip() else ()
        path = None
        if init and init.startswith('"'):
            path = init.strip('"')
        if kind == "param" and not path:
            continue
        decls[name] = dict(kind=kind, shape=shape, dtype=dtype, sparse="sparse" in ty, path=path)
    notes = {m.group(1): m.group(2).split() for m in NOTE_RE.finditer(text)}
    outputs = {m.group(1): m.group(2) for m in OUT_RE.finditer(code)}
    return dict(sizes=sizes, decls=decls, notes=notes, outputs=outputs)


def values(name, d, note, sizes, seed):
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    shape = d["shape"]
    if note and note[0] == "int":
        lo = int(note[1])
        hi = int(note[2]) if note[2].lstrip("-").isdigit() else sizes.get(note[2], 1)
        a = rng.integers(lo, max(hi, lo + 1), size=shape)
        if len(note) > 3 and note[3] == "oob" and a.size:
            a.flat[rng.integers(a.size)] = hi
        return a.astype(DT[d["dtype"]])
    if d["dtype"] in ("i32", "i64"):
        return rng.integers(0, 2, size=shape).astype(DT[d["dtype"]])
    a = rng.integers(-16, 17, size=shape) / 8.0
    if d["sparse"] or (note and note[0] == "sparse"):
        density = float(note[2]) if note and len(note) > 2 else 0.3
        a = a * (rng.random(shape) < density)
        if len(shape) == 2 and shape[0] > 1:
            a[0, :] = 0                                  # an empty row
        if len(shape) == 2 and min(shape) >= 4:
            r0, c0 = rng.integers(0, shape[0] - 2), rng.integers(0, shape[1] - 2)
            a[r0:r0 + 3, c0:c0 + 3] = 0                  # an empty block
    return a.astype(DT[d["dtype"]])


def write_inputs(text, seed, folder, raw=None):
    """Every input and file param of the program into folder: {name: file};
    with raw, also NAME.f64 (row-major f64) there for the interpreter."""
    import scipy.sparse as sp
    info = parse(text)
    files = {}
    for name, d in info["decls"].items():
        note = info["notes"].get(name)
        a = values(name, d, note, info["sizes"], seed)
        if raw:
            a.astype(np.float64).tofile(os.path.join(raw, name + ".f64"))
        fmt = note[1] if note and note[0] == "sparse" else "npy"
        if d["sparse"] and fmt != "npy" and len(d["shape"]) == 2:
            kind = fmt.split("-")[0]
            m = {"csr": sp.csr_matrix, "csc": sp.csc_matrix, "coo": sp.coo_matrix}[kind](a)
            fname = d["path"] or name + ".npz"
            if not fname.endswith(".npz"):
                fname = name + ".npz"
            sp.save_npz(os.path.join(folder, fname), m, compressed=fmt.endswith("-z"))
        else:
            fname = d["path"] or name + ".npy"
            np.save(os.path.join(folder, fname), a)
        files[name] = fname
    return files, info
