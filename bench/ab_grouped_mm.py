#!/usr/bin/env python3
"""Builds of the bundled grouped_mm kernels timed against each other, and
against DeepGEMM, call by call in one process: the method behind the
"head time / variant time" figures of docs/kernels/journal.md.

    mkdir /tmp/head && git archive HEAD | tar -x -C /tmp/head && make -C /tmp/head
    make            # the working tree, with the change
    python3 bench/ab_grouped_mm.py head=/tmp/head/build/libctxguard.so new=build/libctxguard.so

(a variant that is a define builds beside the first: make BUILD=build-v
KERNELS_NVCCFLAGS="-std=c++17 -O3 --threads 0 -Xptxas -warn-spills -DV"
build-v/libctxguard.so; a define that changes the kernel table of
kernels/gmm_kernels.h, such as CG_GMM_X_FP8_DEEP, goes in EXTRA_CFLAGS="-DV"
too, so that the host sizes and launches what nvcc built).

Each NAME=PATH is one build (a libctxguard.so or libcg_gmm.so; the first is
the reference; four libctxguard.so fit in one process, see load_builds).  For every problem of bench/bench_grouped_mm.py (its shapes,
routings and masked decode, the same data generators) all builds and
DeepGEMM, where it takes the problem (contiguous and masked forms) and
`import deep_gemm` works ($DEEPGEMM_PATH), take turns call by call with the
same L2 flush before each call (bench_grouped_mm.medians_ms).  fp8 is timed
with row-major sfa (NAME) and with DeepGEMM's MN-major sfa (NAME/mn).

One line per problem: the medians, TF/s (routed rows), the first build's
time over each other's (> 1: the other is faster), DeepGEMM's time over each
build's, and whether each build's output is bitwise identical to the first
build's on the rows that carry data (a variant that only changes speed must
print yes; one that changes the order of the sums prints its relative error;
DeepGEMM is compared by relative error).
"""
import argparse
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import bench_grouped_mm as bg  # noqa: E402
from test_grouped_mm import BF16, load_lib  # noqa: E402

PROBLEMS = ("prefill", "decode", "masked")


def load_builds(specs):
    """[(name, lib)] for NAME=PATH specs, each library its own copy."""
    builds = []
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or "/" in name:
            sys.exit("%s: want NAME=PATH (NAME without '/')" % spec)
        if not os.path.exists(path):
            sys.exit("%s: no such library" % path)
        os.environ["CG_GMM_LIB"] = os.path.abspath(path)  # load_lib's first choice
        try:
            builds.append((name, load_lib()[0]))
        except OSError as exc:
            # the shim's thread-locals are initial-exec: each copy of
            # libctxguard.so loaded late takes glibc's static TLS reserve,
            # which four copies fit and five did not (an H200 run)
            if "static TLS" in str(exc):
                sys.exit("%s: %s\nload fewer builds in one run (four fit)" % (path, exc))
            raise
    if len({n for n, _ in builds}) != len(builds):
        sys.exit("build names must differ")
    return builds


def compare(label, calls, flops, d, valid, iters):
    """Times calls {name: fn(set)} (DeepGEMM as "dg"); one line."""
    ours = [n for n in calls if n != "dg"]
    out = {}
    for n in ours:
        d.fill_(float("nan"))  # only what this call writes counts
        calls[n](0)
        torch.cuda.synchronize()
        out[n] = d[valid].clone()
    ref = out[ours[0]]
    dg_rel = None
    if "dg" in calls:
        d.fill_(float("nan"))
        calls["dg"](0)
        torch.cuda.synchronize()
        dg_rel = bg.rel_err(d[valid], ref.float())
    med = bg.medians_ms(calls, iters)
    line = [label]
    line += ["%s %.4f ms" % (n, med[n]) for n in calls]
    line.append("TF/s " + " ".join("%s %.0f" % (n, flops / med[n] / 1e9) for n in calls))
    if len(ours) > 1:
        line.append("%s/ " % ours[0] + " ".join("%s %.3f" % (n, med[ours[0]] / med[n]) for n in ours[1:]))
    if "dg" in calls:
        line.append("dg/ " + " ".join("%s %.3f" % (n, med["dg"] / med[n]) for n in ours))
        line.append("dg rel %.1e" % dg_rel)
    same = ["%s %s" % (n, "yes" if torch.equal(out[n], ref) else "NO, rel %.1e" % bg.rel_err(out[n], ref.float()))
            for n in ours[1:]]
    if same:
        line.append("identical " + " ".join(same))
    print("  ".join(line), flush=True)


def fp8_calls(builds, form, sets, index, m, n, k, g):
    """{NAME: row-major sfa, NAME/mn: MN-major sfa} for bg.fp8_sets()."""
    calls = {}
    for name, lib in builds:
        for suffix, rows in (("", True), ("/mn", False)):
            calls[name + suffix] = (lambda i, lib=lib, rows=rows:
                                    bg.call_ours_fp8(lib, form, sets[i], index, m, n, k, g, rows))
    return calls


