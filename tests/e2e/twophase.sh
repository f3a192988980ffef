#!/bin/sh
# Two-phase schedules (issue 9): the runtime's trt_twophase on random
# schedules under mpirun -np 1..4 (tests/unit/test_twophase_rt; on 3
# ranks also with the progress thread, which one node does without, and
# over TCP with it), then
# contractions compiled with --strategy LINE=two-phase against numpy,
# planned for 2 to 4 ranks and run on 1 to 4, with the bytes --profile
# measures checked against the plan's (tests/e2e/twophase.py).
RT=$(cd "${top_builddir:-.}" && pwd)/tests/unit/test_twophase_rt
. "${srcdir:-.}/tests/e2e/lib.sh"

if [ ! -x "$RT" ]; then
	echo "twophase: $RT is not built (make tests/unit/test_twophase_rt)"
	exit 99
fi
for np in 1 2 3 4; do
	if out=$(run "$np" "$RT" 2>&1); then
		pass "trt_twophase on $np rank(s): $(echo "$out" | tail -1)"
	else
		fail "trt_twophase on $np rank(s):"
		echo "$out" | tail -20
	fi
done
if out=$(TRAC_PROGRESS_THREAD=1 run 3 -x TRAC_PROGRESS_THREAD "$RT" 2>&1); then
	pass "trt_twophase on 3 ranks, progress thread: $(echo "$out" | tail -1)"
else
	fail "trt_twophase on 3 ranks, progress thread:"
	echo "$out" | tail -20
fi
if out=$(TRAC_PROGRESS_THREAD=1 run 3 -x TRAC_PROGRESS_THREAD --mca btl self,tcp "$RT" 2>&1); then
	pass "trt_twophase on 3 ranks over TCP, progress thread: $(echo "$out" | tail -1)"
else
	fail "trt_twophase on 3 ranks over TCP, progress thread:"
	echo "$out" | tail -20
fi

if "$PYTHON" "$TOP/tests/e2e/twophase.py"; then
	pass "contractions by two-phase schedules against numpy"
else
	fail "contractions by two-phase schedules against numpy"
fi
finish
