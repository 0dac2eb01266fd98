"""The files the wheel carries and the command's entry point, without the
package's __init__: the `ctxguard-cuda` script keeps working where the
unrelated "ctxguard" distribution from the public index has replaced
ctxguard/__init__.py and the `ctxguard` script (docs/install.md)."""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def library_path() -> str:
    """Absolute path of the installed libctxguard.so, for LD_PRELOAD in your own launchers."""
    return os.path.join(_HERE, "lib", "libctxguard.so")


def command_path() -> str:
    """Absolute path of the ctxguard command (the C wrapper) inside the package."""
    return os.path.join(_HERE, "bin", "ctxguard")


def main() -> None:
    """Exec the C command: its options, output and exit codes are the command's own."""
    cmd = command_path()
    try:
        os.execv(cmd, [cmd] + sys.argv[1:])
    except OSError as e:
        sys.exit("ctxguard: cannot run %s: %s" % (cmd, e))
