"""A torch.profiler trace under the CUPTI backstop (GPU case 42).

usage: profiler_trace.py TRACE_DIR [late|first]
  late   (default) CUDA work first, so ctxguard and its backstop are up,
         then two profile sessions, then more work
  first  the profile begins before any CUDA work
Each session's Chrome trace goes to TRACE_DIR/trace<N>.json; prints its
event and kernel-event counts, then "profiler_trace: ok" when every trace
has kernel events and the results are right; exits 0, or 1.
"""
import json
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile


def work(x):
    y = x @ x
    torch.cuda.synchronize()
    return y


def session(n, x, trace_dir):
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            y = work(x)
    path = os.path.join(trace_dir, f"trace{n}.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = json.load(f).get("traceEvents", [])
    kernels = [e for e in events if e.get("cat") == "kernel"]
    print(f"trace {n}: {path}: {len(events)} events, {len(kernels)} kernel events", flush=True)
    return y, len(kernels)


def main():
    trace_dir, when = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "late"
    ok = True
    if when == "first":
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            x = torch.randn(512, 512, device="cuda:0")
            y = work(x)
        path = os.path.join(trace_dir, "trace0.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            kernels = [e for e in json.load(f).get("traceEvents", []) if e.get("cat") == "kernel"]
        print(f"trace 0: {path}: {len(kernels)} kernel events", flush=True)
        ok &= bool(kernels)
    x = torch.randn(512, 512, device="cuda:0")
    ref = work(x).cpu()
    for n in (1, 2):
        y, kernels = session(n, x, trace_dir)
        ok &= kernels > 0 and torch.allclose(y.cpu(), ref)
    ok &= torch.allclose(work(x).cpu(), ref)     # launches still work after the profiles
    print("profiler_trace: ok" if ok else "profiler_trace: FAIL", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
