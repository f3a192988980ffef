#!/bin/sh
# The user's path (issue 31): nothing lost, nothing surprising.
#  - one name per tensor: NAME= the file read (a param's initial value),
#    NAME.out= the file written; --help lists each tensor once with its
#    roles; an executable never writes over a file it was given to read
#  - every output's folder tried before the first op: a missing one fails
#    at once, not after the run
#  - an error is one line and status 1, without Open MPI's banners, on 1,
#    2 and 3 ranks
#  - --log FILE: the printed values as CSV; on a terminal a progress line
#    on stderr, none with --quiet or without a terminal
#  - trac -o: its folder tried before any work, no temporary file left on
#    any exit
. "$srcdir/tests/e2e/lib.sh"

# ---- one name per tensor ----
cat >p.tra <<'EOF'
size N = 10;
input X[N];
param W[N] = "w_init.npy";
param V[N] = uniform(-1, 1);
repeat 3 {
    W[i] -= 0.1 * X[i];
    V[i] -= 0.1 * X[i];
    print W;
}
output W = "w_final.npy";
output V;
EOF
"$TRAC" p.tra -o p || { fail "trac p.tra"; finish; }
"$PYTHON" -c '
import numpy as np
np.save("x.npy", np.ones(10, np.float32))
np.save("w_init.npy", np.zeros(10, np.float32))
np.save("w_other.npy", np.full(10, 5, np.float32))
np.save("v0.npy", np.full(10, 2, np.float32))' || exit 1
cp w_other.npy w_other.keep
cp w_init.npy w_init.keep

# W= is W's initial value: read, never written over (the old executable
# wrote the result over w_other.npy and started from w_init.npy)
for np in 1 3; do
	rm -f w_final.npy V.npy
	if run $np ./p X=x.npy W=w_other.npy >out 2>err && cmp -s w_other.npy w_other.keep &&
		"$PYTHON" -c 'import numpy as np, sys
sys.exit(not np.allclose(np.load("w_final.npy"), 4.7))'; then
		pass "W=w_other.npy on $np ranks: W starts from it, which is left as it was; W.out's default written"
	else
		fail "W=w_other.npy on $np ranks: $(cat err)"
	fi
done
# a param made by the program starts from a file when one is named
if run 2 ./p X=x.npy V=v0.npy V.out=v1.npy >out 2>err && cmp -s w_init.npy w_init.keep &&
	"$PYTHON" -c 'import numpy as np, sys
sys.exit(not np.allclose(np.load("v1.npy"), 1.7))'; then
	pass "V=v0.npy V.out=v1.npy: a param the program initialises starts from the file named"
else
	fail "V=v0.npy V.out=v1.npy: $(cat err)"
fi
# an output over a file the run reads: one line, status 1, the file intact
for args in "W.out=w_init.npy" "W=w_other.npy W.out=w_other.npy" "V=v0.npy V.out=./v0.npy"; do
	cp v0.npy v0.keep
	run 2 ./p X=x.npy $args >out 2>err
	status=$?
	mpi_noise err
	if [ $status = 1 ] && [ "$(wc -l <err)" = 1 ] && grep -q 'is read from; write it elsewhere' err &&
		cmp -s w_init.npy w_init.keep && cmp -s w_other.npy w_other.keep && cmp -s v0.npy v0.keep; then
		pass "$args: refused before the run: $(cat err)"
	else
		fail "$args: status $status: $(cat err)"
	fi
done
# --help: each tensor once, with its roles, type, shape and files
./p --help >help.txt
if [ "$(sed -n '/^tensors:/,/^$/p' help.txt | grep -c '^  W ')" = 1 ] &&
	grep -q '^  W  *param,output  *f32 (10,)  *W= w_init.npy   W.out= w_final.npy$' help.txt &&
	grep -q '^  V  *param,output  *f32 (10,)  *V= (its initialiser)   V.out= V.npy$' help.txt &&
	grep -q '^  X  *input  *f32 (10,)  *X= required$' help.txt; then
	pass "--help lists each tensor once with its roles and files"
else
	fail "--help: $(sed -n '/^tensors:/,/^$/p' help.txt)"
fi

