#!/usr/bin/env bash
# (m) No false positive on Triton: kernels compiled and launched on each
# device (cuModuleLoadData per context, cuLaunchKernelEx), one of them with
# every operand in a host-built TMA descriptor, under --mode abort
# --scope all: results correct, 0 crossings, and the descriptors were seen
# (cuTensorMapEncodeTiled counted in the log's summary).  One GPU: cuda:0
# alone, every kernel route still checked.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
need_gpus 1
need_files "$CTXGUARD" examples/triton_two_gpu.py
need_python torch triton
export TRITON_CACHE_DIR=$TMP/triton    # compile afresh, under the shim
run triton "$CTXGUARD" --mode abort --scope all --error-exitcode 86 --log "$TMP/triton.%p.jsonl" -- \
	"$PYTHON" examples/triton_two_gpu.py
show triton
expect_clean triton "triton_two_gpu: ok"
if grep -q 'TMA-descriptor matmul on cuda:1: ok' "$TMP/triton.out"; then
	grep -hs '"event":"summary"' "$TMP"/triton.*.jsonl | grep -qE '"cuTensorMapEncodeTiled":[1-9]' || {
		evidence triton
		fail "the TMA matmul ran but ctxguard counted no cuTensorMapEncodeTiled call"
	}
fi
pass "Triton on both devices clean under --scope all"
