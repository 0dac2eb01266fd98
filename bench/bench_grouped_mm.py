#!/usr/bin/env python3
"""Benchmark of the bundled grouped_mm kernels on the seven DESIGN.md shapes,
in two routings, plus masked decode.

One run, one GPU: measures the bf16 matrix ceiling (8192^3 torch.mm) and the
copy bandwidth, then for each shape and routing times ours in bf16 and fp8
(1x128 / 128x128 scales, B [G,N,K]) against torch._grouped_mm (bf16, the same
HF weights as a transposed view), with CUDA-event medians:
  uniform   each row picks an expert uniformly at random; ours through the
            offs form, torch on the same offs (plus, on this routing, a
            per-expert loop of torch.mm);
  balanced  expert sizes 0.7-1.3x the mean, each padded to 128 rows (what
            DeepGEMM's contiguous layout takes); ours through the contiguous
            form (grouped_layout, -1 padding rows) and, on the same rows, the
            psum form (each group's end row), torch on the padded offs.
TF/s count the routed rows only (not padding), as DeepGEMM's tables do; %BW
is the fewest bytes a kernel must move (routed A rows, used B, D) over the
measured copy bandwidth.  Masked decode: A [G, max_m, K], masked_m uniform in
a range, ours through the masked form against torch._grouped_mm batched over
all max_m rows (what a caller without a masked kernel runs).

DeepGEMM, built from its public source by tests/gpu/deepgemm.sh on every run
(a cached build is reused; $DEEPGEMM_PATH, a DeepGEMM build, is used as it is
instead; --no-deepgemm leaves it out; it is never required), is timed as a
peer on the same data wherever its layouts take the problem: the balanced
routing (its contiguous layout, the same grouped_layout as ours) and masked
decode, bf16 and fp8; ratios are DeepGEMM's time over ours.  There both are
handed fp8 sfa in the MN-major TMA-aligned layout (converted once, outside
the timing), which DeepGEMM requires.  On the uniform routing ours is handed
the row-major sfa the quantization produced, as a caller through offs holds
it (ctxguard.grouped_mm_fp8): offs groups start on any row, where MN-major
sfa cannot come by TMA but row-major sfa can (rows a multiple of 4 blocks
apart, i.e. ceil(K/128) a multiple of 4; else the scale warp copies it).

L2 is flushed the same way before every timed call of every implementation:
the GPU sums a 512 MB buffer, which leaves L2 holding clean unrelated lines
(a write would leave dirty ones, whose write-back the next kernel pays) and
keeps the GPU busy while the host enqueues the call.  The implementations
compared on one problem take turns call by call (the order rotating each
round), so each ratio sees the same clocks and temperature.

Library: $CG_GMM_LIB, else build/kernels/libcg_gmm.so, else build/libctxguard.so.
"""
import argparse
import collections
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
MASKED = [  # name, local experts, max_m, masked_m range, K, N
    ("DSV3 gate_up masked", 32, 256, (32, 128), 7168, 4096),
    ("DSV3 down masked", 32, 256, (32, 128), 2048, 7168),
]
ROUTINGS = ("uniform", "balanced")
SETS = 2
ALIGN = 128
FLUSH = None
DG = None  # the deep_gemm module, when importable


def deepgemm_env():
    """The environment of a DeepGEMM build made by tests/gpu/deepgemm.sh
    (built once from its public source, cached outside the repo, reused), or
    None with a line saying why.  Its libstdc++ preload must be in place
    before torch loads, so main() re-executes the bench under it."""
    import shlex
    import subprocess
    script = os.path.join(ROOT, "tests", "gpu", "deepgemm.sh")
    run = subprocess.run([script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, PYTHON=sys.executable))
    if run.returncode != 0:
        why = (run.stderr.strip().splitlines() or ["exit %d" % run.returncode])[-1]
        print("# DeepGEMM: %s; no DeepGEMM columns" % why)
        return None
    env = {}
    for line in run.stdout.splitlines():
        name, _, value = line[len("export "):].partition("=")
        env[name] = shlex.split(value)[0]
    return env


