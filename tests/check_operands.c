/* Crossing kind (b) on the fake driver: operands on another device than the
 * launch context, for every allocation path, every tensor-map encoder and
 * both parameter forms; memory every device may reach is never flagged. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
/* cuParamSet* and cuLaunchGrid* are deprecated, and still launch kernels. */
#define CUDA_ENABLE_DEPRECATED 1
#include <cuda.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../policy/policy.h"
#include "suite.h"
#include "spawn.h"
#include "fake/fake_api.h"

/* Two pointers, then two tensor maps: DeepGEMM's shape of parameter list. */
#define EXPERT "_ZN9deep_gemm19sm90_bf16_gemm_implILj0EEEvPijjj14CUtensorMap_stS2_S2_"
static const char image[] = "//ctxguard-fake-image\n.kernel " EXPERT " 8,8,128,128\n";
enum { SIZE = 4 << 20 };

static CUcontext ctx[2];
static CUstream stream[2];
static CUfunction fn;      /* loaded in device 0's context */

static void setup(void)
{
	setenv("CTXGUARD_MODE", "error", 0);   /* unless the test chose another */
	ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
	for (int d = 1; d >= 0; d--) {
		CUdevice dev;
		ck_assert_int_eq(cuDeviceGet(&dev, d), CUDA_SUCCESS);
		ck_assert_int_eq(cuDevicePrimaryCtxRetain(&ctx[d], dev), CUDA_SUCCESS);
		ck_assert_int_eq(cuCtxSetCurrent(ctx[d]), CUDA_SUCCESS);
		ck_assert_int_eq(cuStreamCreate(&stream[d], 0), CUDA_SUCCESS);
	}
	CUmodule mod;
	ck_assert_int_eq(cuModuleLoadData(&mod, image), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleGetFunction(&fn, mod, EXPERT), CUDA_SUCCESS);
}

static CUtensorMap tmap_over(CUdeviceptr base)
{
	CUtensorMap m;
	cuuint64_t dims[2] = {256, 256}, strides[1] = {512};
	cuuint32_t box[2] = {64, 64}, elem[2] = {1, 1};
	ck_assert_int_eq(cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)base,
						dims, strides, box, elem,
						CU_TENSOR_MAP_INTERLEAVE_NONE,
						CU_TENSOR_MAP_SWIZZLE_NONE,
						CU_TENSOR_MAP_L2_PROMOTION_NONE,
						CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
			 CUDA_SUCCESS);
	return m;
}

/* Launches fn on device 0 with the given operands; form 0: kernelParams,
 * 1: the packed extra buffer, 2: cuLaunchKernelEx. */
static CUresult launch_form(int form, CUdeviceptr p0, CUdeviceptr p1, const CUtensorMap *t0,
			    const CUtensorMap *t1)
{
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	CUtensorMap a = *t0, b = *t1;
	if (form == 1) {
		/* At the driver's offsets: 0, 8, then 112 and 240 for the tensor
		 * maps (as on H200, not 64-byte aligned). */
		static _Alignas(64) unsigned char buf[368];
		size_t off[4], sz;
		for (int i = 0; i < 4; i++)
			ck_assert_int_eq(cuFuncGetParamInfo(fn, i, &off[i], &sz), CUDA_SUCCESS);
		ck_assert_msg(off[2] == 112 && off[3] == 240, "offsets %zu %zu", off[2], off[3]);
		memcpy(buf + off[0], &p0, 8);
		memcpy(buf + off[1], &p1, 8);
		memcpy(buf + off[2], &a, 128);
		memcpy(buf + off[3], &b, 128);
		size_t size = sizeof buf;
		void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE,
				 &size, CU_LAUNCH_PARAM_END};
		return cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, stream[0], NULL, extra);
	}
	void *params[] = {&p0, &p1, &a, &b};
	if (form == 2) {
		CUlaunchConfig cfg = {.gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 32,
				      .blockDimY = 1, .blockDimZ = 1, .hStream = stream[0]};
		return cuLaunchKernelEx(&cfg, fn, params, NULL);
	}
	return cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, stream[0], params, NULL);
}

static CUresult launch(CUdeviceptr p0, CUdeviceptr p1, const CUtensorMap *t0, const CUtensorMap *t1)
{
	return launch_form(0, p0, p1, t0, t1);
}

static void assert_refused(CUresult rc, const char *what)
{
	ck_assert_msg(rc == CUDA_ERROR_INVALID_HANDLE, "%s: launch returned %d", what, rc);
	const char *s = NULL;
	cuGetErrorString(rc, &s);
	ck_assert_msg(s && strstr(s, cg_deepgemm_message) && strstr(s, "on device 1"), "%s: %s",
		      what, s ? s : "(null)");
}

static CUdeviceptr dev_alloc(int d)
{
	CUdeviceptr p;
	ck_assert_int_eq(cuCtxSetCurrent(ctx[d]), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemAlloc(&p, SIZE), CUDA_SUCCESS);
	return p;
}

/* Memory another API exported as a file descriptor (the number stands for
 * one), imported by context c. */
static CUexternalMemory external_imported(CUcontext c)
{
	CUDA_EXTERNAL_MEMORY_HANDLE_DESC desc = {.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
						 .handle = {.fd = 1000}, .size = SIZE};
	CUexternalMemory ext;
	ck_assert_int_eq(cuCtxSetCurrent(c), CUDA_SUCCESS);
	ck_assert_int_eq(cuImportExternalMemory(&ext, &desc), CUDA_SUCCESS);
	return ext;
}

/* All of it mapped as a buffer, c current: c's device's memory. */
static CUdeviceptr buffer_of(CUcontext c, CUexternalMemory ext)
{
	CUDA_EXTERNAL_MEMORY_BUFFER_DESC buf = {.size = SIZE};
	CUdeviceptr p;
	ck_assert_int_eq(cuCtxSetCurrent(c), CUDA_SUCCESS);
	ck_assert_int_eq(cuExternalMemoryGetMappedBuffer(&p, ext, &buf), CUDA_SUCCESS);
	return p;
}

/* A new graph (*g) with an allocation node of device 1's memory, added
 * through its own entry point (how 0) or the generic one (1): its address. */
static CUdeviceptr graph_alloc(int how, CUgraph *g)
{
	CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
				.location = {CU_MEM_LOCATION_TYPE_DEVICE, 1}};
	CUDA_MEM_ALLOC_NODE_PARAMS p = {.poolProps = props, .bytesize = SIZE};
	CUgraphNodeParams any = {.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC,
				 .alloc = {.poolProps = props, .bytesize = SIZE}};
	CUgraphNode node;
	ck_assert_int_eq(cuGraphCreate(g, 0), CUDA_SUCCESS);
	if (how)
		ck_assert_int_eq(cuGraphAddNode(&node, *g, NULL, NULL, 0, &any), CUDA_SUCCESS);
	else
		ck_assert_int_eq(cuGraphAddMemAllocNode(&node, *g, NULL, 0, &p), CUDA_SUCCESS);
	return how ? any.alloc.dptr : p.dptr;
}

/* g instantiated and launched on device 1's stream: its allocations made. */
static void graph_launched(CUgraph g)
{
	CUgraphExec exec;
	ck_assert_int_eq(cuGraphInstantiate(&exec, g, 0), CUDA_SUCCESS);
	ck_assert_int_eq(cuGraphLaunch(exec, stream[1]), CUDA_SUCCESS);
}

/* A free node of p in g, the same two ways. */
static void graph_free(int how, CUgraph g, CUdeviceptr p)
{
	CUgraphNodeParams any = {.type = CU_GRAPH_NODE_TYPE_MEM_FREE, .free = {p}};
	CUgraphNode node;
	if (how)
		ck_assert_int_eq(cuGraphAddNode(&node, g, NULL, NULL, 0, &any), CUDA_SUCCESS);
	else
		ck_assert_int_eq(cuGraphAddMemFreeNode(&node, g, NULL, 0, p), CUDA_SUCCESS);
}

/* Every way of getting device memory, on device 1. */
static CUdeviceptr alloc_by(int how, size_t *size_out)
{
	CUdeviceptr p = 0;
	size_t pitch;
	*size_out = SIZE;
	ck_assert_int_eq(cuCtxSetCurrent(ctx[1]), CUDA_SUCCESS);
	switch (how) {
	case 0:
		ck_assert_int_eq(cuMemAlloc(&p, SIZE), CUDA_SUCCESS);
		break;
	case 1:
		ck_assert_int_eq(cuMemAllocPitch(&p, &pitch, 4096, 1024, 4), CUDA_SUCCESS);
		*size_out = pitch * 1024;
		break;
	case 2:
		ck_assert_int_eq(cuMemAllocAsync(&p, SIZE, stream[1]), CUDA_SUCCESS);
		break;
	case 3: {
		/* A pool on device 1, used from device 0's stream. */
		CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
					.location = {CU_MEM_LOCATION_TYPE_DEVICE, 1}};
		CUmemoryPool pool;
		ck_assert_int_eq(cuMemPoolCreate(&pool, &props), CUDA_SUCCESS);
		ck_assert_int_eq(cuMemAllocFromPoolAsync(&p, SIZE, pool, stream[0]), CUDA_SUCCESS);
		break;
	}
	case 5:
		p = buffer_of(ctx[1], external_imported(ctx[1]));
		break;
	case 6: {
		CUgraph g;
		p = graph_alloc(0, &g);
		graph_launched(g);
		break;
	}
	default: {
		/* Expandable segments: reserve, create on device 1, map. */
		CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
					    .location = {CU_MEM_LOCATION_TYPE_DEVICE, 1}};
		CUmemGenericAllocationHandle h;
		ck_assert_int_eq(cuMemAddressReserve(&p, 4 * (size_t)SIZE, 0, 0, 0), CUDA_SUCCESS);
		ck_assert_int_eq(cuMemCreate(&h, SIZE, &prop, 0), CUDA_SUCCESS);
		p += SIZE;    /* map in the middle of the reservation */
		ck_assert_int_eq(cuMemMap(p, SIZE, 0, h, 0), CUDA_SUCCESS);
		CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, 1},
				       CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
		ck_assert_int_eq(cuMemSetAccess(p, SIZE, &acc, 1), CUDA_SUCCESS);
		break;
	}
	}
	return p;
}

