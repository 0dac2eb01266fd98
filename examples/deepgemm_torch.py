#!/usr/bin/env python3
"""A two-GPU PyTorch job calling DeepGEMM's m_grouped_bf16_gemm_nt_contiguous
the way a model spread over cuda:0 and cuda:1 does (examples/deepgemm_ctypes.py:
DeepGEMM's Python-API route over the exact-ABI fixture): the kernel is fetched
once, by the first call on cuda:0, and reused for cuda:1 tensors.

usage: deepgemm_torch.py [--cubin CUBIN | --deepgemm] [--created] SITUATION
  --cubin       the fixture cubin (default build/gpu/deepgemm_sm90.cubin)
  --deepgemm    call the real deep_gemm.m_grouped_bf16_gemm_nt_contiguous
                instead (importable, or from $DEEPGEMM_PATH)
  every run first calls on cuda:0 (checked), then, with the operands on cuda:1:
  silent        current device 0 (what device_map does), peer access on
  race-default  the same while cuda:1's default stream is still producing A
                (a chain of ~10 ms sleeps and writes), no synchronisation
  race-side     the same with the chain on a side stream of cuda:1
                (torch.cuda.Stream: a non-blocking pool stream)
  handle        torch.cuda.set_device(1) before the call
  --created     one GPU: "cuda:1" is a context made by cuCtxCreate on device
                0, and only handle is reproducible: the call made with
                torch's current stream an ExternalStream of that context's
                stream, the tensors on cuda:0 (the driver refuses the cached
                CUfunction there, 400, as on another device)
  D is compared with a float64 reference of the final A (rel. error <= 1e-2).

exit codes (deepgemm_route's): 0 correct ("deepgemm_torch: ok"), 1 usage or
set-up, 2 the first call on cuda:0 is wrong, 3 the call raised a CUDA driver
error, 4 wrong result on cuda:1, 5 not reproducible here (fewer than 2 GPUs,
or an operand situation with --created).
"""
import ctypes
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deepgemm_ctypes as dg  # noqa: E402

SITUATIONS = ("silent", "race-default", "race-side", "handle")
COUNTS = (100, 128, 37, 90)     # rows per expert
N, K = 256, 512
CHAIN, SLEEP_CYCLES = 16, 20_000_000    # ~10 ms per link at H200 clocks
TOLERANCE = 1e-2


def call(gemm, a, b, d, idx, what):
    print("deepgemm_torch: calling (%s)" % what, flush=True)
    try:
        gemm(a, b, d, idx)
    except RuntimeError as e:
        print(e, file=sys.stderr, flush=True)
        sys.exit(3)
    print("deepgemm_torch: call returned (%s)" % what, flush=True)


def produce(a1, a_final, stream):
    """cuda:1 still producing A on `stream` when the call comes."""
    with torch.cuda.device(1), torch.cuda.stream(stream):
        for i in range(CHAIN - 1):
            torch.cuda._sleep(SLEEP_CYCLES)
            a1.fill_(float(i + 1))
        torch.cuda._sleep(SLEEP_CYCLES)
        a1.copy_(a_final)
    print("deepgemm_torch: producer still running at the call: %s" % ("no" if stream.query() else "yes"),
          flush=True)


def created_handle(gemm, a0, b0, idx0):
    """The handle situation on one GPU: the call on a created context's
    stream, the operands the first call's (cuda:0); returns its D."""
    ctx = dg.created_context(0)
    stream = dg.context_stream(ctx)
    d = torch.zeros(idx0.numel(), N, device="cuda:0", dtype=torch.bfloat16)
    torch.cuda.synchronize(0)
    with torch.cuda.stream(stream):
        call(gemm, a0, b0, d, idx0, "handle, current stream a created context's (0x%x), tensors on cuda:0"
             % stream.cuda_stream)
    dg.check(dg._cuda().cuStreamSynchronize(ctypes.c_void_p(stream.cuda_stream)), "cuStreamSynchronize")
    return d


