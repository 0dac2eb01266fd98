"""The bundled grouped_mm kernels through libctxguard.so's ctypes entry
points (kernels/grouped_mm.h).

The library is loaded RTLD_LOCAL: its driver hooks stay out of the global
symbol scope, so loading it interposes nothing; the kernels reach libcuda
through their own table of driver functions, resolved with dlsym on
libcuda.so.1.  Under `ctxguard --` (the same file preloaded) dlopen returns
the preloaded copy, whose dlsym is the shim's: the kernels' own loads and
launches are then recorded and checked like any program's.
"""
import ctypes
import os
import threading

from ._command import library_path

BF16, FP8 = 0, 1         # enum cg_gmm_dtype
B_NK, B_KN = 0, 1        # enum cg_gmm_b_layout

_lock = threading.Lock()
_lib = None


def lib():
    """The loaded library, its driver table initialised (first call only)."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            path = os.environ.get("CTXGUARD_LIBRARY") or library_path()
            handle = ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_NOW)
            u64, i64 = ctypes.c_uint64, ctypes.c_int64
            handle.ctxguard_gmm_offs.argtypes = [u64, ctypes.c_int, ctypes.c_int, ctypes.c_uint] + [u64] * 6 + [i64] * 6
            handle.ctxguard_gmm_offs.restype = ctypes.c_int
            handle.ctxguard_gmm_last_error.restype = ctypes.c_char_p
            handle.ctxguard_gmm_init_default.restype = ctypes.c_int
            rc = handle.ctxguard_gmm_init_default()
            if rc != 0:
                raise RuntimeError("ctxguard: cannot reach the CUDA driver from %s (CUresult %d): %s"
                                   % (path, rc, handle.ctxguard_gmm_last_error().decode()))
            _lib = handle
        return _lib


def gmm_offs(stream, dtype, b_layout, a, b, d, offs, sfa, sfb, sfa_stride_m, sfa_stride_k, m, n, k, g, what):
    """Enqueues one grouped GEMM; raises RuntimeError naming `what` on failure."""
    h = lib()
    rc = h.ctxguard_gmm_offs(stream, dtype, b_layout, 0, a, b, d, offs, sfa, sfb,
                             sfa_stride_m, sfa_stride_k, m, n, k, g)
    if rc != 0:
        raise RuntimeError("ctxguard.%s: the grouped_mm kernel failed (CUresult %d): %s"
                           % (what, rc, h.ctxguard_gmm_last_error().decode()))
