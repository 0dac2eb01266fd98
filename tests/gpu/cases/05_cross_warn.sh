#!/usr/bin/env bash
# (e) Issue 2 under --mode warn: ctxguard logs the crossing and lets the launch
# through, so the driver's own INVALID_HANDLE reaches the program.  One GPU:
# the second context is one created on device 0.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
second_context
need_files "$CTXGUARD" "$ROUTE" "$CUBIN"
run warn "$CTXGUARD" --mode warn --log "$TMP/log.%p.jsonl" -- "$ROUTE" "${SECOND[@]}" cross "$CUBIN"
show warn
skip_if_unreproducible warn
expect_status 3
line=$(grep -m 1 '^CUDA driver error' "$TMP/warn.err")
[[ $line == *": 400 (CUDA_ERROR_INVALID_HANDLE, "* ]] || fail "no driver INVALID_HANDLE: '$line'"
[[ $line == *"$DEEPGEMM_MESSAGE"* ]] && fail "the error string is ctxguard's, not the driver's"
shopt -s nullglob
logs=("$TMP"/log.*.jsonl)
(( ${#logs[@]} )) || fail "no log file written"
echo "--- log"
cat "${logs[@]}"
grep -h '"event":"crossing"' "${logs[@]}" | grep '"kind":"a"' | grep -q '_ZN9deep_gemm' ||
	fail "log has no kind (a) crossing record for the fixture kernel"
pass "warned, launched, driver error reported, crossing logged"
