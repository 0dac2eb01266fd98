/* Launch entry points: the check every kernel launch in the process goes
 * through.  The hot path is one lock-free registry read and, for a checked
 * function, one cuCtxGetCurrent (NULL, legacy and per-thread streams; a
 * stream's context is asked once per thread, cg_launch_ctx), plus one
 * lock-free map read per pointer operand; nothing is allocated. */
#include <string.h>

/* The handlers are inlined into the wrappers at the end of this file. */
#define CG_HANDLER_INLINE inline __attribute__((always_inline))
#include "check.h"
#include "../redirect/shadow.h"
#include "../report/report.h"

static __attribute__((noinline, cold)) CUresult
crossing(const char *api, const struct cg_fn *fn, CUcontext launch_ctx, CUstream stream)
{
	struct cg_crossing c;
	cg_crossing_init(&c, 'a', api, fn, launch_ctx, cg_ctx_device(launch_ctx), stream);
	return cg_act(&c, fn);
}

/* The record a launch wrapper's fast path found for a function it had to
 * leave to the check (passes()), handed to that check, its next step on
 * this thread: the function is looked up once per launch. */
static _Thread_local const struct cg_fn *handed CG_TLS;

/* The operand check each checked launch makes, chosen once from the
 * policy: one pointer instead of two settings read per launch, so that the
 * shadow costs the launch path nothing. */
static CUresult (*operand_check)(const char *api, const struct cg_fn *fn, CUcontext ctx,
				 CUstream stream, void **params, void **extra);

/* With shadow on: the operand check (when on), then the shadow's choice
 * for a launch that passed it without crossing. */
static CUresult shadow_check(const char *api, const struct cg_fn *fn, CUcontext ctx,
			     CUstream stream, void **params, void **extra)
{
	unsigned crossings = cg_shadow_crossings();
	CUresult rc = cg_policy->operands ? cg_check_operands(api, fn, ctx, stream, params, extra)
					  : CUDA_SUCCESS;
	return rc != CUDA_SUCCESS ? rc : cg_shadow_choose(fn, ctx, crossings);
}

void cg_launch_configure(const struct cg_policy *p)
{
	operand_check = p->shadow ? shadow_check : p->operands ? cg_check_operands : NULL;
}

/* Inlined into each launch handler: the check of a launch that the
 * wrappers' fast path (passes(), below) could not let through. */
static inline __attribute__((always_inline)) CUresult
check(const char *api, CUfunction f, CUcontext launch_ctx, CUstream stream, void **params,
      void **extra)
{
	cg_count(CG_C_LAUNCHES);
	const struct cg_fn *fn = handed;
	if (fn)
		handed = NULL;
	if (!fn || fn->handle != (uintptr_t)f)
		fn = cg_fn_get((uintptr_t)f);
	int all = cg_policy->scope == CG_SCOPE_ALL;
	if (CG_UNLIKELY(!fn)) {
		/* Loaded out of sight (cudart's own fatbins): only its
		 * operands can be checked, and only when asked for. */
		if (!all || !cg_policy->operands || !(fn = cg_fn_seen((uintptr_t)f, stream)))
			return CUDA_SUCCESS;
	}
	if (fn->rule < 0 && !all)
		return CUDA_SUCCESS;
	if (!launch_ctx)
		launch_ctx = cg_launch_ctx(stream);
	/* No launch context: the driver itself refuses the launch. */
	if (!launch_ctx)
		return CUDA_SUCCESS;
	/* A CUkernel (owner NULL) runs wherever it is launched.  Owners are
	 * module domains: a green context's launch of its primary context's
	 * function differs by handle alone, and is no crossing. */
	if (fn->owner && CG_UNLIKELY(launch_ctx != fn->owner) &&
	    cg_ctx_domain(launch_ctx, stream) != fn->owner)
		return crossing(api, fn, launch_ctx, stream);
	if (operand_check)
		return operand_check(api, fn, launch_ctx, stream, params, extra);
	return CUDA_SUCCESS;
}

/* A launch that goes through (or is redirected) leaves no refusal message
 * behind for the thread's next cuGetErrorString. */
static inline __attribute__((always_inline)) CUresult
checked(const char *api, CUfunction f, CUcontext launch_ctx, CUstream stream, void **params,
	void **extra)
{
	CUresult rc = check(api, f, launch_ctx, stream, params, extra);
	if (rc == CUDA_SUCCESS || rc == CG_REDIRECTED || rc == CG_SHADOWED)
		cg_error_clear();
	return rc;
}

/* A crossing a redirect could not take gets the fallback action. */
static CUresult fallback(struct cg_unredirected *u)
{
	return cg_act_as(&u->c, u->fn, cg_policy->redirect_fallback);
}

