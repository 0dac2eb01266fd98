/* Crossing kind (b): an operand — a pointer parameter, or the global
 * address inside a tensor-map parameter — on another device than the
 * launch context's.  This is the silent case: with peer access on, the
 * kernel runs and writes the other GPU's memory unordered with its streams. */
#include <string.h>

#include "shim.h"

static CUresult crossing(const char *api, const struct cg_fn *fn, CUcontext ctx, int dev,
			 CUstream stream, int param, uintptr_t addr, int addr_dev,
			 const char *operand)
{
	struct cg_crossing c;
	cg_crossing_init(&c, 'b', api, fn, ctx, dev, stream);
	c.param = param;
	c.addr = addr;
	c.addr_dev = addr_dev;
	c.operand = operand;
	return cg_act(&c, fn);
}

/* The bytes of parameter p: kernelParams holds a pointer per parameter;
 * the extra form packs them into one buffer at their offsets. */
static const void *param_bytes(const struct cg_layout *l, unsigned p, void **params,
			       void **extra)
{
	if (params)
		return params[l->p[p].index];
	for (size_t i = 0; extra && extra[i] != CU_LAUNCH_PARAM_END; i += 2)
		if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
			return (const char *)extra[i + 1] + l->p[p].offset;
	return NULL;
}

CUresult cg_check_operands(const char *api, const struct cg_fn *fn, CUcontext ctx,
			   CUstream stream, void **params, void **extra)
{
	const struct cg_layout *l = cg_layout_of(fn, stream);
	if (!l->n || (!params && !extra))
		return CUDA_SUCCESS;
	int dev = cg_ctx_device(ctx);
	if (dev < 0)
		return CUDA_SUCCESS;
	for (unsigned p = 0; p < l->n; p++) {
		const void *bytes = param_bytes(l, p, params, extra);
		if (!bytes)
			return CUDA_SUCCESS;
		if (l->p[p].kind == CG_P_PTR) {
			uintptr_t a;
			memcpy(&a, bytes, sizeof a);
			int d = cg_mem_device(a, stream);
			if (d >= 0 && d != dev) {
				CUresult rc = crossing(api, fn, ctx, dev, stream, l->p[p].index, a, d,
						       "pointer");
				if (rc != CUDA_SUCCESS)
					return rc;
			}
			continue;
		}
		uintptr_t a;
		if (!cg_tmap_address(bytes, &a))
			continue;
		int d = cg_mem_device(a, stream);
		if (d < 0 || d == dev)
			continue;
		/* Off the fast path: only a descriptor ctxguard saw encoded, with
		 * that address, is a crossing; its record gives the shape. */
		struct cg_tmap t;
		if (!cg_tmap_find(bytes, &t) || t.addr != a)
			continue;
		char shape[256];
		cg_tmap_describe(&t, shape, sizeof shape);
		CUresult rc = crossing(api, fn, ctx, dev, stream, l->p[p].index, a, d, shape);
		if (rc != CUDA_SUCCESS)
			return rc;
	}
	return CUDA_SUCCESS;
}
