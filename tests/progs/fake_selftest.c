/*
 * Smoke test of the fake CUDA driver itself (tests/fake), run without the shim:
 *     LD_LIBRARY_PATH=build/fake build/tests/progs/fake_selftest
 * It checks the driver behaviour the shim's tests rely on (shared/DESIGN.md): which
 * context a launch runs in, INVALID_HANDLE across contexts, CUkernel handles, operand
 * crossings with and without peer access, handle reuse, shared, external and graph memory,
 * cuGetProcAddress identity, and green contexts.
 * Exits 0 when every check passes, 1 otherwise, 77 (skip) with fewer than two devices.
 */
/* The deprecated launch API is exercised on purpose. */
#define CUDA_ENABLE_DEPRECATED 1
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../fake/fake_api.h"

static int failures;

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
			failures++;                                                                \
		}                                                                                  \
	} while (0)
#define EXPECT(call, rc) CHECK((call) == (rc))
#define OK(call) EXPECT(call, CUDA_SUCCESS)

static const char image[] = "//ctxguard-fake-image\n"
			    ".kernel k_ptr 8\n"
			    ".kernel k_tma 8,4,128\n"
			    ".kernel k_none\n";

static CUcontext ctx0, ctx1;

static struct fake_stats stats(void)
{
	struct fake_stats s;
	fake_get_stats(&s);
	return s;
}

static CUresult launch_ptr(CUfunction f, CUstream s, CUdeviceptr p)
{
	void *args[] = {&p};
	return cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
}

static CUfunction load_function(CUmodule *mod, const char *name)
{
	CUfunction f = NULL;
	OK(cuModuleLoadData(mod, image));
	OK(cuModuleGetFunction(&f, *mod, name));
	return f;
}

static void test_launch_context(void)
{
	CUmodule mod;
	CUstream s0;
	struct fake_launch_info last;
	OK(cuCtxSetCurrent(ctx0));
	CUfunction f0 = load_function(&mod, "k_ptr");
	OK(cuStreamCreate(&s0, CU_STREAM_NON_BLOCKING));

	/* A CUfunction of ctx0 launched with ctx1 current on the NULL stream is refused. */
	OK(cuCtxSetCurrent(ctx1));
	struct fake_stats before = stats();
	EXPECT(launch_ptr(f0, NULL, 0), CUDA_ERROR_INVALID_HANDLE);
	EXPECT(launch_ptr(f0, CU_STREAM_PER_THREAD, 0), CUDA_ERROR_INVALID_HANDLE);
	CHECK(stats().invalid_handle == before.invalid_handle + 2);
	CHECK(stats().launches == before.launches);

	/* The same launch on a stream of ctx0 runs in ctx0: the stream decides. */
	OK(launch_ptr(f0, s0, 0));
	CHECK(fake_last_launch(&last) && last.ctx == ctx0 && last.device == 0);
	CHECK(strcmp(last.kernel, "k_ptr") == 0);

	CUcontext sctx;
	OK(cuStreamGetCtx(s0, &sctx));
	CHECK(sctx == ctx0);
	OK(cuStreamGetCtx(CU_STREAM_PER_THREAD, &sctx));
	CHECK(sctx == ctx1);
	OK(cuStreamDestroy(s0));
	OK(cuModuleUnload(mod));

	OK(cuCtxSetCurrent(NULL));
	EXPECT(launch_ptr(f0, NULL, 0), CUDA_ERROR_INVALID_CONTEXT);
}

/* Green contexts share their primary context's modules (docs/contexts.md); a created
 * context of the same device does not; its memory is the device's. */
