"""The bundled grouped_mm kernels as PyTorch ops (ctxguard::grouped_mm and
ctxguard::grouped_mm_fp8, defined through torch.library, so
torch.compile(fullgraph=True) and CUDA graph capture see one opaque op with
a fake implementation).

  grouped_mm(a, b, offs)            torch._grouped_mm 2D x 3D: a [M, K] bf16,
                                    b [G, K, N] bf16 (or the transpose view of
                                    HF's [G, N, K] weights, read in place),
                                    offs int32 [G] inclusive row ends -> [M, N]
  grouped_mm_fp8(a, a_scale, b, b_scale, offs)
                                    DeepGEMM's block-scaled fp8: a [M, K] e4m3
                                    with a_scale fp32 [M, ceil(K/128)] (any
                                    strides, e.g. DeepGEMM's M-major view),
                                    b [G, N, K] e4m3 with b_scale fp32
                                    [G, ceil(N/128), ceil(K/128)] -> bf16 [M, N]

Rows past offs[-1] are left unwritten, as torch._grouped_mm leaves them.
Each call runs on its tensors' device, on that device's current stream,
under a device guard; inputs on different devices raise ValueError.
bf16 autograd: dA = dOut x B^T through the same kernels; dB, a reduction
over each group's rows that these m-grouped kernels do not compute, through
torch._grouped_mm 2D x 2D (torch's own backward for grouped_mm).
"""
import contextlib
import functools
from typing import Tuple

try:
    import torch
except ImportError as e:  # the ops are the package's one optional part
    raise ImportError("ctxguard's grouped_mm ops need PyTorch: pip install 'ctxguard-cuda[torch]' (%s)" % e) from e

from . import _native

__all__ = ["grouped_mm", "grouped_mm_fp8", "quantize_fp8_rows", "quantize_fp8_blocks"]

FP8 = torch.float8_e4m3fn
BLOCK = 128  # DeepGEMM's scale block: 1 x 128 for A, 128 x 128 for B


def _cdiv(x, y):
    return (x + y - 1) // y


def _require(what, ok, explain):
    """ValueError naming the op, with explain()'s text, unless ok (the text
    is built only then: these checks run on every call)."""
    if not ok:
        raise ValueError("ctxguard.%s: %s" % (what, explain()))


def _one_device(what, named):
    """The single CUDA device of all inputs, else ValueError naming each."""
    device = named[0][1].device
    for _, t in named:
        _require(what, t.device == device,
                 lambda: "inputs on different devices (%s); move them to one device, the one the kernel is to run on"
                 % ", ".join("%s on %s" % (n, t.device) for n, t in named))
    _require(what, device.type == "cuda", lambda: "needs CUDA tensors, got %s" % device)
    return device


def _check_offs(what, offs, g):
    _require(what, offs.dim() == 1 and offs.size(0) == g and offs.dtype == torch.int32,
             lambda: "offs must be int32 [%d] (one inclusive row end per group), got %s %s"
             % (g, offs.dtype, list(offs.shape)))


def _check_bf16(a, b, offs):
    what = "grouped_mm"
    device = _one_device(what, (("a", a), ("b", b), ("offs", offs)))
    _require(what, a.dim() == 2 and b.dim() == 3 and a.size(1) == b.size(1),
             lambda: "expects a [M, K] and b [G, K, N], got a %s and b %s" % (list(a.shape), list(b.shape)))
    _require(what, a.dtype == torch.bfloat16 and b.dtype == torch.bfloat16,
             lambda: "a and b must be bfloat16, got %s and %s" % (a.dtype, b.dtype))
    _check_offs(what, offs, b.size(0))
    return device


