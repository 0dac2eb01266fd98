/* Zeros in device memory, per context: the grouped_layout of a one-group
 * GEMM (DeepGEMM's GemmType::Normal has none) as the bundled contiguous
 * form reads it, every row in group 0.  Grown by doubling when a larger
 * problem comes; a smaller buffer may still be read by queued work, so it
 * is kept (at most the size of the largest).  The memset is synchronized
 * once per growth, before any stream can read the buffer. */
#include <pthread.h>
#include <stdlib.h>

#include "redirect.h"

struct zeros {
	CUcontext ctx;
	CUdeviceptr ptr;
	size_t bytes;
	struct zeros *next;        /* this context's smaller buffers, then others */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct zeros *all;

static CUdeviceptr find_locked(CUcontext ctx, size_t bytes)
{
	for (const struct zeros *z = all; z; z = z->next)
		if (z->ctx == ctx && z->bytes >= bytes)
			return z->ptr;
	return 0;
}

CUresult cg_zeros(CUcontext ctx, size_t bytes, CUdeviceptr *out)
{
	pthread_mutex_lock(&lock);
	*out = find_locked(ctx, bytes);
	pthread_mutex_unlock(&lock);
	if (*out)
		return CUDA_SUCCESS;
	struct zeros *z = calloc(1, sizeof *z);
	if (!z)
		return CUDA_ERROR_OUT_OF_MEMORY;
	size_t n = 1 << 16;
	while (n < bytes)
		n *= 2;
	CUresult rc = CG_REAL_SYM(cuMemAlloc, cuMemAlloc_v2)(&z->ptr, n);
	if (rc == CUDA_SUCCESS)
		rc = cg_call.cuMemsetD8_v2(z->ptr, 0, n);
	if (rc == CUDA_SUCCESS)
		rc = cg_call.cuStreamSynchronize(CU_STREAM_LEGACY);
	if (rc != CUDA_SUCCESS) {
		free(z);
		return rc;
	}
	z->ctx = ctx;
	z->bytes = n;
	pthread_mutex_lock(&lock);
	z->next = all;
	all = z;
	pthread_mutex_unlock(&lock);
	*out = z->ptr;
	return CUDA_SUCCESS;
}

/* A destroyed context freed its memory. */
void cg_zeros_forget(CUcontext ctx)
{
	pthread_mutex_lock(&lock);
	for (struct zeros **q = &all; *q;) {
		struct zeros *z = *q;
		if (z->ctx != ctx) {
			q = &z->next;
			continue;
		}
		*q = z->next;
		free(z);
	}
	pthread_mutex_unlock(&lock);
}

/* In a forked child (see cg_streams_reset): no memory, and a lock that a
 * thread which does not exist here may have held. */
void cg_zeros_reset(void)
{
	pthread_mutex_init(&lock, NULL);
	while (all) {
		struct zeros *z = all;
		all = z->next;
		free(z);
	}
}
