#!/usr/bin/env bash
# (f) No false positive: the single-device route under --mode abort --scope all
# runs to completion and the summary counts 0 crossings.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
need_gpus 1
need_files "$CTXGUARD" "$ROUTE" "$CUBIN"
run same "$CTXGUARD" --mode abort --scope all --error-exitcode 86 -- "$ROUTE" same "$CUBIN"
show same
expect_status 0
expect_zero_crossings same
pass "single-device route clean under --scope all"
