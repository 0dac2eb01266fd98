#!/usr/bin/env bash
# Issue 12: the real PyTorch jobs of the suite (cases 07, 13-16) under
# --backstop --audit --scope all: every launch came through the hooks
# (unhooked 0 in every process), the backstop watched throughout, and no
# crossing.  A job whose modules or GPUs are missing is left out (on one
# GPU: triton, compile and graph run, on cuda:0); all missing skips.
# BACKSTOP_JOBS picks jobs by name (case 43 runs the slow ones this way).
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/gpu/cupti.sh
. "$(dirname "$0")/../cupti.sh"
need_gpus 1
need_files "$CTXGUARD"
need_python torch
use_torch_cupti
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export TRITON_CACHE_DIR=$TMP/triton TORCHINDUCTOR_CACHE_DIR=$TMP/inductor

# name | GPUs | modules it needs | script and arguments | its ok line
jobs=(
	"torch|2|torch triton|examples/torch_two_gpu.py|torch_two_gpu: ok"
	"triton|1|torch triton|examples/triton_two_gpu.py|triton_two_gpu: ok"
	"moe|2|torch transformers accelerate|examples/moe_device_map.py|moe_device_map: ok"
	"compile|1|torch triton|examples/torch_compile_graph.py compile|torch_compile_graph: ok"
	"graph|1|torch|examples/torch_compile_graph.py graph|torch_compile_graph: ok"
)
ran=0
for job in "${jobs[@]}"; do
	IFS='|' read -r name gpus modules script okline <<<"$job"
	[[ " ${BACKSTOP_JOBS:-torch moe graph} " == *" $name "* ]] || continue
	if (( $(gpu_count) < gpus )); then
		echo "# $name left out: needs $gpus GPUs"
		continue
	fi
	missing=
	for m in $modules; do "$PYTHON" -c "import $m" >/dev/null 2>&1 || missing+=" $m"; done
	if [[ -n $missing ]]; then
		echo "# $name left out: $PYTHON cannot import$missing"
		continue
	fi
	# shellcheck disable=SC2086  # the script's arguments split on purpose
	run "$name" "$CTXGUARD" --backstop --audit --mode abort --scope all --error-exitcode 86 \
		--log "$TMP/$name.%p.jsonl" -- "$PYTHON" $script
	show "$name"
	[[ $STATUS == 77 ]] && { echo "# $name skipped itself: $(tail -n 1 "$TMP/$name.out")"; continue; }
	if ! (
		expect_backstop_on "$name"
		grep -q 'bypassed the hooks' "$TMP/$name.err" && fail "$name: launches bypassed the hooks"
		summaries=$(grep -E '^ctxguard: pid [0-9]+:' "$TMP/$name.err")
		[[ -n $summaries ]] || fail "$name: no summary line"
		grep -vqE '; backstop: unhooked 0$' <<<"$summaries" && fail "$name: a summary without 'backstop: unhooked 0'"
		echo "$name: every summary says backstop: unhooked 0"
	); then
		evidence "$name"
		exit 1
	fi
	expect_clean "$name" "$okline"
	ran=$((ran + 1))
done
(( ran )) || skip "none of the PyTorch jobs could run here"
pass "$ran PyTorch job(s) under --backstop --audit: unhooked 0, zero crossings"
