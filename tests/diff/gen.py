"""gen.py: random valid .tra programs, type- and shape-aware (issue 34).

    unit = generate(seed, uid)      # one program, its names prefixed by uid
    unit.text                       # its declarations and statements
    unit.constructs                 # Counter: construct name -> uses

A unit is one program of LANGUAGE.md version 2.  Every name it declares
carries its uid, so units concatenate into one .tra file (difftest.py
compiles many units at once: mpicc is the slow part).  What it reads is
described by `#@` comment lines next to the declarations, which inputs.py
turns into files for a seed: the program text alone, with that seed, gives
its inputs, so a reduced program keeps them.

Numbers are chosen so that every configuration must agree:
  - float inputs and file-initialised params are multiples of 1/8 in [-2, 2],
    so sums and products of them are exact in f32 (bits tracked in Expr), and
    a comparison, where, max, min, argmax or a conversion to an integer is
    made only of exact values (ties then break the same way everywhere);
  - exp, log, sqrt and division only of arguments kept in range (log(1 +
    abs(e)), sqrt(1 + e * e), e / (2 + tanh(d))), so nothing is infinite or
    NaN and gradients are finite;
  - integers stay far from overflow (magnitudes tracked).
The tolerance of each output (difftest.py) comes from the unit: exact when
the output is exact or an integer, else the dtype's epsilon times the
unit's depth and reduction lengths.
"""
import math
import random
import re
from collections import Counter

# Every construct of LANGUAGE.md version 2 (and tra.5) the generator makes;
# the coverage report lists each with how often it was made.
CONSTRUCTS = """
size size_expr const input_f32 input_f64 input_i32 input_i64 input_scalar input_default_file
sparse_csr sparse_csc sparse_coo sparse_coo_compressed sparse_dense_npy sparse_f64 sparse_empty_rows sparse_empty_block
param_zeros param_ones param_uniform param_normal param_file param_f64
output output_default_file output_sparse_npz print
def_tensor def_scalar update_sub update_add update_mul update_div update_set
access implicit_sum contraction_3 contraction_4 diagonal trace constant_index
index_value index_value_in reduce_sum reduce_mean reduce_max reduce_min reduce_argmax reduce_argmin
reduce_multi reduce_range
add sub mul div neg pow compare_lt compare_le compare_gt compare_ge compare_eq compare_ne where
exp log sqrt abs tanh sigmoid relu stop_gradient conv_f32 conv_f64 conv_i32 conv_i64
int_arith int_div
sparse_spmm sparse_spmm_t sparse_elementwise sparse_reduce sparse_sddmm sparse_dense_read sparse_window
gather gather_matrix gather_dim2 gather_nested gather_grad scatter_sgd gather_window
shift padding_range inferred_range reverse stride_pool conv_valid conv_same conv_halo diagonal_shift
grad grad_input grad_sparse grad_through_gather grad_through_window grad_through_max grad_through_sparse lse
repeat repeat_counter repeat_nested counter_value counter_window ist
def_function import_nn import_linalg
extent_not_divisible runtime_error
size_list input_untyped number_exp comment_slashes repeat_size
""".split()

FLOAT_LITS = ["0.5", "2", "0.25", "1.5", "3", "0.125", "4"]     # exact in binary
FLOAT_LITS_INEXACT = ["0.1", "0.3", "0.7"]
# the same numbers written with an exponent (number_exp)
EXP_FORM = {"0.5": "5e-1", "2": "2e0", "0.25": "2.5e-1", "1.5": "15e-1", "3": "3E0", "0.125": "1.25e-1",
            "4": "0.4e1", "0.1": "1e-1", "0.3": "3e-1", "0.7": "7.0e-1"}
IDX = list("ijklmnpqrsuvwyzaceghk")
MAXDIM = 8                      # index names a sub-expression may hold (ir.h)
EPS = {"f32": 2.0 ** -23, "f64": 2.0 ** -52}
MANT = {"f32": 24, "f64": 53}


class Size:
    def __init__(self, name, val):
        self.name, self.val = name, val


class Ten:
    """A tensor the program may read: dims are Sizes; exact, bits and mag
    bound its values (see Expr)."""
    def __init__(self, name, dims, dtype, role, exact=True, bits=3, mag=2.0, sparse=False,
                 deps=(), lo=None, hi=None, depth=0):
        self.name, self.dims, self.dtype, self.role = name, list(dims), dtype, role
        self.exact, self.bits, self.mag, self.sparse = exact, bits, mag, sparse
        self.deps = set(deps)           # params and inputs its value depends on (for grad)
        self.lo, self.hi = lo, hi       # an integer tensor's value range [lo, hi)
        self.depth = depth              # repeat depth it was defined at
        self.diffok = True              # grad through it is deterministic
        self.scale = None               # bound on the values it is computed from, if not mag

    def bound(self):
        """A bound on the magnitude of the values this tensor is computed
        from: the scale of its rounding errors (difftest.unit_text).  mag,
        unless updates made the values larger (a param's SGD steps) or mag
        is looser than needed for what it is used for here (a gather's is
        the bound of the TransE distance, not of a row).  Kept apart from
        mag, which steers generation: the programs of a seed stay the same."""
        return self.mag if self.scale is None else self.scale


class Expr:
    """An expression: its text, element type, whether its value is exact
    (computed without rounding in any order), the fraction bits and a bound
    on the magnitude of its values, the tensors it depends on, and whether
    its derivative is deterministic (no max/min/relu of rounded values)."""
    def __init__(self, text, dtype, exact, bits, mag, deps=(), diffok=True, atom=False, sparse=None):
        self.text, self.dtype, self.exact, self.bits, self.mag = text, dtype, exact, bits, mag
        self.deps = set(deps)
        self.diffok = diffok
        self.atom = atom
        self.sparse = sparse            # the sparse input it is a plain access of, if any

    def par(self):
        return self.text if self.atom else "(" + self.text + ")"

    def sum_side(self):
        """Its text as a side of + or -: a comparison binds looser (a < b
        + c is a < (b + c); a == b + c == d does not parse)."""
        return "(" + self.text + ")" if getattr(self, "low", False) else self.text


def fits(dtype, bits, mag):
    """Is a value of `bits` fraction bits and magnitude below `mag` exact in dtype?"""
    if dtype in ("i32", "i64"):
        return mag < (2 ** 30 if dtype == "i32" else 2 ** 50)
    m = 0
    while 2 ** m < mag:
        m += 1
    return bits + m <= MANT[dtype] - 2


