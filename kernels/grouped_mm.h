/* Bundled m-grouped GEMM kernels (bf16, fp8 e4m3 block-scaled): host API.
 *
 * D[rows of group g] = A[rows of group g] x B[g]^T, fp32 accumulation, bf16 D.
 * A [M, K] row-major; B [G, N, K] (CG_GMM_B_NK, the HF weight layout) or
 * [G, K, N] (CG_GMM_B_KN); D [M, N] row-major.  Four ways to say which rows
 * belong to which group (DeepGEMM's names in brackets):
 *   cg_gmm_offs()       offs int32 [G], inclusive cumulative row ends with no
 *                       leading 0 (torch._grouped_mm 2D x 3D); empty groups
 *                       and any row counts are allowed;
 *   cg_gmm_contiguous() layout int32 [M], the expert of each row, -1 for
 *                       padding rows, which are left untouched in D (m-grouped
 *                       contiguous: each expert's rows form one block, padded
 *                       to 128 rows, or 64 with CG_GMM_BLOCKS_64); each block
 *                       is computed with its first row's expert, and a row
 *                       of another expert in it is left untouched;
 *   cg_gmm_psum()       offs int32 [G], the end row of each group; group g
 *                       starts at offs[g - 1] rounded up to 128 (64 with
 *                       CG_GMM_BLOCKS_64; group 0 at 0); rows between groups
 *                       are left untouched in D
 *                       (MGroupedContiguousWithPsumLayout);
 *   cg_gmm_masked()     layout int32 [G], masked_m: group g owns rows
 *                       [g * m, (g + 1) * m) of A [G, m, K] and D [G, m, N]
 *                       (m = max_m) and uses the first masked_m[g] of them
 *                       (0..m); the rest of D is left untouched
 *                       (MGroupedMasked).  G * m < 2^31.
 * offs and masked_m values outside their range are clamped; groups may be
 * empty.  psum and masked take at most 1024 groups, as offs does.
 * fp8: A and B e4m3; sfa fp32, one scale per row and 128 channels, element
 * (g, row, kb) at sfa[g * sfa_stride_g + row * sfa_stride_m + kb *
 * sfa_stride_k], where row is the row of A, or in masked form the row within
 * group g.  sfa_stride_m = sfa_stride_k = 0: row-major [rows, ceil(K/128)];
 * sfa_stride_m = 1, sfa_stride_k = M rounded up to 4: DeepGEMM's MN-major
 * TMA-aligned layout.  sfa_stride_g is for the masked form only (0 elsewhere);
 * 0 there means groups packed one after another: max(m * sfa_stride_m,
 * ceil(K/128) * sfa_stride_k) after the defaulting above.  The Hopper
 * kernels load sfa by TMA (1-7% faster on prefill shapes) where it is
 * 16-byte aligned with sfa_stride_g a multiple of 4 and either MN-major
 * with sfa_stride_k a multiple of 4, in every form but offs (whose groups
 * start on any row), or row-major (sfa_stride_k = 1) with sfa_stride_m a
 * multiple of 4, in every form: the default row-major layout qualifies when
 * ceil(K/128) is a multiple of 4.  Other strides go through a warp of
 * 4-byte copies.  sfb fp32
 * [G, ceil(N/128), ceil(K/128)], one scale per 128x128 block of B.  fp8 B
 * must be [G, N, K] for the Hopper kernels (wgmma reads fp8 K-major only);
 * [G, K, N] runs on the portable kernels.
 *
 * This file may be included after <cuda.h> or on its own; it uses the driver
 * API only and never calls a cu* symbol itself: every driver call goes through
 * the table given to cg_gmm_init(), because inside libctxguard.so each cu*
 * name is a hook.
 *
 * Linking: libctxguard.so exports only the ctxguard_gmm_* entry points at
 * the end (the cg_gmm_* functions and the problem struct are internal to
 * it); a C program calls those, as Python does through ctypes. */
#ifndef CG_GROUPED_MM_H
#define CG_GROUPED_MM_H

