#!/usr/bin/env bash
# (i) Issue 3 under --mode abort: the operands (grouped_layout and the TMA
# descriptors) are on device 1 while the launch context is device 0's, so
# ctxguard aborts before the launch with the documented message, naming the
# first such operand; the GEMM never runs, D is never written.  Case 12 has
# the descriptors alone cross.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
need_gpus 2 "$OPERAND_ON_ANOTHER_DEVICE"
need_files "$CTXGUARD" "$ROUTE" "$CUBIN"
run abort "$CTXGUARD" --mode abort -- "$ROUTE" silent "$CUBIN"
show abort
skip_if_unreproducible abort
expect_abort_report abort
grep -q 'launching sm90_bf16_gemm_impl (device 0 function and stream, tensors on device 1)' \
	"$TMP/abort.out" || fail "the program never reached the crossing launch"
grep -q 'launch returned CUDA_SUCCESS (device 0 function and stream' "$TMP/abort.out" &&
	fail "the crossing launch went through"
pass "silent crossing stopped before the launch"
