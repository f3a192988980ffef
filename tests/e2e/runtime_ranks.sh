#!/bin/sh
# runtime_ranks.sh: libtracrt on real ranks.
#
#  1. tests/unit/test_runtime (cmocka) under mpirun -np 1, 2, 3, 4;
#  2. how a job ends on bad input, bad usage and failed writes, on 1 to 4
#     ranks and without mpirun: exit status 1, exactly one line on stderr
#     (mpirun -q keeps mpirun's own banner out), no hang, nothing left at an
#     output path;
#  3. files written by the runtime read back by numpy, and files numpy wrote
#     read by the runtime.
#
# Environment (set by `make check`): MPIRUN, PYTHON, top_builddir.
LC_ALL=C; export LC_ALL
T=$(cd "${top_builddir:-.}" && pwd)/tests/unit/test_runtime
if [ ! -x "$T" ]; then
	echo "runtime_ranks: $T is not built (make tests/unit/test_runtime)"
	exit 99
fi
. "$srcdir/tests/e2e/lib.sh"
# lib.sh's folder of this test's own (Open MPI's session directory too)
D=$TMP

# ---- 1. the unit tests on 1-4 ranks ----

for n in 1 2 3 4; do
	if RT_TEST_DIR="$D/unit-np$n" timeout 300 "$MPIRUN" -q -np "$n" "$T" >"$D/unit-np$n.log" 2>&1; then
		echo "ok: unit tests on $n ranks"
	else
		fail "unit tests on $n ranks (exit $?)"
		cat "$D/unit-np$n.log"
	fi
done

# ---- 2. errors ----

# expect STATUS LINE NP ENV... -- ARGS...: run test_runtime on NP ranks (0:
# without mpirun) and check its exit status and that stderr is exactly LINE.
expect() {
	status=$1 line=$2 np=$3
	shift 3
	envs=
	while [ "$1" != "--" ]; do
		envs="$envs $1"
		shift
	done
	shift
	if [ "$np" = 0 ]; then
		env $envs timeout 60 "$T" "$@" >"$D/out" 2>"$D/err"
	else
		env $envs timeout 60 "$MPIRUN" -q -np "$np" "$T" "$@" >"$D/out" 2>"$D/err"
	fi
	got=$?
	if [ "$got" != "$status" ]; then
		fail "np=$np $envs $*: exit $got, expected $status"
		cat "$D/err"
		return
	fi
	mpi_noise "$D/err"
	if [ -n "$line" ] && [ "$(cat "$D/err")" != "$line" ]; then
		fail "np=$np $envs $*: stderr is not the one expected line"
		echo "  expected: $line"
		sed 's/^/  got:      /' "$D/err"
		return
	fi
	echo "ok: np=$np $envs $* -> $status"
}

P=test_runtime
for np in 0 1 2 3 4; do
	expect 1 "$P: input A ($D/missing.npy): No such file or directory" $np RT_TEST_READ=A -- A="$D/missing.npy"
	expect 1 "$P: input A ($D): is a directory" $np RT_TEST_READ=A -- A="$D"
	expect 1 "$P: unknown tensor 'Q' in 'Q=q.npy' (tensors: A X P case0 case1 case2 case3 case4 case5 case6 case7 case8 case9 case10 case11 case12 case13 case14)" $np -- Q=q.npy
	expect 1 "$P: tensor A given twice ('A=a.npy' and 'A=b.npy')" $np -- A=a.npy A=b.npy
	expect 1 "$P: unexpected argument 'oops' (expected NAME=path.npy, NAME.out=path.npy or an option; see --help)" $np -- oops
	expect 1 "$P: --seed needs an unsigned integer, found 'x'" $np -- --seed x
	expect 1 "$P: input X: no file given (add X=path.npy; see --help)" $np RT_TEST_REQUIRE_X=1 --
	expect 1 "$P: TRAC_BLIS_ARCH=fast: expected auto, native, or a BLIS sub-configuration such as skx or haswell" $np TRAC_BLIS_ARCH=fast --
	expect 1 "$P: TRAC_GEMM_PATH=fast: expected auto, blis or packed" $np TRAC_GEMM_PATH=fast --

	# A failed write leaves nothing behind: not at the path, no temporary.
	mkdir -p "$D/w$np" "$D/w$np/adir.npy"
	expect 1 "$P: param case4 ($D/w$np/nodir/c.npy): No such file or directory" $np RT_TEST_WRITE=case4 -- case4="$D/w$np/nodir/c.npy"
	expect 1 "$P: param case4 ($D/w$np/adir.npy): is a directory" $np RT_TEST_WRITE=case4 -- case4="$D/w$np/adir.npy"
	if [ "$(ls -A "$D/w$np")" != "adir.npy" ] || [ -n "$(ls -A "$D/w$np/adir.npy")" ]; then
		fail "np=$np: a failed write left files: $(ls -A "$D/w$np")"
	fi
