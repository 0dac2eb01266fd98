#!/usr/bin/env bash
# (issue 60) The real DeepGEMM's handle case on one GPU: its CUfunction,
# cached by a first call in the primary context, called with torch's
# current stream an ExternalStream of a cuCtxCreate context's stream on the
# same device (tests/gpu/deepgemm_real.py handle).  Without ctxguard the
# driver refuses it (RuntimeError, 400); --mode abort kills it (134) with
# the documented message first; --mode error makes DeepGEMM raise that
# message; under --mode redirect bf16 and fp8 (its transpose_fp32
# re-homed) run, and D equals the primary context's.  --ordered: work of
# the created context's other stream, which the launch stream waits for,
# comes before the redirected call (it holds until a host flag is set).
# shellcheck disable=SC2317  # the checks are called through verdict
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
need_gpus 1
need_files "$CTXGUARD" tests/gpu/deepgemm_real.py
need_python torch
need_deepgemm
prog=("$PYTHON" tests/gpu/deepgemm_real.py handle)
failed=()
verdict() {  # NAME WHAT: a failed check is named, the case goes on
	local why
	if why=$("${@:3}" 2>&1); then
		echo "PASS $2"
	else
		echo "FAIL $2: $why"
		evidence "$1" | sed 's/^/    /'
		failed+=("$2")
	fi
}
refused() {
	[[ $STATUS == 3 ]] || { echo "exit $STATUS, not 3"; return 1; }
	grep -q '^deepgemm_real: calling' "$TMP/$1.out" || { echo "the call in the primary context failed"; return 1; }
	grep -aq 'CUDA_ERROR_INVALID_HANDLE\|400' "$TMP/$1.err" || { echo "no 400 from the driver"; return 1; }
}
aborted() {
	[[ $STATUS == 134 ]] || { echo "exit $STATUS, not 134"; return 1; }
	grep -qxF -- "$DEEPGEMM_MESSAGE" "$TMP/$1.err" || { echo "no stderr line is the documented message"; return 1; }
	! grep -q '^deepgemm_real: call returned' "$TMP/$1.out" || { echo "the call returned"; return 1; }
}
raised() {
	[[ $STATUS == 3 ]] || { echo "exit $STATUS, not 3"; return 1; }
	grep -aqF -- "$DEEPGEMM_MESSAGE" "$TMP/$1.err" || { echo "DeepGEMM's error lacks the documented message"; return 1; }
}
redirected() {
	[[ $STATUS == 0 ]] || { echo "exit $STATUS, not 0"; return 1; }
	grep -qx 'deepgemm_real: ok' "$TMP/$1.out" || { echo "no ok line"; return 1; }
	grep -aq '^ctxguard: redirect:' "$TMP/$1.err" || { echo "no 'ctxguard: redirect:' line"; return 1; }
	[[ $1 != *ordered* ]] || grep -q 'still waiting for the other stream 0.3 s after the call: yes' "$TMP/$1.out" ||
		{ echo "the redirected call did not wait for the created context's other stream"; return 1; }
}
for dtype in bf16 fp8; do
	run "plain_$dtype" "${prog[@]}" "$dtype"
	[[ $STATUS != 5 ]] || skip "$(tail -n 1 "$TMP/plain_$dtype.out")"
	verdict "plain_$dtype" "$dtype without ctxguard: refused by the driver" refused "plain_$dtype"
	run "abort_$dtype" "$CTXGUARD" --mode abort -- "${prog[@]}" "$dtype"
	verdict "abort_$dtype" "$dtype --mode abort: stopped" aborted "abort_$dtype"
	run "error_$dtype" "$CTXGUARD" --mode error -- "${prog[@]}" "$dtype"
	verdict "error_$dtype" "$dtype --mode error: DeepGEMM raises the message" raised "error_$dtype"
	for order in "" --ordered; do
		name=redirect_$dtype${order:+_ordered}
		run "$name" "$CTXGUARD" --mode redirect --log "$TMP/$name.%p.jsonl" -- "${prog[@]}" "$dtype" $order
		grep -ah '^deepgemm_real: \|^ctxguard: redirect:' "$TMP/$name.out" "$TMP/$name.err" | sed 's/^/    /'
		verdict "$name" "$dtype --mode redirect${order:+ $order}: right" redirected "$name"
	done
done
(( ${#failed[@]} == 0 )) || fail "${#failed[@]} check(s) failed: ${failed[*]}"
pass "DeepGEMM across a created context: refused, stopped, raised, or redirected right and in order"