static void test_green_contexts(void)
{
	CUdevResource all, part;
	CUdevResourceDesc desc;
	CUgreenCtx g;
	CUcontext gc, own, sctx;
	CUmodule mod, gmod, omod;
	CUstream gs;
	CUdeviceptr p;
	unsigned n = 1;
	OK(cuDeviceGetDevResource(0, &all, CU_DEV_RESOURCE_TYPE_SM));
	CHECK(all.sm.smCount == 132);
	OK(cuDevSmResourceSplitByCount(&part, &n, &all, NULL, 0, 10));
	CHECK(n == 1 && part.sm.smCount == 16);
	OK(cuDevResourceGenerateDesc(&desc, &part, 1));
	EXPECT(cuGreenCtxCreate(&g, desc, 0, 0), CUDA_ERROR_INVALID_VALUE);
	OK(cuGreenCtxCreate(&g, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM));
	OK(cuCtxFromGreenCtx(&gc, g));
	CHECK(gc != ctx0);
	OK(cuGreenCtxStreamCreate(&gs, g, CU_STREAM_NON_BLOCKING, 0));
	OK(cuStreamGetCtx(gs, &sctx));
	CHECK(sctx == gc);
	CUgreenCtx named = NULL;
	OK(cuStreamGetCtx_v2(gs, &sctx, &named));
	CHECK(sctx == ctx0 && named == g);

	OK(cuCtxSetCurrent(ctx0));
	CUfunction f0 = load_function(&mod, "k_ptr");
	OK(cuCtxSetCurrent(gc));
	OK(cuStreamGetCtx_v2(NULL, &sctx, &named));
	CHECK(sctx == ctx0 && named == g);
	CUfunction fg = load_function(&gmod, "k_ptr");
	OK(cuMemAlloc(&p, 1 << 20));
	struct fake_stats before = stats();
	OK(launch_ptr(f0, NULL, p));
	OK(launch_ptr(f0, gs, p));
	OK(cuCtxSetCurrent(ctx0));
	OK(launch_ptr(fg, NULL, p));
	CHECK(stats().launches == before.launches + 3);
	CHECK(stats().sticky_errors == before.sticky_errors);

	OK(cuCtxCreate(&own, NULL, 0, 0));
	CUfunction fo = load_function(&omod, "k_ptr");
	CUdeviceptr q;
	OK(cuMemAlloc(&q, 1 << 20));
	before = stats();
	EXPECT(launch_ptr(fo, gs, q), CUDA_ERROR_INVALID_HANDLE);
	OK(cuCtxSetCurrent(ctx0));
	EXPECT(launch_ptr(fo, NULL, q), CUDA_ERROR_INVALID_HANDLE);
	OK(launch_ptr(f0, NULL, q)); /* the created context's memory: the same device's */
	CHECK(stats().invalid_handle == before.invalid_handle + 2);
	CHECK(stats().sticky_errors == before.sticky_errors);

	/* Its end keeps the primary context's modules and memory, and hands its handle on. */
	OK(cuCtxDestroy(own));
	OK(cuGreenCtxDestroy(g));
	EXPECT(cuStreamQuery(gs), CUDA_ERROR_INVALID_HANDLE);
	OK(launch_ptr(fg, NULL, p));
	OK(cuCtxCreate(&own, NULL, 0, 0));
	CHECK(own == gc);
	EXPECT(launch_ptr(f0, NULL, p), CUDA_ERROR_INVALID_HANDLE);
	OK(cuCtxDestroy(own));
	OK(cuCtxSetCurrent(ctx0));
	OK(cuMemFree(p));
	OK(cuModuleUnload(gmod));
	OK(cuModuleUnload(mod));
}

/* The other ways to pass arguments and configure a launch follow the same rules. */
static void test_launch_forms(void)
{
	CUmodule mod;
	CUstream s1;
	CUdeviceptr p1;
	OK(cuCtxSetCurrent(ctx1));
	OK(cuStreamCreate(&s1, 0));
	OK(cuMemAlloc(&p1, 512));
	OK(cuCtxSetCurrent(ctx0));
	CUfunction f = load_function(&mod, "k_ptr");
	CUfunction none;
	OK(cuModuleGetFunction(&none, mod, "k_none"));
	OK(cuLaunchKernel(none, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));

	/* A packed argument buffer is read through the kernel's layout too. */
	size_t size = sizeof(p1);
	void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &p1, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
			 CU_LAUNCH_PARAM_END};
	OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra));
	struct fake_launch_info last;
	CHECK(fake_last_launch(&last) && last.crossings == 1 && last.argbytes == 8);
	EXPECT(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS); /* no peer access yet */
	OK(cuDevicePrimaryCtxReset(0)); /* clears the fault, unloads the module */
	EXPECT(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra),
	       CUDA_ERROR_INVALID_HANDLE);

	/* cuLaunchKernelEx: DeepGEMM's attributes; the config's stream decides the context. */
	f = load_function(&mod, "k_ptr");
	CUdeviceptr arg = 0;
	void *args[] = {&arg};
	CUlaunchAttribute attrs[2];
	memset(attrs, 0, sizeof(attrs));
	attrs[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
	attrs[0].value.clusterDim.x = 2;
	attrs[0].value.clusterDim.y = 1;
	attrs[0].value.clusterDim.z = 1;
	attrs[1].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
	attrs[1].value.programmaticStreamSerializationAllowed = 1;
	CUlaunchConfig cfg = {4, 1, 1, 128, 1, 1, 0, NULL, attrs, 2};
	OK(cuLaunchKernelEx(&cfg, f, args, NULL));
	cfg.hStream = s1;
	EXPECT(cuLaunchKernelEx(&cfg, f, args, NULL), CUDA_ERROR_INVALID_HANDLE);
	cfg.hStream = NULL;
	cfg.gridDimX = 3;
	EXPECT(cuLaunchKernelEx(&cfg, f, args, NULL), CUDA_ERROR_INVALID_CLUSTER_SIZE);

	/* The deprecated API: configuration stored in the function, same launch rules. */
	OK(cuFuncSetBlockShape(f, 64, 1, 1));
	/* The samples' order: every parameter, then the size. */
	OK(cuParamSetv(f, 0, &p1, sizeof(p1)));
	OK(cuParamSetSize(f, sizeof(CUdeviceptr)));
	EXPECT(cuParamSeti(f, 4094, 1), CUDA_ERROR_INVALID_VALUE);
	EXPECT(cuParamSetSize(f, 4097), CUDA_ERROR_INVALID_VALUE);
	EXPECT(cuLaunchGridAsync(f, 2, 1, s1), CUDA_ERROR_INVALID_HANDLE);
	OK(cuCtxEnablePeerAccess(ctx1, 0));
	struct fake_stats before = stats();
	OK(cuLaunchGrid(f, 2, 1));
	CHECK(stats().silent_cross == before.silent_cross + 1);
	OK(cuCtxDisablePeerAccess(ctx1));
	OK(cuModuleUnload(mod));
	OK(cuCtxSetCurrent(ctx1));
	OK(cuStreamDestroy(s1));
	OK(cuMemFree(p1));
}

