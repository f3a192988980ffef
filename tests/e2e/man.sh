#!/bin/sh
# The manual pages: both lint clean (groff -ww, mandoc -Tlint); trac.1
# documents every option of trac --help, and its EXAMPLES run as shown
# (commands after "$ ", each followed by its output, and the makefile);
# tra.5's example programs compile, and each construct it lists as not yet
# supported is still rejected.
. "$srcdir/tests/e2e/lib.sh"
MAN=$TOP/man

# roff text of a literal display back to plain text
unroff() { sed -e 's/\\e/\\/g; s/\\(dq/"/g; s/\\-/-/g; s/\\&//g'; }
# the literal displays of section $2 of page $1, each ended by a line "%%"
displays() {
	awk -v sec="$2" '
		/^\.Sh / { on = (substr($0, 5) == sec); next }
		on && /^\.Bd -literal/ { lit = 1; next }
		lit && /^\.Ed/ { lit = 0; print "%%"; next }
		lit { print }' "$1" | unroff
}

# ---- lint ----
linted=0
for page in "$MAN/trac.1" "$MAN/tra.5"; do
	if command -v groff >/dev/null 2>&1; then
		linted=1
		out=$(groff -mandoc -ww -z "$page" 2>&1)
		[ -z "$out" ] && pass "groff -ww: ${page##*/}" || fail "groff -ww ${page##*/}: $out"
	fi
	if command -v mandoc >/dev/null 2>&1; then
		linted=1
		# which other pages are installed depends on the machine
		out=$(mandoc -Tlint -W style "$page" 2>&1 | grep -v -e 'referenced manual not found' -e 'mandoc.db')
		[ -z "$out" ] && pass "mandoc -Tlint: ${page##*/}" || fail "mandoc -Tlint ${page##*/}: $out"
	fi
done
[ $linted = 1 ] || skip "the man pages' lint (neither groff nor mandoc; Debian: groff-base, mandoc)"

# ---- every option of --help is in trac.1 ----
"$TRAC" --help | sed -n 's/^  \(-[^ ].*\)/\1/p' | sed 's/   .*//' | tr ',' '\n' |
	sed 's/^ *//; s/[ =[].*//' | grep '^-' | sort -u >options
[ -s options ] || fail "no options found in trac --help"
while read -r opt; do
	grep -q "^\.It .*Fl ${opt#-}\( \|$\)" "$MAN/trac.1" || fail "trac.1 does not document $opt"
done <options
pass "trac.1 documents the $(wc -l <options) options of trac --help"

# ---- trac.1's PLANS explains every operation and rule --explain prints ----
plans=$(awk '/^\.Sh PLANS/ { on = 1; next } /^\.Sh / { on = 0 } on' "$MAN/trac.1")
[ -n "$plans" ] || fail "trac.1 has no PLANS section"
names=$(sed -n 's/^IA_OP([A-Z_]*, *"\([a-z]*\)".*/\1/p' "$TOP/ir/ops.def"; sed -n 's/^RULE([A-Z0-9_]*, *"\([^"]*\)".*/\1/p' "$TOP/optimizer/rules.def")
[ -n "$names" ] || fail "no operations or rules found in ops.def and rules.def"
for name in $names; do
	case $name in
	R1-[2-6] | R2-[2-3] | R2-7) continue ;;      # within "R1-1 to R1-7", "R2-1 to R2-7"
	esac
	printf '%s\n' "$plans" | grep -q "Li $name\( \|$\)" || fail "trac.1's PLANS does not explain $name"
done
pass "trac.1's PLANS explains every IA operation and rule --explain prints"

