/* A CUDA program for the CPU suite: reaches the driver by one route, loads
 * a kernel by one API, launches it by one API in one situation, and reports
 * what the launch returned.
 *
 *   scenario ROUTE LOAD LAUNCH CASE [KERNEL]
 *   ROUTE  direct | dlsym | dlvsym | procaddr | procaddr_v1 | ptsz
 *   LOAD   file | data | dataex | fatbin | library_file | library_data |
 *          library_module | enumerate | library_enumerate
 *   LAUNCH launch | launchex | coop | multidev | graph_add | graph_add_v2 |
 *          graph_set | graph_set_v2 | graph_exec_set | graph_exec_set_v2 |
 *          graph_node | legacy | multidev_overcount (a one-entry list, numDevices 2^20)
 *   CASE   same        loaded and launched in device 0's context
 *          cross       loaded in device 0's context, launched with device 1's current
 *          stream      device 0 current, launched on a stream of device 1
 *          own_stream  device 1 current, launched on a stream of device 0 (not a crossing)
 *          kernel      the CUkernel itself, cast to CUfunction, launched in device 1
 *          reuse       loaded in ctx 0, unloaded, loaded again in ctx 1 (handles reused), launched there
 *          stream_reuse  launched on device 0's stream, which is destroyed; launched
 *                      again on a stream of device 1 that got its handle
 *   KERNEL expert (default: DeepGEMM's mangled name) | plain | any other name, as it is
 *
 * Prints "launch: <CUresult> <name>" and, for a failure, "error string: ..."
 * as DeepGEMM would.  Exit: 0 launch succeeded, 3 launch failed, 1 setup. */
/* The deprecated launch forms are exercised on purpose. */
#define CUDA_ENABLE_DEPRECATED 1
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPERT "_ZN9deep_gemm19sm90_bf16_gemm_implILj0EEEvPijjj14CUtensorMap_stS2_S2_"
#define PLAIN "vector_add"

/* Every driver function the scenario uses: exported symbol for dlsym,
 * base name and version for cuGetProcAddress. */
#define API(X)                                                                         \
	X(cuInit, "cuInit", 2000)                                                      \
	X(cuDeviceGet, "cuDeviceGet", 2000)                                            \
	X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000)                  \
	X(cuCtxSetCurrent, "cuCtxSetCurrent", 4000)                                    \
	X(cuCtxGetCurrent, "cuCtxGetCurrent", 4000)                                    \
	X(cuStreamCreate, "cuStreamCreate", 2000)                                      \
	X(cuStreamDestroy_v2, "cuStreamDestroy", 4000)                                 \
	X(cuModuleLoad, "cuModuleLoad", 2000)                                          \
	X(cuModuleLoadData, "cuModuleLoadData", 2000)                                  \
	X(cuModuleLoadDataEx, "cuModuleLoadDataEx", 2010)                              \
	X(cuModuleLoadFatBinary, "cuModuleLoadFatBinary", 2000)                        \
	X(cuModuleUnload, "cuModuleUnload", 2000)                                      \
	X(cuModuleGetFunction, "cuModuleGetFunction", 2000)                            \
	X(cuModuleGetFunctionCount, "cuModuleGetFunctionCount", 12040)                 \
	X(cuModuleEnumerateFunctions, "cuModuleEnumerateFunctions", 12040)             \
	X(cuFuncGetName, "cuFuncGetName", 12030)                                       \
	X(cuLibraryLoadData, "cuLibraryLoadData", 12000)                               \
	X(cuLibraryLoadFromFile, "cuLibraryLoadFromFile", 12000)                       \
	X(cuLibraryUnload, "cuLibraryUnload", 12000)                                   \
	X(cuLibraryGetKernel, "cuLibraryGetKernel", 12000)                             \
	X(cuLibraryGetKernelCount, "cuLibraryGetKernelCount", 12040)                   \
	X(cuLibraryEnumerateKernels, "cuLibraryEnumerateKernels", 12040)               \
	X(cuLibraryGetModule, "cuLibraryGetModule", 12000)                             \
	X(cuKernelGetFunction, "cuKernelGetFunction", 12000)                           \
	X(cuLaunchKernel, "cuLaunchKernel", 4000)                                      \
	X(cuLaunchKernelEx, "cuLaunchKernelEx", 11060)                                 \
	X(cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel", 9000)                \
	X(cuLaunchCooperativeKernelMultiDevice, "cuLaunchCooperativeKernelMultiDevice", 9000) \
	X(cuGraphCreate, "cuGraphCreate", 10000)                                       \
	X(cuGraphAddKernelNode_v1, "cuGraphAddKernelNode", 10000)                      \
	X(cuGraphAddKernelNode_v2, "cuGraphAddKernelNode", 12000)                      \
	X(cuGraphKernelNodeSetParams_v1, "cuGraphKernelNodeSetParams", 10000)          \
	X(cuGraphKernelNodeSetParams_v2, "cuGraphKernelNodeSetParams", 12000)          \
	X(cuGraphExecKernelNodeSetParams_v1, "cuGraphExecKernelNodeSetParams", 10010)  \
	X(cuGraphExecKernelNodeSetParams_v2, "cuGraphExecKernelNodeSetParams", 12000)  \
	X(cuGraphAddNode_v2, "cuGraphAddNode", 12030)                                  \
	X(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", 11040)           \
	X(cuLaunchGridAsync, "cuLaunchGridAsync", 2000)                                \
	X(cuGetErrorString, "cuGetErrorString", 6000)                                  \
	X(cuGetErrorName, "cuGetErrorName", 6000)

