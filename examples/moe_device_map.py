#!/usr/bin/env python3
"""moe_device_map -- a Qwen3-MoE split over two GPUs in one process, done right.

The deployment that made transformers disable DeepGEMM on multi-GPU models:
one process, the model cut in two by accelerate's device_map (first half of
the decoder layers and the embedding on cuda:0, second half, final norm and
lm_head on cuda:1), the current device left at 0.  Its experts run on
`experts_implementation='grouped_mm'` (torch's grouped GEMM, launched on the
device of its operands), the fix transformers recommends.  The model is
built from a config with random bf16 weights (no download): 8 layers, 64
experts, top-8 routing, hidden 512, expert intermediate 256, 8 heads, vocab
4096.

It runs one training step (forward with labels, backward) on random token
ids, checks that grouped_mm really ran, that the loss and gradients are
finite and that the same step with the whole model on cuda:0 gives the same
loss and gradient norms.  Under `ctxguard --mode abort --scope all` a job
like this must show 0 crossings.

Prints "moe_device_map: ok" and exits 0 when every check passes; exits 1 on
a failed check, 77 when fewer than two CUDA devices are visible.
bench/moe_forward.py imports make_config and build_model from here.
"""
import math
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from checks import Checks  # noqa: E402

BATCH, SEQ = 4, 256
LOSS_TOL, GRAD_TOL = 1e-3, 5e-2


def make_config():
    from transformers import Qwen3MoeConfig

    return Qwen3MoeConfig(
        vocab_size=4096, hidden_size=512, intermediate_size=1024, moe_intermediate_size=256,
        num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=4,
        num_experts=64, num_experts_per_tok=8, norm_topk_prob=True,
        max_position_embeddings=SEQ, use_cache=False, tie_word_embeddings=False)


def split_device_map(cfg, d0, d1):
    """accelerate device_map by hand: the first half of the layers on d0, the
    rest on d1 -- what infer_auto_device_map gives when d0 is full."""
    half = cfg.num_hidden_layers // 2
    dmap = {"model.embed_tokens": d0, "model.rotary_emb": d0}
    dmap.update({f"model.layers.{i}": d0 if i < half else d1 for i in range(cfg.num_hidden_layers)})
    dmap.update({"model.norm": d1, "lm_head": d1})
    return dmap


def build_model(cfg, d0=0, d1=1, seed=0):
    """Random bf16 weights (initialised on d0, which is quicker than on the
    CPU), experts on grouped_mm, dispatched over d0 and d1 with accelerate.
    Fails loudly when transformers did not take grouped_mm."""
    from accelerate import dispatch_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    with torch.device(f"cuda:{d0}"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16,
                                                 experts_implementation="grouped_mm")
    impl = model.get_experts_implementation()
    if set(impl.values()) != {"grouped_mm"}:
        raise RuntimeError(f"experts implementation is {impl}, not grouped_mm")
    experts = [m for m in model.modules() if hasattr(m, "gate_up_proj")]
    if len(experts) != cfg.num_hidden_layers or any(
            m.config._experts_implementation != "grouped_mm" for m in experts):
        raise RuntimeError("not every experts module is set to grouped_mm")
    model = dispatch_model(model, device_map=split_device_map(cfg, d0, d1))
    devices = {p.device for p in model.parameters()}
    if devices != {torch.device("cuda", d0), torch.device("cuda", d1)}:
        raise RuntimeError(f"the model is not split over cuda:{d0} and cuda:{d1}: {devices}")
    return model


def count_grouped_mm():
    """Counts calls of the grouped GEMM entry point transformers picks
    (F.grouped_mm where torch has it, else torch._grouped_mm; looked up at
    every call), so that a silent fallback cannot pass."""
    calls = {"n": 0}
    owner, name = ((torch.nn.functional, "grouped_mm") if hasattr(torch.nn.functional, "grouped_mm")
                   else (torch, "_grouped_mm"))
    real = getattr(owner, name)

    def counted(*args, **kwargs):
        calls["n"] += 1
        return real(*args, **kwargs)

    setattr(owner, name, counted)
    return calls


CHECKS = Checks("moe_device_map")
check = CHECKS.flag


def train_step(model, ids):
    """Loss and the gradient norm of each parameter, in float64 on the CPU."""
    model.zero_grad(set_to_none=True)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    norms = {n: p.grad.double().norm().item() for n, p in model.named_parameters() if p.grad is not None}
    return loss.item(), norms


def main():
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        print(f"moe_device_map: needs 2 CUDA devices, found {torch.cuda.device_count()}")
        return 77
    torch.cuda.set_device(0)
    cfg = make_config()
    calls = count_grouped_mm()
    model = build_model(cfg)
    layers = model.model.layers
    print(f"moe_device_map: {cfg.num_hidden_layers} layers, {cfg.num_experts} experts, top-{cfg.num_experts_per_tok}; "
          f"layer 0 experts on {layers[0].mlp.experts.gate_up_proj.device}, layer {len(layers) - 1} experts on "
          f"{layers[-1].mlp.experts.gate_up_proj.device}, lm_head on {model.lm_head.weight.device}, "
          f"experts implementation {model.config._experts_implementation}")

    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, cfg.vocab_size, (BATCH, SEQ), generator=gen).to("cuda:0")
    loss, norms = train_step(model, ids)
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    print(f"moe_device_map: split over cuda:0 and cuda:1: loss {loss:.6f}")
    per_forward = 2 * cfg.num_hidden_layers     # gate_up and down per MoE layer
    check("grouped_mm ran", calls["n"] == per_forward,
          f"{calls['n']} grouped_mm calls, expected {per_forward}")
    # Random weights of scale 0.02 give near-uniform logits: loss ~ ln(vocab).
    check("loss", math.isfinite(loss) and abs(loss - math.log(cfg.vocab_size)) < 1.0,
          f"{loss:.4f}, ln(vocab) {math.log(cfg.vocab_size):.4f}")
    bad = [n for n, v in norms.items() if not math.isfinite(v)]
    check("gradients finite", not bad and len(norms) == len(list(model.parameters())),
          f"{len(norms)} gradients, non-finite: {bad[:4]}")
    moved = [n for n, p in model.named_parameters() if p.device.index == 1 and norms.get(n, 0.0) > 0]
    check("gradients on cuda:1", bool(moved), f"{len(moved)} non-zero gradients of cuda:1 parameters")

    # The same step with the whole model on cuda:0, no hooks.
    from accelerate.hooks import remove_hook_from_submodules

    remove_hook_from_submodules(model)
    model.to("cuda:0")
    ref_loss, ref_norms = train_step(model, ids)
    print(f"moe_device_map: all on cuda:0: loss {ref_loss:.6f}")
    check("loss matches single device", abs(loss - ref_loss) <= LOSS_TOL * abs(ref_loss),
          f"{loss:.6f} vs {ref_loss:.6f}")
    worst = max(((abs(norms[n] - r) / max(r, 1e-30), n) for n, r in ref_norms.items() if n in norms),
                default=(math.inf, "none"))
    check("gradient norms match single device", worst[0] <= GRAD_TOL,
          f"worst relative difference {worst[0]:.2e} ({worst[1]})")

    return CHECKS.verdict()


if __name__ == "__main__":
    sys.exit(main())
