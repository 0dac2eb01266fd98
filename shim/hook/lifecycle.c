/* Lifecycle events, each fanned out from here, and only from here, to
 * every subsystem that keeps state for it: a context's end (destroyed,
 * reset, last released; a green context's destroy) and the child of a
 * fork.  Each subsystem answers them as cg_<subsystem>_on_ctx_end(ctx) and
 * cg_<subsystem>_on_fork(). */
#include <pthread.h>

#include "hook.h"
#include "../check/check.h"
#include "../redirect/shadow.h"
#include "../report/report.h"

/* Its modules and functions go with it (their handles may come back from
 * a load ctxguard does not see), and so do its memory (its addresses may
 * come back for memory no hook sees), streams, events, zeros and twins;
 * the twins of its functions, made in other contexts, are unlisted.
 * Called once the end succeeded: a refused destroy, of a primary context,
 * leaves everything live. */
static void ctx_gone(CUcontext ctx)
{
	cg_registry_on_ctx_end(ctx);
	cg_memory_on_ctx_end(ctx);
	cg_context_on_ctx_end(ctx);
	cg_ctx_state_on_ctx_end(ctx);
	cg_rehome_on_ctx_end(ctx);
}

CG_AFTER(cuCtxDestroy, ctx_gone(ctx))

/* A reset destroys everything the primary context holds, as a destroy
 * does (the handle itself may stay). */
CG_HANDLER(cuDevicePrimaryCtxReset)
{
	CUcontext p = cg_ctx_primary(dev);
	CUresult rc = CG_REAL(cuDevicePrimaryCtxReset, v)(dev);
	if (rc == CUDA_SUCCESS && p)
		ctx_gone(p);
	return rc;
}

/* Only the last release destroys it: known after the call. */
CG_HANDLER(cuDevicePrimaryCtxRelease)
{
	CUcontext p = cg_ctx_primary(dev);
	CUresult rc = CG_REAL(cuDevicePrimaryCtxRelease, v)(dev);
	if (rc == CUDA_SUCCESS && p && !cg_ctx_primary(dev))
		ctx_gone(p);
	return rc;
}

/* A green context's handle may come back for a created context: the alias
 * goes, and what a redirect kept for it (events recorded on its streams);
 * the primary context's modules and memory stay, as in the driver. */
CG_HANDLER(cuGreenCtxDestroy)
{
	CUcontext ctx = cg_green_ctx(hCtx);
	CUresult rc = CG_REAL(cuGreenCtxDestroy, v)(hCtx);
	if (rc == CUDA_SUCCESS && ctx) {
		cg_context_on_ctx_end(ctx);
		cg_ctx_state_on_ctx_end(ctx);
	}
	return rc;
}

/* CUDA state does not survive fork: the child starts with empty registries
 * and its own log file (%p), keeping the policy and the real functions. */
static void after_fork_child(void)
{
	/* Locks a start-up under way in another thread may hold. */
	cg_starting_on_fork();
	cg_backstop_on_fork();
	cg_status_on_fork();
	/* A start-up that another thread of the parent had under way has no
	 * thread here to finish it: the child starts anew at its next hooked
	 * call instead of waiting for it for ever. */
	int starting = CG_STARTING;
	if (!cg_in_hook && atomic_compare_exchange_strong(&cg_state, &starting, CG_UNSTARTED))
		return;
	if (atomic_load(&cg_state) != CG_READY)
		return;
	cg_registry_on_fork();
	cg_tmap_on_fork();
	cg_context_on_fork();
	cg_memory_on_fork();
	cg_allocations_on_fork();
	cg_device_on_fork();
	cg_redirect_on_fork();
	cg_ctx_state_on_fork();
	cg_rehome_on_fork();
	cg_shadow_on_fork();
	cg_sink_on_fork();
	cg_counters_on_fork();
	cg_summary_on_fork();
	cg_identity_on_fork();
}

__attribute__((constructor)) static void at_load(void)
{
	pthread_atfork(NULL, NULL, after_fork_child);
}
