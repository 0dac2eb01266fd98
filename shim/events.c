/* Events for ordering redirected work, pooled per context: created the
 * first time a redirect needs one more than the pool holds
 * (CU_EVENT_DISABLE_TIMING: the cheapest kind), then taken and given back
 * without allocating.  An event may be recorded again as soon as the waits
 * on its last record are enqueued, so a redirect holds one only for the
 * length of its own calls.  No driver call is made under the lock. */
#include <pthread.h>
#include <stdlib.h>

#include "redirect.h"

struct pool {
	CUcontext ctx;
	CUevent *free;
	size_t n, cap, made;       /* cap >= made: every event fits back */
	struct pool *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct pool *all;

static struct pool *find_locked(CUcontext ctx)
{
	for (struct pool *p = all; p; p = p->next)
		if (p->ctx == ctx)
			return p;
	struct pool *p = calloc(1, sizeof *p);
	if (p) {
		p->ctx = ctx;
		p->next = all;
		all = p;
	}
	return p;
}

/* ctx is current on this thread. */
CUresult cg_event_take(CUcontext ctx, CUevent *out)
{
	pthread_mutex_lock(&lock);
	struct pool *p = find_locked(ctx);
	int have = p && p->n > 0;
	if (have)
		*out = p->free[--p->n];
	pthread_mutex_unlock(&lock);
	if (have)
		return CUDA_SUCCESS;
	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUevent e;
	CUresult rc = cg_call.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
	if (rc != CUDA_SUCCESS)
		return rc;
	/* Room for it on the free list now, so giving back never allocates. */
	pthread_mutex_lock(&lock);
	if (++p->made > p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 8;
		CUevent *grown = realloc(p->free, cap * sizeof *grown);
		if (grown) {
			p->free = grown;
			p->cap = cap;
		}
	}
	pthread_mutex_unlock(&lock);
	*out = e;
	return CUDA_SUCCESS;
}

void cg_event_give(CUcontext ctx, CUevent e)
{
	pthread_mutex_lock(&lock);
	struct pool *p = find_locked(ctx);
	if (p && p->n < p->cap)
		p->free[p->n++] = e;
	pthread_mutex_unlock(&lock);
}

/* A destroyed context destroyed its events. */
void cg_events_forget(CUcontext ctx)
{
	pthread_mutex_lock(&lock);
	for (struct pool **q = &all; *q; q = &(*q)->next)
		if ((*q)->ctx == ctx) {
			struct pool *p = *q;
			*q = p->next;
			free(p->free);
			free(p);
			break;
		}
	pthread_mutex_unlock(&lock);
}

/* In a forked child (see cg_streams_reset). */
void cg_events_reset(void)
{
	pthread_mutex_init(&lock, NULL);
	while (all) {
		struct pool *p = all;
		all = p->next;
		free(p->free);
		free(p);
	}
}