static void test_kernels(void)
{
	CUlibrary lib;
	CUkernel k;
	CUfunction fk0, fk1, again;
	struct fake_launch_info last;
	OK(cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
	OK(cuLibraryGetKernel(&k, lib, "k_ptr"));
	EXPECT(cuLibraryGetKernel(&k, lib, "missing"), CUDA_ERROR_NOT_FOUND);
	OK(cuLibraryGetKernel(&k, lib, "k_ptr"));

	/* A CUkernel cast to CUfunction runs in whichever context launches it. */
	OK(cuCtxSetCurrent(ctx1));
	OK(launch_ptr((CUfunction)k, NULL, 0));
	CHECK(fake_last_launch(&last) && last.ctx == ctx1 && last.device == 1);
	OK(cuCtxSetCurrent(ctx0));
	OK(launch_ptr((CUfunction)k, NULL, 0));
	CHECK(fake_last_launch(&last) && last.ctx == ctx0 && last.device == 0);

	/* cuKernelGetFunction binds to the current context. */
	OK(cuKernelGetFunction(&fk0, k));
	OK(cuKernelGetFunction(&again, k));
	CHECK(fk0 == again);
	CUmodule m0, m0f;
	OK(cuLibraryGetModule(&m0, lib));
	OK(cuFuncGetModule(&m0f, fk0));
	CHECK(m0 == m0f);
	OK(cuCtxSetCurrent(ctx1));
	EXPECT(launch_ptr(fk0, NULL, 0), CUDA_ERROR_INVALID_HANDLE);
	OK(cuKernelGetFunction(&fk1, k));
	CHECK(fk1 != fk0);
	OK(launch_ptr(fk1, NULL, 0));
	EXPECT(cuFuncGetModule(&m0f, (CUfunction)k), CUDA_ERROR_INVALID_HANDLE);

	size_t off, size;
	CUkernel tma;
	OK(cuLibraryGetKernel(&tma, lib, "k_tma"));
	OK(cuKernelGetParamInfo(tma, 2, &off, &size));
	/* a tensor map 128-aligned in constant bank 0, whose parameters start
	 * at 0x210 (tests/fake/image.c): after 12 bytes, at 112 */
	CHECK(off == 112 && size == 128);
	EXPECT(cuKernelGetParamInfo(tma, 3, &off, &size), CUDA_ERROR_INVALID_VALUE);
	OK(cuLibraryUnload(lib));
	EXPECT(launch_ptr((CUfunction)k, NULL, 0), CUDA_ERROR_INVALID_HANDLE);
}

static void test_handle_reuse(void)
{
	CUmodule m1, m2;
	OK(cuCtxSetCurrent(ctx0));
	CUfunction f1 = load_function(&m1, "k_ptr");
	OK(cuModuleUnload(m1));
	/* The next load, in another context, gets the same handles back. */
	OK(cuCtxSetCurrent(ctx1));
	CUfunction f2 = load_function(&m2, "k_ptr");
	CHECK(m1 == m2 && f1 == f2);
	CUmodule owner;
	OK(cuFuncGetModule(&owner, f2));
	CHECK(owner == m2);
	OK(cuCtxSetCurrent(ctx0));
	EXPECT(launch_ptr(f2, NULL, 0), CUDA_ERROR_INVALID_HANDLE);
	OK(cuModuleUnload(m2));

	CUlibrary l1, l2;
	OK(cuLibraryLoadData(&l1, image, NULL, NULL, 0, NULL, NULL, 0));
	OK(cuLibraryUnload(l1));
	OK(cuLibraryLoadData(&l2, image, NULL, NULL, 0, NULL, NULL, 0));
	CHECK(l1 == l2);
	OK(cuLibraryUnload(l2));

	CUcontext c1, c2;
	unsigned long long id1, id2;
	OK(cuCtxCreate(&c1, NULL, 0, 0));
	OK(cuCtxGetId(c1, &id1));
	OK(cuCtxDestroy(c1));
	OK(cuCtxCreate(&c2, NULL, 0, 1));
	OK(cuCtxGetId(c2, &id2));
	CHECK(c1 == c2 && id1 != id2);
	CUdevice dev;
	OK(cuCtxGetDevice(&dev));
	CHECK(dev == 1);
	OK(cuCtxDestroy(c2));
	CUcontext cur;
	OK(cuCtxGetCurrent(&cur));
	CHECK(cur == ctx0);

	CUcontext p;
	OK(cuDevicePrimaryCtxRetain(&p, 0));
	CHECK(p == ctx0);
	OK(cuDevicePrimaryCtxRelease(0));
}

static void test_operands(void)
{
	CUmodule mod;
	CUdeviceptr p1, p0;
	CUcontext a, b;
	/* Fresh contexts, so poisoning them leaves the primary ones usable. */
	OK(cuCtxCreate(&b, NULL, 0, 1));
	OK(cuMemAlloc(&p1, 4096));
	OK(cuCtxCreate(&a, NULL, 0, 0));
	OK(cuMemAlloc(&p0, 4096));
	CUfunction f = load_function(&mod, "k_ptr");

	int ordinal = -1;
	unsigned int type = 0;
	OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p1 + 100));
	CHECK(ordinal == 1);
	OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p0));
	CHECK(type == CU_MEMORYTYPE_DEVICE);
	CHECK(p1 - p0 >= 0x1000000000ull || p0 - p1 >= 0x1000000000ull);
	int local;
	EXPECT(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
				     (CUdeviceptr)(uintptr_t)&local),
	       CUDA_ERROR_INVALID_VALUE);

	/* With peer access the cross-device operand goes through silently. */
	struct fake_stats before = stats();
	OK(cuCtxEnablePeerAccess(b, 0));
	EXPECT(cuCtxEnablePeerAccess(b, 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
	OK(launch_ptr(f, NULL, p1 + 64));
	OK(cuCtxSynchronize());
	CHECK(stats().silent_cross == before.silent_cross + 1);

	/* So does a tensor map whose global address lives on the other device. */
	CUtensorMap map;
	cuuint64_t dims[2] = {64, 16}, strides[1] = {128};
	cuuint32_t box[2] = {64, 8}, estr[2] = {1, 1};
	OK(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)(uintptr_t)p1,
				  dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
				  CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE,
				  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
	CUdeviceptr recorded = 0;
	CHECK(fake_tensor_map_address(&map, &recorded) && recorded == p1);
	for (int i = 0; i < 16; i++)
		CHECK(map.opaque[i] != p1);
	EXPECT(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
				      (void *)(uintptr_t)(p1 + 8), dims, strides, box, estr,
				      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
				      CU_TENSOR_MAP_L2_PROMOTION_NONE,
				      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
	       CUDA_ERROR_INVALID_VALUE);
	CUfunction ftma;
	OK(cuModuleGetFunction(&ftma, mod, "k_tma"));
	CUdeviceptr mine = p0;
	unsigned int n = 7;
	void *args[] = {&mine, &n, &map};
	OK(cuLaunchKernel(ftma, 1, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
	CHECK(stats().silent_cross == before.silent_cross + 2);
	struct fake_launch_info last;
	CHECK(fake_last_launch(&last) && last.crossings == 1 && last.argbytes == 240);

	/* Managed and host memory are reachable from every device. */
	CUdeviceptr managed;
	void *host;
	OK(cuMemAllocManaged(&managed, 4096, CU_MEM_ATTACH_GLOBAL));
	OK(cuMemAllocHost(&host, 4096));
	OK(launch_ptr(f, NULL, managed));
	OK(launch_ptr(f, NULL, (CUdeviceptr)(uintptr_t)host));
	OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				 (CUdeviceptr)(uintptr_t)host));
	CHECK(type == CU_MEMORYTYPE_HOST);
	OK(cuMemFreeHost(host));

	/* Without peer access the launch succeeds and the next sync reports the fault. */
	OK(cuCtxDisablePeerAccess(b));
	OK(launch_ptr(f, NULL, p1));
	CHECK(stats().sticky_errors == before.sticky_errors + 1);
	EXPECT(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
	EXPECT(launch_ptr(f, NULL, p0), CUDA_ERROR_ILLEGAL_ADDRESS);
	EXPECT(cuStreamSynchronize(NULL), CUDA_ERROR_ILLEGAL_ADDRESS);
	OK(cuCtxDestroy(a));
	OK(cuCtxDestroy(b));
}

static void test_vmm_and_graph(void)
{
	OK(cuCtxSetCurrent(ctx0));
	CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
				    .location = {CU_MEM_LOCATION_TYPE_DEVICE, 1}};
	size_t gran;
	OK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	CUdeviceptr va;
	CUmemGenericAllocationHandle h;
	OK(cuMemAddressReserve(&va, 2 * gran, 0, 0, 0));
	OK(cuMemCreate(&h, gran, &prop, 0));
	OK(cuMemMap(va, gran, 0, h, 0));
	OK(cuMemRelease(h));
	CUmemAccessDesc access[2] = {
		{{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE},
		{{CU_MEM_LOCATION_TYPE_DEVICE, 1}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE}};
	OK(cuMemSetAccess(va, gran, access, 2));
	int ordinal;
	OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, va + 5));
	CHECK(ordinal == 1);

	/* A graph node runs in its function's context whatever stream launches the graph. */
	CUmodule mod;
	CUfunction f = load_function(&mod, "k_ptr");
	CUgraph g;
	CUgraphNode node;
	CUgraphExec exec;
	CUdeviceptr arg = va + 8;
	void *args[] = {&arg};
	CUDA_KERNEL_NODE_PARAMS p = {.func = f,
				     .gridDimX = 1,
				     .gridDimY = 1,
				     .gridDimZ = 1,
				     .blockDimX = 64,
				     .blockDimY = 1,
				     .blockDimZ = 1,
				     .kernelParams = args};
	CUgraphNode first;
	CUgraphNodeType type;
	OK(cuGraphCreate(&g, 0));
	OK(cuGraphAddEmptyNode(&first, g, NULL, 0));
	OK(cuGraphAddKernelNode(&node, g, &first, 1, &p));
	OK(cuGraphNodeGetType(first, &type));
	CHECK(type == CU_GRAPH_NODE_TYPE_EMPTY);
	arg = 0; /* the node copied the value */
	OK(cuGraphInstantiate(&exec, g, 0));
	OK(cuCtxSetCurrent(ctx1));
	struct fake_stats before = stats();
	OK(cuGraphLaunch(exec, NULL));
	struct fake_launch_info last;
	CHECK(fake_last_launch(&last) && last.ctx == ctx0 && last.crossings == 1);
	CHECK(stats().silent_cross == before.silent_cross + 1);
	CUDA_KERNEL_NODE_PARAMS back;
	OK(cuGraphKernelNodeGetParams(node, &back));
	CHECK(back.func == f && *(CUdeviceptr *)back.kernelParams[0] == va + 8);
	OK(cuGraphExecDestroy(exec));
	OK(cuGraphDestroy(g));
	OK(cuModuleUnload(mod));
	OK(cuMemUnmap(va, gran));
	OK(cuMemAddressFree(va, 2 * gran));
}

