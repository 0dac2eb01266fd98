#!/usr/bin/env python3
"""ep_torchrun -- one device per process: NCCL and an expert-parallel MoE step.

The other fix for multi-GPU MoE ("run one device per process (TP/EP)"):
launched by torchrun, one process per GPU,
  python3 -m torch.distributed.run --nproc_per_node=2 examples/ep_torchrun.py
each rank
  1. all-reduces a tensor and checks the sum;
  2. runs one step of an expert-parallel MoE layer: 16 experts (SwiGLU,
     hidden 256, intermediate 512), each rank holding 8; every rank routes its
     512 tokens top-2, sends each (token, expert) row to the expert's rank
     with all_to_all, runs its local experts with grouped_mm (one grouped
     GEMM for gate/up, one for down), sends the rows back with all_to_all
     and combines them with the routing weights; then backward (the
     all_to_all runs in reverse for the gradients);
  3. checks its output rows and its experts' weight gradients against a
     dense fp32 reference of the whole layer (all ranks' tokens, all 16
     experts), computed locally from the same seeds.
Under `ctxguard --mode abort --scope all` every process must show 0
crossings: NCCL's peer buffers are mapped into each process, but no kernel
is meant to be launched with another device's memory.

Rank 0 prints "ep_torchrun: ok" when every rank's checks passed; every rank
exits 0 then, 1 otherwise; 77 when the job does not have exactly 2 ranks on
2 visible GPUs.
"""
import datetime
import os
import sys

# NVLink multicast (NVLS, symmetric-memory multicast) is off-limits on the
# test machine; a caller may still set these.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from checks import Checks  # noqa: E402

EXPERTS, HIDDEN, INTER, TOKENS, TOPK = 16, 256, 512, 512, 2
OUT_TOL, GRAD_TOL = 3e-2, 5e-2
WORLD = 2


class AllToAll(torch.autograd.Function):
    """all_to_all_single of rows with uneven splits; backward sends the
    gradients back the way the rows came."""

    @staticmethod
    def forward(ctx, x, out_splits, in_splits):
        ctx.splits = (out_splits, in_splits)
        out = x.new_empty((sum(out_splits),) + tuple(x.shape[1:]))
        dist.all_to_all_single(out, x.contiguous(), out_splits, in_splits)
        return out

    @staticmethod
    def backward(ctx, grad):
        out_splits, in_splits = ctx.splits
        back = grad.new_empty((sum(in_splits),) + tuple(grad.shape[1:]))
        dist.all_to_all_single(back, grad.contiguous(), in_splits, out_splits)
        return back, None, None


def grouped_linear(x, w, offs):
    """x [rows, K] sorted by expert, w [G, N, K] (transformers' layout), offs
    the int32 cumulative row ends: x @ w[g]^T per group."""
    mm = getattr(F, "grouped_mm", None) or torch._grouped_mm
    return mm(x, w.transpose(-2, -1), offs=offs)


def local_experts(x, ids, w_gate_up, w_down):
    """SwiGLU experts over rows sorted by local expert id."""
    offs = torch.cumsum(torch.bincount(ids, minlength=w_gate_up.shape[0]), 0).to(torch.int32)
    gate, up = grouped_linear(x, w_gate_up, offs).chunk(2, dim=-1)
    return grouped_linear(F.silu(gate) * up, w_down, offs)


def inverse(perm):
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(perm.numel(), device=perm.device)
    return inv


