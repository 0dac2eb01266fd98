"""The result checks the example programs share.

Each check prints one line, "<prog>: <name>: ok|FAIL (<detail>)", and
verdict() prints "<prog>: ok" or the failed names and gives the exit status;
the GPU suite reads both lines.
"""


def rel_err(got, ref):
    """||got - ref|| / ||ref||, in float32 on the CPU."""
    got, ref = got.detach().float().cpu(), ref.detach().float().cpu()
    return ((got - ref).norm() / ref.norm().clamp_min(1e-30)).item()


class Checks:
    def __init__(self, prog):
        self.prog = prog
        self.failures = []

    def flag(self, name, ok, detail):
        print(f"{self.prog}: {name}: {'ok' if ok else 'FAIL'} ({detail})", flush=True)
        if not ok:
            self.failures.append(name)
        return ok

    def rel(self, name, got, ref, tol):
        err = rel_err(got, ref)
        return self.flag(name, err <= tol, f"rel error {err:.2e}, tolerance {tol:.0e}")

    def verdict(self):
        if self.failures:
            print(f"{self.prog}: {len(self.failures)} check(s) failed: {', '.join(self.failures)}")
            return 1
        print(f"{self.prog}: ok")
        return 0
