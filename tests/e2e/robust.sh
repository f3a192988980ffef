#!/bin/sh
# Compiled programs under stress: killed while writing an output, out of
# memory before and during the run, a rank killed, training killed and
# resumed from its checkpoint.  Each case says what it checks.
. "$srcdir/tests/e2e/lib.sh"

# the runs below are killed on purpose: mpirun's own banners go to err files
export OMPI_MCA_orte_abort_print_stack=0

wait_for() {    # wait_for SECONDS COMMAND...: poll every 50 ms until COMMAND succeeds
	limit=$(( $1 * 20 )); shift; n=0
	while ! "$@"; do
		n=$((n + 1)); [ $n -ge $limit ] && return 1
		sleep 0.05
	done
}
has_temp() { ls -a | grep -q '^\.C\.npy\.'; }
temp_or_ended() { has_temp || ! kill -0 $job 2>/dev/null; }

# ---- 1. an output killed while it is written leaves the previous one ----
cat >outer.tra <<'EOF'
size N = 7000;
input a[N];
input b[N];
C[i, j] = a[i] * b[j];
output C;
EOF
"$TRAC" -P 2 outer.tra -o rbouter || fail "trac outer.tra"
"$PYTHON" -c '
import numpy as np
np.save("a.npy", np.ones(7000, np.float32)); np.save("b.npy", np.full(7000, 2, np.float32))
np.save("C.npy", np.zeros(3, np.float32))       # the previous good output
' || exit 1
cp C.npy previous.npy
# The kill races the writer: on a fast disk the 196 MB can be written and
# renamed between seeing the temporary and the kill.  Then C.npy is the
# whole new output, as it should be (ref.npy, from an uninterrupted run):
# put the previous one back and try again.  Anything else is a torn output.
"$MPIRUN" -np 2 ./rbouter a=a.npy b=b.npy C=ref.npy >out 2>err || fail "outer.tra uninterrupted"
killed=no
for try in 1 2 3 4 5; do
	"$MPIRUN" -np 2 ./rbouter a=a.npy b=b.npy C=C.npy >out 2>err &
	job=$!
	wait_for 60 temp_or_ended && has_temp && kill -9 $(pgrep -P $job -x rbouter)
	wait $job
	cmp -s C.npy ref.npy || { killed=yes; break; }
	cp previous.npy C.npy
done
if [ $killed != yes ]; then
	fail "kill during write: 5 runs finished writing before the kill"
elif ! cmp -s C.npy previous.npy; then
	fail "kill during write: the previous output was changed, not replaced whole"
else
	pass "kill -9 while writing a 196 MB output: the previous output is intact (try $try)"
fi
rm -f ref.npy
rm -f .C.npy.*

# the same, deterministically: the file-size limit kills the writer (SIGXFSZ)
"$MPIRUN" -np 2 sh -c 'ulimit -f 1000; exec ./rbouter a=a.npy b=b.npy C=C.npy' >out 2>err
status=$?
if [ $status = 0 ]; then
	fail "write past ulimit -f: exit status 0"
elif ! cmp -s C.npy previous.npy; then
	fail "write past ulimit -f: the previous output was changed"
else
	pass "a writer killed by the file-size limit (status $status): the previous output is intact"
fi
rm -f .C.npy.*

# a disk that fills up while rank 0's writer thread writes (runtime/write.c,
# Out): one error line, the previous output intact, no temporary left.
# It needs a file system to fill: a 40 MB ext4 image on a loop device,
# which takes root (lib.sh's skip elsewhere).
full=$PWD/fullfs
mkdir -p "$full"
if [ "$(id -u)" = 0 ] && command -v mkfs.ext4 >/dev/null && truncate -s 40M full.img &&
   mkfs.ext4 -q -F full.img >/dev/null 2>&1 && mount -o loop full.img "$full" 2>/dev/null; then
	cp previous.npy "$full/C.npy"
	"$MPIRUN" -np 2 ./rbouter a=a.npy b=b.npy C="$full/C.npy" >out 2>err
	status=$?
	if [ $status = 0 ]; then
		fail "disk full: exit status 0"
	elif ! grep -q "^rbouter: output C ($full/C.npy): No space left on device$" err; then
		fail "disk full: no error line"; cat err
	elif ! cmp -s "$full/C.npy" previous.npy; then
		fail "disk full: the previous output was changed"
	elif ls -a "$full" | grep -q '^\.C\.npy\.'; then
		fail "disk full: a temporary is left"
	else
		pass "a 196 MB output onto a 40 MB file system: one error line, the previous output intact"
	fi
	umount "$full"
else
	skip "disk full (no loop-mounted file system: needs root, mkfs.ext4 and a loop device)"
fi
rm -f full.img

