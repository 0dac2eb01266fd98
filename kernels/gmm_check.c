/* grouped_mm's validation: a problem the kernels can run, or the reason
 * it is refused (cg_gmm_last_error), before anything is enqueued. */
#include <limits.h>
#include <stdint.h>

#include "gmm_internal.h"

static CUresult invalid(const char *what)
{
	return cg_gmm_fail(CUDA_ERROR_INVALID_VALUE, "grouped_mm: %s", what);
}

/* Each form's name and the problem member holding its group index. */
static const struct {
	const char *name, *index;
} forms[] = {
	[CG_GMM_FORM_OFFS] = {"offs", "offs"},
	[CG_GMM_FORM_CONTIGUOUS] = {"contiguous", "layout"},
	[CG_GMM_FORM_PSUM] = {"psum", "offs"},
	[CG_GMM_FORM_MASKED] = {"masked", "layout (masked_m)"},
};

CUdeviceptr cg_gmm_index(const struct cg_gmm_problem *p, int form)
{
	return form == CG_GMM_FORM_OFFS || form == CG_GMM_FORM_PSUM ? p->offs : p->layout;
}

/* Rows of A and D: the masked form's [G, max_m] are one [G * max_m] run. */
int64_t cg_gmm_rows(const struct cg_gmm_problem *p, int form)
{
	return form == CG_GMM_FORM_MASKED ? p->m * p->g : p->m;
}

CUresult cg_gmm_check(const struct cg_gmm_problem *p, int form)
{
	if (!p)
		return invalid("no problem");
	if (p->dtype != CG_GMM_BF16 && p->dtype != CG_GMM_FP8_E4M3)
		return invalid("dtype is neither CG_GMM_BF16 nor CG_GMM_FP8_E4M3");
	if (p->b_layout != CG_GMM_B_NK && p->b_layout != CG_GMM_B_KN)
		return invalid("b_layout is neither CG_GMM_B_NK nor CG_GMM_B_KN");
	if (p->flags & ~(CG_GMM_FORCE_PORTABLE | CG_GMM_BLOCKS_64))
		return invalid(
			"unknown flags (CG_GMM_FORCE_PORTABLE and CG_GMM_BLOCKS_64 are known)");
	if ((p->flags & CG_GMM_BLOCKS_64) && form != CG_GMM_FORM_CONTIGUOUS &&
	    form != CG_GMM_FORM_PSUM)
		return cg_gmm_fail(
			CUDA_ERROR_INVALID_VALUE,
			"grouped_mm: CG_GMM_BLOCKS_64 is for the contiguous and psum forms, not %s",
			forms[form].name);
	if (p->m < 0 || p->n < 1 || p->k < 1 || p->g < 1 || p->m > INT_MAX || p->n > INT_MAX ||
	    p->k > INT_MAX || p->g > INT_MAX)
		return invalid("sizes out of range (need 0 <= m, 1 <= n, k, g, all < 2^31)");
	const int64_t rows = cg_gmm_rows(p, form);
	if (rows > INT_MAX)
		return invalid("masked form: g * max_m must be < 2^31");
	/* the largest tile count any kernel can be given must fit an int */
	if ((rows / 64 + 1 + p->g) * ((p->n + 127) / 128) > INT_MAX)
		return cg_gmm_fail(CUDA_ERROR_NOT_SUPPORTED, "grouped_mm: problem too large");
	if (rows == 0)
		return CUDA_SUCCESS;
	if (!p->a || !p->b || !p->d)
		return invalid("a, b and d are required");
	if (!cg_gmm_index(p, form))
		return cg_gmm_fail(CUDA_ERROR_INVALID_VALUE, "grouped_mm: the %s form needs %s",
				   forms[form].name, forms[form].index);
	if (cg_gmm_form_has_tables(form) && p->g > CG_GMM_MAX_OFFS_GROUPS)
		return cg_gmm_fail(CUDA_ERROR_NOT_SUPPORTED,
				   "grouped_mm: more than %d groups in %s form",
				   CG_GMM_MAX_OFFS_GROUPS, forms[form].name);
	if (p->dtype == CG_GMM_FP8_E4M3 && (!p->sfa || !p->sfb))
		return invalid("fp8 needs sfa and sfb");
	/* the kernels load and store whole elements: off their alignment
	 * they fault (misaligned address), a sticky error that ends the
	 * context */
	const uint64_t esz = p->dtype == CG_GMM_FP8_E4M3 ? 1 : 2;
	if (p->a % esz || p->b % esz || p->d % 2)
		return invalid(
			"a and b must be aligned to their element size, d to 2 bytes (bf16)");
	if (cg_gmm_index(p, form) % 4)
		return cg_gmm_fail(CUDA_ERROR_INVALID_VALUE,
				   "grouped_mm: %s must be 4-byte aligned (int32)",
				   forms[form].index);
	if (p->dtype == CG_GMM_FP8_E4M3 && (p->sfa % 4 || p->sfb % 4))
		return invalid("sfa and sfb must be 4-byte aligned (fp32)");
	if (p->sfa_stride_m < 0 || p->sfa_stride_k < 0 || p->sfa_stride_g < 0)
		return invalid("negative sfa strides");
	if (p->sfa_stride_g && form != CG_GMM_FORM_MASKED)
		return invalid("sfa_stride_g is for the masked form only (set it to 0)");
	return CUDA_SUCCESS;
}