def load_deepgemm():
    """deep_gemm or None, with a line saying which."""
    if os.environ.get("DEEPGEMM_PATH"):
        sys.path.insert(0, os.environ["DEEPGEMM_PATH"])
    try:
        import deep_gemm
    except Exception as exc:  # noqa: BLE001 -- absent or built for another torch: no peer column
        print("# DeepGEMM: not importable (%s: %s); no DeepGEMM columns" % (type(exc).__name__, exc))
        return None
    print("# DeepGEMM %s from %s" % (getattr(deep_gemm, "__version__", "?"), os.path.dirname(deep_gemm.__file__)))
    return deep_gemm


def dg_sfa(sa):
    """sfa in DeepGEMM's MN-major TMA-aligned layout (what its kernels read;
    given row-major it would convert on every call)."""
    return DG.get_mn_major_tma_aligned_tensor(sa)


def dg_fp8_contiguous(fsets, index):
    """DeepGEMM's contiguous fp8 call on fsets[i] (fp8_sets), with its sfa
    converted to DeepGEMM's layout once, here, outside the timed calls."""
    sfa = [dg_sfa(f.sfa_rows) for f in fsets]

    def call(i):
        f = fsets[i]
        DG.m_grouped_fp8_gemm_nt_contiguous((f.a, sfa[i]), (f.b, f.sfb), f.d, index)

    return call


def dg_fp8_masked(fsets, index, g, max_m, expected):
    """DeepGEMM's masked fp8 call on fsets[i] (fp8_sets(..., groups=g)), its
    sfa converted once, here; expected: its expected_m hint."""
    kb = fsets[0].sfa_rows.shape[1]
    sfa = [dg_sfa(f.sfa_rows.view(g, max_m, kb)) for f in fsets]

    def call(i):
        f = fsets[i]
        k, n = f.a.shape[1], f.d.shape[1]
        DG.m_grouped_fp8_gemm_nt_masked((f.a.view(g, max_m, k), sfa[i]), (f.b, f.sfb), f.d.view(g, max_m, n), index,
                                        expected)

    return call


def rel_err(got, ref):
    return ((got.float() - ref).norm() / ref.norm()).item()


def medians_ms(fns, iters, warmup=3):
    """{name: median CUDA-event time of fn(i)} for fns {name: fn}, taking
    turns call by call, the first of each round rotating; each call after
    the same L2 flush."""
    global FLUSH
    if FLUSH is None:
        FLUSH = torch.ones(128 << 20, dtype=torch.float32, device="cuda")
    names = list(fns)
    for i in range(warmup):
        for name in names:
            fns[name](i % SETS)
    events = {name: [] for name in names}
    for i in range(iters):
        for name in names[i % len(names):] + names[:i % len(names)]:
            FLUSH.sum()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fns[name](i % SETS)
            e.record()
            events[name].append((s, e))
    torch.cuda.synchronize()
    return {name: statistics.median(s.elapsed_time(e) for s, e in evs) for name, evs in events.items()}


def median_ms(fn, iters):
    return medians_ms({"": fn}, iters)[""]


def ceilings():
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    mm = median_ms(lambda i: torch.mm(a, b), 20)
    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_()
    y = torch.empty_like(x)
    cp = median_ms(lambda i: y.copy_(x), 20)
    return 2 * 8192 ** 3 / mm / 1e9, 2 * x.numel() / cp / 1e6  # TF/s, GB/s


def counts_for(kind, e, rows):
    """Rows per expert, summing to rows."""
    if kind == "uniform":
        return torch.bincount(torch.randint(0, e, (rows,)), minlength=e)
    w = 0.7 + 0.6 * torch.rand(e)
    counts = (w / w.sum() * rows).floor().long()
    counts[:rows - int(counts.sum())] += 1
    return counts


