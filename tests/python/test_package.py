#!/usr/bin/env python3
"""CPU checks of the installed Python package (run with the venv's python,
from outside the source tree, with the fake libcuda on LD_LIBRARY_PATH):
import loads neither torch nor libcuda; the command and `python -m
ctxguard` are the C wrapper (its options and exit codes); the kernels'
ctypes path loads libctxguard.so RTLD_LOCAL (no hook enters the global
scope) and resolves its driver table.  Prints one line per check and
"N passed, M failed"; exits 1 on a failure.

usage: test_package.py [KERNELS]   what `--version` must say is inside: "none"
(the default: a wheel built without nvcc, as CI's) or an architecture the
kernels line must name ("sm_90a": the GPU suite's wheel, built with nvcc)."""
import ctypes
import os
import subprocess
import sys

from checklist import check, finish


def mapped(fragment):
    with open("/proc/self/maps") as f:
        return fragment in f.read()


import ctxguard  # noqa: E402

check("import ctxguard loads no torch", "torch" not in sys.modules)
check("import ctxguard loads no libcuda", not mapped("libcuda"))
check("installed outside the source tree", "site-packages" in ctxguard.__file__, ctxguard.__file__)
check("version", ctxguard.__version__ not in ("", "unknown"), ctxguard.__version__)
check("library_path() exists", os.path.isfile(ctxguard.library_path()), ctxguard.library_path())

bindir = os.path.dirname(sys.executable)
for argv, want in (([os.path.join(bindir, "ctxguard"), "--help"], 0),
                   ([sys.executable, "-m", "ctxguard", "--", "true"], 0),
                   ([sys.executable, "-m", "ctxguard", "--", "sh", "-c", "exit 3"], 3),
                   ([os.path.join(bindir, "ctxguard"), "--no-such-option"], 2),
                   ([os.path.join(bindir, "ctxguard-cuda"), "--", "sh", "-c", "exit 4"], 4)):
    p = subprocess.run(argv, capture_output=True, text=True)
    check("%s exits %d" % (" ".join(os.path.basename(a) for a in argv), want), p.returncode == want,
          "exit %d%s" % (p.returncode, ", stderr: " + p.stderr.strip()[:200] if p.returncode != want else ""))
p = subprocess.run([sys.executable, "-m", "ctxguard", "--quiet", "--", "sh", "-c", 'echo "$LD_PRELOAD"'],
                   capture_output=True, text=True)
check("the command preloads the installed library", p.stdout.strip() == ctxguard.library_path(), p.stdout.strip())

p = subprocess.run([os.path.join(bindir, "ctxguard"), "--version"], capture_output=True, text=True)
want = sys.argv[1] if len(sys.argv) > 1 else "none"
line = next((l for l in p.stdout.splitlines() if l.startswith("kernels: ")), "")
if want == "none":
    check("--version says no kernels are inside (built without nvcc)",
          line == "kernels: none (built without nvcc)", p.stdout.strip())
else:
    check("--version names the kernels inside (%s, and the CUDA version)" % want,
          want in line.split() and "(CUDA " in line, p.stdout.strip())

try:
    import torch  # noqa: F401
except ImportError:
    try:
        ctxguard.grouped_mm
        check("without torch, the ops name the [torch] extra", False, "no ImportError")
    except ImportError as e:
        check("without torch, the ops name the [torch] extra", "ctxguard-cuda[torch]" in str(e), str(e))

from ctxguard import _native  # noqa: E402

try:
    _native.lib()
    check("kernels' ctypes path: driver table resolved", True)
except RuntimeError as e:
    check("kernels' ctypes path: driver table resolved", False, str(e))
check("libctxguard.so loaded RTLD_LOCAL: no hook in the global scope",
      not hasattr(ctypes.CDLL(None), "cuLaunchKernel"))

finish()