static CUresult refused(const char *api)
{
	struct cg_unredirected u;
	cg_redirect_refuse(api, &u);
	return fallback(&u);
}

/* Launches that cannot be redirected fall back when the action says so,
 * and are not shadowed. */
static __attribute__((noinline, cold)) CUresult not_taken(const char *api, CUresult rc)
{
	if (rc == CG_REDIRECTED)
		return refused(api);
	if (rc == CG_SHADOWED) {
		cg_shadow_refuse(api);
		return CUDA_SUCCESS;
	}
	return rc;
}

CUresult cg_check_launch(const char *api, CUfunction f, CUcontext launch_ctx, CUstream stream,
			 void **params, void **extra)
{
	CUresult rc = checked(api, f, launch_ctx, stream, params, extra);
	return CG_UNLIKELY(rc != CUDA_SUCCESS) ? not_taken(api, rc) : rc;
}

static CUresult redirected(const struct cg_launch *l)
{
	CUresult rc;
	struct cg_unredirected u;
	return cg_redirect(l, &rc, &u) ? rc : fallback(&u);
}

/* The redirect path: the launch as the program made it (no config: the
 * driver would refuse the launch, and so does the fallback).  A NULL stream
 * of a _ptsz variant is the per-thread stream. */
static __attribute__((noinline, cold)) CUresult redirect(const struct cg_variant *v,
							 CUfunction f, const CUlaunchConfig *config,
							 void **params, void **extra)
{
	if (!config)
		return refused(v->symbol);
	struct cg_launch l = {v->symbol, f, *config, params, extra};
	if (!l.config.hStream && strstr(v->symbol, "_ptsz"))
		l.config.hStream = CU_STREAM_PER_THREAD;
	return CG_MARKED(redirected(&l));
}

/* After the launch to shadow, made with result rc: the shadow, when it
 * was made.  A NULL stream of a _ptsz variant is the per-thread stream. */
static CUresult shadow_after(const struct cg_variant *v, CUresult rc, CUfunction f,
			     const CUlaunchConfig *config, void **params, void **extra)
{
	if (rc != CUDA_SUCCESS || !config)
		return rc;
	struct cg_launch l = {v->symbol, f, *config, params, extra};
	if (!l.config.hStream && strstr(v->symbol, "_ptsz"))
		l.config.hStream = CU_STREAM_PER_THREAD;
	/* its bundled launch is ctxguard's own: marked, as a redirect's is */
	cg_hooked_call = 1;
	cg_shadow(&l);
	cg_hooked_call = 0;
	return rc;
}

/* The shadow path: the launch as the program made it (rebuilt from its
 * config, so that the handler keeps no arguments for it), then, when it
 * was made, the shadow beside it (shim/redirect/shadow.c). */
static __attribute__((noinline, cold)) CUresult shadowed(const struct cg_variant *v,
							 CUfunction f, const CUlaunchConfig *c,
							 void **params, void **extra)
{
	if (!strcmp(v->family, "cuLaunchKernelEx"))
		return shadow_after(v, CG_MARKED(CG_REAL(cuLaunchKernelEx, v)(c, f, params, extra)),
				    f, c, params, extra);
	return shadow_after(v,
			    CG_MARKED(CG_REAL(cuLaunchKernel, v)(
				    f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX,
				    c->blockDimY, c->blockDimZ, c->sharedMemBytes, c->hStream,
				    params, extra)),
			    f, c, params, extra);
}

/* What a launch a redirect can take over does when the check did not just
 * pass it: the redirect, the launch then its shadow, or the refusal. */
static __attribute__((noinline, cold)) CUresult unusual(const struct cg_variant *v, CUresult rc,
							CUfunction f, const CUlaunchConfig *config,
							void **params, void **extra)
{
	if (rc == CG_REDIRECTED)
		return redirect(v, f, config, params, extra);
	if (rc == CG_SHADOWED)
		return shadowed(v, f, config, params, extra);
	return rc;
}

/* The launches a redirect can take over: checked, then either the real
 * call or, for a crossing under the redirect action, the launch described
 * by config (an expression evaluated only then), or for a launch to shadow
 * the launch made from config, then the shadow. */
