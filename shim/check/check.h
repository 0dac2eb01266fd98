/* Checks (shim/check/): each launch's crossing checks (kinds (a) and (b)),
 * the action a crossing gets, and the CUPTI backstop for launches that
 * bypass the hooks. */
#ifndef CTXGUARD_CHECK_H
#define CTXGUARD_CHECK_H

#include "../track/track.h"

#pragma GCC visibility push(hidden)

/* What the launch check returns.  The hot path (check(), the operand
 * check) only finds: CG_PASS, a crossing of either kind, or a launch to
 * shadow.  Off it, a crossing is recorded and its action decides: pass
 * (warn, off), refuse, redirect, or abort (which does not return). */
enum cg_verdict {
	CG_PASS,            /* to the driver as the program made it */
	CG_REFUSE,          /* the hook returns cg_refused_code */
	CG_REDIRECT,        /* run where its operands live (shim/redirect/) */
	CG_SHADOW,          /* made as is, then the bundled kernel beside it */
	CG_CROSSED_OWNER,   /* found: kind (a), not acted on yet */
	CG_CROSSED_OPERAND, /* found: kind (b), not acted on yet */
};

/* A crossing as recorded off the hot path, on the launch hook's stack:
 * the report's fields, the function and launch context, and room for the
 * operands a kind-(b) report lists (a launch's first 16 crossing ones). */
enum { CG_RECORD_OPERANDS = 16, CG_RECORD_SHAPE = 128 };
struct cg_crossing_record {
	struct cg_crossing c;
	const struct cg_fn *fn;
	CUcontext ctx;
	struct cg_operand ops[CG_RECORD_OPERANDS];
	char shapes[CG_RECORD_OPERANDS][CG_RECORD_SHAPE];
};

/* Where a launch's parameters are. */
enum cg_params_from {
	CG_PARAMS_GIVEN, /* kernelParams, else extra's buffer */
	/* what cuParamSet* wrote into the function's parameter space (the
	 * deprecated launches) */
	CG_PARAMS_SPACE,
};

/* Kind (b) for one launch of fn in ctx (shim/check/operands.c), its
 * parameters where `from` says: CG_PASS or CG_CROSSED_OPERAND. */
enum cg_verdict cg_check_operands(const char *api, const struct cg_fn *fn, CUcontext ctx,
				  CUstream stream, void **params, void **extra,
				  enum cg_params_from from);
/* The same launch's crossing operands, recorded in r (r->fn and r->ctx
 * set): 0 when none crosses any more. */
int cg_record_operands(struct cg_crossing_record *r, const char *api, CUstream stream,
		       void **params, void **extra, enum cg_params_from from);

/* ---- the CUPTI backstop (shim/check/backstop.c) ---- */

void cg_backstop_start(void);   /* at init, when the policy asks */
void cg_backstop_on_fork(void); /* in a forked child */
/* Our hook for a CUPTI function the program looked up (dlsym), or NULL;
 * real is what the lookup found. */
void *cg_backstop_hook_for(const char *name, void *real);
/* "; backstop: ..." for the summary line, and the log's JSON fields. */
void cg_backstop_summary(char *line, size_t nline, char *json, size_t njson);

/* ---- launch checks (shim/check/launch.c) ---- */

/* Chooses the launch check's parts from the policy (once, at start-up). */
void cg_launch_configure(const struct cg_policy *p);
/* CUDA_SUCCESS to go on with the real call, else the code to return.
 * launch_ctx NULL: the stream's (or current) context. */
CUresult cg_check_launch(const char *api, CUfunction f, CUcontext launch_ctx, CUstream stream,
			 void **params, void **extra);
/* The same for a deprecated launch, whose parameters are f's parameter
 * space (cuParamSet*). */
CUresult cg_check_launch_space(const char *api, CUfunction f, CUstream stream);
/* How many entries of cuLaunchCooperativeKernelMultiDevice's list the
 * driver would read: n, or 0 for a count it refuses unread. */
unsigned cg_multi_entries(const CUDA_LAUNCH_PARAMS *list, unsigned n);
/* cuLaunchCooperativeKernelMultiDevice's n launches, each checked. */
CUresult cg_check_each(const char *api, const CUDA_LAUNCH_PARAMS *list, unsigned n);

/* ---- actions (shim/check/action.c) ---- */

/* A crossing by fn, launched in launch_ctx, with everything the report
 * names filled in; kind (b) adds the operand fields. */
void cg_crossing_init(struct cg_crossing *c, enum cg_crossing_kind kind, const char *api,
		      const struct cg_fn *fn, CUcontext launch_ctx, int launch_dev,
		      CUstream stream);

/* Decides and carries out the action for a crossing: CG_PASS (warn, off:
 * launch anyway), CG_REFUSE (error: cg_refused_code set) or CG_REDIRECT
 * (the launch hook redirects it); abort does not return. */
enum cg_verdict cg_act(struct cg_crossing *c, const struct cg_fn *fn);
/* The same with the action given (a redirect's fallback): never redirect. */
enum cg_verdict cg_act_as(struct cg_crossing *c, const struct cg_fn *fn, int action);
/* Each kernel's first print_limit crossings are reported in full; after
 * that they are counted, so a warn-mode loop cannot flood stderr or the log.
 * The code this thread's last refusal returned (shim/check/action.c), whose
 * message cuGetErrorString gives while it stands. */
extern _Thread_local CUresult cg_refused_code CG_TLS;
static inline void cg_error_clear(void) /* a launch went through */
{
	cg_refused_code = CUDA_SUCCESS;
}

#pragma GCC visibility pop

#endif