# ---- trac.1 EXAMPLES ----
cp "$TOP/examples/matmul.tra" matmul.tra
"$PYTHON" - <<'PY' || exit 1
import numpy as np
r = np.random.default_rng(5)
np.save("a.npy", r.uniform(-1, 1, (300, 200)).astype(np.float32))
np.save("b.npy", r.uniform(-1, 1, (200, 100)).astype(np.float32))
PY
PATH=$(cd "$(dirname "$TRAC")" && pwd):$PATH
export PATH
displays "$MAN/trac.1" EXAMPLES >examples
# run a command, then compare its output with the lines shown after it
run_example() {
	if [ -z "$cmd" ]; then
		return
	fi
	case $cmd in
	*"| dot "*) command -v dot >/dev/null 2>&1 || { skip "EXAMPLES: '$cmd' (no Graphviz dot; Debian: graphviz)"; cmd=; return; } ;;
	esac
	if ! sh -c "$cmd" </dev/null >got 2>err; then
		fail "EXAMPLES: '$cmd' failed: $(cat err)"
	elif [ -s want ] && ! diff -u want got; then
		fail "EXAMPLES: '$cmd' does not print what trac.1 shows"
	else
		pass "EXAMPLES: $cmd"
	fi
	cmd=
}
cmd= ; : >want; makefile=0; n=0
while IFS= read -r line; do
	case $line in
	'$ '*) run_example; cmd=${line#\$ }; : >want; n=$((n + 1)) ;;
	%%) run_example; : >want ;;
	*) if [ -n "$cmd" ]; then printf '%s\n' "$line" >>want; fi ;;
	esac
done <examples
[ $n -ge 4 ] || fail "found only $n commands under EXAMPLES in trac.1"

# the makefile: builds, does nothing the second time, rebuilds for new flags
awk '/^PROGRAMS =/ { on = 1 } on && /^%%$/ { exit } on' examples >Makefile
if ! grep -q -- '-MD -MP' Makefile; then
	fail "EXAMPLES: no makefile found in trac.1"
else
	rm -f matmul
	quiet() { ! grep -q '^trac ' "$1"; }
	if make >m1 2>&1 && [ -x matmul ] && make >m2 2>&1 && quiet m2 &&
		make TRACFLAGS='-P 8 -D I=1000' >m3 2>&1 && grep -q '^trac -P 8 -D I=1000' m3 &&
		make TRACFLAGS='-P 8 -D I=1000' >m4 2>&1 && quiet m4 &&
		touch matmul.tra && make TRACFLAGS='-P 8 -D I=1000' >m5 2>&1 && grep -q '^trac ' m5; then
		pass "EXAMPLES: the makefile rebuilds for a new -D and a changed source, and only then"
	else
		cat m1 m2 m3 m4 m5 2>/dev/null
		fail "EXAMPLES: the makefile of trac.1"
	fi
fi

# ---- tra.5: its programs compile; what it says is not supported is not ----
displays "$MAN/tra.5" EXAMPLES >programs
displays "$MAN/tra.5" DESCRIPTION >>programs
i=0
: >prog.tra
while IFS= read -r line; do
	if [ "$line" = %% ]; then
		i=$((i + 1))
		if grep -q '^output' prog.tra; then
			if "$TRAC" -fsyntax-only prog.tra </dev/null 2>err; then
				pass "tra.5 program $i compiles"
			else
				fail "tra.5 program $i: $(cat err)"
			fi
		fi
		: >prog.tra
	else
		printf '%s\n' "$line" >>prog.tra
	fi
done <programs
[ $i -ge 3 ] || fail "found only $i programs in tra.5"

sed -n 's/^\.\\" rejected: //p' "$MAN/tra.5" | unroff >rejected
[ -s rejected ] || fail "no '.\\\" rejected:' programs in tra.5"
while IFS= read -r prog; do
	printf '%s\n' "$prog" >prog.tra
	if "$TRAC" -fsyntax-only prog.tra </dev/null >/dev/null 2>err; then
		fail "tra.5 says this is not yet supported, but trac compiles it (update NOT YET SUPPORTED): $prog"
	elif ! grep -q 'not supported yet' err; then
		fail "trac rejects this, but not as 'not supported yet': $prog: $(cat err)"
	else
		pass "not yet supported: $prog"
	fi
done <rejected
finish
