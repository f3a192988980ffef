"""npz.py: fixtures and checks for tests/e2e/npz.sh (runtime/npz.c).

    npz.py make     sparse matrices as scipy writes them (csr, csc, coo;
                    compressed or stored; f32, f64, i32, i64; int32 and
                    int64 indices; duplicates, unsorted columns, explicit
                    zeros, empty rows and blocks; zip64 records; a stream
                    written with data descriptors), dense .npy files with
                    zeros, each beside its dense twin; cases.txt lists them
                    for test_npz_rt
    npz.py check    the .npz and .npy files test_npz_rt wrote, against the
                    twins, with scipy.sparse.load_npz and numpy.load
    npz.py bad      broken files, and bad.txt: each one's expected line
    npz.py graph    a graph at ogbn-arxiv's size in scipy's files, for a
                    compiled program (graph_*.npz, graph_x.npy, graph_ref.npy)

Run in the test's folder.  Values are multiples of 1/8, so sums of
duplicates are exact in any order and the test compares bit for bit.
"""
import io
import sys
import zipfile
import zlib

import numpy as np
import scipy.sparse as sp

rng = np.random.default_rng(13)
M, N = 37, 23                           # blocks of 8 x 5 leave short edges
DT = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64}
PROG = "test_npz_rt"


def values(n, dt):
    v = rng.integers(-32, 33, n)
    v[v == 0] = 5
    return (v / 8).astype(dt) if dt in (np.float32, np.float64) else v.astype(dt)


def dense(m, n, dt, density=0.15):
    """A matrix with an empty row band (rows 16..23), an empty block
    (rows 8..15, columns 5..9) and some empty rows."""
    a = np.zeros((m, n), dt)
    mask = rng.random((m, n)) < density
    a[mask] = values(int(mask.sum()), dt)
    a[16:24, :] = 0
    a[8:16, 5:10] = 0
    a[[2, 30 % m], :] = 0
    return a


def messy(a, fmt):
    """a as csr or csc arrays with duplicates (a value split in two),
    columns unsorted within rows and explicit zeros."""
    coo = sp.coo_matrix(a)
    r, c, v = list(coo.row), list(coo.col), list(coo.data)
    for k in range(0, len(v), 3):          # split: v = (v - 1/2) + 1/2
        half = v[k].dtype.type(0.5) if a.dtype.kind == "f" else v[k].dtype.type(1)
        r.append(r[k]), c.append(c[k]), v.append(half)
        v[k] = v[k] - half
    r.append(0), c.append(3), v.append(a.dtype.type(0))    # an explicit zero
    r, c, v = np.array(r), np.array(c), np.array(v, a.dtype)
    major, minor = (r, c) if fmt == "csr" else (c, r)
    order = np.lexsort((-minor, major))      # minor decreasing: unsorted
    major, minor, v = major[order], minor[order], v[order]
    lines = a.shape[0] if fmt == "csr" else a.shape[1]
    ptr = np.searchsorted(major, np.arange(lines + 1))
    cls = sp.csr_matrix if fmt == "csr" else sp.csc_matrix
    return cls((v, minor.astype(np.int32), ptr.astype(np.int32)), shape=a.shape)


def widen(s):
    """s with int64 indices, as scipy keeps them for big matrices."""
    if s.format == "coo":
        s.row, s.col = s.row.astype(np.int64), s.col.astype(np.int64)
    else:
        s.indices, s.indptr = s.indices.astype(np.int64), s.indptr.astype(np.int64)
    return s


class Stream(io.RawIOBase):
    """A file that cannot seek: zipfile then writes data descriptors."""
    def __init__(self, f):
        self.f = f

    def writable(self):
        return True

    def write(self, b):
        return self.f.write(b)


def save_zip64(name, s):
    """save_npz with every zip64 record zipfile knows (its limits at 0)."""
    old = zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT
    zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT = 0, 0
    try:
        sp.save_npz(name, s)
    finally:
        zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT = old
    with open(name, "rb") as f:
        assert b"PK\x06\x06" in f.read(), "no zip64 end record"


def members(p, s, order):
    """Sparse matrix s saved as save_npz does, but with its members in that
    order, deflated at level 1 (faster than save_npz's 6)."""
    arr = dict(format=np.array(s.format.encode()), shape=np.array(s.shape), data=s.data)
    if s.format == "coo":
        arr.update(row=s.row, col=s.col)
    else:
        arr.update(indices=s.indices, indptr=s.indptr)
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for k in order:
            b = io.BytesIO()
            np.lib.format.write_array(b, arr[k])
            z.writestr(k + ".npy", b.getvalue())


