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

/* One problem of form from the flat arguments; index is the form's group
 * index (offs, layout or masked_m). */
static int run_flat(int form, uint64_t stream, int dtype, int b_layout, unsigned flags, uint64_t a, uint64_t b,
		    uint64_t d, uint64_t index, uint64_t sfa, uint64_t sfb, int64_t sfa_stride_m,
		    int64_t sfa_stride_k, int64_t sfa_stride_g, int64_t m, int64_t n, int64_t k, int64_t g)
{
	const int by_offs = form == CG_GMM_FORM_OFFS || form == CG_GMM_FORM_PSUM;
	const struct cg_gmm_problem p = {
		.dtype = dtype,
		.b_layout = b_layout,
		.flags = flags,
		.a = a,
		.b = b,
		.d = d,
		.offs = by_offs ? index : 0,
		.layout = by_offs ? 0 : index,
		.sfa = sfa,
		.sfb = sfb,
		.sfa_stride_m = sfa_stride_m,
		.sfa_stride_k = sfa_stride_k,
		.sfa_stride_g = sfa_stride_g,
		.m = m,
		.n = n,
		.k = k,
		.g = g,
	};
	return cg_gmm_run(NULL, (CUstream)(uintptr_t)stream, &p, form);
}

/* The forms whose entry points share one signature (ctxguard_gmm_flat_fn). */
#define CG_GMM_FLAT(name, form)                                                                                \
	CG_GMM_EXPORT int ctxguard_gmm_##name(uint64_t stream, int dtype, int b_layout, unsigned flags, uint64_t a, \
					      uint64_t b, uint64_t d, uint64_t index, uint64_t sfa, uint64_t sfb,   \
					      int64_t sfa_stride_m, int64_t sfa_stride_k, int64_t m, int64_t n,     \
					      int64_t k, int64_t g)                                                 \
	{                                                                                                      \
		return run_flat(form, stream, dtype, b_layout, flags, a, b, d, index, sfa, sfb, sfa_stride_m,  \
				sfa_stride_k, 0, m, n, k, g);                                                  \
	}
CG_GMM_FLAT(offs, CG_GMM_FORM_OFFS)
CG_GMM_FLAT(contiguous, CG_GMM_FORM_CONTIGUOUS)
CG_GMM_FLAT(psum, CG_GMM_FORM_PSUM)
#undef CG_GMM_FLAT

CG_GMM_EXPORT int ctxguard_gmm_masked(uint64_t stream, int dtype, int b_layout, unsigned flags, uint64_t a,
				      uint64_t b, uint64_t d, uint64_t masked_m, uint64_t sfa, uint64_t sfb,
				      int64_t sfa_stride_m, int64_t sfa_stride_k, int64_t sfa_stride_g,
				      int64_t max_m, int64_t n, int64_t k, int64_t g)
{
	return run_flat(CG_GMM_FORM_MASKED, stream, dtype, b_layout, flags, a, b, d, masked_m, sfa, sfb,
			sfa_stride_m, sfa_stride_k, sfa_stride_g, max_m, n, k, g);
}

CG_GMM_EXPORT const char *ctxguard_gmm_last_error(void)
{
	return cg_gmm_last_error();
}
