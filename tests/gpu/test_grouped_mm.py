#!/usr/bin/env python3
"""GPU suite for the bundled grouped_mm kernels (kernels/), called through
their ctypes entry points on torch tensors, against a float64 reference.

Fresh random inputs every run.  Every case runs on the automatic path (TMA +
wgmma on Hopper) and on the portable mma.sync path, in each of the four
forms: offs, contiguous (-1 padding rows), psum (groups start at the previous
end rounded up to 128) and masked (A [G, max_m, K], masked_m valid rows per
group).  Outputs are poisoned with a NaN pattern first: rows that must be
written are checked for NaN and error, every other row (padding, gaps
between psum groups, masked rows past masked_m) for the exact poison bits.

Library: $CG_GMM_LIB, else build/kernels/libcg_gmm.so, else
build/libctxguard.so.  Output is TAP-like; the last line is
"N passed, M failed".  Exit status 1 when anything failed.
"""
import ctypes
import faulthandler
import math
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BF16, FP8 = 0, 1
NK, KN = 0, 1
FORCE_PORTABLE = 1
POISON = 0x7FA5  # a bf16 NaN with a payload nobody computes
FORMS = ("offs", "contiguous", "psum", "masked")
PSUM_ALIGN = 128
CASE_TIMEOUT_S = 30


def load_lib():
    for path in (os.environ.get("CG_GMM_LIB"),
                 os.path.join(ROOT, "build/kernels/libcg_gmm.so"),
                 os.path.join(ROOT, "build/libctxguard.so")):
        if path and os.path.exists(path):
            lib = ctypes.CDLL(path)
            break
    else:
        sys.exit("no grouped_mm library: make -f kernels/kernels.mk BUILD=build gmm-standalone")
    u64, i64 = ctypes.c_uint64, ctypes.c_int64
    sig = [u64, ctypes.c_int, ctypes.c_int, ctypes.c_uint] + [u64] * 6 + [i64] * 6
    for form in FORMS:
        fn = getattr(lib, "ctxguard_gmm_" + form)
        fn.argtypes = sig + [i64] if form == "masked" else sig  # masked: sfa_stride_g after sfa_stride_k
        fn.restype = ctypes.c_int
    lib.ctxguard_gmm_last_error.restype = ctypes.c_char_p
    rc = lib.ctxguard_gmm_init_default()
    if rc != 0:
        sys.exit("ctxguard_gmm_init_default: %d %s" % (rc, lib.ctxguard_gmm_last_error().decode()))
    return lib, path


def ptr(t):
    return 0 if t is None else t.data_ptr()


def call(lib, form, dtype, b_layout, flags, a, b, d, index, sfa, sfb, sfa_strides, m, n, k, g):
    """sfa_strides: (m, k) strides, and for the masked form optionally g; m
    is max_m in the masked form."""
    fn = getattr(lib, "ctxguard_gmm_" + form)
    strides = list(sfa_strides) + ([0] if form == "masked" and len(sfa_strides) == 2 else [])
    rc = fn(torch.cuda.current_stream().cuda_stream, dtype, b_layout, flags, ptr(a), ptr(b), ptr(d),
            ptr(index), ptr(sfa), ptr(sfb), *strides, m, n, k, g)
    if rc != 0:
        raise RuntimeError("grouped_mm returned %d: %s" % (rc, lib.ctxguard_gmm_last_error().decode()))


def quant_rows(x):
    """e4m3 with one fp32 scale per row and 128 channels: (q, scales, dequantized)."""
    m, k = x.shape
    kb = (k + 127) // 128
    xp = torch.nn.functional.pad(x, (0, kb * 128 - k)).view(m, kb, 128)
    s = xp.abs().amax(-1).clamp(min=1e-4) / 448.0
    q = (xp / s[..., None]).to(torch.float8_e4m3fn)
    deq = (q.float() * s[..., None]).view(m, kb * 128)[:, :k]
    return q.view(m, kb * 128)[:, :k].contiguous(), s.contiguous(), deq


