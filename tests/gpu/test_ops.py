#!/usr/bin/env python3
"""GPU checks of the installed package's torch ops (ctxguard.grouped_mm,
ctxguard.grouped_mm_fp8) against float references; run with the python of
the environment the wheel is installed in (tests/gpu/pip.sh).

  test_ops.py shapes    every shape of bench/bench_grouped_mm.py (bf16, B as
                        HF's transpose view and as [G,K,N]; fp8 on prefill
                        shapes) and edge cases: empty groups, one row, K not
                        a multiple of 128, M = 0, rows past offs[-1], DeepGEMM's
                        M-major a_scale; then devices: tensors on cuda:1 with
                        cuda:0 current, a side stream of cuda:1, mixed devices
                        -> ValueError naming both
  test_ops.py training  a backward that starts at the op, first in the
                        process (autograd's thread has no context yet);
                        gradients vs float64 references (dA through the
                        kernels, dB through torch._grouped_mm), torch.compile
                        (fullgraph=True) of a module using the op (forward and
                        backward), CUDA graph capture and replay

Prints "test_ops: <check>: ok|FAIL (...)" lines, then "test_ops: ok";
exits 1 on a failed check, 77 without the GPUs a part needs.
"""
import math
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "examples"), os.path.join(ROOT, "tests", "gpu"), os.path.join(ROOT, "bench")]
from checks import Checks  # noqa: E402
from test_grouped_mm import calc_diff, quant_blocks, quant_rows  # noqa: E402

import ctxguard  # noqa: E402

CHECKS = Checks("test_ops")
BF16_TOL, FP8_TOL = 1e-2, 1e-2


def offsets(sizes, device):
    return torch.tensor(sizes, dtype=torch.int64).cumsum(0).to(torch.int32).to(device)


def reference(a, w_nk, sizes):
    """Per group a[rows] @ w[g]^T in float64 on a's device; rows past the
    groups stay 0 (and are not compared)."""
    ref = torch.zeros(a.size(0), w_nk.size(1), dtype=torch.float64, device=a.device)
    start = 0
    for g, s in enumerate(sizes):
        if s:
            ref[start:start + s] = a[start:start + s].double() @ w_nk[g].double().t()
        start += s
    return ref, start


def rel(got, ref):
    den = ref.norm().item()
    return (got.double() - ref).norm().item() / den if den > 0 else got.double().norm().item()


def check_bf16(name, sizes, k, n, device="cuda:0", extra_rows=0):
    m = sum(sizes) + extra_rows
    a = torch.randn(m, k, device=device).to(torch.bfloat16)
    w = (torch.randn(len(sizes), n, k, device=device) / math.sqrt(max(k, 1))).to(torch.bfloat16)
    offs = offsets(sizes, device)
    ref, used = reference(a, w, sizes)
    for layout, b in (("B view of [G,N,K]", w.transpose(-2, -1)), ("B [G,K,N]", w.transpose(-2, -1).contiguous())):
        out = ctxguard.grouped_mm(a, b, offs)
        ok = out.shape == (m, n) and out.dtype == torch.bfloat16 and out.device == a.device
        err = rel(out[:used], ref[:used]) if used else 0.0
        nan = bool(torch.isnan(out[:used]).any())
        CHECKS.flag("bf16 %s, %s" % (name, layout), ok and not nan and err <= BF16_TOL,
                    "out %s %s, rel error %.2e%s" % (list(out.shape), out.dtype, err, ", NaN" if nan else ""))


def check_fp8(name, sizes, k, n, mn_major=False, device="cuda:0"):
    m = sum(sizes)
    aq, sa, a_deq = quant_rows(torch.randn(m, k, device=device))
    wq, sb, w_deq = quant_blocks(torch.randn(len(sizes), n, k, device=device) / math.sqrt(k))
    if mn_major:  # DeepGEMM's [ceil(K/128), M rounded up to 4], viewed as [M, ceil(K/128)]
        m4 = (m + 3) // 4 * 4
        t = torch.zeros(sa.size(1), m4, device=device)
        t[:, :m] = sa.t()
        sa = t[:, :m].t()
    out = ctxguard.grouped_mm_fp8(aq, sa, wq, sb, offsets(sizes, device))
    ref, used = reference(a_deq, w_deq, sizes)
    err, cd = rel(out[:used], ref[:used]), calc_diff(out[:used], ref[:used])
    CHECKS.flag("fp8 %s" % name, err <= FP8_TOL and cd < 1e-3, "rel error %.2e, calc_diff %.2e" % (err, cd))


