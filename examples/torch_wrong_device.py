#!/usr/bin/env python3
"""torch_wrong_device -- the silent cross-device launch, in PyTorch.

A custom kernel (y[i] = x[i] * 2 + 1 over n floats, PTX written below) is
loaded from Python the way JIT kernel libraries do it: ctypes on
libcuda.so.1, cuModuleLoadData and cuModuleGetFunction while device 0 is
current, so the CUfunction belongs to device 0's context.  It is then
launched with cuLaunchKernel on device 0's current stream
(torch.cuda.current_stream().cuda_stream).

usage: torch_wrong_device.py same|wrong
  same   tensors on cuda:0: the launch is right, the result is checked.
  wrong  tensors on cuda:1 while the current device stays 0 (what
         device_map does), peer access from device 0 to device 1 on: the
         driver accepts the launch and GPU 0 reads and writes GPU 1's memory,
         unordered with GPU 1's streams.  Without ctxguard it completes and
         says whether the result happens to look right; under
         `ctxguard --mode abort --scope all` it is stopped before the launch;
         under --mode error the launch returns an error whose
         cuGetErrorString carries ctxguard's message.

Progress goes to stdout (flushed per line, so it survives an abort); stderr
carries only driver errors, printed as
  CUDA driver error (CALL): CODE (cuGetErrorName, cuGetErrorString)
exit codes: 0 done (wrong: whatever the result), 1 set-up failure (any driver
call but the launch), 2 wrong result in `same`, 3 driver error from the
launch or the synchronisation after it, 77 not reproducible here (fewer than
two devices, or no peer access for `wrong`).
"""
import ctypes
import sys

import torch

EXIT_SETUP, EXIT_WRONG, EXIT_DRIVER, EXIT_UNAVAILABLE = 1, 2, 3, 77
CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704
N = 1 << 20
THREADS = 256

# y[i] = fma(x[i], 2, 1) for i < n; x * 2 is exact, so this equals x * 2 + 1.
PTX = rb"""
.version 7.0
.target sm_80
.address_size 64

.visible .entry scale_add(
	.param .u64 y,
	.param .u64 x,
	.param .u32 n
)
{
	.reg .pred %p;
	.reg .b32 %r<5>;
	.reg .f32 %f<3>;
	.reg .b64 %rd<6>;

	ld.param.u64 %rd1, [y];
	ld.param.u64 %rd2, [x];
	ld.param.u32 %r1, [n];
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %ntid.x;
	mov.u32 %r4, %tid.x;
	mad.lo.s32 %r2, %r2, %r3, %r4;
	setp.ge.u32 %p, %r2, %r1;
	@%p bra DONE;
	cvta.to.global.u64 %rd1, %rd1;
	cvta.to.global.u64 %rd2, %rd2;
	mul.wide.u32 %rd3, %r2, 4;
	add.s64 %rd4, %rd2, %rd3;
	ld.global.f32 %f1, [%rd4];
	fma.rn.f32 %f2, %f1, 0f40000000, 0f3F800000;
	add.s64 %rd5, %rd1, %rd3;
	st.global.f32 [%rd5], %f2;
DONE:
	ret;
}
"""

# ctypes looks every name up with dlsym on libcuda's handle, as JIT libraries
# do; argtypes keep 64-bit handles from being truncated to int.
P, U32, I32 = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int
PP = ctypes.POINTER(ctypes.c_void_p)
SIGNATURES = {
    "cuInit": [U32],
    "cuGetErrorName": [I32, ctypes.POINTER(ctypes.c_char_p)],
    "cuGetErrorString": [I32, ctypes.POINTER(ctypes.c_char_p)],
    "cuCtxGetCurrent": [PP],
    "cuCtxGetDevice": [ctypes.POINTER(I32)],
    "cuCtxSetCurrent": [P],
    "cuDeviceGet": [ctypes.POINTER(I32), I32],
    "cuDevicePrimaryCtxRetain": [PP, I32],
    "cuCtxEnablePeerAccess": [P, U32],
    "cuModuleLoadData": [PP, ctypes.c_char_p],
    "cuModuleGetFunction": [PP, P, ctypes.c_char_p],
    "cuLaunchKernel": [P, U32, U32, U32, U32, U32, U32, U32, P, PP, PP],
}


class Driver:
    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        for name, args in SIGNATURES.items():
            fn = getattr(self.lib, name)
            fn.argtypes = args
            fn.restype = ctypes.c_int

    def describe(self, rc):
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        if self.lib.cuGetErrorName(rc, ctypes.byref(name)) != 0 or not name.value:
            name.value = b"<unknown>"
        if self.lib.cuGetErrorString(rc, ctypes.byref(text)) != 0 or not text.value:
            text.value = b"<unknown>"
        return name.value.decode(errors="replace"), text.value.decode(errors="replace")

    def call(self, name, *args, exit_code=EXIT_SETUP, allow=()):
        """Runs a driver call; on an error not in `allow`, prints it as
        DeepGEMM's DG_CUDA_DRIVER_CHECK does and exits with exit_code."""
        rc = getattr(self.lib, name)(*args)
        if rc != 0 and rc not in allow:
            err_name, err_text = self.describe(rc)
            print(f"CUDA driver error ({name}): {rc} ({err_name}, {err_text})", file=sys.stderr, flush=True)
            sys.exit(exit_code)
        return rc


