"""`python -m ctxguard [options] -- program [args...]` and the `ctxguard`
script: both become the C command shipped in the package (exec, so the
options, output and exit codes are the command's own)."""
import os
import sys

from . import command_path


def main():
    cmd = command_path()
    try:
        os.execv(cmd, [cmd] + sys.argv[1:])
    except OSError as e:
        sys.exit("ctxguard: cannot run %s: %s" % (cmd, e))


if __name__ == "__main__":
    main()
