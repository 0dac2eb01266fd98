#!/usr/bin/env bash
# Issue 12: torch.profiler under --backstop still produces its traces, with
# kernel events, whether the profile begins after ctxguard took CUPTI (late)
# or before any CUDA work (first).  Prints which way CUPTI went: ctxguard
# stepped aside ("backstop off: a profiler took CUPTI"), found it taken
# ("another tool ... holds"), or the profiler never subscribed (backstop on).
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/gpu/cupti.sh
. "$(dirname "$0")/../cupti.sh"
need_gpus 1
need_files "$CTXGUARD" tests/gpu/profiler_trace.py
need_python torch
use_torch_cupti

outcome() {
	if grep -q 'backstop off: a profiler took CUPTI' "$TMP/$1.err"; then
		echo "outcome ($1): the profiler subscribed to CUPTI; ctxguard stepped aside"
	elif grep -q 'backstop off: another tool' "$TMP/$1.err"; then
		echo "outcome ($1): CUPTI was taken before ctxguard started; it ran without the backstop"
	elif grep -q 'backstop off' "$TMP/$1.err"; then
		grep 'backstop off' "$TMP/$1.err"
		fail "$1: the backstop did not start for another reason"
	else
		echo "outcome ($1): the profiler never took CUPTI's callbacks; the backstop stayed on"
	fi
}

mkdir -p "$TMP/base" "$TMP/late" "$TMP/first"
run base "$PYTHON" tests/gpu/profiler_trace.py "$TMP/base"
show base
[[ $STATUS == 0 ]] || skip "torch.profiler does not produce kernel traces here without ctxguard either"

for when in late first; do
	run "$when" "$CTXGUARD" --backstop --mode abort --scope all --error-exitcode 86 \
		--log "$TMP/$when.%p.jsonl" -- "$PYTHON" tests/gpu/profiler_trace.py "$TMP/$when" "$when"
	show "$when"
	if ! (
		expect_status 0
		grep -qx 'profiler_trace: ok' "$TMP/$when.out" || fail "$when: a trace had no kernel events"
		grep -qi 'MULTIPLE_SUBSCRIBERS' "$TMP/$when.err" && fail "$when: the profiler's CUPTI subscribe failed"
		expect_zero_crossings "$when"
		outcome "$when"
	); then
		evidence "$when"
		exit 1
	fi
done
pass "torch.profiler traces have kernel events under --backstop (late and first)"