/* Memory another process shares, this one playing both sides: an IPC mapping on the
 * exporting device, reached by the context that opened it, its opens counted and its
 * addresses handed to the next mapping once closed; a pool's pointer, imported and freed. */
static void test_sharing(void)
{
	CUdeviceptr p0, p1, v, again, pp, imported;
	CUipcMemHandle h0, h1, bad;
	OK(cuCtxSetCurrent(ctx1));
	OK(cuMemAlloc(&p1, 4096));
	OK(cuIpcGetMemHandle(&h1, p1));
	EXPECT(cuIpcGetMemHandle(&bad, p1 + 512), CUDA_ERROR_INVALID_VALUE);
	OK(cuCtxSetCurrent(ctx0));
	OK(cuMemAlloc(&p0, 4096));
	OK(cuIpcGetMemHandle(&h0, p0));
	EXPECT(cuIpcOpenMemHandle(&v, h1, 0), CUDA_ERROR_INVALID_VALUE);
	OK(cuIpcOpenMemHandle(&v, h1, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
	OK(cuIpcOpenMemHandle(&again, h1, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
	CHECK(again == v && v % (2u << 20) == 0 && v != p1);
	int ordinal = -1;
	CUdeviceptr start = 0;
	size_t size = 0;
	OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, v + 100));
	OK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, v + 100));
	OK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, v + 100));
	CHECK(ordinal == 1 && start == v && size == 4096);

	CUmodule mod;
	CUfunction f = load_function(&mod, "k_ptr");
	struct fake_stats before = stats();
	OK(launch_ptr(f, NULL, v + 64));
	CHECK(stats().silent_cross == before.silent_cross + 1);
	CHECK(stats().sticky_errors == before.sticky_errors);
	OK(cuModuleUnload(mod));

	EXPECT(cuMemFree(v), CUDA_ERROR_INVALID_VALUE);
	OK(cuIpcCloseMemHandle(v));
	OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, v));
	OK(cuIpcCloseMemHandle(v));
	EXPECT(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, v),
	       CUDA_ERROR_INVALID_VALUE);
	OK(cuIpcOpenMemHandle(&again, h0, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
	OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, again));
	CHECK(again == v && ordinal == 0);
	OK(cuIpcCloseMemHandle(again));

	CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
				.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
				.location = {CU_MEM_LOCATION_TYPE_DEVICE, 1}};
	CUmemoryPool pool;
	CUmemPoolPtrExportData data;
	OK(cuMemPoolCreate(&pool, &props));
	OK(cuMemAllocFromPoolAsync(&pp, 4096, pool, NULL));
	OK(cuMemPoolExportPointer(&data, pp));
	OK(cuMemPoolImportPointer(&imported, pool, &data));
	OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, imported));
	CHECK(imported == v && ordinal == 1);
	OK(cuMemFreeAsync(imported, NULL));
	OK(cuMemFree(pp));
	OK(cuMemPoolDestroy(pool));
	OK(cuMemFree(p0));
	OK(cuMemFree(p1));
}

