/* driver_queries -- what the driver calls that a checked launch may add
 * cost on this machine: ctxguard asks cuCtxGetCurrent (launch on a NULL,
 * legacy or per-thread stream) or cuStreamGetCtx (any other stream) once
 * per checked launch, and cuPointerGetAttribute only for an address its map
 * has never seen.  Also one cuTensorMapEncodeTiled as the bundled
 * grouped_mm encodes its operands' maps, three to five a call
 * (kernels/grouped_mm.c, tensor_maps()).
 *
 * usage: driver_queries [N]     N calls of each (default 1000000), timed as
 *                               a loop, 5 reps; prints the median ns/call.
 * Exits 0, or 1 on a CUDA error. */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cu_check.h"


static CUstream stream;
static CUdeviceptr ptr;

static void current(void)
{
	CUcontext c;
	CU(cuCtxGetCurrent(&c));
}

static void stream_ctx(void)
{
	CUcontext c;
	CU(cuStreamGetCtx(stream, &c));
}

static void pointer_device(void)
{
	int ordinal;
	CU(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr));
}

/* an fp8 A [1024, 768] in 128 x 128 boxes, 128-byte swizzle, as
 * tensor_maps() encodes it (within the 1 MB at ptr) */
static void encode_map(void)
{
	static const cuuint64_t dims[2] = {768, 1024}, strides[1] = {768};
	static const cuuint32_t box[2] = {128, 128}, unit[2] = {1, 1};
	CUtensorMap map;
	CU(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)(uintptr_t)ptr, dims, strides, box,
				  unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
				  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
}

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	enum { REPS = 5 };
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	static const struct {
		const char *name;
		void (*call)(void);
	} queries[] = {
		{ "cuCtxGetCurrent", current },
		{ "cuStreamGetCtx (created stream)", stream_ctx },
		{ "cuPointerGetAttribute (device ordinal)", pointer_device },
		{ "cuTensorMapEncodeTiled (fp8 A, 2-D)", encode_map },
	};
	CUdevice dev;
	CUcontext ctx;

	if (n <= 0) {
		fprintf(stderr, "usage: driver_queries [N > 0]\n");
		return 1;
	}
	CU(cuInit(0));
	CU(cuDeviceGet(&dev, 0));
	CU(cuDevicePrimaryCtxRetain(&ctx, dev));
	CU(cuCtxSetCurrent(ctx));
	CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
	CU(cuMemAlloc(&ptr, 1 << 20));
	for (size_t q = 0; q < sizeof queries / sizeof queries[0]; q++) {
		double ns[REPS];
		for (int r = 0; r < REPS; r++) {
			double t0 = now_ns();
			for (long i = 0; i < n; i++)
				queries[q].call();
			ns[r] = (now_ns() - t0) / (double)n;
		}
		qsort(ns, REPS, sizeof ns[0], by_value);
		printf("driver_queries: %-40s %6.1f ns/call (median of %d x %ld)\n", queries[q].name,
		       ns[REPS / 2], REPS, n);
	}
	return 0;
}
