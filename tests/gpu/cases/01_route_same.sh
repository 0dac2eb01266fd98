#!/usr/bin/env bash
# (a) DeepGEMM's route on device 0 alone, no shim: the fixture GEMM matches
# the CPU reference and leaves padding rows untouched.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
need_gpus 1
need_files "$ROUTE" "$CUBIN"
run same "$ROUTE" same "$CUBIN"
show same
expect_status 0
grep -q '^deepgemm_route: device 0: rel error' "$TMP/same.out" || fail "no verification line"
pass "fixture GEMM correct on device 0"
