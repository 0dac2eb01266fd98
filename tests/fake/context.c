/*
 * Contexts: primary contexts (one stable handle per device, reference counted), created
 * contexts (handles reused through the pool's free list), the per-thread stack of
 * current contexts, sticky errors and peer access.
 */
#include <stdlib.h>
#include <string.h>

#include "fake.h"

#define CTX_STACK_MAX 128

struct fake_pool fake_ctx_pool = FAKE_POOL_INIT(struct CUctx_st);

/* Each thread sees only its own stack, so it needs no lock. */
static __thread CUcontext stack[CTX_STACK_MAX];
static __thread int depth;

static unsigned long long next_ctx_id = 1;

CUcontext fake_ctx_current(void)
{
	return depth > 0 ? stack[depth - 1] : NULL;
}

bool fake_ctx_usable(CUcontext ctx)
{
	return fake_pool_live(&fake_ctx_pool, ctx) && (!ctx->primary || ctx->retain > 0);
}

CUresult fake_ctx_require_current(CUcontext *out)
{
	CUcontext ctx = fake_ctx_current();
	if (!fake_ctx_usable(ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	*out = ctx;
	return CUDA_SUCCESS;
}

/* NULL names the current context in the queries that accept a context argument. */
static CUresult ctx_or_current(CUcontext ctx, CUcontext *out)
{
	if (!ctx)
		return fake_ctx_require_current(out);
	if (!fake_ctx_usable(ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	*out = ctx;
	return CUDA_SUCCESS;
}

bool fake_ctx_peer_enabled(CUcontext from, CUcontext to)
{
	for (size_t i = 0; i < from->npeers; i++)
		if (from->peers[i] == to)
			return true;
	return false;
}

static void peer_remove(CUcontext from, CUcontext to)
{
	for (size_t i = 0; i < from->npeers; i++)
		if (from->peers[i] == to) {
			from->peers[i] = from->peers[--from->npeers];
			return;
		}
}

/* Everything the context owns goes away, as on cuCtxDestroy or a primary reset. */
static void ctx_release_resources(CUcontext ctx)
{
	fake_stream_drop_ctx(ctx);
	fake_event_drop_ctx(ctx);
	fake_library_drop_ctx(ctx);
	fake_module_drop_ctx(ctx);
	fake_mem_drop_ctx(ctx);
	fake_extmem_drop_ctx(ctx);
	for (size_t i = 0; i < fake_ctx_pool.nall; i++) {
		CUcontext other = fake_ctx_pool.all[i];
		if (other->h.live)
			peer_remove(other, ctx);
	}
	free(ctx->peers);
	ctx->peers = NULL;
	ctx->npeers = ctx->cappeers = 0;
	ctx->sticky = CUDA_SUCCESS;
}

CUcontext fake_ctx_domain(CUcontext ctx)
{
	return ctx && ctx->green_of ? ctx->green_of : ctx;
}

static void primary_retain(CUcontext ctx)
{
	if (ctx->retain++ == 0)
		ctx->id = next_ctx_id++; /* a fresh context behind the same handle */
}

static void primary_release(CUcontext ctx)
{
	if (--ctx->retain == 0)
		ctx_release_resources(ctx);
}

/* Its own handle and id, but the primary context's modules, memory and events: the
 * primary stays retained while it lives. */
CUresult fake_ctx_create_green(CUdevice dev, CUgreenCtx green, CUcontext *out)
{
	CUcontext ctx = fake_pool_take(&fake_ctx_pool);
	if (!ctx)
		return CUDA_ERROR_OUT_OF_MEMORY;
	ctx->dev = dev;
	ctx->green_of = fake_dev[dev].primary;
	ctx->green = green;
	ctx->id = next_ctx_id++;
	primary_retain(ctx->green_of);
	*out = ctx;
	return CUDA_SUCCESS;
}

/* Its streams and events go (the driver detaches them); what it loaded or allocated is
 * its primary context's and stays. */
void fake_ctx_destroy_green(CUcontext ctx)
{
	CUcontext primary = ctx->green_of;
	for (int i = 0; i < depth; i++)
		if (stack[i] == ctx)
			stack[i] = NULL;
	fake_stream_drop_ctx(ctx);
	fake_event_drop_ctx(ctx);
	ctx->green_of = NULL;
	ctx->green = NULL;
	fake_pool_give(&fake_ctx_pool, ctx);
	primary_release(primary);
}

CUresult fake_ctx_create_primary(CUdevice dev, CUcontext *out)
{
	CUcontext ctx = fake_pool_take(&fake_ctx_pool);
	if (!ctx)
		return CUDA_ERROR_OUT_OF_MEMORY;
	ctx->dev = dev;
	ctx->primary = true;
	*out = ctx;
	return CUDA_SUCCESS;
}

static CUresult ctx_push(CUcontext ctx)
{
	if (depth == CTX_STACK_MAX)
		return CUDA_ERROR_OUT_OF_MEMORY;
	stack[depth++] = ctx;
	return CUDA_SUCCESS;
}

static CUresult ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev)
{
	if (!pctx || (flags & ~(unsigned)CU_CTX_FLAGS_MASK))
		return CUDA_ERROR_INVALID_VALUE;
	if (!fake_dev_valid(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	if (depth == CTX_STACK_MAX)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUcontext ctx = fake_pool_take(&fake_ctx_pool);
	if (!ctx)
		return CUDA_ERROR_OUT_OF_MEMORY;
	ctx->dev = dev;
	ctx->flags = flags;
	ctx->id = next_ctx_id++;
	*pctx = ctx;
	return ctx_push(ctx);
}

CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	FAKE_ENTER();
	return fake_leave(ctx_create(pctx, flags, dev));
}

CUresult CUDAAPI cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
				unsigned int flags, CUdevice dev)
{
	FAKE_ENTER();
	if (numParams < 0 || (numParams > 0 && !paramsArray))
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	return fake_leave(ctx_create(pctx, flags, dev));
}

CUresult CUDAAPI cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
				unsigned int flags, CUdevice dev)
{
	FAKE_ENTER();
	/* Execution affinity and CIG parameters are mutually exclusive. */
	if (ctxCreateParams && ctxCreateParams->execAffinityParams && ctxCreateParams->cigParams)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	return fake_leave(ctx_create(pctx, flags, dev));
}

CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx)
{
	FAKE_ENTER();
	if (!fake_pool_live(&fake_ctx_pool, ctx) || ctx->primary || ctx->green_of)
		return fake_leave(CUDA_ERROR_INVALID_CONTEXT);
	if (fake_ctx_current() == ctx)
		depth--;
	ctx_release_resources(ctx);
	fake_pool_give(&fake_ctx_pool, ctx);
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
	FAKE_ENTER();
	if (!ctx) {
		if (depth > 0)
			depth--;
		return fake_leave(CUDA_SUCCESS);
	}
	if (!fake_pool_live(&fake_ctx_pool, ctx))
		return fake_leave(CUDA_ERROR_INVALID_CONTEXT);
	if (depth == 0)
		return fake_leave(ctx_push(ctx));
	stack[depth - 1] = ctx;
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
	FAKE_ENTER();
	if (!pctx)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	*pctx = fake_ctx_current();
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx)
{
	FAKE_ENTER();
	if (!fake_pool_live(&fake_ctx_pool, ctx))
		return fake_leave(CUDA_ERROR_INVALID_CONTEXT);
	return fake_leave(ctx_push(ctx));
}

CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext *pctx)
{
	FAKE_ENTER();
	if (depth == 0)
		return fake_leave(CUDA_ERROR_INVALID_CONTEXT);
	CUcontext ctx = stack[--depth];
	if (pctx)
		*pctx = ctx;
	return fake_leave(CUDA_SUCCESS);
}

