/*
 * Virtual memory management: address reservations in their own range (tied to no
 * device), physical handles made on a device, and mappings, which put the handle's device
 * behind the reserved addresses. A mapping is reachable only from the devices granted
 * access with cuMemSetAccess, as on the real driver. A handle made with a POSIX file
 * descriptor handle type can be exported and imported again as if by another process: the
 * import is a handle of its own, on the exported memory's device.
 */
#include "fake.h"

struct fake_phys {
	struct fake_hdr h;
	CUdevice dev;
	size_t size;
	CUmemAllocationHandleType types; /* requested at creation: what it may be exported as */
	unsigned nmaps;
	/* the program's: cuMemCreate or an import, each retain; a release drops one.  With none
	 * left the handle is usable only once retained, and freed once the last mapping goes. */
	unsigned refs;
};

/* What an exported file descriptor stands for: FAKE_EXPORT_FD + i names exports[i] (no
 * file is opened; memory is never backed). */
struct export {
	CUdevice dev;
	size_t size;
	CUmemAllocationHandleType types;
};

#define FAKE_EXPORT_FD 1000

struct reservation {
	CUdeviceptr base;
	size_t size;
};

static struct fake_pool phys_pool = FAKE_POOL_INIT(struct fake_phys);
static struct reservation *resv;
static size_t nresv, capresv;
static struct export *exports;
static size_t nexports, capexports;
static CUdeviceptr vmm_used;

static struct fake_phys *phys_of(CUmemGenericAllocationHandle h)
{
	struct fake_phys *p = (struct fake_phys *)(uintptr_t)h;
	return fake_pool_live(&phys_pool, p) ? p : NULL;
}

static bool granular(unsigned long long v)
{
	return v % FAKE_GRANULARITY == 0;
}

static bool prop_ok(const CUmemAllocationProp *prop)
{
	return prop && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED &&
	       prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
	       fake_dev_valid(prop->location.id);
}

/* The reservation holding all of [p, p+size), or NULL. */
static const struct reservation *reservation_of(CUdeviceptr p, size_t size)
{
	for (size_t i = 0; i < nresv; i++)
		if (p >= resv[i].base && p - resv[i].base < resv[i].size &&
		    size <= resv[i].size - (p - resv[i].base))
			return &resv[i];
	return NULL;
}

static bool overlaps(const struct fake_alloc *a, CUdeviceptr p, size_t size)
{
	return a->base < p + size && p < a->base + a->size;
}

CUresult CUDAAPI cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
					       CUmemAllocationGranularity_flags option)
{
	FAKE_ENTER();
	if (!granularity || !prop_ok(prop) ||
	    (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
	     option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	*granularity = FAKE_GRANULARITY;
	return fake_leave(CUDA_SUCCESS);
}

/* The address hint is only a hint; reservations come from a bump allocator. */
CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
				     CUdeviceptr addr, unsigned long long flags)
{
	FAKE_ENTER();
	(void)addr;
	if (!ptr || size == 0 || !granular(size) || flags != 0 || (alignment & (alignment - 1)))
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	size_t align = alignment > FAKE_GRANULARITY ? alignment : FAKE_GRANULARITY;
	CUdeviceptr off = (vmm_used + align - 1) / align * align;
	if (off > FAKE_REGION_SPAN || size > FAKE_REGION_SPAN - off)
		return fake_leave(CUDA_ERROR_OUT_OF_MEMORY);
	struct reservation *grown = fake_grow(resv, &capresv, nresv + 1, sizeof(*resv));
	if (!grown)
		return fake_leave(CUDA_ERROR_OUT_OF_MEMORY);
	resv = grown;
	resv[nresv++] = (struct reservation){FAKE_VMM_BASE + off, size};
	vmm_used = off + size;
	*ptr = FAKE_VMM_BASE + off;
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	FAKE_ENTER();
	for (size_t i = 0; i < nresv; i++) {
		if (resv[i].base != ptr || resv[i].size != size)
			continue;
		if (fake_mem_overlaps(ptr, size)) /* still mapped */
			return fake_leave(CUDA_ERROR_INVALID_VALUE);
		resv[i] = resv[--nresv];
		return fake_leave(CUDA_SUCCESS);
	}
	return fake_leave(CUDA_ERROR_INVALID_VALUE);
}

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
			     const CUmemAllocationProp *prop, unsigned long long flags)
{
	FAKE_ENTER();
	if (!handle || size == 0 || !granular(size) || !prop_ok(prop) || flags != 0)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	struct fake_phys *p = fake_pool_take(&phys_pool);
	if (!p)
		return fake_leave(CUDA_ERROR_OUT_OF_MEMORY);
	p->dev = prop->location.id;
	p->size = size;
	p->types = prop->requestedHandleTypes;
	p->refs = 1;
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)p;
	return fake_leave(CUDA_SUCCESS);
}

/* Only POSIX file descriptors, of handles created to be exported as such. */
CUresult CUDAAPI cuMemExportToShareableHandle(void *shareableHandle,
					      CUmemGenericAllocationHandle handle,
					      CUmemAllocationHandleType handleType,
					      unsigned long long flags)
{
	FAKE_ENTER();
	const struct fake_phys *p = phys_of(handle);
	if (!shareableHandle || !p || p->refs == 0 || flags != 0 ||
	    handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || !(p->types & handleType))
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	struct export *grown = fake_grow(exports, &capexports, nexports + 1, sizeof(*exports));
	if (!grown)
		return fake_leave(CUDA_ERROR_OUT_OF_MEMORY);
	exports = grown;
	exports[nexports] = (struct export){p->dev, p->size, p->types};
	*(int *)shareableHandle = FAKE_EXPORT_FD + (int)nexports++;
	return fake_leave(CUDA_SUCCESS);
}

