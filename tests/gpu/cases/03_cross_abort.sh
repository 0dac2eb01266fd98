#!/usr/bin/env bash
# (c) Issue 2 under ctxguard --mode abort: SIGABRT, the documented DeepGEMM
# message as stderr's first line, diagnostics naming the kernel and devices 0/1.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
need_gpus 2
need_files "$CTXGUARD" "$ROUTE" "$CUBIN"
run abort "$CTXGUARD" --mode abort -- "$ROUTE" cross "$CUBIN"
show abort
skip_if_unreproducible abort
expect_abort_report abort
grep -qiE "$(device_re 0)" "$TMP/abort.diag" || fail "diagnostics do not name device 0"
grep -qiE "$(device_re 1)" "$TMP/abort.diag" || fail "diagnostics do not name device 1"
grep -q 'launch returned CUDA_SUCCESS (device 0 function' "$TMP/abort.out" &&
	fail "the crossing launch returned"
pass "crossing stopped with the documented message"
