/* The driver table the grouped_mm API calls through, and its error text. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm_internal.h"

static _Atomic(const struct cg_gmm_driver *) installed;
static _Thread_local char last_error[256];

CUresult cg_gmm_fail(CUresult err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_error, sizeof last_error, fmt, ap);
	va_end(ap);
	return err;
}

void cg_gmm_clear_error(void)
{
	last_error[0] = '\0';
}

const char *cg_gmm_last_error(void)
{
	return last_error;
}

const struct cg_gmm_driver *cg_gmm_drv(void)
{
	return atomic_load_explicit(&installed, memory_order_acquire);
}

CUresult cg_gmm_driver_resolve(struct cg_gmm_driver *drv, void *(*resolve)(void *arg, const char *symbol),
			       void *arg)
{
	void *p;
	/* memcpy: ISO C has no cast from an object pointer to a function pointer */
#define CG_GMM_RESOLVE(name, params)                                                             \
	p = resolve(arg, #name);                                                                 \
	if (!p)                                                                                  \
		return cg_gmm_fail(CUDA_ERROR_NOT_FOUND, "grouped_mm: driver symbol %s not found", \
				   #name);                                                       \
	memcpy(&drv->name, &p, sizeof p);
	CG_GMM_DRIVER_FUNCS(CG_GMM_RESOLVE)
#undef CG_GMM_RESOLVE
#define CG_GMM_RESOLVE_OPTIONAL(name, params) \
	p = resolve(arg, #name);              \
	memcpy(&drv->name, &p, sizeof p);
	CG_GMM_DRIVER_OPTIONAL(CG_GMM_RESOLVE_OPTIONAL)
#undef CG_GMM_RESOLVE_OPTIONAL
	return CUDA_SUCCESS;
}

CUresult cg_gmm_init(const struct cg_gmm_driver *drv)
{
	cg_gmm_clear_error();
	if (!drv)
		return cg_gmm_fail(CUDA_ERROR_INVALID_VALUE, "grouped_mm: no driver table");
#define CG_GMM_CHECK(name, params)                                                                      \
	if (!drv->name)                                                                                 \
		return cg_gmm_fail(CUDA_ERROR_INVALID_VALUE, "grouped_mm: driver table lacks %s", #name);
	CG_GMM_DRIVER_FUNCS(CG_GMM_CHECK)
#undef CG_GMM_CHECK
	/* The first table stays: callers already running may be using it.  A
	 * copy published by compare-and-swap, not under a lock, which a fork
	 * would leave held in the child. */
	if (atomic_load_explicit(&installed, memory_order_acquire))
		return CUDA_SUCCESS;
	struct cg_gmm_driver *copy = malloc(sizeof *copy);
	if (!copy)
		return cg_gmm_fail(CUDA_ERROR_OUT_OF_MEMORY, "grouped_mm: out of host memory");
	*copy = *drv;
	const struct cg_gmm_driver *none = NULL;
	if (!atomic_compare_exchange_strong_explicit(&installed, &none, copy, memory_order_acq_rel,
						     memory_order_acquire))
		free(copy);
	return CUDA_SUCCESS;
}
