#!/usr/bin/env bash
# (j) No false positive on the PyTorch route done right: the custom kernel
# loaded with cuModuleLoadData on device 0 and launched there with cuda:0
# tensors, under --mode abort --scope all: correct result, 0 crossings.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
need_gpus 1
need_files "$CTXGUARD" examples/torch_wrong_device.py
need_python torch
run same "$CTXGUARD" --mode abort --scope all --error-exitcode 86 --log "$TMP/same.%p.jsonl" -- \
	"$PYTHON" examples/torch_wrong_device.py same
show same
expect_clean same "torch_wrong_device: same: result correct"
pass "custom kernel on its own device clean under --scope all"
