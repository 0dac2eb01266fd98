/* Zeros in device memory, per context: the grouped_layout of a one-group
 * GEMM (DeepGEMM's GemmType::Normal has none) as the bundled contiguous
 * form reads it, every row in group 0.  Grown by doubling when a larger
 * problem comes; a smaller buffer may still be read by queued work, so it
 * is kept (at most the size of the largest).  The memset runs on a
 * non-blocking stream of its own, made for it and synchronized once per
 * growth before any stream can read the buffer: the legacy stream might
 * wait for work the program has not enqueued yet, and so might ctxguard's
 * stream T, which a redirect has already made wait for the launch stream
 * and every busy stream of the context when the GEMM asks for zeros. */
#include <stdlib.h>

#include "redirect.h"
#include "../report/report.h"

static CUdeviceptr find(CUcontext ctx, size_t bytes)
{
	CUdeviceptr p = 0;
	struct cg_ctx_state *c = cg_ctx_state_lock(ctx, 0);
	for (const struct cg_zeros *z = c ? c->zeros : NULL; z && !p; z = z->next)
		if (z->bytes >= bytes)
			p = z->ptr;
	cg_ctx_state_unlock(c);
	return p;
}

/* n bytes allocated in ctx (current) into *out, then zeroed; *out stays 0
 * when the allocation fails, else the caller frees it on failure. */
static CUresult make(size_t n, CUdeviceptr *out)
{
	CUstream z = NULL;
	CUresult rc = CG_REAL_SYM(cuStreamCreate, cuStreamCreate)(&z, CU_STREAM_NON_BLOCKING);
	if (rc == CUDA_SUCCESS && (rc = CG_REAL_SYM(cuMemAlloc, cuMemAlloc_v2)(out, n)) != CUDA_SUCCESS)
		*out = 0; /* whatever the driver left there */
	if (rc == CUDA_SUCCESS)
		rc = cg_call.cuMemsetD8Async(*out, 0, n, z);
	if (rc == CUDA_SUCCESS)
		rc = cg_call.cuStreamSynchronize(z);
	if (z)
		CG_REAL_SYM(cuStreamDestroy, cuStreamDestroy_v2)(z);
	return rc;
}

CUresult cg_zeros(CUcontext ctx, size_t bytes, CUdeviceptr *out)
{
	if ((*out = find(ctx, bytes)))
		return CUDA_SUCCESS;
	struct cg_zeros *z = calloc(1, sizeof *z);
	if (!z)
		return CUDA_ERROR_OUT_OF_MEMORY;
	size_t n = 1 << 16;
	while (n < bytes)
		n *= 2;
	z->bytes = n;
	CUresult rc = make(n, &z->ptr);
	if (rc == CUDA_SUCCESS) {
		struct cg_ctx_state *c = cg_ctx_state_lock(ctx, 1);
		if (c) {
			z->next = c->zeros;
			c->zeros = z;
		} else {
			rc = CUDA_ERROR_OUT_OF_MEMORY;
		}
		cg_ctx_state_unlock(c);
	}
	if (rc != CUDA_SUCCESS) {
		if (z->ptr)
			CG_REAL_SYM(cuMemFree, cuMemFree_v2)(z->ptr);
		free(z);
		return rc;
	}
	*out = z->ptr;
	return CUDA_SUCCESS;
}
