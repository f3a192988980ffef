#!/bin/sh
# Golden tests: each tests/golden/NAME.tra sits beside its expectation,
#   NAME.explain   stdout of `trac --explain --no-costs NAME.tra`, exit status 0
#   NAME.err       stderr of `trac -fsyntax-only NAME.tra`, exit status 1
#                  (or the status a "# status: N" line in NAME.tra names)
# A "# args: ..." line in NAME.tra adds options.  With UPDATE=1 the
# expectations are rewritten from the current trac and the diff is shown.
set -u
: "${TRAC:?}" "${srcdir:=.}"
dir="$srcdir/tests/golden"
# absolute paths in messages become @STDLIB@, so expectations do not depend
# on where the tree is
stdlib=$(cd "$srcdir/stdlib" && pwd)
export TRAC_STDLIB_DIR="$stdlib"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0 n=0
cd "$dir" || exit 1
for tra in *.tra; do
	name=${tra%.tra}
	args=$(sed -n 's/^# args: //p' "$tra")
	want_status=$(sed -n 's/^# status: //p' "$tra")
	for kind in explain err; do
		[ -f "$name.$kind" ] || continue
		n=$((n + 1))
		if [ $kind = explain ]; then
			NO_COLOR=1 "$TRAC" --explain --no-costs $args "$tra" >"$tmp/out" 2>"$tmp/stderr"
			status=$?; want=${want_status:-0}
		else
			NO_COLOR=1 "$TRAC" -fsyntax-only $args "$tra" >/dev/null 2>"$tmp/raw"
			status=$?; want=${want_status:-1}
			sed "s|$stdlib|@STDLIB@|g" "$tmp/raw" >"$tmp/out"
		fi
		if [ "${UPDATE:-}" = 1 ]; then
			if ! cmp -s "$tmp/out" "$name.$kind"; then
				diff -u "$name.$kind" "$tmp/out"
				cp "$tmp/out" "$name.$kind"
				echo "updated $name.$kind"
			fi
			continue
		fi
		if [ "$status" != "$want" ]; then
			echo "FAIL $name.$kind: exit status $status, expected $want"
			cat "$tmp/stderr" 2>/dev/null
			fail=1
		elif ! diff -u "$name.$kind" "$tmp/out"; then
			echo "FAIL $name.$kind: output differs (make golden-update rewrites it)"
			fail=1
		fi
	done
done
echo "golden: $n checks"
exit $fail
