#!/usr/bin/env python3
"""qwen3_moe_ctxguard -- experts_implementation="ctxguard" on a Qwen3-MoE
split over two GPUs in one process, where transformers refuses DeepGEMM.

The model is examples/moe_device_map.py's random bf16 Qwen3-MoE (no
download), loaded with experts_implementation="ctxguard" after
ctxguard.transformers.register(), cut over cuda:0 and cuda:1 by a
device_map, the current device left at 0.
  bf16: its logits against the same model on experts_implementation="grouped_mm".
  fp8:  every layer's experts replaced by transformers' fine-grained FP8
        experts (FP8Experts: e4m3 weights quantized from the bf16 ones,
        128x128 fp32 block scales), on "ctxguard"; logits against the bf16
        model whose expert weights are those dequantized, on grouped_mm.
The ops' calls are counted, so a silent fallback cannot pass.

usage: qwen3_moe_ctxguard.py [bf16|fp8|both]   (default both)
Prints "qwen3_moe_ctxguard: ok" and exits 0 when every check passes; 1 on a
failed check; 77 with fewer than two CUDA devices.
"""
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from checks import Checks  # noqa: E402
from moe_device_map import make_config, split_device_map  # noqa: E402

import ctxguard.transformers  # noqa: E402
from ctxguard import _native  # noqa: E402
from ctxguard.ops import quantize_fp8_blocks  # noqa: E402

BATCH, SEQ = 2, 128
TOL = {"bf16": 3e-2, "fp8": 5e-2}  # relative error of the logits; bf16 rounding through 8 layers
CHECKS = Checks("qwen3_moe_ctxguard")


def count_kernel_calls():
    """Calls of the bundled kernels by dtype, through the ops' one entry point."""
    calls = {_native.BF16: 0, _native.FP8: 0}
    real = _native.gmm_offs

    def counted(stream, dtype, *args):
        calls[dtype] += 1
        return real(stream, dtype, *args)

    _native.gmm_offs = counted
    return calls


def build(cfg):
    from accelerate import dispatch_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    with torch.device("cuda:0"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, experts_implementation="ctxguard")
    impl = set(model.get_experts_implementation().values())
    if impl != {"ctxguard"}:
        raise RuntimeError("experts implementation is %s, not ctxguard" % impl)
    return dispatch_model(model, device_map=split_device_map(cfg, 0, 1))


def logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits.float().cpu()


def rel(got, ref):
    return ((got - ref).norm() / ref.norm()).item()


def dequantized(q, scale):
    g, n, k = q.shape
    s = scale.repeat_interleave(128, 1).repeat_interleave(128, 2)[:, :n, :k]
    return (q.float() * s).to(torch.bfloat16)


def to_fp8(model):
    """Swaps every layer's experts for transformers' FP8Experts on the same
    device, quantized from its bf16 weights; the bf16 weights become the
    dequantized ones (the reference)."""
    from transformers.integrations.finegrained_fp8 import ALL_FP8_EXPERTS_FUNCTIONS, FP8Experts
    from transformers.integrations.moe import use_experts_implementation

    class Fp8(FP8Experts):  # a subclass: the decorator edits the class it is given
        pass

    use_experts_implementation(Fp8, experts_interface=ALL_FP8_EXPERTS_FUNCTIONS)
    swapped = []
    for layer in model.model.layers:
        old = layer.mlp.experts
        with torch.device(old.gate_up_proj.device):
            new = Fp8(old.config, block_size=(128, 128))
        for name in ("gate_up_proj", "down_proj"):
            q, s = quantize_fp8_blocks(getattr(old, name).data)
            getattr(new, name).data.copy_(q)
            getattr(new, name + "_scale_inv").data.copy_(s)
            getattr(old, name).data.copy_(dequantized(q, s))
        swapped.append((layer.mlp, new))
    return swapped


def main():
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        print("qwen3_moe_ctxguard: needs 2 CUDA devices, found %d" % torch.cuda.device_count())
        return 77
    part = sys.argv[1] if len(sys.argv) > 1 else "both"
    torch.cuda.set_device(0)
    ctxguard.transformers.register()
    calls = count_kernel_calls()
    cfg = make_config()
    model = build(cfg)
    layers = model.model.layers
    print("qwen3_moe_ctxguard: %d layers, %d experts, top-%d; experts of layer 0 on %s, of layer %d on %s"
          % (cfg.num_hidden_layers, cfg.num_experts, cfg.num_experts_per_tok, layers[0].mlp.experts.gate_up_proj.device,
             len(layers) - 1, layers[-1].mlp.experts.gate_up_proj.device))
    ids = torch.randint(0, cfg.vocab_size, (BATCH, SEQ), generator=torch.Generator().manual_seed(1)).to("cuda:0")
    per_forward = 2 * cfg.num_hidden_layers

    if part in ("bf16", "both"):
        got = logits(model, ids)
        CHECKS.flag("bf16 kernels ran", calls[_native.BF16] == per_forward,
                    "%d bf16 calls, expected %d" % (calls[_native.BF16], per_forward))
        model.set_experts_implementation("grouped_mm")
        ref = logits(model, ids)
        CHECKS.flag("bf16 logits vs grouped_mm", bool(torch.isfinite(got).all()) and rel(got, ref) <= TOL["bf16"],
                    "rel error %.2e, tolerance %.0e" % (rel(got, ref), TOL["bf16"]))

    if part in ("fp8", "both"):
        model.set_experts_implementation("grouped_mm")
        swapped = to_fp8(model)
        ref = logits(model, ids)
        for mlp, new in swapped:
            mlp.experts = new
        model.set_experts_implementation("ctxguard")
        before = calls[_native.FP8]
        got = logits(model, ids)
        CHECKS.flag("fp8 kernels ran", calls[_native.FP8] - before == per_forward,
                    "%d fp8 calls, expected %d" % (calls[_native.FP8] - before, per_forward))
        CHECKS.flag("fp8 logits vs dequantized bf16 on grouped_mm",
                    bool(torch.isfinite(got).all()) and rel(got, ref) <= TOL["fp8"],
                    "rel error %.2e, tolerance %.0e" % (rel(got, ref), TOL["fp8"]))
    return CHECKS.verdict()


if __name__ == "__main__":
    sys.exit(main())