/* Exported names that differ from the base name. */
static const char *exported(const char *field)
{
	static const char *map[][2] = {
		{"cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain"},
		{"cuGraphAddKernelNode_v1", "cuGraphAddKernelNode"},
		{"cuGraphKernelNodeSetParams_v1", "cuGraphKernelNodeSetParams"},
		{"cuGraphExecKernelNodeSetParams_v1", "cuGraphExecKernelNodeSetParams"},
	};
	for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
		if (strcmp(map[i][0], field) == 0)
			return map[i][1];
	return field;
}

static struct {
#define X(field, base, ver) void *field;
	API(X)
#undef X
} d;

typedef CUresult (*gpa_v2)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa_v1)(const char *, void **, int, cuuint64_t);

static void die(const char *what)
{
	fprintf(stderr, "scenario: %s\n", what);
	exit(1);
}

static void resolve(const char *route)
{
	if (strcmp(route, "direct") == 0) {
		/* Linked directly: the shim's exports win over libcuda's. */
		d.cuInit = (void *)cuInit;
		d.cuDeviceGet = (void *)cuDeviceGet;
		d.cuDevicePrimaryCtxRetain = (void *)cuDevicePrimaryCtxRetain;
		d.cuCtxSetCurrent = (void *)cuCtxSetCurrent;
		d.cuCtxGetCurrent = (void *)cuCtxGetCurrent;
		d.cuStreamCreate = (void *)cuStreamCreate;
		d.cuModuleLoad = (void *)cuModuleLoad;
		d.cuModuleLoadData = (void *)cuModuleLoadData;
		d.cuModuleLoadDataEx = (void *)cuModuleLoadDataEx;
		d.cuModuleLoadFatBinary = (void *)cuModuleLoadFatBinary;
		d.cuModuleUnload = (void *)cuModuleUnload;
		d.cuModuleGetFunction = (void *)cuModuleGetFunction;
		d.cuModuleGetFunctionCount = (void *)cuModuleGetFunctionCount;
		d.cuModuleEnumerateFunctions = (void *)cuModuleEnumerateFunctions;
		d.cuFuncGetName = (void *)cuFuncGetName;
		d.cuLibraryLoadData = (void *)cuLibraryLoadData;
		d.cuLibraryLoadFromFile = (void *)cuLibraryLoadFromFile;
		d.cuLibraryUnload = (void *)cuLibraryUnload;
		d.cuLibraryGetKernel = (void *)cuLibraryGetKernel;
		d.cuLibraryGetKernelCount = (void *)cuLibraryGetKernelCount;
		d.cuLibraryEnumerateKernels = (void *)cuLibraryEnumerateKernels;
		d.cuLibraryGetModule = (void *)cuLibraryGetModule;
		d.cuKernelGetFunction = (void *)cuKernelGetFunction;
		d.cuLaunchKernel = (void *)cuLaunchKernel;
		d.cuLaunchKernelEx = (void *)cuLaunchKernelEx;
		d.cuLaunchCooperativeKernel = (void *)cuLaunchCooperativeKernel;
		d.cuLaunchCooperativeKernelMultiDevice = (void *)cuLaunchCooperativeKernelMultiDevice;
		d.cuGraphCreate = (void *)cuGraphCreate;
		d.cuGraphAddKernelNode_v2 = (void *)cuGraphAddKernelNode;
		d.cuGraphKernelNodeSetParams_v2 = (void *)cuGraphKernelNodeSetParams;
		d.cuGraphExecKernelNodeSetParams_v2 = (void *)cuGraphExecKernelNodeSetParams;
		d.cuGraphAddNode_v2 = (void *)cuGraphAddNode;
		d.cuGraphInstantiateWithFlags = (void *)cuGraphInstantiateWithFlags;
		d.cuLaunchGridAsync = (void *)cuLaunchGridAsync;
		d.cuGetErrorString = (void *)cuGetErrorString;
		d.cuGetErrorName = (void *)cuGetErrorName;
		/* The v1 graph entry points are not declared outside the driver:
		 * reach them by name like a program built against an old header. */
		void *self = dlopen(NULL, RTLD_LAZY);
		d.cuGraphAddKernelNode_v1 = dlsym(self, "cuGraphAddKernelNode");
		d.cuGraphKernelNodeSetParams_v1 = dlsym(self, "cuGraphKernelNodeSetParams");
		d.cuGraphExecKernelNodeSetParams_v1 = dlsym(self, "cuGraphExecKernelNodeSetParams");
		return;
	}
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		die("dlopen libcuda.so.1");
	int versioned = strcmp(route, "dlvsym") == 0;
	if (versioned || strcmp(route, "dlsym") == 0) {
		/* DeepGEMM's route: exported names on the handle (dlvsym: with
		 * the version the library defines them in). */
#define LOOKUP(name) (versioned ? dlvsym(h, name, "libcuda.so.1") : dlsym(h, name))
#define X(field, base, ver) d.field = LOOKUP(exported(#field));
		API(X)
#undef X
		/* The v2 graph names are the exported _v2 symbols. */
		d.cuGraphAddKernelNode_v2 = LOOKUP("cuGraphAddKernelNode_v2");
		d.cuGraphKernelNodeSetParams_v2 = LOOKUP("cuGraphKernelNodeSetParams_v2");
		d.cuGraphExecKernelNodeSetParams_v2 = LOOKUP("cuGraphExecKernelNodeSetParams_v2");
#undef LOOKUP
		return;
	}
	/* libcudart's route: cuGetProcAddress from the handle, then the
	 * self-lookup, then everything through the pointer it returned. */
	int v1 = strcmp(route, "procaddr_v1") == 0;
	cuuint64_t flags = strcmp(route, "ptsz") == 0 ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
						       : CU_GET_PROC_ADDRESS_DEFAULT;
	void *boot = dlsym(h, v1 ? "cuGetProcAddress" : "cuGetProcAddress_v2");
	if (!boot)
		die("no cuGetProcAddress");
	void *gpa = NULL;
	CUdriverProcAddressQueryResult st;
	if (v1 ? ((gpa_v1)boot)("cuGetProcAddress", &gpa, 11030, 0)
	       : ((gpa_v2)boot)("cuGetProcAddress", &gpa, 12000, 0, &st))
		die("self-lookup of cuGetProcAddress failed");
	/* Under the shim both are its exports, which RTLD_DEFAULT finds first. */
	void *exported_gpa = dlsym(RTLD_DEFAULT, v1 ? "cuGetProcAddress" : "cuGetProcAddress_v2");
	printf("self-lookup: %s\n", gpa && gpa == exported_gpa ? "hooked" : "real");
#define X(field, base, ver)                                                      \
	if (v1)                                                                  \
		((gpa_v1)gpa)(base, &d.field, ver, flags);                       \
	else                                                                     \
		((gpa_v2)gpa)(base, &d.field, ver, flags, &st);
	API(X)
#undef X
}

