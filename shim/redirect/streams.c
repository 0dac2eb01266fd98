/* The streams of each context: the ones the program created (a redirect
 * into that context waits for their tails and makes them wait for its
 * result) and the one ctxguard owns there, on which redirected work runs.
 * Creation and destruction are rare; the list is read only by a redirect,
 * which copies it under the lock and makes its driver calls after. */
#include <stdlib.h>

#include "redirect.h"
#include "../report/report.h"

/* Listed under ctx's module domain: a green context's streams are among
 * its device's primary context's, which a redirect into that device
 * orders itself with. */
static void add(CUstream s, CUcontext ctx)
{
	if (!s || !ctx)
		return;
	struct cg_ctx_state *c = cg_ctx_state_lock(ctx, 1);
	if (c && c->nstreams == c->capstreams) {
		size_t cap = c->capstreams ? 2 * c->capstreams : 16;
		CUstream *grown = realloc(c->streams, cap * sizeof *grown);
		if (grown) {
			c->streams = grown;
			c->capstreams = cap;
		}
	}
	if (c && c->nstreams < c->capstreams)
		c->streams[c->nstreams++] = s;
	cg_ctx_state_unlock(c);
}

static void unlist(struct cg_ctx_state *c, const void *s)
{
	for (size_t i = 0; i < c->nstreams; i++)
		if (c->streams[i] == s) {
			c->streams[i] = c->streams[--c->nstreams];
			break;
		}
}

/* Before the real destroy: the driver may hand the handle out again. */
static void drop(CUstream s)
{
	cg_ctx_states_each(unlist, s);
}

size_t cg_streams_of(CUcontext ctx, CUstream *out, size_t max)
{
	struct cg_ctx_state *c = cg_ctx_state_lock(ctx, 0);
	size_t n = c ? c->nstreams : 0;
	for (size_t i = 0; i < n && i < max; i++)
		out[i] = c->streams[i];
	cg_ctx_state_unlock(c);
	return n;
}

CUresult cg_stream_owned(CUcontext ctx, CUstream *out)
{
	struct cg_ctx_state *c = cg_ctx_state_lock(ctx, 1);
	CUstream s = c ? c->owned : NULL;
	cg_ctx_state_unlock(c);
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (s) {
		*out = s;
		return CUDA_SUCCESS;
	}
	/* Created outside the lock (ctx is current); a racing creator's
	 * stream is kept and this one destroyed. */
	CUresult rc = CG_REAL_SYM(cuStreamCreate, cuStreamCreate)(&s, CU_STREAM_NON_BLOCKING);
	if (rc != CUDA_SUCCESS)
		return rc;
	c = cg_ctx_state_lock(ctx, 1);
	CUstream kept = !c ? NULL : c->owned ? c->owned : (c->owned = s);
	cg_ctx_state_unlock(c);
	if (kept != s)
		CG_REAL_SYM(cuStreamDestroy, cuStreamDestroy_v2)(s);
	*out = kept;
	return kept ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* A new stream may later wait for work a redirect would queue behind it:
 * its context is warmed while nothing can be blocked yet. */
static void created(CUstream *s)
{
	CUcontext ctx = s && *s ? cg_stream_domain(*s) : NULL;
	add(s ? *s : NULL, ctx);
	if (ctx && cg_policy_redirects(cg_policy))
		cg_warm(ctx);
}

CG_AFTER(cuStreamCreate, created(phStream))
CG_AFTER(cuStreamCreateWithPriority, created(phStream))
CG_AFTER(cuGreenCtxStreamCreate, created(phStream))
/* The launch path's remembered stream contexts are voided before the
 * destroy and after it, as a context's end voids them (cg_context_on_ctx_end): an
 * answer kept while the destroy ran is void too. */
CG_HANDLER(cuStreamDestroy)
{
	drop(hStream);
	cg_stream_gone();
	CUresult rc = CG_REAL(cuStreamDestroy, v)(hStream);
	cg_stream_gone();
	return rc;
}