class Unit:
    def __init__(self, seed, uid):
        self.seed, self.uid = seed, uid
        self.r = random.Random(seed)
        # spellings (size lists, untyped f32, exponents, // comments,
        # repeat over a size): their own stream, so a seed's programs mean
        # what they meant before they were added
        self.spell = random.Random("spelling %d" % seed)
        self.nspell = 0
        # constructs added since (sparse windows, shifted diagonals,
        # gathered windows): their own stream too, so a seed's program is
        # the same until one of them is made
        self.late = random.Random("late %d" % seed)
        self.lines = []
        self.decls = []                 # sizes, inputs, params: before every statement
        self.c = Counter()
        self.sizes = []
        self.tensors = []               # visible tensors, innermost scope last
        self.outputs = []               # (name, dtype, exact, Ten)
        self.depth = 0
        self.counters = []              # loop counters in scope: (name, count)
        self.n = 0
        self.cost = 1.0                 # grows with depth and reduction lengths: the tolerance
        self.interp_ok = True           # the IA interpreter computes what the executable does
        self.rank_dependent = False     # IST: each rank count trains its own way
        self.error = None               # a program that must fail at run time: its message class
        self.imports = set()
        self.defs = []

    # ---- names and lines ----
    def fresh(self, kind):
        self.n += 1
        return "%s%s_%d" % (kind, self.uid, self.n)

    def emit(self, line):
        if self.spell.random() < 0.03:
            self.lines.append("    " * self.depth + "// %s: line %d" % (self.uid, len(self.lines)))
            self.c["comment_slashes"] += 1
        self.lines.append("    " * self.depth + line)

    def spelled(self, p):
        return self.spell.random() < p

    def late_chance(self, p):
        return self.late.random() < p

    def note(self, line):
        self.decls.append("#@ " + line)

    def decl(self, line):
        self.decls.append(line)

    @property
    def text(self):
        return "\n".join(self.decls + self.lines) + "\n"

    def chance(self, p):
        return self.r.random() < p

    # ---- sizes ----
    def add_size(self, val, expr=None):
        s = Size(self.fresh("S"), val)
        if self.decls and self.decls[-1].startswith("size ") and self.spelled(0.3):
            self.decls[-1] = self.decls[-1][:-1] + ", %s = %s;" % (s.name, expr or val)
            self.c["size_list"] += 1
        else:
            self.decl("size %s = %s;" % (s.name, expr or val))
        self.c["size"] += 1
        if expr:
            self.c["size_expr"] += 1
        self.sizes.append(s)
        return s

    def size(self):
        return self.r.choice(self.sizes)

    def dims(self, rank):
        return [self.size() for _ in range(rank)]

    # ---- declarations ----
    def float_dtype(self):
        return self.fdt

    def add_input(self, dims, dtype=None, sparse=False, lo=None, hi=None, hi_name=None):
        dtype = dtype or self.fdt
        name = self.fresh("X")
        shape = "[%s]" % ", ".join(d.name for d in dims) if dims else ""
        ty = dtype + (" sparse" if sparse else "")
        default = ""
        if not sparse and self.chance(0.1):
            default = ' = "%s.npy"' % name.lower()
            self.c["input_default_file"] += 1
        if dtype in ("i32", "i64"):
            self.note("%s int %d %s" % (name, lo, hi_name or hi))
        elif sparse:
            fmt = self.r.choice(["csr", "csc", "coo", "coo-z", "csr-z", "npy"])
            self.note("%s sparse %s %.2f" % (name, fmt, self.r.choice([0.15, 0.3, 0.5])))
            self.c[{"csr": "sparse_csr", "csc": "sparse_csc", "coo": "sparse_coo", "npy": "sparse_dense_npy"}
                   .get(fmt, "sparse_coo_compressed" if fmt == "coo-z" else "sparse_csr")] += 1
            self.c["sparse_empty_rows"] += 1
            if any(d.val >= 4 for d in dims):
                self.c["sparse_empty_block"] += 1
            if dtype == "f64":
                self.c["sparse_f64"] += 1
        else:
            self.note("%s grid" % name)
        if dtype == "f32" and self.spelled(0.25):      # f32 unless a type is given
            ty = ty[4:]
            self.c["input_untyped"] += 1
        self.decl("input %s%s%s%s;" % (name, shape, " : " + ty if ty else "", default))
        self.c["input_" + dtype] += 1
        if not dims:
            self.c["input_scalar"] += 1
        t = Ten(name, dims, dtype, "input", sparse=sparse, deps={name}, lo=lo, hi=hi)
        if dtype in ("i32", "i64"):
            t.bits, t.mag = 0, float(max(abs(lo), abs(hi)) + 1)
        self.tensors.append(t)
        return t

    def add_param(self, dims, dtype=None):
        dtype = dtype or self.fdt
        name = self.fresh("W")
        shape = "[%s]" % ", ".join(d.name for d in dims) if dims else ""
        init = self.r.choice(["zeros", "ones", "uniform", "normal", "file", "file"])
        exact = init in ("zeros", "ones", "file")
        if init == "uniform":
            text = "uniform(-0.5, 0.5)"
        elif init == "normal":
            text = "normal(0, 0.3)"
        elif init == "file":
            text = '"%s.npy"' % name.lower()
            self.note("%s grid" % name)
        else:
            text = init
        if not exact:
            self.interp_ok = False      # the interpreter's stand-ins are not trac's draws
        self.c["param_" + init] += 1
        if dtype == "f64":
            self.c["param_f64"] += 1
        self.decl("param %s%s%s = %s;" % (name, shape, "" if dtype == "f32" and self.chance(0.5) else " : " + dtype,
                                           text))
        t = Ten(name, dims, dtype, "param", exact=exact, deps={name})
        self.tensors.append(t)
        return t

    def output(self, t):
        if t.role == "def" and t.depth > 0:
            return
        if any(o[0] == t.name for o in self.outputs):
            return
        if t.sparse and t.role == "def" and self.chance(0.5):
            self.emit('output %s = "%s.npz";' % (t.name, t.name.lower()))
            self.c["output_sparse_npz"] += 1
        elif self.chance(0.15):
            self.emit('output %s = "%s_out.npy";' % (t.name, t.name.lower()))
            self.c["output_default_file"] += 1
        else:
            self.emit("output %s;" % t.name)
        self.c["output"] += 1
        self.outputs.append((t.name, t.dtype, t.exact and t.role != "param" or t.dtype[0] == "i", t))

    def visible(self, pred=lambda t: True):
        return [t for t in self.tensors if pred(t)]


# ---- expressions ----

class Exhausted(Exception):
    """A statement ran out of index names: it is left out."""


class Stmt:
    """One statement's indices: name -> Size, and which have a plain use."""
    def __init__(self, u):
        self.u = u
        self.vars = {}
        self.used = set()
        self.lhs = []
        self.bound = set()              # names a reduction binds: never used outside it

    def var_for(self, size, avoid=()):
        """An index of this size: an existing one or a new one."""
        have = [v for v, s in self.vars.items() if s is size and v not in avoid and v not in self.bound]
        if have and self.u.chance(0.75):
            return self.u.r.choice(have)
        # at most MAXDIM (8) names a statement: trac rejects a
        # sub-expression of more (frontend/expr.c, check_rank), as the
        # interpreter does (seed 1167 made one of 9: a where over three
        # reads of a 3-d input)
        if len(set(self.vars) | self.bound) < MAXDIM:
            for v in IDX:
                if v not in self.vars and v not in self.bound:
                    self.vars[v] = size
                    return v
        if have:
            return have[0]
        raise Exhausted()


def lit(u, dtype, exact_only=False):
    if dtype in ("i32", "i64"):
        v = u.r.choice([1, 2, 3, 5, 7])
        return Expr(str(v), dtype, True, 0, float(v), atom=True)
    if not exact_only and u.chance(0.2):
        v = u.r.choice(FLOAT_LITS_INEXACT)
        return Expr(spell_number(u, v), dtype, False, 60, float(v), atom=True)
    v = u.r.choice(FLOAT_LITS)
    bits = {"0.5": 1, "0.25": 2, "1.5": 1, "0.125": 3}.get(v, 0)
    return Expr(spell_number(u, v), dtype, True, bits, float(v), atom=True)


def spell_number(u, v):
    if u.spelled(0.2):
        u.c["number_exp"] += 1
        return EXP_FORM[v]
    return v


def access(u, st, t):
    """t read at indices of the statement: plain names, now and then a
    diagonal or a constant position."""
    idx = []
    diag = False
    for d, s in enumerate(t.dims):
        if not t.sparse and d > 0 and s.val > 1 and u.chance(0.06) and not diag:
            c = u.r.randrange(s.val)
            idx.append(str(c))
            u.c["constant_index"] += 1
            continue
        if d > 0 and not diag and u.chance(0.12):
            prev = [i for i, s2 in zip(idx, t.dims[:d]) if s2 is s and i in st.vars]
            if prev:
                idx.append(prev[0])
                diag = True
                u.c["diagonal"] += 1
                continue
        v = st.var_for(s, avoid=[i for i in idx])
        idx.append(v)
        st.used.add(v)
    text = t.name + ("[%s]" % ", ".join(idx) if t.dims else "")
    u.c["access"] += 1
    if t.sparse:
        u.c["sparse_dense_read"] += 1
    return Expr(text, t.dtype, t.exact, t.bits, t.mag, t.deps, t.diffok, atom=True,
                sparse=t if t.sparse else None)


def convert(u, e, dtype):
    if e.dtype == dtype:
        return e
    u.c["conv_" + dtype] += 1
    if dtype in ("i32", "i64") and e.dtype in ("f32", "f64"):
        u.interp_ok = False     # the interpreter does not truncate
        if not e.exact:
            # only exact values are converted to integers: rounding could
            # otherwise cross a whole number in one configuration only
            return None
        return Expr("%s(%s)" % (dtype, e.text), dtype, True, 0, e.mag + 1, e.deps, False, atom=True)
    exact = e.exact and fits(dtype, e.bits, e.mag)
    if dtype in ("f32",) and e.dtype == "f64":
        exact = exact and fits("f32", e.bits, e.mag)
    return Expr("%s(%s)" % (dtype, e.text), dtype, exact, e.bits, e.mag, e.deps,
                e.diffok and dtype[0] == "f" and e.dtype[0] == "f", atom=True)


