#!/usr/bin/env python3
"""The real DeepGEMM (tests/gpu/deepgemm.sh builds it) on one GPU, for the
GPU suite's shadow and created-context cases.

usage: deepgemm_real.py forms [suite|bench]
       deepgemm_real.py model
       deepgemm_real.py handle bf16|fp8 [--ordered]

forms   DeepGEMM's grouped GEMMs called through its Python API, each checked
        against a torch reference (bf16 1e-2, fp8 3e-2): contiguous and psum
        (m_grouped_{bf16,fp8}_gemm_nt_contiguous, use_psum_layout) with mk
        alignment 128 and 64 (set_mk_alignment_for_contiguous_layout),
        masked (m_grouped_{bf16,fp8}_gemm_nt_masked) and normal
        ({bf16,fp8}_gemm_nt), on bench/bench_grouped_mm.py's shapes.
        "suite" (default) takes a subset that JIT-compiles 14 kernels;
        "bench" every shape in every form and alignment (about 70
        kernels).  Prints one line per call and "deepgemm_real: N GEMM
        calls".
model   transformers' own "deepgemm" experts path, handed this DeepGEMM
        build, on examples/moe_device_map.py's random Qwen3-MoE (8 layers,
        64 experts, top-8) on cuda:0: bf16 logits against grouped_mm; then,
        where transformers offers "deepgemm" FP8 experts, FP8Experts
        quantized from the bf16 weights against the dequantized model on
        grouped_mm.
handle  DeepGEMM's first call on the primary context (its CUfunction is
        cached there); then the same call with torch's current stream an
        ExternalStream of a stream made in a cuCtxCreate context on device
        0: the driver refuses the cached CUfunction there (400).  Its D must
        equal the primary context's result.  --ordered: before the call, a
        second stream of the created context waits for a host flag and then
        writes the final A (and fp8 scales), and the launch stream waits for
        that stream (an event): the call must wait for it too (the launch
        stream still busy 0.3 s after the call, until the flag is set), and
        D is compared with the primary context's result on the final A.

exit codes: 0 ok ("deepgemm_real: ok"), 1 usage, set-up or a failed check,
3 DeepGEMM raised a CUDA driver error (its message on stderr), 4 wrong D in
the created context, or the call did not wait for the other stream, 5 not
reproducible here (no Hopper GPU, no deep_gemm, no "deepgemm" experts in
transformers), 6 --ordered: the call waited on the host for the other
stream (released by a watchdog after 20 s; a wait that holds the GIL ends
the process after 60 s with its Python stack, exit 1).
"""
import ctypes
import faulthandler
import os
import sys
import threading
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.join(ROOT, "bench"), os.path.join(ROOT, "examples")]
import deepgemm_ctypes as dgc  # noqa: E402
from test_grouped_mm import quant_blocks, quant_rows  # noqa: E402

PROG = "deepgemm_real"
TOL = {"bf16": 1e-2, "fp8": 3e-2}


def say(*args):
    print(PROG + ":", *args, flush=True)


