/* A CUDA program for the backstop's tests: sets up through the hooks, then
 * launches by a route they do not cover (the fake driver's own entry
 * points, fake_entry_point), and may take CUPTI itself like a profiler.
 *
 *   unhooked LAUNCH CASE [CUPTI]
 *   LAUNCH hooked (the exported cuLaunchKernel: through the hooks) |
 *          launch | launch_ptsz | launchex | coop | multidev | legacy | graph |
 *          legacy_params (cuLaunchGridAsync, device 1's memory as its first
 *          parameter, written by cuParamSetv through the hooks) |
 *          threads (THREADS x LAUNCHES cuLaunchKernel past the hooks at once)
 *   CASE   same   loaded and launched in device 0's context
 *          cross  loaded in device 0's context, launched with device 1's current
 *   CUPTI  none (default) | before: subscribes before the first CUDA call |
 *          after: subscribes after the set-up, as a profile starting later |
 *          after_global: the same, with CUPTI loaded RTLD_GLOBAL and its
 *          subscribe looked up by name (RTLD_DEFAULT: ctxguard's export)
 *
 * CUPTI is the library CTXGUARD_CUPTI names.  Prints "subscribe: N" (the
 * program's own cuptiSubscribe), "launch: <CUresult>" and, when it
 * subscribed, "profiler callbacks: N" (launch entries it was called for).
 * Exit: 0 launch succeeded, 3 failed, 1 set-up.  Links nothing CUDA: the
 * driver is dlopened, so that "before" really comes first. */
/* The multi-device form is deprecated, and still a launch API. */
#define CUDA_ENABLE_DEPRECATED 1
#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPERT "_ZN9deep_gemm19sm90_bf16_gemm_implILj0EEEvPijjj14CUtensorMap_stS2_S2_"

static __attribute__((noreturn)) void die(const char *what)
{
	fprintf(stderr, "unhooked: %s\n", what);
	exit(1);
}

#define CHECK(call)                                                              \
	do {                                                                     \
		CUresult rc_ = (call);                                           \
		if (rc_ != CUDA_SUCCESS) {                                       \
			fprintf(stderr, "unhooked: %s failed: %d\n", #call, rc_); \
			exit(1);                                                 \
		}                                                                \
	} while (0)

static _Atomic int profiler_calls;

static void CUPTIAPI profiler(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id,
			      const void *data)
{
	(void)ud;
	(void)d;
	(void)id;
	if (((const CUpti_CallbackData *)data)->callbackSite == CUPTI_API_ENTER)
		atomic_fetch_add(&profiler_calls, 1);
}

/* The program's own subscriber, on every launch API the fake traces. */
static void take_cupti(int global)
{
	const char *path = getenv("CTXGUARD_CUPTI");
	void *h = path ? dlopen(path, RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL)) : NULL;
	if (!h)
		die("cannot load CTXGUARD_CUPTI");
	CUptiResult (*sub)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *) =
		(CUptiResult(*)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *))dlsym(
			global ? RTLD_DEFAULT : h, "cuptiSubscribe");
	CUptiResult (*domain)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain) =
		(CUptiResult(*)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain))dlsym(
			h, "cuptiEnableDomain");
	if (!sub || !domain)
		die("no cuptiSubscribe");
	CUpti_SubscriberHandle s;
	CUptiResult r = sub(&s, profiler, NULL);
	printf("subscribe: %d\n", (int)r);
	if (r == CUPTI_SUCCESS && domain(1, s, CUPTI_CB_DOMAIN_DRIVER_API) != CUPTI_SUCCESS)
		die("cuptiEnableDomain");
}

static void *cuda;

static void *sym(const char *name)
{
	void *p = dlsym(cuda, name);
	if (!p)
		die(name);
	return p;
}

/* The driver's own entry point, past every hook. */
static void *raw(const char *base, int per_thread)
{
	void *(*entry)(const char *, int) = (void *(*)(const char *, int))sym("fake_entry_point");
	void *p = entry(base, per_thread);
	if (!p)
		die(base);
	return p;
}

#define D(name) ((__typeof__(&name))sym(#name))

