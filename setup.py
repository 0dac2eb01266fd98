"""The build step setuptools runs: `make` builds libctxguard.so (kernels
embedded when nvcc is found; NVCC=... in the environment picks another) and
the ctxguard command, which go into the package as ctxguard/lib/ and
ctxguard/bin/ (the command finds the library at ../lib, as installed).
CTXGUARD_JOBS sets make's -j (default: every CPU)."""
import os
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))


class BuildWithMake(build_py):
    def run(self):
        super().run()
        out = os.path.abspath(os.path.join(self.build_lib, "..", "make"))
        jobs = os.environ.get("CTXGUARD_JOBS", str(os.cpu_count() or 1))
        subprocess.check_call(["make", "-C", ROOT, "-j" + jobs, "BUILD=" + out, "all"])
        for src, sub in (("libctxguard.so", "lib"), ("ctxguard", "bin")):
            dest = os.path.join(self.build_lib, "ctxguard", sub)
            os.makedirs(dest, exist_ok=True)
            shutil.copy2(os.path.join(out, src), dest)


class BinaryDistribution(Distribution):
    """The wheel carries machine code: tag it for this platform."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithMake}, distclass=BinaryDistribution)
