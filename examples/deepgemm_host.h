/* What the DeepGEMM route programs (deepgemm_route.c, deepgemm_redirect.c)
 * share: libcuda reached only through dlopen + dlsym, as DeepGEMM does;
 * DeepGEMM's driver-error message; their exit codes; bf16 on the host; the
 * fixtures' value generator (kernels/fixtures/fixture_ptx.cuh's unit_hash).
 *
 * The includer defines DG_PROG (its name, for messages) and
 * DRIVER_CALLS(X), X(f) for every driver entry point it uses (at least
 * cuDeviceGet, cuDeviceGetCount, cuDevicePrimaryCtxRetain, cuCtxCreate and
 * cuCtxSetCurrent, for open_contexts), before including this file; each is
 * resolved by its header name (possibly versioned, e.g. cuMemAlloc_v2) into
 * drv.f. */
#ifndef DEEPGEMM_HOST_H
#define DEEPGEMM_HOST_H

#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum exit_code { EXIT_OK, EXIT_SETUP, EXIT_WRONG, EXIT_DRIVER, EXIT_CORRUPT, EXIT_UNAVAILABLE };

#define SYMBOL_NAME(f) SYMBOL_NAME_(f)
#define SYMBOL_NAME_(f) #f
#define DECLARE_MEMBER(f) __typeof__(f) *f;
static struct { DRIVER_CALLS(DECLARE_MEMBER) } drv;

static inline void load_driver(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, DG_PROG ": dlopen(libcuda.so.1): %s\n", dlerror());
		exit(EXIT_SETUP);
	}
#define RESOLVE(f) \
	if (!(drv.f = (__typeof__(drv.f))dlsym(h, SYMBOL_NAME(f)))) { \
		fprintf(stderr, DG_PROG ": dlsym(%s) failed\n", SYMBOL_NAME(f)); \
		exit(EXIT_SETUP); \
	}
	DRIVER_CALLS(RESOLVE)
#undef RESOLVE
}

/* DeepGEMM's DG_CUDA_DRIVER_CHECK message, then the exit it stands for. */
static inline void driver_check(CUresult e, const char *file, int line, int code)
{
	const char *name = NULL, *info = NULL;

	if (e == CUDA_SUCCESS)
		return;
	if (drv.cuGetErrorName(e, &name) != CUDA_SUCCESS || !name)
		name = "<unknown>";
	if (drv.cuGetErrorString(e, &info) != CUDA_SUCCESS || !info)
		info = "<unknown>";
	fprintf(stderr, "CUDA driver error (%s:%d): %d (%s, %s)\n", file, line, (int)e, name, info);
	exit(code);
}
#define CHECK(call) driver_check((call), __FILE__, __LINE__, EXIT_SETUP)
#define CHECK_GEMM(call) driver_check((call), __FILE__, __LINE__, EXIT_DRIVER)

/* The programs' second context, "device 1" in their words: device 1's
 * primary context, or, with --created as the first argument, a context that
 * cuCtxCreate makes on device 0.  A device holds several contexts, and the
 * driver refuses a function of one in another (400) as across devices, so
 * one GPU reproduces the handle crossing; memory of a created context is
 * device 0's, so it cannot reproduce an operand on another device. */
struct contexts {
	int created;            /* ctx[1] is a created context on device 0 */
	const char *second;     /* how messages name ctx[1] */
	CUdevice dev[2];
	CUcontext ctx[2];
};

/* Takes --created off the front of argv. */
static inline void parse_created(struct contexts *c, int *argc, char ***argv)
{
	c->created = *argc > 1 && strcmp((*argv)[1], "--created") == 0;
	if (c->created) {
		(*argv)[1] = (*argv)[0];
		--*argc;
		++*argv;
	}
	c->second = c->created ? "the created context" : "device 1";
}

/* Device 0's primary context and, when n is 2, the second context; the
 * primary context is current after.  EXIT_UNAVAILABLE, with a line on
 * stdout, when the machine has no second device for it. */
static inline int open_contexts(struct contexts *c, int n, const char *what)
{
	int ndev = 0;

	CHECK(drv.cuDeviceGetCount(&ndev));
	if (n > 1 && !c->created && ndev < 2) {
		printf(DG_PROG ": %s needs 2 devices, found %d (--created: a second context on device 0)\n",
		       what, ndev);
		return EXIT_UNAVAILABLE;
	}
	CHECK(drv.cuDeviceGet(&c->dev[0], 0));
	CHECK(drv.cuDevicePrimaryCtxRetain(&c->ctx[0], c->dev[0]));
	if (n > 1) {
		CHECK(drv.cuDeviceGet(&c->dev[1], c->created ? 0 : 1));
		if (c->created)
			CHECK(drv.cuCtxCreate(&c->ctx[1], NULL, 0, c->dev[1]));
		else
			CHECK(drv.cuDevicePrimaryCtxRetain(&c->ctx[1], c->dev[1]));
	}
	CHECK(drv.cuCtxSetCurrent(c->ctx[0]));
	return EXIT_OK;
}

/* An operand on another device needs one: a created context's memory is
 * the launch device's own (the driver accepts it, and so does ctxguard). */
static inline int needs_second_device(const struct contexts *c, const char *what)
{
	if (!c->created)
		return 0;
	printf(DG_PROG ": %s needs a second device: memory of a context created on device 0 "
	       "is device 0's, which the launch may use\n", what);
	return 1;
}

static inline void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);
	if (!p) {
		fprintf(stderr, DG_PROG ": out of memory\n");
		exit(EXIT_SETUP);
	}
	return p;
}

static inline uint16_t bf16_from_float(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	u += 0x7fffu + ((u >> 16) & 1u);        /* round to nearest even */
	return (uint16_t)(u >> 16);
}

static inline float float_from_bf16(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

/* Deterministic value in [-1, 1) for element i (splitmix64 finaliser). */
static inline float unit_hash(uint64_t i, uint32_t seed)
{
	uint64_t z = i + 0x9e3779b97f4a7c15ull * (seed + 1ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (float)(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

#endif
