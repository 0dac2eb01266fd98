#!/usr/bin/env python3
"""triton_two_gpu -- Triton kernels on both GPUs of one process, done right.

Triton compiles and loads a kernel once per device (cuModuleLoadData in that
device's context) and launches it with cuLaunchKernelEx on the current
device's stream; host-side TMA descriptors (triton.tools.tensor_descriptor)
are encoded with cuTensorMapEncodeTiled and passed to the kernel as 128-byte
CUtensorMap parameters.  This job runs, on cuda:0 and on cuda:1 (each under
torch.cuda.device, as Triton requires):
  - an element-wise kernel with pointer arguments and a scalar;
  - a bf16 matmul whose operands are all read and written through TMA
    descriptors (Hopper and later);
and checks every result against a reference.  Under
`ctxguard --mode abort --scope all` it must show 0 crossings: every pointer
and every descriptor's global address is on the launching device.  With one CUDA
device visible, cuda:0 alone.

Prints "triton_two_gpu: ok" and exits 0 when every check passes; exits 1 on
a failed check, 77 when no CUDA device is visible.
"""
import sys

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from checks import Checks


@triton.jit
def axpb_kernel(x_ptr, y_ptr, out_ptr, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, a * x + y, mask=mask)


# C[M, N] = A[M, K] @ B[N, K]^T, every operand through a TMA descriptor.
@triton.jit
def tma_matmul_kernel(a_desc, b_desc, c_desc, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr):
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = a_desc.load([off_m, k])
        b = b_desc.load([off_n, k])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([off_m, off_n], acc.to(tl.bfloat16))


CHECKS = Checks("triton_two_gpu")
check = CHECKS.rel


def elementwise(dev):
    n, a = 300007, 1.5
    x, y = torch.randn(n), torch.randn(n)
    xd, yd = x.to(dev), y.to(dev)
    out = torch.empty_like(xd)
    with torch.cuda.device(dev):
        axpb_kernel[(triton.cdiv(n, 1024),)](xd, yd, out, a, n, BLOCK=1024)
    check(f"element-wise kernel on {dev}", out, a * x + y, 1e-6)


def tma_matmul(dev):
    m, n, k, bm, bn, bk = 512, 256, 384, 128, 64, 64
    a = torch.randn(m, k).bfloat16()
    b = torch.randn(n, k).bfloat16()
    ad, bd = a.to(dev), b.to(dev)
    c = torch.empty(m, n, dtype=torch.bfloat16, device=dev)
    with torch.cuda.device(dev):
        tma_matmul_kernel[(m // bm, n // bn)](
            TensorDescriptor.from_tensor(ad, [bm, bk]), TensorDescriptor.from_tensor(bd, [bn, bk]),
            TensorDescriptor.from_tensor(c, [bm, bn]), k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    check(f"TMA-descriptor matmul on {dev}", c, a.float() @ b.float().T, 1e-2)


def main():
    if not torch.cuda.is_available():
        print("triton_two_gpu: needs a CUDA device, found none")
        return 77
    torch.manual_seed(0)
    torch.cuda.set_device(0)
    devices = tuple(torch.device("cuda", i) for i in range(min(2, torch.cuda.device_count())))
    print(f"triton_two_gpu: on {', '.join(map(str, devices))}")
    for dev in devices:
        elementwise(dev)
    for dev in devices:
        if torch.cuda.get_device_capability(dev) >= (9, 0):
            tma_matmul(dev)
        else:
            print(f"triton_two_gpu: TMA matmul on {dev}: not run (needs compute capability 9.0)")
    for dev in devices:
        torch.cuda.synchronize(dev)

    return CHECKS.verdict()


if __name__ == "__main__":
    sys.exit(main())
