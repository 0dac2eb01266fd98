#!/usr/bin/env bash
# (b) Issue 2 without the shim: the device-0 CUfunction launched with device 1
# current (one GPU: a context created on device 0) is refused by the driver;
# the program reports it as DeepGEMM does.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
second_context
need_files "$ROUTE" "$CUBIN"
run cross "$ROUTE" "${SECOND[@]}" cross "$CUBIN"
show cross
skip_if_unreproducible cross
expect_status 3
grep -q '^CUDA driver error (.*): 400 (CUDA_ERROR_INVALID_HANDLE, ' "$TMP/cross.err" ||
	fail "no INVALID_HANDLE driver error"
pass "driver refused the crossing launch with CUDA_ERROR_INVALID_HANDLE"
