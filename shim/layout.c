/* Which kernel parameters can carry an operand: pointer-sized ones, and
 * 128-byte, 64-byte-aligned ones (CUtensorMap, passed __grid_constant__).
 * Asked of the driver once per function and cached in its record. */
#include <stdlib.h>

#include "shim.h"

enum { MAX_PARAMS = 1024 };

static const struct cg_layout empty;

static CUresult param_info(const struct cg_fn *fn, size_t i, size_t *off, size_t *size)
{
	if (fn->flags & CG_FN_KERNEL)
		return cg_call.cuKernelGetParamInfo
			       ? cg_call.cuKernelGetParamInfo((CUkernel)fn->handle, i, off, size)
			       : CUDA_ERROR_NOT_SUPPORTED;
	return cg_call.cuFuncGetParamInfo
		       ? cg_call.cuFuncGetParamInfo((CUfunction)fn->handle, i, off, size)
		       : CUDA_ERROR_NOT_SUPPORTED;
}

static const struct cg_layout *build(const struct cg_fn *fn)
{
	uint16_t idx[64];
	uint16_t kind[64];
	uint32_t off[64];
	unsigned n = 0;
	size_t o, size;
	for (size_t i = 0; i < MAX_PARAMS && param_info(fn, i, &o, &size) == CUDA_SUCCESS; i++) {
		int k = size == sizeof(void *) ? CG_P_PTR
			: size == sizeof(CUtensorMap) && o % 64 == 0 ? CG_P_TMAP : 0;
		if (!k || n == sizeof idx / sizeof idx[0])
			continue;
		idx[n] = (uint16_t)i;
		kind[n] = (uint16_t)k;
		off[n] = (uint32_t)o;
		n++;
	}
	if (!n)
		return &empty;
	struct cg_layout *l = malloc(sizeof *l + n * sizeof l->p[0]);
	if (!l)
		return &empty;
	l->n = n;
	for (unsigned i = 0; i < n; i++) {
		l->p[i].index = idx[i];
		l->p[i].kind = kind[i];
		l->p[i].offset = off[i];
	}
	return l;
}

const struct cg_layout *cg_layout_of(const struct cg_fn *fn)
{
	struct cg_fn *f = (struct cg_fn *)fn;
	const struct cg_layout *l = atomic_load_explicit(&f->layout, memory_order_acquire);
	if (CG_LIKELY(l))
		return l;
	l = build(fn);
	const struct cg_layout *expected = NULL;
	/* Two threads may race to build it: one wins, the other's is freed. */
	if (!atomic_compare_exchange_strong(&f->layout, &expected, l)) {
		if (l != &empty)
			free((void *)l);
		l = expected;
	}
	return l;
}