class Routing:
    """How one routing lays rows out: M rows in A and D, our form and its
    index, torch's offs (over the same M rows), the rows that carry data."""

    def __init__(self, kind, counts):
        self.kind, self.counts = kind, counts
        self.used = int((counts > 0).sum())
        self.routed = int(counts.sum())
        sizes = counts if kind == "uniform" else (counts + ALIGN - 1) // ALIGN * ALIGN
        self.m = int(sizes.sum())
        self.torch_offs = sizes.cumsum(0).to(torch.int32).cuda()
        if kind == "uniform":
            self.form, self.index = "offs", self.torch_offs
            self.valid = torch.ones(self.m, dtype=torch.bool, device="cuda")
            self.psum = None
        else:
            ids = torch.repeat_interleave(torch.arange(len(counts)), sizes)
            starts = sizes.cumsum(0) - sizes
            pos = torch.arange(self.m) - torch.repeat_interleave(starts, sizes)
            keep = pos < counts[ids]
            self.form = "contiguous"
            self.index = torch.where(keep, ids, torch.full_like(ids, -1)).to(torch.int32).cuda()
            self.valid = keep.cuda()
            self.psum = (starts + counts).to(torch.int32).cuda()  # starts are multiples of 128


def call_ours(lib, form, dtype, a, w, d, index, sfa, sfb, m, n, k, g, sfa_strides=(0, 0)):
    """sfa_strides (m, k): (0, 0) row-major, else as mn_major() returns them."""
    fn = getattr(lib, "ctxguard_gmm_" + form)
    extra = [0] if form == "masked" else []  # sfa_stride_g: groups packed
    rc = fn(torch.cuda.current_stream().cuda_stream, dtype, NK, 0, a.data_ptr(), w.data_ptr(), d.data_ptr(),
            index.data_ptr(), sfa.data_ptr() if sfa is not None else 0, sfb.data_ptr() if sfb is not None else 0,
            *sfa_strides, *extra, m, n, k, g)
    if rc:
        raise RuntimeError("%s: %s" % (form, lib.ctxguard_gmm_last_error().decode()))


def call_ours_fp8(lib, form, f, index, m, n, k, g, rows=False):
    """call_ours on an Fp8Set: its MN-major sfa, or with rows its row-major
    one (what a caller through offs holds)."""
    sfa, strides = (f.sfa_rows, (0, 0)) if rows else (f.sfa, f.sfa_strides)
    call_ours(lib, form, FP8, f.a, f.b, f.d, index, sfa, f.sfb, m, n, k, g, strides)


def mn_major(sa, groups=1):
    """Row-major sfa [rows, kb] in DeepGEMM's MN-major TMA-aligned layout
    (per group of rows / groups: [kb, rows rounded up to 4], packed), the
    layout ours loads by TMA; returns (tensor, (sfa_stride_m, sfa_stride_k))."""
    rows, kb = sa.shape
    per = rows // groups
    p4 = (per + 3) // 4 * 4
    t = torch.zeros(groups, kb, p4, device=sa.device, dtype=sa.dtype)
    t[:, :, :per] = sa.view(groups, per, kb).transpose(1, 2)
    return t, (1, p4)


# One fp8 problem's operands: sfa MN-major with its strides (mn_major()), and
# the row-major sfa it came from (for DeepGEMM's own conversion, and what
# ours is handed through offs).
Fp8Set = collections.namedtuple("Fp8Set", "a sfa sfa_strides b sfb d sfa_rows")


def bf16_sets(m, e, k, n):
    """SETS (a [m, k], b [e, n, k], d [m, n]) of bf16."""
    return [(torch.randn(m, k, device="cuda", dtype=torch.bfloat16),
             torch.randn(e, n, k, device="cuda", dtype=torch.bfloat16) / math.sqrt(k),
             torch.empty(m, n, device="cuda", dtype=torch.bfloat16)) for _ in range(SETS)]


