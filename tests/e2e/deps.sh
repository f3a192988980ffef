#!/bin/sh
# -M, -MM, -MD, -MMD, -MF, -MT, -MQ, -MP: what trac writes for make, as gcc
# would, compared with the expectation written here (the rule's format
# itself is tested against gcc's in tests/unit/test_deps.c).
. "$srcdir/tests/e2e/lib.sh"

cp "$TOP/examples/matmul.tra" matmul.tra
mkdir sub && cp matmul.tra sub/model.tra && cp matmul.tra 'my model.tra'
printf 'size N = 4;\ninput X[N];\nY[n] = Z[n];\noutput Y;\n' >bad.tra

# expect NAME WANT-FILE-CONTENT COMMAND...: COMMAND's stdout is WANT
expect() {
	name=$1 want=$2; shift 2
	printf '%s' "$want" >want
	if ! "$@" >got 2>err; then
		fail "$name: exit status $?: $(cat err)"
	elif ! diff -u want got; then
		fail "$name: output differs"
	else
		pass "$name"
	fi
}
# expect_file NAME FILE WANT: FILE holds WANT
expect_file() {
	printf '%s' "$3" >want
	if [ ! -f "$2" ]; then
		fail "$1: no $2"
	elif ! diff -u want "$2"; then
		fail "$1: $2 differs"
	else
		pass "$1"
	fi
}

# -M: the rule for the output trac would write, then stop
expect "-M" 'matmul: matmul.tra
' "$TRAC" -M matmul.tra
[ ! -e matmul ] || fail "-M compiled"
expect "-M in a folder" 'sub/model: sub/model.tra
' "$TRAC" -M sub/model.tra
expect "-M -S" 'matmul.c: matmul.tra
' "$TRAC" -M -S matmul.tra
expect "-MM" 'matmul: matmul.tra
' "$TRAC" -MM matmul.tra
expect "-M quotes the default target" 'my\ model: my\ model.tra
' "$TRAC" -M 'my model.tra'
expect "-MT twice" 'bin/mm plans/mm.svg: matmul.tra
' "$TRAC" -M -MT bin/mm -MT plans/mm.svg matmul.tra
expect "-MT is not quoted, -MQ is" 'a$b c$$d\ e: matmul.tra
' "$TRAC" -M -MT 'a$b' -MQ 'c$d e' matmul.tra
expect "-MTtarget joined" 'x: matmul.tra
' "$TRAC" -M -MTx matmul.tra
expect "-MP adds nothing for the main file" 'matmul: matmul.tra
' "$TRAC" -M -MP matmul.tra

# -M writes to -MF, or else to -o (as gcc -M -o)
expect "-M -MF" '' "$TRAC" -M -MF rule.mk matmul.tra
expect_file "-M -MF file" rule.mk 'matmul: matmul.tra
'
expect "-M -o" '' "$TRAC" -M matmul.tra -o rule2.mk
expect_file "-M -o file" rule2.mk 'matmul: matmul.tra
'
expect "-M -MF -" 'matmul: matmul.tra
' "$TRAC" -M -MF - matmul.tra -o unused.mk
[ ! -e unused.mk ] || fail "-M -MF - wrote -o's file"

# a program with errors: no rule, exit 1
if "$TRAC" -M bad.tra >got 2>err; then
	fail "-M on a bad program succeeded"
elif [ -s got ]; then
	fail "-M on a bad program printed a rule"
else
	pass "-M on a bad program"
fi

# imports: every file read, once; -MP an empty rule for each; -MM without
# the stdlib's
mkdir inc
printf 'def twice(A[i]) -> B[i] {\n    B[i] = 2 * A[i];\n}\n' >inc/lib.tra
printf 'import "lib.tra";\nimport "nn.tra";\n' >inc/both.tra
cat >app.tra <<'TRA'
import "both.tra";
import "lib.tra";
size N = 4, C = 3;
input X[N];
input Z[N, C];
Y = twice(X);
P = softmax(Z);
output Y;
output P;
TRA
stdlib=$("$TRAC" -v -fsyntax-only matmul.tra 2>&1 | sed -n 's/^trac: imports from: [^ ]* //p')
# the rule with its continuation lines joined (where it wraps depends on
# the stdlib's path; tests/unit/test_deps.c checks the wrapping)
joined() { "$@" | sed -e ':a' -e '/\\$/N; s/ \\\n / /; ta'; }
expect "-M with imports" "app: app.tra inc/both.tra inc/lib.tra $stdlib/nn.tra
" joined "$TRAC" -I inc -M app.tra
expect "-M -MP with imports" "app: app.tra inc/both.tra inc/lib.tra $stdlib/nn.tra
inc/both.tra:
inc/lib.tra:
$stdlib/nn.tra:
" joined "$TRAC" -I inc -M -MP app.tra
expect "-MM -MP leaves out the stdlib" 'app: app.tra inc/both.tra inc/lib.tra
inc/both.tra:
inc/lib.tra:
' "$TRAC" -I inc -MM -MP app.tra

# -MD: a side effect of compiling, to the output's name with .d
sizes="-D I=30 -D K=20 -D J=10"
expect "-MD" '' "$TRAC" $sizes -MD matmul.tra
[ -x matmul ] || fail "-MD did not compile"
expect_file "-MD default file" matmul.d 'matmul: matmul.tra
'
mkdir bin
expect "-MD -o" '' "$TRAC" $sizes -MD -MP matmul.tra -o bin/mm.x
expect_file "-MD -o file" bin/mm.d 'bin/mm.x: matmul.tra
'
mkdir -p deps
expect "-MMD -MF -MT" '' "$TRAC" $sizes -MMD -MF deps/../mm.dep -MT all matmul.tra -o mm2
expect_file "-MMD -MF -MT file" mm.dep 'all: matmul.tra
'
expect "-MD -S" '' "$TRAC" -MD -S sub/model.tra
expect_file "-MD -S file" sub/model.d 'sub/model.c: sub/model.tra
'
expect "-MD -fsyntax-only" '' "$TRAC" -MD -fsyntax-only sub/model.tra -o sub/other
expect_file "-MD -fsyntax-only file" sub/other.d 'sub/other: sub/model.tra
'
finish
