/*
 * Introspection API of the fake CUDA driver (build/fake/libcuda.so.1), for the CPU tests.
 *
 * The fake stands in for libcuda on machines without a GPU and reproduces the driver
 * behaviour measured on H200s (shared/DESIGN.md):
 *  - FAKE_CUDA_DEVICES (default 2, at most FAKE_MAX_DEVICES; 0 makes cuInit fail with
 *    CUDA_ERROR_NO_DEVICE) sets the number of devices, all H200-like (sm_90, 132 SMs).
 *  - Module images are text, in a file or in memory (NUL-terminated):
 *        //ctxguard-fake-image
 *        .kernel <name> <parameter sizes, comma separated, may be empty>
 *    Parameters are naturally aligned (1/2/4/8 bytes: their size; anything else: 8), but a
 *    128-byte one, a CUtensorMap, sits where H200's driver puts it: 128-aligned counting from
 *    constant-bank offset 0x210, so at 112, 240, ... (not 64-aligned).
 *  - A launch runs in the stream's context, or the current one for the NULL, legacy and
 *    per-thread streams. A CUfunction of another context is CUDA_ERROR_INVALID_HANDLE and
 *    nothing runs; a CUkernel cast to CUfunction runs in any context.
 *  - Green contexts (cuDeviceGetDevResource, cuDevSmResourceSplitByCount,
 *    cuDevResourceGenerateDesc, cuGreenCtxCreate, cuCtxFromGreenCtx, cuGreenCtxDestroy,
 *    cuGreenCtxStreamCreate): a green context's CUcontext and streams have handles of their
 *    own (cuStreamGetCtx names it; cuStreamGetCtx_v2 names the primary context and the
 *    green one), but it shares its device's primary context's modules, memory and events:
 *    a function of either runs in the other, one of a created context in neither.
 *  - Running a kernel reads its arguments: every 8-byte argument inside another device's
 *    memory, and every tensor map whose global address is, is an operand crossing. With
 *    peer access from the launch context to the owner context (for VMM memory: access
 *    granted with cuMemSetAccess) it goes through silently; without, the launch still
 *    succeeds but the context is poisoned: its next synchronization and every later
 *    launch return CUDA_ERROR_ILLEGAL_ADDRESS (cuDevicePrimaryCtxReset clears it).
 *  - Device and managed memory are address ranges only, never backed: never dereference
 *    them. Device d allocates from 0x7f0000000000 + (d+1) * 0x1000000000.
 *  - One process plays both sides of sharing memory: an IPC handle (cuIpcGetMemHandle, of a
 *    cuMemAlloc allocation) is opened here as if by another process, and a pool made with a
 *    handle type stands for the pool imported from it (cuMemPoolExportPointer,
 *    cuMemPoolImportPointer). The opened or imported memory is the exporting allocation's
 *    device's, mapped at addresses of its own, whole 2 MiB granules, first fit: closing the
 *    last open (cuIpcCloseMemHandle; opens in one context are counted) or freeing the
 *    import hands its addresses to the next mapping. The context that opened an IPC handle
 *    reaches its memory (CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, the one flag accepted).
 *    A VMM handle created with requestedHandleTypes CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
 *    exports (cuMemExportToShareableHandle) to a number standing for a file descriptor, no
 *    file opened; cuMemImportFromShareableHandle makes it a new handle on the exporting
 *    handle's device, which cuMemGetAllocationPropertiesFromHandle names.
 *  - External memory (cuImportExternalMemory; CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD only, the
 *    descriptor a number standing for one) belongs to the importing context: a buffer mapped
 *    onto it (cuExternalMemoryGetMappedBuffer) is that context's device's memory, mapped as
 *    IPC mappings are (so a freed buffer's addresses come back), until cuMemFree or the
 *    context's end.
 *  - A graph allocation node (cuGraphAddMemAllocNode, or cuGraphAddNode of type MEM_ALLOC)
 *    gets its address when made, whole granules, first fit in a range of their own, on its
 *    pool's device; its memory exists from a launch reaching the node until a free node
 *    (cuGraphAddMemFreeNode, MEM_FREE), cuMemFree[Async] or an AUTO_FREE_ON_LAUNCH relaunch
 *    frees it.  The address goes to another node once the graph, its instantiations and the
 *    memory are all gone.
 *  - The deprecated cuLaunch / cuLaunchGrid* take the block shape and parameters stored by
 *    cuFuncSetBlockShape / cuParamSet* (until then: one thread, parameters all zero).
 *    cuParamSet* write a 4096-byte parameter space, before or after cuParamSetSize, which
 *    says how many of its bytes a launch passes.
 *  - Tensor maps are opaque 128 bytes, unless FAKE_CUDA_TMAP_ADDRESS_WORD=k (0..15) puts the
 *    global address, as it is, in 8-byte word k (checked at each encode).
 *  - Destroyed or unloaded handles are handed out again, last freed first, by the next
 *    create or load of the same kind.
 *  - Boolean pointer attributes (IS_MANAGED, MAPPED, ...) are written as unsigned int.
 *  - cuFunc* queries reject a CUkernel cast to CUfunction with CUDA_ERROR_INVALID_HANDLE
 *    (an assumption: only launches are documented to accept one).
 *  - cuKernelSetAttribute sets a kernel's attribute for one device: a CUkernel launched in a
 *    context of another device keeps that device's own values (the default until set).
 *  - A launch leaves work pending on its stream until the stream (or its context) is
 *    synchronized: cuStreamQuery says CUDA_ERROR_NOT_READY meanwhile.  Events are recorded
 *    on a stream of their own context and waited on by a stream of any context.
 *  - cuModuleLoadData of a fatbin loads the bundled grouped_mm kernels (fatbin.c).
 *  - FAKE_CUDA_PCI_DELAY_MS=n: cuDeviceGetPCIBusId answers n ms late (before taking the
 *    lock), so that a test can fork while another thread waits for it.
 *  - FAKE_CUDA_UNEXPORTED=NAME (cuGetErrorString, cuGetErrorName or cuModuleLoadData):
 *    cuGetProcAddress answers NAME with a function the fake does not export, as a driver may
 *    hand out an internal one.
 * All functions below are thread-safe.
 */
