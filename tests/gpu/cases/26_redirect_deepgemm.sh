#!/usr/bin/env bash
# (issue 10) Real DeepGEMM, built from its public source by
# tests/gpu/deepgemm.sh (cached outside the repo): the same two-GPU job as
# case 25 through deep_gemm.m_grouped_bf16_gemm_nt_contiguous itself (its
# JIT, cache and launch), wrong without ctxguard in the race and correct
# under --mode redirect in every situation.  Skipped where it cannot be
# built; case 32 is its one-GPU twin (a created context).
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/gpu/redirect.sh
. "$(dirname "$0")/../redirect.sh"
need_gpus 2 "case 32 is its one-GPU twin"
need_python torch
need_files "$CTXGUARD" examples/deepgemm_torch.py
need_deepgemm
torch_situations "$PYTHON" examples/deepgemm_torch.py --deepgemm
pass "real DeepGEMM correct under --mode redirect in every situation"
