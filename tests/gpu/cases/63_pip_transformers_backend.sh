#!/usr/bin/env bash
# (p) experts_implementation="ctxguard" from the installed package: the
# random Qwen3-MoE of examples/qwen3_moe_ctxguard.py split over two GPUs by
# device_map, bf16 experts (logits vs grouped_mm) and transformers' fine-
# grained FP8 experts (logits vs the dequantized model on grouped_mm), under
# --mode abort --scope all: its checks pass, 0 crossings.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/gpu/pip.sh
. "$(dirname "$0")/../pip.sh"
need_gpus 2 "a model split over two devices by device_map"
need_python torch transformers accelerate
pip_env reuse
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TRITON_CACHE_DIR=$TMP/triton
run moe "$PIP_BIN/ctxguard" --mode abort --scope all --error-exitcode 86 --log "$TMP/moe.%p.jsonl" -- \
	"$PIP_PY" examples/qwen3_moe_ctxguard.py both
show moe
expect_clean moe "qwen3_moe_ctxguard: ok"
pass "two-GPU Qwen3-MoE on the ctxguard backend, bf16 and FP8, clean"