def make():
    cases = []

    def case(name, a, write, big=0, few=0):
        """write(path) makes the file; a is its dense twin."""
        dt = [k for k, v in DT.items() if v == a.dtype.type][0]
        ext = ".npy" if write is None else ".npz"
        path = name + ext
        if write is None:
            np.save(path, a)
        else:
            write(path)
        np.save(name + "_ref.npy", a)
        outz = "out_%s.npz" % name if a.ndim == 2 else "-"
        cases.append("%s %s %d %s %s %s %s out_%s.npy %d %d" % (
            name, dt, a.ndim, " ".join(map(str, a.shape)), path, name + "_ref.npy", outz, name, big, few))

    a = dense(M, N, np.float32)
    case("csr_f32", a, lambda p: sp.save_npz(p, sp.csr_matrix(a)))
    a = dense(M, N, np.float64)
    case("csr_f64_stored", a, lambda p: sp.save_npz(p, sp.csr_matrix(a), compressed=False), big=1)
    a = dense(M, N, np.int32)
    case("csr_i32", a, lambda p: sp.save_npz(p, sp.csr_matrix(a)))
    a = dense(M, N, np.float64)
    case("csr_idx64_stored", a, lambda p: sp.save_npz(p, widen(sp.csr_matrix(a)), compressed=False))
    a = dense(M, N, np.float32)
    case("csr_messy", a, lambda p: sp.save_npz(p, messy(a, "csr")))
    a = dense(M, N, np.int64)
    case("csr_messy_i64_stored", a, lambda p: sp.save_npz(p, messy(a, "csr"), compressed=False))
    z = sp.csr_matrix(dense(M, N, np.float32))
    z.data[::5] = 0         # explicit zeros in a canonical file (sorted, no duplicates)
    case("csr_sorted_zeros", z.toarray(), lambda p: sp.save_npz(p, z))
    a = dense(M, N, np.float64)
    case("csc_f64", a, lambda p: sp.save_npz(p, sp.csc_matrix(a)))
    a = dense(M, N, np.float32)
    case("csc_idx64_stored", a, lambda p: sp.save_npz(p, widen(sp.csc_matrix(a)), compressed=False))
    a = dense(M, N, np.float64)
    case("csc_messy", a, lambda p: sp.save_npz(p, messy(a, "csc")))

    def coo(a, shuffle=True, dups=True):
        c = sp.coo_matrix(a)
        r, col, v = c.row, c.col, c.data
        if dups:        # every fourth element split in two
            k = np.arange(0, len(v), 4)
            half = v.dtype.type(0.5) if a.dtype.kind == "f" else v.dtype.type(1)
            v = v.copy()
            v[k] -= half
            r, col, v = np.r_[r, r[k]], np.r_[col, col[k]], np.r_[v, np.full(len(k), half, v.dtype)]
        if shuffle:
            o = rng.permutation(len(v))
            r, col, v = r[o], col[o], v[o]
        return sp.coo_matrix((v, (r.astype(np.int32), col.astype(np.int32))), shape=a.shape)

    a = dense(M, N, np.float32)
    case("coo_f32", a, lambda p: sp.save_npz(p, coo(a)))
    a = dense(M, N, np.int64)
    case("coo_i64_idx64_stored", a, lambda p: sp.save_npz(p, widen(coo(a)), compressed=False))
    a = dense(M, N, np.float64)
    case("coo_f64_sorted", a, lambda p: sp.save_npz(p, coo(a, shuffle=False, dups=False)))
    a = dense(M, N, np.float32)
    case("dense_f32", a, None)
    a = dense(M, N, np.int32)
    case("dense_i32", a, None)
    b = np.zeros((6, 5, 7))
    b[rng.random(b.shape) < 0.2] = 1.5
    b[4:, :, :] = 0
    b[:, :, 3:6] = 0
    case("dense3_f64", b, None)
    a = np.zeros((M, N), np.float32)
    case("csr_empty", a, lambda p: sp.save_npz(p, sp.csr_matrix(a)))
    a = dense(M, N, np.float32)
    case("coo_empty_blocks", a, lambda p: sp.save_npz(p, coo(a, dups=False)))
    a = dense(M, N, np.float64)
    case("csr_zip64", a, lambda p: save_zip64(p, sp.csr_matrix(a)))
    a = dense(M, N, np.float32)

    def stream(p):
        with open(p, "wb") as f:
            sp.save_npz(Stream(f), sp.csr_matrix(a))
    case("csr_descriptors", a, stream)

    def unicode(p):     # the format as scipy < 1.0 wrote it: '<U3'
        s = sp.csr_matrix(a)
        np.savez(p, indices=s.indices, indptr=s.indptr, format=np.array("csr"),
                 shape=np.array(s.shape), data=s.data)
    a = dense(M, N, np.float32)
    case("csr_unicode", a, unicode)

    # big enough for several batches of elements (1 << 16) and of
    # compressed bytes, and a csr with more rows than a batch
    a = dense(300, 700, np.float64, density=0.5)
    case("csr_large", a, lambda p: sp.save_npz(p, sp.csr_matrix(a)), few=1)
    a = dense(70001, 3, np.float32, density=0.3)
    case("csr_tall", a, lambda p: sp.save_npz(p, sp.csr_matrix(a)), few=1)
    a = dense(3, 70001, np.float32, density=0.3)
    case("csc_wide_stored", a, lambda p: sp.save_npz(p, sp.csc_matrix(a), compressed=False), few=1)
    a = dense(256, 300, np.float32, density=0.9)
    case("coo_large", a, lambda p: sp.save_npz(p, coo(a, dups=False)), few=1)

    # members in orders other than scipy's, deflated, several batches and
    # buffers long: every reader goes forward through each member anyway
    a = dense(70001, 5, np.float32, density=0.4)
    case("csr_order", a, lambda p: members(p, sp.csr_matrix(a), ["data", "indptr", "shape", "indices", "format"]),
         few=1)
    a = dense(5, 70001, np.float64, density=0.4)
    case("csc_order", a, lambda p: members(p, sp.csc_matrix(a), ["indptr", "indices", "data", "format", "shape"]),
         few=1)
    a = dense(300, 400, np.float32, density=0.9)
    case("coo_order", a, lambda p: members(p, coo(a), ["col", "shape", "data", "format", "row"]), few=1)

    # per case of a csr or csc: the stored elements of each row or column,
    # as trt_balance counts them from indptr (test_npz_rt compares)
    for line in cases:
        w = line.split()
        if w[-6].endswith(".npz"):
            raw = np.load(w[-6])
            fmt = raw["format"].item()
            fmt = fmt.decode() if isinstance(fmt, bytes) else fmt
            if fmt in ("csr", "csc"):
                np.save(w[0] + ("_rows.npy" if fmt == "csr" else "_cols.npy"),
                        np.diff(raw["indptr"]).astype(np.int64))

    with open("cases.txt", "w") as f:
        f.write("\n".join(cases) + "\n")