/* A VMM handle exported as a file descriptor comes back as a handle of its own, on the
 * exporting device; a handle not created to be shared cannot be exported. */
static void test_shared_vmm(void)
{
	enum { GRAN = 2u << 20 };
	const CUmemAllocationHandleType fd_type = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
				    .requestedHandleTypes = fd_type,
				    .location = {CU_MEM_LOCATION_TYPE_DEVICE, 1}};
	CUmemGenericAllocationHandle made, plain, imported;
	CUmemAllocationProp got;
	CUdeviceptr va;
	int fd = -1, ordinal = -1;
	OK(cuCtxSetCurrent(ctx0));
	OK(cuMemCreate(&made, GRAN, &prop, 0));
	OK(cuMemExportToShareableHandle(&fd, made, fd_type, 0));
	OK(cuMemImportFromShareableHandle(&imported, (void *)(uintptr_t)fd, fd_type));
	OK(cuMemGetAllocationPropertiesFromHandle(&got, imported));
	CHECK(imported != made && got.location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
	      got.location.id == 1 && got.requestedHandleTypes == fd_type);
	OK(cuMemAddressReserve(&va, GRAN, 0, 0, 0));
	OK(cuMemMap(va, GRAN, 0, imported, 0));
	OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, va + 64));
	CHECK(ordinal == 1);
	OK(cuMemUnmap(va, GRAN));
	OK(cuMemAddressFree(va, GRAN));
	EXPECT(cuMemImportFromShareableHandle(&imported, (void *)(uintptr_t)(fd + 1), fd_type),
	       CUDA_ERROR_INVALID_VALUE);
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
	OK(cuMemCreate(&plain, GRAN, &prop, 0));
	EXPECT(cuMemExportToShareableHandle(&fd, plain, fd_type, 0), CUDA_ERROR_INVALID_VALUE);
	OK(cuMemRelease(plain));
	OK(cuMemRelease(imported));
	OK(cuMemRelease(made));
	EXPECT(cuMemGetAllocationPropertiesFromHandle(&got, made), CUDA_ERROR_INVALID_VALUE);
}