def shapes():
    from bench_grouped_mm import SHAPES

    gen = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    for name, e, rows, k, n, decode in SHAPES:
        sizes = torch.bincount(torch.randint(0, e, (rows,), generator=gen), minlength=e).tolist()
        check_bf16("%s (G=%d M=%d K=%d N=%d)" % (name, e, rows, k, n), sizes, k, n)
        if not decode:
            check_fp8("%s (G=%d M=%d K=%d N=%d)" % (name, e, rows, k, n), sizes, k, n)
        torch.cuda.empty_cache()
    check_bf16("empty groups", [0, 37, 0, 300, 0], 256, 384)
    check_bf16("one row", [1], 512, 256)
    check_bf16("one row among empty groups", [0, 1, 0, 0], 512, 256)
    check_bf16("K=200 N=136 (K not a multiple of 128)", [50, 0, 129], 200, 136)
    check_bf16("K=72 N=96", [3, 64, 7], 72, 96)
    check_bf16("M=0", [0, 0], 256, 256)
    check_bf16("M larger than offs[-1]", [40, 60], 256, 256, extra_rows=17)
    check_fp8("empty groups K=640 N=384", [0, 100, 0, 31], 640, 384)
    check_fp8("one row", [1], 512, 512)
    check_fp8("K=208 N=200 (partial scale blocks)", [70, 0, 130], 208, 200)
    check_fp8("a_scale M-major (DeepGEMM layout)", [90, 0, 77, 5], 384, 256, mn_major=True)
    devices()


def devices():
    if torch.cuda.device_count() < 2:
        print("test_ops: device checks need 2 GPUs, found %d" % torch.cuda.device_count())
        return
    torch.cuda.set_device(0)
    check_bf16("on cuda:1 with cuda:0 current", [64, 0, 200], 512, 384, device="cuda:1")
    check_fp8("on cuda:1 with cuda:0 current", [64, 0, 200], 512, 384, device="cuda:1")
    # Produced and consumed on a side stream of cuda:1: the op must enqueue there.
    s = torch.cuda.Stream(device="cuda:1")
    with torch.cuda.stream(s):
        a = torch.randn(4096, 2048, device="cuda:1").to(torch.bfloat16)
        w = torch.randn(8, 1024, 2048, device="cuda:1").to(torch.bfloat16) / 45
        offs = offsets([512] * 8, "cuda:1")
        out = ctxguard.grouped_mm(a, w.transpose(-2, -1), offs)
        ref, _ = reference(a, w, [512] * 8)
    s.synchronize()
    CHECKS.flag("side stream of cuda:1", rel(out, ref) <= BF16_TOL, "rel error %.2e" % rel(out, ref))
    a0 = torch.randn(8, 64, device="cuda:0").to(torch.bfloat16)
    w1 = torch.randn(2, 64, 32, device="cuda:1").to(torch.bfloat16)
    try:
        ctxguard.grouped_mm(a0, w1, offsets([4, 4], "cuda:0"))
        CHECKS.flag("mixed devices -> ValueError", False, "no exception")
    except ValueError as e:
        msg = str(e)
        CHECKS.flag("mixed devices -> ValueError", "cuda:0" in msg and "cuda:1" in msg, msg)


class Experts(torch.nn.Module):
    """gate_up, SiLU gate, down: the MoE layer shape the op is for."""

    def __init__(self, g, hidden, inter, device):
        super().__init__()
        self.gate_up = torch.nn.Parameter(torch.randn(g, 2 * inter, hidden, device=device, dtype=torch.bfloat16) / 30)
        self.down = torch.nn.Parameter(torch.randn(g, hidden, inter, device=device, dtype=torch.bfloat16) / 20)

    def forward(self, x, offs, mm):
        gate, up = mm(x, self.gate_up.transpose(-2, -1), offs).chunk(2, dim=-1)
        return mm(torch.nn.functional.silu(gate) * up, self.down.transpose(-2, -1), offs)


def torch_mm(x, b, offs):
    return torch._grouped_mm(x, b, offs=offs)


