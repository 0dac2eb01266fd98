"""experts_implementation="ctxguard" for transformers (>= 5): the bundled
grouped_mm kernels behind transformers' own ExpertsInterface, for bf16
experts and for fine-grained FP8 experts (e4m3, 128x128 weight blocks,
dynamic 1x128 activation scales) -- the ones transformers would otherwise
hand to DeepGEMM.  Every GEMM runs on its experts' device under a device
guard, so a model spread over several GPUs by device_map is safe.

    import ctxguard.transformers
    ctxguard.transformers.register()
    model = AutoModelForCausalLM.from_pretrained(..., device_map="auto", experts_implementation="ctxguard")
"""
from .ops import grouped_mm, grouped_mm_fp8, quantize_fp8_rows  # first: says how to get torch

import torch

NAME = "ctxguard"


def _expert_rows(hidden_states, top_k_weights, tok, perm):
    """Token rows to expert order: row i is token tok[i]'s, and weight i is
    flat routing weight perm[i]."""
    return hidden_states[tok], top_k_weights.reshape(-1)[perm]


def _token_sum(rows, inv, num_tokens, num_top_k):
    """Expert-ordered rows back to token order (row j of the token order is
    expert row inv[j]), each token's k rows summed."""
    return rows[inv].view(num_tokens, num_top_k, rows.size(-1)).sum(dim=1)


class _ExpertOrder(torch.autograd.Function):
    """_expert_rows under autograd.  Autograd's own backward of its indexing
    is a sort-based accumulate (index_put_ with accumulate=True: a sort and
    several kernels, for each of the two); this one is a gather through the
    inverse permutation and, for the states, a sum over each token's k rows
    (fp32 accumulation, deterministic)."""

    @staticmethod
    def forward(ctx, hidden_states, top_k_weights, tok, perm, inv):
        ctx.save_for_backward(inv)
        ctx.shape = top_k_weights.shape
        return _expert_rows(hidden_states, top_k_weights, tok, perm)

    @staticmethod
    def backward(ctx, grad_states, grad_weights):
        (inv,) = ctx.saved_tensors
        d_states = d_weights = None
        if ctx.needs_input_grad[0]:
            d_states = _token_sum(grad_states, inv, *ctx.shape)
        if ctx.needs_input_grad[1]:
            d_weights = grad_weights[inv].view(ctx.shape)
        return d_states, d_weights, None, None, None


class _TokenSum(torch.autograd.Function):
    """_token_sum under autograd: its backward is one gather, where
    autograd's of the indexing is again a sort-based accumulate."""

    @staticmethod
    def forward(ctx, rows, tok, inv, num_tokens, num_top_k):
        ctx.save_for_backward(tok)
        return _token_sum(rows, inv, num_tokens, num_top_k)

    @staticmethod
    def backward(ctx, grad):
        (tok,) = ctx.saved_tensors
        return grad[tok], None, None, None, None


def _route(self, hidden_states, top_k_index, top_k_weights, project):
    """transformers' grouped_mm experts dispatch (sort by expert, offsets by
    histc, EP sentinels past offs[-1] masked), with project(x, weights) for
    each of the two grouped GEMMs.  The same computation; under grad mode
    the two reorderings are the autograd Functions above (a host-bound decode
    step spent more host time in the sort-based backward of plain indexing
    than in its GEMMs)."""
    num_top_k = top_k_index.size(-1)
    num_tokens = hidden_states.size(0)
    grad = torch.is_grad_enabled()
    expert_ids_g, perm = torch.sort(top_k_index.reshape(-1))
    tok = perm // num_top_k
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(perm.size(0), device=perm.device)
    states, weights_g = (_ExpertOrder.apply(hidden_states, top_k_weights, tok, perm, inv) if grad
                         else _expert_rows(hidden_states, top_k_weights, tok, perm))
    # histc, not bincount: no host sync, so CUDA graphs can capture it.
    counts = torch.histc(expert_ids_g.int(), bins=self.num_experts, min=0, max=self.num_experts - 1)
    offs = torch.cumsum(counts, dim=0, dtype=torch.int32)
    sentinel = (expert_ids_g >= self.num_experts).unsqueeze(-1)
    ids = expert_ids_g.clamp(max=self.num_experts - 1) if self.has_bias else None
    states.masked_fill_(sentinel, 0.0)

    # Sentinel rows lie past offs[-1]: the GEMMs neither read nor write them,
    # so one fill after the last GEMM (before the routing weights multiply
    # them, which would carry NaN into their gradient) is enough.
    up = "gate_up_proj" if self.has_gate else "up_proj"
    out = project(states, up, offs, ids)
    out = self._apply_gate(out) if self.has_gate else self.act_fn(out)
    out = project(out, "down_proj", offs, ids).masked_fill(sentinel, 0.0)
    out = out * weights_g.to(out.dtype).unsqueeze(-1)
    out = (_TokenSum.apply(out, tok, inv, num_tokens, num_top_k) if grad
           else _token_sum(out, inv, num_tokens, num_top_k))
    return out.to(hidden_states.dtype)


def experts_forward(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                    top_k_weights: torch.Tensor) -> torch.Tensor:
    """bf16 experts: weights [E, out, in] (or [E, in, out] when is_transposed)."""

    def project(x, name, offs, ids):
        w = getattr(self, name)
        if w.dtype != torch.bfloat16:
            raise ValueError("experts_implementation='ctxguard': %s is %s; the kernels take bfloat16 weights "
                             "(load the model with dtype=torch.bfloat16)" % (name, w.dtype))
        out = grouped_mm(x.to(torch.bfloat16), w if self.is_transposed else w.transpose(-2, -1), offs)
        if self.has_bias:
            out = out + getattr(self, name + "_bias")[ids]
        return out

    return _route(self, hidden_states, top_k_index, top_k_weights, project)


def fp8_experts_forward(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                        top_k_weights: torch.Tensor) -> torch.Tensor:
    """Fine-grained FP8 experts: e4m3 weights [E, out, in] with fp32
    `*_scale_inv` [E, out/128, in/128]; activations quantized per row and 128
    channels on the fly."""
    block = tuple(self.block_size or ())
    if block != (128, 128) or self.activation_scheme != "dynamic":
        raise ValueError("experts_implementation='ctxguard': FP8 experts need weight_block_size (128, 128) and "
                         "activation_scheme 'dynamic', got %s and %r; use experts_implementation='grouped_mm'"
                         % (self.block_size, self.activation_scheme))

    def project(x, name, offs, ids):
        scale = getattr(self, name + "_scale_inv")
        if scale.dtype != torch.float32:
            raise ValueError("experts_implementation='ctxguard': %s_scale_inv is %s; the kernels take float32 "
                             "block scales (scale_fmt 'float')" % (name, scale.dtype))
        q, s = quantize_fp8_rows(x)
        return grouped_mm_fp8(q, s, getattr(self, name), scale, offs)

    return _route(self, hidden_states, top_k_index, top_k_weights, project)


def register(name: str = NAME) -> None:
    """Adds experts_implementation=name (default "ctxguard") to transformers'
    ExpertsInterface (bf16 experts) and FP8ExpertsInterface (fine-grained FP8)."""
    from transformers.integrations.finegrained_fp8 import FP8ExpertsInterface
    from transformers.integrations.moe import ExpertsInterface

    ExpertsInterface.register(name, experts_forward)
    FP8ExpertsInterface.register(name, fp8_experts_forward)
