#!/usr/bin/env bash
# (h) Issue 3 without the shim: current device left at 0, tensors on device 1
# still being produced there; the GEMM runs on GPU 0 with no error and D is
# wrong against the final A.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
need_gpus 2 "$OPERAND_ON_ANOTHER_DEVICE"
need_files "$ROUTE" "$CUBIN"
run silent "$ROUTE" silent "$CUBIN"
show silent
skip_if_unreproducible silent
[[ $STATUS != 0 ]] || fail "the race did not reproduce: D matched the final A"
expect_status 4
grep -q '^silent corruption: rel error' "$TMP/silent.out" || fail "no corruption line"
grep -q '^CUDA driver error' "$TMP/silent.err" && fail "a driver error was raised"
pass "silent corruption reproduced"
