/*
 * The allocation table (every live range the fake knows, sorted by address), device,
 * managed and host allocations, pointer attributes and the copy entry points.
 * Device and managed memory are address ranges; what the synchronous copies
 * and memsets write is kept, allocated at the first write (kernels compute
 * nothing: what they would write is never there).
 */
#include <stdlib.h>
#include <string.h>

#include "fake.h"

#define ALLOC_ALIGN 512 /* sizes round up to this; bases are therefore 256-byte aligned */

static struct fake_alloc *tab;
static size_t ntab, captab;
static unsigned long long next_buffer_id = 1;
static CUdeviceptr device_used[FAKE_MAX_DEVICES]; /* bump offsets into each device range */
static CUdeviceptr managed_used;

/* Index of the first range starting above p. */
static size_t upper_bound(CUdeviceptr p)
{
	size_t lo = 0, hi = ntab;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (tab[mid].base <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct fake_alloc *fake_mem_find(CUdeviceptr p)
{
	size_t i = upper_bound(p);
	if (i == 0 || p - tab[i - 1].base >= tab[i - 1].size)
		return NULL;
	return &tab[i - 1];
}

size_t fake_mem_count(void)
{
	return ntab;
}

struct fake_alloc *fake_mem_at(size_t i)
{
	return &tab[i];
}

bool fake_mem_overlaps(CUdeviceptr base, size_t size)
{
	size_t i = upper_bound(base);
	if (i > 0 && base - tab[i - 1].base < tab[i - 1].size)
		return true;
	return i < ntab && tab[i].base - base < size;
}

CUresult fake_mem_add(const struct fake_alloc *a)
{
	if (fake_mem_overlaps(a->base, a->size))
		return CUDA_ERROR_INVALID_VALUE;
	struct fake_alloc *grown = fake_grow(tab, &captab, ntab + 1, sizeof(*tab));
	if (!grown)
		return CUDA_ERROR_OUT_OF_MEMORY;
	tab = grown;
	size_t i = upper_bound(a->base);
	memmove(&tab[i + 1], &tab[i], (ntab - i) * sizeof(*tab));
	tab[i] = *a;
	tab[i].id = next_buffer_id++;
	ntab++;
	return CUDA_SUCCESS;
}

static void remove_at(size_t i)
{
	if (tab[i].kind == FAKE_MEM_HOST)
		free(tab[i].host);
	free(tab[i].bytes);
	memmove(&tab[i], &tab[i + 1], (ntab - i - 1) * sizeof(*tab));
	ntab--;
}

void fake_mem_remove(CUdeviceptr base)
{
	size_t i = upper_bound(base);
	if (i > 0 && tab[i - 1].base == base)
		remove_at(i - 1);
}

void fake_mem_drop_ctx(CUcontext ctx)
{
	for (size_t i = ntab; i-- > 0;)
		if (tab[i].ctx == ctx)
			remove_at(i);
}

void fake_mem_drop_pool(CUmemoryPool pool)
{
	for (size_t i = ntab; i-- > 0;)
		if (tab[i].pool == pool)
			remove_at(i);
}

/* Carves `size` bytes from a region; freed ranges are not reused. */
static CUresult bump(CUdeviceptr base, CUdeviceptr *used, CUdeviceptr span, size_t size,
		     CUdeviceptr *out)
{
	if (size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (size > span - *used)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUdeviceptr rounded = (size + ALLOC_ALIGN - 1) / ALLOC_ALIGN * ALLOC_ALIGN;
	if (rounded > span - *used)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*out = base + *used;
	*used += rounded;
	return CUDA_SUCCESS;
}

/* Range a (its size set) carved from a region and added. */
static CUresult carve(CUdeviceptr base, CUdeviceptr *used, CUdeviceptr span, struct fake_alloc a,
		      CUdeviceptr *out)
{
	CUresult rc = bump(base, used, span, a.size, &a.base);
	if (rc == CUDA_SUCCESS)
		rc = fake_mem_add(&a);
	if (rc == CUDA_SUCCESS)
		*out = a.base;
	return rc;
}

CUresult fake_mem_alloc_device(CUdevice dev, CUcontext ctx, CUmemoryPool pool, size_t size,
			       CUdeviceptr *out)
{
	struct fake_alloc a = {.size = size,
			       .kind = FAKE_MEM_DEVICE,
			       .dev = dev,
			       .ctx = fake_ctx_domain(ctx), /* a green context's: its primary's */
			       .pool = pool};
	return carve(FAKE_DEVICE_BASE(dev), &device_used[dev], FAKE_DEVICE_SPAN, a, out);
}

/* A host-located pool's allocation: host memory, as every device sees it, in
 * the managed range (only its address matters); the device ordinal the
 * allocating context's, as the real driver answers (measured on an H200). */
CUresult fake_mem_alloc_pool_host(CUcontext ctx, CUmemoryPool pool, size_t size, CUdeviceptr *out)
{
	struct fake_alloc a = {
		.size = size, .kind = FAKE_MEM_POOL_HOST, .dev = ctx->dev, .ctx = ctx, .pool = pool};
	return carve(FAKE_MANAGED_BASE, &managed_used, FAKE_REGION_SPAN, a, out);
}

static CUresult mem_alloc(CUdeviceptr *dptr, size_t size)
{
	CUcontext ctx;
	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult rc = fake_ctx_require_current(&ctx);
	return rc == CUDA_SUCCESS ? fake_mem_alloc_device(ctx->dev, ctx, NULL, size, dptr) : rc;
}

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	FAKE_ENTER();
	return fake_leave(mem_alloc(dptr, bytesize));
}

CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
				    size_t Height, unsigned int ElementSizeBytes)
{
	FAKE_ENTER();
	if (!pPitch || WidthInBytes == 0 || Height == 0 ||
	    (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	size_t pitch = (WidthInBytes + ALLOC_ALIGN - 1) / ALLOC_ALIGN * ALLOC_ALIGN;
	if (Height > SIZE_MAX / pitch)
		return fake_leave(CUDA_ERROR_OUT_OF_MEMORY);
	CUresult rc = mem_alloc(dptr, pitch * Height);
	if (rc == CUDA_SUCCESS)
		*pPitch = pitch;
	return fake_leave(rc);
}

CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	FAKE_ENTER();
	CUcontext ctx;
	if (!dptr || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	CUresult rc = fake_ctx_require_current(&ctx);
	if (rc != CUDA_SUCCESS)
		return fake_leave(rc);
	struct fake_alloc a = {.size = bytesize, .kind = FAKE_MEM_MANAGED, .dev = ctx->dev, .ctx = ctx};
	return fake_leave(carve(FAKE_MANAGED_BASE, &managed_used, FAKE_REGION_SPAN, a, dptr));
}

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
	FAKE_ENTER();
	if (dptr == 0)
		return fake_leave(CUDA_SUCCESS);
	struct fake_alloc *a = fake_mem_find(dptr);
	if (a && a->base == dptr && a->kind == FAKE_MEM_GRAPH)
		return fake_leave(fake_gmem_free(dptr));
	if (!a || a->base != dptr ||
	    (a->kind != FAKE_MEM_DEVICE && a->kind != FAKE_MEM_MANAGED &&
	     a->kind != FAKE_MEM_POOL_IMPORT && a->kind != FAKE_MEM_EXTERNAL))
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	fake_mem_remove(dptr);
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	FAKE_ENTER();
	const struct fake_alloc *a = fake_mem_find(dptr);
	if (!a)
		return fake_leave(CUDA_ERROR_NOT_FOUND);
	if (pbase)
		*pbase = a->base;
	if (psize)
		*psize = a->size;
	return fake_leave(CUDA_SUCCESS);
}

/* Page-locked host memory is real memory; its device address equals its host address. */
static CUresult host_alloc(void **pp, size_t size, unsigned flags)
{
	CUcontext ctx;
	void *p;
	if (!pp || size == 0 ||
	    (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
				 CU_MEMHOSTALLOC_WRITECOMBINED)))
		return CUDA_ERROR_INVALID_VALUE;
	CUresult rc = fake_ctx_require_current(&ctx);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (posix_memalign(&p, 4096, size) != 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	memset(p, 0, size);
	struct fake_alloc a = {
		.base = (CUdeviceptr)(uintptr_t)p,
		.size = size,
		.kind = FAKE_MEM_HOST,
		.dev = ctx->dev,
		.ctx = ctx,
		.host = p,
	};
	rc = fake_mem_add(&a);
	if (rc != CUDA_SUCCESS) {
		free(p);
		return rc;
	}
	*pp = p;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	FAKE_ENTER();
	return fake_leave(host_alloc(pp, bytesize, 0));
}

CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	FAKE_ENTER();
	return fake_leave(host_alloc(pp, bytesize, Flags));
}

CUresult CUDAAPI cuMemFreeHost(void *p)
{
	FAKE_ENTER();
	CUdeviceptr base = (CUdeviceptr)(uintptr_t)p;
	const struct fake_alloc *a = fake_mem_find(base);
	if (!p || !a || a->base != base || a->kind != FAKE_MEM_HOST)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	fake_mem_remove(base);
	return fake_leave(CUDA_SUCCESS);
}

static bool is_host_kind(enum fake_mem_kind k)
{
	return k == FAKE_MEM_HOST || k == FAKE_MEM_REGISTERED || k == FAKE_MEM_POOL_HOST;
}

CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
	FAKE_ENTER();
	const struct fake_alloc *a = fake_mem_find((CUdeviceptr)(uintptr_t)p);
	if (!pdptr || Flags != 0 || !a || !is_host_kind(a->kind))
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	*pdptr = (CUdeviceptr)(uintptr_t)p;
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
	FAKE_ENTER();
	CUcontext ctx;
	if (!p || bytesize == 0 ||
	    (Flags & ~(unsigned)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
				 CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY)))
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	CUresult rc = fake_ctx_require_current(&ctx);
	if (rc != CUDA_SUCCESS)
		return fake_leave(rc);
	CUdeviceptr base = (CUdeviceptr)(uintptr_t)p;
	if (fake_mem_overlaps(base, bytesize))
		return fake_leave(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
	struct fake_alloc a = {
		.base = base,
		.size = bytesize,
		.kind = FAKE_MEM_REGISTERED,
		.dev = ctx->dev,
		.ctx = ctx,
	};
	return fake_leave(fake_mem_add(&a));
}