#include <cuda.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum cg_gmm_dtype { CG_GMM_BF16 = 0, CG_GMM_FP8_E4M3 = 1 };
enum cg_gmm_b_layout { CG_GMM_B_NK = 0, CG_GMM_B_KN = 1 };
/* flags */
#define CG_GMM_FORCE_PORTABLE 1u /* use the mma.sync kernels even on Hopper */
/* contiguous and psum: groups aligned to 64-row blocks, not 128 (DeepGEMM's
 * set_mk_alignment_for_contiguous_layout(64)).  Contiguous then runs on the
 * 64-row Hopper kernels only (TMA-aligned operands on sm_90, else
 * CUDA_ERROR_NOT_SUPPORTED: the portable kernels' tiles are 128 rows). */
#define CG_GMM_BLOCKS_64 2u

struct cg_gmm_problem {
	int dtype;           /* enum cg_gmm_dtype */
	int b_layout;        /* enum cg_gmm_b_layout */
	unsigned flags;
	CUdeviceptr a, b, d;
	CUdeviceptr offs;    /* cg_gmm_offs, cg_gmm_psum: int32 [g] */
	CUdeviceptr layout;  /* cg_gmm_contiguous: int32 [m]; cg_gmm_masked: int32 [g] */
	CUdeviceptr sfa, sfb; /* fp8 only */
	int64_t sfa_stride_m, sfa_stride_k;
	int64_t sfa_stride_g; /* masked form only */
	int64_t m, n, k, g;  /* masked: m = max_m */
};

/* Driver entry points the API uses: X(member and symbol name, return and
 * parameter types).  Fill each member with the real libcuda symbol of that
 * exact name. */
#define CG_GMM_DRIVER_FUNCS(X)                                                     \
	X(cuModuleLoadData, (CUmodule *, const void *))                            \
	X(cuModuleUnload, (CUmodule))                                              \
	X(cuModuleGetFunction, (CUfunction *, CUmodule, const char *))             \
	X(cuFuncSetAttribute, (CUfunction, CUfunction_attribute, int))             \
	X(cuLaunchKernel, (CUfunction, unsigned, unsigned, unsigned, unsigned,     \
			   unsigned, unsigned, unsigned, CUstream, void **, void **)) \
	X(cuCtxPushCurrent_v2, (CUcontext))                                        \
	X(cuCtxPopCurrent_v2, (CUcontext *))                                       \
	X(cuCtxGetDevice, (CUdevice *))                                            \
	X(cuCtxGetId, (CUcontext, unsigned long long *))                           \
	X(cuStreamGetCtx, (CUstream, CUcontext *))                                 \
	X(cuDeviceGet, (CUdevice *, int))                                          \
	X(cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice))                       \
	X(cuDeviceGetAttribute, (int *, CUdevice_attribute, CUdevice))             \
	X(cuTensorMapEncodeTiled,                                                  \
	  (CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,                 \
	   const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,             \
	   const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,          \
	   CUtensorMapL2promotion, CUtensorMapFloatOOBfill))

/* Entry points used when the driver has them, else left NULL: cuFuncLoad
 * (CUDA 12.4) loads a lazily loaded kernel now rather than at its first
 * launch; cuLaunchKernelEx (CUDA 11.8) lets a launch overlap the end of the
 * kernel before it and launches clusters (grouped_mm.c, launch);
 * cuOccupancyMaxActiveClusters (CUDA 11.8) says how many fit at once. */
#define CG_GMM_DRIVER_OPTIONAL(X)                                                   \
	X(cuFuncLoad, (CUfunction))                                                 \
	X(cuLaunchKernelEx, (const CUlaunchConfig *, CUfunction, void **, void **)) \
	X(cuOccupancyMaxActiveClusters, (int *, CUfunction, const CUlaunchConfig *))

struct cg_gmm_driver {
#define CG_GMM_DRIVER_MEMBER(name, params) CUresult (*name) params;
	CG_GMM_DRIVER_FUNCS(CG_GMM_DRIVER_MEMBER)
	CG_GMM_DRIVER_OPTIONAL(CG_GMM_DRIVER_MEMBER)
#undef CG_GMM_DRIVER_MEMBER
};

/* Fill every member through resolve(arg, "symbol"); CUDA_ERROR_NOT_FOUND
 * names the first required symbol it could not resolve (see
 * cg_gmm_last_error()). */