static void free_by(int how, CUdeviceptr p, size_t size)
{
	switch (how) {
	case 2:
	case 3:
	case 6:
		ck_assert_int_eq(cuMemFreeAsync(p, stream[1]), CUDA_SUCCESS);
		break;
	case 4:
		ck_assert_int_eq(cuMemUnmap(p, size), CUDA_SUCCESS);
		break;
	default:
		ck_assert_int_eq(cuMemFree(p), CUDA_SUCCESS);
	}
}

static const char *const alloc_names[] = {"cuMemAlloc", "cuMemAllocPitch", "cuMemAllocAsync",
					  "cuMemAllocFromPoolAsync", "cuMemCreate+cuMemMap",
					  "cuExternalMemoryGetMappedBuffer", "cuGraphAddMemAllocNode"};

START_TEST(every_allocation_path)
{
	setup();
	CUdeviceptr own = dev_alloc(0);
	CUtensorMap t = tmap_over(own);
	size_t size;
	CUdeviceptr p = alloc_by(_i, &size);
	/* A view in the middle of the allocation, as a tensor slice would be. */
	assert_refused(launch(own, p + size / 2 + 6, &t, &t), alloc_names[_i]);
	assert_refused(launch(p, own, &t, &t), alloc_names[_i]);
	ck_assert_int_eq(launch(own, own, &t, &t), CUDA_SUCCESS);
	free_by(_i, p, size);
	ck_assert_msg(launch(own, p, &t, &t) == CUDA_SUCCESS, "%s: freed memory still mapped",
		      alloc_names[_i]);
}
END_TEST

/* A context's end frees its memory, no free called: the verdict on an
 * address follows the memory, refused while it lives, let through once
 * the driver took it.  The ends (_i / 4): cuCtxDestroy of a context of
 * its own, device 1's primary reset, its last release, and those two
 * through the CUDA 7.0 variants that cuGetProcAddress hands a caller
 * asking for that version (PyTorch does); the allocation paths (_i % 4):
 * every_allocation_path's first four (VMM memory is no context's;
 * external and graph memory have tests of their own). */
static const char *const ends[] = {"cuCtxDestroy", "cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxRelease",
				   "cuDevicePrimaryCtxReset for CUDA 7.0",
				   "cuDevicePrimaryCtxRelease for CUDA 7.0"};

START_TEST(context_end_takes_its_allocations)
{
	int how = _i % 4, end = _i / 4, ordinal;
	CUdevice d1;
	setup();
	ck_assert_int_eq(cuDeviceGet(&d1, 1), CUDA_SUCCESS);
	if (end == 0) {
		ck_assert_int_eq(cuCtxCreate(&ctx[1], NULL, 0, d1), CUDA_SUCCESS);
		ck_assert_int_eq(cuStreamCreate(&stream[1], 0), CUDA_SUCCESS);
	}
	CUdeviceptr own = dev_alloc(0);
	CUtensorMap t = tmap_over(own);
	size_t size;
	CUdeviceptr p = alloc_by(how, &size);
	assert_refused(launch(own, p + 64, &t, &t), alloc_names[how]);
	if (end == 0) {
		ck_assert_int_eq(cuCtxDestroy(ctx[1]), CUDA_SUCCESS);
	} else if (end == 1) {
		ck_assert_int_eq(cuDevicePrimaryCtxReset(d1), CUDA_SUCCESS);
	} else if (end == 2) {
		ck_assert_int_eq(cuDevicePrimaryCtxRelease(d1), CUDA_SUCCESS);
	} else {
		CUresult (*fn)(CUdevice) = NULL;
		ck_assert_int_eq(cuGetProcAddress(end == 3 ? "cuDevicePrimaryCtxReset" : "cuDevicePrimaryCtxRelease",
						  (void **)&fn, 7000, 0, NULL),
				 CUDA_SUCCESS);
		ck_assert_int_eq(fn(d1), CUDA_SUCCESS);
	}
	CUresult rc = launch(own, p + 64, &t, &t);
	if (cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) == CUDA_SUCCESS)
		assert_refused(rc, ends[end]);
	else
		ck_assert_msg(rc == CUDA_SUCCESS, "%s after %s: memory gone taken for device 1's",
			      alloc_names[how], ends[end]);
}
END_TEST

START_TEST(memory_every_device_reaches)
{
	setup();
	CUdeviceptr own = dev_alloc(0);
	CUtensorMap t = tmap_over(own);
	CUdeviceptr managed;
	void *pinned, *host_alloc;
	static char registered[1 << 16];
	ck_assert_int_eq(cuCtxSetCurrent(ctx[1]), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemAllocManaged(&managed, SIZE, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemAllocHost(&pinned, SIZE), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemHostAlloc(&host_alloc, SIZE, CU_MEMHOSTALLOC_PORTABLE), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemHostRegister(registered, sizeof registered, 0), CUDA_SUCCESS);
	/* Host-located pools, used from device 1's stream: the driver gives
	 * their memory device 1's ordinal all the same. */
	CUdeviceptr from_pool[2];
	for (int i = 0; i < 2; i++) {
		CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
					.location = {i ? CU_MEM_LOCATION_TYPE_HOST_NUMA
						       : CU_MEM_LOCATION_TYPE_HOST, 0}};
		CUmemoryPool pool;
		ck_assert_int_eq(cuMemPoolCreate(&pool, &props), CUDA_SUCCESS);
		ck_assert_int_eq(cuMemAllocFromPoolAsync(&from_pool[i], SIZE, pool, stream[1]),
				 CUDA_SUCCESS);
	}
	ck_assert_int_eq(launch(from_pool[0] + 64, from_pool[1], &t, &t), CUDA_SUCCESS);
	ck_assert_int_eq(launch(managed + 64, (CUdeviceptr)pinned, &t, &t), CUDA_SUCCESS);
	ck_assert_int_eq(launch((CUdeviceptr)host_alloc, (CUdeviceptr)registered, &t, &t),
			 CUDA_SUCCESS);
	CUtensorMap tm = tmap_over(managed);
	ck_assert_int_eq(launch(own, own, &tm, &t), CUDA_SUCCESS);
	/* Values that are not addresses at all. */
	ck_assert_int_eq(launch(0, 4096, &t, &t), CUDA_SUCCESS);
	ck_assert_int_eq(launch((CUdeviceptr)-1, 0x123456789abcULL, &t, &t), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemHostUnregister(registered), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemFreeHost(pinned), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemFreeHost(host_alloc), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemFree(managed), CUDA_SUCCESS);
}
END_TEST

static const char *const encoders[] = {"cuTensorMapEncodeTiled", "cuTensorMapEncodeIm2col",
				       "cuTensorMapEncodeIm2colWide", "cuTensorMapReplaceAddress"};