/* A new handle each time, as in the process the descriptor was passed to. */
CUresult CUDAAPI cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle,
						void *osHandle,
						CUmemAllocationHandleType shHandleType)
{
	FAKE_ENTER();
	uintptr_t fd = (uintptr_t)osHandle;
	if (!handle || shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
	    fd < FAKE_EXPORT_FD || fd - FAKE_EXPORT_FD >= nexports)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	struct fake_phys *p = fake_pool_take(&phys_pool);
	if (!p)
		return fake_leave(CUDA_ERROR_OUT_OF_MEMORY);
	const struct export *e = &exports[fd - FAKE_EXPORT_FD];
	p->dev = e->dev;
	p->size = e->size;
	p->types = e->types;
	p->refs = 1;
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)p;
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
							CUmemGenericAllocationHandle handle)
{
	FAKE_ENTER();
	const struct fake_phys *p = phys_of(handle);
	if (!prop || !p || p->refs == 0)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	*prop = (CUmemAllocationProp){.type = CU_MEM_ALLOCATION_TYPE_PINNED,
				      .requestedHandleTypes = p->types,
				      .location = {CU_MEM_LOCATION_TYPE_DEVICE, p->dev}};
	return fake_leave(CUDA_SUCCESS);
}

static void phys_put(struct fake_phys *p)
{
	if (p->refs == 0 && p->nmaps == 0)
		fake_pool_give(&phys_pool, p);
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
	FAKE_ENTER();
	struct fake_phys *p = phys_of(handle);
	if (!p || p->refs == 0)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	p->refs--;
	phys_put(p);
	return fake_leave(CUDA_SUCCESS);
}

/* The handle mapped at any address of a mapping: the same handle value, one reference
 * more (usable again if all were released). */
CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
	FAKE_ENTER();
	const struct fake_alloc *a = fake_mem_find((CUdeviceptr)(uintptr_t)addr);
	if (!handle || !a || a->kind != FAKE_MEM_VMM)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	struct fake_phys *p = a->phys;
	p->refs++;
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)p;
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
			  CUmemGenericAllocationHandle handle, unsigned long long flags)
{
	FAKE_ENTER();
	struct fake_phys *p = phys_of(handle);
	const struct reservation *r = reservation_of(ptr, size);
	if (!p || p->refs == 0 || flags != 0 || size == 0 || !granular(ptr) || !granular(size) ||
	    !granular(offset) || offset > p->size || size > p->size - offset || !r)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	struct fake_alloc a = {
		.base = ptr,
		.size = size,
		.kind = FAKE_MEM_VMM,
		.dev = p->dev,
		.phys = p,
		.resv_base = r->base,
		.resv_size = r->size,
	};
	CUresult rc = fake_mem_add(&a);
	if (rc == CUDA_SUCCESS)
		p->nmaps++;
	return fake_leave(rc);
}

/* Every mapping the range touches must lie wholly inside it. */
CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	FAKE_ENTER();
	size_t touched = 0;
	for (size_t i = 0; i < fake_mem_count(); i++) {
		const struct fake_alloc *a = fake_mem_at(i);
		if (!overlaps(a, ptr, size))
			continue;
		if (a->kind != FAKE_MEM_VMM || a->base < ptr || a->size > size - (a->base - ptr))
			return fake_leave(CUDA_ERROR_INVALID_VALUE);
		touched++;
	}
	if (size == 0 || touched == 0)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	for (size_t i = fake_mem_count(); i-- > 0;) {
		struct fake_alloc *a = fake_mem_at(i);
		if (!overlaps(a, ptr, size))
			continue;
		struct fake_phys *p = a->phys;
		fake_mem_remove(a->base);
		p->nmaps--;
		phys_put(p);
	}
	return fake_leave(CUDA_SUCCESS);
}

bool fake_access_desc_valid(const CUmemAccessDesc *d)
{
	return d->location.type == CU_MEM_LOCATION_TYPE_DEVICE && fake_dev_valid(d->location.id) &&
	       (d->flags == CU_MEM_ACCESS_FLAGS_PROT_NONE || d->flags == CU_MEM_ACCESS_FLAGS_PROT_READ ||
		d->flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
}

CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
				size_t count)
{
	FAKE_ENTER();
	if (!desc || count == 0 || size == 0)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	for (size_t i = 0; i < count; i++)
		if (!fake_access_desc_valid(&desc[i]))
			return fake_leave(CUDA_ERROR_INVALID_VALUE);
	/* The whole range must be mapped, without holes. */
	for (CUdeviceptr p = ptr; p < ptr + size;) {
		const struct fake_alloc *a = fake_mem_find(p);
		if (!a || a->kind != FAKE_MEM_VMM)
			return fake_leave(CUDA_ERROR_INVALID_VALUE);
		p = a->base + a->size;
	}
	for (CUdeviceptr p = ptr; p < ptr + size;) {
		struct fake_alloc *a = fake_mem_find(p);
		for (size_t i = 0; i < count; i++) {
			unsigned bit = 1u << desc[i].location.id;
			a->access = desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_NONE
					    ? a->access & ~bit
					    : a->access | bit;
		}
		p = a->base + a->size;
	}
	return fake_leave(CUDA_SUCCESS);
}