def fp8_sets(m, e, k, n, groups=1):
    """SETS Fp8Sets."""
    out = []
    for _ in range(SETS):
        aq, sa, _ = quant_rows(torch.randn(m, k, device="cuda"))
        wq, sb, _ = quant_blocks(torch.randn(e, n, k, device="cuda") / math.sqrt(k))
        out.append(Fp8Set(aq, *mn_major(sa, groups), wq, sb, torch.empty(m, n, device="cuda", dtype=torch.bfloat16),
                          sa))
    return out


def bench_shape(lib, shape, kind, with_loop):
    name, e, rows, k, n, decode = shape
    rt = Routing(kind, counts_for(kind, e, rows))
    sets = bf16_sets(rt.m, e, k, n)

    def ours(i):
        a, w, d = sets[i]
        call_ours(lib, rt.form, BF16, a, w, d, rt.index, None, None, rt.m, n, k, e)

    def torch_gmm(i):
        a, w, _ = sets[i]
        return torch._grouped_mm(a, w.transpose(-2, -1), offs=rt.torch_offs)

    ends = rt.torch_offs.tolist()

    def loop(i):
        a, w, d = sets[i]
        start = 0
        for g, end in enumerate(ends):
            if end > start:
                torch.mm(a[start:end], w[g].t(), out=d[start:end])
            start = end

    def dg_bf16(i):
        a, w, d = sets[i]
        DG.m_grouped_bf16_gemm_nt_contiguous(a, w, d, rt.index)

    def ours_psum(i):
        a, w, d = sets[i]
        call_ours(lib, "psum", BF16, a, w, d, rt.psum, None, None, rt.m, n, k, e)

    r = {"name": name, "kind": kind, "e": e, "rows": rows, "m": rt.m, "k": k, "n": n, "decode": decode,
         "flops": 2.0 * rt.routed * k * n}
    dg = DG is not None and rt.form == "contiguous"
    fns = {"bf16": ours, "torch": torch_gmm}
    if dg:
        fns["dg_bf16"] = dg_bf16
    if rt.psum is not None:
        fns["psum"] = ours_psum
    r.update(medians_ms(fns, 30))
    r["loop"] = median_ms(loop, 10) if with_loop else None
    ours(0)
    ref, got = torch_gmm(0)[rt.valid].float(), sets[0][2][rt.valid].float()
    r["rel"] = rel_err(got, ref)
    r["bytes_bf16"] = 2.0 * (rt.routed * k + rt.used * n * k + rt.routed * n)
    if dg:
        sets[0][2].fill_(float("nan"))  # only what DeepGEMM writes counts
        dg_bf16(0)
        r["dg_rel"] = rel_err(sets[0][2][rt.valid], ref)
    if rt.psum is not None:
        sets[0][2].fill_(float("nan"))  # what contiguous wrote must not count for psum
        ours_psum(0)
        r["rel_psum"] = rel_err(sets[0][2][rt.valid].float(), ref)
    del sets

    fsets = fp8_sets(rt.m, e, k, n)

    def ours_fp8(i):
        # offs: the row-major sfa its callers hold (module docstring)
        call_ours_fp8(lib, rt.form, fsets[i], rt.index, rt.m, n, k, e, rows=rt.form == "offs")

    dg_fp8 = dg_fp8_contiguous(fsets, rt.index) if dg else None

    def ours_fp8_psum(i):
        call_ours_fp8(lib, "psum", fsets[i], rt.psum, rt.m, n, k, e)

    fns = {"fp8": ours_fp8}
    if dg:
        fns["dg_fp8"] = dg_fp8
    if rt.psum is not None:
        fns["fp8_psum"] = ours_fp8_psum
    r.update(medians_ms(fns, 30))
    if dg:
        ours_fp8(0)
        ref8 = fsets[0].d[rt.valid].float()
        fsets[0].d.fill_(float("nan"))  # only what DeepGEMM writes counts
        dg_fp8(0)
        r["dg_rel8"] = rel_err(fsets[0].d[rt.valid], ref8)  # against ours: same quantized operands
    del dg_fp8  # its converted sfa
    kb, nb = (k + 127) // 128, (n + 127) // 128
    r["bytes_fp8"] = rt.routed * k + rt.used * n * k + 2.0 * rt.routed * n + 4.0 * (rt.routed * kb + rt.used * nb * kb)
    del fsets
    torch.cuda.empty_cache()
    return r