static CUresult ctx_get_device(CUdevice *device, CUcontext ctx)
{
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult rc = ctx_or_current(ctx, &ctx);
	if (rc == CUDA_SUCCESS)
		*device = ctx->dev;
	return rc;
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice *device)
{
	FAKE_ENTER();
	return fake_leave(ctx_get_device(device, NULL));
}

CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
	FAKE_ENTER();
	return fake_leave(ctx_get_device(device, ctx));
}

/* Work completes at launch, so synchronizing only reports the sticky error. */
static CUresult ctx_synchronize(CUcontext ctx)
{
	CUresult rc = ctx_or_current(ctx, &ctx);
	if (rc != CUDA_SUCCESS)
		return rc;
	fake_stream_sync_ctx(ctx);
	return ctx->sticky;
}

CUresult CUDAAPI cuCtxSynchronize(void)
{
	FAKE_ENTER();
	return fake_leave(ctx_synchronize(NULL));
}

CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx)
{
	FAKE_ENTER();
	return fake_leave(ctx_synchronize(ctx));
}

CUresult CUDAAPI cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
	FAKE_ENTER();
	if (!version)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	CUresult rc = ctx_or_current(ctx, &ctx);
	if (rc == CUDA_SUCCESS)
		*version = 3020; /* the context ABI every variant creates since CUDA 3.2 */
	return fake_leave(rc);
}

