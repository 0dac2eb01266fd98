/* What ctxguard keeps per context for redirects into it: the program's
 * streams and ctxguard's own (streams.c), pooled events (events.c) and
 * buffers of zeros (zeros.c); and the shadow's scratch output (shadow.c).  One list under one lock: it is touched when
 * streams are created or destroyed and by redirects, never by a plain
 * launch, and no driver call is made under the lock.  A destroyed
 * context's state goes with it; a forked child starts with none. */
#include <pthread.h>
#include <stdlib.h>

#include "redirect.h"
#include "../report/report.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct cg_ctx_state *all;

struct cg_ctx_state *cg_ctx_state_lock(CUcontext ctx, int create)
{
	pthread_mutex_lock(&lock);
	struct cg_ctx_state *c = all;
	while (c && c->ctx != ctx)
		c = c->next;
	if (!c && create && ctx && (c = calloc(1, sizeof *c))) {
		c->ctx = ctx;
		c->next = all;
		all = c;
	}
	return c;
}

struct cg_ctx_state *cg_ctx_states_lock(void)
{
	pthread_mutex_lock(&lock);
	return all;
}

void cg_ctx_state_unlock(void)
{
	pthread_mutex_unlock(&lock);
}

static void release(struct cg_ctx_state *c)
{
	while (c->zeros) {
		struct cg_zeros *z = c->zeros;
		c->zeros = z->next;
		free(z);
	}
	free(c->streams);
	free(c->events);
	free(c);
}

/* The context destroyed its streams, events and memory itself. */
void cg_ctx_state_on_ctx_end(CUcontext ctx)
{
	pthread_mutex_lock(&lock);
	for (struct cg_ctx_state **q = &all; *q; q = &(*q)->next)
		if ((*q)->ctx == ctx) {
			struct cg_ctx_state *c = *q;
			*q = c->next;
			release(c);
			break;
		}
	pthread_mutex_unlock(&lock);
}

/* In a forked child: nothing of the parent's CUDA state is usable, and the
 * lock may have been held by a thread that does not exist here. */
void cg_ctx_state_on_fork(void)
{
	pthread_mutex_init(&lock, NULL);
	while (all) {
		struct cg_ctx_state *c = all;
		all = c->next;
		release(c);
	}
}
