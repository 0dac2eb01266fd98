/* launch_overhead -- host cost of a kernel launch, to measure what ctxguard
 * adds to it (bench/run_overhead.py runs it with and without the shim).
 *
 * usage: launch_overhead driver|runtime|expert [LAUNCHES [REPS]]
 *        launch_overhead driver|runtime|expert serve|paired
 *        launch_overhead driver|runtime|expert calls N
 *   driver   cuLaunchKernel of an empty kernel loaded with cuModuleLoadData
 *            from the PTX below; libcuda is linked directly, as Triton does.
 *   runtime  cudaLaunchKernel of the same kernel, loaded with
 *            cudaLibraryLoadData + cudaLibraryGetKernel; cudart is linked
 *            statically and reaches the driver through cuGetProcAddress, as
 *            PyTorch's does.
 *   expert   cuLaunchKernelEx of an empty kernel named and shaped like
 *            DeepGEMM's (namespace deep_gemm; 3 pointers + 3 CUtensorMap
 *            built by cuTensorMapEncodeTiled over device-0 memory), so the
 *            default policy checks every launch in full: function context,
 *            each pointer and each descriptor's global address.
 * Every mode warms up, then REPS times launches LAUNCHES kernels on the
 * legacy NULL stream in a loop, synchronises, and divides the host
 * wall-clock time by LAUNCHES.  Default: 5 reps of 200000 (1M timed).
 * Prints one line per rep and finally
 *   launch_overhead: MODE: median U us/launch (min A, max B; REPS reps of LAUNCHES)
 * serve: sets up and warms up once, prints "ready", then for each line N
 * read from stdin launches N kernels, synchronises and prints the host
 * time per launch in us, until end of input (bench/run_overhead.py runs a
 * plain and a preloaded copy side by side and alternates them).
 * paired: serve in one process, run under ctxguard, each batch N launched
 *   twice, side by side: through ctxguard (the driver entry point as
 *   linked) and past it (the driver's own, read from libcuda's symbol
 *   table), in chunks of PAIRED_CHUNK that alternate between the sides;
 *   prints "PLAIN SHIM" in us per launch.  The runtime mode launches its
 *   cudaKernel_t here as the CUkernel it is, with cuLaunchKernel: the one
 *   driver call libcudart 13.0 makes per cudaLaunchKernel.
 * calls N: times each of N launch calls on its own and prints the 10th, 50th
 * and 90th percentile in ns: the host cost of one call, which the shim adds
 * to, apart from the waits of a full launch queue (those land in the upper
 * percentiles).
 * Exits 0, or 1 on a usage or CUDA error (printed with its name and text).
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cu_check.h"
#include "../tests/libcuda_symbol.h"

enum { WARMUP = 20000, DEFAULT_LAUNCHES = 200000, DEFAULT_REPS = 5 };

/* The expert's name demangles to deep_gemm::launch_bench(int*, float*,
 * float*, CUtensorMap_st, CUtensorMap_st, CUtensorMap_st); the parameter
 * declarations are nvcc's for that signature (CUtensorMap aligned to 128). */
#define EXPERT_NAME "_ZN9deep_gemm12launch_benchEPiPfS1_14CUtensorMap_stS2_S2_"
static const char ptx[] =
	".version 7.0\n"
	".target sm_80\n"
	".address_size 64\n"
	".visible .entry ctxguard_bench_empty()\n"
	"{\n"
	"	ret;\n"
	"}\n"
	".visible .entry " EXPERT_NAME "(\n"
	"	.param .u64 grouped_layout,\n"
	"	.param .u64 sfa,\n"
	"	.param .u64 sfb,\n"
	"	.param .align 128 .b8 tensor_map_a[128],\n"
	"	.param .align 128 .b8 tensor_map_b[128],\n"
	"	.param .align 128 .b8 tensor_map_d[128]\n"
	")\n"
	"{\n"
	"	ret;\n"
	"}\n";

static void runtime_check(cudaError_t e, const char *call, int line)
{
	if (e == cudaSuccess)
		return;
	fprintf(stderr, "launch_overhead: line %d: %s: %d (%s, %s)\n", line, call, (int)e,
		cudaGetErrorName(e), cudaGetErrorString(e));
	exit(1);
}

#define RT(call) runtime_check((call), #call, __LINE__)

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
			      unsigned, unsigned, CUstream, void **, void **);
typedef CUresult (*launch_ex_fn)(const CUlaunchConfig *, CUfunction, void **, void **);

