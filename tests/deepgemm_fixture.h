/* What the suites that launch DeepGEMM-named kernels on the fake share:
 * DeepGEMM's bf16 tensor-map encode, and whether the library was built
 * with the bundled kernels. */
#ifndef CTXGUARD_TESTS_DEEPGEMM_FIXTURE_H
#define CTXGUARD_TESTS_DEEPGEMM_FIXTURE_H

#include <check.h>
#include <dlfcn.h>
#include <stdint.h>
#include <cuda.h>

/* DeepGEMM's shared memory for the GEMMs' configuration (128 x 128 x 64, 5
 * stages): a 32 KiB D tile, 256 bytes of barriers, 32 KiB a stage. */
enum { GEMM_SMEM = 32768 + 256 + 5 * 32768 };

/* A 2-D bf16 map {inner, outer} of base, rows dense, as DeepGEMM encodes
 * A {K, M}, B {K, N*G} and D {N, M} (DESIGN.md), with the given swizzle. */
static inline CUtensorMap encode_swizzled(CUdeviceptr base, uint64_t inner, uint64_t outer,
					  CUtensorMapSwizzle swizzle)
{
	CUtensorMap m;
	cuuint64_t dims[2] = {inner, outer}, strides[1] = {inner * 2};
	cuuint32_t box[2] = {64, 128}, elem[2] = {1, 1};
	ck_assert_int_eq(cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
						(void *)base, dims, strides, box, elem,
						CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
						CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
						CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
			 CUDA_SUCCESS);
	return m;
}

/* DeepGEMM's own swizzle for these maps. */
static inline CUtensorMap encode(CUdeviceptr base, uint64_t inner, uint64_t outer)
{
	return encode_swizzled(base, inner, outer, CU_TENSOR_MAP_SWIZZLE_128B);
}

/* Whether this library was built with its kernels (nvcc): an empty
 * problem then succeeds, else it says why it cannot. */
static inline int bundled_built(void)
{
	int (*run)(uint64_t, int, int, unsigned, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
		   uint64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
	*(void **)&run = dlsym(RTLD_DEFAULT, "ctxguard_gmm_contiguous");
	ck_assert_ptr_nonnull(run);
	return run(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1) == 0;
}

#endif