def main():
    args, cubin = sys.argv[1:], dg.CUBIN
    real = args[:1] == ["--deepgemm"]
    if args[:1] == ["--cubin"] and len(args) > 1:
        cubin, args = args[1], args[2:]
    args = args[real:]
    created = args[:1] == ["--created"]
    args = args[created:]
    if len(args) != 1 or args[0] not in SITUATIONS:
        print("usage: %s [--cubin CUBIN | --deepgemm] [--created] %s" % (sys.argv[0], "|".join(SITUATIONS)),
              file=sys.stderr)
        return 1
    situation = args[0]
    if real:
        if os.environ.get("DEEPGEMM_PATH"):
            sys.path.insert(0, os.environ["DEEPGEMM_PATH"])
        import deep_gemm
        gemm = deep_gemm.m_grouped_bf16_gemm_nt_contiguous
        alignment = deep_gemm.get_mk_alignment_for_contiguous_layout()
        print("deepgemm_torch: deep_gemm from %s, mk alignment %d" % (
            os.path.dirname(deep_gemm.__file__), alignment))
    else:
        def gemm(a, b, d, idx):
            dg.m_grouped_bf16_gemm_nt_contiguous(a, b, d, idx, cubin)
        alignment = dg.MK_ALIGNMENT
    if created and situation != "handle":
        print("deepgemm_torch: %s needs a second device: memory of a context created on device 0 is "
              "device 0's" % situation)
        return 5
    if not created and torch.cuda.device_count() < 2:
        print("deepgemm_torch: needs 2 GPUs, found %d" % torch.cuda.device_count())
        return 5
    torch.manual_seed(0)

    # DeepGEMM's first call, on cuda:0: fills the kernel cache.
    torch.cuda.set_device(0)
    idx0 = dg.contiguous_layout(COUNTS, "cuda:0", alignment)
    a0 = torch.randn(idx0.numel(), K, device="cuda:0").bfloat16()
    b0 = torch.randn(len(COUNTS), N, K, device="cuda:0").bfloat16()
    d0 = torch.zeros(idx0.numel(), N, device="cuda:0", dtype=torch.bfloat16)
    call(gemm, a0, b0, d0, idx0, "first call, cuda:0")
    torch.cuda.synchronize(0)
    ref, valid = dg.reference(a0, b0, idx0)
    err = dg.rel_error(d0, ref, valid)
    print("deepgemm_torch: cuda:0: rel error %.3g" % err)
    if not err <= TOLERANCE:
        return 2

    if created:
        return verdict(situation, created_handle(gemm, a0, b0, idx0), a0, b0, idx0)

    # The layers on cuda:1.  PyTorch turns peer access on for device-to-device
    # copies, one direction per copy: both, as a job moving activations does.
    if not (torch.cuda.can_device_access_peer(0, 1) and torch.cuda.can_device_access_peer(1, 0)):
        print("deepgemm_torch: needs peer access between cuda:0 and cuda:1")
        return 5
    a1, b1, idx1 = a0.to("cuda:1"), b0.to("cuda:1"), idx0.to("cuda:1")
    a1[:1].to("cuda:0")
    d1 = torch.zeros(idx1.numel(), N, device="cuda:1", dtype=torch.bfloat16)
    a_final = torch.randn(a1.shape, device="cuda:1").bfloat16() if situation.startswith("race") else a1
    torch.cuda.synchronize(1)
    if situation == "race-default":
        produce(a1, a_final, torch.cuda.default_stream(1))
    elif situation == "race-side":
        produce(a1, a_final, torch.cuda.Stream(device=1))
    torch.cuda.set_device(1 if situation == "handle" else 0)
    call(gemm, a1, b1, d1, idx1, "%s, current device %d, tensors on cuda:1" % (
        situation, torch.cuda.current_device()))
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    return verdict(situation, d1, a_final, b1, idx1)


def verdict(situation, d1, a_final, b1, idx1):
    ref, valid = dg.reference(a_final, b1, idx1)
    err = dg.rel_error(d1, ref, valid)
    print("deepgemm_torch: %s: rel error %.3g against the final A" % (situation, err))
    if not err <= TOLERANCE:
        print("silent corruption: rel error %.3g" % err)
        return 4
    print("deepgemm_torch: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