def leaf(u, st, dtype):
    ts = u.visible(lambda t: t.dtype == dtype)
    r = u.r.random()
    if ts and r < 0.72:
        return access(u, st, u.r.choice(ts))
    if r < 0.8 and st.used:
        v = u.r.choice(sorted(st.used))
        size = st.vars[v]
        u.c["index_value"] += 1
        e = Expr(v, "i64", True, 0, float(size.val), atom=True)
        return convert(u, e, dtype) if dtype != "i64" else e
    if r < 0.84 and u.counters:
        name, count = u.r.choice(u.counters)
        u.c["counter_value"] += 1
        e = Expr(name, "i64", True, 0, float(count), atom=True)
        return convert(u, e, dtype) if dtype != "i64" else e
    others = u.visible(lambda t: t.dtype != dtype and (t.dtype[0] == "f" or dtype[0] == "f"))
    if others and r < 0.9:
        e = convert(u, access(u, st, u.r.choice(others)), dtype)
        if e:
            return e
    if ts:
        return access(u, st, u.r.choice(ts))
    return lit(u, dtype)


def unary(u, e):
    """A function of e kept in range."""
    fl = e.dtype[0] == "f"
    choices = ["neg", "abs", "relu"] + (["exp", "log", "sqrt", "tanh", "sigmoid", "stop", "pow"] if fl else [])
    f = u.r.choice(choices)
    u.c[{"stop": "stop_gradient"}.get(f, f)] += 1
    u.cost *= 1.5
    inexact = dict(exact=False, bits=60)
    if f == "neg":
        return Expr("-" + e.par(), e.dtype, e.exact, e.bits, e.mag, e.deps, e.diffok)
    if f == "abs":
        return Expr("abs(%s)" % e.text, e.dtype, e.exact, e.bits, e.mag, e.deps, e.diffok, atom=True)
    if f == "relu":
        return Expr("relu(%s)" % e.text, e.dtype, e.exact, e.bits, e.mag, e.deps, e.diffok, atom=True)
    if f == "tanh":
        return Expr("tanh(%s)" % e.text, e.dtype, False, 60, 1.0, e.deps, e.diffok, atom=True)
    if f == "sigmoid":
        return Expr("sigmoid(%s)" % e.text, e.dtype, False, 60, 1.0, e.deps, e.diffok, atom=True)
    if f == "stop":
        return Expr("stop_gradient(%s)" % e.text, e.dtype, e.exact, e.bits, e.mag, set(), True, atom=True)
    if f == "exp":
        if e.mag > 6:
            return Expr("exp(tanh(%s))" % e.text, e.dtype, False, 60, 3.0, e.deps, e.diffok, atom=True)
        import math
        return Expr("exp(%s)" % e.text, e.dtype, False, 60, math.exp(e.mag), e.deps, e.diffok, atom=True)
    if f == "log":
        return Expr("log(1 + abs(%s))" % e.text, e.dtype, False, 60, e.mag, e.deps, e.diffok, atom=True)
    if f == "sqrt":
        return Expr("sqrt(1 + %s * %s)" % (e.par(), e.par()), e.dtype, False, 60, e.mag + 1, e.deps, e.diffok,
                    atom=True)
    # pow: a whole exponent keeps exactness
    k = u.r.choice([2, 2, 3])
    if e.mag ** k > 1e6:
        e = Expr("tanh(%s)" % e.text, e.dtype, False, 60, 1.0, e.deps, e.diffok, atom=True)
    return Expr("%s ** %d" % (e.par(), k), e.dtype, e.exact and fits(e.dtype, e.bits * k, e.mag ** k),
                e.bits * k, e.mag ** k, e.deps, e.diffok)


def binary(u, a, b):
    fl = a.dtype[0] == "f"
    op = u.r.choice(["+", "-", "*", "*", "/"])
    deps = a.deps | b.deps
    ok = a.diffok and b.diffok
    if op in "+-":
        u.c["add" if op == "+" else "sub"] += 1
        bits, mag = max(a.bits, b.bits), a.mag + b.mag
        return Expr("%s %s %s" % (a.sum_side(), op, b.par() if op == "-" else b.sum_side()), a.dtype,
                    a.exact and b.exact and fits(a.dtype, bits, mag), bits, mag, deps, ok)
    if op == "*":
        u.c["mul"] += 1
        bits, mag = a.bits + b.bits, a.mag * b.mag
        if mag > (1e4 if fl else 1e6):
            return Expr("%s + %s" % (a.sum_side(), b.sum_side()), a.dtype, a.exact and b.exact and
                        fits(a.dtype, max(a.bits, b.bits), a.mag + b.mag), max(a.bits, b.bits), a.mag + b.mag,
                        deps, ok)
        return Expr("%s * %s" % (a.par(), b.par()), a.dtype, a.exact and b.exact and fits(a.dtype, bits, mag),
                    bits, mag, deps, ok)
    u.c["div"] += 1
    if not fl:
        u.c["int_div"] += 1
        u.interp_ok = False
        return Expr("%s / %s" % (a.par(), b.par()), a.dtype, True, 0, a.mag, deps, ok)
    if u.chance(0.5):
        k = u.r.choice(["2", "4", "8"])
        return Expr("%s / %s" % (a.par(), k), a.dtype, a.exact and fits(a.dtype, a.bits + 3, a.mag),
                    a.bits + 3, a.mag, a.deps, a.diffok)
    return Expr("%s / (2 + tanh(%s))" % (a.par(), b.text), a.dtype, False, 60, a.mag, deps, ok)


def compare(u, a, b):
    op = u.r.choice(["<", "<=", ">", ">=", "==", "!="])
    u.c["compare_" + {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}[op]] += 1
    e = Expr("%s %s %s" % (a.par(), op, b.par()), a.dtype, True, 0, 1.0, set(), True)
    e.low = True
    return e


def expr(u, st, dtype, depth, exact=False):
    """An expression of dtype over the statement's indices; exact: its value
    must be exact (it feeds a comparison, where's condition, max...)."""
    for _ in range(8):
        saved = (dict(st.vars), set(st.used), set(st.bound), Counter(u.c), u.cost, u.interp_ok)
        e = expr1(u, st, dtype, depth, exact)
        if e is not None and (not exact or e.exact):
            return e
        st.vars, st.used, st.bound, u.c, u.cost, u.interp_ok = saved
    e = leaf(u, st, dtype)
    if exact and not e.exact:
        return lit(u, dtype, exact_only=True)
    return e


def expr1(u, st, dtype, depth, exact):
    r = u.r.random()
    if depth <= 0 or r < 0.3:
        return leaf(u, st, dtype)
    if r < 0.45:
        e = expr(u, st, dtype, depth - 1, exact)
        return unary(u, e)
    if r < 0.75:
        a = expr(u, st, dtype, depth - 1, exact)
        b = expr(u, st, dtype, depth - 1, exact)
        return binary(u, a, b)
    if r < 0.83:
        # where(cond, a, b); the condition exact, maybe of another type
        cdt = u.r.choice([dtype, dtype, u.fdt, "i64"])
        ca = expr(u, st, cdt, depth - 1, exact=True)
        cb = expr(u, st, cdt, depth - 1, exact=True) if u.chance(0.6) else lit(u, cdt, exact_only=True)
        cond = compare(u, ca, cb) if u.chance(0.8) else ca
        a = expr(u, st, dtype, depth - 1, exact)
        b = expr(u, st, dtype, depth - 1, exact) if u.chance(0.7) else lit(u, dtype, exact_only=exact)
        u.c["where"] += 1
        if cdt != dtype and untyped(a.text) and untyped(b.text):
            # branches of numbers alone (or functions of numbers: log(1 +
            # abs(3e-1)), seed 1156) take the condition's type (tra.5):
            # one converted gives the where the statement's (seed 1132)
            a = Expr("%s(%s)" % (dtype, a.text), dtype, a.exact, a.bits, a.mag, a.deps, a.diffok, atom=True)
        return Expr("where(%s, %s, %s)" % (cond.text, a.text, b.text), dtype, a.exact and b.exact,
                    max(a.bits, b.bits), max(a.mag, b.mag), a.deps | b.deps, a.diffok and b.diffok, atom=True)
    if r < 0.88:
        # a comparison as a value
        a = expr(u, st, dtype, depth - 1, exact=True)
        b = expr(u, st, dtype, depth - 1, exact=True) if u.chance(0.5) else lit(u, dtype, exact_only=True)
        return compare(u, a, b)
    return reduction(u, st, dtype, depth - 1, exact)