def graph():
    """A graph of 169,343 nodes with about 14 neighbours each, 2.4M stored
    elements: as scipy saves it by default (deflated csr), and as csc and
    coo (deflated, members in other orders); and X and A @ X.  Values are
    multiples of 1/8, so any order of sums is exact."""
    v, per = 169343, 14
    g = np.random.default_rng(31)
    rows = np.repeat(np.arange(v, dtype=np.int32), per)
    cols = g.integers(0, v, v * per).astype(np.int32)
    vals = (g.integers(1, 9, v * per) / 8).astype(np.float32)
    a = sp.csr_matrix((vals, (rows, cols)), shape=(v, v))
    a.sum_duplicates()
    x = (g.integers(-8, 9, (v, 3)) / 8).astype(np.float32)
    np.save("graph_x.npy", x)
    np.save("graph_ref.npy", (a @ x).astype(np.float32))
    sp.save_npz("graph_csr.npz", a)
    members("graph_csc.npz", a.tocsc(), ["indices", "indptr", "format", "shape", "data"])
    members("graph_coo.npz", a.tocoo(), ["data", "col", "format", "shape", "row"])


def check():
    bad = 0

    def fail(msg):
        nonlocal bad
        bad += 1
        print("npz.py check: " + msg)

    for line in open("cases.txt"):
        w = line.split()
        name, rank = w[0], int(w[2])
        ref, outz, outn, big = w[4 + rank], w[5 + rank], w[6 + rank], int(w[7 + rank])
        a = np.load(ref)
        if outz != "-":
            with zipfile.ZipFile(outz) as z:
                if any(i.compress_type != zipfile.ZIP_STORED for i in z.infolist()):
                    fail(outz + ": a member is not stored")
                if z.testzip() is not None:
                    fail(outz + ": bad CRC in " + z.testzip())
                zip64 = b"PK\x06\x06" in open(outz, "rb").read()
                if zip64 != bool(big):
                    fail("%s: zip64 records %s, expected %s" % (outz, zip64, bool(big)))
            # load_npz narrows the indices it can: look at the arrays first
            raw = np.load(outz)
            want = np.int64 if big else np.int32
            if raw["indices"].dtype != want or raw["indptr"].dtype != want:
                fail("%s: indices %s, indptr %s, expected %s" % (outz, raw["indices"].dtype,
                                                                 raw["indptr"].dtype, want))
            s = sp.load_npz(outz)
            if s.format != "csr" or s.dtype != a.dtype or s.shape != a.shape:
                fail("%s: %s %s %s" % (outz, s.format, s.dtype, s.shape))
            elif not s.has_canonical_format:
                fail(outz + ": columns unsorted or duplicated")
            elif s.nnz != np.count_nonzero(a) or not np.array_equal(s.toarray(), a):
                fail(outz + ": elements differ")
        b = np.load(outn)
        if b.dtype != a.dtype or not np.array_equal(a, b):
            fail(outn + ": differs from " + ref)
    return bad == 0


