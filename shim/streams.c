/* The streams of each context: the ones the program created (a redirect
 * into that context waits for their tails and makes them wait for its
 * result) and the one ctxguard owns there, on which redirected work runs.
 * Creation and destruction are rare; the list is read only by a redirect,
 * which copies it under the lock and makes its driver calls after. */
#include <pthread.h>
#include <stdlib.h>

#include "redirect.h"

struct ctx_streams {
	CUcontext ctx;
	CUstream owned;            /* created at the first redirect into ctx */
	CUstream *s;               /* the program's streams, in creation order */
	size_t n, cap;
	struct ctx_streams *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct ctx_streams *all;

static struct ctx_streams *find_locked(CUcontext ctx, int create)
{
	for (struct ctx_streams *c = all; c; c = c->next)
		if (c->ctx == ctx)
			return c;
	if (!create)
		return NULL;
	struct ctx_streams *c = calloc(1, sizeof *c);
	if (c) {
		c->ctx = ctx;
		c->next = all;
		all = c;
	}
	return c;
}

static void add(CUstream s)
{
	CUcontext ctx = cg_current_ctx();
	if (!s || !ctx)
		return;
	pthread_mutex_lock(&lock);
	struct ctx_streams *c = find_locked(ctx, 1);
	if (c && c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 16;
		CUstream *grown = realloc(c->s, cap * sizeof *grown);
		if (grown) {
			c->s = grown;
			c->cap = cap;
		}
	}
	if (c && c->n < c->cap)
		c->s[c->n++] = s;
	pthread_mutex_unlock(&lock);
}

/* Before the real destroy: the driver may hand the handle out again. */
static void drop(CUstream s)
{
	pthread_mutex_lock(&lock);
	for (struct ctx_streams *c = all; c; c = c->next)
		for (size_t i = 0; i < c->n; i++)
			if (c->s[i] == s) {
				c->s[i] = c->s[--c->n];
				break;
			}
	pthread_mutex_unlock(&lock);
}

size_t cg_streams_of(CUcontext ctx, CUstream *out, size_t max)
{
	pthread_mutex_lock(&lock);
	const struct ctx_streams *c = find_locked(ctx, 0);
	size_t n = c ? c->n : 0;
	for (size_t i = 0; i < n && i < max; i++)
		out[i] = c->s[i];
	pthread_mutex_unlock(&lock);
	return n;
}

CUresult cg_stream_owned(CUcontext ctx, CUstream *out)
{
	pthread_mutex_lock(&lock);
	struct ctx_streams *c = find_locked(ctx, 1);
	CUstream s = c ? c->owned : NULL;
	pthread_mutex_unlock(&lock);
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (s) {
		*out = s;
		return CUDA_SUCCESS;
	}
	/* Created outside the lock (ctx is current); a racing creator's
	 * stream is kept and this one destroyed. */
	CUresult rc = CG_REAL_SYM(cuStreamCreate, cuStreamCreate)(
		&s, CU_STREAM_NON_BLOCKING);
	if (rc != CUDA_SUCCESS)
		return rc;
	pthread_mutex_lock(&lock);
	CUstream kept = c->owned ? c->owned : (c->owned = s);
	pthread_mutex_unlock(&lock);
	if (kept != s)
		CG_REAL_SYM(cuStreamDestroy, cuStreamDestroy_v2)(s);
	*out = kept;
	return CUDA_SUCCESS;
}

/* A destroyed context takes its streams with it. */
void cg_streams_forget(CUcontext ctx)
{
	pthread_mutex_lock(&lock);
	for (struct ctx_streams **p = &all; *p; p = &(*p)->next)
		if ((*p)->ctx == ctx) {
			struct ctx_streams *c = *p;
			*p = c->next;
			free(c->s);
			free(c);
			break;
		}
	pthread_mutex_unlock(&lock);
}

/* In a forked child: nothing of the parent's CUDA state is usable, and the
 * lock may have been held by a thread that does not exist here. */
void cg_streams_reset(void)
{
	pthread_mutex_init(&lock, NULL);
	while (all) {
		struct ctx_streams *c = all;
		all = c->next;
		free(c->s);
		free(c);
	}
}

/* A new stream may later wait for work a redirect would queue behind it:
 * its context is warmed while nothing can be blocked yet. */
static void created(CUstream s)
{
	add(s);
	if (cg_policy_redirects(cg_policy))
		cg_warm(cg_current_ctx());
}

CG_AFTER(cuStreamCreate, created(phStream ? *phStream : NULL))
CG_AFTER(cuStreamCreateWithPriority, created(phStream ? *phStream : NULL))
CG_BEFORE(cuStreamDestroy, drop(hStream))