def _check_fp8(a, a_scale, b, b_scale, offs):
    what = "grouped_mm_fp8"
    device = _one_device(what, (("a", a), ("a_scale", a_scale), ("b", b), ("b_scale", b_scale),
                                ("offs", offs)))
    _require(what, a.dim() == 2 and b.dim() == 3 and a.size(1) == b.size(2),
             lambda: "expects a [M, K] and b [G, N, K], got a %s and b %s" % (list(a.shape), list(b.shape)))
    _require(what, a.dtype == FP8 and b.dtype == FP8,
             lambda: "a and b must be float8_e4m3fn, got %s and %s" % (a.dtype, b.dtype))
    m, k = a.shape
    g, n, _ = b.shape
    want_sa, want_sb = (m, _cdiv(k, BLOCK)), (g, _cdiv(n, BLOCK), _cdiv(k, BLOCK))
    _require(what, a_scale.dtype == torch.float32 and tuple(a_scale.shape) == want_sa,
             lambda: "a_scale must be float32 %s (per row and 128 channels), got %s %s"
             % (list(want_sa), a_scale.dtype, list(a_scale.shape)))
    _require(what, b_scale.dtype == torch.float32 and tuple(b_scale.shape) == want_sb,
             lambda: "b_scale must be float32 %s (per 128x128 block of b), got %s %s"
             % (list(want_sb), b_scale.dtype, list(b_scale.shape)))
    _check_offs(what, offs, g)
    return device


def _b_operand(b):
    """b [G, K, N] as the kernels take it: HF's [G, N, K] storage read in
    place when b is its transpose view, else [G, K, N] contiguous."""
    bt = b.transpose(-2, -1)
    if bt.is_contiguous():
        return bt, _native.B_NK
    return b.contiguous(), _native.B_KN


_ON_DEVICE = contextlib.nullcontext()


def _launch(what, device, dtype, b_layout, a, b, out, offs, sfa=None, sfb=None, sfa_strides=(0, 0)):
    m, k = a.shape
    g, n = b.size(0), out.size(1)
    index = device.index
    # The stream's raw handle, as inductor's get_raw_stream takes it (no
    # Stream object per call).  The kernels launch in the stream's context,
    # but the default stream's handle is 0 on every device and means the
    # current context's: hence the guard, needed only off the current device.
    stream = torch._C._cuda_getCurrentRawStream(index)
    with _ON_DEVICE if torch.cuda.current_device() == index else torch.cuda.device(index):
        _native.gmm_offs(stream, dtype, b_layout, a.data_ptr(), b.data_ptr(), out.data_ptr(), offs.data_ptr(),
                         0 if sfa is None else sfa.data_ptr(), 0 if sfb is None else sfb.data_ptr(),
                         sfa_strides[0], sfa_strides[1], m, n, k, g, what)


# Defined with torch.library.Library rather than custom_op, whose Python
# around each call took a small call from 36 to 59 us of host time on H200
# (decode steps are host-bound).  The impl serves every device type, as
# custom_op's does: on a CPU tensor it raises the ValueError below.
_LIB = torch.library.Library("ctxguard", "DEF")
_LIB.define("grouped_mm(Tensor a, Tensor b, Tensor offs) -> Tensor")
_LIB.define("grouped_mm_fp8(Tensor a, Tensor a_scale, Tensor b, Tensor b_scale, Tensor offs) -> Tensor")


def _grouped_mm_impl(a, b, offs):
    device = _check_bf16(a, b, offs)
    m, n = a.size(0), b.size(2)
    if a.size(1) == 0:
        return torch.zeros(m, n, dtype=torch.bfloat16, device=device)
    out = torch.empty(m, n, dtype=torch.bfloat16, device=device)
    if m and n:
        bk, layout = _b_operand(b)
        _launch("grouped_mm", device, _native.BF16, layout, a.contiguous(), bk, out, offs.contiguous())
    return out


_LIB.impl("grouped_mm", _grouped_mm_impl, "CompositeExplicitAutograd")
_grouped_mm = torch.ops.ctxguard.grouped_mm.default


@torch.library.register_fake("ctxguard::grouped_mm", lib=_LIB)
def _(a, b, offs):
    _check_bf16(a, b, offs)
    return a.new_empty((a.size(0), b.size(2)), dtype=torch.bfloat16)


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


@functools.lru_cache(maxsize=None)
def _capability(index):
    return torch.cuda.get_device_capability(index)


