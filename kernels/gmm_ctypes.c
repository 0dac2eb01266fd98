/* Flat, ctypes-friendly entry points (integers and addresses only), for
 * Python tests and benchmarks; exported from libctxguard.so and from the
 * standalone build. */
#include <dlfcn.h>

#include "gmm_internal.h"

static void *dl_resolve(void *handle, const char *symbol)
{
	return dlsym(handle, symbol);
}

CG_GMM_EXPORT int ctxguard_gmm_init_default(void)
{
	if (cg_gmm_drv())
		return CUDA_SUCCESS;
	/* kept open: the table points into it for the life of the process */
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return cg_gmm_fail(CUDA_ERROR_NOT_FOUND, "grouped_mm: dlopen(libcuda.so.1): %s", dlerror());
	struct cg_gmm_driver drv;
	const CUresult r = cg_gmm_driver_resolve(&drv, dl_resolve, h);
	return r == CUDA_SUCCESS ? cg_gmm_init(&drv) : r;
}

static struct cg_gmm_problem problem(int dtype, int b_layout, unsigned flags, uint64_t a, uint64_t b,
				     uint64_t d, uint64_t sfa, uint64_t sfb, int64_t sfa_stride_m,
				     int64_t sfa_stride_k, int64_t m, int64_t n, int64_t k, int64_t g)
{
	return (struct cg_gmm_problem){
		.dtype = dtype,
		.b_layout = b_layout,
		.flags = flags,
		.a = a,
		.b = b,
		.d = d,
		.sfa = sfa,
		.sfb = sfb,
		.sfa_stride_m = sfa_stride_m,
		.sfa_stride_k = sfa_stride_k,
		.m = m,
		.n = n,
		.k = k,
		.g = g,
	};
}

CG_GMM_EXPORT int ctxguard_gmm_offs(uint64_t stream, int dtype, int b_layout, unsigned flags, uint64_t a,
				    uint64_t b, uint64_t d, uint64_t offs, uint64_t sfa, uint64_t sfb,
				    int64_t sfa_stride_m, int64_t sfa_stride_k, int64_t m, int64_t n, int64_t k,
				    int64_t g)
{
	struct cg_gmm_problem p =
	    problem(dtype, b_layout, flags, a, b, d, sfa, sfb, sfa_stride_m, sfa_stride_k, m, n, k, g);
	p.offs = offs;
	return cg_gmm_offs(NULL, (CUstream)(uintptr_t)stream, &p);
}

CG_GMM_EXPORT int ctxguard_gmm_contiguous(uint64_t stream, int dtype, int b_layout, unsigned flags, uint64_t a,
					  uint64_t b, uint64_t d, uint64_t layout, uint64_t sfa, uint64_t sfb,
					  int64_t sfa_stride_m, int64_t sfa_stride_k, int64_t m, int64_t n,
					  int64_t k, int64_t g)
{
	struct cg_gmm_problem p =
	    problem(dtype, b_layout, flags, a, b, d, sfa, sfb, sfa_stride_m, sfa_stride_k, m, n, k, g);
	p.layout = layout;
	return cg_gmm_contiguous(NULL, (CUstream)(uintptr_t)stream, &p);
}

CG_GMM_EXPORT const char *ctxguard_gmm_last_error(void)
{
	return cg_gmm_last_error();
}
