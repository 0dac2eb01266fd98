"""The build step setuptools runs: `make` builds libctxguard.so (kernels
embedded when nvcc is found; NVCC=... in the environment picks another) and
the ctxguard command, which go into the package as ctxguard/lib/ and
ctxguard/bin/ (the command finds the library at ../lib, as installed).
CTXGUARD_JOBS sets make's -j (default: every CPU).

Neither file depends on Python: the wheel is py3-none, one for every
Python.  With zig (the ziglang package, a build requirement; CTXGUARD_ZIG
names another) both are built against glibc 2.17's ABI and the wheel is
tagged manylinux2014; without it they need the build machine's glibc and the
wheel is tagged linux_<arch>, which says so."""
import os
import platform
import shlex
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools before 70.1, offline (--no-build-isolation): the wheel package's
    from wheel.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))
GLIBC = (2, 17)  # manylinux2014: RHEL/CentOS 7, Rocky 8, Ubuntu 18.04 and later


def find_zig():
    """The zig command line that builds against GLIBC, or None."""
    if os.environ.get("CTXGUARD_ZIG"):
        return os.environ["CTXGUARD_ZIG"]
    try:
        import ziglang  # noqa: F401
    except ImportError:
        return None
    return shlex.quote(sys.executable) + " -m ziglang"


ZIG = find_zig()


def platform_tag():
    arch = platform.machine()
    if ZIG:
        return "manylinux_%d_%d_%s.manylinux2014_%s" % (GLIBC + (arch, arch))
    return "linux_" + arch


class BuildWithMake(build_py):
    def run(self):
        super().run()
        out = os.path.abspath(os.path.join(self.build_lib, "..", "make"))
        jobs = os.environ.get("CTXGUARD_JOBS", str(os.cpu_count() or 1))
        cmd = ["make", "-C", ROOT, "-j" + jobs, "BUILD=" + out, "all"]
        if ZIG:
            cmd += ["GLIBC=%d.%d" % GLIBC, "ZIG=" + ZIG]
        else:
            sys.stderr.write("ctxguard: warning: no zig (pip install ziglang): the library and "
                             "command need this machine's glibc %s or newer; wheel tagged %s\n"
                             % (platform.libc_ver()[1], platform_tag()))
        subprocess.check_call(cmd)
        for src, sub in (("libctxguard.so", "lib"), ("ctxguard", "bin")):
            dest = os.path.join(self.build_lib, "ctxguard", sub)
            os.makedirs(dest, exist_ok=True)
            shutil.copy2(os.path.join(out, src), dest)


class BinaryDistribution(Distribution):
    """The wheel carries machine code: not a pure-Python wheel."""

    def has_ext_modules(self):
        return True


class NativeWheel(bdist_wheel):
    """py3-none-<platform>: the files load no Python."""

    def get_tag(self):
        return "py3", "none", platform_tag()


setup(cmdclass={"build_py": BuildWithMake, "bdist_wheel": NativeWheel}, distclass=BinaryDistribution)