def quant_blocks(w):
    """e4m3 with one fp32 scale per 128 x 128 block of each [n, k] matrix."""
    g, n, k = w.shape
    nb, kb = (n + 127) // 128, (k + 127) // 128
    wp = torch.nn.functional.pad(w, (0, kb * 128 - k, 0, nb * 128 - n)).view(g, nb, 128, kb, 128)
    s = wp.abs().amax(dim=(2, 4)).clamp(min=1e-4) / 448.0
    q = (wp / s[:, :, None, :, None]).to(torch.float8_e4m3fn)
    deq = (q.float() * s[:, :, None, :, None]).view(g, nb * 128, kb * 128)[:, :n, :k]
    return q.view(g, nb * 128, kb * 128)[:, :n, :k].contiguous(), s.contiguous(), deq


def calc_diff(x, y):
    """DeepGEMM's test metric: 1 - cosine-like similarity."""
    x, y = x.double(), y.double()
    denom = (x * x + y * y).sum()
    return (1 - 2 * (x * y).sum() / denom).item() if denom > 0 else 0.0


class Case:
    """sizes: rows per group (masked: masked_m values, which may lie outside
    0..max_m to test the clamp); sfa_mn_major: DeepGEMM's MN-major
    TMA-aligned sfa; sfa_group_pad: masked only, extra elements between
    groups' sfa blocks, passed as an explicit sfa_stride_g (None: 0, the
    packed default); sfa_row_pad: not masked, row-major sfa rows that many
    NaN elements longer than their blocks, passed as sfa_stride_m; graph:
    the call captured in a CUDA graph after a first call, D poisoned again,
    the graph replayed (a tail launch overlapping its main kernel's end
    becomes a programmatic edge)."""

    def __init__(self, name, form, dtype, b_layout, sizes, k, n, misalign=False, sfa_mn_major=False,
                 max_m=0, sfa_group_pad=None, sfa_row_pad=0, graph=False):
        self.name, self.form, self.dtype, self.b_layout = name, form, dtype, b_layout
        self.sizes, self.k, self.n = sizes, k, n
        self.misalign, self.sfa_mn_major = misalign, sfa_mn_major
        self.max_m, self.sfa_group_pad, self.sfa_row_pad = max_m, sfa_group_pad, sfa_row_pad
        self.graph = graph


def align(x, to):
    return (x + to - 1) // to * to


def rows_of(case):
    """(rows of A and D, index tensor, list of (group, row indices), rows
    never written, m as the call takes it)."""
    dev = "cuda"
    g = len(case.sizes)
    spans, layout, ends, start = [], [], [], 0
    for e, s in enumerate(case.sizes):
        if case.form == "masked":
            start = e * case.max_m
            s = min(max(s, 0), case.max_m)
        elif case.form == "psum":
            start = align(start, PSUM_ALIGN)
        spans.append((e, torch.arange(start, start + s, device=dev)))
        if case.form == "contiguous":
            block = align(s, 128)
            layout += [e] * s + [-1] * (block - s)
            s = block
        # psum: every other empty group ends before its aligned start (empty all the same)
        ends.append(start - 1 if case.form == "psum" and s == 0 and e % 2 else start + s)
        start += s
    if case.form == "offs":
        m = start
        index = torch.tensor(ends, dtype=torch.int32, device=dev)
    elif case.form == "psum":
        m = start + 37  # rows past the last group too
        index = torch.tensor(ends, dtype=torch.int32, device=dev)
    elif case.form == "masked":
        m = g * case.max_m
        index = torch.tensor(case.sizes, dtype=torch.int32, device=dev)
    else:
        layout += [-1] * 128  # a whole padding block too
        m = len(layout)
        index = torch.tensor(layout, dtype=torch.int32, device=dev)
    written = torch.zeros(m, dtype=torch.bool, device=dev)
    for _, rows in spans:
        written[rows] = True
    return m, index, spans, (~written).nonzero().flatten(), case.max_m if case.form == "masked" else m


