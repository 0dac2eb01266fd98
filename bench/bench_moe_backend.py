#!/usr/bin/env python3
"""transformers MoE layer on experts_implementation="ctxguard" vs "grouped_mm",
side by side in one run: a Qwen3-30B-A3B sparse MoE block (router + 128
experts, top-8, hidden 2048, expert intermediate 768, bf16) on one GPU, at a
prefill size (4096 tokens: 32768 expert rows) and a decode size (64 tokens),
forward alone and forward + backward.  The two backends take turns call by
call on the same inputs (CUDA-event medians).  Compared first: the outputs
(the forward rows' rel diff) and the gradients of the input, the router and
the experts (the forward + backward rows' rel diff, the largest of those).
Needs the ctxguard package installed (pip install .).

usage: bench_moe_backend.py [--iters N] [--tokens PREFILL,DECODE]
"""
import argparse
import statistics
import sys

import torch

import ctxguard.transformers

BACKENDS = ("ctxguard", "grouped_mm")


def make_block():
    from transformers import Qwen3MoeConfig
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock

    cfg = Qwen3MoeConfig(hidden_size=2048, moe_intermediate_size=768, num_experts=128, num_experts_per_tok=8,
                         norm_topk_prob=True)
    torch.manual_seed(0)
    with torch.device("cuda"):
        block = Qwen3MoeSparseMoeBlock(cfg).to(torch.bfloat16)
    with torch.no_grad():
        for p in block.parameters():
            p.normal_(0, 0.02)
    return cfg, block


def rel(got, ref):
    ref = ref.float()
    return ((got.float() - ref).norm() / ref.norm().clamp(min=1e-30)).item()


def timed(fn):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    return s, e


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--tokens", default="4096,64")
    args = ap.parse_args()
    ctxguard.transformers.register()
    cfg, block = make_block()
    print("# %s, ctxguard %s, Qwen3-30B-A3B MoE block: %d experts, top-%d, hidden %d, intermediate %d"
          % (torch.cuda.get_device_name(), ctxguard.__version__, cfg.num_experts, cfg.num_experts_per_tok,
             cfg.hidden_size, cfg.moe_intermediate_size))
    print("%-8s %7s %-12s %12s %12s %10s %9s" % ("size", "tokens", "pass", "ctxguard ms", "grouped_mm ms",
                                                  "speedup", "rel diff"))
    slower = []
    for label, tokens in zip(("prefill", "decode"), (int(t) for t in args.tokens.split(","))):
        x = torch.randn(1, tokens, cfg.hidden_size, device="cuda", dtype=torch.bfloat16)
        grad = torch.randn_like(x)
        xg = x.clone().requires_grad_()
        # The output, then the gradients of the input, the router and the experts.
        results = {}
        for name in BACKENDS:
            cfg._experts_implementation = name
            xg.grad = None
            block.zero_grad(set_to_none=True)
            out = block(xg)
            out.backward(grad)
            results[name] = [out.detach(), xg.grad] + [p.grad for p in block.parameters()]
        rels = [rel(got, ref) for got, ref in zip(results["ctxguard"], results["grouped_mm"])]
        diffs = {"forward": rels[0], "fwd+bwd": max(rels)}
        del results
        block.zero_grad(set_to_none=True)

        def fwd():
            with torch.no_grad():
                block(x)

        def fwd_bwd():
            block(xg).backward(grad)

        for pname, fn in (("forward", fwd), ("fwd+bwd", fwd_bwd)):
            events = {name: [] for name in BACKENDS}
            for i in range(args.iters + 3):
                for name in (BACKENDS if i % 2 else BACKENDS[::-1]):  # alternate who goes first
                    cfg._experts_implementation = name
                    ev = timed(fn)
                    if i >= 3:
                        events[name].append(ev)
            torch.cuda.synchronize()
            ms = {n: statistics.median(s.elapsed_time(e) for s, e in evs) for n, evs in events.items()}
            speed = ms["grouped_mm"] / ms["ctxguard"]
            if speed < 1.0:
                slower.append("%s %s" % (label, pname))
            print("%-8s %7d %-12s %12.3f %12.3f %9.2fx %9.1e" % (label, tokens, pname, ms["ctxguard"],
                                                                ms["grouped_mm"], speed, diffs[pname]))
            block.zero_grad(set_to_none=True)
    print("summary: ctxguard %s" % ("faster than grouped_mm everywhere" if not slower
                                    else "slower at " + ", ".join(slower)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
