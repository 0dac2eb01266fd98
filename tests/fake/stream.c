/* Streams: each belongs to the context current when it was created. */
#include "fake.h"

static struct fake_pool stream_pool = FAKE_POOL_INIT(struct CUstream_st);

bool fake_stream_is_special(CUstream s)
{
	return s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

/* The special streams stand for the current context's default stream. */
CUresult fake_stream_ctx(CUstream s, CUcontext *out)
{
	if (fake_stream_is_special(s))
		return fake_ctx_require_current(out);
	if (!fake_pool_live(&stream_pool, s))
		return CUDA_ERROR_INVALID_HANDLE;
	if (!fake_ctx_usable(s->ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	*out = s->ctx;
	return CUDA_SUCCESS;
}

/* The per-thread stream's pending work, per thread: the contexts it has some in. */
enum { PTDS_SLOTS = FAKE_MAX_DEVICES * 2 };
static _Thread_local CUcontext ptds_pending[PTDS_SLOTS];

static CUcontext *ptds_slot(CUcontext ctx)
{
	for (size_t i = 0; i < PTDS_SLOTS; i++)
		if (ptds_pending[i] == ctx)
			return &ptds_pending[i];
	return NULL;
}

static bool is_pending(CUstream s, CUcontext ctx)
{
	if (s == CU_STREAM_PER_THREAD)
		return ptds_slot(ctx) != NULL;
	return fake_stream_is_special(s) ? ctx->pending : s->pending;
}

static void set_pending(CUstream s, CUcontext ctx, bool on)
{
	if (s != CU_STREAM_PER_THREAD) {
		*(fake_stream_is_special(s) ? &ctx->pending : &s->pending) = on;
		return;
	}
	CUcontext *slot = ptds_slot(on ? NULL : ctx);
	if (slot && !(on && ptds_slot(ctx)))
		*slot = on ? ctx : NULL;
}

void fake_stream_note_work(CUstream s, CUcontext ctx)
{
	set_pending(s, ctx, true);
}

void fake_stream_sync_ctx(CUcontext ctx)
{
	ctx->pending = false;
	set_pending(CU_STREAM_PER_THREAD, ctx, false);
	for (size_t i = 0; i < stream_pool.nall; i++) {
		CUstream s = stream_pool.all[i];
		if (s->h.live && s->ctx == ctx)
			s->pending = false;
	}
}

void fake_stream_drop_ctx(CUcontext ctx)
{
	fake_pool_give_ctx(&stream_pool, offsetof(struct CUstream_st, ctx), ctx);
}

CUresult fake_stream_create(CUcontext ctx, CUstream *phStream, unsigned flags, int priority)
{
	if (!phStream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	CUstream s = fake_pool_take(&stream_pool);
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	s->ctx = ctx;
	s->flags = flags;
	/* H200 priorities range from 0 (least) to -5 (greatest); others are clamped. */
	s->priority = priority > 0 ? 0 : priority < -5 ? -5 : priority;
	*phStream = s;
	fake_trace_note("cuStreamCreate", ctx, NULL, s, NULL);
	return CUDA_SUCCESS;
}

static CUresult stream_create(CUstream *phStream, unsigned flags, int priority)
{
	CUcontext ctx;
	CUresult rc = fake_ctx_require_current(&ctx);
	return rc == CUDA_SUCCESS ? fake_stream_create(ctx, phStream, flags, priority) : rc;
}

CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	FAKE_ENTER();
	return fake_leave(stream_create(phStream, Flags, 0));
}

CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
	FAKE_ENTER();
	return fake_leave(stream_create(phStream, flags, priority));
}

CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream)
{
	FAKE_ENTER();
	return fake_leave(fake_pool_destroy(&stream_pool, hStream));
}

static CUresult stream_get_ctx(CUstream s, CUcontext *pctx, CUgreenCtx *pGreenCtx)
{
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult rc = fake_stream_ctx(s, pctx);
	if (rc != CUDA_SUCCESS || !pGreenCtx)
		return rc;
	/* _v2 names a green context alongside its device's primary context. */
	*pGreenCtx = (*pctx)->green;
	*pctx = fake_ctx_domain(*pctx);
	return rc;
}

static CUresult stream_get_device(CUstream s, CUdevice *device)
{
	CUcontext ctx;
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult rc = fake_stream_ctx(s, &ctx);
	if (rc == CUDA_SUCCESS)
		*device = ctx->dev;
	return rc;
}

/* Work "runs" at launch but counts as pending until the stream (or its context) is
 * synchronized: cuStreamQuery reports CUDA_ERROR_NOT_READY for a stream with a launch since
 * its last synchronization, and otherwise, like a synchronization, the sticky error. */
static CUresult stream_wait(CUstream s, bool sync)
{
	CUcontext ctx;
	CUresult rc = fake_stream_ctx(s, &ctx);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (!sync && is_pending(s, ctx) && ctx->sticky == CUDA_SUCCESS)
		return CUDA_ERROR_NOT_READY;
	if (sync) {
		set_pending(s, ctx, false);
		fake_trace_note("cuStreamSynchronize", ctx, s, NULL, NULL);
	}
	return ctx->sticky;
}

static CUresult stream_is_capturing(CUstream s, CUstreamCaptureStatus *status)
{
	CUcontext ctx;
	if (!status)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult rc = fake_stream_ctx(s, &ctx);
	if (rc == CUDA_SUCCESS)
		*status = !fake_stream_is_special(s) && s->capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE
								     : CU_STREAM_CAPTURE_STATUS_NONE;
	return rc;
}

/* Each entry point exists as a legacy and a per-thread (_ptsz) variant; both behave alike
 * because the per-thread default stream belongs to the current context too. */
#define STREAM_VARIANTS(X) X() X(_ptsz)

#define DEFINE_STREAM_QUERIES(suffix)                                                              \
	CUresult CUDAAPI cuStreamGetCtx##suffix(CUstream hStream, CUcontext *pctx)                 \
	{                                                                                          \
		FAKE_ENTER();                                                                      \
		return fake_leave(stream_get_ctx(hStream, pctx, NULL));                            \
	}                                                                                          \
	CUresult CUDAAPI cuStreamGetCtx_v2##suffix(CUstream hStream, CUcontext *pCtx,              \
						   CUgreenCtx *pGreenCtx)                          \
	{                                                                                          \
		FAKE_ENTER();                                                                      \
		return fake_leave(stream_get_ctx(hStream, pCtx, pGreenCtx));                       \
	}                                                                                          \
	CUresult CUDAAPI cuStreamGetDevice##suffix(CUstream hStream, CUdevice *device)             \
	{                                                                                          \
		FAKE_ENTER();                                                                      \
		return fake_leave(stream_get_device(hStream, device));                             \
	}                                                                                          \
	CUresult CUDAAPI cuStreamSynchronize##suffix(CUstream hStream)                             \
	{                                                                                          \
		FAKE_ENTER();                                                                      \
		return fake_leave(stream_wait(hStream, true));                                     \
	}                                                                                          \
	CUresult CUDAAPI cuStreamQuery##suffix(CUstream hStream)                                   \
	{                                                                                          \
		FAKE_ENTER();                                                                      \
		return fake_leave(stream_wait(hStream, false));                                    \
	}                                                                                          \
	CUresult CUDAAPI cuStreamIsCapturing##suffix(CUstream hStream,                             \
						     CUstreamCaptureStatus *captureStatus)         \
	{                                                                                          \
		FAKE_ENTER();                                                                      \
		return fake_leave(stream_is_capturing(hStream, captureStatus));                    \
	}

STREAM_VARIANTS(DEFINE_STREAM_QUERIES)

void fake_stream_set_capturing(CUstream s, int on)
{
	fake_lock();
	if (fake_pool_live(&stream_pool, s))
		s->capturing = on != 0;
	fake_unlock();
}