START_TEST(every_tensor_map_encoder)
{
	setup();
	CUdeviceptr own = dev_alloc(0), other = dev_alloc(1);
	CUtensorMap ok = tmap_over(own), m;
	cuuint64_t dims[3] = {64, 32, 16}, strides[2] = {128, 128 * 32};
	cuuint32_t elem[3] = {1, 1, 1};
	int lo[1] = {0}, hi[1] = {0};
	CUresult rc = CUDA_SUCCESS;
	switch (_i) {
	case 0:
		m = tmap_over(other);
		break;
	case 1:
		rc = cuTensorMapEncodeIm2col(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, (void *)other, dims,
					     strides, lo, hi, 64, 32, elem,
					     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
					     CU_TENSOR_MAP_L2_PROMOTION_NONE,
					     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
		break;
	case 2:
		rc = cuTensorMapEncodeIm2colWide(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, (void *)other,
						 dims, strides, 0, 0, 64, 32, elem,
						 CU_TENSOR_MAP_INTERLEAVE_NONE,
						 CU_TENSOR_MAP_IM2COL_WIDE_MODE_W,
						 CU_TENSOR_MAP_SWIZZLE_128B,
						 CU_TENSOR_MAP_L2_PROMOTION_NONE,
						 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
		break;
	default:
		m = tmap_over(own);
		ck_assert_int_eq(launch(own, own, &m, &ok), CUDA_SUCCESS);
		rc = cuTensorMapReplaceAddress(&m, (void *)other);
	}
	ck_assert_msg(rc == CUDA_SUCCESS, "%s: %d", encoders[_i], rc);
	assert_refused(launch(own, own, &ok, &m), encoders[_i]);
	const char *s;
	cuGetErrorString(CUDA_ERROR_INVALID_HANDLE, &s);
	ck_assert_msg(strstr(s, "parameter 3"), "%s", s);
}
END_TEST

/* The device remembered for a tensor map is dropped when memory moves. */
START_TEST(tensor_map_over_freed_memory)
{
	setup();
	CUdeviceptr own = dev_alloc(0), other = dev_alloc(1);
	CUtensorMap ok = tmap_over(own), stale = tmap_over(other);
	assert_refused(launch(own, own, &ok, &stale), "before the free");
	ck_assert_int_eq(cuMemFree(other), CUDA_SUCCESS);
	ck_assert_int_eq(launch(own, own, &ok, &stale), CUDA_SUCCESS);
}
END_TEST

START_TEST(both_parameter_forms)
{
	setup();
	CUdeviceptr own = dev_alloc(0), other = dev_alloc(1);
	CUtensorMap ok = tmap_over(own), bad = tmap_over(other);
	ck_assert_int_eq(launch_form(_i, own, own, &ok, &ok), CUDA_SUCCESS);
	assert_refused(launch_form(_i, own, other, &ok, &ok), "pointer");
	assert_refused(launch_form(_i, own, own, &bad, &ok), "tensor map");
}
END_TEST

START_TEST(operands_off_and_scope)
{
	setenv("CTXGUARD_OPERANDS", "off", 1);
	setup();
	CUdeviceptr own = dev_alloc(0), other = dev_alloc(1);
	CUtensorMap ok = tmap_over(own);
	/* Checked at start-up: the policy is read once. */
	ck_assert_int_eq(launch(own, other, &ok, &ok), CUDA_SUCCESS);
}
END_TEST

/* In a forked child the allocation map starts empty: the operand's device
 * comes from cuPointerGetAttributes, and a function the child never saw
 * loaded is registered at its first launch (scope all). */
START_TEST(fallback_for_memory_never_seen)
{
	setenv("CTXGUARD_SCOPE", "all", 1);
	setup();
	CUdeviceptr own = dev_alloc(0), other = dev_alloc(1);
	CUtensorMap ok = tmap_over(own);
	pid_t child = fork();
	if (child == 0) {
		CUresult rc = launch(own, other + 100, &ok, &ok);
		const char *s = NULL;
		cuGetErrorString(rc, &s);
		if (rc == CUDA_ERROR_INVALID_HANDLE && s && strstr(s, "on device 1"))
			_exit(0);
		fprintf(stderr, "child: launch returned %d: %s\n", rc, s ? s : "(null)");
		_exit(1);
	}
	int st;
	waitpid(child, &st, 0);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
}
END_TEST

/* Device d's memory as another process exports it. */
static CUipcMemHandle exported(int d)
{
	CUipcMemHandle h;
	ck_assert_int_eq(cuIpcGetMemHandle(&h, dev_alloc(d)), CUDA_SUCCESS);
	return h;
}

/* A pointer of a pool on device d (made in *pool) as another process
 * exports it. */
static CUmemPoolPtrExportData pool_exported(int d, CUmemoryPool *pool)
{
	CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
				.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
				.location = {CU_MEM_LOCATION_TYPE_DEVICE, d}};
	CUdeviceptr p;
	CUmemPoolPtrExportData data;
	ck_assert_int_eq(cuMemPoolCreate(pool, &props), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemAllocFromPoolAsync(&p, SIZE, *pool, stream[d]), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemPoolExportPointer(&data, p), CUDA_SUCCESS);
	return data;
}

/* Imported by device 0's context past the hooks, as a library that found
 * the driver out of ctxguard's sight would. */
static CUdeviceptr import_unseen(CUmemoryPool pool, CUmemPoolPtrExportData *data)
{
	CUresult (*import)(CUdeviceptr *, CUmemoryPool, CUmemPoolPtrExportData *) =
		fake_entry_point("cuMemPoolImportPointer", 0);
	CUdeviceptr v;
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	ck_assert_int_eq(import(&v, pool, data), CUDA_SUCCESS);
	return v;
}

/* Opened by device 0's context: this process works on device 0. */
static CUdeviceptr ipc_open(CUipcMemHandle h)
{
	CUdeviceptr v;
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	ck_assert_int_eq(cuIpcOpenMemHandle(&v, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
			 CUDA_SUCCESS);
	return v;
}

/* The expert as a CUkernel, run in device d's context with every operand at p. */
static CUresult launch_in(int d, CUdeviceptr p)
{
	CUlibrary lib;
	CUkernel k;
	CUtensorMap t = tmap_over(p);
	void *params[] = {&p, &p, &t, &t};
	ck_assert_int_eq(cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS);
	ck_assert_int_eq(cuLibraryGetKernel(&k, lib, EXPERT), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxSetCurrent(ctx[d]), CUDA_SUCCESS);
	return cuLaunchKernel((CUfunction)k, 1, 1, 1, 32, 1, 1, 0, stream[d], params, NULL);
}

/* Device 0's own operands at v: launched, or why not. */
static void own_operands_run(CUdeviceptr v, const char *what)
{
	CUtensorMap t = tmap_over(v);
	CUresult rc = launch(v, v + 64, &t, &t);
	const char *s = NULL;
	cuGetErrorString(rc, &s);
	ck_assert_msg(rc == CUDA_SUCCESS, "%s: %s", what, s ? s : "(null)");
}

/* Device 1's memory opened through IPC, used on device 1, closed; the
 * driver then maps device 0's memory at the same addresses. */
static void ipc_addresses_reused(void)
{
	setup();
	CUipcMemHandle h1 = exported(1), h0 = exported(0);
	CUdeviceptr v = ipc_open(h1);
	ck_assert_int_eq(launch_in(1, v), CUDA_SUCCESS);
	ck_assert_int_eq(cuIpcCloseMemHandle(v), CUDA_SUCCESS);
	ck_assert_msg(ipc_open(h0) == v, "the fake did not reuse the addresses");
	own_operands_run(v, "device 0's memory where device 1's was");
}

/* What was learned of an IPC mapping goes with its close: under abort a
 * stale device killed a correct job. */
START_TEST(ipc_addresses_reused_for_another_device)
{
	static struct run r;
	setenv("CTXGUARD_MODE", "abort", 1);
	spawn_fn(&r, ipc_addresses_reused);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0 &&
		      !strstr(r.err, "cross-context"), "status %#x: %s", r.status, r.err);
}
END_TEST

/* A launch found nothing at an address (cached as not device memory);
 * memory opened there later is learned at the open, so it is checked.
 * Opened through the variant before CUDA 11.0, as cuGetProcAddress hands
 * it to a program built for 10.2. */
START_TEST(ipc_memory_where_none_was)
{
	setup();
	CUipcMemHandle h1 = exported(1);
	CUdeviceptr own = dev_alloc(0), v = ipc_open(h1), again;
	CUtensorMap t = tmap_over(own);
	ck_assert_int_eq(cuIpcCloseMemHandle(v), CUDA_SUCCESS);
	ck_assert_int_eq(launch(own, v + 64, &t, &t), CUDA_SUCCESS);
	CUresult (*open_10_2)(CUdeviceptr *, CUipcMemHandle, unsigned) = NULL;
	ck_assert_int_eq(cuGetProcAddress("cuIpcOpenMemHandle", (void **)&open_10_2, 10020, 0, NULL),
			 CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	ck_assert_int_eq(open_10_2(&again, h1, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_SUCCESS);
	ck_assert_msg(again == v, "the fake did not reuse the addresses");
	assert_refused(launch(own, v + 64, &t, &t), "opened where nothing was");
}
END_TEST

/* The same for a pool's pointer imported from another process. */
START_TEST(pool_import_where_none_was)
{
	setup();
	CUmemoryPool pool;
	CUmemPoolPtrExportData data = pool_exported(1, &pool);
	CUdeviceptr own = dev_alloc(0), v, again;
	CUtensorMap t = tmap_over(own);
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemPoolImportPointer(&v, pool, &data), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemFreeAsync(v, stream[0]), CUDA_SUCCESS);
	ck_assert_int_eq(launch(own, v + 64, &t, &t), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemPoolImportPointer(&again, pool, &data), CUDA_SUCCESS);
	ck_assert_msg(again == v, "the fake did not reuse the addresses");
	assert_refused(launch(own, v + 64, &t, &t), "imported where nothing was");
}
END_TEST

/* And for device 1's VMM memory, exported by another process as a file
 * descriptor, imported here (through the hooks, or past them: _i) and
 * mapped where a launch found nothing.  Imported through the hooks, its
 * device is known without a lookup. */
START_TEST(vmm_import_where_none_was)
{
	setup();
	const CUmemAllocationHandleType fd_type = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
				    .requestedHandleTypes = fd_type,
				    .location = {CU_MEM_LOCATION_TYPE_DEVICE, 1}};
	CUresult (*import)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType) =
		cuMemImportFromShareableHandle;
	if (_i) { /* memcpy: ISO C has no cast from an object pointer to a function pointer */
		void *past = fake_entry_point("cuMemImportFromShareableHandle", 0);
		memcpy(&import, &past, sizeof past);
	}
	CUmemGenericAllocationHandle theirs, ours;
	CUdeviceptr own = dev_alloc(0), va;
	CUtensorMap t = tmap_over(own);
	int fd;
	ck_assert_int_eq(cuMemCreate(&theirs, SIZE, &prop, 0), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemExportToShareableHandle(&fd, theirs, fd_type, 0), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemAddressReserve(&va, SIZE, 0, 0, 0), CUDA_SUCCESS);
	ck_assert_int_eq(launch(own, va + 64, &t, &t), CUDA_SUCCESS);
	ck_assert_int_eq(import(&ours, (void *)(uintptr_t)fd, fd_type), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemMap(va, SIZE, 0, ours, 0), CUDA_SUCCESS);
	if (!_i)
		fake_fail_next("cuPointerGetAttributes", CUDA_ERROR_UNKNOWN);
	assert_refused(launch(own, va + 64, &t, &t), _i ? "imported past the hooks" : "imported");
}
END_TEST