FUNCTIONS = {"exp", "log", "sqrt", "abs", "tanh", "sigmoid", "relu", "stop_gradient"}


def untyped(text):
    """Whether an expression reads no tensor, index or counter and converts nothing: numbers and
    functions of numbers, which trac types by what they meet (frontend/expr.c)."""
    if "[" in text:
        return False
    words = re.findall(r"[A-Za-z_]\w*", re.sub(r"[0-9.]+e[-+]?[0-9]+", "0", text))
    return all(w in FUNCTIONS for w in words)


def reduction(u, st, dtype, depth, exact):
    """An explicit reduction over one or two new indices of the body."""
    kind = u.r.choice(["sum", "sum", "mean", "max", "min", "argmax", "argmin"])
    if kind == "mean" and dtype[0] == "i":
        kind = "sum"
    inner = Stmt(u)
    inner.vars = dict(st.vars)
    inner.used = set(st.used)
    inner.bound = set(st.bound)
    before = set(inner.vars)
    need_exact = exact or kind in ("max", "min", "argmax", "argmin")
    body = expr(u, inner, dtype, depth, exact=need_exact)
    new = [v for v in inner.vars if v not in before and v in inner.used]
    if not new:
        return body
    if kind in ("argmax", "argmin"):
        new = new[:1]
    elif len(new) > 2:
        new = new[:2]
    # indices of the body not bound here are summed outside or are the
    # statement's: they must be known to the statement
    for v in inner.vars:
        if v not in st.vars:
            st.vars[v] = inner.vars[v]
    st.used |= inner.used - set(new)
    binds = []
    for v in new:
        if u.chance(0.25):
            binds.append("%s in %s" % (v, inner.vars[v].name))
            u.c["reduce_range"] += 1
        else:
            binds.append(v)
    # the bound names are not free in the statement any more
    for v in new:
        if v in st.used:
            st.used.discard(v)
    n = 1
    for v in new:
        n *= inner.vars[v].val
    u.cost *= 1 + n
    if len(new) > 1:
        u.c["reduce_multi"] += 1
    u.c["reduce_" + kind] += 1
    text = "%s[%s](%s)" % (kind, ", ".join(binds), body.text)
    # the reduced names are the reduction's alone
    st.bound |= set(new) | inner.bound
    for v in new:
        st.vars.pop(v, None)
    if kind == "sum":
        return Expr(text, dtype, body.exact and fits(dtype, body.bits, body.mag * n), body.bits, body.mag * n,
                    body.deps, body.diffok, atom=True)
    if kind == "mean":
        return Expr(text, dtype, False, 60, body.mag, body.deps, body.diffok, atom=True)
    if kind in ("max", "min"):
        return Expr(text, dtype, body.exact, body.bits, body.mag, body.deps, body.diffok and body.exact, atom=True)
    return Expr(text, dtype, True, 0, float(max(inner.vars[v].val for v in new)), set(), True, atom=True)


# ---- statements ----

ACCESS_RE = None


def accessed_in(text):
    import re
    accessed = set()
    for m in re.finditer(r"\b[A-Z]\w*\[([^\[\]]*(?:\[[^\]]*\][^\[\]]*)*)\]", text):
        accessed |= set(re.findall(r"\b[a-z]\b", m.group(1)))
    return accessed


def values_ok(text, lhs):
    """Is every index used as a value either on the left or in an access?
    (The generator only uses as values indices it has read with; this
    checks it, on the final text.)"""
    import re
    accessed = set()
    for m in re.finditer(r"\b[A-Z]\w*\[([^\[\]]*(?:\[[^\]]*\][^\[\]]*)*)\]", text):
        accessed |= set(re.findall(r"\b[a-z]\b", m.group(1)))
    for m in re.finditer(r"\b(sum|mean|max|min|argmax|argmin)\[([^\]]*)\]", text):
        accessed |= {b.split()[0] for b in m.group(2).split(",") if " in " in b}
    plain = set(re.findall(r"(?<![\w.])([a-z])(?![\w\[(])", text))
    return plain <= accessed | set(lhs)

def define(u, dims, dtype, rhs_fn, st=None, scalar=False):
    """T[lhs] = rhs; the indices of dims on the left."""
    st = st or Stmt(u)
    lhs = []
    for s in dims:
        v = st.var_for(s, avoid=lhs)
        lhs.append(v)
    st.lhs = lhs
    e = rhs_fn(st)
    if e is None or not values_ok(e.text, lhs):
        return None
    # every index on the left must occur on the right
    import re
    acc = accessed_in(e.text)
    extra = [v for v in lhs if not re.search(r"(?<![\w.])%s(?![\w])" % v, e.text)]
    parts = []
    for v in lhs:
        if v in acc:
            parts.append(v)
        else:
            parts.append("%s in %s" % (v, st.vars[v].name))
            u.c["index_value_in"] += 1
    text = e.sum_side() if extra else e.text
    for v in extra:
        conv = "%s(%s)" % (dtype, v) if dtype != "i64" else v
        text = "%s + %s * 0" % (text, conv) if dtype[0] == "i" else "%s + 0.125 * %s" % (text, conv)
        u.c["index_value"] += 1
    exact = e.exact and (not extra or fits(dtype, max(e.bits, 3), e.mag + 16))
    if extra and dtype[0] == "f":
        # the added index values count in the tensor's bits and magnitude
        # (found-1161-0: a T of 0/1 + i/8 + j/8 kept as whole and below 1,
        # so a product of four reads of it was called exact at 34 bits)
        e.bits = max(e.bits, 3)
        e.mag += sum(0.125 * st.vars[v].val for v in extra)
    name = u.fresh("T")
    if dims:
        u.emit("%s[%s] = %s;" % (name, ", ".join(parts), text))
        u.c["def_tensor"] += 1
    else:
        u.emit("%s = %s;" % (name, text))
        u.c["def_scalar"] += 1
    summed = [v for v in st.vars if v not in lhs and v in acc]
    if summed:
        u.c["implicit_sum"] += 1
        n = 1
        for v in summed:
            n *= st.vars[v].val
        u.cost *= 1 + n
        e.mag *= n
        exact = exact and fits(dtype, e.bits, e.mag)
    t = Ten(name, dims, dtype, "def", exact=exact, bits=e.bits, mag=max(e.mag, 1.0), deps=e.deps,
            depth=u.depth)
    t.diffok = e.diffok
    t.maxred = ("max[" in text or "min[" in text) and e.diffok
    if e.sparse is not None:
        t.sparse_src = e.sparse
    u.tensors.append(t)
    return t


def stmt_elementwise(u):
    dims = u.dims(u.r.choice([0, 1, 1, 2, 2, 2, 3]))
    dtype = u.fdt if u.chance(0.85) else u.r.choice(["i32", "i64", "f64" if u.fdt == "f32" else "f32"])
    if dtype[0] == "i":
        u.c["int_arith"] += 1
    if not dims and not u.visible(lambda t: t.dtype == dtype):
        dtype = u.fdt
    return define(u, dims, dtype, lambda st: expr(u, st, dtype, u.r.choice([1, 2, 3])))