# ---- outputs tried before the first op ----
# a long run (10^7 iterations: minutes) whose output's folder is missing
# fails at once: the old executable trained to the end first
cat >long.tra <<'EOF'
size N = 64;
input X[N];
param W[N] = zeros;
param loss = zeros;
repeat 10000000 {
    W[i] -= 0.001 * X[i];
    loss = sum[i](W[i] * W[i]);
}
output W; output loss;
EOF
"$TRAC" -P 2 long.tra -o long || fail "trac long.tra"
"$PYTHON" -c 'import numpy as np; np.save("lx.npy", np.ones(64, np.float32))' || exit 1
t0=$(date +%s.%N)
timeout 60 ./long X=lx.npy loss.out=nodir/loss.npy >out 2>err
status=$?
t1=$(date +%s.%N)
secs=$(awk "BEGIN { printf \"%.2f\", $t1 - $t0 }")
if [ $status = 1 ] && [ "$(cat err)" = "long: output loss (nodir/loss.npy): No such file or directory" ] &&
	awk "BEGIN { exit !($secs < 1) }"; then
	pass "a missing output folder fails in $secs s, before the run"
else
	fail "a missing output folder: status $status after $secs s: $(cat err)"
fi
for np in 2 3; do
	timeout 60 "$MPIRUN" -np $np ./long X=lx.npy W.out=nodir/w.npy >out 2>err
	status=$?
	mpi_noise err
	if [ $status = 1 ] && [ "$(cat err)" = "long: output W (nodir/w.npy): No such file or directory" ]; then
		pass "a missing output folder on $np ranks: one line, status 1"
	else
		fail "a missing output folder on $np ranks: status $status: $(cat err)"
	fi
done

# ---- errors: one line, no MPI banner, whichever rank finds them ----
# (the old executable printed Open MPI's 10-line banners after the line)
"$TRAC" -D I=6 -D K=5 -D J=4 "$TOP/examples/matmul.tra" -o mm || { fail "trac matmul"; finish; }
"$PYTHON" -c '
import numpy as np
np.save("a.npy", np.ones((6, 5), np.float32)); np.save("b.npy", np.ones((5, 4), np.float32))
np.save("bt.npy", np.ones((4, 5), np.float32))' || exit 1
for np in 1 2 3; do
	for args in "A=nope.npy B=b.npy" "A=a.npy B=bt.npy" "A=a.npy B=b.npy C=nodir/c.npy" "A=a.npy B=b.npy --seed x"; do
		"$MPIRUN" -np $np ./mm $args >out 2>err
		status=$?
		mpi_noise err
		if [ $status = 1 ] && [ "$(wc -l <err)" = 1 ] && grep -q '^mm: ' err; then
			pass "$np rank(s), $args: status 1 and one line: $(cat err)"
		else
			fail "$np rank(s), $args: status $status, $(wc -l <err) lines:"; cat err
		fi
	done
done

# ---- --log and the progress line ----
cat >slow.tra <<'EOF'
size N = 256;
input X[N, N];
param W[N, N] = uniform(-0.01, 0.01);
repeat 8 {
    repeat 800 {
        Y[i, k] = X[i, j] * W[j, k];
        W[i, k] -= 0.00005 * Y[i, k];
    }
    loss = sum[i, k](W[i, k] * W[i, k]);
    print loss;
}
print W;
output W;
EOF
"$TRAC" -P 2 slow.tra -o slow || fail "trac slow.tra"
"$PYTHON" -c 'import numpy as np; np.save("sx.npy", np.random.default_rng(1).random((256, 256)).astype(np.float32))' || exit 1
# --log: a CSV row per printed value, the iterations of the blocks around
# it, written also under --quiet (which prints nothing)
if run 2 ./slow X=sx.npy W.out=sw.npy --log log.csv --quiet >out 2>err && [ ! -s out ] &&
	"$PYTHON" - <<'PY'
import csv, sys
rows = list(csv.DictReader(open("log.csv")))
assert list(rows[0].keys()) == ["iter1", "iter2", "name", "value"], rows[0].keys()
loss = [r for r in rows if r["name"] == "loss"]
assert [r["iter1"] for r in loss] == [str(i) for i in range(1, 9)] and all(r["iter2"] == "" for r in loss), loss
last = rows[-1]
assert last["name"] == "W" and last["iter1"] == "" and float(last["value"]) > 0, last
assert len(rows) == 9
PY
then
	pass "--log: a CSV row per printed value, with its loops' iterations, under --quiet too"
else
	fail "--log: $(cat err; cat log.csv)"
