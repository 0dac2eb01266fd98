/* Crossing kind (b): an operand — a pointer parameter, or the global
 * address inside a tensor-map parameter — on another device than the
 * launch context's.  This is the silent case: with peer access on, the
 * kernel runs and writes the other GPU's memory unordered with its streams. */
#include <string.h>

#include "shim.h"

/* A report lists a launch's first 16: kernels take a handful of pointer
 * and tensor-map parameters. */
enum { MAX_OPERANDS = 16, SHAPE = 128 };

/* Off the fast path: operand `first` is on another device than dev.  One
 * launch is one crossing, whatever number of its operands cross: collect
 * them all into one report.  A tensor map counts only if ctxguard saw it
 * encoded with that address; its record gives the shape for the report. */
static __attribute__((noinline, cold)) CUresult
crossing(const char *api, const struct cg_fn *fn, CUcontext ctx, int dev, CUstream stream,
	 const struct cg_layout *l, unsigned first, void **params, const unsigned char *buf,
	 size_t nbuf)
{
	struct cg_operand ops[MAX_OPERANDS];
	char shapes[MAX_OPERANDS][SHAPE];
	size_t n = 0;
	for (unsigned p = first; p < l->n && n < MAX_OPERANDS; p++) {
		const void *bytes;
		uintptr_t a;
		if (!cg_operand_address(l, p, params, buf, nbuf, &bytes, &a))
			continue;
		int d = cg_mem_device(a, stream);
		if (d < 0 || d == dev)
			continue;
		const char *shape = NULL;
		if (l->p[p].kind == CG_P_TMAP) {
			struct cg_tmap t;
			if (!cg_tmap_find(bytes, &t) || t.addr != a)
				continue;
			cg_tmap_describe(&t, shapes[n], SHAPE);
			shape = shapes[n];
		}
		ops[n++] = (struct cg_operand){.param = l->p[p].index, .dev = d, .addr = a,
					       .shape = shape, .uuid = cg_device_uuid(d)};
	}
	if (!n)
		return CUDA_SUCCESS;
	struct cg_crossing c;
	cg_crossing_init(&c, 'b', api, fn, ctx, dev, stream);
	c.operands = ops;
	c.noperands = n;
	return cg_act(&c, fn);
}

CUresult cg_check_operands(const char *api, const struct cg_fn *fn, CUcontext ctx,
			   CUstream stream, void **params, void **extra)
{
	const struct cg_layout *l = cg_layout_of(fn, stream);
	/* kernelParams holds a pointer per parameter; the extra form packs
	 * them into one buffer at their offsets. */
	size_t nbuf = 0;
	const unsigned char *buf = params || !extra ? NULL : cg_extra_buffer(extra, &nbuf);
	if (!l->n || (!params && !buf))
		return CUDA_SUCCESS;
	int dev = cg_ctx_device(ctx);
	if (dev < 0)
		return CUDA_SUCCESS;
	for (unsigned p = 0; p < l->n; p++) {
		const void *bytes;
		uintptr_t a;
		if (!cg_operand_address(l, p, params, buf, nbuf, &bytes, &a))
			continue;
		int d = cg_mem_device(a, stream);
		if (CG_LIKELY(d < 0 || d == dev))
			continue;
		return crossing(api, fn, ctx, dev, stream, l, p, params, buf, nbuf);
	}
	return CUDA_SUCCESS;
}
