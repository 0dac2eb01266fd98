/* Crossing kind (b): an operand — a pointer parameter, or the global
 * address inside a tensor-map parameter — on another device than the
 * launch context's.  This is the silent case: with peer access on, the
 * kernel runs and writes the other GPU's memory unordered with its streams. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "../report/report.h"

/* Off the fast path: the launch's operands on another device than dev,
 * recorded in r.  One launch is one crossing, whatever number of its
 * operands cross: the report lists them all (its first
 * CG_RECORD_OPERANDS).  A tensor map counts only if ctxguard saw it
 * encoded with that address; its record gives the shape for the report. */
static size_t crossing_operands(struct cg_crossing_record *r, int dev, CUstream stream,
				const struct cg_layout *l, void **params, const unsigned char *buf,
				size_t nbuf)
{
	size_t n = 0;
	for (unsigned p = 0; p < l->n && n < CG_RECORD_OPERANDS; p++) {
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
			cg_tmap_describe(&t, r->shapes[n], CG_RECORD_SHAPE);
			shape = r->shapes[n];
		}
		r->ops[n++] = (struct cg_operand){.param = l->p[p].index, .dev = d, .addr = a,
						  .shape = shape, .uuid = cg_device_uuid(d)};
	}
	return n;
}

/* The deprecated launches (cuLaunch, cuLaunchGrid[Async]) pass what
 * cuParamSeti, cuParamSetf and cuParamSetv wrote into the function's
 * parameter space, at the offsets cuFuncGetParamInfo gives: the bytes are
 * mirrored here as written, in a space that grows to the furthest write
 * (all zero until written, as the driver's is), and read at launch like
 * the extra form's buffer.  A space outgrown is kept, not freed: a launch
 * on another thread may be reading it. */
struct cg_params {
	size_t size;
	const struct cg_params *outgrown;
	unsigned char bytes[];
};

/* Of a module ctxguard never saw load, or first met at its launch: it was
 * not recorded when the function came to be, and is forgotten whenever a
 * context ends, so what was written into it before cannot be known. */
static int unseen(const struct cg_fn *fn)
{
	return !fn->owner && !fn->mod;
}

static void param_set(CUfunction f, int offset, const void *src, size_t n)
{
	struct cg_fn *fn = (struct cg_fn *)cg_fn_get((uintptr_t)f);
	if (!fn || unseen(fn) || offset < 0 || !src)
		return;
	size_t end = (size_t)offset + n;
	struct cg_params *p = atomic_load_explicit(&fn->params, memory_order_acquire);
	while (!p || p->size < end) {
		size_t size = p ? 2 * p->size : 256;
		while (size < end)
			size *= 2;
		struct cg_params *q = calloc(1, sizeof *q + size);
		if (!q)
			return;
		q->size = size;
		q->outgrown = p;
		if (p)
			memcpy(q->bytes, p->bytes, p->size);
		/* Two threads writing one function's parameters at once (a race
		 * in the program too): one space wins. */
		if (atomic_compare_exchange_strong(&fn->params, &p, q))
			p = q;
		else
			free(q);
	}
	memcpy(p->bytes + offset, src, n);
}

CG_AFTER(cuParamSeti, param_set(hfunc, offset, &value, sizeof value))
CG_AFTER(cuParamSetf, param_set(hfunc, offset, &value, sizeof value))
CG_AFTER(cuParamSetv, param_set(hfunc, offset, ptr, numbytes))

/* A deprecated launch of a function whose parameters ctxguard cannot know
 * passes unchecked, said once per function, and fails `ctxguard --audit`. */
static __attribute__((noinline, cold)) void unknown_params(const char *api,
							   const struct cg_fn *fn, CUcontext ctx)
{
	if (atomic_exchange(&((struct cg_fn *)fn)->unchecked, 1))
		return;
	int dev = cg_ctx_device(ctx);
	cg_status_word("unchecked");
	cg_stderr("ctxguard: %s of kernel %s on device %d passed unchecked: its parameters were "
		  "set with cuParamSet* on a function ctxguard did not see loaded (first met at "
		  "a launch, or of a module loaded out of its sight), so its operands cannot be "
		  "read. Load the module after the first CUDA call, through the driver, or "
		  "launch it with cuLaunchKernel\n", api, fn->name, dev);
	char esc[4096];
	cg_json_escape(esc, sizeof esc, fn->name);
	cg_log_event("unchecked", "\"api\":\"%s\",\"kernel\":\"%s\",\"launch_dev\":%d,"
		     "\"reason\":\"parameters set before ctxguard saw the function\"",
		     api, esc, dev);
}