# ---- 2. memory: refused before the run (--in-memory; without it the run
# goes out of core, tests/e2e/spill.sh); out of memory during it ----
# 17320^2 f32 is 1.2 GB on one rank, with 800 MB of address space (the
# peak is the write's: C and rank 0's 16 MiB of stages)
cat >huge.tra <<'EOF'
size N = 17320;
input a[N];
input b[N];
C[i, j] = a[i] * b[j];
output C;
EOF
"$TRAC" -P 1 huge.tra -o huge || fail "trac huge.tra"
"$PYTHON" -c '
import numpy as np
np.save("ha.npy", np.ones(17320, np.float32)); np.save("hb.npy", np.ones(17320, np.float32))' || exit 1
timeout 120 "$MPIRUN" -np 1 sh -c 'ulimit -v 800000; exec ./huge a=ha.npy b=hb.npy C=hc.npy --in-memory' >out 2>err
status=$?
if [ $status != 1 ]; then
	fail "memory check: exit status $status, expected 1"; cat err
elif ! grep -q "^huge: the plan needs 1\.2[0-9]* GB per rank at its peak, at op #[0-9]* [a-z]* ([^)]*), more than the [0-9.]* MB rank 0 can have (the address-space limit (ulimit -v)" err; then
	fail "memory check: message"; cat err
elif [ -e hc.npy ]; then
	fail "memory check: an output was written"
else
	pass "a plan that cannot fit is refused before it starts: $(head -c 100 err)..."
fi
timeout 120 "$MPIRUN" -np 1 -x TRAC_MEM_CHECK=0 sh -c 'ulimit -v 800000; exec ./huge a=ha.npy b=hb.npy C=hc.npy' >out 2>err
status=$?
if [ $status != 1 ]; then
	fail "out of memory during the run: exit status $status, expected 1"; cat err
elif ! grep -q "^huge: out of memory on rank 0: cannot allocate .* for a chunk, in op #[0-9]* join (C\[i, j\] = a\[i\] \* b\[j\])" err; then
	fail "out of memory during the run: message"; cat err
else
	pass "out of memory during the run is reported, naming the op"
fi
rm -f hc.npy .hc.npy.*

# ---- 3. a rank killed: the whole job ends within seconds ----
cat >train.tra <<'EOF'
size N = 50, D = 7, H = 5, T = 40000;
input X[N, D];
input Y[N];
param W[D, H] = normal(0, 0.3);
param v[H] = uniform(-0.5, 0.5);
param c = zeros;
repeat T {
    Z[n, h] = tanh(X[n, d] * W[d, h]);
    p[n] = Z[n, h] * v[h] + c;
    loss = sum[n]((p[n] - Y[n]) * (p[n] - Y[n])) / N;
    dW = grad(loss, W);
    dv = grad(loss, v);
    dc = grad(loss, c);
    W[d, h] -= 0.001 * dW[d, h];
    v[h] -= 0.001 * dv[h];
    c -= 0.001 * dc;
}
output W; output v; output c;
EOF
"$TRAC" -P 2 train.tra -o rbtrain || fail "trac train.tra"
# the rank-death run must still be going when a rank is killed, however
# fast the machine: far more iterations (it never runs to the end)
"$TRAC" -P 2 -D T=100000000 train.tra -o rbdeath || fail "trac -D T=... train.tra"
"$PYTHON" -c '
import numpy as np
r = np.random.default_rng(1)
np.save("x.npy", r.standard_normal((50, 7)).astype(np.float32))
np.save("y.npy", r.standard_normal(50).astype(np.float32))' || exit 1
args="X=x.npy Y=y.npy"
ranks_up() { [ "$(pgrep -P $job -x rbdeath | wc -l)" -ge 3 ]; }
"$MPIRUN" -np 3 ./rbdeath $args W.out=kw.npy v.out=kv.npy c.out=kc.npy >out 2>err &
job=$!
if ! wait_for 60 ranks_up; then
	fail "rank death: the ranks never started"
else
	sleep 0.5
	victim=$(pgrep -P $job -x rbdeath | sed -n 2p)
	start=$(date +%s)
	kill -9 "$victim"
	ended=no
	wait_for 20 sh -c "! kill -0 $job 2>/dev/null" && ended=yes
	wait $job
	status=$?
	if [ $ended != yes ]; then
		fail "rank death: the job still runs 20 s after a rank died"
		kill -9 $(pgrep -P $job -x rbdeath) $job
	elif [ $status = 0 ]; then
		fail "rank death: exit status 0"
	elif [ -e kw.npy ]; then
		fail "rank death: an output was written"
	else
		pass "one rank killed: the job ended in $(( $(date +%s) - start )) s with status $status"
	fi
fi

# ---- 4. training killed, then resumed from its checkpoint ----
"$MPIRUN" -np 2 ./rbtrain $args W.out=fw.npy v.out=fv.npy c.out=fc.npy >out 2>err || { fail "uninterrupted run"; cat err; }
has_ck() { [ -e ck ]; }
# 40,000 iterations take about a second: a loaded machine can be slow to
# see the first checkpoint and the run ends first; then try again
interrupted=no
for try in 1 2 3 4 5; do
	rm -f ck iw.npy
	"$MPIRUN" -np 2 ./rbtrain $args W.out=iw.npy v.out=iv.npy c.out=ic.npy --checkpoint ck --checkpoint-every 100 >out 2>err &
	job=$!
	if ! wait_for 120 has_ck; then
		fail "checkpoint: none written"
	fi
	kill -9 $(pgrep -P $job -x rbtrain)
	wait $job
	if [ ! -e iw.npy ]; then
		interrupted=yes
		break
	fi