def training():
    dev = "cuda:0"
    # First in the process: autograd's thread for cuda:0 has made no CUDA
    # runtime call yet, so no context is current on it when a backward
    # starts at the op itself (the default stream then means cuda:0's).
    sizes = [40, 0, 200, 16]
    a = torch.randn(sum(sizes), 256, device=dev).to(torch.bfloat16).requires_grad_()
    w = (torch.randn(len(sizes), 384, 256, device=dev) / 16).to(torch.bfloat16).requires_grad_()
    grad = torch.randn(sum(sizes), 384, device=dev).to(torch.bfloat16)
    try:
        ctxguard.grouped_mm(a, w.transpose(-2, -1), offsets(sizes, dev)).backward(grad)
        got, a.grad, w.grad = (a.grad, w.grad), None, None
        torch_mm(a, w.transpose(-2, -1), offsets(sizes, dev)).backward(grad)
        errs = rel(got[0], a.grad.double()), rel(got[1], w.grad.double())
        CHECKS.flag("backward starting at the op, first in the process", max(errs) <= BF16_TOL,
                    "rel error vs torch._grouped_mm: grad a %.2e, grad b %.2e" % errs)
    except RuntimeError as e:
        CHECKS.flag("backward starting at the op, first in the process", False, str(e))
    # Gradients of sum(out * r) against float64 autograd through a per-group loop.
    for name, sizes, k, n, b_kn in (("ragged+empty K=256 N=384", [0, 70, 129, 0, 1], 256, 384, False),
                                    ("B [G,K,N] K=512 N=256", [300, 0, 212], 512, 256, True),
                                    ("K=200 N=136", [33, 90], 200, 136, False)):
        g, m = len(sizes), sum(sizes)
        a = torch.randn(m, k, device=dev).to(torch.bfloat16).requires_grad_()
        w = (torch.randn(g, n, k, device=dev) / math.sqrt(k)).to(torch.bfloat16)
        base = (w.transpose(-2, -1).contiguous() if b_kn else w).requires_grad_()
        b = base if b_kn else base.transpose(-2, -1)
        r = torch.randn(m, n, device=dev)
        # NaN in the allocator's free blocks: a weight gradient left unwritten shows.
        torch.full((1 << 26,), float("nan"), device=dev)
        (ctxguard.grouped_mm(a, b, offsets(sizes, dev)).float() * r).sum().backward()
        a64 = a.detach().double().requires_grad_()
        b64 = b.detach().double().requires_grad_()
        outs, start = [], 0
        for gi, s in enumerate(sizes):
            outs.append(a64[start:start + s] @ b64[gi])
            start += s
        (torch.cat(outs) * r.double()).sum().backward()
        b_grad = base.grad if b_kn else base.grad.transpose(-2, -1)
        CHECKS.flag("grad a, %s" % name, rel(a.grad, a64.grad) <= BF16_TOL, "rel error %.2e" % rel(a.grad, a64.grad))
        empty_max = max([b_grad[i].abs().max().nan_to_num(float("inf")).item() for i, s in enumerate(sizes) if not s],
                        default=0.0)
        CHECKS.flag("grad b, %s" % name, rel(b_grad, b64.grad) <= BF16_TOL and empty_max == 0.0,
                    "rel error %.2e (empty groups: max |grad| %.1e, must be 0)" % (rel(b_grad, b64.grad), empty_max))

    # torch.compile(fullgraph=True) of a module using the op, forward and backward, vs eager.
    torch.manual_seed(0)
    mod = Experts(16, 512, 256, dev)
    sizes = [0, 100, 37, 256, 0, 1, 64, 64, 300, 12, 0, 7, 90, 50, 29, 30]
    offs = offsets(sizes, dev)
    x = torch.randn(sum(sizes), 512, device=dev).to(torch.bfloat16).requires_grad_()
    eager = mod(x, offs, ctxguard.grouped_mm)
    eager.float().square().sum().backward()
    ge, gx = mod.gate_up.grad.clone(), x.grad.clone()
    mod.zero_grad()
    x.grad = None
    compiled = torch.compile(mod, fullgraph=True)
    got = compiled(x, offs, ctxguard.grouped_mm)
    got.float().square().sum().backward()
    # Inductor fuses silu * up in fp32 where eager rounds between: bf16-level differences.
    CHECKS.flag("torch.compile(fullgraph=True) forward", rel(got, eager.double()) <= 1e-2,
                "rel error vs eager %.2e" % rel(got, eager.double()))
    CHECKS.flag("torch.compile(fullgraph=True) backward",
                rel(mod.gate_up.grad, ge.double()) <= 2e-2 and rel(x.grad, gx.double()) <= 2e-2,
                "rel error vs eager: gate_up %.2e, x %.2e" % (rel(mod.gate_up.grad, ge.double()),
                                                             rel(x.grad, gx.double())))
    ref = mod(x.detach(), offs, torch_mm)
    CHECKS.flag("module output vs torch._grouped_mm", rel(eager, ref.double()) <= BF16_TOL,
                "rel error %.2e" % rel(eager, ref.double()))

    # CUDA graph: capture after a warm-up (which loads the kernels into the context), replay on new inputs.
    with torch.no_grad():
        static_x = torch.randn(sum(sizes), 512, device=dev).to(torch.bfloat16)
        s = torch.cuda.Stream(device=dev)
        s.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(s):
            mod(static_x, offs, ctxguard.grouped_mm)
        torch.cuda.current_stream(dev).wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = mod(static_x, offs, ctxguard.grouped_mm)
        errs = []
        for _ in range(3):
            static_x.copy_(torch.randn_like(static_x, dtype=torch.float32).to(torch.bfloat16))
            graph.replay()
            torch.cuda.synchronize(dev)
            errs.append(rel(static_out, mod(static_x, offs, torch_mm).double()))
        CHECKS.flag("CUDA graph replay on new inputs", max(errs) <= BF16_TOL,
                    "rel errors vs torch._grouped_mm %s" % ", ".join("%.2e" % e for e in errs))


def main():
    if not torch.cuda.is_available():
        print("test_ops: needs a CUDA device")
        return 77
    print("test_ops: ctxguard %s from %s, library %s" % (ctxguard.__version__, os.path.dirname(ctxguard.__file__),
                                                         ctxguard.library_path()))
    part = sys.argv[1] if len(sys.argv) > 1 else "shapes"
    {"shapes": shapes, "training": training}[part]()
    return CHECKS.verdict()


if __name__ == "__main__":
    sys.exit(main())
