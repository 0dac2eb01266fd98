#!/usr/bin/env bash
# (p) The bf16 op's gradients against float64 autograd, torch.compile
# (fullgraph=True) of an experts module using it (forward and backward vs
# eager), CUDA graph capture and replay (tests/gpu/test_ops.py training).
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/gpu/pip.sh
. "$(dirname "$0")/../pip.sh"
need_gpus 1
need_python torch
pip_env reuse
pip_test_ops training
pass "gradients, torch.compile and CUDA graph replay correct, 0 crossings"
