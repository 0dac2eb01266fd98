"""`python -m ctxguard [options] -- program [args...]`, the `ctxguard` and
`ctxguard-cuda` scripts: all become the C command shipped in the package
(exec, so the options, output and exit codes are the command's own)."""
from ._command import main

if __name__ == "__main__":
    main()
