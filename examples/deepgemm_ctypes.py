"""DeepGEMM's Python-API route to the driver, in ctypes, over the GPU suite's
exact-ABI fixture (kernels/fixtures/deepgemm_sm90.cu) -- no DeepGEMM build
needed.

m_grouped_bf16_gemm_nt_contiguous(a, b, d, m_indices) behaves like
deep_gemm's function of that name on torch tensors: libcuda through dlopen +
dlsym (ctypes.CDLL), the cubin loaded with cuLibraryLoadFromFile and its
kernel turned into a CUfunction on the first call, in whatever context is
current then, and cached process-wide with no device in the key; tensor maps
encoded on every call from data_ptr() with DeepGEMM's dims, strides, boxes
and 128-byte swizzle; cuLaunchKernelEx on the current device's current stream
with the cluster-dimension (2-CTA multicast) and programmatic-serialization
attributes.  A driver error raises RuntimeError formatted like DeepGEMM's
DG_CUDA_DRIVER_CHECK.

Used by examples/deepgemm_torch.py (the two-GPU job) and
bench/bench_redirect.py.
"""
import ctypes
import os

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CUBIN = os.path.join(ROOT, "build", "gpu", "deepgemm_sm90.cubin")

# The fixture's bf16 m-grouped contiguous specialisations (G 4, N 256, K 512
# and G 128, N 1536, K 2048): BLOCK_M 128, BLOCK_N 128, BLOCK_K 64, 128B swizzles, 4 stages,
# 132 SMs, 128 + 256 threads, 2-CTA multicast, as DeepGEMM's host code makes them.
# SHAPE_N and SHAPE_K are compiled in: one kernel per (G, N, K).
KERNELS = {
    (g, n, k): "_ZN9deep_gemm19sm90_bf16_gemm_implILN4cute4UMMA5MajorE0ELS3_0ELj0ELj%dELj%dELj%d"
               "ELj128ELj128ELj64ELj128ELj128ELj128ELj4ELj128ELj256ELj2ELb0ELj132ELNS_8GemmTypeE1"
               "ELb0EN7cutlass10bfloat16_tEEEvPijjj14CUtensorMap_stS8_S8_" % (n, k, g)
    for g, n, k in ((4, 256, 512), (128, 1536, 2048))
}
BLOCK_M, BLOCK_N, NUM_SMS, THREADS, MULTICAST, SWIZZLE, STAGES = 128, 128, 132, 384, 2, 128, 4
# DeepGEMM's pipeline size: the D tile, barriers, STAGES of A and B
SMEM = BLOCK_M * BLOCK_N * 2 + 256 + STAGES * (BLOCK_M * SWIZZLE + BLOCK_N * SWIZZLE)
MK_ALIGNMENT = 128  # rows of each group padded to this (DeepGEMM's sm90 alignment)

CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4
CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6
CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9
CU_TENSOR_MAP_SWIZZLE_128B = 3
CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3


class _AttrValue(ctypes.Union):
    _fields_ = [("pad", ctypes.c_char * 64), ("clusterDim", ctypes.c_uint * 3),
                ("programmaticStreamSerializationAllowed", ctypes.c_int)]


class _LaunchAttr(ctypes.Structure):   # CUlaunchAttribute: 72 bytes, value at 8
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", _AttrValue)]


class _LaunchConfig(ctypes.Structure):  # CUlaunchConfig: 56 bytes
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(_LaunchAttr)), ("numAttrs", ctypes.c_uint)]


class _TensorMap:
    """A CUtensorMap (128 bytes, 64-byte aligned) inside a ctypes buffer."""

    def __init__(self):
        self._buf = (ctypes.c_uint8 * 256)()
        base = ctypes.addressof(self._buf)
        self.address = base + (-base % 128)


_driver = None
_functions = {}   # kernel name -> CUfunction: DeepGEMM's cache, no device in the key


def _cuda():
    global _driver
    if _driver is None:
        _driver = ctypes.CDLL("libcuda.so.1")
        _driver.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        _driver.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    return _driver


def check(result, call):
    if result != 0:
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        _cuda().cuGetErrorName(result, ctypes.byref(name))
        _cuda().cuGetErrorString(result, ctypes.byref(text))
        raise RuntimeError("CUDA driver error (%s): %d (%s, %s)" % (
            call, result, (name.value or b"?").decode(), (text.value or b"?").decode()))


