/* Inside the redirect (shim/redirect/): its plan (plan.c), the ordering of
 * its work (order.c) and the bundled kernels' names (bundled.c), for the
 * redirect itself (redirect.c) and the shadow (shadow.c), which decides on
 * a launch as the plan does. */
#ifndef CTXGUARD_PLAN_H
#define CTXGUARD_PLAN_H

#include "decode.h"
#include "redirect.h"

#pragma GCC visibility push(hidden)

/* What a redirect will do, decided before any driver call that enqueues. */
struct cg_plan {
	int rehome;
	/* the original runs in its own context, a context of the launch's
	 * device: ordered with the launch stream alone, as the launch was */
	int own_ctx;
	struct cg_decoded gemm;
	int launch_dev; /* the launch's device, whose kernel attributes a twin takes */
	int to_dev;
	CUcontext target;
	const char *via; /* the bundled entry point, or "re-homed" */
};

/* 1: g holds launch l's problem (fn a recognized GEMM), and l's
 * configuration is the one DeepGEMM's host code gives it; 0 with why
 * filled otherwise.  What both the redirect and the shadow decide on. */
int cg_redirect_decode(const struct cg_launch *l, const struct cg_fn *fn, struct cg_decoded *g,
		       char *why, size_t n);

/* 1 with p filled for launch l of fn, crossing c; 0 with why filled when
 * it cannot be redirected (nothing was enqueued). */
int cg_redirect_plan(const struct cg_launch *l, const struct cg_crossing *c, const struct cg_fn *fn,
		     struct cg_plan *p, char *why, size_t n);

/* How far ordered() got with the work: not queued (a failure falls back),
 * or queued; then, when ordering it failed, how the host waited for it. */
struct cg_progress {
	int queued;
	struct cg_host_wait wait; /* failed NULL: ordered */
};

/* The work on stream s, the launch's, in the launch context (target). */
CUresult cg_redirect_on_launch_stream(const struct cg_plan *p, const struct cg_launch *l,
				      const struct cg_fn *fn, CUstream s, char *why, size_t n);
/* The work on the target context's stream T, ordered with s (of
 * launch_ctx) and every known stream there; progress says how far it got. */
CUresult cg_redirect_ordered(const struct cg_plan *p, const struct cg_launch *l,
			     const struct cg_fn *fn, CUstream s, CUcontext launch_ctx,
			     struct cg_progress *progress, char *why, size_t n);

/* The bundled entry point a DeepGEMM layout runs as (its name, for reports). */
const char *cg_bundled_name(int layout);

#pragma GCC visibility pop

#endif
