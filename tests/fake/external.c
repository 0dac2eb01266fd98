/*
 * External memory: another API's memory (Vulkan's, ...) exported as a file descriptor,
 * imported into the current context (cuImportExternalMemory) and mapped as buffers
 * (cuExternalMemoryGetMappedBuffer). Only CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD is
 * accepted; the descriptor is a number standing for one, never read or closed. A buffer is
 * device memory of the importing context's device, owned by that context, mapped where IPC
 * mappings are (ipc.c: whole granules, first fit, so a freed buffer's addresses come back
 * with the next mapping) and freed with cuMemFree. Destroying the object leaves its buffers
 * mapped until then; the context's end takes both.
 */
#include "fake.h"

struct CUextMemory_st {
	struct fake_hdr h;
	CUcontext ctx;
	unsigned long long size;
};

static struct fake_pool extmem_pool = FAKE_POOL_INIT(struct CUextMemory_st);

void fake_extmem_drop_ctx(CUcontext ctx)
{
	fake_pool_give_ctx(&extmem_pool, offsetof(struct CUextMemory_st, ctx), ctx);
}

CUresult CUDAAPI cuImportExternalMemory(CUexternalMemory *extMem_out,
					const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *memHandleDesc)
{
	FAKE_ENTER();
	const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *d = memHandleDesc;
	CUcontext ctx;
	if (!extMem_out || !d || d->type != CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD ||
	    d->handle.fd < 0 || d->size == 0 || (d->flags & ~(unsigned)CUDA_EXTERNAL_MEMORY_DEDICATED))
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	CUresult rc = fake_ctx_require_current(&ctx);
	if (rc != CUDA_SUCCESS)
		return fake_leave(rc);
	CUexternalMemory m = fake_pool_take(&extmem_pool);
	if (!m)
		return fake_leave(CUDA_ERROR_OUT_OF_MEMORY);
	m->ctx = ctx;
	m->size = d->size;
	*extMem_out = m;
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuExternalMemoryGetMappedBuffer(CUdeviceptr *devPtr, CUexternalMemory extMem,
						 const CUDA_EXTERNAL_MEMORY_BUFFER_DESC *bufferDesc)
{
	FAKE_ENTER();
	const CUDA_EXTERNAL_MEMORY_BUFFER_DESC *b = bufferDesc;
	if (!fake_pool_live(&extmem_pool, extMem))
		return fake_leave(CUDA_ERROR_INVALID_HANDLE);
	if (!devPtr || !b || b->flags != 0 || b->size == 0 || b->offset > extMem->size ||
	    b->size > extMem->size - b->offset)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	struct fake_alloc m = {.size = b->size, .kind = FAKE_MEM_EXTERNAL, .dev = extMem->ctx->dev,
			       .ctx = extMem->ctx};
	return fake_leave(fake_mem_map_shared(m, devPtr));
}

CUresult CUDAAPI cuDestroyExternalMemory(CUexternalMemory extMem)
{
	FAKE_ENTER();
	return fake_leave(fake_pool_destroy(&extmem_pool, extMem));
}
