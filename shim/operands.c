/* Crossing kind (b): an operand — a pointer parameter, or the global
 * address inside a tensor-map parameter — on another device than the
 * launch context's.  This is the silent case: with peer access on, the
 * kernel runs and writes the other GPU's memory unordered with its streams. */
#include <string.h>

#include "shim.h"

/* Off the fast path: an operand on device d != dev.  A tensor map counts
 * only if ctxguard saw it encoded with that address; its record gives the
 * shape for the report. */
static __attribute__((noinline, cold)) CUresult
crossing(const char *api, const struct cg_fn *fn, CUcontext ctx, int dev, CUstream stream,
	 unsigned param, unsigned kind, const void *bytes, uintptr_t addr, int d)
{
	char shape[256] = "pointer";
	if (kind == CG_P_TMAP) {
		struct cg_tmap t;
		if (!cg_tmap_find(bytes, &t) || t.addr != addr)
			return CUDA_SUCCESS;
		cg_tmap_describe(&t, shape, sizeof shape);
	}
	struct cg_crossing c;
	cg_crossing_init(&c, 'b', api, fn, ctx, dev, stream);
	c.param = (int)param;
	c.addr = addr;
	c.addr_dev = d;
	c.operand = shape;
	return cg_act(&c, fn);
}

/* The packed parameter buffer of the extra form, or NULL. */
static const unsigned char *extra_buffer(void **extra)
{
	for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2)
		if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
			return extra[i + 1];
	return NULL;
}

CUresult cg_check_operands(const char *api, const struct cg_fn *fn, CUcontext ctx,
			   CUstream stream, void **params, void **extra)
{
	const struct cg_layout *l = cg_layout_of(fn, stream);
	/* kernelParams holds a pointer per parameter; the extra form packs
	 * them into one buffer at their offsets. */
	const unsigned char *buf = params || !extra ? NULL : extra_buffer(extra);
	if (!l->n || (!params && !buf))
		return CUDA_SUCCESS;
	int dev = cg_ctx_device(ctx);
	if (dev < 0)
		return CUDA_SUCCESS;
	for (unsigned p = 0; p < l->n; p++) {
		const void *bytes = params ? params[l->p[p].index] : buf + l->p[p].offset;
		uintptr_t a;
		if (l->p[p].kind == CG_P_PTR)
			memcpy(&a, bytes, sizeof a);
		else if (!cg_tmap_address(bytes, &a))
			continue;
		int d = cg_mem_device(a, stream);
		if (CG_LIKELY(d < 0 || d == dev))
			continue;
		CUresult rc = crossing(api, fn, ctx, dev, stream, l->p[p].index, l->p[p].kind, bytes,
				       a, d);
		if (rc != CUDA_SUCCESS)
			return rc;
	}
	return CUDA_SUCCESS;
}