def stmt_contraction(u):
    """A product of 2-4 accesses, indices shared at random: matmuls, batched,
    outer products, many operands."""
    fts = u.visible(lambda t: t.dtype == u.fdt and t.dims)
    if len(fts) < 2:
        return None
    k = u.r.choice([2, 2, 3, 4])
    ops = [u.r.choice(fts) for _ in range(k)]
    st = Stmt(u)
    accs = [access(u, st, t) for t in ops]
    free = sorted(v for v in st.used)
    u.r.shuffle(free)
    keep = free[:u.r.randrange(0, min(3, len(free)) + 1)]
    dims = [st.vars[v] for v in keep]
    st.lhs = keep
    text = " * ".join(a.text for a in accs)
    bits = sum(a.bits for a in accs)
    mag = 1.0
    for a in accs:
        mag *= a.mag
    if mag > 1e4:
        text = " * ".join("tanh(%s)" % a.text for a in accs)
        bits, mag = 60, 1.0
    if k >= 3:
        u.c["contraction_%d" % min(k, 4)] += 1
    if any(a.sparse is not None for a in accs):
        u.c["sparse_spmm"] += 1
    deps = set()
    for a in accs:
        deps |= a.deps
    e = Expr(text, u.fdt, all(a.exact for a in accs) and fits(u.fdt, bits, mag), bits, mag, deps,
             all(a.diffok for a in accs))
    name = u.fresh("T")
    lhs = ", ".join(keep)
    u.emit("%s%s = %s;" % (name, "[%s]" % lhs if keep else "", text))
    u.c["def_tensor" if keep else "def_scalar"] += 1
    summed = [v for v in st.vars if v not in keep]
    n = 1
    for v in summed:
        n *= st.vars[v].val
    if summed:
        u.c["implicit_sum"] += 1
        u.cost *= 1 + n
    t = Ten(name, dims, u.fdt, "def", exact=e.exact and fits(u.fdt, bits, mag * n), bits=bits, mag=max(mag * n, 1),
            deps=deps, depth=u.depth)
    t.diffok = e.diffok
    u.tensors.append(t)
    return t


def stmt_reduce(u):
    ts = u.visible(lambda t: t.dims and t.dtype in (u.fdt, "i32", "i64") and not (t.dtype[0] == "i" and t.mag > 1e6))
    if not ts:
        return None
    t = u.r.choice(ts)
    dims = [d for d in t.dims if u.chance(0.5)]
    return define(u, dims, t.dtype, lambda st: reduction(u, st, t.dtype, 2, False))


# ---- sparse ----

def stmt_sparse(u):
    m, n = u.size(), u.size()
    dtype = u.fdt
    A = u.add_input([m, n], dtype, sparse=True)
    kind = u.r.choice(["spmm", "spmm_t", "elementwise", "reduce", "sddmm", "sddmm"])
    f = u.size()
    if kind in ("spmm", "spmm_t"):
        X = u.add_param([n if kind == "spmm" else m, f], dtype) if u.chance(0.5) else \
            u.add_input([n if kind == "spmm" else m, f], dtype)
        name = u.fresh("T")
        if kind == "spmm":
            u.emit("%s[i, f] = %s[i, j] * %s[j, f];" % (name, A.name, X.name))
            dims = [m, f]
        else:
            u.emit("%s[j, f] = %s[i, j] * %s[i, f];" % (name, A.name, X.name))
            dims = [n, f]
        u.c["sparse_" + kind] += 1
        u.cost *= 1 + max(m.val, n.val)
        t = Ten(name, dims, dtype, "def", exact=X.exact, bits=6, mag=4.0 * max(m.val, n.val), deps=A.deps | X.deps,
                depth=u.depth)
    elif kind == "elementwise":
        B = u.add_input([m, n], dtype)
        fn = u.r.choice(["relu(%s[i, j])", "abs(%s[i, j])", "-%s[i, j]", "2 * %s[i, j]", "tanh(%s[i, j])",
                         "sqrt(abs(%s[i, j]))"])
        name = u.fresh("T")
        u.emit("%s[i, j] = %s * %s[i, j];" % (name, fn % A.name, B.name))
        u.c["sparse_elementwise"] += 1
        exact = "tanh" not in fn and "sqrt" not in fn
        t = Ten(name, [m, n], dtype, "def", exact=exact, bits=6, mag=8.0, deps=A.deps | B.deps, sparse=True,
                depth=u.depth)
        t.diffok = "sqrt" not in fn     # sqrt(abs) at a stored zero: no derivative
    elif kind == "reduce":
        name = u.fresh("T")
        if u.chance(0.5):
            u.emit("%s[i] = %s[i, j];" % (name, A.name))
            dims = [m]
        else:
            u.emit("%s[j] = max[i](%s[i, j]);" % (name, A.name))
            dims = [n]
        u.c["sparse_reduce"] += 1
        t = Ten(name, dims, dtype, "def", bits=3, mag=2.0 * max(m.val, n.val), deps=A.deps, depth=u.depth)
    else:
        U = u.add_param([m, f], dtype)
        V = u.add_param([n, f], dtype) if u.chance(0.5) else u.add_input([n, f], dtype)
        name = u.fresh("T")
        if u.chance(0.5):
            R = u.add_input([m, n], dtype, sparse=u.chance(0.5))
            u.emit("%s[i, j] = %s[i, j] * (%s[i, k] * %s[j, k] - %s[i, j]);" % (name, A.name, U.name, V.name, R.name))
        else:
            u.emit("%s[i, j] = %s[i, j] * %s[i, k] * %s[j, k];" % (name, A.name, U.name, V.name))
        u.c["sparse_sddmm"] += 1
        u.cost *= 1 + f.val
        t = Ten(name, [m, n], dtype, "def", exact=U.exact and V.exact, bits=9, mag=16.0 * f.val + 4,
                deps=A.deps | U.deps | V.deps, sparse=True, depth=u.depth)
    u.tensors.append(t)
    return t


# ---- gathers ----

def int_index(u, dims, target, dtype=None):
    """An integer input whose values index target (a Size): 0 .. target-1."""
    return u.add_input(dims, dtype or u.r.choice(["i32", "i64"]), lo=0, hi=target.val, hi_name=target.name)


def stmt_gather(u):
    tables = u.visible(lambda t: t.dtype == u.fdt and len(t.dims) == 2 and not t.sparse)
    if not tables:
        tables = [u.add_param(u.dims(2)) if u.chance(0.5) else u.add_input(u.dims(2))]
    E = u.r.choice(tables)
    V, D = E.dims
    B = u.size()
    kind = u.r.choice(["row", "row", "matrix", "dim2", "nested", "transe"])
    name = u.fresh("T")
    if kind == "row" and u.late_chance(0.3):
        # a window of the gathered rows: shifted (zero past the end) or
        # reversed
        idx = int_index(u, [B], V)
        pos = u.r.choice(["d + 1", "d - 1", "%s - 1 - d" % D.name])
        u.emit("%s[b, d in %s] = %s[%s[b], %s];" % (name, D.name, E.name, idx.name, pos))
        dims = [B, D]
        u.c["gather_window"] += 1
    elif kind == "row":
        idx = int_index(u, [B], V)
        u.emit("%s[b, d] = %s[%s[b], d];" % (name, E.name, idx.name))
        dims = [B, D]
    elif kind == "matrix":
        K = u.size()
        idx = int_index(u, [B, K], V)
        u.emit("%s[b, k, d] = %s[%s[b, k], d];" % (name, E.name, idx.name))
        dims = [B, K, D]
        u.c["gather_matrix"] += 1
    elif kind == "dim2":
        idx = int_index(u, [B], D)
        u.emit("%s[v, q] = %s[v, %s[q]];" % (name, E.name, idx.name))
        dims = [V, B]
        u.c["gather_dim2"] += 1
    elif kind == "nested":
        C = u.size()
        idx = int_index(u, [B], V)
        j = int_index(u, [C], B)
        u.emit("%s[c, d] = %s[%s[%s[c]], d];" % (name, E.name, idx.name, j.name))
        dims = [C, D]
        u.c["gather_nested"] += 1
    else:
        h = int_index(u, [B], V)
        t = int_index(u, [B], V)
        u.emit("%s[b] = sum[d]((%s[%s[b], d] - %s[%s[b], d]) ** 2);" % (name, E.name, h.name, E.name, t.name))
        dims = [B]
        u.cost *= 1 + D.val
    u.c["gather"] += 1
    # a copy is as exact as the table; TransE's sum of squared differences
    # only if it fits (E's bits doubled, its magnitude squared D times)
    bits, mag = E.bits * 2, E.mag ** 2 * D.val + 1
    t = Ten(name, dims, u.fdt, "def", exact=E.exact and (kind != "transe" or fits(u.fdt, bits, mag)), bits=bits,
            mag=mag, deps=E.deps, depth=u.depth)
    if kind != "transe":
        t.scale = E.bound()             # the table's rows
    t.diffok = E.diffok
    u.tensors.append(t)
    t.gathered = E
    if E.role == "param" and E.dtype == u.fdt and u.chance(0.4):
        # an SGD step on the gathered table: its rows scattered back into it
        loss = loss_of(u, [t])
        g = u.fresh("G")
        u.emit("%s = grad(%s, %s);" % (g, loss, E.name))
        u.emit("%s[v, d] -= 0.125 * %s[v, d];" % (E.name, g))
        # a row's gradient: 2 t summed over the rows (columns) gathered from it
        if kind != "transe":
            hits = dims[1].val if kind == "dim2" else math.prod(d.val for d in dims) // D.val
            E.scale = E.bound() * (1 + 0.125 * 2 * hits)
        u.c["grad"] += 1
        u.c["grad_through_gather"] += 1
        u.c["gather_grad"] += 1
        u.c["scatter_sgd"] += 1
        u.c["update_sub"] += 1
        E.exact, E.bits = False, 60
    return t


