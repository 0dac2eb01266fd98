/* Events: created in the current context; recorded only on a stream of that
 * context; waited on by a stream of any context (cross-device waits are how
 * work on two GPUs is ordered).  Work completes at launch in the fake, so an
 * event is complete as soon as it is recorded. */
#include "fake.h"

static struct fake_pool event_pool = FAKE_POOL_INIT(struct CUevent_st);

void fake_event_drop_ctx(CUcontext ctx)
{
	fake_pool_give_ctx(&event_pool, offsetof(struct CUevent_st, ctx), ctx);
}

CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
	FAKE_ENTER();
	const unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
	CUcontext ctx;
	CUresult rc = fake_ctx_require_current(&ctx);
	if (rc != CUDA_SUCCESS)
		return fake_leave(rc);
	if (!phEvent || (Flags & ~known))
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	CUevent e = fake_pool_take(&event_pool);
	if (!e)
		return fake_leave(CUDA_ERROR_OUT_OF_MEMORY);
	e->ctx = ctx;
	e->flags = Flags;
	*phEvent = e;
	fake_trace_note("cuEventCreate", ctx, NULL, e, NULL);
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent)
{
	FAKE_ENTER();
	return fake_leave(fake_pool_destroy(&event_pool, hEvent));
}

static CUresult event_record(CUevent e, CUstream s)
{
	CUcontext ctx;
	if (!fake_pool_live(&event_pool, e))
		return CUDA_ERROR_INVALID_HANDLE;
	CUresult rc = fake_stream_ctx(s, &ctx);
	if (rc != CUDA_SUCCESS)
		return rc;
	/* The event and the stream must share a context (a green context counts as its
	 * primary context: an assumption, to be measured by tests/gpu case ctx_table). */
	if (fake_ctx_domain(ctx) != fake_ctx_domain(e->ctx))
		return CUDA_ERROR_INVALID_HANDLE;
	e->recorded = true;
	fake_trace_note("cuEventRecord", ctx, s, e, NULL);
	return CUDA_SUCCESS;
}

static CUresult stream_wait(CUstream s, CUevent e, unsigned flags)
{
	CUcontext ctx;
	if (!fake_pool_live(&event_pool, e))
		return CUDA_ERROR_INVALID_HANDLE;
	if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult rc = fake_stream_ctx(s, &ctx);
	if (rc != CUDA_SUCCESS)
		return rc;
	fake_trace_note("cuStreamWaitEvent", ctx, s, e, NULL);
	return CUDA_SUCCESS;
}

static CUresult event_query(CUevent e)
{
	return fake_pool_live(&event_pool, e) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult CUDAAPI cuEventQuery(CUevent hEvent)
{
	FAKE_ENTER();
	return fake_leave(event_query(hEvent));
}

CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
	FAKE_ENTER();
	CUresult rc = event_query(hEvent);
	if (rc == CUDA_SUCCESS)
		fake_trace_note("cuEventSynchronize", hEvent->ctx, NULL, hEvent, NULL);
	return fake_leave(rc);
}

#define DEFINE_EVENT_STREAM_CALLS(suffix)                                                          \
	CUresult CUDAAPI cuEventRecord##suffix(CUevent hEvent, CUstream hStream)                   \
	{                                                                                          \
		FAKE_ENTER();                                                                      \
		return fake_leave(event_record(hEvent, hStream));                                  \
	}                                                                                          \
	CUresult CUDAAPI cuStreamWaitEvent##suffix(CUstream hStream, CUevent hEvent,               \
						   unsigned int Flags)                             \
	{                                                                                          \
		FAKE_ENTER();                                                                      \
		return fake_leave(stream_wait(hStream, hEvent, Flags));                            \
	}

DEFINE_EVENT_STREAM_CALLS()
DEFINE_EVENT_STREAM_CALLS(_ptsz)
