"""ctxguard: stops CUDA kernel launches that cross contexts (devices).

Importing this package loads neither CUDA nor torch: the torch ops
(grouped_mm, grouped_mm_fp8) come from ctxguard.ops on first use, and
ctxguard.transformers.register() adds the transformers experts backend.
"""
from importlib import metadata

from ._command import command_path, library_path

__all__ = ["library_path", "command_path", "grouped_mm", "grouped_mm_fp8", "__version__"]

try:
    __version__ = metadata.version("ctxguard-cuda")
except metadata.PackageNotFoundError:  # imported from a source tree
    __version__ = "unknown"


def __getattr__(name):
    # The ops import torch: only when asked for; then they are plain
    # attributes (torch.compile reads module attributes directly).
    if name in ("grouped_mm", "grouped_mm_fp8"):
        from . import ops

        globals()[name] = getattr(ops, name)
        return globals()[name]
    raise AttributeError("module 'ctxguard' has no attribute %r" % name)