/* The launch's operand loop; inlined twice so that the kernelParams form
 * with a known address word and an allocation map (every framework's
 * launch on Hopper) tests nothing per operand that is decided per launch:
 * the form, the word a tensor map keeps its address in (word: its byte
 * offset), the map's pointer. */
static inline __attribute__((always_inline)) enum cg_verdict
walk(int dev, CUstream stream, const struct cg_layout *l, void **params, const unsigned char *buf,
     size_t nbuf, cg_tag *tags, size_t word)
{
	for (unsigned p = 0, n = l->n; p < n; p++) {
		uintptr_t a;
		int tag = 0;
		if (tags) {
			const unsigned char *bytes = params[l->p[p].index];
			memcpy(&a, bytes + (l->p[p].kind == CG_P_TMAP ? word : 0), sizeof a);
			/* Small integers and non-canonical values: no address
			 * (cg_mem_device); one unsigned compare for both. */
			if (a - 0x10000 >= ((uintptr_t)1 << 47) - 0x10000)
				continue;
			tag = atomic_load_explicit(&tags[a >> CG_MEM_SHIFT], memory_order_relaxed);
			if (CG_LIKELY(tag == dev + 1 || tag == CG_MEM_TAG_ANY))
				continue;
		} else {
			const void *bytes;
			if (!cg_operand_address(l, p, params, buf, nbuf, &bytes, &a))
				continue;
		}
		int d = tag ? cg_mem_tag_device(tag) : cg_mem_device(a, stream);
		if (CG_LIKELY(d < 0 || d == dev))
			continue;
		return CG_CROSSED_OPERAND;
	}
	return CG_PASS;
}

/* Where a launch's parameters are: kernelParams holds a pointer per
 * parameter; the extra form packs them into one buffer at their offsets,
 * as the parameter space does (NULL while nothing was written). */
static inline __attribute__((always_inline)) const unsigned char *
param_bytes(const struct cg_fn *fn, void **params, void **extra, enum cg_params_from from,
	    size_t *nbuf)
{
	*nbuf = 0;
	if (CG_UNLIKELY(from == CG_PARAMS_SPACE)) {
		const struct cg_params *p = atomic_load_explicit(&((struct cg_fn *)fn)->params,
								 memory_order_acquire);
		if (!p)
			return NULL;
		*nbuf = p->size;
		return p->bytes;
	}
	return !params && extra ? cg_extra_buffer(extra, nbuf) : NULL;
}

enum cg_verdict cg_check_operands(const char *api, const struct cg_fn *fn, CUcontext ctx,
				  CUstream stream, void **params, void **extra,
				  enum cg_params_from from)
{
	const struct cg_layout *l = cg_layout_of(fn, stream);
	if (CG_UNLIKELY(from == CG_PARAMS_SPACE) && l->n && unseen(fn)) {
		unknown_params(api, fn, ctx);
		return CG_PASS;
	}
	size_t nbuf;
	const unsigned char *buf = param_bytes(fn, params, extra, from, &nbuf);
	if (!l->n || (!params && !buf))
		return CG_PASS;
	int dev = cg_ctx_device(ctx);
	if (dev < 0)
		return CG_PASS;
	/* Without a known address word a tensor map is looked up by its
	 * bytes (cg_operand_address); without the map, an address is looked
	 * up in the table (cg_mem_device). */
	uint32_t words = atomic_load_explicit(&cg_tmap_addr_words, memory_order_relaxed) & CG_TMAP_WORDS;
	cg_tag *tags = atomic_load_explicit(&cg_granule_tags, memory_order_acquire);
	if (CG_LIKELY(params && words && tags))
		return walk(dev, stream, l, params, NULL, 0, tags, 8 * (size_t)__builtin_ctz(words));
	return walk(dev, stream, l, params, buf, nbuf, NULL, 0);
}

int cg_record_operands(struct cg_crossing_record *r, const char *api, CUstream stream,
		       void **params, void **extra, enum cg_params_from from)
{
	const struct cg_layout *l = cg_layout_of(r->fn, stream);
	size_t nbuf;
	const unsigned char *buf = param_bytes(r->fn, params, extra, from, &nbuf);
	int dev = cg_ctx_device(r->ctx);
	size_t n = crossing_operands(r, dev, stream, l, params, buf, nbuf);
	if (!n)
		return 0;
	cg_crossing_init(&r->c, CG_KIND_OPERAND, api, r->fn, r->ctx, dev, stream);
	r->c.operands = r->ops;
	r->c.noperands = n;
	return 1;
}
