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

/* The record a launch wrapper's fast path found for a function it had to
 * leave to the check (passes()), handed to that check, its next step on
 * this thread: the function is looked up once per launch. */
static _Thread_local const struct cg_fn *handed CG_TLS;

/* The operand check each checked launch makes, chosen once from the
 * policy: one pointer instead of two settings read per launch, so that the
 * shadow costs the launch path nothing. */
static enum cg_verdict (*operand_check)(const char *api, const struct cg_fn *fn, CUcontext ctx,
					CUstream stream, void **params, void **extra,
					enum cg_params_from from);

/* With shadow on: the operand check (when on), then a launch that passed
 * it is shadowed when it is a recognized GEMM. */
static enum cg_verdict shadow_check(const char *api, const struct cg_fn *fn, CUcontext ctx,
				    CUstream stream, void **params, void **extra,
				    enum cg_params_from from)
{
	enum cg_verdict v = cg_policy->operands
				    ? cg_check_operands(api, fn, ctx, stream, params, extra, from)
				    : CG_PASS;
	return v == CG_PASS && cg_shadow_wanted(fn) ? CG_SHADOW : v;
}

void cg_launch_configure(const struct cg_policy *p)
{
	operand_check = p->shadow ? shadow_check : p->operands ? cg_check_operands : NULL;
}

/* Inlined into each launch handler: the check of a launch that the
 * wrappers' fast path (passes(), below) could not let through.  It only
 * finds (enum cg_verdict); what a finding becomes is settled off it. */
static inline __attribute__((always_inline)) enum cg_verdict
check(const char *api, CUfunction f, CUcontext launch_ctx, CUstream stream, void **params,
      void **extra, enum cg_params_from from)
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
			return CG_PASS;
	}
	if (fn->rule < 0 && !all)
		return CG_PASS;
	if (!launch_ctx)
		launch_ctx = cg_launch_ctx(stream);
	/* No launch context: the driver itself refuses the launch. */
	if (!launch_ctx)
		return CG_PASS;
	/* A CUkernel (owner NULL) runs wherever it is launched.  Owners are
	 * module domains: a green context's launch of its primary context's
	 * function differs by handle alone, and is no crossing. */
	if (fn->owner && CG_UNLIKELY(launch_ctx != fn->owner) &&
	    cg_ctx_domain(launch_ctx, stream) != fn->owner)
		return CG_CROSSED_OWNER;
	if (operand_check)
		return operand_check(api, fn, launch_ctx, stream, params, extra, from);
	return CG_PASS;
}

/* A launch that goes through leaves no refusal message behind for the
 * thread's next cuGetErrorString. */
static inline __attribute__((always_inline)) enum cg_verdict
checked(const char *api, CUfunction f, CUcontext launch_ctx, CUstream stream, void **params,
	void **extra, enum cg_params_from from)
{
	enum cg_verdict v = check(api, f, launch_ctx, stream, params, extra, from);
	if (CG_LIKELY(v == CG_PASS))
		cg_error_clear();
	return v;
}

/* Off the hot path: what the check found, recorded in r (the launch hook's
 * stack), becomes a verdict: a crossing's action decides, and a launch to
 * shadow stays one.  The function and context are looked up again (the
 * check keeps nothing for later); one gone meanwhile passes, as does a
 * kind-(b) launch none of whose operands crosses any more. */
static enum cg_verdict settle(struct cg_crossing_record *r, enum cg_verdict found,
			      const char *api, CUfunction f, CUcontext launch_ctx,
			      CUstream stream, void **params, void **extra,
			      enum cg_params_from from)
{
	r->fn = cg_fn_get((uintptr_t)f);
	r->ctx = launch_ctx ? launch_ctx : cg_launch_ctx(stream);
	enum cg_verdict v = found;
	if (!r->fn || !r->ctx)
		v = CG_PASS;
	else if (found == CG_CROSSED_OWNER) {
		cg_crossing_init(&r->c, CG_KIND_OWNER, api, r->fn, r->ctx, cg_ctx_device(r->ctx),
				 stream);
		v = cg_act(&r->c, r->fn);
	} else if (found == CG_CROSSED_OPERAND)
		v = cg_record_operands(r, api, stream, params, extra, from)
			    ? cg_act(&r->c, r->fn)
			    : CG_PASS;
	if (v != CG_REFUSE)
		cg_error_clear();
	return v;
}

