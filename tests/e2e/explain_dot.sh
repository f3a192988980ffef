#!/bin/sh
# --explain=dot: for each program whose plan the golden tests print, a graph
# that Graphviz lays out without a complaint, in which every broadcast and
# shuffle of the plan is drawn once (as an edge, or as a node when several
# ops read it) and every statement is a box with its strategy.
. "$srcdir/tests/e2e/lib.sh"

have_dot=0
command -v dot >/dev/null 2>&1 && have_dot=1 || echo "skip: layout by Graphviz dot (not installed)"
# a plan with several statements, params and a loop
cat >train.tra <<'TRA'
size N = 1000, D = 100, H = 50;
input X[N, D];
input T[N, H];
param W[D, H] = normal(0, 0.01);
const lr = 0.001;
repeat 10 {
    Y[n, h] = X[n, d] * W[d, h];
    E[n, h] = Y[n, h] - T[n, h];
    W[d, h] -= lr * X[n, d] * E[n, h];
    loss = sum[n, h](E[n, h] * E[n, h]);
    print loss;
}
output W;
TRA
n=0
for tra in "$TOP"/tests/golden/*.tra "$TOP"/examples/*.tra "$PWD/train.tra"; do
	[ "${tra%/tests/golden/*}" = "$TOP" ] && [ ! -f "${tra%.tra}.explain" ] && continue
	name=${tra##*/}
	args=$(sed -n 's/^# args: //p' "$tra")
	for costs in "" "--no-costs"; do
		n=$((n + 1))
		# in the program's folder, as the golden tests run (--machine FILE);
		# the args first, so an --explain=all among them yields to dot
		if ! (cd "${tra%/*}" && "$TRAC" $args --explain=dot $costs "$tra") >plan.dot 2>err; then
			fail "$name $costs: $(cat err)"
			continue
		fi
		# (the plans only: dot does not draw IST loops' subnet plans, which follow them)
		(cd "${tra%/*}" && "$TRAC" --explain --no-costs $args "$tra") | sed '/^IST loop /,$d' >plan.txt
		# moves in the plan: "#N bcast" and "#N shuffle" lines of the text form
		want=$(grep -c '^ *#[0-9]* \(bcast\|shuffle\) ' plan.txt)
		edges=$(grep -c '^  op[0-9]* -> op[0-9]* .*label=<\(broadcast\|shuffle\)' plan.dot)
		nodes=$(grep -c '^ *op[0-9]* \[shape=ellipse' plan.dot)
		stmts=$(grep -c '^ *statement [0-9]' plan.txt)
		boxes=$(grep -c 'subgraph cluster_s[0-9]' plan.dot)
		if [ "$want" != $((edges + nodes)) ]; then
			fail "$name $costs: $want moves in the plan, $edges edges and $nodes nodes drawn"
		elif [ "$stmts" != "$boxes" ]; then
			fail "$name $costs: $stmts statements, $boxes boxes"
		elif [ -n "$costs" ] && grep -q 'floats\|flops' plan.dot; then
			fail "$name --no-costs: costs drawn"
		elif [ $have_dot = 1 ] && ! dot -Tsvg plan.dot >plan.svg 2>err; then
			fail "$name $costs: dot: $(cat err)"
		elif [ $have_dot = 1 ] && [ -s err ]; then
			fail "$name $costs: dot complains: $(cat err)"
		else
			pass "$name $costs: $want moves, $stmts statements"
		fi
	done
done
[ $n -gt 0 ] || fail "no programs"
finish
