#!/usr/bin/env bash
# (d) Issue 2 under --mode error: the launch fails with 400 and cuGetErrorString
# gives the documented message, so DeepGEMM's own error line carries it; the
# program exits through its error path (3), no abort, no core.  One GPU: the
# second context is one created on device 0.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
second_context
need_files "$CTXGUARD" "$ROUTE" "$CUBIN"
run error "$CTXGUARD" --mode error -- "$ROUTE" "${SECOND[@]}" cross "$CUBIN"
show error
skip_if_unreproducible error
expect_status 3
line=$(grep -m 1 '^CUDA driver error' "$TMP/error.err")
[[ -n $line ]] || fail "the program printed no driver error"
[[ $line == *": 400 ("* ]] || fail "error code is not 400: $line"
[[ $line == *"$DEEPGEMM_MESSAGE"* ]] || fail "driver error line lacks the documented message"
grep -qi 'core dumped' "$TMP/error.err" && fail "core dumped"
pass "error returned through the program's own check"
