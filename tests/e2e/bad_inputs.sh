#!/bin/sh
# A trac-compiled program given bad inputs: one line naming the tensor, the
# file, what was expected and what was found; the exit status the row names
# on 1 rank without mpirun and on 1 and 3 ranks under mpirun, never a hang;
# nothing left at the output path, and a previous output there untouched.
#
# One row per case:   NAME | STATUS | ARGUMENTS | the stderr expected
. "$srcdir/tests/e2e/lib.sh"

"$TRAC" -D I=6 -D K=5 -D J=4 "$TOP/examples/matmul.tra" -o mm || { fail "trac"; finish; }
"$PYTHON" - <<'PY' || exit 1
import numpy as np
np.save("a.npy", np.ones((6, 5), np.float32))
np.save("b.npy", np.ones((5, 4), np.float32))
np.save("a64.npy", np.ones((6, 5), np.float64))
np.save("ai4.npy", np.ones((6, 5), np.int32))
np.save("at.npy", np.ones((5, 6), np.float32))
np.save("a1.npy", np.ones(30, np.float32))
np.save("fortran.npy", np.asfortranarray(np.ones((6, 5), np.float32)))
np.save("big.npy", np.ones((6, 5), ">f4"))
with open("a.npy", "rb") as f:
    data = f.read()
with open("short.npy", "wb") as f:
    f.write(data[:-7])
with open("headonly.npy", "wb") as f:
    f.write(data[:9])
with open("badhead.npy", "wb") as f:
    f.write(data[:10] + b"{'descr': <f4, 'fortran_order': False}".ljust(len(data) - 10))
with open("text.npy", "w") as f:
    f.write("not an array\n")
open("empty.npy", "wb").close()
PY
mkdir adir
mkfifo fifo

# The file that cannot be read although it opens: tests run as root, so no
# chmod makes a file unreadable; /proc/self/mem opens and fails every read.
cases='good inputs|0|A=a.npy B=b.npy C=c.npy|
missing file|1|A=nope.npy B=b.npy C=c.npy|mm: input A (nope.npy): No such file or directory
unreadable file|1|A=/proc/self/mem B=b.npy C=c.npy|mm: input A (/proc/self/mem): Input/output error
named pipe|1|A=fifo B=b.npy C=c.npy|mm: input A (fifo): a named pipe, not a file; every rank reads its part of the file at its offset
device|1|A=/dev/null B=b.npy C=c.npy|mm: input A (/dev/null): not a regular file
directory|1|A=adir B=b.npy C=c.npy|mm: input A (adir): is a directory
empty file|1|A=empty.npy B=b.npy C=c.npy|mm: input A (empty.npy): not a .npy file
not npy|1|A=text.npy B=b.npy C=c.npy|mm: input A (text.npy): not a .npy file
header cut short|1|A=headonly.npy B=b.npy C=c.npy|mm: input A (headonly.npy): not a .npy file
malformed header|1|A=badhead.npy B=b.npy C=c.npy|mm: input A (badhead.npy): malformed .npy header: no '"'"'shape'"'"'
wrong dtype|1|A=a64.npy B=b.npy C=c.npy|mm: input A (a64.npy): dtype <f4 expected, found <f8
integer dtype|1|A=ai4.npy B=b.npy C=c.npy|mm: input A (ai4.npy): dtype <f4 expected, found <i4
wrong shape|1|A=at.npy B=b.npy C=c.npy|mm: input A (at.npy): shape (6, 5) expected, found (5, 6)
wrong rank|1|A=a1.npy B=b.npy C=c.npy|mm: input A (a1.npy): shape (6, 5) expected, found (30,)
fortran order|1|A=fortran.npy B=b.npy C=c.npy|mm: input A (fortran.npy): Fortran order not supported; save the array in C order
big endian|1|A=big.npy B=b.npy C=c.npy|mm: input A (big.npy): big-endian data not supported; expected <f4, found >f4
truncated|1|A=short.npy B=b.npy C=c.npy|mm: input A (short.npy): file is truncated: 120 bytes of data expected, 113 found
named twice|1|A=a.npy A=a.npy B=b.npy C=c.npy|mm: tensor A given twice ('"'"'A=a.npy'"'"' and '"'"'A=a.npy'"'"')
unknown name|1|A=a.npy B=b.npy Z=z.npy C=c.npy|mm: unknown tensor '"'"'Z'"'"' in '"'"'Z=z.npy'"'"' (tensors: C A B)
no input|1|B=b.npy C=c.npy|mm: input A: no file given (add A=path.npy; see --help)
empty path|1|A= B=b.npy C=c.npy|mm: empty path in '"'"'A='"'"'
stray argument|1|A=a.npy B=b.npy C=c.npy extra|mm: unexpected argument '"'"'extra'"'"' (expected NAME=path.npy, NAME.out=path.npy or an option; see --help)
misspelt option|1|A=a.npy B=b.npy C=c.npy --profle|mm: unknown option '"'"'--profle'"'"'; did you mean '"'"'--profile'"'"'? (see --help)
unknown option|1|A=a.npy B=b.npy C=c.npy --frobnicate|mm: unknown option '"'"'--frobnicate'"'"' (see --help)
bad seed|1|A=a.npy B=b.npy C=c.npy --seed x|mm: --seed needs an unsigned integer, found '"'"'x'"'"'
output folder|1|A=a.npy B=b.npy C=nodir/c.npy|mm: output C (nodir/c.npy): No such file or directory
trace folder|1|A=a.npy B=b.npy C=c.npy --trace=nodir/t.json|mm: --trace nodir/t.json: No such file or directory
output is a folder|1|A=a.npy B=b.npy C=adir|mm: output C (adir): is a directory
output named .out|0|A=a.npy B=b.npy C.out=c.npy|
output over an input|1|A=a.npy B=b.npy C=a.npy|mm: output C (a.npy): the file input A is read from; write it elsewhere (C.out=PATH)
output over an input, another name|1|A=a.npy B=b.npy C.out=./a.npy|mm: output C (./a.npy): the file input A is read from; write it elsewhere (C.out=PATH)
an input is no output|1|A=a.npy A.out=x.npy B=b.npy C=c.npy|mm: input A is not an output: '"'"'A.out=x.npy'"'"' names no file to write (outputs: C)
output named twice|1|A=a.npy B=b.npy C=c.npy C.out=d.npy|mm: tensor C given twice ('"'"'C=c.npy'"'"' and '"'"'C.out=d.npy'"'"')
log folder|1|A=a.npy B=b.npy C=c.npy --log nodir/l.csv|mm: --log nodir/l.csv: No such file or directory
log over an input|1|A=a.npy B=b.npy C=c.npy --log b.npy|mm: --log b.npy: the file input B is read from; write it elsewhere (--log PATH)
log over the output|1|A=a.npy B=b.npy C=c.npy --log c.npy|mm: --log and output C both write c.npy; write one elsewhere (C.out=PATH)
log without a file|1|A=a.npy B=b.npy C=c.npy --log|mm: --log needs a file'

