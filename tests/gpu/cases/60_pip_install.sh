#!/usr/bin/env bash
# (p) The Python package: `pip install --no-build-isolation .` with no
# network builds the wheel with the kernels embedded (nvcc present); in its
# venv the ctxguard command and `python -m ctxguard` are the C wrapper, the
# package's CPU checks pass (tests/python/test_package.py, real driver; and
# tests/python/test_torch_cpu.py, the torch/transformers wiring), and the op
# runs on a GPU through the installed library.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/gpu/pip.sh
. "$(dirname "$0")/../pip.sh"
need_gpus 1
need_python torch
pip_env fresh
# what --version must name: the sm_90a image wherever kernels/kernels.mk finds nvcc
kernels=none
command -v "${NVCC:-/usr/local/cuda/bin/nvcc}" >/dev/null && kernels=sm_90a
(cd / && "$PIP_PY" "$OLDPWD/tests/python/test_package.py" "$kernels") || fail "package checks failed in the venv"
(cd / && "$PIP_PY" "$OLDPWD/tests/python/test_torch_cpu.py" 2>&1 | grep '^test_torch_cpu'; exit "${PIPESTATUS[0]}")
st=$?
(( st == 0 || st == 77 )) || fail "torch/transformers wiring checks failed (exit $st)"
run cmd "$PIP_BIN/ctxguard" --mode abort --scope all --error-exitcode 86 -- "$PIP_PY" -c '
import torch, ctxguard
a = torch.randn(300, 256, device="cuda").to(torch.bfloat16)
w = torch.randn(3, 128, 256, device="cuda").to(torch.bfloat16)
offs = torch.tensor([100, 100, 300], dtype=torch.int32, device="cuda")
out = ctxguard.grouped_mm(a, w.transpose(-2, -1), offs)
ref = torch._grouped_mm(a, w.transpose(-2, -1), offs=offs)
err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
print("rel error vs torch._grouped_mm %.2e" % err)
print("pip op: ok" if err < 1e-2 else "pip op: FAIL")'
show cmd
expect_clean cmd "pip op: ok"
pass "wheel built offline with kernels; command, python -m ctxguard and the op work from the venv"
