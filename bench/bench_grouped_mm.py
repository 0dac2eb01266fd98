#!/usr/bin/env python3
"""Benchmark of the bundled grouped_mm kernels on the seven DESIGN.md shapes.

One run, one GPU: measures the bf16 matrix ceiling (8192^3 torch.mm) and the
copy bandwidth, then for each shape (fresh random routing, two rotating input
sets, L2 refilled with unrelated clean lines before each timed call) times ours (bf16, B[G,N,K]),
torch._grouped_mm (the same HF weights, transposed view) and a per-expert
loop of torch.mm, with CUDA-event medians; fp8 (1x128 / 128x128 scales) on the
prefill shapes.  Prints TF/s, the fraction of the measured copy bandwidth
that the fewest bytes moved would take, and our speedup over torch.

Library: $CG_GMM_LIB, else build/kernels/libcg_gmm.so, else build/libctxguard.so.
"""
import argparse
import math
import os
import statistics
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
from test_grouped_mm import BF16, FP8, NK, load_lib, quant_blocks, quant_rows  # noqa: E402

SHAPES = [  # name, experts, rows, K, N, decode
    ("DSV3 gate_up prefill", 32, 8192, 7168, 4096, False),
    ("DSV3 down prefill", 32, 8192, 2048, 7168, False),
    ("Qwen3 gate_up prefill", 128, 32768, 2048, 1536, False),
    ("Qwen3 down prefill", 128, 32768, 768, 2048, False),
    ("Mixtral gate_up prefill", 8, 8192, 4096, 28672, False),
    ("Qwen3 gate_up decode", 128, 512, 2048, 1536, True),
    ("DSV3 gate_up decode", 32, 1024, 7168, 4096, True),
]
SETS = 2


FLUSH = None


def median_ms(fn, iters, warmup=3):
    """Median of CUDA-event times.  Before each timed call the GPU sums a 512 MB
    buffer: that leaves L2 holding clean unrelated lines, and keeps the GPU busy
    while the host enqueues the call, so host launch overhead stays out of the
    time unless it exceeds that read."""
    global FLUSH
    if FLUSH is None:
        FLUSH = torch.ones(128 << 20, dtype=torch.float32, device="cuda")
    for i in range(warmup):
        fn(i % SETS)
    events = []
    for i in range(iters):
        FLUSH.sum()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn(i % SETS)
        e.record()
        events.append((s, e))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events)


def ceilings():
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    mm = median_ms(lambda i: torch.mm(a, b), 20)
    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_()
    y = torch.empty_like(x)
    cp = median_ms(lambda i: y.copy_(x), 20)
    return 2 * 8192 ** 3 / mm / 1e9, 2 * x.numel() / cp / 1e6  # TF/s, GB/s