done

expect 0 "" 2 -- --help
grep -q "^  case7 *param *f64 (5, 4, 3)" "$D/out" || fail "--help does not list case7's role, dtype and shape"

# --profile prints one table from rank 0.
expect 0 "" 2 RT_TEST_WRITE=case4 TRAC_PROFILE=1 -- case4="$D/p.npy"
[ "$(grep -c '^profile: test_runtime on 2 ranks' "$D/out")" = 1 ] || fail "no profile line"
grep -q "BLIS .* kernels" "$D/out" || fail "profile does not name the BLIS kernels"

# ---- 3. numpy on both sides ----

if ! "$PYTHON" -c 'import numpy' 2>/dev/null; then
	skip "files read back by numpy (no numpy in $PYTHON; Debian: python3-numpy)"
	finish
fi

for np in 1 3 4; do
	for c in 0 2 4 5 7 8; do
		expect 0 "" $np RT_TEST_WRITE=case$c -- case$c="$D/np$np-case$c.npy"
	done
done
"$PYTHON" - "$D" <<'EOF' || fail "numpy does not read back what the runtime wrote"
import sys, numpy as np
d = sys.argv[1]
# the cases of test_runtime.c: dtype and shape
cases = {0: ('<f4', ()), 2: ('<f4', (10,)), 4: ('<f8', (7, 5)), 5: ('<f4', (7, 5)),
         7: ('<f8', (5, 4, 3)), 8: ('<f4', (5, 4, 3))}
for np_ in (1, 3, 4):
    for c, (dt, shape) in cases.items():
        a = np.load(f"{d}/np{np_}-case{c}.npy")
        want = (0.5 * np.arange(int(np.prod(shape))) + 1).astype(dt).reshape(shape)
        assert a.dtype == np.dtype(dt) and a.shape == shape, (np_, c, a.dtype, a.shape)
        assert a.flags.c_contiguous and np.array_equal(a, want), (np_, c)
print("ok: numpy reads the runtime's files on 1, 3 and 4 ranks")
EOF

"$PYTHON" - "$D" <<'EOF' || fail "cannot make numpy files"
import sys, numpy as np
d = sys.argv[1]
good = np.arange(700000, dtype='<f4').reshape(1000, 700)
np.save(f"{d}/good.npy", good)
np.save(f"{d}/shape.npy", good.reshape(700, 1000))
np.save(f"{d}/f8.npy", good.astype('<f8'))
np.save(f"{d}/fortran.npy", np.asfortranarray(good))
np.save(f"{d}/big.npy", good.astype('>f4'))
np.lib.format.write_array(open(f"{d}/v2.npy", "wb"), good, version=(2, 0))
np.lib.format.write_array(open(f"{d}/v3.npy", "wb"), good, version=(3, 0))
with open(f"{d}/good.npy", "rb") as f:
    head = f.read(128 + 1000)
open(f"{d}/trunc.npy", "wb").write(head)
open(f"{d}/text.npy", "w").write("hello\n")
EOF
for np in 0 1 3; do
	for f in good v2 v3; do
		expect 0 "" $np RT_TEST_READ=A -- A="$D/$f.npy"
		[ "$(cat "$D/out")" = "read A: sum 244999650000" ] || fail "np=$np: $f.npy read as: $(cat "$D/out")"
	done
	expect 1 "$P: input A ($D/shape.npy): shape (1000, 700) expected, found (700, 1000)" $np RT_TEST_READ=A -- A="$D/shape.npy"
	expect 1 "$P: input A ($D/f8.npy): dtype <f4 expected, found <f8" $np RT_TEST_READ=A -- A="$D/f8.npy"
	expect 1 "$P: input A ($D/fortran.npy): Fortran order not supported; save the array in C order" $np RT_TEST_READ=A -- A="$D/fortran.npy"
	expect 1 "$P: input A ($D/big.npy): big-endian data not supported; expected <f4, found >f4" $np RT_TEST_READ=A -- A="$D/big.npy"
	expect 1 "$P: input A ($D/trunc.npy): file is truncated: 2800000 bytes of data expected, 1000 found" $np RT_TEST_READ=A -- A="$D/trunc.npy"
	expect 1 "$P: input A ($D/text.npy): not a .npy file" $np RT_TEST_READ=A -- A="$D/text.npy"
done

finish
