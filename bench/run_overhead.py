#!/usr/bin/env python3
"""What ctxguard adds to launch-bound work, measured side by side.

For each benchmark two copies run at once, one plain and one with the shim
as deployed (LD_PRELOAD=libctxguard.so, CTXGUARD_QUIET=1, the built-in
policy: CTXGUARD_POLICY=none so no /etc file skews it; scope experts,
operands on).  Both are pinned to the same CPUs (a process that lands on
the GPU's far socket launches several hundred ns slower, which would
otherwise decide the ratio), set up and warm up, then take turns: each
round asks one copy for a batch, then the other (the order swaps every
round), so a machine that drifts -- other tenants, clocks -- weighs on
both alike.

One process is luckier than another for its whole life (on a lent H200
host the same launch loop runs anywhere from 3.5 to 4.2 us per launch from
one process to the next), so a single pair would measure that luck, not the
shim: the rounds are spread over PAIRS fresh pairs of copies, and every
figure pools them.  A row gives the median batch of each side, their ratio,
the median of the per-round ratios, and the lowest and highest pair (the
median of one pair's rounds), against the target:

  driver   cuLaunchKernel, empty kernel (not an expert)        <= 1.01
  runtime  cudaLaunchKernel (static cudart), same kernel       <= 1.01
  expert   cuLaunchKernelEx, DeepGEMM-shaped kernel, every
           pointer and TMA descriptor checked                  <= 1.03
  moe      forward of the two-GPU MoE of GPU case 13           <= 1.005
  backstop the driver row with ctxguard on both sides, the CUPTI
           backstop on the "shim" side (CUPTI's own callback cost;
           skipped when the backstop cannot start)                <= 1.15

The in-process rows measure the same launches without the luck of a
process: one copy under ctxguard launches each batch twice, past ctxguard
(the driver's own entry point, read from libcuda's symbol table) and
through it, in chunks of 1000 launches taking turns (launch_overhead
paired), so both sides share the process and the machine's drift; PAIRS
copies of ROUNDS batches each, the same columns:

  in-driver   the driver row's launch                          <= 1.01
  in-runtime  the runtime row's cudaKernel_t, launched as the
              CUkernel it is (cuLaunchKernel: libcudart 13.0's
              one driver call per cudaLaunchKernel)            <= 1.01
  in-expert   the expert row's launch                          <= 1.03

It first prints the model of the CPUs the copies are pinned to, the GPUs
and the driver: the time ctxguard adds per launch differs from host to host.

usage: bench/run_overhead.py [BUILD_DIR]        (make bench-overhead)
env: PAIRS of fresh copies (12; the moe row, whose copies take ~15 s to
     set up, uses at most MOE_PAIRS, 4), ROUNDS per pair (25), LAUNCHES
     per batch (10000), FORWARDS per batch (4), PYTHON (this interpreter),
     CPUS (comma-separated CPU numbers for both copies; default the first
     two this process may use), ROWS (comma-separated row names; default
     all).  A row passes when the median of all per-round ratios meets its
     target.  Exits 1 when a copy fails or a row misses its target; the moe
     row is skipped without two GPUs or transformers and accelerate (the
     copy exits 77); CTXGUARD_CUPTI is passed to the backstop row's copies.
"""
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpus():
    chosen = os.environ.get("CPUS")
    if chosen:
        return {int(c) for c in chosen.split(",")}
    return set(sorted(os.sched_getaffinity(0))[:2])


def machine(on):
    """The CPU the copies run on and the GPUs: launch cost differs from one host's CPU to another's."""
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            blocks = f.read().split("\n\n")
        first = min(on)
        for b in blocks:
            fields = {k.strip(): v for k, v in (l.split(":", 1) for l in b.splitlines() if ":" in l)}
            if fields.get("processor", "").strip() == str(first) and "model name" in fields:
                cpu = fields["model name"].strip()
    except OSError:
        pass
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip().replace("\n", "; ")
    except (OSError, subprocess.TimeoutExpired):
        gpu = ""
    return f"{cpu}; GPU {gpu or 'unknown (no nvidia-smi)'}"


def copy(argv, extra_env, on):
    """One copy of a benchmark in serve mode, with a clean ctxguard environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXGUARD_") and k != "LD_PRELOAD"}
    env.update(extra_env)
    env["HF_HUB_OFFLINE"] = "1"
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, bufsize=1,
                            preexec_fn=lambda: os.sched_setaffinity(0, on))


def answer(p, name):
    """The copy's next line, or the reason it has none."""
    line = p.stdout.readline()
    if line:
        return line.strip()
    p.wait()
    err = p.stderr.read().strip().splitlines()[-20:]
    if p.returncode == 77:
        raise Skip("; ".join(err) or f"{name}: unavailable here")
    raise RuntimeError(f"{name} copy exited {p.returncode}:\n  " + "\n  ".join(err))


class Skip(Exception):
    pass