def bad():
    """Broken variants of one good 37 x 23 f32 csr, each with its line."""
    a = dense(M, N, np.float32)
    s = sp.csr_matrix(a)
    sp.save_npz("good.npz", s)
    np.save("good_ref.npy", a)
    nnz = s.nnz
    lines = []

    def want(path, why):
        lines.append("%s|%s: input X (%s): %s" % (path, PROG, path, why))

    def arrays(path, compressed=True, **kw):
        arr = dict(indices=s.indices, indptr=s.indptr, format=np.array(b"csr"),
                   shape=np.array(s.shape), data=s.data)
        arr.update(kw)
        arr = {k: v for k, v in arr.items() if v is not None}
        (np.savez_compressed if compressed else np.savez)(path, **arr)

    with open("notzip.npz", "w") as f:
        f.write("not a zip file\n")
    want("notzip.npz", "not a .npz (zip) file")
    data = open("good.npz", "rb").read()
    open("truncated.npz", "wb").write(data[:len(data) // 2])
    want("truncated.npz", "truncated zip file: no end of central directory")
    open("empty.npz", "wb").close()
    want("empty.npz", "not a .npz (zip) file")

    arrays("noptr.npz", indptr=None)
    want("noptr.npz", "no member indptr.npy")
    np.savez("plain.npz", a=a)
    want("plain.npz", "a .npz of arrays (a), not a scipy.sparse matrix (no format.npy): save the matrix "
         "with scipy.sparse.save_npz, or the dense array with numpy.save as a .npy")
    np.savez("plain6.npz", *[a] * 6)
    want("plain6.npz", "a .npz of arrays (arr_0, arr_1, arr_2, arr_3, ... 6 in all), not a scipy.sparse "
         "matrix (no format.npy): save the matrix with scipy.sparse.save_npz, or the dense array with "
         "numpy.save as a .npy")
    sp.save_npz("bsr.npz", sp.bsr_matrix(a))
    want("bsr.npz", "sparse format 'bsr' not supported (csr, csc or coo expected)")
    sp.save_npz("dia.npz", sp.dia_matrix(np.eye(M, N, dtype=np.float32)))
    want("dia.npz", "sparse format 'dia' not supported (csr, csc or coo expected)")
    sp.save_npz("shape.npz", sp.csr_matrix(a.T.copy()))
    want("shape.npz", "shape (37, 23) expected, found (23, 37)")
    sp.save_npz("f64.npz", sp.csr_matrix(a.astype(np.float64)))
    want("f64.npz", "data.npy: dtype <f4 expected, found <f8; declare it ': f64 sparse', or save it as float32 (A.astype(np.float32))")
    arrays("fltidx.npz", indices=s.indices.astype(np.float64))
    want("fltidx.npz", "indices.npy: dtype int32 or int64 expected, found <f8")
    arrays("data2d.npz", data=s.data.reshape(1, -1))
    want("data2d.npz", "data.npy: a 1-D array expected, found shape (1, %d)" % nnz)

    full = np.flatnonzero(np.diff(s.indptr))     # rows with elements
    r = full[full >= 10][0]
    ind = s.indices.copy()
    ind[s.indptr[r]] = N
    arrays("range.npz", indices=ind)
    want("range.npz", "indices.npy: index %d in row %d is outside [0, %d)" % (N, r, N))
    r = full[-1]
    ind = s.indices.copy()
    ind[s.indptr[r + 1] - 1] = -1
    arrays("neg_stored.npz", compressed=False, indices=ind)
    want("neg_stored.npz", "indices.npy: index -1 in row %d is outside [0, %d)" % (r, N))
    c = sp.csc_matrix(a)
    j = np.flatnonzero(np.diff(c.indptr) >= 2)[0]
    ind = c.indices.copy()
    ind[c.indptr[j] + 1] = M + 5
    sp.save_npz("csc_range.npz", sp.csc_matrix((c.data, ind, c.indptr), shape=c.shape))
    want("csc_range.npz", "indices.npy: index %d in column %d is outside [0, %d)" % (M + 5, j, M))
    # scipy makes no coo with an index out of range: its arrays, then
    o = sp.coo_matrix(a)
    row = o.row.copy()
    row[5] = M
    arrays("coo_range.npz", indices=None, indptr=None, format=np.array(b"coo"), row=row, col=o.col)
    want("coo_range.npz", "row.npy: index %d of element 5 is outside [0, %d)" % (M, M))
    col = o.col.astype(np.int64)
    col[nnz - 1] = -3
    arrays("coo_col.npz", compressed=False, indices=None, indptr=None, format=np.array(b"coo"),
           row=o.row, col=col)
    want("coo_col.npz", "col.npy: index -3 of element %d is outside [0, %d)" % (nnz - 1, N))

    ptr = s.indptr.copy()
    ptr[12] = ptr[13] + 1
    arrays("ptrdown.npz", indptr=ptr)
    want("ptrdown.npz", "indptr.npy: decreases from %d to %d at entry 13" % (ptr[12], ptr[13]))
    ptr = s.indptr.copy()
    ptr[0] = 1
    arrays("ptrstart.npz", indptr=ptr)
    want("ptrstart.npz", "indptr.npy: starts at 1, not 0")
    ptr = s.indptr.copy()
    ptr[-1] = nnz - 1
    arrays("ptrend.npz", indptr=ptr.astype(np.int64), compressed=False)
    want("ptrend.npz", "indptr.npy: ends at %d, not at the %d elements of data.npy" % (nnz - 1, nnz))
    ptr = s.indptr.copy()
    ptr[36] = nnz + 100
    arrays("ptrbig.npz", indptr=ptr)
    want("ptrbig.npz", "indptr.npy: entry 36 is %d, outside [0, %d]" % (nnz + 100, nnz))

    arrays("lengths.npz", indices=np.r_[s.indices, 0].astype(np.int32))
    want("lengths.npz", "indices.npy: shape (%d,) expected, found (%d,)" % (nnz, nnz + 1))
    arrays("ptrlen.npz", indptr=s.indptr[:-1])
    want("ptrlen.npz", "indptr.npy: shape (%d,) expected, found (%d,)" % (M + 1, M))

    # a deflated data.npy with bytes in the middle of its stream changed:
    # zlib's complaint, or a CRC that no longer matches
    with zipfile.ZipFile("good.npz") as z:
        info = z.getinfo("data.npy")
    raw = bytearray(data)
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    for k in range(start + info.compress_size // 3, start + info.compress_size // 3 + 8):
        raw[k] ^= 0x5a
    open("corrupt.npz", "wb").write(raw)
    want("corrupt.npz", "data.npy: *")
    raw = bytearray(data)
    raw[start + info.compress_size - 3] ^= 0xff
    open("corrupt_end.npz", "wb").write(raw)
    want("corrupt_end.npz", "data.npy: *")
    with zipfile.ZipFile("bzip2.npz", "w", zipfile.ZIP_BZIP2) as z:
        with zipfile.ZipFile("good.npz") as g:
            for n in g.namelist():
                z.writestr(n, g.read(n))
    want("bzip2.npz", "format.npy: compression method 12 not supported (stored or deflated expected)")
    with open("bad.txt", "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "make":
        make()
    elif what == "check":
        sys.exit(0 if check() else 1)
    elif what == "bad":
        bad()
    elif what == "graph":
        graph()
    else:
        sys.exit("usage: npz.py make|check|bad|graph")
