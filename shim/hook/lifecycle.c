/* Lifecycle events, each fanned out from here to every subsystem that
 * keeps state for it: a context's end (destroyed, reset, last released;
 * a green context's destroy) and the child of a fork. */
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
	cg_registry_forget_ctx(ctx);
	cg_memory_forget_ctx(ctx);
	cg_ctx_forget(ctx);
	cg_ctx_state_forget(ctx);
	cg_rehome_forget(ctx);
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
		cg_ctx_forget(ctx);
		cg_ctx_state_forget(ctx);
	}
	return rc;
}

/* CUDA state does not survive fork: the child starts with empty registries
 * and its own log file (%p), keeping the policy and the real functions. */
static void after_fork_child(void)
{
	/* Locks a start-up under way in another thread may hold. */
	cg_starting_forked();
	cg_backstop_forked();
	cg_status_forked();
	/* A start-up that another thread of the parent had under way has no
	 * thread here to finish it: the child starts anew at its next hooked
	 * call instead of waiting for it for ever. */
	int starting = 1;
	if (!cg_in_hook && atomic_compare_exchange_strong(&cg_state, &starting, 0))
		return;
	if (atomic_load(&cg_state) != 2)
		return;
	cg_registry_reset();
	cg_tmap_reset();
	cg_context_reset();
	cg_memory_reset();
	cg_device_forked();
	cg_redirect_forked();
	cg_shadow_forked();
	cg_report_forked();
}

__attribute__((constructor)) static void at_load(void)
{
	pthread_atfork(NULL, NULL, after_fork_child);
}
