/* What ctxguard keeps per context for redirects into it: the program's
 * streams and ctxguard's own (streams.c), pooled events (events.c) and
 * buffers of zeros (zeros.c); and the shadow's scratch output (shadow.c).
 * A context's state is found without a lock (a concurrent table, as the
 * registry's) and guarded by a lock of its own: a redirect into one context
 * never waits for one into another, nor for a stream made elsewhere.  No
 * driver call is made under a lock.  A destroyed context's state is
 * emptied and unlisted; a forked child starts with none. */
#include <pthread.h>
#include <stdlib.h>

#include "redirect.h"
#include "../report/report.h"

/* CUcontext -> its state, read lock-free; the list of them all and their
 * creation and removal are under `listing` (stream creation, destroys). */
static struct cg_table states = CG_TABLE_INIT;
static pthread_mutex_t listing = PTHREAD_MUTEX_INITIALIZER;
static struct cg_ctx_state *all;
/* Ended contexts' states, emptied, kept (see cg_ctx_state_on_ctx_end). */
static struct cg_ctx_state *retired;

static struct cg_ctx_state *created(CUcontext ctx)
{
	pthread_mutex_lock(&listing);
	struct cg_ctx_state *c = cg_table_get(&states, (uintptr_t)ctx);
	if (!c && (c = calloc(1, sizeof *c))) {
		c->ctx = ctx;
		pthread_mutex_init(&c->lock, NULL);
		c->next = all;
		all = c;
		cg_table_put(&states, (uintptr_t)ctx, c);
	}
	pthread_mutex_unlock(&listing);
	return c;
}

struct cg_ctx_state *cg_ctx_state_lock(CUcontext ctx, int create)
{
	if (!ctx)
		return NULL;
	struct cg_ctx_state *c = cg_table_get(&states, (uintptr_t)ctx);
	if (!c && create)
		c = created(ctx);
	if (c)
		pthread_mutex_lock(&c->lock);
	return c;
}

void cg_ctx_state_unlock(struct cg_ctx_state *c)
{
	if (c)
		pthread_mutex_unlock(&c->lock);
}

void cg_ctx_states_each(void (*fn)(struct cg_ctx_state *c, const void *arg), const void *arg)
{
	pthread_mutex_lock(&listing);
	for (struct cg_ctx_state *c = all; c; c = c->next) {
		pthread_mutex_lock(&c->lock);
		fn(c, arg);
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_unlock(&listing);
}

static void empty(struct cg_ctx_state *c)
{
	while (c->zeros) {
		struct cg_zeros *z = c->zeros;
		c->zeros = z->next;
		free(z);
	}
	free(c->streams);
	free(c->events);
	c->streams = NULL;
	c->events = NULL;
	c->nstreams = c->capstreams = c->nevents = c->capevents = c->made = 0;
	c->owned = NULL;
	c->scratch = 0;
	c->scratch_bytes = 0;
}

/* The context destroyed its streams, events and memory itself.  The state
 * is emptied and unlisted but kept: a thread that found it without a lock
 * may still be about to take its lock. */
void cg_ctx_state_on_ctx_end(CUcontext ctx)
{
	pthread_mutex_lock(&listing);
	struct cg_ctx_state *c = cg_table_del(&states, (uintptr_t)ctx);
	for (struct cg_ctx_state **q = &all; c && *q; q = &(*q)->next)
		if (*q == c) {
			*q = c->next;
			c->next = retired;
			retired = c;
			break;
		}
	pthread_mutex_unlock(&listing);
	if (c) {
		pthread_mutex_lock(&c->lock);
		empty(c);
		pthread_mutex_unlock(&c->lock);
	}
}

/* In a forked child: nothing of the parent's CUDA state is usable, and a
 * lock may have been held by a thread that does not exist here. */
void cg_ctx_state_on_fork(void)
{
	pthread_mutex_init(&listing, NULL);
	cg_table_reset(&states);
	struct cg_ctx_state *lists[] = {all, retired};
	for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
		while (lists[i]) {
			struct cg_ctx_state *c = lists[i];
			lists[i] = c->next;
			empty(c);
			free(c);
		}
	all = retired = NULL;
}