/* A VMM handle stays known while the program holds a reference to it:
 * retained through a mapping's address and released once, one reference
 * left (_i 0), or released, only its mapping left, then retained, which
 * hands back the same handle (1).  Mapped again where a launch found
 * nothing, its device is known without a lookup. */
START_TEST(vmm_handle_retained)
{
	setup();
	CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
				    .location = {CU_MEM_LOCATION_TYPE_DEVICE, 1}};
	CUmemGenericAllocationHandle h, again;
	CUdeviceptr own = dev_alloc(0), va, second;
	CUtensorMap t = tmap_over(own);
	ck_assert_int_eq(cuMemCreate(&h, SIZE, &prop, 0), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemAddressReserve(&va, SIZE, 0, 0, 0), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemAddressReserve(&second, SIZE, 0, 0, 0), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemMap(va, SIZE, 0, h, 0), CUDA_SUCCESS);
	if (_i)
		ck_assert_int_eq(cuMemRelease(h), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemRetainAllocationHandle(&again, (void *)(uintptr_t)(va + 64)), CUDA_SUCCESS);
	ck_assert_msg(again == h, "the fake handed back another handle");
	if (!_i)
		ck_assert_int_eq(cuMemRelease(again), CUDA_SUCCESS);
	ck_assert_int_eq(launch(own, second + 64, &t, &t), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemMap(second, SIZE, 0, h, 0), CUDA_SUCCESS);
	fake_fail_next("cuPointerGetAttributes", CUDA_ERROR_UNKNOWN);
	assert_refused(launch(own, second + 64, &t, &t),
		       _i ? "retained after its release" : "released once of two references");
}
END_TEST

/* Device 1's memory mapped at a reserved address by "another thread"
 * while a launch's lookup of that address is asking the driver, which
 * answers as of before the map: the lookup's "none" must not stay cached
 * over the mapped memory.  Its handle was made past the hooks, so the map
 * only uncaches the range and leaves its device to the next lookup. */
struct racing_map {
	CUdeviceptr va;
	CUmemGenericAllocationHandle h;
};

static void map_meanwhile(void *arg)
{
	const struct racing_map *m = arg;
	ck_assert_int_eq(cuMemMap(m->va, SIZE, 0, m->h, 0), CUDA_SUCCESS);
}

START_TEST(map_racing_a_lookup)
{
	setup();
	CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
				    .location = {CU_MEM_LOCATION_TYPE_DEVICE, 1}};
	struct racing_map m;
	CUdeviceptr own = dev_alloc(0);
	CUtensorMap t = tmap_over(own);
	CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
			   unsigned long long);
	void *past = fake_entry_point("cuMemCreate", 0);
	memcpy(&create, &past, sizeof past); /* ISO C: no object to function pointer cast */
	ck_assert_int_eq(create(&m.h, SIZE, &prop, 0), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemAddressReserve(&m.va, SIZE, 0, 0, 0), CUDA_SUCCESS);
	fake_after_next("cuPointerGetAttributes", map_meanwhile, &m);
	ck_assert_int_eq(launch(own, m.va + 64, &t, &t), CUDA_SUCCESS); /* asked before the map */
	assert_refused(launch(own, m.va + 64, &t, &t), "mapped while a lookup asked");
}
END_TEST

/* The same for a buffer mapped onto another API's memory, which its
 * cuMemFree takes back. */
START_TEST(external_memory_where_none_was)
{
	setup();
	CUexternalMemory ext = external_imported(ctx[1]);
	CUdeviceptr own = dev_alloc(0), v = buffer_of(ctx[1], ext);
	CUtensorMap t = tmap_over(own);
	ck_assert_int_eq(cuMemFree(v), CUDA_SUCCESS);
	ck_assert_int_eq(launch(own, v + 64, &t, &t), CUDA_SUCCESS);
	ck_assert_msg(buffer_of(ctx[1], ext) == v, "the fake did not reuse the addresses");
	assert_refused(launch(own, v + 64, &t, &t), "mapped where nothing was");
	ck_assert_int_eq(launch_in(1, v), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemFree(v), CUDA_SUCCESS);
	ck_assert_int_eq(launch(own, v + 64, &t, &t), CUDA_SUCCESS);
}
END_TEST

/* And for a graph's allocation node, which has its address from when it
 * is made (through its own entry points or the generic ones: _i): the
 * address a destroyed graph's node gave back, cached as not device memory
 * by a launch, is checked as soon as another node has it, and no longer
 * once a free node frees it. */
START_TEST(graph_memory_where_none_was)
{
	setup();
	CUgraph g;
	CUdeviceptr own = dev_alloc(0), v = graph_alloc(_i, &g);
	CUtensorMap t = tmap_over(own);
	ck_assert_int_eq(cuGraphDestroy(g), CUDA_SUCCESS);
	ck_assert_int_eq(launch(own, v + 64, &t, &t), CUDA_SUCCESS);
	ck_assert_msg(graph_alloc(_i, &g) == v, "the fake did not reuse the addresses");
	assert_refused(launch(own, v + 64, &t, &t), "a graph's allocation where nothing was");
	ck_assert_int_eq(launch_in(1, v), CUDA_SUCCESS);
	graph_free(_i, g, v);
	ck_assert_int_eq(launch(own, v + 64, &t, &t), CUDA_SUCCESS);
}
END_TEST

/* A child graph with an allocation node, moved into its parent (_i 0), or
 * moved into another child first, which is then moved (1): its memory is
 * the parent's from then on, and goes with the parent's destruction,
 * which destroys the children (no cuGraphDestroy of theirs comes): the
 * address, device 1's while the parent lives, is nothing's after. */
START_TEST(graph_memory_of_a_moved_child)
{
	setup();
	CUgraph child, inner, parent;
	CUdeviceptr own = dev_alloc(0), v = graph_alloc(0, _i ? &inner : &child);
	CUtensorMap t = tmap_over(own);
	CUgraphNode node;
	CUgraphNodeParams p = {.type = CU_GRAPH_NODE_TYPE_GRAPH,
			       .graph = {.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE}};
	if (_i) {
		ck_assert_int_eq(cuGraphCreate(&child, 0), CUDA_SUCCESS);
		p.graph.graph = inner;
		ck_assert_int_eq(cuGraphAddNode(&node, child, NULL, NULL, 0, &p), CUDA_SUCCESS);
	}
	ck_assert_int_eq(cuGraphCreate(&parent, 0), CUDA_SUCCESS);
	p.graph.graph = child;
	ck_assert_int_eq(cuGraphAddNode(&node, parent, NULL, NULL, 0, &p), CUDA_SUCCESS);
	/* the driver refuses the child's own destruction (as measured on an
	 * H200), and its memory stays the parent's */
	ck_assert_int_eq(cuGraphDestroy(child), CUDA_ERROR_INVALID_VALUE);
	assert_refused(launch(own, v + 64, &t, &t), "a moved child's allocation, while its parent lives");
	ck_assert_int_eq(cuGraphDestroy(parent), CUDA_SUCCESS);
	ck_assert_int_eq(launch(own, v + 64, &t, &t), CUDA_SUCCESS);
}
END_TEST

/* Memory a context opened through IPC is unmapped at its end, no close
 * called: device 0's memory mapped past the hooks at those addresses
 * afterwards is device 0's. */
