#!/usr/bin/env python3
"""torch_two_gpu -- an ordinary, correct PyTorch job on two GPUs in one process.

It does what multi-GPU jobs do every step -- cuBLAS matmuls on each device,
cross-device copies (tensor.to('cuda:1'), copy_ between devices, which PyTorch
turns into peer copies), a Triton kernel launched on each device, and a small
nn.Module trained on each device and split across both (the device_map
pattern: current device left at 0, layers on cuda:1) -- and checks every
result against the CPU.  The GPU suite runs it under
`ctxguard --mode abort --scope all`: a correct program must show 0 crossings.

Cross-device copies stay contiguous and same-dtype, so PyTorch uses the copy
engines; no kernel of this job is meant to touch another device's memory.

Prints "torch_two_gpu: ok" and exits 0 when every check passes; exits 1 on a
failed check, 77 when fewer than two CUDA devices are visible.
"""
import copy
import sys

import torch
import triton
import triton.language as tl

from checks import Checks


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


CHECKS = Checks("torch_two_gpu")
check = CHECKS.rel


def matmuls(devices):
    for dev in devices:
        a = torch.randn(256, 512)
        b = torch.randn(512, 128)
        check(f"fp32 matmul on {dev}", a.to(dev) @ b.to(dev), a @ b, 1e-5)
        ab, bb = a.bfloat16(), b.bfloat16()
        check(f"bf16 matmul on {dev}", ab.to(dev) @ bb.to(dev), ab.float() @ bb.float(), 3e-2)


def copies(d0, d1):
    x = torch.randn(1 << 20)
    x0 = x.to(d0)
    x1 = x0.to(d1)                          # device to device
    check("copy cuda:0 -> cuda:1", x1, x, 0)
    y1 = torch.empty_like(x1)
    y1.copy_(x0)                            # copy_ across devices
    check("copy_ cuda:0 -> cuda:1", y1, x, 0)
    back = (x1 * 2).to(d0, non_blocking=True)
    torch.cuda.current_stream(d0).synchronize()
    check("compute on cuda:1, copy back to cuda:0", back, x * 2, 0)
    print(f"torch_two_gpu: peer access 0->1 {torch.cuda.can_device_access_peer(0, 1)}, "
          f"1->0 {torch.cuda.can_device_access_peer(1, 0)}")


def triton_add(devices):
    n = 100003
    x, y = torch.randn(n), torch.randn(n)
    for dev in devices:
        xd, yd = x.to(dev), y.to(dev)
        out = torch.empty_like(xd)
        # Triton launches on the current device's stream, so set it.
        with torch.cuda.device(dev):
            add_kernel[(triton.cdiv(n, 1024),)](xd, yd, out, n, BLOCK=1024)
        check(f"triton add on {dev}", out, x + y, 0)


def make_model():
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 8))


def train_step(model, x):
    out = model(x)
    loss = out.square().mean()
    loss.backward()
    return out, [p.grad for p in model.parameters()]


def modules(d0, d1):
    ref_model = make_model()
    x = torch.randn(32, 64)
    ref_out, ref_grads = train_step(copy.deepcopy(ref_model), x)

    # One replica per device, gradients averaged on cuda:0 (data parallel by hand).
    replica_grads = []
    for dev in (d0, d1):
        out, grads = train_step(copy.deepcopy(ref_model).to(dev), x.to(dev))
        check(f"module forward on {dev}", out, ref_out, 1e-4)
        for i, (g, r) in enumerate(zip(grads, ref_grads)):
            check(f"module grad {i} on {dev}", g, r, 1e-4)
        replica_grads.append(grads)
    for i, (g0, g1) in enumerate(zip(*replica_grads)):
        check(f"averaged grad {i} on {d0}", (g0 + g1.to(d0)) / 2, ref_grads[i], 1e-4)

    # Split across devices with the current device left at 0, as device_map does.
    split = copy.deepcopy(ref_model)
    split[0].to(d0)
    split[2].to(d1)
    h = split[1](split[0](x.to(d0)))
    out = split[2](h.to(d1))
    out.square().mean().backward()
    check("split module forward", out, ref_out, 1e-4)
    for i, (p, r) in enumerate(zip(split.parameters(), ref_grads)):
        check(f"split module grad {i} on {p.device}", p.grad, r, 1e-4)


def main():
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        print(f"torch_two_gpu: needs 2 CUDA devices, found {torch.cuda.device_count()}")
        return 77
    torch.manual_seed(0)
    # Full fp32 matmuls on the GPU (no TF32), so CPU references need no slack.
    torch.set_float32_matmul_precision("highest")
    d0, d1 = torch.device("cuda:0"), torch.device("cuda:1")
    torch.cuda.set_device(d0)

    matmuls((d0, d1))
    copies(d0, d1)
    triton_add((d0, d1))
    modules(d0, d1)
    torch.cuda.synchronize(d0)
    torch.cuda.synchronize(d1)

    return CHECKS.verdict()


if __name__ == "__main__":
    sys.exit(main())