def pack_sfa(case, sfa, m):
    """sfa [rows, kb] (row-major) as the case hands it over: DeepGEMM's
    MN-major TMA-aligned layout ([kb, rows rounded up to 4], per group in
    masked form) and/or masked groups sfa_group_pad elements apart.
    Returns (tensor, strides as call() takes them)."""
    dev = "cuda"
    kb = sfa.shape[1]
    if case.sfa_row_pad:
        t = torch.full((m, kb + case.sfa_row_pad), float("nan"), device=dev)
        t[:, :kb] = sfa
        return t, (kb + case.sfa_row_pad, 1)
    if not case.sfa_mn_major and case.sfa_group_pad is None:
        return sfa, (0, 0)  # row-major [rows, kb]: the default strides
    if case.form != "masked":
        m4 = align(m, 4)
        t = torch.zeros(kb, m4, device=dev)
        t[:, :m] = sfa.t()
        return t, (1, m4)
    mm = case.max_m
    inner = (kb, align(mm, 4)) if case.sfa_mn_major else (mm, kb)
    per_group = inner[0] * inner[1] + (case.sfa_group_pad or 0)
    t = torch.zeros(len(case.sizes) * per_group, device=dev)
    for e in range(len(case.sizes)):
        blk = t[e * per_group:e * per_group + inner[0] * inner[1]].view(*inner)
        part = sfa[e * mm:(e + 1) * mm]
        if case.sfa_mn_major:
            blk[:, :mm] = part.t()
        else:
            blk.copy_(part)
    sm, sk = (1, inner[1]) if case.sfa_mn_major else (kb, 1)
    return t, (sm, sk, per_group if case.sfa_group_pad is not None else 0)


def run_case(lib, case, flags):
    dev = "cuda"
    g, k, n = len(case.sizes), case.k, case.n
    m, index, spans, untouched, call_m = rows_of(case)
    a32 = torch.randn(max(m, 1), k, device=dev)[:m]
    w32 = torch.randn(g, n, k, device=dev) / math.sqrt(k)
    sfa = sfb = None
    strides = (0, 0)
    if case.dtype == FP8:
        a, sfa, a_ref = quant_rows(a32)
        w, sfb, w_ref = quant_blocks(w32)
        sfa, strides = pack_sfa(case, sfa, m)
    else:
        a, w = a32.to(torch.bfloat16), w32.to(torch.bfloat16)
        a_ref, w_ref = a.float(), w.float()
    b = w if case.b_layout == NK else w.transpose(1, 2).contiguous()
    d = torch.empty(m, n, dtype=torch.int16, device=dev).fill_(POISON).view(torch.bfloat16)
    if case.misalign:  # operands one element off their allocation's alignment
        a = torch.cat([a.new_zeros(1), a.flatten()])[1:].view(m, k)
        d = torch.empty(m * n + 1, dtype=torch.int16, device=dev).fill_(POISON).view(torch.bfloat16)[1:]
        d = d.view(m, n)
    call(lib, case.form, case.dtype, case.b_layout, flags, a, b, d, index, sfa, sfb, strides, call_m, n, k, g)
    torch.cuda.synchronize()
    if case.graph:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            call(lib, case.form, case.dtype, case.b_layout, flags, a, b, d, index, sfa, sfb, strides, call_m, n, k,
                 g)
        d.view(torch.int16).fill_(POISON)
        graph.replay()
        torch.cuda.synchronize()

    out = d.double()
    num = den = 0.0
    diffs = []
    for e, rows in spans:
        if rows.numel() == 0:
            continue
        ref = a_ref[rows].double() @ w_ref[e].double().t()
        got = out[rows]
        if torch.isnan(got).any():
            return False, "group %d: %d unwritten/NaN values" % (e, int(torch.isnan(got).sum()))
        num += float(((got - ref) ** 2).sum())
        den += float((ref ** 2).sum())
        diffs.append((got, ref))
    bits = d.view(torch.int16)[untouched]
    if untouched.numel() and not bool((bits == POISON).all()):
        return False, "%d values of rows outside every group were written" % int((bits != POISON).sum())
    rel = math.sqrt(num / den) if den > 0 else 0.0
    if case.dtype == FP8:
        got = torch.cat([x.flatten() for x, _ in diffs]) if diffs else torch.zeros(1)
        ref = torch.cat([y.flatten() for _, y in diffs]) if diffs else torch.zeros(1)
        cd = calc_diff(got, ref)
        return cd < 1e-3 and rel <= 1e-2, "calc_diff %.2e rel %.2e" % (cd, rel)
    return rel <= 1e-2, "rel %.2e" % rel


