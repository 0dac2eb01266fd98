#!/usr/bin/env bash
# (issue 10) PyTorch level: a two-GPU job calls DeepGEMM's
# m_grouped_bf16_gemm_nt_contiguous as its Python API does (kernel fetched
# once on cuda:0, reused for cuda:1 tensors; examples/deepgemm_torch.py over
# the exact-ABI fixture).  Without ctxguard the race on cuda:1's default
# stream is run and its D reported; under --mode redirect every situation (silent,
# race-default, race-side, handle) is correct and reported as redirected.
# One GPU: the handle situation on a context created on device 0 (the call
# on a torch ExternalStream of its stream), refused without ctxguard.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/gpu/redirect.sh
. "$(dirname "$0")/../redirect.sh"
second_context
need_python torch
need_files "$CTXGUARD" "$SM90_CUBIN" examples/deepgemm_torch.py examples/deepgemm_ctypes.py
torch_situations "$PYTHON" examples/deepgemm_torch.py --cubin "$SM90_CUBIN"
pass "two-GPU PyTorch job correct under --mode redirect in every situation"