START_TEST(ipc_memory_ends_with_its_context)
{
	setup();
	CUipcMemHandle h[2] = {exported(0), exported(1)};
	CUresult (*open_unseen)(CUdeviceptr *, CUipcMemHandle, unsigned) =
		fake_entry_point("cuIpcOpenMemHandle", 0);
	CUcontext c;
	CUdevice d0;
	CUdeviceptr v, again;
	ck_assert_int_eq(cuDeviceGet(&d0, 0), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxCreate(&c, NULL, 0, d0), CUDA_SUCCESS);
	ck_assert_int_eq(cuIpcOpenMemHandle(&v, h[1], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxDestroy(c), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	ck_assert_int_eq(open_unseen(&again, h[0], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_SUCCESS);
	ck_assert_msg(again == v, "the fake did not reuse the addresses");
	own_operands_run(v, "device 0's memory where an ended context's mapping was");
}
END_TEST

/* A pool's pointer imported from another process belongs to no context and
 * outlives the context that imported it: after that context's end, device
 * 1's imported memory is still device 1's to a device 0 launch. */
START_TEST(pool_import_outlives_its_context)
{
	setup();
	CUmemoryPool pool;
	CUmemPoolPtrExportData data = pool_exported(1, &pool);
	CUcontext c;
	CUdevice d0;
	CUdeviceptr own = dev_alloc(0), v;
	CUtensorMap t = tmap_over(own);
	ck_assert_int_eq(cuDeviceGet(&d0, 0), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxCreate(&c, NULL, 0, d0), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemPoolImportPointer(&v, pool, &data), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxDestroy(c), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	assert_refused(launch(own, v + 64, &t, &t), "imported by a context that ended");
	ck_assert_int_eq(cuMemFree(v), CUDA_SUCCESS);
}
END_TEST

/* A buffer mapped onto another API's memory goes with the context that
 * mapped it, no free called: device 0's buffer mapped past the hooks at
 * its addresses afterwards is device 0's. */
START_TEST(external_memory_ends_with_its_context)
{
	setup();
	CUresult (*map_unseen)(CUdeviceptr *, CUexternalMemory,
			       const CUDA_EXTERNAL_MEMORY_BUFFER_DESC *) =
		fake_entry_point("cuExternalMemoryGetMappedBuffer", 0);
	CUDA_EXTERNAL_MEMORY_BUFFER_DESC buf = {.size = SIZE};
	CUexternalMemory ours = external_imported(ctx[0]);
	CUcontext c;
	CUdevice d1;
	CUdeviceptr v, again;
	ck_assert_int_eq(cuDeviceGet(&d1, 1), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxCreate(&c, NULL, 0, d1), CUDA_SUCCESS);
	v = buffer_of(c, external_imported(c));
	ck_assert_int_eq(cuCtxDestroy(c), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	ck_assert_int_eq(map_unseen(&again, ours, &buf), CUDA_SUCCESS);
	ck_assert_msg(again == v, "the fake did not reuse the addresses");
	own_operands_run(v, "device 0's memory where an ended context's buffer was");
}
END_TEST

/* A graph's memory is no one context's: any context's end takes it back,
 * and the verdict then follows the memory, as for memory no hook saw:
 * refused while a launch of the graph left it allocated (_i 1), let
 * through where the graph never ran (0). */
START_TEST(graph_memory_ends_with_any_context)
{
	setup();
	CUgraph g;
	CUcontext c;
	CUdevice d0;
	CUdeviceptr own = dev_alloc(0), v = graph_alloc(0, &g);
	CUtensorMap t = tmap_over(own);
	if (_i)
		graph_launched(g);
	assert_refused(launch(own, v + 64, &t, &t), "before a context's end");
	ck_assert_int_eq(cuDeviceGet(&d0, 0), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxCreate(&c, NULL, 0, d0), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxDestroy(c), CUDA_SUCCESS);
	CUresult rc = launch(own, v + 64, &t, &t);
	if (_i)
		assert_refused(rc, "allocated, after a context's end");
	else
		ck_assert_msg(rc == CUDA_SUCCESS, "never allocated, after a context's end: %d", rc);
}
END_TEST

/* A pool's pointer imported past the hooks, used on device 1 and freed:
 * no hook saw it appear, yet what was learned of it goes with the free,
 * and device 0's memory imported at its addresses is device 0's.
 * Memory allocated past the hooks shares a 2 MiB page with a hook's
 * allocation: its free leaves the hook's tag alone. */
START_TEST(free_of_memory_never_seen_allocated)
{
	setup();
	CUmemoryPool pool[2];
	CUmemPoolPtrExportData data[2] = {pool_exported(0, &pool[0]), pool_exported(1, &pool[1])};
	CUdeviceptr v = import_unseen(pool[1], &data[1]);
	ck_assert_int_eq(launch_in(1, v), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemFreeAsync(v, stream[0]), CUDA_SUCCESS);
	ck_assert_msg(import_unseen(pool[0], &data[0]) == v, "the fake did not reuse the addresses");
	own_operands_run(v, "device 0's memory where an import of device 1's was");

	CUresult (*alloc_unseen)(CUdeviceptr *, size_t) = fake_entry_point("cuMemAlloc", 0);
	CUdeviceptr unseen, known, own = dev_alloc(0);
	CUtensorMap t = tmap_over(own);
	ck_assert_int_eq(cuCtxSetCurrent(ctx[1]), CUDA_SUCCESS);
	ck_assert_int_eq(alloc_unseen(&unseen, 4096), CUDA_SUCCESS);
	ck_assert_int_eq(launch_in(1, unseen), CUDA_SUCCESS);
	known = dev_alloc(1);
	ck_assert_msg(known >> 21 == unseen >> 21, "%#llx and %#llx: not one 2 MiB page",
		      (unsigned long long)known, (unsigned long long)unseen);
	ck_assert_int_eq(cuMemFree(unseen), CUDA_SUCCESS);
	/* Refused without a lookup (one would fail): the tag is still there. */
	fake_fail_next("cuPointerGetAttributes", CUDA_ERROR_UNKNOWN);
	assert_refused(launch(own, known + 64, &t, &t), "a hook's allocation in the page");
}
END_TEST

/* A free of such memory captured into a graph frees when the graph runs:
 * nothing is asked of the driver during the capture (a lookup would fail
 * the way a global-mode capture refuses one). */
START_TEST(captured_free_of_memory_never_seen_allocated)
{
	setup();
	CUmemoryPool pool;
	CUmemPoolPtrExportData data = pool_exported(1, &pool);
	CUdeviceptr v = import_unseen(pool, &data);
	ck_assert_int_eq(launch_in(1, v), CUDA_SUCCESS);
	fake_stream_set_capturing(stream[0], 1);
	fake_fail_next("cuPointerGetAttributes", CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	ck_assert_int_eq(cuMemFreeAsync(v, stream[0]), CUDA_SUCCESS);
	fake_stream_set_capturing(stream[0], 0);
	/* The failure is still pending: ctxguard asked nothing. */
	CUpointer_attribute attr = CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
	CUmemorytype type = 0;
	void *data_out[] = {&type};
	ck_assert_int_eq(cuPointerGetAttributes(1, &attr, data_out, v),
			 CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
}
END_TEST

/* The silent case itself: with peer access on, the fake runs the kernel
 * on device 0 against device 1's memory; ctxguard stops it first. */
START_TEST(silent_crossing_is_stopped_before_it_runs)
{
	setup();
	CUdeviceptr own = dev_alloc(0), other = dev_alloc(1);
	CUtensorMap ok = tmap_over(own);
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxEnablePeerAccess(ctx[1], 0), CUDA_SUCCESS);
	fake_reset();
	assert_refused(launch(own, other, &ok, &ok), "peer access on");
	struct fake_stats st;
	fake_get_stats(&st);
	ck_assert_int_eq(st.silent_cross, 0);
	ck_assert_int_eq(st.launches, 0);
}
END_TEST

/* A child's launch with all four operands on device 1. */
static void four_operands_across(void)
{
	setup();
	CUdeviceptr other = dev_alloc(1);
	CUtensorMap t = tmap_over(other);
	fake_reset();
	launch(other, other + 64, &t, &t);
}

/* One launch with all four operands on device 1 is one crossing under
 * every action: one report listing the four, one record, counted once. */
START_TEST(one_report_per_launch)
{
	static const char *const modes[] = {"warn", "error", "abort"};
	static const char *const verdict[] = {"allowed (warn)", "refused (error",
					      "stopped (abort)"};
	static struct run r;
	char log[128];
	snprintf(log, sizeof log, "/tmp/ctxguard-check-%d.jsonl", (int)getpid());
	setenv("CTXGUARD_LOG", log, 1);
	setenv("CTXGUARD_MODE", modes[_i], 1);
	spawn_fn(&r, four_operands_across);
	ck_assert_msg(_i == 2 ? killed_by(&r, SIGABRT) : WIFEXITED(r.status), "status %#x",
		      r.status);
	const char *text = r.err;
	ck_assert_msg(count_of(text, "ctxguard: cross-context launch ") == 1 &&
		      strstr(text, verdict[_i]) &&
		      strstr(text, "): 4 operands live on another device\n") &&
		      count_of(text, "ctxguard: operand: parameter ") == 4, "%s", text);
	if (_i < 2)
		ck_assert_msg(strstr(text, ", 1 launch checked, 1 crossing ("), "%s", text);
	text = slurp(log);
	unlink(log);
	ck_assert_msg(count_of(text, "{\"event\":\"crossing\"") == 1 &&
		      strstr(text, ",\"noperands\":4,\"operands\":[{\"param\":0,"), "%s", text);
}
END_TEST

/* A crossing's record longer than the usual buffer (kernel names of
 * CUTLASS templates run to kilobytes) is written whole: cut short, it
 * ended inside the name, no JSON. */
START_TEST(long_kernel_name_logged_whole)
{
	enum { LONG = 13000 };
	char log[128];
	snprintf(log, sizeof log, "/tmp/ctxguard-check-%d.jsonl", (int)getpid());
	unlink(log);
	setenv("CTXGUARD_LOG", log, 1);
	setenv("CTXGUARD_MODE", "warn", 1);
	setenv("CTXGUARD_SCOPE", "all", 1);
	setup();
	char *name = malloc(LONG + 1), *img = malloc(LONG + 64);
	ck_assert(name && img);
	memset(name, 'k', LONG);
	name[LONG] = 0;
	snprintf(img, LONG + 64, "//ctxguard-fake-image\n.kernel %s 8\n", name);
	CUmodule mod;
	CUfunction k;
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleLoadData(&mod, img), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleGetFunction(&k, mod, name), CUDA_SUCCESS);
	CUdeviceptr own = dev_alloc(1);
	void *params[] = {&own};
	ck_assert_int_eq(cuCtxSetCurrent(ctx[1]), CUDA_SUCCESS);
	cuLaunchKernel(k, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL);
	char *text = slurp(log);
	unlink(log);
	ck_assert_msg(text, "no log");
	const char *rec = strstr(text, "{\"event\":\"crossing\"");
	ck_assert_msg(rec, "%.300s", text);
	const char *end = strchr(rec, '\n');
	ck_assert(end && end[-1] == '}' && memmem(rec, (size_t)(end - rec), name, LONG));
	free(name);
	free(img);
}
END_TEST

/* With a C++ signature, only parameters typed as pointers are pointers:
 * an 8-byte struct of flags that happens to look like an address is not,
 * and neither is an integer that holds one (_Z1kmPi: k(unsigned long,
 * int*)), the blind spot docs/how-it-works.md's kind (b) states. */
START_TEST(types_from_the_demangled_name)
{
	setenv("CTXGUARD_SCOPE", "all", 1);
	setup();
	static const char *const names[] = {"_Z6kernel5FlagsPf", "_Z1kmPi"};
	for (int i = 0; i < 2; i++) {
		char typed[128];
		snprintf(typed, sizeof typed, "//ctxguard-fake-image\n.kernel %s 8,8\n", names[i]);
		CUmodule mod;
		CUfunction k;
		ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
		ck_assert_int_eq(cuModuleLoadData(&mod, typed), CUDA_SUCCESS);
		ck_assert_int_eq(cuModuleGetFunction(&k, mod, names[i]), CUDA_SUCCESS);
		CUdeviceptr own = dev_alloc(0), other = dev_alloc(1);
		ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
		/* Let through (the fake's kernel then faults: the context's
		 * error is sticky, so the second kernel meets it). */
		void *not_a_pointer_holds_other[] = {&other, &own};
		ck_assert_int_ne(cuLaunchKernel(k, 1, 1, 1, 1, 1, 1, 0, NULL,
						not_a_pointer_holds_other, NULL),
				 CUDA_ERROR_INVALID_HANDLE);
		void *pointer_is_other[] = {&own, &other};
		CUresult rc = cuLaunchKernel(k, 1, 1, 1, 1, 1, 1, 0, NULL, pointer_is_other, NULL);
		ck_assert_int_eq(rc, CUDA_ERROR_INVALID_HANDLE);
		const char *s = NULL;
		cuGetErrorString(rc, &s);
		ck_assert_msg(s && strstr(s, "parameter 1 on device 1"), "%s: %s", names[i],
			      s ? s : "(null)");
	}
}
END_TEST

/* A destroyed context's handle comes back for another device: the
 * operand check must use the new device, not a cached one. */
START_TEST(context_handle_reused_on_another_device)
{
	setup();
	CUdeviceptr own = dev_alloc(0);
	CUcontext a, b;
	CUdevice d0, d1;
	ck_assert_int_eq(cuDeviceGet(&d0, 0), CUDA_SUCCESS);
	ck_assert_int_eq(cuDeviceGet(&d1, 1), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxCreate(&a, NULL, 0, d0), CUDA_SUCCESS);
	CUmodule mod;
	CUfunction k;
	CUtensorMap ok = tmap_over(own);
	void *params[] = {&own, &own, &ok, &ok};
	ck_assert_int_eq(cuModuleLoadData(&mod, image), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleGetFunction(&k, mod, EXPERT), CUDA_SUCCESS);
	ck_assert_int_eq(cuLaunchKernel(k, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxDestroy(a), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxCreate(&b, NULL, 0, d1), CUDA_SUCCESS);
	ck_assert_msg(a == b, "the fake did not reuse the context handle");
	ck_assert_int_eq(cuModuleLoadData(&mod, image), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleGetFunction(&k, mod, EXPERT), CUDA_SUCCESS);
	assert_refused(cuLaunchKernel(k, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), "reused ctx");
}
END_TEST

/* Another thread destroys a context, and a new one on device 1 takes its
 * handle, between the driver's answer about the old context's device and
 * ctxguard's note of it: the note must not outlive the destroy. */
static CUcontext replaced;

static void replace_context(void *old)
{
	CUdevice d1;
	ck_assert_int_eq(cuCtxDestroy((CUcontext)old), CUDA_SUCCESS);
	ck_assert_int_eq(cuDeviceGet(&d1, 1), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxCreate(&replaced, NULL, 0, d1), CUDA_SUCCESS);
}

START_TEST(context_destroyed_while_its_device_is_asked)
{
	setup();
	/* Device 1's memory, recorded as such before any of this. */
	CUdeviceptr there = dev_alloc(1);
	CUtensorMap t = tmap_over(there);
	void *params[] = {&there, &there, &t, &t};
	CUcontext a;
	CUdevice d0;
	CUmodule mod;
	CUfunction k;
	ck_assert_int_eq(cuDeviceGet(&d0, 0), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxCreate(&a, NULL, 0, d0), CUDA_SUCCESS);
	/* Recording the load asks for a's device; by the time the driver
	 * has answered, a is gone and its handle is device 1's. */
	fake_after_next("cuCtxGetDevice", replace_context, a);
	ck_assert_int_eq(cuModuleLoadData(&mod, image), CUDA_SUCCESS);
	ck_assert_msg(replaced == a, "the fake did not reuse the context handle");
	ck_assert_int_eq(cuModuleLoadData(&mod, image), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleGetFunction(&k, mod, EXPERT), CUDA_SUCCESS);
	CUresult rc = cuLaunchKernel(k, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL);
	const char *s = NULL;
	cuGetErrorString(rc, &s);
	ck_assert_msg(rc == CUDA_SUCCESS, "device 1's own operands refused: %s", s ? s : "(null)");
}
END_TEST

/* A graph node of a CUkernel runs in its ctx field's context: its operands
 * are checked against that context's device when the node is added. */
START_TEST(graph_kernel_node_in_its_context)
{
	setup();
	CUdeviceptr own = dev_alloc(0);
	CUtensorMap ok = tmap_over(own);
	void *params[] = {&own, &own, &ok, &ok};
	CUlibrary lib;
	CUkernel kern;
	ck_assert_int_eq(cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS);
	ck_assert_int_eq(cuLibraryGetKernel(&kern, lib, EXPERT), CUDA_SUCCESS);
	CUgraph g;
	CUgraphNode node;
	ck_assert_int_eq(cuGraphCreate(&g, 0), CUDA_SUCCESS);
	CUDA_KERNEL_NODE_PARAMS p = {.gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 32,
				     .blockDimY = 1, .blockDimZ = 1, .kernelParams = params,
				     .kern = kern, .ctx = ctx[0]};
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	ck_assert_int_eq(cuGraphAddKernelNode(&node, g, NULL, 0, &p), CUDA_SUCCESS);
	/* Same node meant for device 1, with device 0's operands. */
	p.ctx = ctx[1];
	assert_refused(cuGraphAddKernelNode(&node, g, NULL, 0, &p), "kernel node ctx");
}
END_TEST

/* When the 64 MiB of address space for the allocation map's tags cannot
 * be reserved (a tight RLIMIT_AS), the map's table answers instead. */
START_TEST(allocation_map_without_its_tag_array)
{
	setup();
	long pages = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	ck_assert_msg(f && fscanf(f, "%ld", &pages) == 1, "cannot read /proc/self/statm");
	fclose(f);
	/* Room for the fake's bookkeeping, not for the reservation. */
	rlim_t limit = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (16 << 20);
	struct rlimit rl = {limit, limit};
	ck_assert_int_eq(setrlimit(RLIMIT_AS, &rl), 0);
	CUdeviceptr own = dev_alloc(0), other = dev_alloc(1);
	CUtensorMap ok = tmap_over(own), bad = tmap_over(other);
	ck_assert_int_eq(launch(own, own, &ok, &ok), CUDA_SUCCESS);
	assert_refused(launch(own, other + 64, &ok, &ok), "pointer");
	assert_refused(launch(own, own, &ok, &bad), "tensor map");
	ck_assert_int_eq(cuMemFree(other), CUDA_SUCCESS);
	ck_assert_int_eq(launch(own, other + 64, &ok, &ok), CUDA_SUCCESS);
}
END_TEST

/* Hardware may keep a descriptor's address as it is, in some word: the
 * fake does so in word 3 under this fixture.  ctxguard learns the word from
 * the encodes and reads it at launch; the same tests must hold. */
static void address_in_word_3(void)
{
	setenv("FAKE_CUDA_TMAP_ADDRESS_WORD", "3", 1);
}

/* 128 bytes never encoded, with another device's address where the
 * descriptors keep theirs, are not a tensor map over that memory. */
START_TEST(bytes_never_encoded_are_not_an_address)
{
	setup();
	CUdeviceptr own = dev_alloc(0), other = dev_alloc(1);
	CUtensorMap ok = tmap_over(own), forged = ok;
	memcpy((char *)&forged + 24, &other, 8);
	ck_assert_int_eq(launch(own, own, &ok, &forged), CUDA_SUCCESS);
}
END_TEST

/* One encode that does not keep the address where the others did: the
 * launch path goes back to looking descriptors up, and misses none. */
START_TEST(encodes_that_disagree_fall_back_to_lookup)
{
	setup();
	CUdeviceptr own = dev_alloc(0), other = dev_alloc(1);
	CUtensorMap ok = tmap_over(own), in_word = tmap_over(other);
	unsetenv("FAKE_CUDA_TMAP_ADDRESS_WORD");
	CUtensorMap opaque = tmap_over(other + 4096);
	assert_refused(launch(own, own, &ok, &in_word), "address in word 3");
	assert_refused(launch(own, own, &opaque, &ok), "opaque");
	ck_assert_int_eq(launch(own, own, &ok, &ok), CUDA_SUCCESS);
}
END_TEST

/* The summary says which way descriptors were read: the learned word,
 * -1 (looked up) or -2 (none encoded). */
START_TEST(summary_names_the_address_word)
{
	static const char *const formats[] = {"3", NULL, NULL};
	static const char *const expect[] = {"\"tensor_map_address_word\":3",
					     "\"tensor_map_address_word\":-1",
					     "\"tensor_map_address_word\":-2"};
	char log[128];
	snprintf(log, sizeof log, "/tmp/ctxguard-check-%d.%%p.jsonl", (int)getpid());
	setenv("CTXGUARD_LOG", log, 1);
	if (formats[_i])
		setenv("FAKE_CUDA_TMAP_ADDRESS_WORD", formats[_i], 1);
	setup();
	if (_i < 2)
		tmap_over(dev_alloc(0));
	pid_t child = fork();
	if (child == 0)
		exit(0);    /* its summary, with what the parent learned */
	int st;
	waitpid(child, &st, 0);
	char path[160];
	snprintf(path, sizeof path, "/tmp/ctxguard-check-%d.%d.jsonl", (int)getpid(), (int)child);
	char *text = slurp(path);
	unlink(path);
	ck_assert_msg(text && strstr(text, expect[_i]), "%s: %s", expect[_i], text ? text : "(no log)");
}
END_TEST


/* Device 1's primary context loads the expert past the hooks (as cudart
 * loads its own fatbins) and the driver hands out the handle old again:
 * its launch there, with device 1's operands, is not a crossing. */
static void reused_on_device_1_runs(CUfunction old)
{
	CUresult (*load)(CUmodule *, const void *) = fake_entry_point("cuModuleLoadData", 0);
	CUresult (*get)(CUfunction *, CUmodule, const char *) =
		fake_entry_point("cuModuleGetFunction", 0);
	CUmodule mod;
	CUfunction again;
	ck_assert_int_eq(cuCtxSetCurrent(ctx[1]), CUDA_SUCCESS);
	ck_assert_int_eq(load(&mod, image), CUDA_SUCCESS);
	ck_assert_int_eq(get(&again, mod, EXPERT), CUDA_SUCCESS);
	ck_assert_msg(again == old, "the fake did not reuse the function handle");
	CUdeviceptr own = dev_alloc(1);
	CUtensorMap ok = tmap_over(own);
	void *params[] = {&own, &own, &ok, &ok};
	ck_assert_int_eq(cuCtxSetCurrent(ctx[1]), CUDA_SUCCESS);
	CUresult rc = cuLaunchKernel(again, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL);
	const char *s = NULL;
	cuGetErrorString(rc, &s);
	ck_assert_msg(rc == CUDA_SUCCESS, "a live function refused: %s", s ? s : "(null)");
}

/* A context's functions die with it: when the driver hands one of their
 * handles out again for a function loaded out of sight (cudart's own
 * fatbins) in another context, that launch is not a crossing. */
START_TEST(function_of_destroyed_context_reused_out_of_sight)
{
	setup();
	CUdevice d0;
	CUcontext a;
	CUmodule mod;
	CUfunction k;
	/* A refused destroy (of a primary context) leaves its functions owned. */
	ck_assert_int_ne(cuCtxDestroy(ctx[0]), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxSetCurrent(ctx[1]), CUDA_SUCCESS);
	CUresult refused = cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
	const char *why = NULL;
	cuGetErrorString(refused, &why);
	ck_assert_msg(why && strstr(why, "belongs to device 0"), "%s", why ? why : "(null)");
	ck_assert_int_eq(cuDeviceGet(&d0, 0), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxCreate(&a, NULL, 0, d0), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleLoadData(&mod, image), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleGetFunction(&k, mod, EXPERT), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxDestroy(a), CUDA_SUCCESS);
	reused_on_device_1_runs(k);
}
END_TEST

/* The extra form's buffer is as long as its CU_LAUNCH_PARAM_BUFFER_SIZE
 * says: a buffer too short for the kernel is the driver's to refuse, and
 * ctxguard must not read past it (here into a guard page). */
START_TEST(extra_buffer_shorter_than_the_parameters)
{
	setup();
	CUdeviceptr own = dev_alloc(0);
	long page = sysconf(_SC_PAGESIZE);
	unsigned char *m = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert(m != MAP_FAILED);
	ck_assert_int_eq(mprotect(m + page, (size_t)page, PROT_NONE), 0);
	/* Room for the two pointers only, ending at the guard page. */
	unsigned char *buf = m + page - 16;
	memcpy(buf, &own, 8);
	memcpy(buf + 8, &own, 8);
	size_t size = 16;
	void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
			 CU_LAUNCH_PARAM_END};
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	CUresult rc = cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, stream[0], NULL, extra);
	ck_assert_int_ne(rc, CUDA_SUCCESS);
}
END_TEST

/* The same after a primary context's reset (cudaDeviceReset) or its last
 * release: either unloads the context's modules, whose function handles
 * the driver hands out again to the next load. */
START_TEST(function_of_reset_primary_context_reused_out_of_sight)
{
	setup();
	CUdevice d0;
	ck_assert_int_eq(cuDeviceGet(&d0, 0), CUDA_SUCCESS);
	if (_i)
		ck_assert_int_eq(cuDevicePrimaryCtxRelease(d0), CUDA_SUCCESS);
	else
		ck_assert_int_eq(cuDevicePrimaryCtxReset(d0), CUDA_SUCCESS);
	reused_on_device_1_runs(fn);
}
END_TEST

/* A function first met at launch (loaded out of sight, as cudart's are)
 * is recorded with its parameter layout.  A reset or an unload of its
 * module (neither seen loaded) ends it, and the handle may come back for another kernel with fewer parameters: the
 * old layout must not be read against the new kernel's kernelParams. */
START_TEST(function_first_met_at_launch_does_not_outlive_its_context)
{
	setenv("CTXGUARD_SCOPE", "all", 1);
	setup();
	static const char small[] = "//ctxguard-fake-image\n.kernel small 8\n";
	CUresult (*load)(CUmodule *, const void *) = fake_entry_point("cuModuleLoadData", 0);
	CUresult (*get)(CUfunction *, CUmodule, const char *) =
		fake_entry_point("cuModuleGetFunction", 0);
	CUdevice d0;
	CUmodule mod;
	CUfunction big, again;
	CUdeviceptr own = dev_alloc(0);
	CUtensorMap ok = tmap_over(own);
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	ck_assert_int_eq(load(&mod, image), CUDA_SUCCESS);
	ck_assert_int_eq(get(&big, mod, EXPERT), CUDA_SUCCESS);
	void *params[] = {&own, &own, &ok, &ok};
	ck_assert_int_eq(cuLaunchKernel(big, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), CUDA_SUCCESS);
	ck_assert_int_eq(cuDeviceGet(&d0, 0), CUDA_SUCCESS);
	if (_i) {
		ck_assert_int_eq(cuModuleUnload(mod), CUDA_SUCCESS);
	} else {
		ck_assert_int_eq(cuDevicePrimaryCtxReset(d0), CUDA_SUCCESS);
		ck_assert_int_eq(cuDevicePrimaryCtxRetain(&ctx[0], d0), CUDA_SUCCESS);
	}
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	ck_assert_int_eq(load(&mod, small), CUDA_SUCCESS);
	ck_assert_int_eq(get(&again, mod, "small"), CUDA_SUCCESS);
	ck_assert_msg(again == big, "the fake did not reuse the function handle");
	/* One parameter; what lies past it is another device's address and
	 * a pointer to nothing. */
	CUdeviceptr other = dev_alloc(1);
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	void *past[] = {&own, &other, (void *)8, (void *)8};
	CUresult rc = cuLaunchKernel(again, 1, 1, 1, 1, 1, 1, 0, NULL, past, NULL);
	const char *s = NULL;
	cuGetErrorString(rc, &s);
	ck_assert_msg(rc == CUDA_SUCCESS, "a one-parameter kernel refused: %s", s ? s : "(null)");
}
END_TEST

/* The deprecated launches pass what cuParamSeti, cuParamSetf and
 * cuParamSetv wrote into f: here at the driver's offsets, every parameter
 * and then the size, as the CUDA samples set them. */
static void set_params(CUfunction f, CUdeviceptr p0, CUdeviceptr p1, const CUtensorMap *t0,
		       const CUtensorMap *t1)
{
	size_t off[4], sz;
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(cuFuncGetParamInfo(f, i, &off[i], &sz), CUDA_SUCCESS);
	ck_assert_int_eq(cuParamSetv(f, (int)off[0], &p0, sizeof p0), CUDA_SUCCESS);
	ck_assert_int_eq(cuParamSetv(f, (int)off[1], &p1, sizeof p1), CUDA_SUCCESS);
	ck_assert_int_eq(cuParamSetv(f, (int)off[2], (void *)t0, sizeof *t0), CUDA_SUCCESS);
	ck_assert_int_eq(cuParamSetv(f, (int)off[3], (void *)t1, sizeof *t1), CUDA_SUCCESS);
	ck_assert_int_eq(cuParamSetSize(f, (unsigned)(off[3] + sizeof *t1)), CUDA_SUCCESS);
}

/* f launched on device 0 by deprecated entry point `api`. */
static CUresult launch_deprecated(int api, CUfunction f)
{
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	if (api == 0)
		return cuLaunch(f);
	if (api == 1)
		return cuLaunchGrid(f, 1, 1);
	return cuLaunchGridAsync(f, 1, 1, stream[0]);
}

START_TEST(deprecated_launches_read_the_parameter_space)
{
	setup();
	CUdeviceptr own = dev_alloc(0), other = dev_alloc(1);
	CUtensorMap ok = tmap_over(own), bad = tmap_over(other);
	set_params(fn, own, other, &ok, &ok);
	assert_refused(launch_deprecated(_i, fn), "pointer");
	set_params(fn, own, own, &bad, &ok);
	assert_refused(launch_deprecated(_i, fn), "tensor map");
	set_params(fn, own, own, &ok, &ok);
	ck_assert_int_eq(launch_deprecated(_i, fn), CUDA_SUCCESS);
	/* cuParamSeti and cuParamSetf write 4 bytes: half of a pointer. */
	size_t off, sz;
	ck_assert_int_eq(cuFuncGetParamInfo(fn, 1, &off, &sz), CUDA_SUCCESS);
	ck_assert_int_eq(cuParamSeti(fn, (int)off, (unsigned)other), CUDA_SUCCESS);
	ck_assert_int_eq(cuParamSeti(fn, (int)off + 4, (unsigned)(other >> 32)), CUDA_SUCCESS);
	assert_refused(launch_deprecated(_i, fn), "cuParamSeti");
	ck_assert_int_eq(cuParamSetf(fn, (int)off + 4, 0.0f), CUDA_SUCCESS);
	ck_assert_int_eq(launch_deprecated(_i, fn), CUDA_SUCCESS);
}
END_TEST

/* The same function asked for again, by another API (the record ctxguard
 * keeps for it is replaced), holds what was written into it before. */
START_TEST(parameter_space_outlives_a_second_lookup)
{
	setup();
	CUdeviceptr own = dev_alloc(0), other = dev_alloc(1);
	CUtensorMap ok = tmap_over(own);
	CUlibrary lib;
	CUmodule mod;
	CUkernel k;
	CUfunction f, again;
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	ck_assert_int_eq(cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS);
	ck_assert_int_eq(cuLibraryGetModule(&mod, lib), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleGetFunction(&f, mod, EXPERT), CUDA_SUCCESS);
	set_params(f, own, other, &ok, &ok);
	ck_assert_int_eq(cuLibraryGetKernel(&k, lib, EXPERT), CUDA_SUCCESS);
	ck_assert_int_eq(cuKernelGetFunction(&again, k), CUDA_SUCCESS);
	ck_assert_msg(again == f, "the fake gave the library's kernel another function");
	assert_refused(launch_deprecated(1, f), "after cuKernelGetFunction");
}
END_TEST

/* A function of a module loaded past the hooks may have had parameters
 * written before ctxguard met it, and is forgotten whenever a context
 * ends: a deprecated launch of it is not checked, and says so once per
 * function, in an unchecked record and the status line that fails
 * `ctxguard --audit`. */
START_TEST(deprecated_launch_of_a_function_never_seen_loaded)
{
	char log[128], status[128];
	snprintf(log, sizeof log, "/tmp/ctxguard-params-%d.jsonl", (int)getpid());
	snprintf(status, sizeof status, "/tmp/ctxguard-params-%d.status", (int)getpid());
	unlink(log);
	FILE *st = fopen(status, "w");
	ck_assert(st && fclose(st) == 0);
	setenv("CTXGUARD_LOG", log, 1);
	setenv("CTXGUARD_STATUS", status, 1);
	setup();
	CUresult (*load)(CUmodule *, const void *) = fake_entry_point("cuModuleLoadData", 0);
	CUmodule mod;
	CUfunction f;
	CUdeviceptr own = dev_alloc(0), other = dev_alloc(1);
	CUtensorMap ok = tmap_over(own);
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	ck_assert_int_eq(load(&mod, image), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleGetFunction(&f, mod, EXPERT), CUDA_SUCCESS);
	set_params(f, own, other, &ok, &ok);
	/* Device 1's operand goes through unseen; the second launch then
	 * meets the context it killed (no peer access): what ctxguard said
	 * is what counts. */
	ck_assert_int_eq(launch_deprecated(1, f), CUDA_SUCCESS);
	launch_deprecated(2, f);
	char *text = slurp(log);
	unlink(log);
	ck_assert_msg(text && count_of(text, "{\"event\":\"unchecked\",") == 1 &&
			      strstr(text, "\"api\":\"cuLaunchGrid\",\"kernel\":\"" EXPERT
					   "\",\"launch_dev\":0,"),
		      "%s", text ? text : "no log");
	char line[64];
	snprintf(line, sizeof line, "unchecked %d\n", (int)getpid());
	text = slurp(status);
	unlink(status);
	ck_assert_msg(text && strcmp(text, line) == 0, "status: %s", text ? text : "none");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("operands");
	TCase *t = tcase_create("operands");
	tcase_set_timeout(t, 60);
	tcase_add_loop_test(t, every_allocation_path, 0, 7);
	tcase_add_loop_test(t, context_end_takes_its_allocations, 0, 20);
	tcase_add_test(t, memory_every_device_reaches);
	tcase_add_loop_test(t, every_tensor_map_encoder, 0, 4);
	tcase_add_loop_test(t, both_parameter_forms, 0, 3);
	tcase_add_test(t, tensor_map_over_freed_memory);
	tcase_add_test(t, operands_off_and_scope);
	tcase_add_test(t, fallback_for_memory_never_seen);
	tcase_add_test(t, ipc_addresses_reused_for_another_device);
	tcase_add_test(t, ipc_memory_where_none_was);
	tcase_add_test(t, pool_import_where_none_was);
	tcase_add_loop_test(t, vmm_import_where_none_was, 0, 2);
	tcase_add_loop_test(t, vmm_handle_retained, 0, 2);
	tcase_add_test(t, external_memory_where_none_was);
	tcase_add_test(t, map_racing_a_lookup);
	tcase_add_loop_test(t, graph_memory_where_none_was, 0, 2);
	tcase_add_loop_test(t, graph_memory_of_a_moved_child, 0, 2);
	tcase_add_test(t, ipc_memory_ends_with_its_context);
	tcase_add_test(t, pool_import_outlives_its_context);
	tcase_add_test(t, external_memory_ends_with_its_context);
	tcase_add_loop_test(t, graph_memory_ends_with_any_context, 0, 2);
	tcase_add_test(t, free_of_memory_never_seen_allocated);
	tcase_add_test(t, captured_free_of_memory_never_seen_allocated);
	tcase_add_test(t, silent_crossing_is_stopped_before_it_runs);
	tcase_add_loop_test(t, one_report_per_launch, 0, 3);
	tcase_add_test(t, long_kernel_name_logged_whole);
	tcase_add_test(t, types_from_the_demangled_name);
	tcase_add_test(t, context_handle_reused_on_another_device);
	tcase_add_test(t, context_destroyed_while_its_device_is_asked);
	tcase_add_test(t, graph_kernel_node_in_its_context);
	tcase_add_loop_test(t, summary_names_the_address_word, 0, 3);
	tcase_add_test(t, allocation_map_without_its_tag_array);
	tcase_add_test(t, function_of_destroyed_context_reused_out_of_sight);
	tcase_add_test(t, extra_buffer_shorter_than_the_parameters);
	tcase_add_loop_test(t, function_of_reset_primary_context_reused_out_of_sight, 0, 2);
	tcase_add_loop_test(t, function_first_met_at_launch_does_not_outlive_its_context, 0, 2);
	tcase_add_loop_test(t, deprecated_launches_read_the_parameter_space, 0, 3);
	tcase_add_test(t, parameter_space_outlives_a_second_lookup);
	tcase_add_test(t, deprecated_launch_of_a_function_never_seen_loaded);
	suite_add_tcase(s, t);
	TCase *w = tcase_create("address in the descriptor");
	tcase_set_timeout(w, 60);
	tcase_add_checked_fixture(w, address_in_word_3, NULL);
	tcase_add_loop_test(w, every_tensor_map_encoder, 0, 4);
	tcase_add_loop_test(w, both_parameter_forms, 0, 3);
	tcase_add_test(w, tensor_map_over_freed_memory);
	tcase_add_test(w, bytes_never_encoded_are_not_an_address);
	tcase_add_test(w, encodes_that_disagree_fall_back_to_lookup);
	suite_add_tcase(s, w);
	return run_suite(s);
}
