/* Which context a launch runs in, which device a context is on, and which
 * module domain it belongs to. */
#include "track.h"
#include "../report/report.h"

static struct cg_table devices = CG_TABLE_INIT;   /* CUcontext -> device + 1 */
/* CUcontext -> the context whose modules it runs: a green context's
 * CUcontext shares its device's primary context's (measured on an H100,
 * docs/contexts.md); any other context is its own. */
static struct cg_table domains = CG_TABLE_INIT;

CUcontext cg_current_ctx(void)
{
	CUcontext c = NULL;
	if (cg_call.cuCtxGetCurrent(&c) != CUDA_SUCCESS)
		return NULL;
	return c;
}

/* A context or stream destroyed anywhere moves the epoch, which voids
 * every thread's remembered answers (its handle may come back for another
 * device or context). */
_Atomic unsigned cg_ctx_epoch;
_Thread_local struct cg_last_stream cg_last_stream CG_TLS;

/* The stream's context decides, as measured on H200s; the NULL, legacy and
 * per-thread streams belong to whatever context is current.  A stream's
 * answer is kept for the thread's next launch on it (cg_launch_ctx). */
CUcontext cg_launch_ctx_ask(CUstream s)
{
	if ((uintptr_t)s <= (uintptr_t)CU_STREAM_PER_THREAD)
		return cg_current_ctx();
	/* Read before the driver, so a destroy racing with the question
	 * voids what is kept. */
	unsigned now = atomic_load_explicit(&cg_ctx_epoch, memory_order_acquire);
	CUcontext c = NULL;
	if (cg_call.cuStreamGetCtx(s, &c) != CUDA_SUCCESS)
		return NULL;
	cg_last_stream = (struct cg_last_stream){s, c, now};
	return c;
}

int cg_capturing(CUstream s)
{
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	if (!cg_call.cuStreamIsCapturing)
		return 0;
	/* An error here (a legacy-stream query during another thread's
	 * capture) is itself a sign to stay quiet. */
	return cg_call.cuStreamIsCapturing(s, &st) != CUDA_SUCCESS ||
	       st != CU_STREAM_CAPTURE_STATUS_NONE;
}

static int query_device(CUcontext ctx)
{
	CUdevice d;
	if (cg_call.cuCtxGetDevice_v2)
		return cg_call.cuCtxGetDevice_v2(&d, ctx) == CUDA_SUCCESS ? (int)d : -1;
	/* Drivers before 13.0: make ctx current for the question. */
	if (cg_call.cuCtxPushCurrent_v2(ctx) != CUDA_SUCCESS)
		return -1;
	int dev = cg_call.cuCtxGetDevice(&d) == CUDA_SUCCESS ? (int)d : -1;
	CUcontext popped;
	cg_call.cuCtxPopCurrent_v2(&popped);
	return dev;
}

/* Each thread's last answer: launches come in runs on one context. */
_Thread_local struct cg_last_ctx cg_last_ctx CG_TLS;

int cg_ctx_device_ask(CUcontext ctx)
{
	if (!ctx)
		return -1;
	/* Read before the table, so a destroy racing with this lookup voids
	 * what it stores. */
	unsigned now = atomic_load_explicit(&cg_ctx_epoch, memory_order_acquire);
	uintptr_t v = (uintptr_t)cg_table_get(&devices, (uintptr_t)ctx);
	int dev = v ? (int)v - 1 : query_device(ctx);
	if (dev < 0)
		return dev;
	if (!v) {
		cg_table_put(&devices, (uintptr_t)ctx, (void *)(uintptr_t)(dev + 1));
		/* A destroy since `now` may have come before the put: the
		 * answer may be about a dead context whose handle will come
		 * back for another device.  Take it out again (a later launch
		 * asks the driver anew). */
		if (atomic_load(&cg_ctx_epoch) != now)
			cg_table_del(&devices, (uintptr_t)ctx);
	}
	cg_last_ctx = (struct cg_last_ctx){ctx, dev, now};
	return dev;
}