enum { THREADS = 8, LAUNCHES = 50 };
struct worker {
	CUcontext ctx;
	CUfunction f;
	void **params;
	CUresult rc;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	__typeof__(&cuLaunchKernel) launch = (__typeof__(&cuLaunchKernel))raw("cuLaunchKernel", 0);
	w->rc = D(cuCtxSetCurrent)(w->ctx);
	for (int i = 0; i < LAUNCHES && w->rc == CUDA_SUCCESS; i++)
		w->rc = launch(w->f, 1, 1, 1, 32, 1, 1, 0, NULL, w->params, NULL);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		die("usage: unhooked LAUNCH CASE [none|before|after]");
	const char *api = argv[1], *scase = argv[2], *when = argc > 3 ? argv[3] : "none";
	if (strcmp(when, "before") == 0)
		take_cupti(0);
	if (!(cuda = dlopen("libcuda.so.1", RTLD_NOW)))
		die("dlopen libcuda.so.1");
	CUdevice dev0, dev1;
	CUcontext ctx0, ctx1;
	CHECK(D(cuInit)(0));
	CHECK(D(cuDeviceGet)(&dev0, 0));
	CHECK(D(cuDeviceGet)(&dev1, 1));
	CHECK(D(cuDevicePrimaryCtxRetain)(&ctx0, dev0));
	CHECK(D(cuDevicePrimaryCtxRetain)(&ctx1, dev1));
	CHECK(D(cuCtxSetCurrent)(ctx0));
	static const char image[] = "//ctxguard-fake-image\n.kernel " EXPERT " 8,4,4,4,128,128,128\n";
	CUmodule mod;
	CUfunction f;
	CHECK(D(cuModuleLoadData)(&mod, image));
	CHECK(D(cuModuleGetFunction)(&f, mod, EXPERT));
	/* A graph of one node, built through the hooks (checked there). */
	CUgraph g;
	CUgraphNode node;
	CUgraphExec exec;
	static CUtensorMap arg[8];
	void *params[8] = {&arg[0], &arg[1], &arg[2], &arg[3], &arg[4], &arg[5], &arg[6], &arg[7]};
	CUDA_KERNEL_NODE_PARAMS kp = {.func = f, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
				      .blockDimX = 32, .blockDimY = 1, .blockDimZ = 1,
				      .kernelParams = params};
	CHECK(D(cuGraphCreate)(&g, 0));
	CHECK(((CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
			    const CUDA_KERNEL_NODE_PARAMS *))sym("cuGraphAddKernelNode_v2"))(
		&node, g, NULL, 0, &kp));
	CHECK(((CUresult(*)(CUgraphExec *, CUgraph, unsigned long long))sym(
		"cuGraphInstantiateWithFlags"))(&exec, g, 0));
	if (strcmp(scase, "cross") == 0)
		CHECK(D(cuCtxSetCurrent)(ctx1));
	CUstream s;
	CHECK(D(cuStreamCreate)(&s, 0));
	if (strncmp(when, "after", 5) == 0)
		take_cupti(when[5] != 0);

	CUresult rc;
	if (strcmp(api, "hooked") == 0) {
		rc = D(cuLaunchKernel)(f, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL);
	} else if (strncmp(api, "launch", 6) == 0 && strcmp(api, "launchex") != 0) {
		rc = ((__typeof__(&cuLaunchKernel))raw("cuLaunchKernel", api[6] != 0))(
			f, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL);
	} else if (strcmp(api, "launchex") == 0) {
		CUlaunchConfig cfg = {.gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 128,
				      .blockDimY = 1, .blockDimZ = 1};
		rc = ((__typeof__(&cuLaunchKernelEx))raw("cuLaunchKernelEx", 0))(&cfg, f, params,
									      NULL);
	} else if (strcmp(api, "coop") == 0) {
		rc = ((__typeof__(&cuLaunchCooperativeKernel))raw("cuLaunchCooperativeKernel", 0))(
			f, 1, 1, 1, 32, 1, 1, 0, NULL, params);
	} else if (strcmp(api, "multidev") == 0) {
		CUDA_LAUNCH_PARAMS p = {.function = f, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
					.blockDimX = 32, .blockDimY = 1, .blockDimZ = 1,
					.hStream = s, .kernelParams = params};
		rc = ((__typeof__(&cuLaunchCooperativeKernelMultiDevice))raw(
			"cuLaunchCooperativeKernelMultiDevice", 0))(&p, 1, 0);
	} else if (strncmp(api, "legacy", 6) == 0) {
		if (api[6]) {
			CUdeviceptr other;
			CUcontext cur;
			CHECK(D(cuCtxGetCurrent)(&cur));
			CHECK(D(cuCtxSetCurrent)(ctx1));
			CHECK(D(cuMemAlloc_v2)(&other, 1 << 20));
			CHECK(D(cuCtxSetCurrent)(cur));
			CHECK(D(cuParamSetv)(f, 0, &other, sizeof other));
			CHECK(D(cuParamSetSize)(f, sizeof other));
		}
		rc = ((__typeof__(&cuLaunchGridAsync))raw("cuLaunchGridAsync", 0))(f, 1, 1, NULL);
	} else if (strcmp(api, "threads") == 0) {
		pthread_t t[THREADS];
		struct worker w[THREADS];
		CUcontext cur;
		CHECK(D(cuCtxGetCurrent)(&cur));
		for (int i = 0; i < THREADS; i++) {
			w[i] = (struct worker){cur, f, params, CUDA_SUCCESS};
			if (pthread_create(&t[i], NULL, work, &w[i]))
				die("pthread_create");
		}
		rc = CUDA_SUCCESS;
		for (int i = 0; i < THREADS; i++) {
			pthread_join(t[i], NULL);
			if (w[i].rc != CUDA_SUCCESS)
				rc = w[i].rc;
		}
	} else if (strcmp(api, "graph") == 0) {
		rc = ((__typeof__(&cuGraphLaunch))raw("cuGraphLaunch", 0))(exec, s);
	} else {
		die("unknown LAUNCH");
	}
	printf("launch: %d\n", (int)rc);
	if (strcmp(when, "none") != 0)
		printf("profiler callbacks: %d\n", atomic_load(&profiler_calls));
	return rc == CUDA_SUCCESS ? 0 : 3;
}
