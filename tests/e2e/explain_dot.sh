#!/bin/sh
# --explain=dot:
#  1. for each program whose plan the golden tests print, a graph in which
#     every broadcast and shuffle of the plan is drawn once (as an edge, or
#     as a node when several ops read it) and every statement is a box with
#     its strategy;
#  2. for every program of examples/, bench/ and tests/golden/ that plans,
#     on 1, 2 and 16 ranks, with and without --no-costs: a graph that
#     Graphviz lays out without a complaint (its labels escaped: issue 35).
. "$srcdir/tests/e2e/lib.sh"

have_dot=0
command -v dot >/dev/null 2>&1 && have_dot=1 ||
	skip "layout by Graphviz dot (not installed; Debian: graphviz)"
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

# ---- 2. every program's picture laid out ----
# A program plans if it is an example, a benchmark, or a golden test with
# a .explain or "# status: 0".  --explain=dot succeeds wherever --explain
# does: a rank count the program refuses (an IST split 16 does not
# divide) is refused by both, with status 1 and the same errors; one rank
# is never refused.  Two at a time.
[ $have_dot = 1 ] || finish
cat >layout.sh <<'SH'
#!/bin/sh
# layout.sh TRA RANKS [--no-costs]: one line, "ok: ..." or "FAIL: ..."
tra=$1 P=$2 costs=${3:-}
what="${tra#"$TOP"/} -P $P${costs:+ $costs}"
out=$(mktemp -d "$PWD/layout.XXXXXX")
cd "${tra%/*}" || exit 1
args=$(sed -n 's/^# args: //p' "$tra")
"$TRAC" $args -P "$P" --explain=dot $costs "$tra" >"$out/plan.dot" 2>"$out/err"
status=$?
if [ $status != 0 ]; then
	"$TRAC" $args -P "$P" --explain $costs "$tra" >/dev/null 2>"$out/err2"
	text=$?
	if [ $status = 1 ] && [ $text = 1 ] && grep -q 'error: ' "$out/err" && cmp -s "$out/err" "$out/err2"; then
		echo "ok: $what: refused, as --explain refuses it: $(grep -m1 'error: ' "$out/err")"
	else
		echo "FAIL: $what: --explain=dot exit status $status (--explain's $text): $(head -3 "$out/err")"
	fi
elif ! dot -Tsvg -o /dev/null "$out/plan.dot" 2>"$out/err"; then
	echo "FAIL: $what: dot: $(head -3 "$out/err")"
elif [ -s "$out/err" ]; then
	echo "FAIL: $what: dot complains: $(head -3 "$out/err")"
else
	echo "ok: $what: laid out"
fi
rm -rf "$out"
SH
for tra in "$TOP"/examples/*.tra "$TOP"/bench/*.tra "$TOP"/tests/golden/*.tra; do
	case $tra in
	"$TOP"/tests/golden/*)
		[ -f "${tra%.tra}.explain" ] || [ "$(sed -n 's/^# status: //p' "$tra")" = 0 ] || continue ;;
	esac
	for P in 1 2 16; do
		printf '%s %s\n%s %s --no-costs\n' "$tra" $P "$tra" $P
	done
done >jobs
export TOP
xargs -P 2 -L 1 sh "$PWD/layout.sh" <jobs >layout.log 2>&1
cat layout.log
! grep '^ok: .* -P 1[ :].*refused' layout.log || fail "a program that plans refused on one rank"
[ "$(grep -c '^ok: ' layout.log)" = "$(grep -c . jobs)" ] ||
	fail "$(grep -c '^FAIL: ' layout.log) of the $(grep -c . jobs) pictures"
finish