def bench_masked(lib, spec):
    name, g, max_m, (lo, hi), k, n = spec
    masked = torch.randint(lo, hi + 1, (g,), dtype=torch.int32)
    routed, m = int(masked.sum()), g * max_m
    index = masked.cuda()
    sets = bf16_sets(m, g, k, n)

    def ours(i):
        a, w, d = sets[i]
        call_ours(lib, "masked", BF16, a, w, d, index, None, None, max_m, n, k, g)

    def torch_batched(i):
        a, w, _ = sets[i]
        return torch._grouped_mm(a.view(g, max_m, k), w.transpose(-2, -1))

    def dg_bf16(i):
        a, w, d = sets[i]
        DG.m_grouped_bf16_gemm_nt_masked(a.view(g, max_m, k), w, d.view(g, max_m, n), index, max(1, routed // g))

    r = {"name": "%s G=%d max_m=%d masked_m %d..%d" % (name, g, max_m, lo, hi), "rows": routed, "k": k, "n": n,
         "flops": 2.0 * routed * k * n, "torch": None}
    fns = {"bf16": ours, "torch": torch_batched}
    try:
        torch_batched(0)
    except Exception as exc:  # noqa: BLE001 -- a torch without 3D x 3D grouped_mm
        print("# %s: torch._grouped_mm batched: %s" % (name, exc))
        del fns["torch"]
    if DG is not None:
        fns["dg_bf16"] = dg_bf16
    r.update(medians_ms(fns, 30))
    r["bytes_bf16"] = 2.0 * (routed * k + g * n * k + routed * n)
    del sets
    fsets = fp8_sets(m, g, k, n, groups=g)

    def ours_fp8(i):
        call_ours_fp8(lib, "masked", fsets[i], index, max_m, n, k, g)

    kb, nb = (k + 127) // 128, (n + 127) // 128
    r["bytes_fp8"] = routed * k + g * n * k + 2.0 * routed * n + 4.0 * (routed * kb + g * nb * kb)
    # expected_m: DeepGEMM's tile hint, the mean of masked_m
    dg_fp8 = dg_fp8_masked(fsets, index, g, max_m, max(1, routed // g)) if DG is not None else None
    fns = {"fp8": ours_fp8}
    if DG is not None:
        fns["dg_fp8"] = dg_fp8
    r.update(medians_ms(fns, 30))
    if DG is not None:
        valid = (torch.arange(max_m, device="cuda").view(1, max_m) < index.view(g, 1)).view(-1)
        ours_fp8(0)
        ref8 = fsets[0].d[valid].float()
        fsets[0].d.fill_(float("nan"))  # only what DeepGEMM writes counts
        dg_fp8(0)
        r["dg_rel8"] = rel_err(fsets[0].d[valid], ref8)
    del dg_fp8, fsets  # dg_fp8 holds its converted sfa
    torch.cuda.empty_cache()
    return r


def pct(nbytes, ms, bw):
    return "%.0f%%" % (100 * nbytes / ms / 1e6 / bw)


def report(results, masked, bw):
    hdr = ("routing", "shape", "G", "rows", "M", "K", "N", "bf16 ms", "TF/s", "%BW", "torch ms", "TF/s",
           "ours/torch", "loop ms", "fp8 ms", "TF/s", "%BW", "fp8/bf16", "rel")
    fmt = "%-8s %-24s %4s %6s %6s %5s %6s %8s %5s %5s %8s %5s %10s %8s %8s %5s %5s %8s %8s"
    print(fmt % hdr)
    for r in results:
        fl = r["flops"]
        print(fmt % (r["kind"], r["name"], r["e"], r["rows"], r["m"], r["k"], r["n"], "%.3f" % r["bf16"],
                     "%.0f" % (fl / r["bf16"] / 1e9), pct(r["bytes_bf16"], r["bf16"], bw), "%.3f" % r["torch"],
                     "%.0f" % (fl / r["torch"] / 1e9), "%.2fx" % (r["torch"] / r["bf16"]),
                     "%.3f" % r["loop"] if r["loop"] else "-", "%.3f" % r["fp8"], "%.0f" % (fl / r["fp8"] / 1e9),
                     pct(r["bytes_fp8"], r["fp8"], bw), "%.2fx" % (r["bf16"] / r["fp8"]), "%.1e" % r["rel"]))
    psum = [r for r in results if "psum" in r]
    if psum:
        print()
        pfmt = "%-24s %14s %8s %8s %14s %8s"
        print(pfmt % ("balanced, psum form", "contiguous ms", "psum ms", "rel", "fp8 contig ms", "psum ms"))
        for r in psum:
            print(pfmt % (r["name"], "%.3f" % r["bf16"], "%.3f" % r["psum"], "%.1e" % r["rel_psum"],
                          "%.3f" % r["fp8"], "%.3f" % r["fp8_psum"]))
    if masked:
        print()
        mfmt = "%-46s %6s %5s %6s %8s %5s %5s %8s %10s %8s %5s %5s"
        print(mfmt % ("masked decode", "rows", "K", "N", "bf16 ms", "TF/s", "%BW", "torch ms", "ours/torch",
                      "fp8 ms", "TF/s", "%BW"))
        for r in masked:
            fl, t = r["flops"], r["torch"]
            print(mfmt % (r["name"], r["rows"], r["k"], r["n"], "%.3f" % r["bf16"], "%.0f" % (fl / r["bf16"] / 1e9),
                          pct(r["bytes_bf16"], r["bf16"], bw), "%.3f" % t if t else "-",
                          "%.2fx" % (t / r["bf16"]) if t else "-", "%.3f" % r["fp8"],
                          "%.0f" % (fl / r["fp8"] / 1e9), pct(r["bytes_fp8"], r["fp8"], bw)))
    peers = [r for r in results + masked if "dg_bf16" in r]
    if peers:
        print()
        dfmt = "%-46s %9s %9s %8s %9s %9s %8s %9s"
        print(dfmt % ("DeepGEMM on the same data", "DG bf16", "ours", "DG/ours", "DG fp8", "ours", "DG/ours",
                      "DG TF/s"))
        for r in peers:
            fl = r["flops"]
            print(dfmt % ((r["kind"] + " " + r["name"]) if "kind" in r else r["name"], "%.3f" % r["dg_bf16"],
                          "%.3f" % r["bf16"], "%.2f" % (r["dg_bf16"] / r["bf16"]), "%.3f" % r["dg_fp8"],
                          "%.3f" % r["fp8"], "%.2f" % (r["dg_fp8"] / r["fp8"]),
                          "%.0f/%.0f" % (fl / r["dg_bf16"] / 1e9, fl / r["dg_fp8"] / 1e9)))
        rels = ["%.1e/%.1e" % (r["dg_rel"], r["dg_rel8"]) for r in peers if "dg_rel" in r]
        print("# DeepGEMM outputs: bf16 against torch, fp8 against ours (rel): %s; masked fp8: %s"
              % (" ".join(rels), " ".join("%.1e" % r["dg_rel8"] for r in peers if "dg_rel" not in r)))
        worst8 = min(r["dg_fp8"] / r["fp8"] for r in peers)
        worst16 = min(r["dg_bf16"] / r["bf16"] for r in peers)
        print("summary DeepGEMM: ours at %.2fx of its fp8 speed and %.2fx of its bf16 speed at worst "
              "(targets >= 0.95x, >= 1.00x)" % (worst8, worst16))
    print()
    for kind in ROUTINGS:
        rs = [r for r in results if r["kind"] == kind]
        if not rs:
            continue
        sp = [r["torch"] / r["bf16"] for r in rs]
        geo = math.exp(sum(math.log(x) for x in sp) / len(sp))
        dec = ["%.0f" % (100 * r["bytes_bf16"] / r["bf16"] / 1e6 / bw) for r in rs if r["decode"]]
        fp8r = [r["bf16"] / r["fp8"] for r in rs if not r["decode"]]
        print("summary %s: bf16 ours/torch min %.2fx geomean %.2fx (target >= 1.00x); decode bf16 %%BW %s "
              "(>= 85%%); prefill fp8/bf16 min %s (>= 1.6x)" % (kind, min(sp), geo, "/".join(dec) or "-",
                                                             "%.2fx" % min(fp8r) if fp8r else "-"))
    if masked:
        print("summary masked: bf16 %%BW %s, fp8 %%BW %s (>= 85%%)" % (
            "/".join(pct(r["bytes_bf16"], r["bf16"], bw) for r in masked),
            "/".join(pct(r["bytes_fp8"], r["fp8"], bw) for r in masked)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", help="only shapes whose name contains this")
    ap.add_argument("--routing", choices=ROUTINGS, help="only this routing (default: both)")
    ap.add_argument("--profile", action="store_true",
                    help="call ours once per shape (bf16, then fp8) and time nothing: for ncu")
    ap.add_argument("--no-deepgemm", action="store_true", help="no DeepGEMM columns (nothing built)")
    args = ap.parse_args()
    if not (args.profile or args.no_deepgemm or os.environ.get("DEEPGEMM_PATH")):
        env = deepgemm_env()
        if env:  # again, under the build's environment: its preload comes before torch
            os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, **env))
    lib, path = load_lib()
    shapes = [s for s in SHAPES if not args.shapes or args.shapes in s[0]]
    masked = [s for s in MASKED if not args.shapes or args.shapes in s[0]]
    kinds = [args.routing] if args.routing else list(ROUTINGS)
    if args.profile:
        profile(lib, shapes, kinds)
        return
    global DG
    DG = None if args.no_deepgemm else load_deepgemm()
    tflops_ceiling, bw = ceilings()
    print("# %s, library %s" % (torch.cuda.get_device_name(), path))
    print("# measured: bf16 mm 8192^3 %.0f TF/s, copy %.0f GB/s (read + write)" % (tflops_ceiling, bw))
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    results = []
    for kind in kinds:
        for shape in shapes:
            results.append(bench_shape(lib, shape, kind, with_loop=kind == "uniform"))
            print("# done %s %s" % (kind, shape[0]), flush=True)
    masked_out = [bench_masked(lib, spec) for spec in masked]
    print()
    report(results, masked_out, bw)


def profile(lib, shapes, kinds):
    for kind in kinds:
        for name, e, rows, k, n, decode in shapes:
            rt = Routing(kind, counts_for(kind, e, rows))
            a = torch.randn(rt.m, k, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(e, n, k, device="cuda", dtype=torch.bfloat16)
            d = torch.empty(rt.m, n, device="cuda", dtype=torch.bfloat16)
            call_ours(lib, rt.form, BF16, a, w, d, rt.index, None, None, rt.m, n, k, e)
            aq, sa, _ = quant_rows(a.float())
            wq, sb, _ = quant_blocks(w.float())
            call_ours(lib, rt.form, FP8, aq, wq, d, rt.index, sa, sb, rt.m, n, k, e)
            torch.cuda.synchronize()
            print("profiled", kind, name)


if __name__ == "__main__":
    main()