def ragged(rng, g, lo, hi, empty_every=0):
    sizes = torch.randint(lo, hi + 1, (g,), generator=rng).tolist()
    if empty_every:
        for i in range(0, g, empty_every):
            sizes[i] = 0
    return sizes


def cases():
    rng = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    out = []
    for bl, bname in ((NK, "B[G,N,K]"), (KN, "B[G,K,N]")):
        out += [
            Case("bf16 offs G=1 M=1000 K=512 N=384 " + bname, "offs", BF16, bl, [1000], 512, 384),
            Case("bf16 offs G=8 ragged+empty K=200 N=200 " + bname, "offs", BF16, bl,
                 ragged(rng, 8, 0, 300, 3), 200, 200),
            Case("bf16 offs G=256 decode 0..40 rows K=1024 N=520 " + bname, "offs", BF16, bl,
                 ragged(rng, 256, 0, 40, 7), 1024, 520),
            Case("bf16 offs G=3 rows 8192/0/3001 K=264 N=392 " + bname, "offs", BF16, bl,
                 [8192, 0, 3001], 264, 392),
            Case("bf16 offs G=64 0..300 rows K=768 N=1024 " + bname, "offs", BF16, bl,
                 ragged(rng, 64, 0, 300, 5), 768, 1024),
            Case("bf16 offs odd K=131 N=77 " + bname, "offs", BF16, bl, ragged(rng, 5, 0, 200), 131, 77),
            Case("bf16 offs misaligned A/D K=256 N=256 " + bname, "offs", BF16, bl,
                 ragged(rng, 4, 1, 200), 256, 256, misalign=True),
            Case("bf16 contiguous G=8 0..300 rows K=512 N=640 " + bname, "contiguous", BF16, bl,
                 ragged(rng, 8, 0, 300, 4), 512, 640),
            Case("bf16 contiguous G=32 decode 0..20 rows K=512 N=256 " + bname, "contiguous", BF16, bl,
                 ragged(rng, 32, 0, 20, 6), 512, 256),
            Case("bf16 psum G=6 0..400 rows+empty K=256 N=384 " + bname, "psum", BF16, bl,
                 ragged(rng, 6, 0, 400, 3), 256, 384),
            Case("bf16 psum G=16 decode 0..40 rows+empty+single K=200 N=200 " + bname, "psum", BF16, bl,
                 [1] + ragged(rng, 15, 0, 40, 4), 200, 200),
            Case("bf16 masked G=8 max_m=64 masked_m 0,1,64,.. K=200 N=200 " + bname, "masked", BF16, bl,
                 [0, 1, 64] + ragged(rng, 5, 0, 64), 200, 200, max_m=64),
            Case("bf16 masked G=4 max_m=384 masked_m 384,0,1,.. K=512 N=640 " + bname, "masked", BF16, bl,
                 [384, 0, 1] + ragged(rng, 1, 100, 383), 512, 640, max_m=384),
            Case("bf16 masked decode G=32 max_m=256 masked_m 32..128 K=1024 N=512 " + bname, "masked", BF16,
                 bl, ragged(rng, 32, 32, 128), 1024, 512, max_m=256),
            # tiles enough for 64 x 256 split tiles (two consumers by columns), last one partial
            Case("bf16 masked decode G=32 max_m=64 masked_m 0..64 K=1024 N=1200 " + bname, "masked", BF16,
                 bl, ragged(rng, 32, 0, 64, 7), 1024, 1200, max_m=64),
            Case("bf16 contiguous G=64 decode 0..40 rows K=512 N=1100 " + bname, "contiguous", BF16, bl,
                 ragged(rng, 64, 0, 40, 9), 512, 1100),
            # 128 x 256 tiles whose last round (T mod 132 = r <= 66; 12 bf16 k-steps or more) a second launch
            # runs, overlapping the first's end, as 64 x 128 parts where r <= 33: T = 28 x 5 = 140, r = 8;
            # T = 21 x 7 = 147, r = 15; else as 64 x 256 halves: T = 36 x 5 = 180, r = 48; T = 25 x 7 =
            # 175, r = 43.  With 2048 channels of K or more a CTA, each part is summed over K by a cluster
            # (grouped_mm.c, "the last round"): on an H200 of 3 CTAs for r = 8, of 2 for r = 15
            Case("bf16 contiguous last round in 64 x 128 parts K=1024 N=1100 " + bname, "contiguous", BF16, bl,
                 [1000, 0, 1, 2300], 1024, 1100),
            Case("bf16 contiguous last round in 64 x 128 parts K=1088 N=1664 " + bname, "contiguous", BF16, bl,
                 [1000, 1, 0, 1300], 1088, 1664),
            Case("bf16 contiguous last round in 64 x 128 parts K=768 N=1664 " + bname, "contiguous", BF16, bl,
                 [1000, 1, 0, 1300], 768, 1664),
            Case("bf16 contiguous last round in 64 x 256 halves K=1024 N=1100 " + bname, "contiguous", BF16, bl,
                 [1500, 0, 1, 2700], 1024, 1100),
            Case("bf16 contiguous last round in 64 x 256 halves K=1088 N=1664 " + bname, "contiguous", BF16, bl,
                 [1000, 1, 0, 1900], 1088, 1664),
            Case("bf16 contiguous last round in parts summed over K by clusters of 3 K=6144 N=1100 " + bname,
                 "contiguous", BF16, bl, [1000, 0, 1, 2300], 6144, 1100),
            Case("bf16 contiguous last round in parts summed over K by clusters of 2 K=4096 N=1664 " + bname,
                 "contiguous", BF16, bl, [1000, 1, 0, 1300], 4096, 1664),
        ]
    out += [
        Case("fp8 offs G=8 ragged+empty K=640 N=384", "offs", FP8, NK, ragged(rng, 8, 0, 300, 3), 640, 384),
        Case("fp8 offs G=6 K=208 N=200 (partial scale blocks)", "offs", FP8, NK, ragged(rng, 6, 0, 400), 208, 200),
        Case("fp8 offs G=128 decode 0..10 rows K=1024 N=512", "offs", FP8, NK, ragged(rng, 128, 0, 10, 9),
             1024, 512),
        Case("fp8 offs G=2 rows 8192/1500 K=512 N=512", "offs", FP8, NK, [8192, 1500], 512, 512),
        Case("fp8 offs odd K=100 N=90", "offs", FP8, NK, ragged(rng, 3, 0, 150), 100, 90),
        Case("fp8 offs B[G,K,N] K=256 N=256", "offs", FP8, KN, ragged(rng, 4, 0, 200), 256, 256),
        Case("fp8 offs sfa MN-major K=384 N=256", "offs", FP8, NK, ragged(rng, 5, 0, 300), 384, 256,
             sfa_mn_major=True),
        Case("fp8 contiguous G=8 0..300 rows K=512 N=512", "contiguous", FP8, NK, ragged(rng, 8, 0, 300, 4),
             512, 512),
        Case("fp8 contiguous G=16 decode 0..30 rows K=768 N=384", "contiguous", FP8, NK,
             ragged(rng, 16, 0, 30, 5), 768, 384),
        Case("fp8 contiguous sfa MN-major G=6 K=384 N=256", "contiguous", FP8, NK, ragged(rng, 6, 0, 300, 4),
             384, 256, sfa_mn_major=True),
        Case("fp8 psum G=6 0..400 rows+empty K=640 N=384", "psum", FP8, NK, ragged(rng, 6, 0, 400, 3), 640, 384),
        Case("fp8 psum sfa MN-major G=5 K=384 N=256", "psum", FP8, NK, [1] + ragged(rng, 4, 0, 300), 384, 256,
             sfa_mn_major=True),
        Case("fp8 psum decode G=32 0..20 rows K=512 N=256", "psum", FP8, NK, ragged(rng, 32, 0, 20, 6), 512, 256),
        Case("fp8 psum odd K=100 N=90", "psum", FP8, NK, ragged(rng, 4, 0, 150, 3), 100, 90),
        Case("fp8 psum B[G,K,N] K=256 N=256", "psum", FP8, KN, ragged(rng, 4, 0, 200), 256, 256),
        Case("fp8 masked G=8 max_m=128 masked_m 0,1,128,.. K=512 N=384", "masked", FP8, NK,
             [0, 1, 128] + ragged(rng, 5, 0, 128), 512, 384, max_m=128),
        Case("fp8 masked sfa MN-major G=8 max_m=128 K=512 N=384", "masked", FP8, NK,
             [128, 0] + ragged(rng, 6, 1, 128), 512, 384, max_m=128, sfa_mn_major=True),
        Case("fp8 masked sfa MN-major, groups padded apart, G=4 max_m=384 K=640 N=512", "masked", FP8, NK,
             [384, 0, 1, 250], 640, 512, max_m=384, sfa_mn_major=True, sfa_group_pad=12),
        Case("fp8 masked sfa MN-major, groups 5 floats apart (no TMA), G=3 max_m=200 K=384 N=256", "masked", FP8,
             NK, [200, 7, 0], 384, 256, max_m=200, sfa_mn_major=True, sfa_group_pad=5),
        Case("fp8 masked sfa row-major, groups padded apart, G=3 max_m=70 K=256 N=256", "masked", FP8, NK,
             [70, 3, 0], 256, 256, max_m=70, sfa_group_pad=5),
        Case("fp8 masked G=6 max_m=64 K=208 N=200 (partial scale blocks)", "masked", FP8, NK,
             [64, 0] + ragged(rng, 4, 1, 64), 208, 200, max_m=64),
        Case("fp8 masked masked_m -3 and max_m+5 clamped, G=4 max_m=96 K=256 N=256", "masked", FP8, NK,
             [-3, 101, 96, 40], 256, 256, max_m=96),
        Case("fp8 masked B[G,K,N] G=4 max_m=64 K=256 N=256", "masked", FP8, KN, [64, 0, 1, 30], 256, 256,
             max_m=64),
        Case("fp8 masked decode G=32 max_m=256 masked_m 32..128 K=1024 N=512 sfa MN-major", "masked", FP8, NK,
             ragged(rng, 32, 32, 128), 1024, 512, max_m=256, sfa_mn_major=True),
        Case("fp8 masked decode G=32 max_m=64 masked_m 0..64 K=1024 N=1664 (split tiles)", "masked", FP8, NK,
             ragged(rng, 32, 0, 64, 7), 1024, 1664, max_m=64),
        Case("fp8 contiguous G=64 decode 0..40 rows K=768 N=1100 sfa MN-major (split tiles)", "contiguous", FP8,
             NK, ragged(rng, 64, 0, 40, 9), 768, 1100, sfa_mn_major=True),
        # row-major sfa by TMA (rows a multiple of 4 blocks apart), tiles starting on any row
        Case("fp8 offs G=8 ragged+empty K=1024 N=384 sfa row-major by TMA", "offs", FP8, NK,
             ragged(rng, 8, 0, 300, 3), 1024, 384),
        Case("fp8 offs G=5 K=1280 N=256 sfa rows 12 floats apart (TMA, last box past K)", "offs", FP8, NK,
             ragged(rng, 5, 0, 300), 1280, 256, sfa_row_pad=2),
        Case("fp8 psum G=5 K=1536 N=512 sfa row-major by TMA", "psum", FP8, NK, [1] + ragged(rng, 4, 0, 300),
             1536, 512),
        # the last round cut up, as for bf16 above
        Case("fp8 contiguous last round in 64 x 128 parts K=2176 N=1100", "contiguous", FP8, NK,
             [1000, 0, 1, 2300], 2176, 1100),
        Case("fp8 contiguous last round in 64 x 128 parts K=2048 N=1100 sfa row-major by TMA", "contiguous", FP8,
             NK, [1000, 0, 1, 2300], 2048, 1100),
        Case("fp8 contiguous last round in 64 x 128 parts K=2048 N=1664 sfa MN-major", "contiguous", FP8, NK,
             [1000, 1, 0, 1300], 2048, 1664, sfa_mn_major=True),
        Case("fp8 contiguous last round in 64 x 256 halves K=2176 N=1100", "contiguous", FP8, NK,
             [1500, 0, 1, 2700], 2176, 1100),
        Case("fp8 contiguous last round in 64 x 256 halves K=2048 N=1100 sfa row-major by TMA", "contiguous",
             FP8, NK, [1500, 0, 1, 2700], 2048, 1100),
        Case("fp8 contiguous last round in 64 x 256 halves K=2048 N=1664 sfa MN-major", "contiguous", FP8, NK,
             [1000, 1, 0, 1900], 2048, 1664, sfa_mn_major=True),
        Case("fp8 contiguous last round in parts summed over K by clusters of 3 K=6272 N=1100", "contiguous", FP8,
             NK, [1000, 0, 1, 2300], 6272, 1100),
        Case("fp8 contiguous last round in parts summed over K by clusters of 3 K=6144 N=1100 sfa row-major by TMA",
             "contiguous", FP8, NK, [1000, 0, 1, 2300], 6144, 1100),
        Case("fp8 contiguous last round in parts summed over K by clusters of 2 K=4096 N=1664 sfa MN-major",
             "contiguous", FP8, NK, [1000, 1, 0, 1300], 4096, 1664, sfa_mn_major=True),
        # the same, captured in a CUDA graph and replayed
        Case("fp8 contiguous last round in 64 x 256 halves K=2048 N=1100, CUDA graph", "contiguous", FP8, NK,
             [1500, 0, 1, 2700], 2048, 1100, graph=True),
        Case("fp8 contiguous last round in 64 x 128 parts K=2048 N=1664 sfa MN-major, CUDA graph", "contiguous",
             FP8, NK, [1000, 1, 0, 1300], 2048, 1664, sfa_mn_major=True, graph=True),
        Case("fp8 contiguous last round in parts summed over K by clusters of 2 K=4096 N=1664, CUDA graph",
             "contiguous", FP8, NK, [1000, 1, 0, 1300], 4096, 1664, graph=True),
    ]
    return out


def main():
    lib, path = load_lib()
    print("# library %s, device %s" % (path, torch.cuda.get_device_name()))
    passed = failed = 0
    num = 0
    for case in cases():
        for flags, pname in ((0, "auto"), (FORCE_PORTABLE, "portable")):
            num += 1
            desc = "%s [%s]" % (case.name, pname)
            faulthandler.dump_traceback_later(CASE_TIMEOUT_S, exit=True)
            try:
                ok, detail = run_case(lib, case, flags)
            except Exception as exc:  # report and go on: one failure must not hide the rest
                ok, detail = False, "%s: %s" % (type(exc).__name__, exc)
            faulthandler.cancel_dump_traceback_later()
            print("%s %d - %s # %s" % ("ok" if ok else "not ok", num, desc, detail), flush=True)
            passed += ok
            failed += not ok
    print("1..%d" % num)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