def _function(name, cubin):
    if name not in _functions:
        cu, lib, kernel, func = _cuda(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        check(cu.cuLibraryLoadFromFile(ctypes.byref(lib), cubin.encode(), None, None, 0, None, None, 0),
              "cuLibraryLoadFromFile")
        check(cu.cuLibraryGetKernel(ctypes.byref(kernel), lib, name.encode()), "cuLibraryGetKernel")
        check(cu.cuKernelGetFunction(ctypes.byref(func), kernel), "cuKernelGetFunction")
        check(cu.cuFuncSetAttribute(func, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, SMEM),
              "cuFuncSetAttribute")
        _functions[name] = func
    return _functions[name]


def _encode(t, inner, outer, box_inner, box_outer):
    """DeepGEMM's make_tma_2d_desc for a bf16 tensor whose rows are `inner` long."""
    m = _TensorMap()
    dims = (ctypes.c_uint64 * 2)(inner, outer)
    strides = (ctypes.c_uint64 * 1)(inner * t.element_size())
    box = (ctypes.c_uint32 * 2)(box_inner, box_outer)
    elem_strides = (ctypes.c_uint32 * 2)(1, 1)
    check(_cuda().cuTensorMapEncodeTiled(
        ctypes.c_void_p(m.address), CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, ctypes.c_void_p(t.data_ptr()),
        dims, strides, box, elem_strides, 0, CU_TENSOR_MAP_SWIZZLE_128B,
        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, 0), "cuTensorMapEncodeTiled")
    return m


def m_grouped_bf16_gemm_nt_contiguous(a, b, d, m_indices, cubin=CUBIN):
    """d[m] = a[m] @ b[m_indices[m]].T for rows with m_indices >= 0; a [M, K],
    b [G, N, K], d [M, N] bf16, m_indices int32 [M], all contiguous on one
    device; groups padded to MK_ALIGNMENT rows.  Launched on the current
    device's current stream, whatever device the tensors are on -- as
    DeepGEMM does."""
    (m, k), (g, n, k2) = a.shape, b.shape
    assert k == k2 and d.shape == (m, n) and m_indices.shape == (m,) and (g, n, k) in KERNELS
    assert a.dtype == b.dtype == d.dtype == torch.bfloat16 and m_indices.dtype == torch.int32
    assert all(t.is_contiguous() for t in (a, b, d, m_indices))
    func = _function(KERNELS[(g, n, k)], cubin)
    box_k = SWIZZLE // a.element_size()
    maps = (_encode(a, k, m, box_k, BLOCK_M), _encode(b, k, n * g, box_k, BLOCK_N),
            _encode(d, n, m, SWIZZLE // 2, BLOCK_M))
    layout = ctypes.c_uint64(m_indices.data_ptr())
    shape = [ctypes.c_uint32(v) for v in (m, n, k)]
    args = (ctypes.c_void_p * 7)(ctypes.addressof(layout), *[ctypes.addressof(s) for s in shape],
                                 *[mp.address for mp in maps])
    attrs = (_LaunchAttr * 2)()
    attrs[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attrs[0].value.clusterDim[:] = [MULTICAST, 1, 1]
    attrs[1].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    attrs[1].value.programmaticStreamSerializationAllowed = 1
    cfg = _LaunchConfig(NUM_SMS, 1, 1, THREADS, 1, 1, SMEM,
                        ctypes.c_void_p(torch.cuda.current_stream().cuda_stream), attrs, 2)
    check(_cuda().cuLaunchKernelEx(ctypes.byref(cfg), func, args, None), "cuLaunchKernelEx")


def contiguous_layout(counts, device, alignment=MK_ALIGNMENT):
    """m_indices for rows grouped by expert, each group padded to `alignment`
    rows with -1."""
    idx = []
    for g, c in enumerate(counts):
        idx += [g] * c + [-1] * (-c % alignment)
    return torch.tensor(idx, dtype=torch.int32, device=device)


def reference(a, b, m_indices):
    """float64 CPU reference of m_grouped_bf16_gemm_nt_contiguous."""
    a, b, idx = a.double().cpu(), b.double().cpu(), m_indices.cpu()
    d = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float64)
    for g in range(b.shape[0]):
        rows = (idx == g).nonzero().flatten()
        if len(rows):
            d[rows] = a[rows] @ b[g].T
    return d, idx >= 0


def rel_error(d, ref, valid):
    d = d.double().cpu()[valid]
    ref = ref[valid]
    return ((d - ref).norm() / ref.norm()).item()
