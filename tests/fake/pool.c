/* Growable arrays and the per-kind object pools behind every driver handle. */
#include <stdlib.h>
#include <string.h>

#include "fake.h"

void *fake_grow(void *arr, size_t *cap, size_t need, size_t elem)
{
	if (arr && need <= *cap)
		return arr;
	size_t ncap = *cap ? *cap : 8;
	while (ncap < need)
		ncap *= 2;
	void *n = realloc(arr, ncap * elem);
	if (n)
		*cap = ncap;
	return n;
}

void *fake_pool_take(struct fake_pool *p)
{
	void *obj;
	if (p->nfree > 0) {
		obj = p->free[--p->nfree];
	} else {
		/* The free list gets room for every object now, so fake_pool_give cannot fail. */
		void **all = fake_grow(p->all, &p->capall, p->nall + 1, sizeof(void *));
		if (!all)
			return NULL;
		p->all = all;
		void **free_list = fake_grow(p->free, &p->capfree, p->nall + 1, sizeof(void *));
		if (!free_list)
			return NULL;
		p->free = free_list;
		obj = malloc(p->objsize);
		if (!obj)
			return NULL;
		p->all[p->nall++] = obj;
	}
	memset(obj, 0, p->objsize);
	((struct fake_hdr *)obj)->live = true;
	return obj;
}

void fake_pool_give(struct fake_pool *p, void *obj)
{
	((struct fake_hdr *)obj)->live = false;
	p->free[p->nfree++] = obj;
}

/* Gives back every live object of p owned by ctx: the CUcontext at byte offset ctx_at of
 * each (a context's end takes its streams, events, ...). */
void fake_pool_give_ctx(struct fake_pool *p, size_t ctx_at, CUcontext ctx)
{
	for (size_t i = 0; i < p->nall; i++) {
		unsigned char *obj = p->all[i];
		CUcontext owner;
		memcpy(&owner, obj + ctx_at, sizeof owner);
		if (((struct fake_hdr *)obj)->live && owner == ctx)
			fake_pool_give(p, obj);
	}
}

/* A destroy entry point's whole work: INVALID_HANDLE for what p does not hold live. */
CUresult fake_pool_destroy(struct fake_pool *p, void *obj)
{
	if (!fake_pool_live(p, obj))
		return CUDA_ERROR_INVALID_HANDLE;
	fake_pool_give(p, obj);
	return CUDA_SUCCESS;
}

/* Handles come from callers, so only pointers the pool made are ever dereferenced. */
bool fake_pool_live(const struct fake_pool *p, const void *obj)
{
	if (!obj)
		return false;
	for (size_t i = 0; i < p->nall; i++)
		if (p->all[i] == obj)
			return ((const struct fake_hdr *)obj)->live;
	return false;
}
