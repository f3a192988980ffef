#!/bin/sh
# The compiler under valgrind (memcheck) on every example and on a program
# that uses the whole stdlib: no invalid read or write, no use of an
# uninitialised value, up to the emitted C (-S) and --explain.  Leaks are
# not counted: trac frees by phase and exits.  Without valgrind, lib.sh's skip.
. "$srcdir/tests/e2e/lib.sh"
command -v valgrind >/dev/null || { skip "trac under valgrind (not installed; Debian: valgrind)"; finish; }

cat >stdlib_use.tra <<'EOF'
import "nn.tra";
import "linalg.tra";
size N = 6, D = 5, H = 4, L = 3;
input X[N, D];
input Y[N, L];
input S[D, D];
input y[N];
param W1[D, H] = normal(0, 0.1);
param b1[H] = zeros;
param W2[H, L] = uniform(-0.1, 0.1);
param b2[L] = zeros;
param w[D] = zeros;
repeat 2 {
    H1 = relu_layer(X, W1, b1);
    H2 = sigmoid_layer(X, W1, b1);
    H3 = tanh_layer(X, W1, b1);
    Z = linear(H1, W2, b2);
    Z3 = linear(H3, W2, b2);
    l1 = softmax_xent(Z, Y);
    l2 = mse(Z3, Y);
    loss = l1 + l2 + sum[n, h](H2[n, h]) * 0;
    dW1 = grad(loss, W1);
    dW2 = grad(loss, W2);
    W1[d, h] -= 0.1 * dW1[d, h];
    W2[h, l] -= 0.1 * dW2[h, l];
    zl = matvec(X, w);
    pr[n] = sigmoid(zl[n]);
    l3 = bce_logits(zl, y);
    l4 = bce(pr, y);
    l5 = l3 + l4;
    dw = grad(l5, w);
    w[d] -= 0.1 * dw[d];
    P = softmax(Z);
    Q = log_softmax(Z);
    acc = accuracy(Z, Y);
    print loss;
    print acc;
    print P;
    print Q;
}
T = transpose(S);
M = matmul(S, T);
dg = diag(M);
t1 = trace(M);
t2 = frobenius(M);
t3 = norm1(dg);
t4 = norm2(w);
t5 = norminf(w);
t6 = dot(w, w);
t = t1 + t2 + t3 + t4 + t5 + t6;
o = outer(b1, b2);
output W1; output W2; output t; output o;
EOF

vg() {  # vg NAME ARGS...: trac under memcheck
	name=$1; shift
	valgrind -q --error-exitcode=99 --leak-check=no --track-origins=yes "$TRAC" "$@" >vg.out 2>vg.err
	status=$?
	if [ $status = 99 ] || grep -q "^==[0-9]*==" vg.err; then
		fail "valgrind: $name"; head -n 40 vg.err
	elif [ $status != 0 ]; then
		fail "$name: trac exited $status"; head -n 20 vg.err
	else
		pass "valgrind-clean: $name"
	fi
}

# Each example planned for one rank count (planning all fifteen under
# memcheck took 20 of the suite's minutes; a count's plan plans the counts
# below it it tries the blocks of, so --explain -P 4 planned 1 to 4);
# matmul and the stdlib program below go through every count's plan and
# the shared emitted C.
for tra in "$TOP"/examples/*.tra; do
	base=$(basename "$tra" .tra)
	P="-P 2"
	[ "$base" = matmul ] && P=
	vg "$base.tra -S $P" -S $P "$tra" -o "$base.c"
	vg "$base.tra --explain -P 2" --explain -P 2 "$tra"
done
vg "stdlib_use.tra -S" -S stdlib_use.tra -o stdlib_use.c
vg "stdlib_use.tra -O0 -P 3 --explain=json" -O0 -P 3 --explain=json stdlib_use.tra
finish
