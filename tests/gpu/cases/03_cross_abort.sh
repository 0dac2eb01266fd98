#!/usr/bin/env bash
# (c) Issue 2 under ctxguard --mode abort: SIGABRT, the documented DeepGEMM
# message as stderr's first line, diagnostics naming the kernel and devices 0/1
# (one GPU: two contexts of device 0).
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
second_context
need_files "$CTXGUARD" "$ROUTE" "$CUBIN"
run abort "$CTXGUARD" --mode abort -- "$ROUTE" "${SECOND[@]}" cross "$CUBIN"
show abort
skip_if_unreproducible abort
expect_abort_report abort
expect_both_contexts "$TMP/abort.diag"
grep -q 'launch returned CUDA_SUCCESS (device 0 function' "$TMP/abort.out" &&
	fail "the crossing launch returned"
pass "crossing stopped with the documented message"
