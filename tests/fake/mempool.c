/* Memory pools and stream-ordered allocation. */
#include "fake.h"

struct fake_pool fake_mempool_pool = FAKE_POOL_INIT(struct CUmemPoolHandle_st);

/* An allocation belongs to the stream's context when the pool is on the stream's device,
 * else to the primary context of the pool's device. */
static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream s)
{
	CUcontext ctx;
	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult rc = fake_stream_ctx(s, &ctx);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (!pool)
		pool = fake_dev[ctx->dev].default_pool;
	else if (!fake_pool_live(&fake_mempool_pool, pool))
		return CUDA_ERROR_INVALID_VALUE;
	if (pool->host)
		return fake_mem_alloc_pool_host(ctx, pool, size, dptr);
	CUcontext owner = pool->dev == ctx->dev ? ctx : fake_dev[pool->dev].primary;
	return fake_mem_alloc_device(pool->dev, owner, pool, size, dptr);
}

static CUresult free_async(CUdeviceptr dptr, CUstream s)
{
	CUcontext ctx;
	CUresult rc = fake_stream_ctx(s, &ctx);
	if (rc != CUDA_SUCCESS)
		return rc;
	const struct fake_alloc *a = fake_mem_find(dptr);
	if (a && a->base == dptr && a->kind == FAKE_MEM_GRAPH)
		return fake_gmem_free(dptr);
	if (!a || a->base != dptr ||
	    (a->kind != FAKE_MEM_DEVICE && a->kind != FAKE_MEM_POOL_HOST &&
	     a->kind != FAKE_MEM_POOL_IMPORT))
		return CUDA_ERROR_INVALID_VALUE;
	fake_mem_remove(dptr);
	return CUDA_SUCCESS;
}

/* Legacy and per-thread (_ptsz) variants behave alike: see fake_stream_ctx. */
#define ASYNC_VARIANTS(X) X() X(_ptsz)

#define DEFINE_ASYNC_ALLOC(suffix)                                                                 \
	CUresult CUDAAPI cuMemAllocAsync##suffix(CUdeviceptr *dptr, size_t bytesize,               \
						 CUstream hStream)                                 \
	{                                                                                          \
		FAKE_ENTER();                                                                      \
		return fake_leave(alloc_async(dptr, bytesize, NULL, hStream));                     \
	}                                                                                          \
	CUresult CUDAAPI cuMemAllocFromPoolAsync##suffix(CUdeviceptr *dptr, size_t bytesize,       \
							 CUmemoryPool pool, CUstream hStream)      \
	{                                                                                          \
		FAKE_ENTER();                                                                      \
		if (!pool)                                                                         \
			return fake_leave(CUDA_ERROR_INVALID_VALUE);                               \
		return fake_leave(alloc_async(dptr, bytesize, pool, hStream));                     \
	}                                                                                          \
	CUresult CUDAAPI cuMemFreeAsync##suffix(CUdeviceptr dptr, CUstream hStream)                \
	{                                                                                          \
		FAKE_ENTER();                                                                      \
		return fake_leave(free_async(dptr, hStream));                                      \
	}

ASYNC_VARIANTS(DEFINE_ASYNC_ALLOC)

CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
	FAKE_ENTER();
	const CUmemLocation *at = poolProps ? &poolProps->location : NULL;
	/* Host pools (CUDA 12.2 on): HOST_NUMA names a NUMA node, HOST nothing. */
	bool host = at && (at->type == CU_MEM_LOCATION_TYPE_HOST ||
			   (at->type == CU_MEM_LOCATION_TYPE_HOST_NUMA && at->id >= 0));
	if (!pool || !poolProps || poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
	    (!host && (at->type != CU_MEM_LOCATION_TYPE_DEVICE || !fake_dev_valid(at->id))))
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	CUmemoryPool p = fake_pool_take(&fake_mempool_pool);
	if (!p)
		return fake_leave(CUDA_ERROR_OUT_OF_MEMORY);
	p->host = host;
	p->dev = host ? CU_DEVICE_INVALID : at->id;
	p->shareable = poolProps->handleTypes != CU_MEM_HANDLE_TYPE_NONE;
	*pool = p;
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
	FAKE_ENTER();
	if (!fake_pool_live(&fake_mempool_pool, pool) || pool->is_default)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	fake_mem_drop_pool(pool);
	fake_pool_give(&fake_mempool_pool, pool);
	return fake_leave(CUDA_SUCCESS);
}

static CUresult device_pool(CUmemoryPool *pool, CUdevice dev)
{
	if (!pool)
		return CUDA_ERROR_INVALID_VALUE;
	if (!fake_dev_valid(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	*pool = fake_dev[dev].default_pool;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
	FAKE_ENTER();
	return fake_leave(device_pool(pool_out, dev));
}

/* The fake has no cuDeviceSetMemPool, so the current pool is always the default one. */
CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
	FAKE_ENTER();
	return fake_leave(device_pool(pool, dev));
}