# ---- windows: index arithmetic ----

def stmt_window(u):
    kind = u.r.choice(["shift", "padding", "inferred", "reverse", "pool", "conv_valid", "conv_same"])
    if kind == "shift" and u.late_chance(0.3):
        kind = "diagonal"
    fts = u.visible(lambda t: t.dtype == u.fdt and len(t.dims) == 2 and not t.sparse and
                    min(d.val for d in t.dims) >= 3)
    X = u.r.choice(fts) if fts and u.chance(0.6) else None
    # a window of one index name may read a sparse input (cut from its
    # stored elements); a convolution's or a pool's two names may not
    one_name = kind in ("shift", "padding", "inferred", "reverse", "diagonal")
    sparse = one_name and u.late_chance(0.12)
    if X is None or sparse:
        dims = [u.size(), u.size()]
        if min(d.val for d in dims) < 3:
            dims = [u.add_size(u.r.choice([5, 7, 9])), dims[1] if dims[1].val >= 3 else u.add_size(4)]
        if sparse:
            X = u.add_input(dims, sparse=True)
            u.c["sparse_window"] += 1
        else:
            X = u.add_input(dims) if u.chance(0.6) else u.add_param(dims)
    N, J = X.dims
    name = u.fresh("T")
    k = 1
    maxpool = False
    if kind == "shift":
        s = u.r.choice([1, 2])
        u.emit("%s[i, j] = %s[i + %d, j] - %s[i, j];" % (name, X.name, s, X.name))
        dims = [N, J]
        u.c["shift"] += 1
    elif kind == "padding":
        u.emit("%s[i in %s, j] = %s[i - 1, j] + %s[i + 1, j];" % (name, N.name, X.name, X.name))
        dims = [N, J]
        u.c["padding_range"] += 1
    elif kind == "inferred":
        s = u.r.choice([1, 2])
        u.emit("%s[i, j] = %s[i + %d, j];" % (name, X.name, s))
        dims = None
        u.c["inferred_range"] += 1
        dims = [Size("(%s - %d)" % (N.name, s), N.val - s), J]
        sz = u.add_size(N.val - s, "%s - %d" % (N.name, s))
        dims = [sz, J]
    elif kind == "diagonal":
        # one name in two positions, one shifted: a shifted diagonal, i's
        # extent from its plain use (zero past the end)
        s = u.r.choice([1, 2, -1])
        u.emit("%s[i] = %s[i, i %s %d];" % (name, X.name, "+" if s > 0 else "-", abs(s)))
        dims = [N]
        u.c["diagonal_shift"] += 1
    elif kind == "reverse":
        if u.chance(0.5):
            u.emit("%s[i, j] = %s[%s - 1 - i, j];" % (name, X.name, N.name))
            dims = [N, J]
        else:
            u.emit("%s[i, j] = %s[%s - 1 - 2*i, j];" % (name, X.name, N.name))
            dims = [u.add_size((N.val + 1) // 2, "(%s + 1) / 2" % N.name), J]
        u.c["reverse"] += 1
    elif kind == "pool":
        if u.chance(0.5):
            u.emit("%s[y, x] = max[py in 2, px in 2](%s[2*y + py, 2*x + px]);" % (name, X.name))
            u.c["reduce_max"] += 1
            maxpool = True
        else:
            u.emit("%s[y, x] = sum[py in 2, px in 2](%s[2*y + py, 2*x + px]);" % (name, X.name))
        dims = [u.add_size(N.val // 2, "%s / 2" % N.name), u.add_size(J.val // 2, "%s / 2" % J.name)]
        u.c["stride_pool"] += 1
        k = 4
    else:
        R = u.add_size(u.r.choice([2, 3]))
        K = u.add_input([R, R]) if u.chance(0.5) else u.add_param([R, R])
        if kind == "conv_valid":
            u.emit("%s[y, x] = %s[dy, dx] * %s[y + dy, x + dx];" % (name, K.name, X.name))
            dims = [u.add_size(N.val - R.val + 1, "%s - %s + 1" % (N.name, R.name)),
                    u.add_size(J.val - R.val + 1, "%s - %s + 1" % (J.name, R.name))]
        else:
            u.emit("%s[y in %s, x in %s] = %s[dy, dx] * %s[y + dy - 1, x + dx - 1];" % (
                name, N.name, J.name, K.name, X.name))
            dims = [N, J]
        u.c[kind] += 1
        u.c["conv_halo"] += 1
        k = R.val * R.val
        X = Ten(X.name, X.dims, X.dtype, X.role, X.exact and K.exact, X.bits + K.bits, X.mag * K.mag * k,
                X.deps | K.deps)
    u.cost *= 1 + k
    t = Ten(name, dims, u.fdt, "def", exact=X.exact, bits=X.bits, mag=X.mag * 2 * k, deps=X.deps, depth=u.depth)
    t.window = True
    t.maxred = maxpool
    t.diffok = X.diffok and (not maxpool or X.exact)
    u.tensors.append(t)
    return t


# ---- defs and the standard library ----

def stmt_call(u):
    fts = u.visible(lambda t: t.dtype == u.fdt and len(t.dims) == 2 and not t.sparse)
    if not fts:
        return None
    X = u.r.choice(fts)
    n, d = X.dims
    kind = u.r.choice(["nn", "linalg", "def", "lse"])
    name = u.fresh("T")
    if kind == "lse":
        # a stabilised log-sum-exp written out, as users write it (its max
        # is not differentiated: autodiff.c's lse_shift); exp's argument <= 0
        m = u.fresh("T")
        u.emit("%s[a] = max[b](%s[a, b]);" % (m, X.name))
        s = "log(sum[b](exp(%s[a, b] - %s[a])))" % (X.name, m)
        u.emit("%s[a] = %s;" % (name, "%s[a] + %s" % (m, s) if u.chance(0.5) else "%s + %s[a]" % (s, m)))
        u.c["lse"] += 1
        t = Ten(name, [n], u.fdt, "def", exact=False, bits=60, mag=X.mag + math.log(d.val) + 1, deps=X.deps,
                depth=u.depth)
        t.diffok = X.diffok
        t.maxred = X.diffok
        u.cost *= 4 * (1 + d.val)
    elif kind == "nn" and u.fdt == "f32" or kind == "nn" and u.chance(0.5):
        h = u.size()
        W = u.add_param([d, h])
        b = u.add_param([h])
        if W.dtype != u.fdt or b.dtype != u.fdt:
            return None
        f = u.r.choice(["linear", "relu_layer", "sigmoid_layer", "tanh_layer"])
        u.imports.add("nn.tra")
        u.c["import_nn"] += 1
        u.emit("%s = %s(%s, %s, %s);" % (name, f, X.name, W.name, b.name))
        t = Ten(name, [n, h], u.fdt, "def", exact=False, bits=60, mag=1.0 + 4 * d.val, deps=X.deps | W.deps | b.deps,
                depth=u.depth)
        # of a gradient (diffok false): a loss over it would need a second derivative
        t.diffok = X.diffok
        if u.chance(0.5):
            p = u.fresh("T")
            u.emit("%s = %s(%s);" % (p, u.r.choice(["softmax", "log_softmax"]), name))
            u.tensors.append(t)
            t = Ten(p, [n, h], u.fdt, "def", exact=False, bits=60, mag=30.0, deps=t.deps, depth=u.depth)
            t.diffok = X.diffok
        u.cost *= 4 * (1 + d.val)
    elif kind == "linalg":
        u.imports.add("linalg.tra")
        u.c["import_linalg"] += 1
        f = u.r.choice(["transpose", "frobenius", "norm1", "norm2", "norminf"] + (["trace", "diag"] if n is d else []))
        if f in ("norm1", "norm2", "norminf"):
            v = u.fresh("T")
            u.emit("%s[i] = %s[i, j];" % (v, X.name))
            u.emit("%s = %s(%s);" % (name, f, v))
            dims = []
        else:
            u.emit("%s = %s(%s);" % (name, f, X.name))
            dims = {"transpose": [d, n], "diag": [n]}.get(f, [])
        if f == "trace":
            u.c["trace"] += 1
        # a sum (trace; the norms' T[i] = X[i, j] sums over j) is exact
        # only if it fits, as any other sum
        exact = f in ("transpose", "diag", "trace", "norm1", "norminf") and X.exact and \
            (f in ("transpose", "diag") or fits(u.fdt, X.bits, X.mag * n.val * d.val))
        t = Ten(name, dims, u.fdt, "def", exact=exact, bits=X.bits, mag=X.mag * n.val * d.val, deps=X.deps,
                depth=u.depth)
        t.diffok = X.diffok and f != "norminf"
        u.cost *= 1 + n.val * d.val
    else:
        fname = u.fresh("f")
        Y = u.r.choice(fts)
        if Y.dims[0] is not d:
            Y = u.add_input([d, u.size()])
        h = Y.dims[1]
        body = u.r.choice(["tanh(A[a, c] * B[c, e])", "A[a, c] * B[c, e] + 1", "relu(A[a, c]) * B[c, e]"])
        u.defs.append("def %s(A[a, c], B[c, e]) -> Z[a, e] {\n    Z[a, e] = %s;\n}" % (fname, body))
        u.emit("%s = %s(%s, %s);" % (name, fname, X.name, Y.name))
        u.c["def_function"] += 1
        # the body's sum over c is exact only if it fits (found-1136-0: a
        # 3 x 11 x 11 product of 18-bit terms, exact by this rule before,
        # one ulp apart in two summation orders)
        bits, mag = X.bits + Y.bits, X.mag * Y.mag * d.val + 1
        t = Ten(name, [n, h], u.fdt, "def", exact="tanh" not in body and X.exact and Y.exact and
                fits(u.fdt, bits, mag), bits=bits, mag=mag, deps=X.deps | Y.deps, depth=u.depth)
        t.diffok = X.diffok and Y.diffok
        u.cost *= 1 + d.val
    u.tensors.append(t)
    return t


# ---- gradients ----

def loss_of(u, ts):
    """A scalar loss over tensors ts, squared sums."""
    parts = []
    for t in ts:
        idx = IDX[:len(t.dims)]
        acc = t.name + ("[%s]" % ", ".join(idx) if t.dims else "")
        if t.mag > 100:
            # of an argument below about 4: a saturated tanh's gradient
            # (1 - tanh^2) is all rounding in f32, far from the interpreter's
            acc = "tanh(%s * %r)" % (acc, 2.0 ** -math.ceil(math.log2(t.mag / 4)))
        parts.append("sum[%s](%s * %s)" % (", ".join(idx), acc, acc) if t.dims else "%s * %s" % (acc, acc))
    name = u.fresh("L")
    u.emit("%s = %s;" % (name, " + ".join(parts)))
    u.c["def_scalar"] += 1
    return name


def stmt_grad(u, inside_loop=False):
    wrt = u.visible(lambda t: t.role in ("param", "input") and t.dtype[0] == "f" and t.dims and
                    t.dtype == u.fdt)
    if not wrt:
        return None
    W = u.r.choice(wrt)
    users = [t for t in u.visible(lambda t: t.role == "def" and W.name in t.deps and t.dtype == u.fdt and
                                  t.diffok)]
    use = u.r.sample(users, min(len(users), u.r.choice([1, 2]))) if users else []
    loss = loss_of(u, use or [W])
    g = u.fresh("G")
    u.emit("%s = grad(%s, %s);" % (g, loss, W.name))
    u.c["grad"] += 1
    if W.role == "input":
        u.c["grad_input"] += 1
        if W.sparse:
            u.c["grad_sparse"] += 1
    for t in use:
        if getattr(t, "gathered", None) is not None:
            u.c["grad_through_gather"] += 1
        if getattr(t, "window", False):
            u.c["grad_through_window"] += 1
            u.c["gather_grad"] += 1
        if t.sparse or getattr(t, "sparse_src", None) is not None:
            u.c["grad_through_sparse"] += 1
        if getattr(t, "maxred", False):
            u.c["grad_through_max"] += 1
    u.cost *= 4
    gt = Ten(g, W.dims, W.dtype, "def", exact=False, bits=60, mag=100.0, deps=W.deps, depth=u.depth,
             sparse=W.sparse)
    gt.diffok = False
    u.tensors.append(gt)
    if W.role == "param" and u.chance(0.7):
        op = u.r.choice(["-=", "-=", "+=", "*=", "/=", "="])
        idx = ", ".join(IDX[:len(W.dims)])
        lr = u.r.choice(["0.125", "0.0625", "0.01"])
        if op in ("-=", "+="):
            rhs = "%s * %s[%s]" % (lr, g, idx)
        elif op == "*=":
            rhs = "1 + %s * tanh(%s[%s])" % (lr, g, idx)
        elif op == "/=":
            rhs = "2 + tanh(%s[%s])" % (g, idx)
        else:
            rhs = "%s[%s] - %s * %s[%s]" % (W.name, idx, lr, g, idx)
        u.emit("%s[%s] %s %s;" % (W.name, idx, op, rhs))
        # the bound on its values after the step (gt.mag: the generator's
        # bound on a gradient)
        W.scale = {"-=": W.bound() + float(lr) * gt.mag, "+=": W.bound() + float(lr) * gt.mag,
                   "=": W.bound() + float(lr) * gt.mag, "*=": W.bound() * (1 + float(lr)), "/=": W.bound()}[op]
        u.c[{"-=": "update_sub", "+=": "update_add", "*=": "update_mul", "/=": "update_div", "=": "update_set"}[op]] += 1
        if any(getattr(t, "gathered", None) is not None for t in use) and op in ("-=", "+="):
            u.c["scatter_sgd"] += 1
        W.exact = False
        W.bits = 60
        for t in u.tensors:
            if W.name in t.deps and t.role == "def":
                t.exact = False         # later reads see the new value
    return gt


# ---- loops ----

def stmt_repeat(u):
    if u.depth >= 2:
        return None
    count = u.r.choice([1, 2, 3])
    counter = None
    header = "repeat %d {" % count
    if u.chance(0.6):
        counter = "b%s_%d" % (u.uid, u.n)
        u.n += 1
        header = "repeat %s in %d {" % (counter, count)
        u.c["repeat_counter"] += 1
        if u.spelled(0.3):          # repeat b in N, N a size
            u.nspell += 1
            rs = "R%s_%d" % (u.uid, u.nspell)
            u.decl("size %s = %d;" % (rs, count))
            header = "repeat %s in %s {" % (counter, rs)
            u.c["repeat_size"] += 1
    if u.depth:
        u.c["repeat_nested"] += 1
    u.c["repeat"] += 1
    u.emit(header)
    u.depth += 1
    mark = len(u.tensors)
    # from the second iteration on, a param the body updates is rounded
    for t in u.tensors:
        if t.role == "param":
            t.exact, t.bits = False, 60
    bound0 = {t.name: t.bound() for t in u.tensors if t.role == "param"}
    if counter:
        u.counters.append((counter, count))
        if u.chance(0.6):
            B = u.add_size(u.r.choice([1, 2, 3]))
            # the data set: count batches of B rows
            NX = u.add_size(count * B.val, "%d * %s" % (count, B.name))
            sparse = u.late_chance(0.25)
            X = u.add_input([NX, u.size()], sparse=sparse)
            u.c["sparse_window"] += sparse
            xb = u.fresh("T")
            u.emit("%s[n in %s, d] = %s[%s*%s + n, d];" % (xb, B.name, X.name, counter, B.name))
            u.c["counter_window"] += 1
            u.tensors.append(Ten(xb, [B, X.dims[1]], u.fdt, "def", deps=X.deps, depth=u.depth))
    u.cost *= 1 + count
    for _ in range(u.r.randint(1, 4)):
        statement(u, in_loop=True)
    stmt_grad(u, inside_loop=True)
    if u.chance(0.3):
        ts = u.tensors[mark:]
        if ts:
            u.emit("print %s;" % u.r.choice(ts).name)
            u.c["print"] += 1
    del u.tensors[mark:]
    if counter:
        u.counters.pop()
    u.depth -= 1
    u.emit("}")
    # every param's value after the loop is rounded: not exact any more;
    # what the body's steps added to its bound, added count times
    for t in u.tensors:
        if t.role == "param":
            t.exact, t.bits = False, 60
            if t.name in bound0 and t.bound() != bound0[t.name]:
                t.scale = bound0[t.name] + count * (t.bound() - bound0[t.name])


def ist_program(u):
    """repeat b in NB split H every J: independent subnet training (its
    result depends on the rank count: compared across -O levels only)."""
    u.rank_dependent = True
    u.interp_ok = False
    B = u.add_size(2)
    NB = u.add_size(u.r.choice([2, 3, 4]))
    D = u.add_size(u.r.choice([3, 4]))
    H = u.add_size(6)
    C = u.add_size(u.r.choice([2, 3]))
    NX = u.add_size(B.val * NB.val, "%s * %s" % (NB.name, B.name))
    X = u.add_input([NX, D])
    Yl = u.add_input([NX, C])
    W1 = u.add_param([D, H])
    W2 = u.add_param([H, C])
    b2 = u.add_param([C])
    b, every = "b%s" % u.uid, u.r.choice([1, 2])
    act = u.r.choice(["relu", "tanh", "sigmoid"])
    u.emit("repeat %s in %s split %s every %d {" % (b, NB.name, H.name, every))
    u.emit("    Xb%s[n in %s, d] = %s[%s*%s + n, d];" % (u.uid, B.name, X.name, b, B.name))
    u.emit("    Yb%s[n in %s, c] = %s[%s*%s + n, c];" % (u.uid, B.name, Yl.name, b, B.name))
    u.emit("    Z%s[n, h] = %s(Xb%s[n, d] * %s[d, h]);" % (u.uid, act, u.uid, W1.name))
    u.emit("    P%s[n, c] = Z%s[n, h] * %s[h, c] + %s[c];" % (u.uid, u.uid, W2.name, b2.name))
    u.emit("    L%s = sum[n, c]((P%s[n, c] - Yb%s[n, c]) ** 2);" % (u.uid, u.uid, u.uid))
    for W in (W1, W2, b2):
        idx = ", ".join(IDX[:len(W.dims)])
        u.emit("    d%s = grad(L%s, %s);" % (W.name, u.uid, W.name))
        u.emit("    %s[%s] -= 0.0625 * d%s[%s];" % (W.name, idx, W.name, idx))
    u.emit("}")
    u.c["ist"] += 1
    u.cost *= 200
    for W in (W1, W2, b2):
        W.exact = False
        u.output(W)


def error_program(u):
    """A gather whose index is out of range: every configuration must fail
    with status 1 and the same message."""
    V, D, B = u.add_size(u.r.choice([3, 5])), u.add_size(2), u.add_size(u.r.choice([3, 4]))
    E = u.add_input([V, D])
    idx = u.add_input([B], "i64", lo=0, hi=V.val)
    # one element one past the table's end (inputs.py: oob)
    u.decls[-2] = "#@ %s int %d %s oob" % (idx.name, 0, V.name)
    T = u.fresh("T")
    u.emit("%s[b, d] = %s[%s[b], d];" % (T, E.name, idx.name))
    u.tensors.append(Ten(T, [B, D], u.fdt, "def", deps=E.deps))
    u.output(u.tensors[-1])
    u.error = "outside"
    u.c["runtime_error"] += 1


# ---- programs ----

def statement(u, in_loop=False):
    kinds = [(stmt_elementwise, 5), (stmt_contraction, 3), (stmt_reduce, 2), (stmt_sparse, 1.2), (stmt_gather, 1.2),
             (stmt_window, 1.5), (stmt_call, 0.8), (stmt_grad, 1.0 if not in_loop else 0.4),
             (stmt_repeat, 0.8 if not in_loop else 0.3)]
    tot = sum(w for _, w in kinds)
    x = u.r.random() * tot
    for f, w in kinds:
        x -= w
        if x < 0:
            break
    try:
        return f(u)
    except Exhausted:
        return None


def generate(seed, uid, error=False):
    u = Unit(seed, uid)
    u.fdt = "f32" if u.chance(0.75) else "f64"
    if error:
        u.fdt = "f32"
        error_program(u)
        return finish(u)
    if u.chance(0.04):
        ist_program(u)
        return finish(u)
    nsz = u.r.randint(2, 4)
    for _ in range(nsz):
        u.add_size(u.r.choice([1, 2, 3, 4, 5, 5, 6, 7, 7, 9, 11]))
    if u.chance(0.3):
        a = u.size()
        u.add_size(2 * a.val + 1, "2 * %s + 1" % a.name)
    if any(s.val % 2 and s.val > 2 or s.val % 3 and s.val > 3 for s in u.sizes):
        u.c["extent_not_divisible"] += 1
    if u.chance(0.3):
        name = u.fresh("C")
        u.emit("const %s = %s;" % (name, u.r.choice(["0.5", "2", "1 / 4", "sqrt(4)"])))
        u.c["const"] += 1
    for _ in range(u.r.randint(1, 3)):
        u.add_input(u.dims(u.r.choice([0, 1, 2, 2, 2, 3])))
    if u.chance(0.6):
        u.add_param(u.dims(u.r.choice([1, 2, 2])))
    for _ in range(u.r.randint(2, 7)):
        statement(u)
    return finish(u)


def finish(u):
    defs = [t for t in u.tensors if t.role == "def"]
    outs = [t for t in defs if u.chance(0.6)] or defs[-1:]
    for t in u.tensors:
        if t.role == "param" and u.chance(0.7):
            outs.append(t)
    if not outs:
        outs = [t for t in u.tensors][-1:]
    for t in outs:
        u.output(t)
    return u


def rounded_in_f32(u):
    """The names whose values went through f32 rounding: declared f32 (or
    untyped, f32 by default), or computed by a statement that converts to
    f32 or reads such a name.  A unit's outputs are typed by the statement
    that makes them, but f64(T[i]) of an f32 T, or T itself read into an f64
    sum, carries f32's rounding: its tolerance must be f32's (seed 1129,
    group 164: f64 epsilon on a sum of f32 values)."""
    body = "\n".join(l for l in u.text.split("\n") if not l.lstrip().startswith(("#", "//")))
    f32 = set()
    stmts = []
    for s in body.split(";"):
        s = s.strip().split("{")[-1].split("}")[-1].strip()
        d = re.match(r"(input|param)\s+([A-Za-z_]\w*)(.*)", s, re.S)
        if d:
            if not re.search(r"\b(f64|i32|i64)\b", d.group(3).split("=")[0]):
                f32.add(d.group(2))
            continue
        a = re.match(r"([A-Za-z_]\w*)\s*(\[[^=]*\])?\s*[-+*/]?=(?!=)(.*)", s, re.S)
        if a and not s.startswith(("output", "size", "import")):
            stmts.append((a.group(1), a.group(3)))
    changed = True
    while changed:
        changed = False
        for name, rhs in stmts:
            if name in f32:
                continue
            if "f32(" in rhs.replace(" ", "") or set(re.findall(r"\b[A-Za-z_]\w*", rhs)) & f32:
                f32.add(name)
                changed = True
    return f32


def group_text(units):
    """Units as one .tra file: imports first, then defs, then each unit."""
    imports = sorted(set().union(*(u.imports for u in units)))
    head = ['import "%s";' % f for f in imports]
    for u in units:
        head += u.defs
    return "\n".join(head + [u.text for u in units])
