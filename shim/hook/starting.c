/* A hooked call while another thread starts the shim.  It waits, but not
 * for ever: start-up needs glibc's loader lock (dlopen, dlsym), and a
 * thread inside dlopen (a library's constructor calling the driver) holds
 * it, so waiting there would deadlock.  After WAIT_MS the call passes
 * through unchecked, to a real function looked up afresh (start-up is
 * still writing cg_variants and the identity map); lookups (dlsym,
 * cuGetProcAddress) are answered as after start-up, with the wrapper.
 * What passed is said once start-up is done. */
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "hook.h"
#include "../check/check.h"
#include "../redirect/shadow.h"
#include "../report/report.h"

/* Start-up takes half a millisecond on the fake driver, its CUPTI loaded
 * too; this leaves room for a real libcupti read from a slow disk.  Past
 * it, a deadlock is far likelier than a slow start. */
enum { WAIT_MS = 1000 };

/* The end of a start-up and a call passing unchecked exclude each other:
 * every call counted here is said by the start-up it passed. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long passed;          /* calls passed during this start-up */
static const char *first;             /* the entry point of the first */
static unsigned long ends;            /* start-ups ended so far */
/* ends + 1 when this thread stopped waiting: until that start-up ends,
 * its next calls pass at once (a constructor may make hundreds). */
static _Thread_local unsigned long gave_up CG_TLS;

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static int starting(void)
{
	return atomic_load_explicit(&cg_state, memory_order_acquire) == CG_STARTING;
}

int cg_starting_wait(const char *what)
{
	pthread_mutex_lock(&lock);
	int patient = gave_up != ends + 1;
	pthread_mutex_unlock(&lock);
	for (long long until = now_ms() + WAIT_MS; patient && starting() && now_ms() < until;)
		sched_yield();
	pthread_mutex_lock(&lock);
	int s = atomic_load_explicit(&cg_state, memory_order_acquire);
	if (s == CG_STARTING) {
		gave_up = ends + 1;
		if (what && !passed++)
			first = what;
	}
	pthread_mutex_unlock(&lock);
	return s == CG_READY;
}

void cg_started(int state)
{
	pthread_mutex_lock(&lock);
	atomic_store_explicit(&cg_state, state, memory_order_release);
	unsigned long n = passed;
	const char *what = first;
	passed = 0;
	ends++;
	pthread_mutex_unlock(&lock);
	/* Inert or not started, the shim checks nothing anyway. */
	if (state != CG_READY || !n)
		return;
	cg_status_word("unchecked");
	cg_stderr("ctxguard: %lu call%s (the first %s) passed unchecked: made while ctxguard "
		  "was starting on another thread, after waiting %d ms for it (a thread inside "
		  "dlopen holds the loader lock that start-up needs: waiting longer could "
		  "deadlock); a module loaded then is not tracked, a launch then was not checked. "
		  "Make the first CUDA call before threads load libraries that use CUDA\n",
		  n, n == 1 ? "" : "s", what, WAIT_MS);
	cg_log_event("unchecked", "\"calls\":%lu,\"first\":\"%s\",\"waited_ms\":%d", n, what,
		     WAIT_MS);
}

int cg_starting_elsewhere(void)
{
	return starting() && !cg_in_hook;
}

void *cg_starting_real(const struct cg_variant *v)
{
	/* Written by the start-up that ended, or by this very thread. */
	if (atomic_load_explicit(&cg_state, memory_order_acquire) >= CG_READY || cg_in_hook)
		return v->real;
	void *h = dlopen(cg_libcuda_name(), RTLD_LAZY | RTLD_NOLOAD);
	void *p = h ? cg_variant_real(h, v) : NULL;
	if (h)
		dlclose(h);
	return p;
}

void *cg_starting_hook(const void *real)
{
	void *h = dlopen(cg_libcuda_name(), RTLD_LAZY | RTLD_NOLOAD);
	void *hook = NULL;
	for (int i = 0; h && !hook && i < CG_NVARIANTS; i++)
		if (cg_variant_real(h, &cg_variants[i]) == real)
			hook = cg_variants[i].hook;
	if (h)
		dlclose(h);
	return hook;
}

/* The parent's start-up and its calls are the parent's to finish and say. */
void cg_starting_on_fork(void)
{
	pthread_mutex_init(&lock, NULL);
	passed = 0;
	first = NULL;
	ends++;
}
