/*
 * Memory shared between processes: legacy IPC handles (cuIpcGetMemHandle, cuIpcOpenMemHandle,
 * cuIpcCloseMemHandle) and pool pointers (cuMemPoolExportPointer, cuMemPoolImportPointer).
 * One process plays both sides: a handle made here is opened here as if by another process,
 * and a pool stands for the pool another process would import from its shareable handle.
 * What is opened or imported is mapped in a range of its own, whole granules, first fit, so a
 * closed or freed mapping's addresses come back with the next one, whatever its device
 * (external.c maps its buffers there too).
 */
#include <string.h>

#include "fake.h"

/* What a handle or export data carries: the exported allocation's buffer id. */
struct token {
	char magic[8];
	unsigned long long id;
};

static const char magic[8] = "fakeshr";

static void token_put(void *out, size_t n, const struct fake_alloc *a)
{
	struct token t = {.id = a->id};
	memcpy(t.magic, magic, sizeof(magic));
	memset(out, 0, n);
	memcpy(out, &t, sizeof(t));
}

/* The live allocation a token names, or NULL. */
static struct fake_alloc *token_source(const void *in)
{
	struct token t;
	memcpy(&t, in, sizeof(t));
	if (memcmp(t.magic, magic, sizeof(magic)) != 0)
		return NULL;
	for (size_t i = 0; i < fake_mem_count(); i++)
		if (fake_mem_at(i)->id == t.id)
			return fake_mem_at(i);
	return NULL;
}

CUresult fake_mem_map_shared(struct fake_alloc m, CUdeviceptr *out)
{
	CUdeviceptr p = FAKE_SHARED_BASE;
	for (size_t i = 0; i < fake_mem_count(); i++) {
		const struct fake_alloc *a = fake_mem_at(i);
		if (a->base + a->size <= p)
			continue;
		if (a->base >= p + m.size)
			break;
		p = (a->base + a->size + FAKE_GRANULARITY - 1) / FAKE_GRANULARITY * FAKE_GRANULARITY;
	}
	if (m.size > FAKE_REGION_SPAN - (p - FAKE_SHARED_BASE))
		return CUDA_ERROR_OUT_OF_MEMORY;
	m.base = p;
	CUresult rc = fake_mem_add(&m);
	if (rc == CUDA_SUCCESS)
		*out = p;
	return rc;
}

/* cuMemAlloc's allocations, by their base (IS_LEGACY_CUDA_IPC_CAPABLE). */
static bool ipc_capable(const struct fake_alloc *a, CUdeviceptr base)
{
	return a && a->base == base && a->kind == FAKE_MEM_DEVICE && !a->pool;
}

CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
	FAKE_ENTER();
	const struct fake_alloc *a = fake_mem_find(dptr);
	if (!pHandle || !ipc_capable(a, dptr))
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	token_put(pHandle->reserved, sizeof(pHandle->reserved), a);
	return fake_leave(CUDA_SUCCESS);
}

/* On the exporting allocation's device; the opening context reaches it (lazy peer access).
 * Opened again by the same context, the same mapping is counted. */
static CUresult ipc_open(CUdeviceptr *pdptr, const CUipcMemHandle *handle, unsigned flags)
{
	CUcontext ctx;
	if (!pdptr || flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult rc = fake_ctx_require_current(&ctx);
	if (rc != CUDA_SUCCESS)
		return rc;
	const struct fake_alloc *src = token_source(handle->reserved);
	if (!src || !ipc_capable(src, src->base))
		return CUDA_ERROR_INVALID_HANDLE;
	for (size_t i = 0; i < fake_mem_count(); i++) {
		struct fake_alloc *a = fake_mem_at(i);
		if (a->kind == FAKE_MEM_IPC && a->source == src->id && a->ctx == ctx) {
			a->opens++;
			*pdptr = a->base;
			return CUDA_SUCCESS;
		}
	}
	struct fake_alloc m = {.size = src->size, .kind = FAKE_MEM_IPC, .dev = src->dev,
			       .ctx = ctx, .source = src->id, .opens = 1};
	return fake_mem_map_shared(m, pdptr);
}

/* The open before CUDA 11.0 and its _v2 behave alike here. */
CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
	FAKE_ENTER();
	return fake_leave(ipc_open(pdptr, &handle, Flags));
}

CUresult CUDAAPI cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
				       unsigned int Flags)
{
	FAKE_ENTER();
	return fake_leave(ipc_open(pdptr, &handle, Flags));
}

/* Unmapped when the last open is closed. */
CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr)
{
	FAKE_ENTER();
	struct fake_alloc *a = fake_mem_find(dptr);
	if (!a || a->base != dptr || a->kind != FAKE_MEM_IPC)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	if (--a->opens == 0)
		fake_mem_remove(dptr);
	return fake_leave(CUDA_SUCCESS);
}

/* A device pool's allocation, by its base, from a pool made with a handle type. */
CUresult CUDAAPI cuMemPoolExportPointer(CUmemPoolPtrExportData *shareData_out, CUdeviceptr ptr)
{
	FAKE_ENTER();
	const struct fake_alloc *a = fake_mem_find(ptr);
	if (!shareData_out || !a || a->base != ptr || a->kind != FAKE_MEM_DEVICE || !a->pool ||
	    !a->pool->shareable)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	token_put(shareData_out->reserved, sizeof(shareData_out->reserved), a);
	return fake_leave(CUDA_SUCCESS);
}

/* Freed with cuMemFree or cuMemFreeAsync, as the importer must before the exporter frees.  In
 * no context (measured on an H200, driver 580: CU_POINTER_ATTRIBUTE_CONTEXT NULL), it stays
 * mapped past the importing context's end; an IPC mapping does not (ipc_open above). */
CUresult CUDAAPI cuMemPoolImportPointer(CUdeviceptr *ptr_out, CUmemoryPool pool,
					CUmemPoolPtrExportData *shareData)
{
	FAKE_ENTER();
	CUcontext ctx;
	if (!ptr_out || !shareData)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	CUresult rc = fake_ctx_require_current(&ctx);
	if (rc != CUDA_SUCCESS)
		return fake_leave(rc);
	const struct fake_alloc *src = token_source(shareData->reserved);
	if (!src || src->kind != FAKE_MEM_DEVICE || !src->pool || src->pool != pool)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	struct fake_alloc m = {.size = src->size, .kind = FAKE_MEM_POOL_IMPORT, .dev = src->dev,
			       .pool = pool, .source = src->id};
	return fake_leave(fake_mem_map_shared(m, ptr_out));
}