#define CG_REDIRECTABLE(fam, stream, config)                                 \
	CG_HANDLER(fam)                                                      \
	{                                                                    \
		CUresult rc_ = checked(v->symbol, f, NULL, stream, kernelParams, extra); \
		if (CG_UNLIKELY(rc_ != CUDA_SUCCESS))                        \
			return unusual(v, rc_, f, config, kernelParams, extra); \
		return CG_MARKED(CG_REAL(fam, v)(CG_UNPAREN(A_##fam)));      \
	}

CG_REDIRECTABLE(cuLaunchKernel, hStream,
		(&(CUlaunchConfig){gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
				   sharedMemBytes, hStream, NULL, 0}))
CG_REDIRECTABLE(cuLaunchKernelEx, config ? config->hStream : NULL, config)
CG_CHECKED(cuLaunchCooperativeKernel,
	   cg_check_launch(v->symbol, f, NULL, hStream, kernelParams, NULL))
/* The deprecated launches pass the parameters cuParamSet* left in f. */
CG_CHECKED(cuLaunch, cg_check_launch(v->symbol, f, NULL, NULL, NULL, CG_PARAM_SPACE))
CG_CHECKED(cuLaunchGrid, cg_check_launch(v->symbol, f, NULL, NULL, NULL, CG_PARAM_SPACE))
CG_CHECKED(cuLaunchGridAsync, cg_check_launch(v->symbol, f, NULL, hStream, NULL, CG_PARAM_SPACE))

/* The deprecated multi-device launch: how many entries of list the driver
 * would read.  A count past the device count is refused by the driver
 * without reading the list, which may be far shorter (a crash here): 0. */
unsigned cg_multi_entries(const CUDA_LAUNCH_PARAMS *list, unsigned n)
{
	int devices = 0;
	if (!list || !cg_call.cuDeviceGetCount || cg_call.cuDeviceGetCount(&devices) != CUDA_SUCCESS ||
	    n > (unsigned)devices)
		return 0;
	return n;
}

/* One launch per device: each is checked, as far as the driver reads. */
CUresult cg_check_each(const char *api, const CUDA_LAUNCH_PARAMS *list, unsigned n)
{
	n = cg_multi_entries(list, n);
	for (unsigned i = 0; i < n; i++) {
		CUresult rc = cg_check_launch(api, list[i].function, NULL, list[i].hStream,
					      list[i].kernelParams, NULL);
		if (rc != CUDA_SUCCESS)
			return rc;
	}
	return CUDA_SUCCESS;
}

CG_CHECKED(cuLaunchCooperativeKernelMultiDevice,
	   cg_check_each(v->symbol, launchParamsList, numDevices))

/* A launch that passes unchecked, decided without a call: ctxguard is
 * ready, the driver has the variant, this thread counts in a block of its
 * own, no backstop waits for a mark, and the scope leaves the function
 * out.  It is counted and clears the refusal message, as check() would. */
static inline __attribute__((always_inline)) int passes(int variant, CUfunction f)
{
	_Atomic unsigned long *counts = cg_counts.v;
	if (CG_UNLIKELY(atomic_load_explicit(&cg_state, memory_order_acquire) != 2) ||
	    CG_UNLIKELY(!cg_variants[variant].real) || CG_UNLIKELY(!counts) ||
	    CG_UNLIKELY(cg_counts.shared) || CG_UNLIKELY(cg_policy->backstop) ||
	    CG_UNLIKELY(cg_policy->scope == CG_SCOPE_ALL))
		return 0;
	const struct cg_fn *fn = cg_fn_get((uintptr_t)f);
	if (fn && fn->rule >= 0) {
		handed = fn;
		return 0;
	}
	cg_bump_own(counts, CG_NCOUNTERS + variant);
	cg_bump_own(counts, CG_C_LAUNCHES);
	cg_error_clear();
	return 1;
}

/* The function each launch family launches, for that fast path (NULL:
 * none, always checked). */
#define F_cuLaunchKernel f
#define F_cuLaunchKernelEx f
#define F_cuLaunchCooperativeKernel f
#define F_cuLaunchCooperativeKernelMultiDevice NULL
#define F_cuLaunch f
#define F_cuLaunchGrid f
#define F_cuLaunchGridAsync f

/* The launches' exported wrappers: the fast path, else the wrapper every
 * other entry point has (CG_WRAPPER_AS), here so that it inlines its
 * handler and the check without link-time optimisation.  Either way one
 * tail call with the program's own arguments. */
#define FAMILY(fam)
#define VARIANT(fam, sym)
#define LAUNCH(fam, sym)                                                     \
	static __attribute__((noinline)) CG_WRAPPER_AS(fam, sym, checked_##sym) \
	CG_EXPORT CUresult sym P_##fam                                       \
	{                                                                    \
		cg_pfn_##fam to = checked_##sym;                             \
		if (F_##fam && passes(CG_V_##sym, F_##fam))                  \
			to = CG_REAL(fam, &cg_variants[CG_V_##sym]);         \
		return to(CG_UNPAREN(A_##fam));                              \
	}
#include "../hooks.def"
#undef FAMILY
#undef VARIANT
#undef LAUNCH
