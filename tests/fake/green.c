/*
 * Green contexts: a device's SMs (an H200's 132, in partitions of at least 8, multiples
 * of 8) split into groups, a descriptor of one group, and a green context made from it.
 * Its CUcontext (cuCtxFromGreenCtx) has a handle of its own, and its streams name it
 * (cuStreamGetCtx), but it shares its device's primary context's modules, memory and
 * events, which it retains while it lives (measured on an H100, driver 580: a function of
 * either runs in the other; docs/contexts.md).
 */
#include <string.h>

#include "fake.h"

#define FAKE_SMS 132
#define FAKE_SM_GRANULE 8

struct CUgreenCtx_st {
	struct fake_hdr h;
	CUcontext ctx;
	unsigned sms;
};

struct CUdevResourceDesc_st {
	struct fake_hdr h;
	unsigned sms;
};

static struct fake_pool green_pool = FAKE_POOL_INIT(struct CUgreenCtx_st);
static struct fake_pool desc_pool = FAKE_POOL_INIT(struct CUdevResourceDesc_st);

static void sm_resource(CUdevResource *r, unsigned sms)
{
	memset(r, 0, sizeof *r);
	r->type = CU_DEV_RESOURCE_TYPE_SM;
	r->sm.smCount = sms;
	r->sm.minSmPartitionSize = FAKE_SM_GRANULE;
	r->sm.smCoscheduledAlignment = FAKE_SM_GRANULE;
}

CUresult CUDAAPI cuDeviceGetDevResource(CUdevice device, CUdevResource *resource,
					CUdevResourceType type)
{
	FAKE_ENTER();
	if (!fake_dev_valid(device))
		return fake_leave(CUDA_ERROR_INVALID_DEVICE);
	if (!resource)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	if (type != CU_DEV_RESOURCE_TYPE_SM)
		return fake_leave(CUDA_ERROR_INVALID_RESOURCE_TYPE);
	sm_resource(resource, FAKE_SMS);
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDevSmResourceSplitByCount(CUdevResource *result, unsigned int *nbGroups,
					     const CUdevResource *input, CUdevResource *remaining,
					     unsigned int useFlags, unsigned int minCount)
{
	FAKE_ENTER();
	if (!nbGroups || !input || useFlags)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	if (input->type != CU_DEV_RESOURCE_TYPE_SM)
		return fake_leave(CUDA_ERROR_INVALID_RESOURCE_TYPE);
	if (minCount > input->sm.smCount)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	unsigned size = minCount < FAKE_SM_GRANULE ? FAKE_SM_GRANULE : minCount;
	size = (size + FAKE_SM_GRANULE - 1) / FAKE_SM_GRANULE * FAKE_SM_GRANULE;
	unsigned most = input->sm.smCount / size;
	unsigned n = result && *nbGroups < most ? *nbGroups : most;
	for (unsigned i = 0; result && i < n; i++)
		sm_resource(&result[i], size);
	if (remaining)
		sm_resource(remaining, input->sm.smCount - (result ? n : most) * size);
	*nbGroups = n;
	return fake_leave(CUDA_SUCCESS);
}

/* One SM group per descriptor: all the fake needs. */
CUresult CUDAAPI cuDevResourceGenerateDesc(CUdevResourceDesc *phDesc, CUdevResource *resources,
					   unsigned int nbResources)
{
	FAKE_ENTER();
	if (!phDesc || !resources || nbResources != 1)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	if (resources->type != CU_DEV_RESOURCE_TYPE_SM || !resources->sm.smCount)
		return fake_leave(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION);
	CUdevResourceDesc d = fake_pool_take(&desc_pool);
	if (!d)
		return fake_leave(CUDA_ERROR_OUT_OF_MEMORY);
	d->sms = resources->sm.smCount;
	*phDesc = d;
	return fake_leave(CUDA_SUCCESS);
}

/* CU_GREEN_CTX_DEFAULT_STREAM is required since CUDA 13.0. */
CUresult CUDAAPI cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev,
				  unsigned int flags)
{
	FAKE_ENTER();
	if (!phCtx || !fake_pool_live(&desc_pool, desc) || flags != CU_GREEN_CTX_DEFAULT_STREAM)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	if (!fake_dev_valid(dev))
		return fake_leave(CUDA_ERROR_INVALID_DEVICE);
	CUgreenCtx g = fake_pool_take(&green_pool);
	if (!g)
		return fake_leave(CUDA_ERROR_OUT_OF_MEMORY);
	CUresult rc = fake_ctx_create_green(dev, g, &g->ctx);
	if (rc != CUDA_SUCCESS) {
		fake_pool_give(&green_pool, g);
		return fake_leave(rc);
	}
	g->sms = desc->sms;
	*phCtx = g;
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuCtxFromGreenCtx(CUcontext *pContext, CUgreenCtx hCtx)
{
	FAKE_ENTER();
	if (!pContext || !fake_pool_live(&green_pool, hCtx))
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	*pContext = hCtx->ctx;
	return fake_leave(CUDA_SUCCESS);
}

/* Handles come back, last freed first: the CUcontext's for the next context made. */
CUresult CUDAAPI cuGreenCtxDestroy(CUgreenCtx hCtx)
{
	FAKE_ENTER();
	if (!fake_pool_live(&green_pool, hCtx))
		return fake_leave(CUDA_ERROR_INVALID_CONTEXT);
	fake_ctx_destroy_green(hCtx->ctx);
	hCtx->ctx = NULL;
	fake_pool_give(&green_pool, hCtx);
	return fake_leave(CUDA_SUCCESS);
}

/* A green context's streams must not block on the legacy stream. */
CUresult CUDAAPI cuGreenCtxStreamCreate(CUstream *phStream, CUgreenCtx greenCtx, unsigned int flags,
					int priority)
{
	FAKE_ENTER();
	if (!fake_pool_live(&green_pool, greenCtx) || flags != CU_STREAM_NON_BLOCKING)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	return fake_leave(fake_stream_create(greenCtx->ctx, phStream, flags, priority));
}