def routing(e, rows):
    counts = torch.bincount(torch.randint(0, e, (rows,)), minlength=e)
    return counts, counts.cumsum(0).to(torch.int32).cuda()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", help="only shapes whose name contains this")
    ap.add_argument("--profile", action="store_true",
                    help="call ours once per shape (bf16, then fp8) and time nothing: for ncu")
    args = ap.parse_args()
    lib, path = load_lib()
    stream = lambda: torch.cuda.current_stream().cuda_stream  # noqa: E731
    shapes = [s for s in SHAPES if not args.shapes or args.shapes in s[0]]
    if args.profile:
        profile(lib, shapes)
        return
    tflops_ceiling, bw = ceilings()
    print("# %s, library %s" % (torch.cuda.get_device_name(), path))
    print("# measured: bf16 mm 8192^3 %.0f TF/s, copy %.0f GB/s (read + write)" % (tflops_ceiling, bw))

    rows_out, fp8_out = [], []
    for name, e, rows, k, n, decode in shapes:
        torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
        counts, offs = routing(e, rows)
        used = int((counts > 0).sum())
        flops = 2.0 * rows * k * n
        nbytes = 2.0 * (rows * k + used * n * k + rows * n)
        sets = []
        for _ in range(SETS):
            a = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
            w = (torch.randn(e, n, k, device="cuda", dtype=torch.bfloat16) / math.sqrt(k))
            d = torch.empty(rows, n, device="cuda", dtype=torch.bfloat16)
            sets.append((a, w, d))

        def ours(i):
            a, w, d = sets[i]
            rc = lib.ctxguard_gmm_offs(stream(), BF16, NK, 0, a.data_ptr(), w.data_ptr(), d.data_ptr(),
                                       offs.data_ptr(), 0, 0, 0, 0, rows, n, k, e)
            if rc:
                raise RuntimeError(lib.ctxguard_gmm_last_error().decode())

        def torch_gmm(i):
            a, w, _ = sets[i]
            return torch._grouped_mm(a, w.transpose(-2, -1), offs=offs)

        ends = counts.cumsum(0).tolist()

        def loop(i):
            a, w, d = sets[i]
            start = 0
            for g, end in enumerate(ends):
                if end > start:
                    torch.mm(a[start:end], w[g].t(), out=d[start:end])
                start = end

        t_ours = median_ms(ours, 30)
        t_torch = median_ms(torch_gmm, 30)
        t_loop = median_ms(loop, 10)
        ours(0)
        ref = torch_gmm(0)
        got = sets[0][2]
        rel = ((got.float() - ref.float()).norm() / ref.float().norm()).item()
        rows_out.append((name, e, rows, k, n, flops, nbytes, t_ours, t_torch, t_loop, rel, decode))

        if not decode:
            del sets
            fsets = []
            for _ in range(SETS):
                aq, sa, _ = quant_rows(torch.randn(rows, k, device="cuda"))
                wq, sb, _ = quant_blocks(torch.randn(e, n, k, device="cuda") / math.sqrt(k))
                fsets.append((aq, sa, wq, sb, torch.empty(rows, n, device="cuda", dtype=torch.bfloat16)))

            def ours_fp8(i):
                aq, sa, wq, sb, d = fsets[i]
                rc = lib.ctxguard_gmm_offs(stream(), FP8, NK, 0, aq.data_ptr(), wq.data_ptr(), d.data_ptr(),
                                           offs.data_ptr(), sa.data_ptr(), sb.data_ptr(), 0, 0, rows, n, k, e)
                if rc:
                    raise RuntimeError(lib.ctxguard_gmm_last_error().decode())

            fp8_out.append((name, flops, median_ms(ours_fp8, 30), t_ours))
            del fsets
        else:
            del sets
        torch.cuda.empty_cache()

    print()
    hdr = ("shape", "G", "rows", "K", "N", "GFLOP", "MB", "ours ms", "TF/s", "%BW", "torch ms", "TF/s",
           "loop ms", "ours/torch", "rel")
    fmt = "%-24s %4s %6s %5s %6s %7s %6s %8s %5s %5s %8s %5s %8s %10s %8s"
    print(fmt % hdr)
    speedups = []
    for name, e, rows, k, n, flops, nbytes, t_o, t_t, t_l, rel, decode in rows_out:
        speed = t_t / t_o
        speedups.append(speed)
        print(fmt % (name, e, rows, k, n, "%.1f" % (flops / 1e9), "%.0f" % (nbytes / 1e6), "%.3f" % t_o,
                     "%.0f" % (flops / t_o / 1e9), "%.0f%%" % (100 * nbytes / t_o / 1e6 / bw), "%.3f" % t_t,
                     "%.0f" % (flops / t_t / 1e9), "%.3f" % t_l, "%.2fx" % speed, "%.1e" % rel))
    print()
    print("%-24s %8s %6s %10s %8s" % ("fp8 shape", "fp8 ms", "TF/s", "bf16 ms", "fp8/bf16"))
    for name, flops, t_f, t_b in fp8_out:
        print("%-24s %8.3f %6.0f %10.3f %7.2fx" % (name, t_f, flops / t_f / 1e9, t_b, t_b / t_f))
    geo = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
    dec = [100 * r[6] / r[7] / 1e6 / bw for r in rows_out if r[11]]
    fp8r = [t_b / t_f for _, _, t_f, t_b in fp8_out]
    print()
    print("summary: ours/torch min %.2fx geomean %.2fx (targets >= 1.00x, >= 1.15x); decode %%BW %s (>= 85%%); "
          "fp8/bf16 min %s (>= 1.6x)" % (min(speedups), geo, "/".join("%.0f" % x for x in dec) or "-",
                                         "%.2fx" % min(fp8r) if fp8r else "-"))


def profile(lib, shapes):
    for name, e, rows, k, n, decode in shapes:
        _, offs = routing(e, rows)
        a = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(e, n, k, device="cuda", dtype=torch.bfloat16)
        d = torch.empty(rows, n, device="cuda", dtype=torch.bfloat16)
        lib.ctxguard_gmm_offs(torch.cuda.current_stream().cuda_stream, BF16, NK, 0, a.data_ptr(), w.data_ptr(),
                              d.data_ptr(), offs.data_ptr(), 0, 0, 0, 0, rows, n, k, e)
        if not decode:
            aq, sa, _ = quant_rows(a.float())
            wq, sb, _ = quant_blocks(w.float())
            lib.ctxguard_gmm_offs(torch.cuda.current_stream().cuda_stream, FP8, NK, 0, aq.data_ptr(),
                                  wq.data_ptr(), d.data_ptr(), offs.data_ptr(), sa.data_ptr(), sb.data_ptr(),
                                  0, 0, rows, n, k, e)
        torch.cuda.synchronize()
        print("profiled", name)


if __name__ == "__main__":
    main()