/* A crossing a redirect could not take gets the fallback action. */
static CUresult fallback(struct cg_crossing_record *r)
{
	enum cg_verdict v = cg_act_as(&r->c, r->fn, cg_policy->redirect_fallback);
	return v == CG_REFUSE ? cg_refused_code : CUDA_SUCCESS;
}

/* The launches a redirect cannot take: a crossing to redirect falls back
 * (said why), and one to shadow passes, said undecodable. */
static __attribute__((noinline, cold)) CUresult
not_taken(enum cg_verdict found, const char *api, CUfunction f, CUcontext launch_ctx,
	  CUstream stream, void **params, void **extra, enum cg_params_from from)
{
	struct cg_crossing_record r;
	switch (settle(&r, found, api, f, launch_ctx, stream, params, extra, from)) {
	case CG_REFUSE:
		return cg_refused_code;
	case CG_REDIRECT:
		cg_redirect_refuse(api, &r.c, r.fn);
		return fallback(&r);
	case CG_SHADOW:
		cg_shadow_refuse(api, r.fn, r.ctx);
		return CUDA_SUCCESS;
	default:
		return CUDA_SUCCESS;
	}
}

static inline __attribute__((always_inline)) CUresult
check_launch(const char *api, CUfunction f, CUcontext launch_ctx, CUstream stream, void **params,
	     void **extra, enum cg_params_from from)
{
	enum cg_verdict v = checked(api, f, launch_ctx, stream, params, extra, from);
	return CG_UNLIKELY(v != CG_PASS)
		       ? not_taken(v, api, f, launch_ctx, stream, params, extra, from)
		       : CUDA_SUCCESS;
}

CUresult cg_check_launch(const char *api, CUfunction f, CUcontext launch_ctx, CUstream stream,
			 void **params, void **extra)
{
	return check_launch(api, f, launch_ctx, stream, params, extra, CG_PARAMS_GIVEN);
}

CUresult cg_check_launch_space(const char *api, CUfunction f, CUstream stream)
{
	return check_launch(api, f, NULL, stream, NULL, NULL, CG_PARAMS_SPACE);
}

/* The launch as the program made it, from its config: a launch to shadow,
 * or one whose crossing's action let it go. */
static CUresult as_made(const struct cg_variant *v, CUfunction f, const CUlaunchConfig *c,
			void **params, void **extra)
{
	if (!strcmp(v->family, "cuLaunchKernelEx"))
		return CG_MARKED(CG_REAL(cuLaunchKernelEx, v)(c, f, params, extra));
	return CG_MARKED(CG_REAL(cuLaunchKernel, v)(f, c->gridDimX, c->gridDimY, c->gridDimZ,
						    c->blockDimX, c->blockDimY, c->blockDimZ,
						    c->sharedMemBytes, c->hStream, params, extra));
}

/* The launch as the program made it, for the redirect and the shadow: a
 * NULL stream of a _ptsz variant is the per-thread stream. */
static struct cg_launch launch_of(const struct cg_variant *v, CUfunction f,
				  const CUlaunchConfig *config, void **params, void **extra)
{
	struct cg_launch l = {v->symbol, f, *config, params, extra};
	if (!l.config.hStream && strstr(v->symbol, "_ptsz"))
		l.config.hStream = CU_STREAM_PER_THREAD;
	return l;
}

