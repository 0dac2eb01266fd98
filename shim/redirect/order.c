/* The redirect's work ordered with the program's: on the launch stream
 * when the target is the launch context, else on ctxguard's stream T of the
 * target context, between events that order it with the launch stream and
 * every known stream there (shim/redirect/redirect.c says how). */
#include <stdio.h>

#include "decode.h"
#include "plan.h"
#include "redirect.h"
#include "../report/report.h"

/* Streams a redirect orders itself with, at most: the copy is on the stack. */
enum { MAX_KNOWN = 512 };

/* The work itself on stream s of the target context (current). */
static CUresult run(const struct cg_plan *p, const struct cg_launch *l, const struct cg_fn *fn,
		    CUstream s, char *why, size_t n)
{
	if (!p->rehome)
		return cg_bundled_run(p->target, s, &p->gemm, why, n);
	if (!CG_REAL_SYM(cuLaunchKernelEx, cuLaunchKernelEx)) {
		snprintf(why, n, "the driver has no cuLaunchKernelEx (before CUDA 11.8)");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	CUfunction f = cg_rehome_function(fn, p->target, p->launch_dev, why, n);
	if (!f)
		return CUDA_ERROR_NOT_FOUND;
	CUlaunchConfig config = l->config;
	config.hStream = s;
	CUresult rc =
		CG_REAL_SYM(cuLaunchKernelEx, cuLaunchKernelEx)(&config, f, l->params, l->extra);
	if (rc != CUDA_SUCCESS)
		snprintf(why, n, "the re-homed launch failed (error %d)", (int)rc);
	return rc;
}

CUresult cg_redirect_on_launch_stream(const struct cg_plan *p, const struct cg_launch *l,
				 const struct cg_fn *fn, CUstream s, char *why, size_t n)
{
	if (cg_call.cuCtxPushCurrent_v2(p->target) != CUDA_SUCCESS) {
		snprintf(why, n, "cannot make the launch context current");
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	CUresult rc = run(p, l, fn, s, why, n);
	CUcontext popped;
	cg_call.cuCtxPopCurrent_v2(&popped);
	return rc;
}

/* The default streams first: they are not in the program's list. */
static CUstream known_stream(const CUstream *known, size_t i)
{
	return i == 0 ? CU_STREAM_LEGACY : i == 1 ? CU_STREAM_PER_THREAD : known[i - 2];
}

/* A program stream destroyed since the copy of the list (its handle
 * refused) has no later work to order. */
static int gone(size_t i, CUresult rc)
{
	return i >= 2 && (rc == CUDA_ERROR_INVALID_HANDLE || rc == CUDA_ERROR_INVALID_CONTEXT);
}

/* ctx made current, else the redirect falls back saying why */
#define PUSH(ctx, ...)                                                   \
	do {                                                             \
		if (cg_call.cuCtxPushCurrent_v2(ctx) != CUDA_SUCCESS) {  \
			snprintf(why, n, __VA_ARGS__);                   \
			rc = CUDA_ERROR_INVALID_CONTEXT;                 \
			goto give;                                       \
		}                                                        \
	} while (0)

/* what failed: said in why, kept for a host wait's record */
#define FAIL(call, what)                                                                     \
	do {                                                                                 \
		CUresult rc_ = (call);                                                       \
		if (rc_ != CUDA_SUCCESS) {                                                   \
			snprintf(why, n, "%s failed (error %d)", what, (int)rc_);            \
			failed = what;                                                       \
			rc = rc_;                                                            \
			goto out;                                                            \
		}                                                                            \
	} while (0)

CUresult cg_redirect_ordered(const struct cg_plan *p, const struct cg_launch *l, const struct cg_fn *fn,
			CUstream s, CUcontext launch_ctx, struct cg_progress *progress, char *why,
			size_t n)
{
	CUstream known[MAX_KNOWN], t = NULL;
	CUevent before = NULL, inside = NULL, after = NULL;
	CUcontext popped;
	CUresult rc = CUDA_SUCCESS;
	const char *failed = NULL;
	int recorded = 0;
	/* In the function's own context the launch's order is S's alone: the
	 * program ordered nothing else with it there. */
	size_t nk = 0;
	if (!p->own_ctx) {
		nk = cg_streams_of(p->target, known, MAX_KNOWN);
		if (nk > MAX_KNOWN) {
			snprintf(why, n, "more than %d streams in device %d's context", MAX_KNOWN,
				 p->to_dev);
			return CUDA_ERROR_NOT_SUPPORTED;
		}
		nk += 2;
	}
	PUSH(p->target, "cannot make device %d's context current", p->to_dev);
	/* Waiting on a capturing stream, or recording on the legacy stream
	 * during another thread's global-mode capture, would break it. */
	for (size_t i = 0; i < nk; i++)
		if (cg_capturing(known_stream(known, i))) {
			snprintf(why, n, "a stream of device %d is capturing a CUDA graph",
				 p->to_dev);
			rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
			goto out;
		}
	FAIL(cg_stream_owned(p->target, &t), "creating ctxguard's stream");
	FAIL(cg_event_take(p->target, &inside), "cuEventCreate");
	FAIL(cg_event_take(p->target, &after), "cuEventCreate");
	cg_call.cuCtxPopCurrent_v2(&popped);

	/* S's event comes from S's context (the launch context, current for
	 * the default streams). */
	PUSH(launch_ctx, "cannot make the launch context current");
	FAIL(cg_event_take(launch_ctx, &before), "cuEventCreate");
	FAIL(cg_call.cuEventRecord(before, s), "cuEventRecord on the launch stream");
	cg_call.cuCtxPopCurrent_v2(&popped);

	/* Unchecked, a failure would leave the program's context current:
	 * the twin made there, and `out` popping a context not pushed. */
	PUSH(p->target, "cannot make device %d's context current", p->to_dev);
	FAIL(cg_call.cuStreamWaitEvent(t, before, 0), "cuStreamWaitEvent");
	/* One event serves every tail: each wait takes the record before it.
	 * A stream with nothing pending has no tail to wait for. */
	for (size_t i = 0; i < nk; i++) {
		if (cg_call.cuStreamQuery(known_stream(known, i)) == CUDA_SUCCESS)
			continue;
		CUresult r = cg_call.cuEventRecord(inside, known_stream(known, i));
		if (gone(i, r))
			continue;
		FAIL(r, "cuEventRecord");
		FAIL(cg_call.cuStreamWaitEvent(t, inside, 0), "cuStreamWaitEvent");
	}
	if ((rc = run(p, l, fn, t, why, n)) != CUDA_SUCCESS)
		goto out;
	progress->queued = 1;
	FAIL(cg_call.cuEventRecord(after, t), "cuEventRecord on ctxguard's stream");
	recorded = 1;
	for (size_t i = 0; i < nk; i++) {
		CUresult r = cg_call.cuStreamWaitEvent(known_stream(known, i), after, 0);
		if (!gone(i, r))
			FAIL(r, "cuStreamWaitEvent on a stream of the target context");
	}
	cg_call.cuCtxPopCurrent_v2(&popped);
	/* Back in the launch context: S may be one of its default streams. */
	if ((rc = cg_call.cuStreamWaitEvent(s, after, 0)) != CUDA_SUCCESS) {
		failed = "cuStreamWaitEvent on the launch stream";
		snprintf(why, n, "%s failed (error %d)", failed, (int)rc);
	}
	goto give;
out:
	cg_call.cuCtxPopCurrent_v2(&popped);
give:
	/* Once queued, the work runs: falling back now would launch the
	 * original as well (the work done twice, once across devices), or
	 * refuse or abort a launch that happened.  Unordered, the program's
	 * next work could miss its result, so the host waits for it instead
	 * (for T when the event was not recorded): all later work comes after
	 * it.  The only time a redirect waits for the program's work, on this
	 * error path alone (README, "Deadlock"). */
	if (rc != CUDA_SUCCESS && progress->queued) {
		const char *call = recorded ? "cuEventSynchronize" : "cuStreamSynchronize";
		CUresult host = recorded ? cg_call.cuEventSynchronize(after)
					 : cg_call.cuStreamSynchronize(t);
		progress->wait = (struct cg_host_wait){failed, rc, call, host};
		rc = host;
	}
	if (before)
		cg_event_give(launch_ctx, before);
	if (inside)
		cg_event_give(p->target, inside);
	if (after)
		cg_event_give(p->target, after);
	return rc;
}