/* The epoch moves before the entry goes, so a racing cg_ctx_device that
 * stores after the removal sees it moved; and after, so an answer read
 * from the table in between is not kept as current. */
void cg_context_on_ctx_end(CUcontext ctx)
{
	atomic_fetch_add(&cg_ctx_epoch, 1);
	cg_table_del(&devices, (uintptr_t)ctx);
	cg_table_del(&domains, (uintptr_t)ctx);
	atomic_fetch_add(&cg_ctx_epoch, 1);
}

void cg_context_on_fork(void)
{
	cg_table_reset(&devices);
	cg_table_reset(&domains);
	atomic_fetch_add_explicit(&cg_ctx_epoch, 1, memory_order_relaxed);
}

/* What the driver says of a context met without a hook seeing it made:
 * cuStreamGetCtx_v2 names a green context alongside its device's primary
 * context.  s is a stream of ctx, or a default stream with ctx current;
 * an answer about another context (a graph node's, not current) is
 * NULL: not known. */
static CUcontext query_domain(CUcontext ctx, CUstream s)
{
	CUcontext c = NULL;
	CUgreenCtx g = NULL;
	if (!cg_call.cuStreamGetCtx_v2 || cg_call.cuStreamGetCtx_v2(s, &c, &g) != CUDA_SUCCESS || !c)
		return NULL;
	if (!g)
		return c == ctx ? ctx : NULL;
	return cg_green_ctx(g) == ctx ? c : NULL;
}

CUcontext cg_ctx_domain(CUcontext ctx, CUstream s)
{
	if (!ctx)
		return NULL;
	unsigned now = atomic_load_explicit(&cg_ctx_epoch, memory_order_acquire);
	CUcontext d = cg_table_get(&domains, (uintptr_t)ctx);
	if (CG_LIKELY(d) || !(d = query_domain(ctx, s)))
		return d ? d : ctx;
	cg_table_put(&domains, (uintptr_t)ctx, d);
	/* As in cg_ctx_device: a destroy in between voids the answer. */
	if (atomic_load(&cg_ctx_epoch) != now)
		cg_table_del(&domains, (uintptr_t)ctx);
	return d;
}

CUcontext cg_owner_ctx(void)
{
	return cg_ctx_domain(cg_current_ctx(), NULL);
}

CUcontext cg_stream_domain(CUstream s)
{
	return cg_ctx_domain(cg_launch_ctx(s), s);
}

/* A created context, whatever its parameters (execution affinity
 * included), is a module domain of its own: known as such when made. */
static void made(CUcontext *pctx)
{
	if (pctx && *pctx)
		cg_table_put(&domains, (uintptr_t)*pctx, *pctx);
}

CG_AFTER(cuCtxCreate, made(pctx))
CG_AFTER(cuCtxCreate_v3, made(pctx))
CG_AFTER(cuCtxCreate_v4, made(pctx))

void cg_ctx_alias(CUcontext ctx, int dev)
{
	if (!ctx || cg_table_get(&domains, (uintptr_t)ctx))
		return;
	CUcontext p = cg_ctx_primary(dev >= 0 ? dev : cg_ctx_device(ctx));
	if (p)
		cg_table_put(&domains, (uintptr_t)ctx, p);
}

/* dev's primary context while it is active (its handle, the reference
 * count left as it was), else NULL. */
CUcontext cg_ctx_primary(CUdevice dev)
{
	unsigned flags;
	int active = 0;
	CUcontext p = NULL;
	CUresult (*release)(CUdevice) =
		CG_REAL_SYM(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2);
	if (!cg_call.cuDevicePrimaryCtxGetState || !cg_call.cuDevicePrimaryCtxRetain || !release ||
	    cg_call.cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS || !active ||
	    cg_call.cuDevicePrimaryCtxRetain(&p, dev) != CUDA_SUCCESS)
		return NULL;
	release(dev);
	return p;
}