CUresult cg_gmm_driver_resolve(struct cg_gmm_driver *drv,
			       void *(*resolve)(void *arg, const char *symbol),
			       void *arg);
/* Install the driver table (copied); call before the first problem. */
CUresult cg_gmm_init(const struct cg_gmm_driver *drv);

/* Enqueue one grouped GEMM on stream s.  ctx: the context s belongs to, or
 * NULL to take s's context; a default stream (NULL, CU_STREAM_LEGACY,
 * CU_STREAM_PER_THREAD) on a thread with no current context means device
 * 0's primary context, as it does to the CUDA runtime.  The kernels are
 * loaded into that context the first time it is used.  Returns
 * CUDA_ERROR_INVALID_VALUE for a malformed problem, CUDA_ERROR_NOT_SUPPORTED
 * for one no kernel here handles (and in a build without kernels), or the
 * driver's error; cg_gmm_last_error() says why. */
CUresult cg_gmm_offs(CUcontext ctx, CUstream s, const struct cg_gmm_problem *p);
CUresult cg_gmm_contiguous(CUcontext ctx, CUstream s, const struct cg_gmm_problem *p);
CUresult cg_gmm_psum(CUcontext ctx, CUstream s, const struct cg_gmm_problem *p);
CUresult cg_gmm_masked(CUcontext ctx, CUstream s, const struct cg_gmm_problem *p);

/* Load the kernels into ctx now, each one loaded eagerly, so that no later
 * problem there loads anything: a module load, or the first launch of a
 * lazily loaded kernel, may wait for the device's queued work.  Idempotent
 * and cheap once done. */
CUresult cg_gmm_prepare(CUcontext ctx);

/* The same, through drv (kept by the caller, every required member set)
 * instead of the installed table: inside libctxguard.so ctxguard's own
 * calls take the real driver while the program's, through the exported
 * entry points, take the hooks. */
CUresult cg_gmm_contiguous_with(const struct cg_gmm_driver *drv, CUcontext ctx, CUstream s,
				const struct cg_gmm_problem *p);
CUresult cg_gmm_psum_with(const struct cg_gmm_driver *drv, CUcontext ctx, CUstream s,
			  const struct cg_gmm_problem *p);
CUresult cg_gmm_masked_with(const struct cg_gmm_driver *drv, CUcontext ctx, CUstream s,
			    const struct cg_gmm_problem *p);
CUresult cg_gmm_prepare_with(const struct cg_gmm_driver *drv, CUcontext ctx);

/* Why this thread's last call failed ("" after a success). */
const char *cg_gmm_last_error(void);

/* ctypes-friendly entry points (exported with default visibility).
 * ctxguard_gmm_init_default() resolves the driver table from libcuda.so.1
 * unless cg_gmm_init() already ran (inside libctxguard.so the shim does
 * that with the real driver functions).  Each ctxguard_gmm_FORM() fills a
 * problem from its arguments and returns cg_gmm_FORM()'s result; index is
 * offs, layout or masked_m as that form reads it. */
int ctxguard_gmm_init_default(void);
/* offs, contiguous and psum: index = offs, layout and offs respectively */
typedef int ctxguard_gmm_flat_fn(uint64_t stream, int dtype, int b_layout,
				 unsigned flags, uint64_t a, uint64_t b,
				 uint64_t d, uint64_t index, uint64_t sfa,
				 uint64_t sfb, int64_t sfa_stride_m,
				 int64_t sfa_stride_k, int64_t m, int64_t n,
				 int64_t k, int64_t g);
ctxguard_gmm_flat_fn ctxguard_gmm_offs, ctxguard_gmm_contiguous, ctxguard_gmm_psum;
int ctxguard_gmm_masked(uint64_t stream, int dtype, int b_layout,
			unsigned flags, uint64_t a, uint64_t b, uint64_t d,
			uint64_t masked_m, uint64_t sfa, uint64_t sfb,
			int64_t sfa_stride_m, int64_t sfa_stride_k,
			int64_t sfa_stride_g, int64_t max_m, int64_t n,
			int64_t k, int64_t g);
const char *ctxguard_gmm_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