def say(msg):
    print(f"torch_wrong_device: {msg}", flush=True)


def current_context(drv):
    ctx, dev = ctypes.c_void_p(), ctypes.c_int(-1)
    drv.call("cuCtxGetCurrent", ctypes.byref(ctx))
    drv.call("cuCtxGetDevice", ctypes.byref(dev))
    return ctx, dev.value


def launch(drv, fn, y, x, what):
    """cuLaunchKernel of scale_add on the current device's current stream."""
    y_arg, x_arg, n_arg = ctypes.c_uint64(y.data_ptr()), ctypes.c_uint64(x.data_ptr()), ctypes.c_uint32(x.numel())
    params = (ctypes.c_void_p * 3)(*(ctypes.addressof(a) for a in (y_arg, x_arg, n_arg)))
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    blocks = (x.numel() + THREADS - 1) // THREADS
    say(f"launching scale_add ({what})")
    drv.call("cuLaunchKernel", fn, blocks, 1, 1, THREADS, 1, 1, 0, stream, params, None,
             exit_code=EXIT_DRIVER)
    say(f"launch returned CUDA_SUCCESS ({what})")


def finish(y, x):
    """Waits for the launch (device 0's stream) and compares with the reference."""
    try:
        torch.cuda.current_stream().synchronize()
        ok = torch.equal(y, x * 2 + 1)
    except RuntimeError as e:       # an asynchronous fault surfaces here
        print(f"CUDA error after the launch: {e}", file=sys.stderr, flush=True)
        sys.exit(EXIT_DRIVER)
    return ok


def main():
    modes = ("same", "wrong")
    if len(sys.argv) != 2 or sys.argv[1] not in modes:
        print(f"usage: {sys.argv[0]} same|wrong", file=sys.stderr)
        return EXIT_SETUP
    mode = sys.argv[1]
    if not torch.cuda.is_available() or (mode == "wrong" and torch.cuda.device_count() < 2):
        say(f"{mode} needs {1 if mode == 'same' else 2} CUDA device(s), found {torch.cuda.device_count()}")
        return EXIT_UNAVAILABLE

    torch.manual_seed(0)
    torch.cuda.set_device(0)
    torch.zeros(1, device="cuda:0")          # torch makes device 0's primary context current
    drv = Driver()
    drv.call("cuInit", 0)
    ctx0, dev = current_context(drv)
    if not ctx0.value or dev != 0:
        say(f"expected device 0's context to be current, got context {ctx0.value} on device {dev}")
        return EXIT_SETUP

    # The JIT library's first use: module and function bound to device 0's context.
    module, fn = ctypes.c_void_p(), ctypes.c_void_p()
    drv.call("cuModuleLoadData", ctypes.byref(module), PTX)
    drv.call("cuModuleGetFunction", ctypes.byref(fn), module, b"scale_add")
    say("scale_add loaded with cuModuleLoadData while device 0 is current")

    if mode == "same":
        x = torch.randn(N, device="cuda:0")
        y = torch.empty_like(x)
        launch(drv, fn, y, x, "device 0 function and stream, tensors on cuda:0")
        ok = finish(y, x)
        say(f"same: result {'correct' if ok else 'WRONG'}")
        return 0 if ok else EXIT_WRONG

    if not (torch.cuda.can_device_access_peer(0, 1) and torch.cuda.can_device_access_peer(1, 0)):
        say("wrong needs peer access between devices 0 and 1")
        return EXIT_UNAVAILABLE
    # Device 0 may reach device 1's memory from now on, as after the first
    # peer copy in a PyTorch job; torch may have enabled it already.
    dev1, ctx1 = ctypes.c_int(), ctypes.c_void_p()
    drv.call("cuDeviceGet", ctypes.byref(dev1), 1)
    drv.call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx1), dev1)
    drv.call("cuCtxEnablePeerAccess", ctx1, 0, allow=(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,))

    x = torch.randn(N, device="cuda:1")
    y = torch.full_like(x, float("nan"))
    torch.cuda.synchronize(1)               # x is ready: any wrong result is not a race
    # Device 0 current, as torch.cuda.set_device(0) left it; made explicit so
    # that the launch context is device 0's whatever torch did for cuda:1.
    drv.call("cuCtxSetCurrent", ctx0)
    _, dev = current_context(drv)
    say(f"current device {torch.cuda.current_device()} (driver context on device {dev}), "
        f"tensors on {x.device}")
    launch(drv, fn, y, x, "device 0 function and stream, tensors on cuda:1")
    ok = finish(y, x)
    say(f"wrong: kernel ran on GPU 0 over cuda:1 memory; result {'looks right' if ok else 'is WRONG'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
