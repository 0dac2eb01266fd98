#!/usr/bin/env python3
"""torch_compile_graph -- torch.compile and CUDA graphs on both GPUs, done right.

usage: torch_compile_graph.py compile|graph
  compile  a small pre-norm transformer block (attention through
           scaled_dot_product_attention, GELU MLP) compiled with
           torch.compile (Inductor: generated Triton kernels, cuBLAS) once
           for cuda:0 and once for cuda:1; forward and backward on each,
           checked against the eager block on the same device.
  graph    a whole training step of an MLP (forward, loss, backward, SGD
           step) captured in a torch.cuda.CUDAGraph on each device and
           replayed on fresh data, checked against the same steps run
           eagerly.  Kernel launches made during capture are checked by
           ctxguard like any launch; replays do not pass through it.
Under `ctxguard --mode abort --scope all` both must show 0 crossings.  With
one CUDA device visible, cuda:0 alone.

Prints "torch_compile_graph: ok" and exits 0 when every check passes; exits
1 on a failed check, 77 when no CUDA device is visible.
"""
import copy
import sys

import torch
import torch.nn.functional as F

from checks import Checks

CHECKS = Checks("torch_compile_graph")
check = CHECKS.rel


class Block(torch.nn.Module):
    def __init__(self, dim=256, heads=4):
        super().__init__()
        self.heads = heads
        self.norm1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.norm2 = torch.nn.LayerNorm(dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


def compiled_block(devices):
    torch.manual_seed(0)
    ref = Block()
    x = torch.randn(4, 128, 256)
    for dev in devices:
        eager = copy.deepcopy(ref).to(dev)
        model = copy.deepcopy(ref).to(dev)
        compiled = torch.compile(model)
        xd = x.to(dev)
        with torch.cuda.device(dev):
            out_e = eager(xd)
            out_e.square().mean().backward()
            out_c = compiled(xd)
            out_c.square().mean().backward()
        check(f"compiled forward on {dev}", out_c, out_e, 1e-4)
        for (name, p), pe in zip(model.named_parameters(), eager.parameters()):
            check(f"compiled grad {name} on {dev}", p.grad, pe.grad, 1e-3)


def make_mlp():
    return torch.nn.Sequential(torch.nn.Linear(128, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                               torch.nn.ReLU(), torch.nn.Linear(512, 16))


def graphed_training(devices, steps=5):
    torch.manual_seed(0)
    ref = make_mlp()
    data = [(torch.randn(64, 128), torch.randn(64, 16)) for _ in range(steps)]
    for dev in devices:
        with torch.cuda.device(dev):
            eager = copy.deepcopy(ref).to(dev)
            eager_opt = torch.optim.SGD(eager.parameters(), lr=0.1)
            model = copy.deepcopy(ref).to(dev)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            static_x = torch.zeros(64, 128, device=dev)
            static_y = torch.zeros(64, 16, device=dev)

            def step(m, o, x, y):
                o.zero_grad(set_to_none=True)
                loss = F.mse_loss(m(x), y)
                loss.backward()
                o.step()
                return loss

            # Warm-up on a side stream (cuBLAS workspaces, autograd state), as
            # the CUDA graph documentation asks; lr 0 leaves the weights as
            # the eager copy's.  The lr the capture bakes in is restored first.
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            opt.param_groups[0]["lr"] = 0.0
            with torch.cuda.stream(side):
                for _ in range(3):
                    step(model, opt, static_x, static_y)
            torch.cuda.current_stream().wait_stream(side)
            opt.param_groups[0]["lr"] = 0.1

            graph = torch.cuda.CUDAGraph()
            opt.zero_grad(set_to_none=True)
            # torch.cuda.graph's default capture stream is created once, on
            # the device current at first use: give each device its own.
            with torch.cuda.graph(graph, stream=torch.cuda.Stream(device=dev)):
                static_loss = step(model, opt, static_x, static_y)

            for i, (x, y) in enumerate(data):
                static_x.copy_(x)
                static_y.copy_(y)
                graph.replay()
                eager_loss = step(eager, eager_opt, x.to(dev), y.to(dev))
                check(f"graph replay {i} loss on {dev}", static_loss, eager_loss, 1e-4)
            torch.cuda.synchronize(dev)
        for (name, p), pe in zip(model.named_parameters(), eager.parameters()):
            check(f"graph-trained {name} on {dev}", p, pe, 1e-4)


def main():
    modes = {"compile": compiled_block, "graph": graphed_training}
    if len(sys.argv) != 2 or sys.argv[1] not in modes:
        print(f"usage: {sys.argv[0]} compile|graph", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("torch_compile_graph: needs a CUDA device, found none")
        return 77
    # Full fp32 matmuls (no TF32), so eager and compiled/graphed runs agree closely.
    torch.set_float32_matmul_precision("highest")
    torch.cuda.set_device(0)
    devices = tuple(torch.device("cuda", i) for i in range(min(2, torch.cuda.device_count())))
    print(f"torch_compile_graph: on {', '.join(map(str, devices))}")
    modes[sys.argv[1]](devices)
    for dev in devices:
        torch.cuda.synchronize(dev)

    return CHECKS.verdict()


if __name__ == "__main__":
    sys.exit(main())