def run_shape(builds, shape, kind, dtypes, iters):
    name, e, rows, k, n, _ = shape
    rt = bg.Routing(kind, bg.counts_for(kind, e, rows))
    label = "%s %s M=%d" % (name, kind, rt.m)  # M: the tiles' rows, padding included
    flops = 2.0 * rt.routed * k * n
    dg = bg.DG is not None and rt.form == "contiguous"
    if "bf16" in dtypes:
        sets = bg.bf16_sets(rt.m, e, k, n)
        d = sets[0][2]  # every call of set 0 writes here: the outputs compared
        calls = {nm: (lambda i, lib=lib: bg.call_ours(lib, rt.form, BF16, *sets[i], rt.index, None, None, rt.m, n,
                                                      k, e)) for nm, lib in builds}
        if dg:
            calls["dg"] = lambda i: bg.DG.m_grouped_bf16_gemm_nt_contiguous(*sets[i], rt.index)
        compare(label + " bf16", calls, flops, d, rt.valid, iters)
        del sets, d
    if "fp8" in dtypes:
        sets = bg.fp8_sets(rt.m, e, k, n)
        d = sets[0].d  # every call of set 0 writes here: the outputs compared
        calls = fp8_calls(builds, rt.form, sets, rt.index, rt.m, n, k, e)
        if dg:
            calls["dg"] = bg.dg_fp8_contiguous(sets, rt.index)
        compare(label + " fp8", calls, flops, d, rt.valid, iters)
        del sets, d
    torch.cuda.empty_cache()


def run_masked(builds, spec, dtypes, iters):
    name, g, max_m, (lo, hi), k, n = spec
    masked = torch.randint(lo, hi + 1, (g,), dtype=torch.int32)
    index, routed, m = masked.cuda(), int(masked.sum()), g * max_m
    valid = (torch.arange(max_m, device="cuda").view(1, max_m) < index.view(g, 1)).view(-1)
    flops = 2.0 * routed * k * n
    expected = max(1, routed // g)  # DeepGEMM's expected_m hint: the mean of masked_m
    label = "%s G=%d max_m=%d masked_m %d..%d" % (name, g, max_m, lo, hi)
    if "bf16" in dtypes:
        sets = bg.bf16_sets(m, g, k, n)
        d = sets[0][2]
        calls = {nm: (lambda i, lib=lib: bg.call_ours(lib, "masked", BF16, *sets[i], index, None, None, max_m, n, k,
                                                      g)) for nm, lib in builds}
        if bg.DG is not None:
            calls["dg"] = lambda i: bg.DG.m_grouped_bf16_gemm_nt_masked(sets[i][0].view(g, max_m, k), sets[i][1],
                                                                        sets[i][2].view(g, max_m, n), index, expected)
        compare(label + " bf16", calls, flops, d, valid, iters)
        del sets, d
    if "fp8" in dtypes:
        sets = bg.fp8_sets(m, g, k, n, groups=g)
        d = sets[0].d
        calls = fp8_calls(builds, "masked", sets, index, max_m, n, k, g)
        if bg.DG is not None:
            calls["dg"] = bg.dg_fp8_masked(sets, index, g, max_m, expected)
        compare(label + " fp8", calls, flops, d, valid, iters)
        del sets, d
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("builds", nargs="+", metavar="NAME=PATH", help="a build of the kernels; the first is the reference")
    ap.add_argument("--shapes", help="only shapes whose name contains this")
    ap.add_argument("--routing", default="balanced", help="comma-separated: uniform, balanced (default: balanced)")
    ap.add_argument("--dtypes", default="fp8,bf16", help="comma-separated: fp8, bf16 (default: both)")
    ap.add_argument("--problems", default=",".join(PROBLEMS),
                    help="comma-separated: prefill, decode, masked (default: all)")
    ap.add_argument("--iters", type=int, default=20, help="timed calls per implementation (default 20)")
    ap.add_argument("--seed", type=int, default=3, help="torch seed: the same problems in every run (default 3)")
    args = ap.parse_args()
    kinds, dtypes, problems = (args.routing.split(","), args.dtypes.split(","), args.problems.split(","))
    for what, got, allowed in (("routing", kinds, bg.ROUTINGS), ("dtype", dtypes, ("fp8", "bf16")),
                               ("problem", problems, PROBLEMS)):
        bad = [x for x in got if x not in allowed]
        if bad:
            sys.exit("unknown %s %s (one of %s)" % (what, ", ".join(bad), ", ".join(allowed)))
    builds = load_builds(args.builds)
    bg.DG = bg.load_deepgemm()
    print("# %s; builds: %s (ratios and outputs against %s); medians of %d" % (
        torch.cuda.get_device_name(), ", ".join(args.builds), builds[0][0], args.iters))
    torch.manual_seed(args.seed)
    for shape in bg.SHAPES:
        if (args.shapes and args.shapes not in shape[0]) or ("decode" if shape[5] else "prefill") not in problems:
            continue
        for kind in kinds:
            run_shape(builds, shape, kind, dtypes, args.iters)
    if "masked" in problems:
        for spec in bg.MASKED:
            if not args.shapes or args.shapes in spec[0]:
                run_masked(builds, spec, dtypes, args.iters)


if __name__ == "__main__":
    main()