fi
# the progress line (drawn from 0.5 s on: the program runs 1.4 s on a quiet
# machine): on a terminal (script gives mpirun one, 200 columns wide so
# that the line is never cut), not with --quiet, not into a pipe.  On
# failure, what each run wrote.
if command -v script >/dev/null; then
	script -qec "stty cols 200 2>/dev/null; $MPIRUN -np 2 ./slow X=sx.npy W.out=sw.npy" term.txt >/dev/null 2>&1
	script -qec "stty cols 200 2>/dev/null; $MPIRUN -np 2 ./slow X=sx.npy W.out=sw.npy --quiet" quiet.txt >/dev/null 2>&1
	"$MPIRUN" -np 2 ./slow X=sx.npy W.out=sw.npy >pipe.txt 2>&1
	esc=$(printf '\033')
	why=
	grep -q "iter [1-8]/8, [0-9]*/800  [0-9.]* s" term.txt || why="$why; no 'iter i/8, j/800  t s' on the terminal"
	grep -q "${esc}\[K" term.txt || why="$why; no line erased on the terminal"
	! grep -q "${esc}\[K" quiet.txt || why="$why; a line erased under --quiet"
	! grep -q "${esc}\[K" pipe.txt || why="$why; a line erased in a pipe"
	[ "$(grep -c 'loss = ' pipe.txt)" = 8 ] || why="$why; $(grep -c 'loss = ' pipe.txt) losses in the pipe, not 8"
	if [ -z "$why" ]; then
		pass "a progress line on a terminal under mpirun; none with --quiet or into a pipe"
	else
		fail "the progress line${why}: terminal: $(cat -v term.txt | head -12); pipe: $(cat -v pipe.txt | head -12)"
	fi
	script -qec "./slow X=sx.npy W.out=sw.npy" term1.txt >/dev/null 2>&1
	grep -q "${esc}\[K" term1.txt && pass "a progress line on a terminal without mpirun" ||
		fail "no progress line without mpirun: $(cat -A term1.txt | head -5)"
else
	pass "the progress line: skipped (no script(1) to give the run a terminal)"
fi

# ---- trac -o: tried before any work; no temporary file left ----
# -o naming a device or a pipe (as -o /dev/null): written through, never
# renamed over (trac as root once replaced /dev/null with a regular file)
mkfifo ofifo && { cat ofifo >fifo.out & reader=$!; } &&
if "$TRAC" -S "$TOP/examples/matmul.tra" -o ofifo 2>err && wait $reader && [ -p ofifo ] &&
	grep -q "trac_rt.h" fifo.out; then
	pass "-o a pipe: the C written into it, the pipe left a pipe"
else
	fail "-o a pipe: $(cat err; ls -l ofifo)"
fi
mkdir -p tmp adir
export TMPDIR=$PWD/tmp
for o in nodir/x adir /proc/x; do
	"$TRAC" "$TOP/examples/matmul.tra" -o $o >out 2>err
	status=$?
	if [ $status = 1 ] && grep -q "^trac: error: cannot write '$o': " err && ! grep -q internal err; then
		pass "trac -o $o: $(cat err)"
	else
		fail "trac -o $o: status $status, $(cat err)"
	fi
done
# a compiler that fails: an internal error (status 4), and neither the
# generated C nor the output's temporary left (the old trac kept the C in
# /tmp and named it)
CC=false "$TRAC" "$TOP/examples/matmul.tra" -o x >out 2>err
status=$?
kept=$(grep -o '/[^ ]*trac-[A-Za-z0-9]*\.c' err | while read -r f; do [ -e "$f" ] && echo "$f"; done)
if [ $status = 4 ] && [ -z "$(ls -A tmp)" ] && [ -z "$(ls -A . | grep '^\.x\.')" ] && [ -z "$kept" ]; then
	pass "the C compiler failing: status 4, no temporary file left"
else
	fail "the C compiler failing: status $status, left: $(ls -A tmp) $(ls -A . | grep '^\.x\.') $kept"
	rm -f $kept
fi
# killed while the compiler runs: nothing left either
printf '#!/bin/sh\nexec sleep 30\n' >slowcc
chmod +x slowcc
CC=$PWD/slowcc "$TRAC" "$TOP/examples/matmul.tra" -o y >out 2>err &
job=$!
n=0
while [ -z "$(ls -A tmp)" ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
sleep 0.2
cc=$(pgrep -P $job)
kill -TERM $job
wait $job
if [ $n -lt 600 ] && [ -z "$(ls -A tmp)" ] && [ -z "$(ls -A . | grep '^\.y\.')" ] && [ ! -e y ]; then
	pass "trac killed while compiling: no temporary file left"
else
	fail "trac killed while compiling: left: $(ls -A tmp) $(ls -A . | grep '^\.y\.')"
fi
[ -n "$cc" ] && kill $cc 2>/dev/null
finish
