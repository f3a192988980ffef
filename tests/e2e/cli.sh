#!/bin/sh
# The command line as shells and makefiles see it: --version and --help on
# stdout with status 0, nothing printed on success, -v's phases and times,
# usage errors with status 2.
. "$srcdir/tests/e2e/lib.sh"

cp "$TOP/examples/matmul.tra" matmul.tra
sizes="-D I=30 -D K=20 -D J=10"

if "$TRAC" --version >out 2>err && [ ! -s err ] &&
	grep -q '^trac [0-9]' out && grep -q 'MPI [0-9]' out && grep -q 'BLIS [0-9]' out; then
	pass "--version names trac's, MPI's and BLIS's versions"
else
	fail "--version: $(cat out err)"
fi
if "$TRAC" --help >out 2>err && [ ! -s err ] && grep -q '^usage: trac' out; then
	pass "--help"
else
	fail "--help: $(cat out err)"
fi

# quiet on success: compiling, -S, -fsyntax-only
for flags in "" "-S" "-fsyntax-only" "-O0"; do
	if "$TRAC" $sizes $flags matmul.tra -o out.x >out 2>err && [ ! -s out ] && [ ! -s err ]; then
		pass "quiet: trac $flags"
	else
		fail "trac $flags printed something: $(cat out err)"
	fi
done

# -v: the import path, each phase with its time, the C compiler's command
if "$TRAC" -v $sizes matmul.tra -o mm >out 2>err && [ ! -s out ]; then
	for phase in "imports from:" "read and parse" "check and lower" "autodiff" "TRA passes" "plan search" "emit C" "C compiler"; do
		grep -q "^trac: $phase" err || fail "-v does not show '$phase'"
	done
	grep -q '^trac: running .*mpicc\|^trac: running' err || fail "-v does not show the C compiler's command"
	[ "$(grep -c ' ms$' err)" -ge 6 ] || fail "-v shows no times: $(cat err)"
	pass "-v"
else
	fail "-v: $(cat out err)"
fi

# a pinned strategy no implementation has (two-phase over a diagonal, or
# over a sparse input): status 1 and one error, never an internal error
cat >pin.tra <<'EOF'
size N = 40;
input X[N, N];
input Y[N, N];
input S[N, N] : sparse;
Z[i, k] = X[i, i] * Y[i, k];
W[i, k] = S[i, j] * Y[j, k];
output Z; output W;
EOF
for line in 5 6; do
	"$TRAC" -P 4 --block 4 --strategy $line=two-phase pin.tra --explain >out 2>err
	status=$?
	if [ $status -eq 1 ] && grep -q 'error: no plan has the strategies' err && ! grep -q internal err; then
		pass "--strategy $line=two-phase where none applies"
	else
		fail "--strategy $line=two-phase: status $status, $(cat err)"
	fi
done

# usage errors: status 2, a message on stderr, nothing on stdout
for args in "--no-such-option matmul.tra" "" "-P 0 matmul.tra" "-P 2,,4 matmul.tra" "-P 2,x matmul.tra" \
	"-P 4,2000000 matmul.tra" "-MF" "--explain=svg matmul.tra"; do
	"$TRAC" $args >out 2>err
	status=$?
	if [ $status -eq 2 ] && [ ! -s out ] && grep -q 'trac: error' err; then
		pass "usage error: trac $args"
	else
		fail "trac $args: status $status, $(cat out err)"
	fi
done
# -P LIST: --explain prints each plan; in JSON the first count's object, as
# for it alone, with "plans": every count's; the counts increasing, once each
if "$TRAC" --explain=json -P 8,2,8 matmul.tra >multi.json 2>err &&
	"$TRAC" --explain=json -P 2 matmul.tra >one.json 2>>err &&
	"$PYTHON" -c "
import json, sys
m, o = json.load(open('multi.json')), json.load(open('one.json'))
first = {k: v for k, v in m.items() if k != 'plans'}
sys.exit(0 if [p['ranks'] for p in m['plans']] == [2, 8] and m['plans'][0] == o and first == o else 1)" &&
	[ "$("$TRAC" --explain -P 3,5 matmul.tra | grep -c '^plan for [35] ranks')" = 2 ]; then
	pass "--explain -P LIST: each plan; JSON: the first's object and \"plans\""
else
	fail "--explain -P LIST: $(cat err)"
fi
# --explain=all compares like with like: each other strategy's whole plan
# against this plan's totals (the header's), by what decided, never "a tie
# ... slower" of one alternative (matmul on 4 ranks: co-partition within
# 10% of broadcast's time, decided by bytes sent or, where they are the
# same, by time)
if "$TRAC" --explain=all -P 4 matmul.tra >all 2>err; then
	head=$(sed -n '1s/.*predicted \([^ ]*\) s$/\1/p' all)
	this=$(sed -n 's/.*each costed as the whole plan (this plan: .* predicted \([^ ]*\) s, .*/\1/p' all)
	if [ -n "$head" ] && [ "$head" = "$this" ] && ! grep -q 'tie.*slower' all &&
		grep -Eq 'also considered: co-partition.*within 10%.*where (predicted time|bytes sent) decides?: \+' all; then
		pass "--explain=all: alternatives as whole plans beside the plan's totals, what decided"
	else
		fail "--explain=all: $(cat all err)"
	fi
else
	fail "--explain=all: $(cat err)"
fi
# --mem-per-rank: the counts it does not fit in memory get out-of-core plans
# (issue 32), with the default counts or counts given.  (C is 2000^2 f32: on
# 1 to 6 ranks rank 0's write, holding its share of C, 16 MiB of stages and
# a slab received, needs more than 20M.)
if "$TRAC" --mem-per-rank 20M matmul.tra -o mm20 2>err && [ ! -s err ] &&
	./mm20 --help | grep -q '^plans for 1-8,16,32,64,128,256,512,1024 ranks' &&
	"$TRAC" -P 1,4 --mem-per-rank 20M matmul.tra -o mm20b 2>err && [ ! -s err ] &&
	"$TRAC" -P 4 --mem-per-rank 20M matmul.tra --explain 2>err | grep -q '^out of core: 2.1e+07 bytes per rank' &&
	! "$TRAC" -P 8 --mem-per-rank 20M matmul.tra --explain | grep -q '^out of core'; then
	pass "--mem-per-rank: counts it does not fit in memory planned out of core, in the default counts and in -P LIST"
else
	fail "--mem-per-rank with several counts: $(cat err)"
fi
finish