#define CALL(fn, ...) ((CUresult(*)())d.fn)(__VA_ARGS__)
#define CHECK(call)                                                              \
	do {                                                                     \
		CUresult rc_ = (call);                                           \
		if (rc_ != CUDA_SUCCESS) {                                       \
			fprintf(stderr, "scenario: %s failed: %d\n", #call, rc_); \
			exit(1);                                                 \
		}                                                                \
	} while (0)

static char image[512];
static char image_path[64];

static void make_image(const char *kernel)
{
	snprintf(image, sizeof image, "//ctxguard-fake-image\n.kernel %s %s\n", kernel,
		 strcmp(kernel, EXPERT) == 0 ? "8,4,4,4,128,128,128" : "8,8,8,4");
	snprintf(image_path, sizeof image_path, "/tmp/ctxguard-scenario-%d.img", (int)getpid());
	FILE *f = fopen(image_path, "w");
	if (!f || fputs(image, f) < 0 || fclose(f) != 0)
		die("cannot write the image file");
}

/* Loads the kernel in the current context by one API; returns the
 * CUfunction (or, for CASE kernel, the CUkernel cast to CUfunction). */
static CUfunction load(const char *how, const char *kernel, int want_kernel, CUlibrary *lib,
		       CUmodule *mod)
{
	CUfunction f = NULL;
	CUkernel k = NULL;
	*lib = NULL;
	*mod = NULL;
	if (strncmp(how, "library", 7) == 0) {
		if (strcmp(how, "library_file") == 0)
			CHECK(CALL(cuLibraryLoadFromFile, lib, image_path, NULL, NULL, 0, NULL, NULL, 0));
		else
			CHECK(CALL(cuLibraryLoadData, lib, image, NULL, NULL, 0, NULL, NULL, 0));
		if (strcmp(how, "library_enumerate") == 0) {
			unsigned n = 0;
			CHECK(CALL(cuLibraryGetKernelCount, &n, *lib));
			CHECK(n == 1 ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN);
			CHECK(CALL(cuLibraryEnumerateKernels, &k, 1u, *lib));
		} else {
			CHECK(CALL(cuLibraryGetKernel, &k, *lib, kernel));
		}
		if (want_kernel)
			return (CUfunction)k;
		if (strcmp(how, "library_module") == 0) {
			CHECK(CALL(cuLibraryGetModule, mod, *lib));
			CHECK(CALL(cuModuleGetFunction, &f, *mod, kernel));
			*mod = NULL;       /* owned by the library */
		} else {
			CHECK(CALL(cuKernelGetFunction, &f, k));
		}
		return f;
	}
	if (strcmp(how, "file") == 0)
		CHECK(CALL(cuModuleLoad, mod, image_path));
	else if (strcmp(how, "dataex") == 0)
		CHECK(CALL(cuModuleLoadDataEx, mod, image, 0u, NULL, NULL));
	else if (strcmp(how, "fatbin") == 0)
		CHECK(CALL(cuModuleLoadFatBinary, mod, image));
	else
		CHECK(CALL(cuModuleLoadData, mod, image));
	if (strcmp(how, "enumerate") == 0) {
		unsigned n = 0;
		CHECK(CALL(cuModuleGetFunctionCount, &n, *mod));
		CHECK(CALL(cuModuleEnumerateFunctions, &f, 1u, *mod));
	} else {
		CHECK(CALL(cuModuleGetFunction, &f, *mod, kernel));
	}
	return f;
}

/* cur: a stream of the current context, for the forms that need one. */
static CUresult launch(const char *how, CUfunction f, CUstream s, CUstream cur)
{
	/* Every parameter slot is big enough for a CUtensorMap. */
	static CUtensorMap arg[8];
	void *params[8] = {&arg[0], &arg[1], &arg[2], &arg[3], &arg[4], &arg[5], &arg[6], &arg[7]};
	if (strcmp(how, "launchex") == 0) {
		CUlaunchAttribute attr = {.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION};
		attr.value.clusterDim.x = attr.value.clusterDim.y = attr.value.clusterDim.z = 1;
		CUlaunchConfig cfg = {.gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 128,
				      .blockDimY = 1, .blockDimZ = 1, .hStream = s,
				      .attrs = &attr, .numAttrs = 1};
		return CALL(cuLaunchKernelEx, &cfg, f, params, NULL);
	}
	if (strcmp(how, "coop") == 0)
		return CALL(cuLaunchCooperativeKernel, f, 1u, 1u, 1u, 32u, 1u, 1u, 0u, s, params);
	if (strncmp(how, "multidev", 8) == 0) {
		CUDA_LAUNCH_PARAMS p = {.function = f, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
					.blockDimX = 32, .blockDimY = 1, .blockDimZ = 1,
					.hStream = s ? s : cur, .kernelParams = params};
		unsigned n = strcmp(how, "multidev_overcount") == 0 ? 1u << 20 : 1u;
		return CALL(cuLaunchCooperativeKernelMultiDevice, &p, n, 0u);
	}
	if (strcmp(how, "legacy") == 0)
		return CALL(cuLaunchGridAsync, f, 1, 1, s);
	if (strncmp(how, "graph", 5) == 0) {
		CUgraph g;
		CUgraphNode node;
		CHECK(CALL(cuGraphCreate, &g, 0u));
		CUDA_KERNEL_NODE_PARAMS_v1 p1 = {.func = f, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
						 .blockDimX = 32, .blockDimY = 1, .blockDimZ = 1,
						 .kernelParams = params};
		CUDA_KERNEL_NODE_PARAMS_v2 p2 = {.func = f, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
						 .blockDimX = 32, .blockDimY = 1, .blockDimZ = 1,
						 .kernelParams = params};
		if (strcmp(how, "graph_add") == 0)
			return CALL(cuGraphAddKernelNode_v1, &node, g, NULL, (size_t)0, &p1);
		if (strcmp(how, "graph_add_v2") == 0)
			return CALL(cuGraphAddKernelNode_v2, &node, g, NULL, (size_t)0, &p2);
		if (strcmp(how, "graph_node") == 0) {
			CUgraphNodeParams np;
			memset(&np, 0, sizeof np);
			np.type = CU_GRAPH_NODE_TYPE_KERNEL;
			np.kernel.func = f;
			np.kernel.gridDimX = np.kernel.gridDimY = np.kernel.gridDimZ = 1;
			np.kernel.blockDimX = 32;
			np.kernel.blockDimY = np.kernel.blockDimZ = 1;
			np.kernel.kernelParams = params;
			return CALL(cuGraphAddNode_v2, &node, g, NULL, NULL, (size_t)0, &np);
		}
		/* The *SetParams forms: a node built from a harmless kernel of
		 * the launch context, then re-pointed at f. */
		CUmodule hm;
		CUfunction harmless;
		static const char plain[] = "//ctxguard-fake-image\n.kernel " PLAIN " 8,8,8,4\n";
		CHECK(CALL(cuModuleLoadData, &hm, plain));
		CHECK(CALL(cuModuleGetFunction, &harmless, hm, PLAIN));
		p1.func = p2.func = harmless;
		CHECK(CALL(cuGraphAddKernelNode_v2, &node, g, NULL, (size_t)0, &p2));
		p1.func = p2.func = f;
		if (strcmp(how, "graph_set") == 0)
			return CALL(cuGraphKernelNodeSetParams_v1, node, &p1);
		if (strcmp(how, "graph_set_v2") == 0)
			return CALL(cuGraphKernelNodeSetParams_v2, node, &p2);
		CUgraphExec exec;
		CHECK(CALL(cuGraphInstantiateWithFlags, &exec, g, (unsigned long long)0));
		if (strcmp(how, "graph_exec_set") == 0)
			return CALL(cuGraphExecKernelNodeSetParams_v1, exec, node, &p1);
		return CALL(cuGraphExecKernelNodeSetParams_v2, exec, node, &p2);
	}
	return CALL(cuLaunchKernel, f, 1u, 1u, 1u, 32u, 1u, 1u, 0u, s, params, NULL);
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: scenario ROUTE LOAD LAUNCH CASE [expert|plain]\n");
		return 1;
	}
	const char *route = argv[1], *how = argv[2], *api = argv[3], *scase = argv[4];
	const char *kernel = argc <= 5 || strcmp(argv[5], "expert") == 0 ? EXPERT
			     : strcmp(argv[5], "plain") == 0 ? PLAIN : argv[5];
	resolve(route);
	make_image(kernel);
	CUdevice dev0, dev1;
	CUcontext ctx0, ctx1;
	CHECK(CALL(cuInit, 0u));
	CHECK(CALL(cuDeviceGet, &dev0, 0));
	CHECK(CALL(cuDeviceGet, &dev1, 1));
	CHECK(CALL(cuDevicePrimaryCtxRetain, &ctx0, dev0));
	CHECK(CALL(cuDevicePrimaryCtxRetain, &ctx1, dev1));
	CUstream s0, s1;
	CHECK(CALL(cuCtxSetCurrent, ctx1));
	CHECK(CALL(cuStreamCreate, &s1, 0u));
	CHECK(CALL(cuCtxSetCurrent, ctx0));
	CHECK(CALL(cuStreamCreate, &s0, 0u));

	CUlibrary lib;
	CUmodule mod;
	CUfunction f = load(how, kernel, strcmp(scase, "kernel") == 0, &lib, &mod);
	CUstream stream = NULL;
	if (strcmp(scase, "cross") == 0 || strcmp(scase, "kernel") == 0) {
		CHECK(CALL(cuCtxSetCurrent, ctx1));
	} else if (strcmp(scase, "stream") == 0) {
		stream = s1;
	} else if (strcmp(scase, "own_stream") == 0) {
		CHECK(CALL(cuCtxSetCurrent, ctx1));
		stream = s0;
	} else if (strcmp(scase, "reuse") == 0) {
		if (lib)
			CHECK(CALL(cuLibraryUnload, lib));
		if (mod)
			CHECK(CALL(cuModuleUnload, mod));
		CHECK(CALL(cuCtxSetCurrent, ctx1));
		CUfunction again = load(how, kernel, 0, &lib, &mod);
		printf("handle reused: %s\n", again == f ? "yes" : "no");
		f = again;
	} else if (strcmp(scase, "stream_reuse") == 0) {
		/* A first launch on s0, clean: its context is known now. */
		CHECK(launch(api, f, s0, s0));
		CHECK(CALL(cuStreamDestroy_v2, s0));
		CHECK(CALL(cuCtxSetCurrent, ctx1));
		CUstream again;
		CHECK(CALL(cuStreamCreate, &again, 0u));
		printf("handle reused: %s\n", again == s0 ? "yes" : "no");
		CHECK(CALL(cuCtxSetCurrent, ctx0));
		stream = s0 = again;
	}
	unlink(image_path);
	CUcontext now;
	CHECK(CALL(cuCtxGetCurrent, &now));
	CUresult rc = launch(api, f, stream, now == ctx0 ? s0 : s1);
	const char *name = "?", *str = "?";
	CALL(cuGetErrorName, rc, &name);
	printf("launch: %d %s\n", (int)rc, name);
	if (rc != CUDA_SUCCESS) {
		CALL(cuGetErrorString, rc, &str);
		printf("error string: %s\n", str);
	}
	fflush(stdout);
	return rc == CUDA_SUCCESS ? 0 : 3;
}