def rel_err(got, ref):
    got, ref = got.float(), ref.float()
    return ((got - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def load():
    try:
        import deep_gemm
    except Exception as exc:  # noqa: BLE001 -- reported, the case skips
        say("cannot import deep_gemm: %s: %s" % (type(exc).__name__, exc))
        sys.exit(5)
    if not torch.cuda.is_available() or torch.cuda.get_device_capability(0)[0] != 9:
        say("needs a Hopper GPU (DeepGEMM's sm90 kernels), found %s" %
            (torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"))
        sys.exit(5)
    say("deep_gemm %s from %s" % (getattr(deep_gemm, "__version__", "?"), os.path.dirname(deep_gemm.__file__)))
    return deep_gemm


# ---- operands ----

class Problem:
    """G groups of counts[g] rows, K, N; bf16 A and B, their fp8 forms
    (A 1x128 scales per row, B 128x128 block scales) and the torch reference
    of each on the dequantized values."""

    def __init__(self, counts, k, n, rows=None):
        self.counts, self.k, self.n = [int(c) for c in counts], k, n
        self.g = len(self.counts)
        self.m = rows if rows is not None else sum(self.counts)
        self.a = torch.randn(self.m, k, device="cuda").bfloat16()
        self.b = torch.randn(self.g, n, k, device="cuda").bfloat16()
        self.aq, self.sa, a_deq = quant_rows(self.a.float())
        self.bq, self.sb, b_deq = quant_blocks(self.b.float())
        self.deq = {"bf16": (self.a, self.b), "fp8": (a_deq.bfloat16(), b_deq.bfloat16())}

    def operands(self, dtype):
        return ((self.a, self.b) if dtype == "bf16" else ((self.aq, self.sa), (self.bq, self.sb)))


def padded(counts, align):
    return [(c + align - 1) // align * align for c in counts]


def contiguous_layout(counts, align):
    """DeepGEMM's per-row group ids (-1 for padding rows, each group padded
    to align rows) and the rows kept."""
    ids = dgc.contiguous_layout(counts, "cuda", align)
    return ids, ids >= 0


def psum_layout(counts, align):
    """Each group's end row; group g starts at align(end[g-1]), group 0 at 0:
    the rows contiguous_layout keeps."""
    ends, start = [], 0
    for c, p in zip(counts, padded(counts, align)):
        ends.append(start + c)
        start += p
    return torch.tensor(ends, dtype=torch.int32, device="cuda")


def reference_rows(p, dtype, ids):
    """D of every kept row: row r times B[ids[r]]^T, on the dequantized values."""
    a, b = p.deq[dtype]
    ref = torch.zeros(p.m, p.n, device="cuda")
    for g in range(p.g):
        rows = (ids == g).nonzero().squeeze(1)
        if rows.numel():
            ref[rows] = a[rows].float() @ b[g].float().t()
    return ref


def call_contiguous(dg, dtype, form, counts, k, n, align):
    """One contiguous or psum call; returns its error against the reference."""
    dg.set_mk_alignment_for_contiguous_layout(align)
    rows = sum(padded(counts, align))
    p = Problem(counts, k, n, rows)
    ids, keep = contiguous_layout(counts, align)
    layout = psum_layout(counts, align) if form == "psum" else ids
    d = torch.zeros(rows, n, device="cuda", dtype=torch.bfloat16)
    a, b = p.operands(dtype)
    gemm = dg.m_grouped_bf16_gemm_nt_contiguous if dtype == "bf16" else dg.m_grouped_fp8_gemm_nt_contiguous
    gemm(a, b, d, layout, use_psum_layout=form == "psum")
    return rel_err(d[keep], reference_rows(p, dtype, ids)[keep])


def call_masked(dg, dtype, g, max_m, masked, k, n):
    a = torch.randn(g, max_m, k, device="cuda").bfloat16()
    b = torch.randn(g, n, k, device="cuda").bfloat16()
    d = torch.zeros(g, max_m, n, device="cuda", dtype=torch.bfloat16)
    mm = torch.tensor(masked, dtype=torch.int32, device="cuda")
    expected = max(1, sum(masked) // g)
    if dtype == "bf16":
        dg.m_grouped_bf16_gemm_nt_masked(a, b, d, mm, expected)
        a_ref, b_ref = a, b
    else:
        aq, sa, a_deq = quant_rows(a.float().view(g * max_m, k))
        bq, sb, b_deq = quant_blocks(b.float())
        dg.m_grouped_fp8_gemm_nt_masked((aq.view(g, max_m, k), sa.view(g, max_m, -1)), (bq, sb), d, mm, expected)
        a_ref, b_ref = a_deq.view(g, max_m, k), b_deq
    ref = torch.bmm(a_ref.float(), b_ref.float().transpose(1, 2))
    keep = torch.arange(max_m, device="cuda")[None, :] < mm[:, None]
    return rel_err(d[keep], ref[keep])


def call_normal(dg, dtype, m, k, n):
    """One plain GEMM (GemmType::Normal): bf16_gemm_nt or fp8_gemm_nt."""
    a = torch.randn(m, k, device="cuda").bfloat16()
    b = torch.randn(n, k, device="cuda").bfloat16()
    d = torch.zeros(m, n, device="cuda", dtype=torch.bfloat16)
    if dtype == "bf16":
        dg.bf16_gemm_nt(a, b, d)
        a_ref, b_ref = a, b
    else:
        aq, sa, a_ref = quant_rows(a.float())
        bq, sb, b_ref = quant_blocks(b.float()[None])
        dg.fp8_gemm_nt((aq, sa), (bq[0], sb[0]), d)
        b_ref = b_ref[0]
    return rel_err(d, a_ref.float() @ b_ref.float().t())


# ---- forms ----

def form_plan(which):
    """(dtype, form, align, shape) to call: shapes are bench_grouped_mm's."""
    from bench_grouped_mm import MASKED, SHAPES
    shapes = {s[0]: s for s in SHAPES}
    masked = {s[0]: s for s in MASKED}
    plan = []
    for dtype in ("bf16", "fp8"):
        if which == "bench":
            plan += [(dtype, form, align, s) for align in (128, 64) for form in ("contiguous", "psum")
                     for s in SHAPES]
            plan += [(dtype, "masked", None, s) for s in MASKED]
            plan += [(dtype, "normal", None, s) for s in SHAPES if not s[5]]
            continue
        plan += [(dtype, "contiguous", 128, shapes[name]) for name in
                 ("Qwen3 gate_up prefill", "DSV3 down prefill")]
        plan += [(dtype, form, align, shapes["Qwen3 down prefill"]) for align, form in
                 ((128, "psum"), (64, "contiguous"), (64, "psum"))]
        plan.append((dtype, "masked", None, masked["DSV3 down masked"]))
        plan.append((dtype, "normal", None, shapes["DSV3 down prefill"]))
    return plan


def forms(which):
    from bench_grouped_mm import counts_for
    dg = load()
    torch.manual_seed(0)
    worst, calls, bad = {}, 0, []
    for dtype, form, align, shape in form_plan(which):
        t0 = time.time()
        if form == "masked":
            name, g, max_m, (lo, hi), k, n = shape
            masked = torch.randint(lo, hi + 1, (g,)).tolist()
            err = call_masked(dg, dtype, g, max_m, masked, k, n)
            what = "%s %s G=%d max_m=%d K=%d N=%d" % (dtype, form, g, max_m, k, n)
        elif form == "normal":
            name, _, rows, k, n, _ = shape
            err = call_normal(dg, dtype, rows, k, n)
            what = "%s %s M=%d K=%d N=%d" % (dtype, form, rows, k, n)
        else:
            name, e, rows, k, n, _ = shape
            counts = counts_for("balanced", e, rows).tolist()
            err = call_contiguous(dg, dtype, form, counts, k, n, align)
            what = "%s %s align %d G=%d rows=%d K=%d N=%d" % (dtype, form, align, e, rows, k, n)
        torch.cuda.synchronize()
        calls += 1
        key = "%s %s%s" % (dtype, form, "" if align is None else " align %d" % align)
        worst[key] = max(worst.get(key, 0.0), err)
        ok = err <= TOL[dtype]
        if not ok:
            bad.append(what)
        say("%s (%s): rel error %.2e vs torch, %s, %.1f s" % (what, name, err, "ok" if ok else "WRONG",
                                                              time.time() - t0))
    for key, err in worst.items():
        say("worst %s: %.2e" % (key, err))
    say("%d GEMM calls" % calls)
    if bad:
        say("%d call(s) wrong against torch: %s" % (len(bad), "; ".join(bad)))
        return 1
    say("ok")
    return 0


# ---- transformers ----

def hand_deepgemm_to_transformers(dg):
    """transformers loads DeepGEMM through its hub kernel loader into a
    module-level handle (a DeepGEMM dataclass of entry points); fill it from
    this build instead, with DeepGEMM's own m alignment, so that the loader
    returns at once.  Earlier 5.x releases keep the handle in a cached loader
    function: that is replaced."""
    import dataclasses
    import functools
    from transformers.integrations import deepgemm as tdg
    names = {  # transformers' field -> DeepGEMM's name, where they differ
        "fp8_fp4_matmul": "fp8_fp4_gemm_nt",
        "grouped_fp8_fp4_matmul": "m_grouped_fp8_fp4_gemm_nt_contiguous",
        "grouped_fp8_fp4_matmul_nt": "m_grouped_fp8_fp4_gemm_nt_contiguous",
        "grouped_fp8_fp4_matmul_nn": "m_grouped_fp8_fp4_gemm_nn_contiguous",
        "grouped_bf16_matmul_nt": "m_grouped_bf16_gemm_nt_contiguous",
        "grouped_bf16_matmul_nn": "m_grouped_bf16_gemm_nn_contiguous",
    }
    alignment = dg.get_mk_alignment_for_contiguous_layout()

    def entry(field):
        if field == "m_alignment":
            return alignment
        if field == "per_token_cast_to_fp8":
            return dg.utils.per_token_cast_to_fp8
        return getattr(dg, names.get(field, field), None)

    version = __import__("transformers").__version__
    if not dataclasses.is_dataclass(getattr(tdg, "DeepGEMM", None)):
        raise RuntimeError("transformers %s: integrations.deepgemm has no DeepGEMM handle class" % version)
    handle = tdg.DeepGEMM(**{f.name: entry(f.name) for f in dataclasses.fields(tdg.DeepGEMM)})
    if hasattr(tdg, "_DEEPGEMM"):
        tdg._DEEPGEMM = handle
        where = "_DEEPGEMM"
    elif hasattr(tdg, "_load_deepgemm_kernel"):
        tdg._load_deepgemm_kernel = functools.cache(lambda: handle)
        where = "_load_deepgemm_kernel"
    else:
        raise RuntimeError("transformers %s: integrations.deepgemm keeps its DeepGEMM handle nowhere known" % version)
    if hasattr(tdg, "_DEEPGEMM_M_ALIGNMENT"):
        tdg._DEEPGEMM_M_ALIGNMENT = alignment
    say("transformers %s: DeepGEMM handed over (%s), m alignment %d" % (version, where, alignment))


def count_calls(dg):
    """DeepGEMM's grouped entry points, counted, so that a path that never
    reached DeepGEMM cannot pass."""
    calls = {}
    for name in ("m_grouped_bf16_gemm_nt_contiguous", "m_grouped_bf16_gemm_nn_contiguous",
                 "m_grouped_fp8_fp4_gemm_nt_contiguous", "m_grouped_fp8_gemm_nt_contiguous"):
        real = getattr(dg, name, None)
        if real is None:
            continue

        def counted(*args, _real=real, _name=name, **kwargs):
            calls[_name] = calls.get(_name, 0) + 1
            return _real(*args, **kwargs)

        setattr(dg, name, counted)
    return calls


def model():
    from checks import Checks
    from moe_device_map import make_config
    from transformers import AutoModelForCausalLM
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS
    dg = load()
    try:
        ALL_EXPERTS_FUNCTIONS["deepgemm"]
    except KeyError:
        say("transformers %s has no 'deepgemm' experts implementation" % __import__("transformers").__version__)
        return 5
    checks = Checks(PROG)
    dg.set_mk_alignment_for_contiguous_layout(128)
    calls = count_calls(dg)
    hand_deepgemm_to_transformers(dg)
    cfg = make_config()
    torch.manual_seed(0)
    with torch.device("cuda:0"):
        m = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, experts_implementation="deepgemm")
    ids = torch.randint(0, cfg.vocab_size, (2, 128), generator=torch.Generator().manual_seed(1)).to("cuda:0")
    per_forward = 2 * cfg.num_hidden_layers

    def logits():
        with torch.no_grad():
            return m(input_ids=ids).logits.float()

    got = logits()
    n = sum(calls.values())
    checks.flag("bf16 DeepGEMM calls", n == per_forward, "%d calls, expected %d" % (n, per_forward))
    m.set_experts_implementation("grouped_mm")
    checks.rel("bf16 logits vs grouped_mm", got, logits(), 3e-2)

    from transformers.integrations import finegrained_fp8
    fp8_impls = getattr(finegrained_fp8, "ALL_FP8_EXPERTS_FUNCTIONS", None)
    try:
        fp8_impls["deepgemm"]
    except (KeyError, TypeError):
        say("fp8: transformers %s offers no 'deepgemm' FP8 experts; bf16 only" % __import__("transformers").__version__)
        return checks.verdict()
    from transformers.integrations.moe import use_experts_implementation

    class Fp8(finegrained_fp8.FP8Experts):  # a subclass: the decorator edits the class it is given
        pass

    use_experts_implementation(Fp8, experts_interface=fp8_impls)
    swapped = []
    for layer in m.model.layers:
        old = layer.mlp.experts
        with torch.device("cuda:0"):
            new = Fp8(old.config, block_size=(128, 128))
        for name in ("gate_up_proj", "down_proj"):
            q, s, deq = quant_blocks(getattr(old, name).data.float())
            getattr(new, name).data.copy_(q)
            getattr(new, name + "_scale_inv").data.copy_(s)
            getattr(old, name).data.copy_(deq.bfloat16())
        swapped.append((layer.mlp, new))
    ref = logits()  # the dequantized weights, on grouped_mm
    for mlp, new in swapped:
        mlp.experts = new
    m.set_experts_implementation("deepgemm")
    before = sum(calls.values())
    got = logits()
    n = sum(calls.values()) - before
    checks.flag("fp8 DeepGEMM calls", n == per_forward, "%d calls, expected %d" % (n, per_forward))
    checks.rel("fp8 logits vs the dequantized model on grouped_mm", got, ref, 6e-2)
    return checks.verdict()


# ---- a created context ----

def producer(ctx, side, launch, copies):
    """On stream `side` of ctx: wait for a host flag, then copy each (dst,
    src) tensor pair; stream `launch` waits for `side` through an event.
    Returns the flag (a host uint32: 1 releases it)."""
    cu, flag, ev = dgc._cuda(), ctypes.c_void_p(), ctypes.c_void_p()
    side, launch = ctypes.c_void_p(side.cuda_stream), ctypes.c_void_p(launch.cuda_stream)
    with dgc.pushed(ctx):
        dgc.check(cu.cuMemAllocHost_v2(ctypes.byref(flag), ctypes.c_size_t(4)), "cuMemAllocHost")
        ctypes.c_uint32.from_address(flag.value).value = 0
        dgc.check(cu.cuStreamWaitValue32_v2(side, ctypes.c_uint64(flag.value), ctypes.c_uint32(1),
                                            ctypes.c_uint(0)), "cuStreamWaitValue32")  # GEQ
        for dst, src in copies:
            dgc.check(cu.cuMemcpyDtoDAsync_v2(ctypes.c_uint64(dst.data_ptr()), ctypes.c_uint64(src.data_ptr()),
                                              ctypes.c_size_t(src.numel() * src.element_size()), side),
                      "cuMemcpyDtoDAsync")
        dgc.check(cu.cuEventCreate(ctypes.byref(ev), 2), "cuEventCreate")  # CU_EVENT_DISABLE_TIMING
        dgc.check(cu.cuEventRecord(ev, side), "cuEventRecord")
        dgc.check(cu.cuStreamWaitEvent(launch, ev, 0), "cuStreamWaitEvent")
    return ctypes.c_uint32.from_address(flag.value)


def handle(dtype, ordered):
    dg = load()
    dg.set_mk_alignment_for_contiguous_layout(128)
    torch.manual_seed(0)
    counts, k, n = (100, 128, 37, 90), 512, 512
    layout, keep = contiguous_layout(counts, 128)
    p = Problem(counts, k, n, layout.numel())
    gemm = dg.m_grouped_bf16_gemm_nt_contiguous if dtype == "bf16" else dg.m_grouped_fp8_gemm_nt_contiguous

    # DeepGEMM's first call, in the primary context: compiles, caches the CUfunction there.
    d_primary = torch.zeros(p.m, n, device="cuda", dtype=torch.bfloat16)
    gemm(*p.operands(dtype), d_primary, layout)
    torch.cuda.synchronize()
    err = rel_err(d_primary[keep], reference_rows(p, dtype, layout)[keep])
    say("%s: primary context: rel error %.2e vs torch" % (dtype, err))
    if not err <= TOL[dtype]:
        return 1

    ctx = dgc.created_context(0)
    launch = dgc.context_stream(ctx)
    say("created context 0x%x on device 0, stream 0x%x" % (ctx.value, launch.cuda_stream))
    a, b = p.operands(dtype)
    d = torch.zeros(p.m, n, device="cuda", dtype=torch.bfloat16)
    # torch's own work is on the primary context's streams: done before the
    # producer holds its stream (a synchronize of the primary context once it
    # holds never returned on an H100: driver 580, CUDA 13.0)
    torch.cuda.synchronize()
    flag = None
    if ordered:
        # The created context's other stream writes the operands the call reads.
        srcs = (p.a,) if dtype == "bf16" else (p.aq, p.sa)
        dsts = [torch.empty_like(x) for x in srcs]
        for x in dsts:
            x.view(torch.uint8).zero_()  # wrong until the other stream's copy
        a = dsts[0] if dtype == "bf16" else tuple(dsts)
        torch.cuda.synchronize()
        flag = producer(ctx, dgc.context_stream(ctx), launch, list(zip(dsts, srcs)))
        say("a stream of the created context writes A after a host flag; the launch stream waits for it")
    say("calling %s on the created context's stream" % gemm.__name__)
    watchdog = None
    if flag is not None:  # a call that waited for the flag on the host would never return
        watchdog = threading.Timer(20.0, lambda: setattr(flag, "value", 2))
        watchdog.start()
        # the Timer needs the GIL, which DeepGEMM's call holds: a wait there
        # ends the process after 60 s with every thread's Python stack
        faulthandler.dump_traceback_later(60, exit=True)
    try:
        with torch.cuda.stream(launch):
            gemm(a, b, d, layout)
    except RuntimeError as exc:
        print(exc, file=sys.stderr, flush=True)
        return 3
    finally:
        if watchdog:
            watchdog.cancel()
            faulthandler.cancel_dump_traceback_later()
    say("call returned")
    if flag is not None and flag.value == 2:
        say("blocked: the call returned only after a watchdog set the flag 20 s later (it waited on the host)")
        return 6
    if flag is not None:
        time.sleep(0.3)
        busy = dgc._cuda().cuStreamQuery(ctypes.c_void_p(launch.cuda_stream)) == 600  # NOT_READY
        say("launch stream still waiting for the other stream 0.3 s after the call: %s" % ("yes" if busy else "no"))
        flag.value = 1
        if not busy:
            say("the call did not wait for the created context's other stream")
            return 4
    dgc.check(dgc._cuda().cuStreamSynchronize(ctypes.c_void_p(launch.cuda_stream)), "cuStreamSynchronize")
    torch.cuda.synchronize()
    err = rel_err(d[keep], d_primary[keep])
    say("%s: created context: rel error %.2e vs the primary context's D" % (dtype, err))
    if not err <= TOL[dtype]:
        print("silent corruption: rel error %.3g" % err, flush=True)
        return 4
    say("ok")
    return 0


def main(argv):
    if argv[:1] == ["forms"] and len(argv) <= 2 and (argv[1:] or ["suite"])[0] in ("suite", "bench"):
        return forms((argv[1:] or ["suite"])[0])
    if argv == ["model"]:
        return model()
    if argv[:1] == ["handle"] and len(argv) in (2, 3) and argv[1] in TOL and argv[2:] in ([], ["--ordered"]):
        return handle(argv[1], len(argv) == 3)
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
