#!/usr/bin/env bash
# (issue 60) transformers' own "deepgemm" experts path, handed the real
# DeepGEMM (tests/gpu/deepgemm.sh), on a random Qwen3-MoE (8 layers, 64
# experts, top-8) on one GPU under --shadow: bf16 logits against
# grouped_mm, then FP8Experts (where transformers offers them on
# "deepgemm") against the dequantized model; every GEMM launch decoded and
# matched.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
need_gpus 1
need_files "$CTXGUARD" tests/gpu/deepgemm_real.py examples/moe_device_map.py
need_python torch transformers
need_shadow
need_deepgemm
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
run model "$CTXGUARD" --shadow --mode abort --log "$TMP/model.%p.jsonl" -- \
	"$PYTHON" tests/gpu/deepgemm_real.py model
show model
[[ $STATUS != 5 ]] || skip "$(tail -n 1 "$TMP/model.out")"
grep -q '^deepgemm_real: ok$' "$TMP/model.out" || { evidence model; fail "the model's checks failed"; }
calls=$(grep -oE 'DeepGEMM calls: ok \([0-9]+ calls' "$TMP/model.out" | grep -oE '[0-9]+' | awk '{ s += $1 } END { print s }')
expect_shadowed model "${calls:-1}"
pass "transformers' deepgemm experts: every launch decoded and matched under --shadow"