# Runs program $1 on each row of $2.
check_rows() {
prog=$1
echo "$2" | while IFS='|' read -r name want_status args want; do
	for np in 0 1 3; do
		# a previous good output at the path must survive a failed run
		printf 'previous\n' >c.npy
		if [ $np = 0 ]; then
			timeout 60 ./$prog $args </dev/null >out 2>err
		else
			timeout 60 "$MPIRUN" -q -np $np ./$prog $args </dev/null >out 2>err
		fi
		status=$?
		mpi_noise err
		if [ $status != "$want_status" ]; then
			echo "FAIL: $name on $np ranks: exit status $status, expected $want_status"; cat err; echo x >>failed
		elif [ "$(cat err)" != "$want" ]; then
			echo "FAIL: $name on $np ranks: stderr"; cat err; echo "expected: $want"; echo x >>failed
		elif [ "$want_status" != 0 ] && [ "$(cat c.npy)" != previous ]; then
			echo "FAIL: $name on $np ranks: the previous output was changed"; echo x >>failed
		elif [ "$want_status" = 0 ] && ! "$PYTHON" -c 'import numpy, sys; sys.exit(not (numpy.load("c.npy") == 5).all())'; then
			echo "FAIL: $name on $np ranks: wrong output"; echo x >>failed
		elif ls -a | grep -q '^\.c\.npy\.'; then
			echo "FAIL: $name on $np ranks: a temporary output was left behind"; ls -a; echo x >>failed
		else
			echo "ok: $name on $np ranks"
		fi
	done
done
}
check_rows mm "$cases"

# A gather's index outside the gathered dimension: one line naming the
# index and the table, whichever rank holds the value, and no output.
cat >gt.tra <<'EOF'
size V = 5, D = 3, B = 7;
input E[V, D];
input idx[B] : i64;
C[b, d] = E[idx[b], d] + 4;
output C;
EOF
"$TRAC" gt.tra -o gt || { fail "trac gt.tra"; finish; }
"$PYTHON" - <<'PY' || exit 1
import numpy as np
np.save("e.npy", np.ones((5, 3), np.float32))
np.save("i.npy", np.array([0, 4, 1, 4, 2, 3, 0]))
np.save("ibig.npy", np.array([0, 4, 1, 4, 2, 5, 0]))
np.save("ineg.npy", np.array([0, 4, -1, 4, 2, 3, 0]))
PY
gcases='good index|0|E=e.npy idx=i.npy C=c.npy|
index too large|1|E=e.npy idx=ibig.npy C=c.npy|gt: index idx[5] = 5 is outside dimension 1 of E (0 to 4)
negative index|1|E=e.npy idx=ineg.npy C=c.npy|gt: index idx[2] = -1 is outside dimension 1 of E (0 to 4)'
check_rows gt "$gcases"
[ -f failed ] && FAILS=$(wc -l <failed)
finish
