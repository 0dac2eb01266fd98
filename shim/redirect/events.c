/* Events for ordering redirected work, pooled per context: created the
 * first time a redirect needs one more than the pool holds
 * (CU_EVENT_DISABLE_TIMING: the cheapest kind), then taken and given back
 * without allocating.  An event may be recorded again as soon as the waits
 * on its last record are enqueued, so a redirect holds one only for the
 * length of its own calls.  No driver call is made under the lock. */
#include <stdlib.h>

#include "redirect.h"
#include "../report/report.h"

/* ctx is current on this thread. */
CUresult cg_event_take(CUcontext ctx, CUevent *out)
{
	struct cg_ctx_state *c = cg_ctx_state_lock(ctx, 1);
	int have = c && c->nevents > 0;
	if (have)
		*out = c->events[--c->nevents];
	cg_ctx_state_unlock(c);
	if (have)
		return CUDA_SUCCESS;
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUevent e;
	CUresult rc = cg_call.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
	if (rc != CUDA_SUCCESS)
		return rc;
	/* Room for it on the free list now, so giving back never allocates. */
	c = cg_ctx_state_lock(ctx, 1);
	if (c && ++c->made > c->capevents) {
		size_t cap = c->capevents ? 2 * c->capevents : 8;
		CUevent *grown = realloc(c->events, cap * sizeof *grown);
		if (grown) {
			c->events = grown;
			c->capevents = cap;
		}
	}
	cg_ctx_state_unlock(c);
	*out = e;
	return CUDA_SUCCESS;
}

void cg_event_give(CUcontext ctx, CUevent e)
{
	struct cg_ctx_state *c = cg_ctx_state_lock(ctx, 1);
	if (c && c->nevents < c->capevents)
		c->events[c->nevents++] = e;
	cg_ctx_state_unlock(c);
}