#ifndef CTXGUARD_FAKE_API_H
#define CTXGUARD_FAKE_API_H

#include <cuda.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FAKE_MAX_DEVICES 8
#define FAKE_ARGS_COPY 1024

struct fake_stats {
	unsigned long long launches;	   /* kernels that ran (graph nodes included) */
	unsigned long long invalid_handle; /* launches refused with CUDA_ERROR_INVALID_HANDLE */
	unsigned long long
		silent_cross; /* operands reached on another device through peer access */
	unsigned long long sticky_errors;		  /* launches that poisoned their context */
	unsigned long long launches_on[FAKE_MAX_DEVICES]; /* kernels that ran, per device */
};

struct fake_launch_info {
	CUcontext ctx; /* context the kernel ran in */
	CUdevice device;
	char kernel[512];   /* kernel name, truncated */
	unsigned crossings; /* operands of this launch that live on another device */
	size_t argbytes;    /* size of the packed argument buffer */
	unsigned char args[FAKE_ARGS_COPY]; /* its first FAKE_ARGS_COPY bytes */
};

/* Counters since load or the last fake_reset. */
void fake_get_stats(struct fake_stats *out);

/* The most recent kernel that ran, process-wide; returns 0 (and leaves *out) if none. */
int fake_last_launch(struct fake_launch_info *out);

/* Zeroes the counters, forgets the last launch and drops pending injected failures.
 * Driver objects (contexts, modules, memory, sticky errors) are left as they are. */
void fake_reset(void);

/* The next call of `api` (base name such as "cuLaunchKernel": every variant, _v2, _ptsz...,
 * counts) returns `rc` without doing anything. Calls queue up; at most 32 pending. */
void fake_fail_next(const char *api, CUresult rc);

/* After the next call of `api` (any variant) has done its work, and before
 * it returns to its caller, fn(arg) runs on the calling thread: a
 * deterministic stand-in for another thread acting in that window.  One
 * hook at a time; fake_reset drops it. */
void fake_after_next(const char *api, void (*fn)(void *), void *arg);

/* Global address recorded for a tensor map made by cuTensorMapEncode* or
 * cuTensorMapReplaceAddress; returns 0 for bytes the fake never produced. */
int fake_tensor_map_address(const CUtensorMap *map, CUdeviceptr *addr);

/* One driver call that orders work (cuEventCreate, cuEventRecord,
 * cuEventSynchronize, cuStreamWaitEvent, cuStreamCreate,
 * cuStreamSynchronize, a kernel that ran: "launch", then "programmatic"
 * where cuLaunchKernelEx let it overlap the kernel before it and "cluster"
 * where it ran in clusters, kernel then saying "clusters of X x Y x Z, grid
 * X x Y x Z"): ctx is the
 * event's (create, record, event synchronize) or the stream's (wait, stream
 * create, stream synchronize, launch) context;
 * stream the stream it was made on; object the event or created stream;
 * kernel the launched kernel's name. */
struct fake_call {
	char api[32];
	CUcontext ctx;
	const void *stream;
	const void *object;
	char kernel[128];
};

/* Starts a fresh trace; fake_trace copies up to max calls since then (the
 * first 4096 are kept). */
void fake_trace_start(void);
size_t fake_trace(struct fake_call *out, size_t max);

/* Makes cuStreamIsCapturing report s as capturing (on) or not. */
void fake_stream_set_capturing(CUstream s, int on);
/* CUPTI's view of the launch entry points (cuLaunchKernel[Ex], the
 * cooperative forms, their _ptsz variants, the multi-device form, the
 * deprecated cuLaunch/cuLaunchGrid[Async], cuGraphLaunch[_ptsz]): t is called at entry (site 0, CUPTI_API_ENTER; rc
 * NULL) and at exit (site 1, with the result) with the CUPTI driver cbid,
 * the API name and the cu*_params struct of generated_cuda_meta.h.  The
 * fake libcupti (build/fake/cupti/libcupti.so) installs itself here; NULL
 * removes it. */
typedef void (*fake_api_tracer)(int site, unsigned cbid, const char *name, const void *params,
				CUcontext ctx, CUresult *rc);
void fake_api_tracer_set(fake_api_tracer t);

/* The fake's own newest variant of entry point `base` (per_thread: the
 * _ptsz one), as cuGetProcAddress would return it, but by a route no shim
 * hooks: tests reach the driver past the hooks with it. */
void *fake_entry_point(const char *base, int per_thread);

#ifdef __cplusplus
}
#endif

#endif
