#!/bin/sh
# Replays every input the fuzzer ever crashed trac with (tests/fuzz/regress/,
# minimised) and the seed programs through the whole pipeline up to C
# emission, in process: no crash, no sanitizer report (under check-asan), no
# internal error.
set -u
: "${srcdir:=.}" "${top_builddir:=.}" "${PYTHON:=/usr/bin/python3}"
replay=$(cd "$top_builddir" && pwd)/tests/fuzz/replay
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
export TRAC_STDLIB_DIR=$(cd "$srcdir/stdlib" && pwd)
(cd "$srcdir" && "$PYTHON" tests/fuzz/seeds.py "$tmp/seeds") || exit 1
"$replay" "$srcdir/tests/fuzz/regress" "$tmp/seeds" >"$tmp/log" 2>&1
status=$?
if [ $status != 0 ]; then
	tail -n 30 "$tmp/log"
	echo "FAIL: replay exited $status (the last input named above)"
	exit 1
fi
echo "fuzz replay: $(grep -c '^replay: ' "$tmp/log") inputs, no crash"