/* A buffer mapped onto external memory is the importing context's device's memory, mapped
 * where IPC mappings are; a graph allocation node's address is fixed when the node is made,
 * its memory there from a launch until freed, and the address handed on once the graph and
 * the memory are gone. */
static void test_external_and_graph_memory(void)
{
	CUDA_EXTERNAL_MEMORY_HANDLE_DESC desc = {.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
						 .handle = {.fd = 1000}, .size = 4u << 20};
	CUDA_EXTERNAL_MEMORY_BUFFER_DESC buf = {.offset = 1u << 20, .size = 4u << 20};
	CUexternalMemory ext;
	CUdeviceptr b, again, v;
	int ordinal = -1;
	OK(cuCtxSetCurrent(ctx1));
	OK(cuImportExternalMemory(&ext, &desc));
	EXPECT(cuExternalMemoryGetMappedBuffer(&b, ext, &buf), CUDA_ERROR_INVALID_VALUE);
	buf.size = 2u << 20;
	OK(cuExternalMemoryGetMappedBuffer(&b, ext, &buf));
	OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, b + 64));
	CHECK(ordinal == 1 && b % (2u << 20) == 0);
	OK(cuMemFree(b));
	OK(cuExternalMemoryGetMappedBuffer(&again, ext, &buf));
	OK(cuDestroyExternalMemory(ext));
	OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, again));
	CHECK(again == b);
	OK(cuMemFree(again));

	CUDA_MEM_ALLOC_NODE_PARAMS p = {
		.poolProps = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
			      .location = {CU_MEM_LOCATION_TYPE_DEVICE, 1}},
		.bytesize = 4096};
	CUgraph g;
	CUgraphNode alloc, freed;
	CUgraphExec exec;
	CUgraphNodeType type;
	OK(cuGraphCreate(&g, 0));
	OK(cuGraphAddMemAllocNode(&alloc, g, NULL, 0, &p));
	OK(cuGraphNodeGetType(alloc, &type));
	v = p.dptr;
	CHECK(type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && v % (2u << 20) == 0);
	EXPECT(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, v),
	       CUDA_ERROR_INVALID_VALUE);
	OK(cuGraphInstantiate(&exec, g, 0));
	OK(cuGraphLaunch(exec, NULL));
	OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, v + 64));
	CHECK(ordinal == 1);
	EXPECT(cuGraphLaunch(exec, NULL), CUDA_ERROR_INVALID_VALUE); /* still allocated */
	OK(cuMemFree(v));
	OK(cuGraphLaunch(exec, NULL));
	OK(cuGraphExecDestroy(exec));
	OK(cuGraphDestroy(g));
	/* Its graph gone, the memory stays until freed; then its address is the next node's. */
	OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, v));
	OK(cuMemFreeAsync(v, NULL));
	OK(cuGraphCreate(&g, 0));
	OK(cuGraphAddMemAllocNode(&alloc, g, NULL, 0, &p));
	CHECK(p.dptr == v);
	OK(cuGraphAddMemFreeNode(&freed, g, &alloc, 1, v));
	EXPECT(cuGraphAddMemFreeNode(&freed, g, &alloc, 1, v), CUDA_ERROR_INVALID_VALUE);
	OK(cuGraphInstantiate(&exec, g, 0));
	OK(cuGraphLaunch(exec, NULL));
	OK(cuGraphLaunch(exec, NULL)); /* its own free node freed it */
	EXPECT(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, v),
	       CUDA_ERROR_INVALID_VALUE);
	OK(cuGraphExecDestroy(exec));
	OK(cuGraphDestroy(g));
}