def _zero_empty(db, offs):
    """An empty group's weight gradient is zero.  On Hopper torch's 2D x 2D
    grouped_mm writes those zeros itself (checked by tests/gpu/test_ops.py);
    elsewhere it may leave the group's output uninitialized (pytorch#172439
    on Blackwell), so the zeros are written here -- a pass over the whole
    gradient, as large as the experts' weights, which Hopper is spared."""
    if db.device.type == "cuda" and _capability(db.device.index) == (9, 0):
        return db
    empty = (torch.diff(offs, prepend=offs.new_zeros(1)) == 0).view(-1, 1, 1)
    return db.masked_fill_(empty, 0)


def _torch_operand(x):
    """Whether x [M, C] is what torch._grouped_mm takes as a 2D operand as it
    is: dense rows, 16-byte aligned and a multiple of 16 bytes apart."""
    c = x.size(1)
    return c % 8 == 0 and x.stride() == (c, 1) and x.storage_offset() % 8 == 0


def _padded(x):
    """x [M, C] in zeros of M and C rounded up to multiples of 8: 16-byte
    rows in either dense layout, which torch.compile may choose for it and
    for its transpose (rows past offs[-1] are in no group)."""
    m, c = x.shape
    dense = x.new_zeros(_cdiv(m, 8) * 8, _cdiv(c, 8) * 8)
    dense[:m, :c] = x
    return dense


def _weight_grad(grad, a, offs, nk):
    """dB of out = a x b per group, by torch._grouped_mm 2D x 2D: [G, N, K]
    when nk (b is the transpose view of [G, N, K] storage), else [G, K, N].
    The kernels here take any K, N and strides, torch's refuse the rest
    ("strides should be multiple of 16 bytes"; "Invalid strides/sizes" for
    the stride-0 gradient of out.sum()): those operands are padded, and the
    padding dropped from the result."""
    k, n = a.size(1), grad.size(1)
    if k and n and not (_torch_operand(a) and _torch_operand(grad)):
        a, grad = _padded(a), _padded(grad)
    if nk:
        db = torch._grouped_mm(grad.transpose(0, 1), a, offs=offs)[:, :n, :k]
    else:
        db = torch._grouped_mm(a.transpose(0, 1), grad, offs=offs)[:, :k, :n]
    return _zero_empty(db, offs)


def _backward(ctx, grad):
    a, b, offs = ctx.saved_tensors
    da = db = None
    if ctx.needs_input_grad[0]:
        da = _bf16(grad, b.transpose(-2, -1), offs)
    if ctx.needs_input_grad[1]:
        # Made in b's own layout, as torch's backward of _grouped_mm does: HF's
        # weights are [G, N, K] storage seen as [G, K, N], and a gradient made
        # [G, K, N] would cost a transposing copy of every expert's weights.
        if b.transpose(-2, -1).is_contiguous():
            db = _weight_grad(grad, a, offs, True).transpose(-2, -1)
        else:
            db = _weight_grad(grad, a, offs, False)
    return da, db, None


torch.library.register_autograd("ctxguard::grouped_mm", _backward, setup_context=_setup_context, lib=_LIB)


def _eager(*tensors):
    """True when a call may bypass the dispatcher: plain CUDA tensors in
    eager mode, and no tracer, dispatch mode or functorch transform that
    must see the op (those and torch.compile's fake tensors take the
    registered op).  At decode sizes the step is host-bound, and the
    dispatcher's Python round trips (a quarter to a half of a small call's
    host time on H200) are then the step's time."""
    return (not torch.compiler.is_compiling() and torch._C._len_torch_dispatch_stack() == 0
            and not torch._C._are_functorch_transforms_active()
            and all(type(t) is torch.Tensor and t.is_cuda for t in tensors))


def _records_grad(*tensors):
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


class _GroupedMM(torch.autograd.Function):
    """The registered op's autograd in eager mode, without its dispatcher
    round trips (the Autograd kernel, then the redispatch to the impl)."""

    @staticmethod
    def forward(ctx, a, b, offs):
        _setup_context(ctx, (a, b, offs), None)
        return _grouped_mm_impl(a, b, offs)

    backward = staticmethod(_backward)