done
[ $interrupted = yes ] || fail "checkpoint: 5 runs finished before they were killed; make it longer"
"$MPIRUN" -np 2 ./rbtrain $args W.out=rw.npy v.out=rv.npy c.out=rc.npy --resume ck --checkpoint ck --checkpoint-every 1000 >out 2>err
status=$?
if [ $status != 0 ]; then
	fail "resume: exit status $status"; cat err
elif ! grep -q "^resumed from ck after iteration [0-9]*00 of 40000 (written on 2 ranks)" out; then
	fail "resume: no resume message"; cat out
elif ! cmp -s fw.npy rw.npy || ! cmp -s fv.npy rv.npy || ! cmp -s fc.npy rc.npy; then
	fail "resume: the params differ from the uninterrupted run's"
else
	pass "killed at iteration $(sed -n 's/^resumed from ck after iteration \([0-9]*\).*/\1/p' out), resumed: bit for bit the uninterrupted run's params"
fi
# on another rank count: the same training, up to rounding
"$MPIRUN" -np 1 ./rbtrain $args W.out=r3w.npy v.out=r3v.npy c.out=r3c.npy --resume ck >out 2>err || { fail "resume on 1 rank"; cat err; }
"$PYTHON" -c '
import numpy as np, sys
for n in "wvc":
    a, b = np.load("f%s.npy" % n), np.load("r3%s.npy" % n)
    if not np.allclose(a, b, rtol=1e-4, atol=1e-5):
        sys.exit("%s differs: %s" % (n, abs(a - b).max()))' && pass "a checkpoint written on 2 ranks resumes on 1" || fail "resume on 1 rank: params"

# bad checkpoints: one line, status 1
"$TRAC" outer.tra -o rbother || fail "trac outer.tra"
printf 'not a checkpoint' >junk
head -c 100 ck >short
cases='missing|./rbtrain X=x.npy Y=y.npy --resume nope|rbtrain: --resume nope: No such file or directory
garbage|./rbtrain X=x.npy Y=y.npy --resume junk|rbtrain: --resume junk: not a trac checkpoint
truncated|./rbtrain X=x.npy Y=y.npy --resume short|rbtrain: --resume short: a truncated checkpoint
other seed|./rbtrain X=x.npy Y=y.npy --resume ck --seed 5|rbtrain: --resume ck: written with --seed 0, this run has --seed 5
no loop|./rbother a=a.npy b=b.npy --checkpoint ck2|rbother: --checkpoint: the program has no repeat block to checkpoint
bad every|./rbtrain X=x.npy Y=y.npy --checkpoint ck2 --checkpoint-every 0|rbtrain: --checkpoint-every needs a count of iterations (1 or more), found '"'"'0'"'"''
echo "$cases" | while IFS='|' read -r name cmd want; do
	timeout 60 "$MPIRUN" -q -np 2 $cmd </dev/null >out 2>err
	status=$?
	if [ $status != 1 ] || [ "$(cat err)" != "$want" ]; then
		echo "FAIL: bad checkpoint, $name: status $status"; cat err; echo "expected: $want"; echo x >>failed
	else
		echo "ok: bad checkpoint, $name"
	fi
done
# a checkpoint of another program
cat >train2.tra <<'EOF'
size N = 50, D = 7;
input X[N, D];
param W[D] = zeros;
repeat 3 {
    W[d] -= 0.1 * X[n, d];
}
output W;
EOF
"$TRAC" train2.tra -o train2 || fail "trac train2.tra"
"$MPIRUN" -q -np 1 ./train2 X=x.npy --resume ck >out 2>err
[ $? = 1 ] && grep -q "^train2: --resume ck: written by another program (its tensors differ from train2's)$" err &&
	pass "bad checkpoint, another program's" || { fail "bad checkpoint, another program's"; cat err; }
# ---- an output or a trace to a device is written into it, never renamed
# over it (as root, /dev/null became a regular file): a device of our own,
# the same as /dev/null, made where mknod may (root) ----
if mknod nulldev c 1 3 2>/dev/null; then
	"$TRAC" -P 2 train2.tra -o devout || fail "trac train2.tra (devout)"
	if "$MPIRUN" -q -np 2 ./devout X=x.npy W.out=nulldev --trace nulldev >out 2>err && [ -c nulldev ]; then
		pass "an output and a trace to a device: still a device"
	else
		fail "an output and a trace to a device: $(ls -l nulldev) $(cat err)"
	fi
	rm -f nulldev
else
	echo "skip: mknod (not root): an output to a device"
fi

[ -f failed ] && FAILS=$((FAILS + $(wc -l <failed)))
finish
