#!/bin/sh
# IST bodies cut from the program's TRA (frontend/ist.c, HACKING.md "IST"):
# the subnet's dims of split sizes are H/n, its numbers the whole
# program's (a const computed from a split size keeps its value), and a
# window along a split dim is an error, not a wrong program.
. "$srcdir/tests/e2e/lib.sh"

program() {     # program STATEMENT: an IST loop whose body ends with STATEMENT
	cat <<EOT
size N = 60, D = 5, H1 = 6, C = 3, B = 4, NB = N / B;
const lr = 0.1, k = 1 / H1;
input X[N, D];
input Y[N, C];
param W1[D, H1] = normal(0, 0.3);
param W2[H1, C] = normal(0, 0.3);
repeat b in NB split H1 every 3 {
    Xb[n in B, d] = X[b*B + n, d];
    A[n, h] = relu(Xb[n, d] * W1[d, h]);
    $1
    Z[n, c] = S[n, h] * W2[h, c];
    loss = sum[n, c]((Z[n, c] - Y[b*B + n, c]) ** 2);
    dW1 = grad(loss, W1);
    dW2 = grad(loss, W2);
    W1[d, h] -= lr * dW1[d, h];
    W2[h, c] -= lr * dW2[h, c];
}
output W1; output W2;
EOT
}

# k = 1/6 in the subnet's kernel on 2 ranks, not 1/3 (H1 is 3 there)
program 'S[n, h] = A[n, h] * k;' >const.tra
if "$TRAC" --explain -P 2 const.tra >const.txt 2>&1; then
	grep -q 'subnet params: W1\[5, 3\], W2\[3, 3\]' const.txt || fail "the subnet's params are not W1[5, 3], W2[3, 3]"
	sed -n '/the subnet.s plan/,$p' const.txt | grep -q '0\.16666666' ||
		fail "the subnet's kernel does not keep k = 1/H1 = 1/6"
	sed -n '/the subnet.s plan/,$p' const.txt | grep -q '0\.33333333' &&
		fail "the subnet's kernel has 1/3: a number was cut"
else
	fail "const: $(cat const.txt)"
fi

# a window along the split dim: an error at planning, located
program 'S[n, h in H1] = A[n, h + 1];' >window.tra
"$TRAC" -fsyntax-only window.tra 2>window.err || fail "window: -fsyntax-only: $(cat window.err)"
if "$TRAC" --explain -P 2 window.tra >/dev/null 2>window.err; then
	fail "a window along a split dim was planned"
else
	[ $? = 1 ] && grep -q 'window.tra:10:.*not supported yet' window.err ||
		fail "window: not a located error: $(cat window.err)"
fi
[ "$FAILS" = 0 ] && pass "IST bodies: split dims cut, numbers kept, windows along a split dim refused"
finish
