/* Redirect: instead of a crossing launch, run its work on the device that
 * holds its operands and return CUDA_SUCCESS.  A recognized DeepGEMM GEMM
 * becomes the bundled grouped_mm kernel; any other kernel (DeepGEMM's
 * helpers) is re-homed: the same kernel, loaded into that device's context.
 *
 * Ordering.  The program queued the launch on stream S; the operands were
 * produced on the target device by its own streams.  The work runs on T,
 * ctxguard's non-blocking stream of the target context, after an event on
 * S and after the current tail of every stream ctxguard knows there with
 * work pending (the legacy and per-thread default streams, and every
 * stream the program created); then S and each of those streams wait for
 * an event recorded on T.  When the target is the launch context itself (kind a with the
 * operands on the launch device) the work simply runs on S.  Everything
 * that could refuse (decode, devices, capture, stream count) is decided
 * before the first event is recorded; once the work is queued nothing
 * falls back (ordered() says why). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "decode.h"
#include "plan.h"
#include "redirect.h"
#include "../report/report.h"

static const char *shown_name(const struct cg_fn *fn)
{
	return fn->demangled ? fn->demangled : fn->name ? fn->name : "<unknown>";
}

/* One JSON record per redirect; its buffer is allocated once per thread. */
static pthread_key_t json_key;
static pthread_once_t json_once = PTHREAD_ONCE_INIT;
static _Thread_local char *json;
enum { JSON = 12288 };

static void make_key(void)
{
	pthread_key_create(&json_key, free);
}

static void log_redirect(struct cg_crossing *c)
{
	if (!cg_policy->log_path)
		return;
	if (!json) {
		pthread_once(&json_once, make_key);
		if (!(json = malloc(JSON)))
			return;
		pthread_setspecific(json_key, json);
	}
	cg_log_crossing(c, json, JSON);
}

/* Where a redirect comes from: the function's device for kind (a), the
 * launch's for (b); between two contexts of one device, the context the
 * work left (the function's, when it ran in the launch context) and the
 * one it ran in. */
static const char *route(const struct cg_crossing *c, const struct cg_plan *p, char *buf,
			 size_t n)
{
	int from = c->kind == CG_KIND_OWNER ? c->owner_dev : c->launch_dev;
	if (from == p->to_dev)
		snprintf(buf, n, "from context %p to context %p of device %d",
			 (void *)p->target == c->launch_ctx ? c->owner_ctx : c->launch_ctx,
			 (void *)p->target, p->to_dev);
	else
		snprintf(buf, n, "from device %d to device %d", from, p->to_dev);
	return buf;
}

static void done(struct cg_crossing *c, struct cg_fn *fn, const struct cg_plan *p)
{
	cg_count(CG_C_REDIRECT);
	cg_status_crossing(CG_ACT_REDIRECT);
	c->action = CG_ACT_REDIRECT;
	c->redirect_dev = p->to_dev;
	c->redirect_via = p->via;
	char where[96];
	if (!atomic_exchange(&fn->redirected, 1))
		cg_stderr("ctxguard: redirect: %s %s (%s)\n", shown_name(fn),
			  route(c, p, where, sizeof where), p->via);
	log_redirect(c);
}

/* The work was queued but not ordered (why): the host waited for it, with
 * result rc.  Each outcome said once per kernel. */
static void waited(const struct cg_crossing *c, struct cg_fn *fn, const struct cg_plan *p,
		   CUresult rc, const char *why)
{
	unsigned char said = rc == CUDA_SUCCESS ? 1 : 2;
	char where[96];
	if (atomic_fetch_or(&fn->waited, said) & said)
		return;
	route(c, p, where, sizeof where);
	if (rc == CUDA_SUCCESS)
		cg_stderr("ctxguard: redirect: %s %s (%s) was queued, but %s: ctxguard waited on "
			  "the host for it to finish, so that later work sees its result\n",
			  shown_name(fn), where, p->via, why);
	else
		cg_stderr("ctxguard: redirect: %s %s (%s) was queued, but %s, and waiting for it on "
			  "the host failed too (error %d): device %d's context is likely broken; the "
			  "launch returns that error\n",
			  shown_name(fn), where, p->via, why, (int)rc, p->to_dev);
}

/* Stopped after all: one line why; the fallback's usual report follows
 * (the caller's, given the crossing in u). */
static int impossible(const struct cg_crossing *c, const struct cg_fn *fn, const char *why)
{
	int action = cg_policy->redirect_fallback;
	if (atomic_load(&fn->reports) < (unsigned long)cg_policy->print_limit || action == CG_ACT_ABORT)
		cg_stderr("ctxguard: redirect impossible: kernel %s launched on device %d: %s; "
			  "falling back to %s (redirect_fallback)\n",
			  shown_name(fn), c->launch_dev, why, cg_action_name(action));
	return 0;
}

int cg_redirect(const struct cg_launch *l, const struct cg_crossing *crossing, const struct cg_fn *f,
		CUresult *result)
{
	struct cg_crossing c = *crossing;
	struct cg_fn *fn = (struct cg_fn *)f;
	char why[512] = "";
	struct cg_plan p;
	*result = cg_redirect_malformed(l->params, l->extra);
	if (*result != CUDA_SUCCESS)
		return 1;
	if (!cg_redirect_plan(l, &c, fn, &p, why, sizeof why))
		return impossible(&c, fn, why);
	CUstream s = l->config.hStream;
	struct cg_progress progress = {0};
	CUresult rc = p.target == c.launch_ctx
			      ? cg_redirect_on_launch_stream(&p, l, fn, s, why, sizeof why)
			      : cg_redirect_ordered(&p, l, fn, s, (CUcontext)c.launch_ctx, &progress, why,
					sizeof why);
	if (rc != CUDA_SUCCESS && !progress.queued)
		return impossible(&c, fn, why);
	c.host_wait = progress.wait;
	done(&c, fn, &p);
	if (progress.wait.failed)
		waited(&c, fn, &p, rc, why);
	*result = rc;
	return 1;
}

void cg_redirect_refuse(const char *api, const struct cg_crossing *c, const struct cg_fn *fn)
{
	char why[128];
	snprintf(why, sizeof why, "%s is not redirected (cuLaunchKernel and cuLaunchKernelEx are)",
		 api);
	impossible(c, fn, why);
}