def ep_moe(x, topk_ids, topk_w, w_gate_up, w_down, rank):
    """Expert-parallel MoE layer: dispatch, local grouped GEMMs, combine."""
    per_rank = w_gate_up.shape[0]
    flat = topk_ids.reshape(-1)
    order = torch.argsort(flat, stable=True)          # by expert, hence by owner rank
    ids = flat[order]
    send_counts = torch.bincount(ids // per_rank, minlength=WORLD)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    send, recv = send_counts.tolist(), recv_counts.tolist()

    rows = AllToAll.apply(x[order // TOPK], recv, send)
    recv_ids = ids.new_empty(sum(recv))
    dist.all_to_all_single(recv_ids, ids, recv, send)
    local = recv_ids - rank * per_rank
    lorder = torch.argsort(local, stable=True)        # blocks per source rank -> by local expert
    out_rows = local_experts(rows[lorder], local[lorder], w_gate_up, w_down)[inverse(lorder)]

    back = AllToAll.apply(out_rows, send, recv)       # in the order the rows were sent
    pairs = back[inverse(order)].view(x.shape[0], TOPK, -1).float()
    return (pairs * topk_w.unsqueeze(-1)).sum(1)


def make_problem(dev):
    """Weights and every rank's tokens and routing, identical on all ranks."""
    g = torch.Generator().manual_seed(0)
    w_gate_up = (torch.randn(EXPERTS, 2 * INTER, HIDDEN, generator=g) * HIDDEN ** -0.5).bfloat16()
    w_down = (torch.randn(EXPERTS, HIDDEN, INTER, generator=g) * INTER ** -0.5).bfloat16()
    router = torch.randn(EXPERTS, HIDDEN, generator=g) * HIDDEN ** -0.5
    tokens = []
    for r in range(WORLD):
        x = torch.randn(TOKENS, HIDDEN, generator=torch.Generator().manual_seed(100 + r)).bfloat16()
        w, ids = torch.softmax(x.float() @ router.T, dim=-1).topk(TOPK, dim=-1)
        tokens.append((x.to(dev), ids.to(dev), (w / w.sum(-1, keepdim=True)).to(dev)))
    return w_gate_up.to(dev), w_down.to(dev), tokens


def reference(w_gate_up, w_down, tokens):
    """Dense fp32 layer over all ranks' tokens: outputs per rank and the
    gradients of the summed per-rank losses."""
    wg = w_gate_up.float().requires_grad_()
    wd = w_down.float().requires_grad_()
    outs, loss = [], 0
    for x, ids, w in tokens:
        out = torch.zeros(x.shape[0], HIDDEN, device=x.device)
        for e in range(EXPERTS):
            tok, k = torch.nonzero(ids == e, as_tuple=True)
            gate, up = (x[tok].float() @ wg[e].T).chunk(2, dim=-1)
            y = (F.silu(gate) * up) @ wd[e].T
            out = out.index_add(0, tok, y * w[tok, k].unsqueeze(-1))
        outs.append(out.detach())
        loss = loss + out.square().mean()
    loss.backward()
    return outs, wg.grad, wd.grad




def main():
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world != WORLD or torch.cuda.device_count() < WORLD:
        print(f"ep_torchrun: needs {WORLD} ranks on {WORLD} GPUs (torchrun --nproc_per_node={WORLD}), "
              f"got {world} rank(s), {torch.cuda.device_count()} GPU(s)")
        return 77
    local_rank = int(os.environ["LOCAL_RANK"])
    dev = torch.device("cuda", local_rank)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev, timeout=datetime.timedelta(seconds=120))
    rank = dist.get_rank()
    print(f"ep_torchrun: rank {rank}: pid {os.getpid()} on {dev}", flush=True)
    checks = Checks(f"ep_torchrun: rank {rank}")

    t = torch.full((1 << 20,), float(rank + 1), device=dev)
    dist.all_reduce(t)
    want = WORLD * (WORLD + 1) / 2
    checks.rel("all_reduce sum", t, torch.full_like(t, want), 0)

    w_gate_up, w_down, tokens = make_problem(dev)
    per_rank = EXPERTS // WORLD
    mine = slice(rank * per_rank, (rank + 1) * per_rank)
    wg = w_gate_up[mine].clone().requires_grad_()
    wd = w_down[mine].clone().requires_grad_()
    x, ids, w = tokens[rank]
    out = ep_moe(x, ids, w, wg, wd, rank)
    out.square().mean().backward()
    ref_outs, ref_wg, ref_wd = reference(w_gate_up, w_down, tokens)
    checks.rel("EP MoE output", out, ref_outs[rank], OUT_TOL)
    checks.rel(f"gate_up gradient of experts {mine.start}-{mine.stop - 1}", wg.grad, ref_wg[mine], GRAD_TOL)
    checks.rel(f"down gradient of experts {mine.start}-{mine.stop - 1}", wd.grad, ref_wd[mine], GRAD_TOL)

    failed = torch.tensor([len(checks.failures)], device=dev)
    dist.all_reduce(failed)
    torch.cuda.synchronize(dev)
    dist.destroy_process_group()
    if failed.item():
        print(f"ep_torchrun: rank {rank}: {len(checks.failures)} local, {failed.item()} total check(s) failed", flush=True)
        return 1
    if rank == 0:
        print("ep_torchrun: ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
