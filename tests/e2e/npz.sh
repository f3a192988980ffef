#!/bin/sh
# Sparse tensors in files (issue 13): runtime/npz.c under mpirun -np 1..4.
# tests/unit/test_npz_rt reads the fixtures tests/e2e/npz.py makes with
# scipy (csr, csc, coo, dense .npy) in many blockings and placements and
# checks every element against their dense twins, then writes them back,
# which npz.py checks with scipy and numpy.  Bad files: status 1 and one
# line naming the tensor and the file, on 1 and 3 ranks, a previous output
# left as it was and no temporary file beside it.
RT=$(cd "${top_builddir:-.}" && pwd)/tests/unit/test_npz_rt
. "${srcdir:-.}/tests/e2e/lib.sh"

if [ ! -x "$RT" ]; then
	echo "npz: $RT is not built (make tests/unit/test_npz_rt)"
	exit 99
fi
if ! "$PYTHON" -c 'import scipy.sparse' 2>/dev/null; then
	echo "npz: no scipy in $PYTHON (apt-get install python3-scipy)"
	exit 99
fi

"$PYTHON" "$TOP/tests/e2e/npz.py" make || { fail "npz.py make"; finish; }
# A deflated member is inflated whole by libdeflate, except under a memory
# budget or past 256 MiB, where zlib streams it: "2z" is 2 ranks under a
# budget, every member through zlib (runtime/zip.c)
budget() { case $1 in *z) echo 1G ;; *) echo ;; esac; }
for np in 1 2 3 4 2z; do
	rm -f out_*
	if out=$(TRAC_MEM_BUDGET=$(budget $np) run "${np%z}" "$RT" check cases.txt 2>&1); then
		pass "sparse reads and writes on $np rank(s): $(echo "$out" | tail -1)"
	else
		fail "sparse reads and writes on $np rank(s):"
		echo "$out" | tail -20
	fi
	if "$PYTHON" "$TOP/tests/e2e/npz.py" check; then
		pass "what $np rank(s) wrote, read by scipy and numpy"
	else
		fail "what $np rank(s) wrote, read by scipy and numpy"
	fi
done

# A graph at ogbn-arxiv's size (169,343 nodes, 2.4M stored elements) in
# scipy's default file (save_npz: deflated members), and as csc and coo,
# read by a compiled program on 2 and 3 ranks: more rows than a batch of
# indptr and members many inflate buffers long (issue 31: a 2-rank GCN
# died with "indptr.npy read backwards").
cat >graph.tra <<'EOF'
size V = 169343, F = 3;
input A[V, V] : sparse;
input X[V, F];
Y[i, f] = A[i, j] * X[j, f];
output Y;
EOF
if "$TRAC" graph.tra -o graph && "$PYTHON" "$TOP/tests/e2e/npz.py" graph; then
	for f in graph_csr.npz graph_csc.npz graph_coo.npz; do
		for np in 2 3; do
			if run $np ./graph A=$f X=graph_x.npy Y=graph_y.npy >out 2>err &&
				"$PYTHON" -c 'import numpy as np, sys
sys.exit(not np.array_equal(np.load("graph_y.npy"), np.load("graph_ref.npy")))'; then
				pass "the full-size graph from $f on $np ranks"
			else
				fail "the full-size graph from $f on $np ranks: $(cat err)"
			fi
			rm -f graph_y.npy
		done
	done
else
	fail "graph.tra or npz.py graph"
fi

# A sparse result written to a .npz drops its zeros, stored or computed:
# relu of a sparse input keeps the input's pattern, with zeros where it is
# negative, and the file holds the positive elements alone, as does the
# same computed dense (the file does not depend on how it was stored)
cat >relu.tra <<'EOF'
size V = 50;
input A[V, V] : sparse;
R[i, j] = relu(A[i, j]);
D[i, j] = relu(A[i, j] + 0 * A[j, i]);
output R; output D;
EOF
"$PYTHON" -c 'import numpy as np, scipy.sparse as sp
a = sp.random(50, 50, density=0.1, format="csr", random_state=np.random.default_rng(5), dtype=np.float32)
a.data -= 0.5
sp.save_npz("signed.npz", a)' || fail "signed.npz"
if "$TRAC" relu.tra -o relu; then
	for np in 1 2; do
		if run $np ./relu A=signed.npz R=r.npz D=d.npz >out 2>err &&
			"$PYTHON" -c 'import numpy as np, scipy.sparse as sp, sys
a, r, d = sp.load_npz("signed.npz"), sp.load_npz("r.npz"), sp.load_npz("d.npz")
want = (a.data > 0).sum()
sys.exit(not (r.nnz == want and d.nnz == want and (r.data > 0).all() and abs(r - a.maximum(0)).max() == 0))'; then
			pass "relu of a sparse input to a .npz on $np ranks: its zeros dropped"
		else
			fail "relu of a sparse input to a .npz on $np ranks: $(cat err)"
		fi
	done
else
	fail "relu.tra"
fi