CUresult CUDAAPI cuMemHostUnregister(void *p)
{
	FAKE_ENTER();
	CUdeviceptr base = (CUdeviceptr)(uintptr_t)p;
	const struct fake_alloc *a = fake_mem_find(base);
	if (!p || !a || a->base != base || a->kind != FAKE_MEM_REGISTERED)
		return fake_leave(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
	fake_mem_remove(base);
	return fake_leave(CUDA_SUCCESS);
}

/* ---- pointer attributes ---- */

/* Bytes each attribute writes; booleans are written as unsigned int. 0: unsupported. */
static const unsigned char attr_size[] = {
	[CU_POINTER_ATTRIBUTE_CONTEXT] = sizeof(CUcontext),
	[CU_POINTER_ATTRIBUTE_MEMORY_TYPE] = sizeof(unsigned int),
	[CU_POINTER_ATTRIBUTE_DEVICE_POINTER] = sizeof(CUdeviceptr),
	[CU_POINTER_ATTRIBUTE_HOST_POINTER] = sizeof(void *),
	[CU_POINTER_ATTRIBUTE_SYNC_MEMOPS] = sizeof(unsigned int),
	[CU_POINTER_ATTRIBUTE_BUFFER_ID] = sizeof(unsigned long long),
	[CU_POINTER_ATTRIBUTE_IS_MANAGED] = sizeof(unsigned int),
	[CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL] = sizeof(int),
	[CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE] = sizeof(unsigned int),
	[CU_POINTER_ATTRIBUTE_RANGE_START_ADDR] = sizeof(CUdeviceptr),
	[CU_POINTER_ATTRIBUTE_RANGE_SIZE] = sizeof(size_t),
	[CU_POINTER_ATTRIBUTE_MAPPED] = sizeof(unsigned int),
	[CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES] = sizeof(unsigned long long),
	[CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE] = sizeof(unsigned int),
	[CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE] = sizeof(CUmemoryPool),
	[CU_POINTER_ATTRIBUTE_MAPPING_SIZE] = sizeof(size_t),
	[CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR] = sizeof(CUdeviceptr),
	[CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID] = sizeof(unsigned long long),
	[CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE] = sizeof(unsigned int),
};

static unsigned attr_bytes(CUpointer_attribute attr)
{
	return attr > 0 && (size_t)attr < sizeof(attr_size) ? attr_size[attr] : 0;
}

static void attr_store(void *data, unsigned bytes, unsigned long long v)
{
	if (bytes == sizeof(unsigned int)) {
		unsigned int u = (unsigned int)v;
		memcpy(data, &u, sizeof(u));
	} else {
		memcpy(data, &v, sizeof(v));
	}
}

/* Value of `attr` for address p inside range a; false if it has none (INVALID_VALUE). */
static bool attr_value(const struct fake_alloc *a, CUdeviceptr p, CUpointer_attribute attr,
		       unsigned long long *v)
{
	bool host = is_host_kind(a->kind);
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*v = (uintptr_t)a->ctx;
		return true;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*v = host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
		return true;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		*v = p;
		return true;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		*v = p;
		return host || a->kind == FAKE_MEM_MANAGED;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
	case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
		*v = a->id;
		return true;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
		*v = a->kind == FAKE_MEM_MANAGED;
		return true;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*v = (unsigned long long)a->dev;
		return true;
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
		*v = a->kind == FAKE_MEM_DEVICE && !a->pool;
		return true;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		*v = a->kind == FAKE_MEM_VMM ? a->resv_base : a->base;
		return true;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		*v = a->kind == FAKE_MEM_VMM ? a->resv_size : a->size;
		return true;
	case CU_POINTER_ATTRIBUTE_MAPPED:
		*v = 1;
		return true;
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
		*v = (uintptr_t)a->pool;
		return true;
	case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
		*v = a->base;
		return true;
	case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
		*v = a->size;
		return true;
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
	case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
	case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
	case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
		*v = 0;
		return true;
	default:
		return false;
	}
}

CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
	FAKE_ENTER();
	unsigned long long v;
	unsigned bytes = attr_bytes(attribute);
	const struct fake_alloc *a = fake_mem_find(ptr);
	/* Unregistered host memory and unknown values: INVALID_VALUE, as the real driver. */
	if (!data || !bytes || !a || !attr_value(a, ptr, attribute, &v))
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	attr_store(data, bytes, v);
	return fake_leave(CUDA_SUCCESS);
}

/* Unlike cuPointerGetAttribute, an unknown pointer gets default values, not an error. */
CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
					void **data, CUdeviceptr ptr)
{
	FAKE_ENTER();
	if (numAttributes == 0 || !attributes || !data)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	for (unsigned i = 0; i < numAttributes; i++)
		if (!attr_bytes(attributes[i]) || !data[i])
			return fake_leave(CUDA_ERROR_INVALID_VALUE);
	const struct fake_alloc *a = fake_mem_find(ptr);
	for (unsigned i = 0; i < numAttributes; i++) {
		unsigned long long v;
		if (!a || !attr_value(a, ptr, attributes[i], &v))
			v = attributes[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
				    ? (unsigned long long)(long long)CU_DEVICE_INVALID
				    : 0;
		attr_store(data[i], attr_bytes(attributes[i]), v);
	}
	return fake_leave(CUDA_SUCCESS);
}

/* ---- copies: validated; the synchronous ones performed ---- */

/* A device side must lie inside one known range. */
static bool device_range_ok(CUdeviceptr p, size_t n)
{
	const struct fake_alloc *a = fake_mem_find(p);
	return a && n <= a->size - (p - a->base);
}

static CUresult copy_check(size_t n, bool dst_ok, bool src_ok)
{
	CUcontext ctx;
	CUresult rc = fake_ctx_require_current(&ctx);
	if (rc != CUDA_SUCCESS || n == 0)
		return rc;
	return dst_ok && src_ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The bytes at p (a checked range), backed now; NULL when they cannot be
 * (a huge range): the write is then lost, as before backing existed. */
static unsigned char *backed(CUdeviceptr p)
{
	struct fake_alloc *a = fake_mem_find(p);
	if (!a->bytes)
		a->bytes = calloc(1, a->size);
	return a->bytes ? a->bytes + (p - a->base) : NULL;
}

static void read_back(void *dst, CUdeviceptr src, size_t n)
{
	const struct fake_alloc *a = fake_mem_find(src);
	if (a->bytes)
		memmove(dst, a->bytes + (src - a->base), n);
	else
		memset(dst, 0, n);
}

CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
	FAKE_ENTER();
	CUresult rc = copy_check(ByteCount, device_range_ok(dstDevice, ByteCount), srcHost);
	unsigned char *to = rc == CUDA_SUCCESS && ByteCount ? backed(dstDevice) : NULL;
	if (to)
		memcpy(to, srcHost, ByteCount);
	return fake_leave(rc);
}

CUresult CUDAAPI cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
	FAKE_ENTER();
	CUresult rc = copy_check(ByteCount, dstHost, device_range_ok(srcDevice, ByteCount));
	if (rc == CUDA_SUCCESS && ByteCount)
		read_back(dstHost, srcDevice, ByteCount);
	return fake_leave(rc);
}

CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
	FAKE_ENTER();
	CUresult rc = copy_check(ByteCount, device_range_ok(dstDevice, ByteCount),
				 device_range_ok(srcDevice, ByteCount));
	unsigned char *to = rc == CUDA_SUCCESS && ByteCount ? backed(dstDevice) : NULL;
	if (to)
		read_back(to, srcDevice, ByteCount);
	return fake_leave(rc);
}

CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
	FAKE_ENTER();
	CUresult rc = copy_check(N, device_range_ok(dstDevice, N), true);
	unsigned char *to = rc == CUDA_SUCCESS && N ? backed(dstDevice) : NULL;
	if (to)
		memset(to, uc, N);
	return fake_leave(rc);
}

CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
	FAKE_ENTER();
	(void)uc;
	CUcontext ctx;
	CUresult rc = fake_stream_ctx(hStream, &ctx);
	if (rc == CUDA_SUCCESS)
		rc = copy_check(N, device_range_ok(dstDevice, N), true);
	if (rc == CUDA_SUCCESS)
		fake_stream_note_work(hStream, ctx);
	return fake_leave(rc);
}
