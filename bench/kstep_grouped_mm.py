#!/usr/bin/env python3
"""Where a grouped GEMM's time goes between the k-loop and everything else:
one balanced routing per shape (every expert padded to 128 rows, DeepGEMM's
contiguous layout), K swept with M, N and the routing fixed, so that the
number of 128 x 256 tile rounds stays the same and only the k-steps change.

    DEEPGEMM_PATH=/path/to/DeepGEMM python3 bench/kstep_grouped_mm.py

Ours (bf16; fp8 with MN-major sfa) and DeepGEMM, where it imports, take turns
call by call (bench_grouped_mm.medians_ms, the same L2 flush).  Per
implementation, a least-squares line through the time per round of tiles
against the k-steps of our tiles (64 channels bf16, 128 fp8): its slope is
the cost of one k-step of a round, its intercept what a round costs besides
(tile start, epilogue, the ring's refill, the launch spread over the rounds).
DeepGEMM's tiles differ from ours; its line is over the same axis, so the
two are compared per round of our tiles, not per tile of its own.
"""
import argparse
import math
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import bench_grouped_mm as bg  # noqa: E402
from test_grouped_mm import BF16, load_lib  # noqa: E402

# name, experts, rows, N, the K swept (the shape's own K among them)
SWEEPS = [
    ("Qwen3 down", 128, 32768, 2048, (768, 1536, 3072)),
    ("DSV3 down", 32, 8192, 7168, (1024, 2048, 4096)),
    ("Mixtral gate_up", 8, 8192, 28672, (1024, 2048, 4096)),
]


def fit(points):
    """(slope, intercept) of the least-squares line through [(x, y)]."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    return slope, my - slope * mx


def sweep(lib, spec, iters, sms):
    name, e, rows, n, ks = spec
    # a draw whose last round of tiles is more than half full: else a tail
    # launch cuts that round up at some K and not at others (grouped_mm.c),
    # which bends the line
    for _ in range(100):
        rt = bg.Routing("balanced", bg.counts_for("balanced", e, rows))
        tiles = (rt.m // 128) * ((n + 255) // 256)
        if tiles % sms == 0 or tiles % sms > sms // 2:
            break
    else:
        sys.exit("%s: no draw of 100 fills its last round past half" % name)
    rounds = math.ceil(tiles / sms)
    print("# %s: G %d, M %d (padded), N %d; %d tiles of 128 x 256, %d rounds (%.2f)"
          % (name, e, rt.m, n, tiles, rounds, tiles / sms))
    points = {}
    for k in ks:
        sets = bg.bf16_sets(rt.m, e, k, n)
        fsets = bg.fp8_sets(rt.m, e, k, n)

        def bf16(i):
            bg.call_ours(lib, "contiguous", BF16, *sets[i], rt.index, None, None, rt.m, n, k, e)

        def fp8(i):
            bg.call_ours_fp8(lib, "contiguous", fsets[i], rt.index, rt.m, n, k, e)

        fns = {"bf16": bf16, "fp8": fp8}
        if bg.DG is not None:
            fns["dg_bf16"] = lambda i: bg.DG.m_grouped_bf16_gemm_nt_contiguous(*sets[i], rt.index)
            fns["dg_fp8"] = bg.dg_fp8_contiguous(fsets, rt.index)
        t = bg.medians_ms(fns, iters)
        print("K %5d  " % k + "  ".join("%s %.4f ms (%.2f us a round)" % (impl, ms, 1e3 * ms / rounds)
                                        for impl, ms in t.items()), flush=True)
        for impl, ms in t.items():
            steps = k / (128 if "fp8" in impl else 64)
            points.setdefault(impl, []).append((steps, 1e3 * ms / rounds))
        del sets, fsets, fns
        torch.cuda.empty_cache()
    for impl, pts in points.items():
        slope, icpt = fit(pts)
        y0 = pts[0][1]
        print("  %-8s a k-step %.3f us a round, the rest %.2f us a round (%.0f%% of the round at K %d)"
              % (impl, slope, icpt, 100 * icpt / y0, ks[0]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", help="only sweeps whose name contains this")
    ap.add_argument("--iters", type=int, default=30, help="calls timed per implementation and K (default 30)")
    ap.add_argument("--seed", type=int, default=11, help="torch seed of the routing and data (default 11)")
    args = ap.parse_args()
    lib, path = load_lib()
    bg.DG = bg.load_deepgemm()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print("# %s (%d SMs), library %s" % (torch.cuda.get_device_name(), sms, path))
    torch.manual_seed(args.seed)
    for spec in SWEEPS:
        if not args.shapes or args.shapes in spec[0]:
            sweep(lib, spec, args.iters, sms)


if __name__ == "__main__":
    main()