static void test_proc_address(void)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW);
	CHECK(lib != NULL);
	if (!lib)
		return;
	static const struct {
		const char *symbol;
		int version;
		cuuint64_t flags;
		const char *variant;
	} cases[] = {
		{"cuGetProcAddress", 11030, 0, "cuGetProcAddress"},
		{"cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2"},
		{"cuMemAlloc", 12000, 0, "cuMemAlloc_v2"},
		{"cuCtxCreate", 11040, 0, "cuCtxCreate_v3"},
		{"cuCtxCreate", 12050, 0, "cuCtxCreate_v4"},
		{"cuCtxSynchronize", 12080, 0, "cuCtxSynchronize"},
		{"cuCtxSynchronize", 13000, 0, "cuCtxSynchronize_v2"},
		{"cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
		 "cuLaunchKernel_ptsz"},
		{"cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, "cuLaunchKernel"},
		{"cuStreamGetCtx", 12050, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
		 "cuStreamGetCtx_v2_ptsz"},
		{"cuMemAlloc", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
		 "cuMemAlloc_v2"},
		{"cuGraphAddKernelNode", 12000, 0, "cuGraphAddKernelNode_v2"},
		{"cuIpcOpenMemHandle", 10020, 0, "cuIpcOpenMemHandle"},
		{"cuIpcOpenMemHandle", 11000, 0, "cuIpcOpenMemHandle_v2"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		void *pfn = NULL;
		CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
		OK(cuGetProcAddress(cases[i].symbol, &pfn, cases[i].version, cases[i].flags,
				    &status));
		CHECK(status == CU_GET_PROC_ADDRESS_SUCCESS);
		CHECK(pfn != NULL && pfn == dlsym(lib, cases[i].variant));
	}
	/* Exports carry NVIDIA's version name; an unknown version finds nothing. */
	CHECK(dlvsym(lib, "cuInit", "libcuda.so.1") == dlsym(lib, "cuInit"));
	CHECK(dlvsym(lib, "cuInit", "") == NULL);
	void *pfn = (void *)1;
	CUdriverProcAddressQueryResult status;
	EXPECT(cuGetProcAddress("cuNoSuchThing", &pfn, 12000, 0, &status), CUDA_ERROR_NOT_FOUND);
	CHECK(pfn == NULL && status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	EXPECT(cuGetProcAddress("cuLibraryLoadData", &pfn, 11080, 0, &status),
	       CUDA_ERROR_NOT_FOUND);
	CHECK(pfn == NULL && status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	dlclose(lib);

	const char *s;
	OK(cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &s));
	CHECK(strcmp(s, "CUDA_ERROR_ILLEGAL_ADDRESS") == 0);
	OK(cuGetErrorString(CUDA_ERROR_INVALID_HANDLE, &s));
	CHECK(strcmp(s, "invalid resource handle") == 0);
}

static void test_images_and_injection(void)
{
	CUmodule mod;
	OK(cuCtxSetCurrent(ctx0));
	EXPECT(cuModuleLoadData(&mod, "//ctxguard-fake-image\n.kernel k 8,\n"),
	       CUDA_ERROR_INVALID_IMAGE);
	EXPECT(cuModuleLoadData(&mod, "not an image"), CUDA_ERROR_INVALID_IMAGE);
	EXPECT(cuModuleLoad(&mod, "/nonexistent/fake.image"), CUDA_ERROR_FILE_NOT_FOUND);

	char path[] = "/tmp/fake_selftest_XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	if (fd >= 0) {
		CHECK(write(fd, image, sizeof(image) - 1) == (ssize_t)(sizeof(image) - 1));
		close(fd);
		unsigned count = 0;
		CUlibrary lib;
		OK(cuModuleLoad(&mod, path));
		OK(cuModuleGetFunctionCount(&count, mod));
		CHECK(count == 3);
		OK(cuModuleUnload(mod));
		OK(cuLibraryLoadFromFile(&lib, path, NULL, NULL, 0, NULL, NULL, 0));
		OK(cuLibraryGetKernelCount(&count, lib));
		CHECK(count == 3);
		OK(cuLibraryUnload(lib));
		unlink(path);
	}

	CUdeviceptr p;
	fake_fail_next("cuMemAlloc", CUDA_ERROR_OUT_OF_MEMORY);
	EXPECT(cuMemAlloc(&p, 256), CUDA_ERROR_OUT_OF_MEMORY);
	OK(cuMemAlloc(&p, 256));
	OK(cuMemFree(p));
}

/* Threads launch at once, each in its own device's context, while modules come and go. */
#define THREADS 16
#define LAUNCHES 200

static void *worker(void *arg)
{
	long id = (long)arg;
	CUcontext ctx = id % 2 ? ctx1 : ctx0;
	CUmodule mod;
	CUdeviceptr p;
	OK(cuCtxSetCurrent(ctx));
	OK(cuMemAlloc(&p, 1024));
	for (int i = 0; i < LAUNCHES; i++) {
		CUfunction f = load_function(&mod, "k_ptr");
		OK(launch_ptr(f, NULL, p));
		OK(cuModuleUnload(mod));
	}
	OK(cuStreamSynchronize(NULL));
	OK(cuMemFree(p));
	return NULL;
}

static void test_threads(void)
{
	pthread_t t[THREADS];
	struct fake_stats before = stats();
	for (long i = 0; i < THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, worker, (void *)i) == 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	struct fake_stats after = stats();
	CHECK(after.launches == before.launches + THREADS * LAUNCHES);
	CHECK(after.launches_on[0] - before.launches_on[0] == THREADS / 2 * LAUNCHES);
	CHECK(after.sticky_errors == before.sticky_errors);
}

int main(void)
{
	int n = 0;
	OK(cuInit(0));
	OK(cuDeviceGetCount(&n));
	if (n < 2) {
		fprintf(stderr, "fake_selftest: needs two devices (FAKE_CUDA_DEVICES)\n");
		return 77;
	}
	OK(cuDevicePrimaryCtxRetain(&ctx0, 0));
	OK(cuDevicePrimaryCtxRetain(&ctx1, 1));
	test_launch_context();
	test_launch_forms();
	test_kernels();
	test_handle_reuse();
	test_operands();
	test_vmm_and_graph();
	test_sharing();
	test_shared_vmm();
	test_external_and_graph_memory();
	test_proc_address();
	test_images_and_injection();
	test_threads();
	test_green_contexts();
	OK(cuDevicePrimaryCtxRelease(0));
	OK(cuDevicePrimaryCtxRelease(1));
	if (failures)
		fprintf(stderr, "fake_selftest: %d check(s) failed\n", failures);
	else
		printf("fake_selftest: all checks passed\n");
	return failures ? 1 : 0;
}
