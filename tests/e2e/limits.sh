#!/bin/sh
# The compiler's limits on inputs too big to keep in tests/golden: one clear
# error and status 1, never a crash (status 1 also rules out 4, a bug).
. "$srcdir/tests/e2e/lib.sh"

expect() {      # expect NAME 'GREP PATTERN' TRAC-ARGS...
	name=$1 pattern=$2; shift 2
	"$TRAC" "$@" >out 2>err
	status=$?
	if [ $status != 1 ]; then
		fail "$name: exit status $status, expected 1"; head -c 600 err
	elif ! grep -q "$pattern" err; then
		fail "$name: message"; head -c 600 err
	else
		pass "$name: $(head -n 1 err | cut -c1-110)"
	fi
}

# a source over 64 MiB
"$PYTHON" -c '
import sys
with open("big.tra", "w") as f:
    f.write("size N = 4;\ninput A[N];\n")
    f.write(("#" + " " * 1023 + "\n") * (65 * 1024))
    f.write("B[i] = A[i];\noutput B;\n")' || exit 1
expect "a 65 MiB source" "^trac: error: cannot read 'big.tra': is too big for a program (more than 64 MiB)$" -fsyntax-only big.tra
rm -f big.tra

# not text: the main file, and /dev/zero (endless NULs: refused at once)
expect "/dev/zero as the program" "^trac: error: cannot read '/dev/zero': is not a text file (it contains NUL bytes)$" -fsyntax-only /dev/zero

# a 2M-term sum: its tree was deeper than the C stack in --dump-after=parse
"$PYTHON" -c '
with open("sum.tra", "w") as f:
    f.write("size N = 4;\ninput A[N];\nB[i] = A[i]" + " + A[i]" * 2000000 + ";\noutput B;\n")' || exit 1
expect "a 2M-term sum, --dump-after=parse" "^sum.tra:3:8: error: expression nested too deeply (more than 200 levels)$" --dump-after=parse sum.tra
expect "a 2M-term sum, -S" "^sum.tra:3:8: error: expression nested too deeply (more than 200 levels)$" -S sum.tra -o sum.c
rm -f sum.tra

# blocks nested past the parser's stack
"$PYTHON" -c '
with open("deep.tra", "w") as f:
    f.write("size N = 4;\nparam W[N] = zeros;\n" + "repeat 1 {\n" * 5000 + "W[i] += 1;\n" + "}\n" * 5000 + "output W;\n")' || exit 1
expect "5000 nested repeat blocks" "^deep.tra:[0-9]*:[0-9]*: error: program nested too deeply for the parser (parentheses, operators or blocks)$" -fsyntax-only deep.tra
finish
