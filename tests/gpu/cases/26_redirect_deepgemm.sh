#!/usr/bin/env bash
# (issue 10) Real DeepGEMM, when the GPU machine has a build of its public
# source ($DEEPGEMM_PATH, or deep_gemm importable): the same two-GPU job as
# case 25 through deep_gemm.m_grouped_bf16_gemm_nt_contiguous itself (its
# JIT, cache and launch), wrong without ctxguard in the race and correct
# under --mode redirect in every situation.  Skipped otherwise.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/gpu/redirect.sh
. "$(dirname "$0")/../redirect.sh"
need_gpus 2
need_python torch
need_files "$CTXGUARD" examples/deepgemm_torch.py
[[ -z ${DEEPGEMM_PATH:-} ]] || export PYTHONPATH=$DEEPGEMM_PATH${PYTHONPATH:+:$PYTHONPATH}
"$PYTHON" -c 'import deep_gemm' >"$TMP/import.log" 2>&1 ||
	skip "deep_gemm is not importable (set DEEPGEMM_PATH to a DeepGEMM build): $(tail -n 1 "$TMP/import.log")"
torch_situations "$PYTHON" examples/deepgemm_torch.py --deepgemm
pass "real DeepGEMM correct under --mode redirect in every situation"