def measure(argv, batch, rounds, plain_env, shim_env, on):
    """Rounds of batches from a plain and a shim copy taking turns, or, for an
    in-process row (plain_env None), from the one shim copy's pairs."""
    paired = plain_env is None
    sides = {"shim": copy(argv, shim_env, on)} if paired else \
        {"plain": copy(argv, plain_env, on), "shim": copy(argv, shim_env, on)}
    try:
        for name, p in sides.items():
            first = answer(p, name)
            if first != "ready":
                # a copy that cannot run here says why on stdout, then exits 77
                rest = p.stdout.read()
                p.wait()
                if p.returncode == 77:
                    raise Skip((first + " " + rest).strip())
                raise RuntimeError(f"{name} copy: expected 'ready', got '{first}'")
        got = {"plain": [], "shim": []}
        for r in range(rounds):
            if paired:   # one answer, "PLAIN SHIM"
                sides["shim"].stdin.write(f"{batch}\n")
                sides["shim"].stdin.flush()
                for name, v in zip(("plain", "shim"), answer(sides["shim"], "shim").split()):
                    got[name].append(float(v))
                continue
            order = ("plain", "shim") if r % 2 == 0 else ("shim", "plain")
            for name in order:
                sides[name].stdin.write(f"{batch}\n")
                sides[name].stdin.flush()
                got[name].append(float(answer(sides[name], name)))
        sides["shim"].stdin.close()
        sides["shim"].wait(timeout=60)
        # the backstop says on stderr when it could not start
        off = [l for l in sides["shim"].stderr.read().splitlines() if "backstop off" in l]
        if off:
            raise Skip(off[0])
        return got
    finally:
        for p in sides.values():
            if p.poll() is None:
                p.stdin.close()
                try:
                    p.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    p.kill()


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    lib = os.path.realpath(os.path.join(ROOT, build, "libctxguard.so"))
    bench = os.path.join(ROOT, build, "bench", "launch_overhead")
    if not os.path.exists(lib):
        print(f"run_overhead: {lib} is missing (make)")
        return 1
    if not os.access(bench, os.X_OK):
        print(f"run_overhead: {bench} is missing (make -f bench/bench.mk)")
        return 1
    pairs = int(os.environ.get("PAIRS", "12"))
    moe_pairs = min(pairs, int(os.environ.get("MOE_PAIRS", "4")))
    rounds = int(os.environ.get("ROUNDS", "25"))
    launches = int(os.environ.get("LAUNCHES", "10000"))
    forwards = int(os.environ.get("FORWARDS", "4"))
    python = os.environ.get("PYTHON", sys.executable)
    shim = {"LD_PRELOAD": lib, "CTXGUARD_POLICY": "none", "CTXGUARD_QUIET": "1"}
    backstop = dict(shim, CTXGUARD_BACKSTOP="on")
    if os.environ.get("CTXGUARD_CUPTI"):       # libcupti where ctxguard would not look
        backstop["CTXGUARD_CUPTI"] = os.environ["CTXGUARD_CUPTI"]
    rows = [
        ("driver", "us/launch", 1.01, [bench, "driver", "serve"], launches, pairs, {}, shim),
        ("runtime", "us/launch", 1.01, [bench, "runtime", "serve"], launches, pairs, {}, shim),
        ("expert", "us/launch", 1.03, [bench, "expert", "serve"], launches, pairs, {}, shim),
        ("moe", "ms/forward", 1.005, [python, "bench/moe_forward.py", "serve"], forwards,
         moe_pairs, {}, shim),
        ("backstop", "us/launch", 1.15, [bench, "driver", "serve"], launches, pairs, shim,
         backstop),
    ] + [("in-" + mode, "us/launch", target, [bench, mode, "paired"], launches, pairs, None, shim)
         for mode, target in (("driver", 1.01), ("runtime", 1.01), ("expert", 1.03))]
    wanted = os.environ.get("ROWS")
    if wanted:
        unknown = set(wanted.split(",")) - {r[0] for r in rows}
        if unknown:
            print(f"run_overhead: no row named {', '.join(sorted(unknown))}")
            return 1
        rows = [r for r in rows if r[0] in wanted.split(",")]
    on = cpus()
    print(f"# {machine(on)}", flush=True)
    table, failed = [], False
    for name, unit, target, argv, batch, npairs, plain_env, shim_env in rows:
        print(f"== {name}: {npairs} pairs x {rounds} rounds of {batch} per side, plain and shim "
              f"alternating on CPUs {sorted(on)}: {' '.join(argv)}"
              f"{' (plain: ctxguard; shim: ctxguard + backstop)' if plain_env else ''}"
              f"{' (one copy under ctxguard; plain: past it)' if plain_env is None else ''}",
              flush=True)
        got = {"plain": [], "shim": []}
        per_pair = []
        try:
            for pair in range(npairs):
                one = measure(argv, batch, rounds, plain_env, shim_env, on)
                for i, (p, s) in enumerate(zip(one["plain"], one["shim"])):
                    print(f"  pair {pair + 1:2d} round {i + 1:2d}: plain {p:.4f}  shim {s:.4f}  "
                          f"ratio {s / p:.4f}")
                per_pair.append(statistics.median(s / p for p, s in zip(one["plain"], one["shim"])))
                print(f"  pair {pair + 1:2d}: median ratio {per_pair[-1]:.4f}", flush=True)
                for side in got:
                    got[side] += one[side]
        except Skip as e:
            table.append((name, "-", "-", "-", "-", "-", target, f"skip ({e})"))
            continue
        except RuntimeError as e:
            print(e)
            table.append((name, "-", "-", "-", "-", "-", target, "FAIL (a copy failed)"))
            failed = True
            continue
        plain, shim_med = statistics.median(got["plain"]), statistics.median(got["shim"])
        paired = statistics.median(s / p for p, s in zip(got["plain"], got["shim"]))
        verdict = "pass" if paired <= target else "FAIL"
        failed |= verdict != "pass"
        table.append((name, f"{plain:.4f} {unit}", f"{shim_med:.4f} {unit}", f"{shim_med / plain:.4f}",
                      f"{paired:.4f}", f"{min(per_pair):.3f}-{max(per_pair):.3f}", target, verdict))
    print()
    fmt = "{:<10} | {:<18} | {:<18} | {:<8} | {:<12} | {:<11} | {:<6} | {}"
    print(fmt.format("mode", "plain median", "shim median", "ratio", "round median", "pairs",
                     "target", "result"))
    for row in table:
        print(fmt.format(*row))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
