/* What ctxguard's launch path costs in instructions, on the fake driver:
 * no GPU, no timer noise.  bench/hotpath.sh runs this under callgrind with
 * and without the shim, at two launch counts, and divides.
 *
 *   hotpath plain|expert|runtime N
 *                            N launches of a kernel no rule names (plain),
 *                            of a DeepGEMM-named one whose pointer and
 *                            tensor-map parameters are all checked (expert),
 *                            or of the plain kernel from a library, its
 *                            CUfunction asked for again before each launch
 *                            (runtime: a library that does so; libcudart
 *                            13.0 launches the CUkernel itself) */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu_check.h"

#define EXPERT "_ZN9deep_gemm19sm90_bf16_gemm_implILj0EEEvPijjj14CUtensorMap_stS2_S2_"


int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: hotpath plain|expert|runtime N\n");
		return 2;
	}
	int expert = strcmp(argv[1], "expert") == 0, runtime = strcmp(argv[1], "runtime") == 0;
	long n = atol(argv[2]);
	const char *image = expert
		? "//ctxguard-fake-image\n.kernel " EXPERT " 8,4,4,4,128,128,128\n"
		: "//ctxguard-fake-image\n.kernel vector_add 8,8,8,4\n";
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction f;
	CUstream s;
	CU(cuInit(0));
	CU(cuDeviceGet(&dev, 0));
	CU(cuDevicePrimaryCtxRetain(&ctx, dev));
	CU(cuCtxSetCurrent(ctx));
	CU(cuStreamCreate(&s, 0));
	CUlibrary lib;
	CUkernel k;
	if (runtime) {
		CU(cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
		CU(cuLibraryGetKernel(&k, lib, "vector_add"));
		CU(cuKernelGetFunction(&f, k));
	} else {
		CU(cuModuleLoadData(&mod, image));
		CU(cuModuleGetFunction(&f, mod, expert ? EXPERT : "vector_add"));
	}
	CUdeviceptr buf;
	CU(cuMemAlloc(&buf, 1 << 20));
	CUtensorMap maps[3];
	cuuint64_t dims[2] = {256, 256}, strides[1] = {512};
	cuuint32_t box[2] = {64, 64}, elem[2] = {1, 1};
	for (int i = 0; i < 3; i++)
		CU(cuTensorMapEncodeTiled(&maps[i], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
					     (void *)(buf + 65536 * i), dims, strides, box, elem,
					     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
					     CU_TENSOR_MAP_L2_PROMOTION_NONE,
					     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
	unsigned sizes[3] = {1024, 1024, 1024};
	void *plain_args[] = {&buf, &buf, &buf, &sizes[0]};
	void *expert_args[] = {&buf, &sizes[0], &sizes[1], &sizes[2], &maps[0], &maps[1], &maps[2]};
	for (long i = 0; i < n; i++) {
		if (runtime)
			CU(cuKernelGetFunction(&f, k));
		CU(cuLaunchKernel(f, 1, 1, 1, 128, 1, 1, 0, s, expert ? expert_args : plain_args,
				     NULL));
	}
	CU(cuStreamSynchronize(s));
	return 0;
}
