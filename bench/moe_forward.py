#!/usr/bin/env python3
"""Forward time of the two-GPU MoE model of GPU case 13, for ctxguard's
overhead budget (bench/run_overhead.py runs it with and without the shim).

The model is examples/moe_device_map.py's: a random-weight bf16 Qwen3-MoE
(8 layers, 64 experts, top-8) split over cuda:0 and cuda:1 by accelerate's
device_map, experts on grouped_mm.  Forward only (no_grad) on 4 x 256
random tokens; each forward is timed with CUDA events on cuda:0, where
accelerate returns the logits -- their copy from cuda:1 waits for cuda:1's
work, so the end event closes the whole forward.

usage: moe_forward.py [ITERS]     (default 30 timed forwards after 10 warm-up)
       moe_forward.py serve
Prints one line
  moe_forward: median M ms/forward (min A, max B; ITERS forwards after W warm-up)
and exits 0; 77 when fewer than two CUDA devices are visible or torch,
transformers or accelerate cannot be imported.  serve: builds and warms up
once, prints "ready", then for each line N read from stdin runs N forwards
and prints their median in ms, until end of input (bench/run_overhead.py
alternates a plain and a preloaded copy this way).
"""
import os
import statistics
import sys

try:
    import accelerate  # noqa: F401
    import torch
    import transformers  # noqa: F401
except ImportError as e:
    print(f"moe_forward: {e}")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
from moe_device_map import BATCH, SEQ, build_model, make_config  # noqa: E402

WARMUP = 10


def timed(model, ids, iters):
    """Milliseconds of each of iters forwards, sorted."""
    events = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        model(input_ids=ids)
        end.record()
        events.append((start, end))
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    return sorted(s.elapsed_time(e) for s, e in events)


def main():
    serve = sys.argv[1:] == ["serve"]
    iters = int(sys.argv[1]) if len(sys.argv) > 1 and not serve else 30
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        print(f"moe_forward: needs 2 CUDA devices, found {torch.cuda.device_count()}")
        return 77
    torch.cuda.set_device(0)
    cfg = make_config()
    model = build_model(cfg).eval()
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, cfg.vocab_size, (BATCH, SEQ), generator=gen).to("cuda:0")

    with torch.no_grad():
        for _ in range(WARMUP):
            logits = model(input_ids=ids).logits
        if logits.device != torch.device("cuda:0"):
            raise RuntimeError(f"logits came back on {logits.device}; the events on cuda:0 would not cover cuda:1")
        if serve:
            print("ready", flush=True)
            for line in sys.stdin:
                print(f"{statistics.median(timed(model, ids, int(line))):.4f}", flush=True)
            return 0
        ms = timed(model, ids, iters)
    print(f"moe_forward: median {statistics.median(ms):.4f} ms/forward (min {ms[0]:.4f}, max {ms[-1]:.4f}; "
          f"{iters} forwards after {WARMUP} warm-up)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