CUresult CUDAAPI cuCtxGetFlags(unsigned int *flags)
{
	FAKE_ENTER();
	CUcontext ctx;
	if (!flags)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	CUresult rc = fake_ctx_require_current(&ctx);
	if (rc == CUDA_SUCCESS)
		*flags = ctx->flags;
	return fake_leave(rc);
}

CUresult CUDAAPI cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)
{
	FAKE_ENTER();
	if (!ctxId)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	CUresult rc = ctx_or_current(ctx, &ctx);
	if (rc == CUDA_SUCCESS)
		*ctxId = ctx->id;
	return fake_leave(rc);
}

CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
	FAKE_ENTER();
	CUcontext cur;
	CUresult rc = fake_ctx_require_current(&cur);
	if (rc != CUDA_SUCCESS)
		return fake_leave(rc);
	if (Flags != 0)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	if (!fake_ctx_usable(peerContext) || peerContext == cur)
		return fake_leave(CUDA_ERROR_INVALID_CONTEXT);
	if (peerContext->dev == cur->dev) /* cuDeviceCanAccessPeer(d, d) is 0 */
		return fake_leave(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
	if (fake_ctx_peer_enabled(cur, peerContext))
		return fake_leave(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
	CUcontext *peers = fake_grow(cur->peers, &cur->cappeers, cur->npeers + 1, sizeof(*peers));
	if (!peers)
		return fake_leave(CUDA_ERROR_OUT_OF_MEMORY);
	cur->peers = peers;
	cur->peers[cur->npeers++] = peerContext;
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuCtxDisablePeerAccess(CUcontext peerContext)
{
	FAKE_ENTER();
	CUcontext cur;
	CUresult rc = fake_ctx_require_current(&cur);
	if (rc != CUDA_SUCCESS)
		return fake_leave(rc);
	if (!fake_ctx_usable(peerContext))
		return fake_leave(CUDA_ERROR_INVALID_CONTEXT);
	if (!fake_ctx_peer_enabled(cur, peerContext))
		return fake_leave(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
	peer_remove(cur, peerContext);
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	FAKE_ENTER();
	if (!pctx)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	if (!fake_dev_valid(dev))
		return fake_leave(CUDA_ERROR_INVALID_DEVICE);
	CUcontext ctx = fake_dev[dev].primary;
	primary_retain(ctx);
	*pctx = ctx;
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	FAKE_ENTER();
	if (!fake_dev_valid(dev))
		return fake_leave(CUDA_ERROR_INVALID_DEVICE);
	CUcontext ctx = fake_dev[dev].primary;
	if (ctx->retain == 0)
		return fake_leave(CUDA_ERROR_INVALID_CONTEXT);
	primary_release(ctx);
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
	FAKE_ENTER();
	if (!fake_dev_valid(dev))
		return fake_leave(CUDA_ERROR_INVALID_DEVICE);
	CUcontext ctx = fake_dev[dev].primary;
	ctx_release_resources(ctx);
	ctx->flags = 0;
	if (ctx->retain > 0)
		ctx->id = next_ctx_id++;
	return fake_leave(CUDA_SUCCESS);
}

/* The CUDA 7.0 variants, exported still and handed out by cuGetProcAddress
 * for that version (PyTorch asks for it): the same here. */
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev)
{
	return cuDevicePrimaryCtxRelease_v2(dev);
}

CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev)
{
	return cuDevicePrimaryCtxReset_v2(dev);
}

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	FAKE_ENTER();
	if (!flags || !active)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	if (!fake_dev_valid(dev))
		return fake_leave(CUDA_ERROR_INVALID_DEVICE);
	*flags = fake_dev[dev].primary->flags;
	*active = fake_dev[dev].primary->retain > 0;
	return fake_leave(CUDA_SUCCESS);
}
