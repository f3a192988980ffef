#!/bin/sh
# examples/Makefile: `make run` compiles, feeds, runs and checks every
# example; a second `make run` does nothing; a changed source re-runs only
# its example, with the same data; a new -D rebuilds it with new data; and
# `make plans` draws every plan (when Graphviz is installed).
. "$srcdir/tests/e2e/lib.sh"
: "${MAKE:=make}"

# a copy, so the test can touch the sources (the source tree may be read-only)
mkdir ex
cp "$TOP/examples/Makefile" "$TOP/examples/"*.tra "$TOP/examples/"*.py ex/
# a make of its own, not a sub-make of make check's
unset MAKEFLAGS MFLAGS MAKELEVEL
m() { $MAKE -C ex --no-print-directory TRAC="$TRAC" PYTHON="$PYTHON" MPIRUN="$MPIRUN" "$@"; }
examples=$(sed -n 's/^EXAMPLES = //p' ex/Makefile)
[ -n "$examples" ] || { fail "no EXAMPLES in examples/Makefile"; finish; }

if m run >run1.log 2>&1; then
	for e in $examples; do
		[ -f "ex/build/$e.ok" ] || fail "make run did not check $e"
	done
	pass "make run: $(echo $examples)"
else
	cat run1.log
	fail "make run"
	finish
fi
# what a make run compiled, generated, ran and checked
did() { grep -c -e "$2" "$1"; }
compiled() { did "$1" ' -MD -MP -o build/'; }
generated() { did "$1" 'example.py gen'; }
ran() { did "$1" "np "; }
checked() { did "$1" 'example.py check'; }

m run >run2.log 2>&1
if [ "$(compiled run2.log)$(generated run2.log)$(ran run2.log)$(checked run2.log)" = 0000 ]; then
	pass "a second make run does nothing"
else
	cat run2.log
	fail "a second make run did something"
fi

touch ex/matmul.tra
m run >run3.log 2>&1
if [ "$(compiled run3.log)$(generated run3.log)$(ran run3.log)$(checked run3.log)" = 1011 ] &&
	grep -q 'build/matmul matmul.tra' run3.log; then
	pass "a changed source recompiles and re-runs its example only, on the same data"
else
	cat run3.log
	fail "after touching matmul.tra"
fi

m run matmul_FLAGS='-D I=300' >run4.log 2>&1
if [ "$(compiled run4.log)$(generated run4.log)$(ran run4.log)$(checked run4.log)" = 1111 ] &&
	grep -q -- '-D I=300' run4.log && grep -q 'matmul: C 300x' run4.log; then
	pass "a new -D rebuilds its example, with new data"
else
	cat run4.log
	fail "make run matmul_FLAGS='-D I=300'"
fi
m run matmul_FLAGS='-D I=300' >run5.log 2>&1
[ "$(compiled run5.log)$(ran run5.log)" = 00 ] && pass "the same -D again does nothing" ||
	{ cat run5.log; fail "the same -D again rebuilt something"; }

# a wrong result stops make with an error
printf 'def reference(A, B):\n    return {"C": 2 * (A @ B)}\n' >ex/matmul.py
if m run matmul_FLAGS='-D I=300' >run6.log 2>&1; then
	fail "make run succeeded with a wrong reference"
elif grep -q 'matmul: C .*WRONG' run6.log; then
	pass "a wrong result fails make run"
else
	cat run6.log
	fail "a wrong result: no WRONG"
fi

if command -v dot >/dev/null 2>&1; then
	if m plans >plans.log 2>&1; then
		for e in $examples; do
			grep -q '<svg' "ex/build/$e.svg" || fail "make plans drew no ex/build/$e.svg"
		done
		pass "make plans"
	else
		cat plans.log
		fail "make plans"
	fi
else
	skip "make plans (no Graphviz dot; Debian: graphviz)"
fi
finish