/* One launch of the mode's kernel; state set up by the mode's prepare. */
static struct {
	CUfunction fn;
	cudaKernel_t kernel;
	void *args[6];
	CUdeviceptr ptr[3];
	CUtensorMap map[3];
	CUlaunchConfig cfg;
	/* the driver entry points the launches call (paired swaps them) */
	launch_fn launch;
	launch_ex_fn launch_ex;
} k = { .launch = cuLaunchKernel, .launch_ex = cuLaunchKernelEx };

static void launch_driver(void)
{
	CU(k.launch(k.fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
}

/* What libcudart 13.0's cudaLaunchKernel asks of the driver (paired) */
static void launch_runtime_kernel(void)
{
	CU(k.launch((CUfunction)k.kernel, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
}

static void launch_runtime(void)
{
	dim3 one = { 1, 1, 1 };
	RT(cudaLaunchKernel((const void *)k.kernel, one, one, NULL, 0, NULL));
}

static void launch_expert(void)
{
	CU(k.launch_ex(&k.cfg, k.fn, k.args, NULL));
}

static void sync_driver(void)
{
	CU(cuCtxSynchronize());
}

static void sync_runtime(void)
{
	RT(cudaDeviceSynchronize());
}

static void driver_context(CUmodule *mod)
{
	CUdevice dev;
	CUcontext ctx;

	CU(cuInit(0));
	CU(cuDeviceGet(&dev, 0));
	CU(cuDevicePrimaryCtxRetain(&ctx, dev));
	CU(cuCtxSetCurrent(ctx));
	CU(cuModuleLoadData(mod, ptx));
}

static void prepare_driver(void)
{
	CUmodule mod;

	driver_context(&mod);
	CU(cuModuleGetFunction(&k.fn, mod, "ctxguard_bench_empty"));
}

static void prepare_runtime(void)
{
	cudaLibrary_t lib;

	RT(cudaSetDevice(0));
	RT(cudaLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
	RT(cudaLibraryGetKernel(&k.kernel, lib, "ctxguard_bench_empty"));
}

/* A 64 x 64 bf16 tile, as DeepGEMM's descriptors describe its operands. */
static void encode(CUtensorMap *map, CUdeviceptr base)
{
	const cuuint64_t dims[2] = { 64, 64 };
	const cuuint64_t strides[1] = { 64 * 2 };
	const cuuint32_t box[2] = { 64, 64 };
	const cuuint32_t elem_strides[2] = { 1, 1 };

	CU(cuTensorMapEncodeTiled(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)base, dims, strides,
				  box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
				  CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
				  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
}

static void prepare_expert(void)
{
	enum { TILE = 64 * 64 * 2 };
	CUmodule mod;
	CUdeviceptr base;

	driver_context(&mod);
	CU(cuModuleGetFunction(&k.fn, mod, EXPERT_NAME));
	CU(cuMemAlloc(&base, 6 * TILE));
	for (int i = 0; i < 3; i++) {
		k.ptr[i] = base + (CUdeviceptr)i * TILE;
		encode(&k.map[i], base + (CUdeviceptr)(3 + i) * TILE);
		k.args[i] = &k.ptr[i];
		k.args[3 + i] = &k.map[i];
	}
	memset(&k.cfg, 0, sizeof k.cfg);
	k.cfg.gridDimX = k.cfg.gridDimY = k.cfg.gridDimZ = 1;
	k.cfg.blockDimX = k.cfg.blockDimY = k.cfg.blockDimZ = 1;
	k.cfg.hStream = NULL;
}

static const struct mode {
	const char *name;
	void (*prepare)(void);
	void (*launch)(void);
	void (*sync)(void);
	void (*paired_launch)(void);
} modes[] = {
	{ "driver", prepare_driver, launch_driver, sync_driver, launch_driver },
	{ "runtime", prepare_runtime, launch_runtime, sync_runtime, launch_runtime_kernel },
	{ "expert", prepare_expert, launch_expert, sync_driver, launch_expert },
};

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static long positive(const char *s, const char *what)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (*s == 0 || *end != 0 || v <= 0) {
		fprintf(stderr, "launch_overhead: %s must be a positive integer, not '%s'\n", what, s);
		exit(1);
	}
	return v;
}

static double timed(const struct mode *m, long launches)
{
	double t0 = now_us();
	for (long i = 0; i < launches; i++)
		m->launch();
	m->sync();
	return (now_us() - t0) / (double)launches;
}

static int calls(const struct mode *m, long n)
{
	double *ns = malloc((size_t)n * sizeof *ns);
	if (!ns)
		return 1;
	for (long i = 0; i < n; i++) {
		double t0 = now_us();
		m->launch();
		ns[i] = (now_us() - t0) * 1e3;
	}
	m->sync();
	qsort(ns, (size_t)n, sizeof *ns, by_value);
	printf("launch_overhead: %s: per call p10 %.0f p50 %.0f p90 %.0f ns (%ld calls)\n", m->name,
	       ns[n / 10], ns[n / 2], ns[n * 9 / 10], n);
	free(ns);
	return 0;
}

/* paired: chunks of this many launches take turns, so that each side sees
 * the same drift of the machine, millisecond by millisecond */
enum { PAIRED_CHUNK = 1000 };

/* paired: the entry points of side 0, past ctxguard (the driver's own), and
 * of side 1, through it (as linked) */
static struct {
	launch_fn launch[2];
	launch_ex_fn launch_ex[2];
} sides;

static int find_sides(void)
{
	void *own = libcuda_symbol("cuLaunchKernel", NULL);
	void *own_ex = libcuda_symbol("cuLaunchKernelEx", NULL);

	if (!own || !own_ex)
		return 1;
	/* POSIX lets a looked-up address become a function pointer */
	memcpy(&sides.launch[0], &own, sizeof own);
	memcpy(&sides.launch_ex[0], &own_ex, sizeof own_ex);
	sides.launch[1] = k.launch;
	sides.launch_ex[1] = k.launch_ex;
	if (sides.launch[0] == sides.launch[1])
		fprintf(stderr, "launch_overhead: paired: no shim in front of the driver "
				"(LD_PRELOAD=libctxguard.so); both sides are the driver's\n");
	return 0;
}

/* n launches a side, in chunks taking turns; prints both sides' us/launch */
static void paired_batch(const struct mode *m, long n)
{
	double us[2] = { 0, 0 };

	for (long done = 0, c = 0; done < n; done += PAIRED_CHUNK, c++)
		for (int j = 0; j < 2; j++) {
			int side = (int)((c + j) & 1);
			long chunk = n - done < PAIRED_CHUNK ? n - done : PAIRED_CHUNK;
			k.launch = sides.launch[side];
			k.launch_ex = sides.launch_ex[side];
			double t0 = now_us();
			for (long i = 0; i < chunk; i++)
				m->paired_launch();
			us[side] += now_us() - t0;
		}
	m->sync();
	printf("%.4f %.4f\n", us[0] / (double)n, us[1] / (double)n);
}

static int serve(const struct mode *m, int paired)
{
	char line[64];

	if (paired && find_sides() != 0)
		return 1;
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = 0;
		long n = positive(line, "a batch");
		if (paired)
			paired_batch(m, n);
		else
			printf("%.4f\n", timed(m, n));
		fflush(stdout);
	}
	return 0;
}

int main(int argc, char **argv)
{
	const struct mode *m = NULL;

	for (size_t i = 0; argc >= 2 && i < sizeof modes / sizeof modes[0]; i++)
		if (strcmp(argv[1], modes[i].name) == 0)
			m = &modes[i];
	if (!m || argc > 4) {
		fprintf(stderr,
			"usage: %s driver|runtime|expert [LAUNCHES [REPS] | serve | paired | calls N]\n",
			argv[0]);
		return 1;
	}
	int serving = argc == 3 && strcmp(argv[2], "serve") == 0;
	int paired = argc == 3 && strcmp(argv[2], "paired") == 0;
	int per_call = argc == 4 && strcmp(argv[2], "calls") == 0;
	long launches = serving || paired ? 0 : per_call ? positive(argv[3], "N")
			: argc > 2 ? positive(argv[2], "LAUNCHES") : DEFAULT_LAUNCHES;
	long reps = argc > 3 ? positive(argv[3], "REPS") : DEFAULT_REPS;
	double *us = calloc((size_t)reps, sizeof *us);
	if (!us)
		return 1;

	m->prepare();
	timed(m, WARMUP);
	if (serving || paired) {
		free(us);
		return serve(m, paired);
	}
	if (per_call) {
		free(us);
		return calls(m, launches);
	}
	for (long r = 0; r < reps; r++) {
		us[r] = timed(m, launches);
		printf("launch_overhead: %s: rep %ld: %.4f us/launch\n", m->name, r + 1, us[r]);
	}
	qsort(us, (size_t)reps, sizeof *us, by_value);
	double median = reps % 2 ? us[reps / 2] : (us[reps / 2 - 1] + us[reps / 2]) / 2;
	printf("launch_overhead: %s: median %.4f us/launch (min %.4f, max %.4f; %ld reps of %ld)\n",
	       m->name, median, us[0], us[reps - 1], reps, launches);
	free(us);
	return 0;
}