# A .npz holds a matrix: a vector's output named so is refused before the
# run (its .npy bytes would sit under a name scipy reads otherwise)
cat >vec.tra <<'EOF'
size V = 50;
input A[V, V] : sparse;
s[i] = A[i, j];
output s;
EOF
if "$TRAC" vec.tra -o vec; then
	run 1 ./vec A=signed.npz s=s.npz >out 2>err
	[ $? = 1 ] && [ ! -e s.npz ] &&
		grep -q "^vec: output s (s.npz): a .npz holds a matrix (scipy.sparse's csr), and s has 1 dimension; write it to a .npy (s.out=PATH)$" err &&
		pass "a vector's output to a .npz: refused" || fail "a vector's output to a .npz: $(cat err)"
else
	fail "vec.tra"
fi

# The two first mistakes with scipy's files: a .npz for an input not
# declared sparse, and scipy's float64 data for an f32 sparse input; each
# error says the way out
cat >dense_in.tra <<'EOF'
size V = 50;
input A[V, V];
input S[V, V] : sparse;
s[i] = A[i, j] + S[i, j];
output s;
EOF
"$PYTHON" -c 'import numpy as np, scipy.sparse as sp
sp.save_npz("scipy64.npz", sp.random(50, 50, density=0.1, format="csr", random_state=np.random.default_rng(2)))
np.save("dense.npy", np.ones((50, 50), np.float32))' || fail "scipy64.npz"
if "$TRAC" dense_in.tra -o dense_in; then
	run 1 ./dense_in A=signed.npz S=signed.npz >out 2>err
	[ $? = 1 ] && grep -q "^dense_in: input A (signed.npz): not a .npy file but a .npz (a zip); a .npz of scipy.sparse is read into an input declared ': sparse'$" err &&
		pass "a .npz for a dense input: the hint" || fail "a .npz for a dense input: $(cat err)"
	run 1 ./dense_in A=dense.npy S=scipy64.npz >out 2>err
	[ $? = 1 ] && grep -q "^dense_in: input S (scipy64.npz): data.npy: dtype <f4 expected, found <f8; declare it ': f64 sparse', or save it as float32 (A.astype(np.float32))$" err &&
		pass "scipy's float64 for an f32 sparse input: the hint" || fail "float64 for an f32 sparse input: $(cat err)"
else
	fail "dense_in.tra"
fi

"$PYTHON" "$TOP/tests/e2e/npz.py" bad || { fail "npz.py bad"; finish; }
mkdir adir
# one row per run: X's file | O's path | status | the line expected (a
# trailing * matches any end)
{
	echo "good.npz|o.npz|0|"
	sed 's/^\([^|]*\)|/\1|o.npz|1|/' bad.txt
	echo "nope.npz|o.npz|1|test_npz_rt: input X (nope.npz): No such file or directory"
	echo "adir|o.npz|1|test_npz_rt: input X (adir): is a directory"
	echo "good.npz|adir|1|test_npz_rt: output O (adir): is a directory"
	echo "good.npz|nodir/o.npz|1|test_npz_rt: output O (nodir/o.npz): No such file or directory"
} >runs.txt
while IFS='|' read -r x o want_status want; do
	for np in 1 3 1z; do
		printf 'previous\n' >o.npz
		TRAC_MEM_BUDGET=$(budget $np) timeout 60 "$MPIRUN" -q -np ${np%z} "$RT" bad "X=$x" "O=$o" </dev/null >out 2>err
		status=$?
		mpi_noise err
		got=$(cat err)
		if [ $status != "$want_status" ]; then
			echo "FAIL: X=$x O=$o on $np ranks: exit status $status, expected $want_status"; cat err; echo x >>failed
			continue
		fi
		case $want in
		*\*) prefix=${want%\*}; case $got in "$prefix"*) ok=1 ;; *) ok= ;; esac ;;
		*) [ "$got" = "$want" ] && ok=1 || ok= ;;
		esac
		if [ -z "$ok" ]; then
			echo "FAIL: X=$x O=$o on $np ranks: stderr"; cat err; echo "expected: $want"; echo x >>failed
			continue
		fi
		if [ "$want_status" = 0 ]; then
			"$PYTHON" -c 'import numpy, scipy.sparse as sp, sys
sys.exit(not (sp.load_npz("o.npz").toarray() == numpy.load("good_ref.npy")).all())' ||
				{ echo "FAIL: X=$x on $np ranks: o.npz is wrong"; echo x >>failed; }
		elif [ "$(cat o.npz)" != previous ]; then
			echo "FAIL: X=$x O=$o on $np ranks: the previous output was changed"; echo x >>failed
		fi
		if ls -a | grep -q '^\.\(o\.npz\|adir\)\.'; then
			echo "FAIL: X=$x O=$o on $np ranks: a temporary file was left: $(ls -a | grep '^\.[oa]')"; echo x >>failed
			rm -f .o.npz.* .adir.*
		fi
	done
done <runs.txt
nbad=$(wc -l <runs.txt)
if [ -f failed ]; then
	fail "bad files: $(wc -l <failed) of $((3 * nbad)) runs"
else
	pass "bad files and outputs: $nbad cases on 1 and 3 ranks and through zlib, one line each, previous outputs kept"
fi
finish
