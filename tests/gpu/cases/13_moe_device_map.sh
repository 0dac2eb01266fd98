#!/usr/bin/env bash
# (l) No false positive on the fix transformers recommends: a random-weight
# Qwen3-MoE (8 layers, 64 experts, top-8, bf16) split over both GPUs by
# accelerate's device_map, experts on grouped_mm, one forward + backward,
# under --mode abort --scope all: the job's checks pass, 0 crossings.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
need_gpus 2 "a model split over two devices by device_map"
need_files "$CTXGUARD" examples/moe_device_map.py
need_python torch transformers accelerate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export TRITON_CACHE_DIR=$TMP/triton
run moe "$CTXGUARD" --mode abort --scope all --error-exitcode 86 --log "$TMP/moe.%p.jsonl" -- \
	"$PYTHON" examples/moe_device_map.py
show moe
expect_clean moe "moe_device_map: ok"
pass "device_map MoE on grouped_mm clean under --scope all"