def _bf16(a, b, offs):
    """ctxguard::grouped_mm, through the dispatcher only where _eager says
    it must."""
    if not _eager(a, b, offs):
        return _grouped_mm(a, b, offs)
    return (_GroupedMM.apply if _records_grad(a, b, offs) else _grouped_mm_impl)(a, b, offs)


def _grouped_mm_fp8_impl(a, a_scale, b, b_scale, offs):
    device = _check_fp8(a, a_scale, b, b_scale, offs)
    m, n = a.size(0), b.size(1)
    if a.size(1) == 0:
        return torch.zeros(m, n, dtype=torch.bfloat16, device=device)
    out = torch.empty(m, n, dtype=torch.bfloat16, device=device)
    if m and n:
        if 0 in a_scale.stride():  # a broadcast view: the kernel reads (0, 0) as row-major
            a_scale = a_scale.contiguous()
        _launch("grouped_mm_fp8", device, _native.FP8, _native.B_NK, a.contiguous(), b.contiguous(), out,
                offs.contiguous(), a_scale, b_scale.contiguous(), a_scale.stride())
    return out


_LIB.impl("grouped_mm_fp8", _grouped_mm_fp8_impl, "CompositeExplicitAutograd")
_grouped_mm_fp8 = torch.ops.ctxguard.grouped_mm_fp8.default


@torch.library.register_fake("ctxguard::grouped_mm_fp8", lib=_LIB)
def _(a, a_scale, b, b_scale, offs):
    _check_fp8(a, a_scale, b, b_scale, offs)
    return a.new_empty((a.size(0), b.size(1)), dtype=torch.bfloat16)


def grouped_mm(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor,
               out_dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """torch._grouped_mm(a, b, offs=offs) for a [M, K] bf16, b [G, K, N] bf16
    (or the transpose view of [G, N, K]), offs int32 [G]; the kernels write
    bf16, so out_dtype must be torch.bfloat16."""
    _require("grouped_mm", out_dtype == torch.bfloat16, lambda: "out_dtype %s: the kernels write bfloat16" % out_dtype)
    return _bf16(a, b, offs)


def grouped_mm_fp8(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor,
                   offs: torch.Tensor) -> torch.Tensor:
    """Block-scaled fp8 grouped GEMM with DeepGEMM's operands (see the module
    docstring); bf16 [M, N].  Inference only (no autograd)."""
    direct = _eager(a, a_scale, b, b_scale, offs) and not _records_grad(a, a_scale, b, b_scale, offs)
    return (_grouped_mm_fp8_impl if direct else _grouped_mm_fp8)(a, a_scale, b, b_scale, offs)


def quantize_fp8_rows(x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """x [M, K] -> (e4m3 [M, K], fp32 scales [M, ceil(K/128)]): one scale per
    row and 128 channels, amax / 448, the activation format grouped_mm_fp8 takes."""
    m, k = x.shape
    kb = _cdiv(k, BLOCK)
    xp = torch.nn.functional.pad(x.float(), (0, kb * BLOCK - k)).view(m, kb, BLOCK)
    scale = xp.abs().amax(-1).clamp(min=1e-4) / 448.0
    q = (xp / scale.unsqueeze(-1)).to(FP8).view(m, kb * BLOCK)[:, :k]
    return q.contiguous(), scale


def quantize_fp8_blocks(w: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """w [G, N, K] -> (e4m3 [G, N, K], fp32 scales [G, ceil(N/128), ceil(K/128)]):
    one scale per 128x128 block, amax / 448, the weight format grouped_mm_fp8
    takes (and transformers' fine-grained FP8 `*_scale_inv`)."""
    g, n, k = w.shape
    nb, kb = _cdiv(n, BLOCK), _cdiv(k, BLOCK)
    wp = torch.nn.functional.pad(w.float(), (0, kb * BLOCK - k, 0, nb * BLOCK - n)).view(g, nb, BLOCK, kb, BLOCK)
    scale = wp.abs().amax(dim=(2, 4)).clamp(min=1e-4) / 448.0
    q = (wp / scale[:, :, None, :, None]).to(FP8).view(g, nb * BLOCK, kb * BLOCK)[:, :n, :k]
    return q.contiguous(), scale