/* The redirect path: run where the crossing record says, else the
 * fallback.  No config: the driver would refuse the launch, and so does
 * the fallback. */
static CUresult redirect(const struct cg_variant *v, struct cg_crossing_record *r, CUfunction f,
			 const CUlaunchConfig *config, void **params, void **extra)
{
	if (!config) {
		cg_redirect_refuse(v->symbol, &r->c, r->fn);
		return fallback(r);
	}
	struct cg_launch l = launch_of(v, f, config, params, extra);
	CUresult rc;
	int done;
	CG_MARKED_DO(done = cg_redirect(&l, &r->c, r->fn, &rc));
	return done ? rc : fallback(r);
}

/* The shadow path: the launch as the program made it (rebuilt from its
 * config, so that the handler keeps no arguments for it), then, when it
 * was made, the shadow beside it (shim/redirect/shadow.c); its bundled
 * launch is ctxguard's own, marked as a redirect's is. */
static CUresult shadowed(const struct cg_variant *v, const struct cg_crossing_record *r,
			 CUfunction f, const CUlaunchConfig *config, void **params, void **extra)
{
	CUresult rc = as_made(v, f, config, params, extra);
	if (rc != CUDA_SUCCESS || !config)
		return rc;
	struct cg_launch l = launch_of(v, f, config, params, extra);
	CG_MARKED_DO(cg_shadow(&l, r->fn, r->ctx));
	return rc;
}

/* What a launch a redirect can take over does when the check did not just
 * pass it: settled, then the redirect, the launch and its shadow, the
 * refusal, or the launch as made (a warn or off action). */
static __attribute__((noinline, cold)) CUresult
unusual(const struct cg_variant *v, enum cg_verdict found, CUfunction f,
	const CUlaunchConfig *config, void **params, void **extra)
{
	struct cg_crossing_record r;
	switch (settle(&r, found, v->symbol, f, NULL, config ? config->hStream : NULL, params,
		       extra, CG_PARAMS_GIVEN)) {
	case CG_REFUSE:
		return cg_refused_code;
	case CG_REDIRECT:
		return redirect(v, &r, f, config, params, extra);
	case CG_SHADOW:
		return shadowed(v, &r, f, config, params, extra);
	default:
		return as_made(v, f, config, params, extra);
	}
}

/* The launches a redirect can take over: checked, then either the real
 * call or, when the check found something, what it settles into, with
 * the launch described by config (an expression evaluated only then). */
#define CG_REDIRECTABLE(fam, stream, config)                                 \
	CG_HANDLER(fam)                                                      \
	{                                                                    \
		enum cg_verdict v_ = checked(v->symbol, f, NULL, stream, kernelParams, extra, \
					     CG_PARAMS_GIVEN);                       \
		if (CG_UNLIKELY(v_ != CG_PASS))                              \
			return unusual(v, v_, f, config, kernelParams, extra); \
		return CG_MARKED(CG_REAL(fam, v)(CG_UNPAREN(A_##fam)));      \
	}

CG_REDIRECTABLE(cuLaunchKernel, hStream,
		(&(CUlaunchConfig){gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
				   sharedMemBytes, hStream, NULL, 0}))
CG_REDIRECTABLE(cuLaunchKernelEx, config ? config->hStream : NULL, config)
CG_CHECKED(cuLaunchCooperativeKernel,
	   cg_check_launch(v->symbol, f, NULL, hStream, kernelParams, NULL))
/* The deprecated launches pass the parameters cuParamSet* left in f. */
CG_CHECKED(cuLaunch, cg_check_launch_space(v->symbol, f, NULL))
CG_CHECKED(cuLaunchGrid, cg_check_launch_space(v->symbol, f, NULL))
CG_CHECKED(cuLaunchGridAsync, cg_check_launch_space(v->symbol, f, hStream))

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
	if (CG_UNLIKELY(atomic_load_explicit(&cg_state, memory_order_acquire) != CG_READY) ||
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
