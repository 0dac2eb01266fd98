/* Where device memory lives: address -> device, kept current by the
 * allocation hooks, with cuPointerGetAttributes as the fallback for memory
 * allocated out of ctxguard's sight.
 *
 * The map is kept per 2 MiB granule, the unit in which the driver maps
 * device memory (cuMemAlloc sub-allocates from per-device 2 MiB pages; VMM
 * granularity is at least that), so an interior pointer — a tensor view
 * into a caching allocator's segment — is found by its granule alone.
 * Readers see one tag byte per granule of the 47-bit user address space:
 * 64 MiB of address space reserved with MAP_NORESERVE when the first
 * allocation is seen, of which only pages holding a tag are ever backed
 * (4 KiB per 8 GiB of memory), so the launch path answers with one load. */
#include <pthread.h>
#include <sys/mman.h>

#include "shim.h"

enum { SHIFT = CG_MEM_SHIFT, TAG_ANY = CG_MEM_TAG_ANY, NEG = 4096 };
#define TAGS_BYTES ((size_t)1 << (47 - SHIFT))

/* The readers' tags (shim.h); NULL until the first allocation, or for
 * good if the reservation failed (then the table below answers). */
_Atomic(cg_tag *) cg_granule_tags;
/* Granule -> (allocations covering it << 8 | tag), tag = device + 1 or
 * TAG_ANY for memory every device may reach (managed, host-mapped). */
static struct cg_table granules = CG_TABLE_INIT;
/* Allocation base -> (size << 8 | tag), to undo a free. */
static struct cg_table allocs = CG_TABLE_INIT;
/* VMM physical handle -> tag. */
static struct cg_table handles = CG_TABLE_INIT;
/* Granules known not to be device memory (direct-mapped, lossy). */
static _Atomic uintptr_t negative[NEG];
/* Read-modify-write of granule counts; readers never take it. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int tags_failed;

/* Under the lock: granule g's tag as readers see it (0: none). */
static void set_tag(uintptr_t g, int tag)
{
	cg_tag *tags = atomic_load_explicit(&cg_granule_tags, memory_order_relaxed);
	if (!tags && !tags_failed && tag) {
		void *p = mmap(NULL, TAGS_BYTES, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		tags_failed = p == MAP_FAILED;
		if (!tags_failed) {
			tags = p;
			atomic_store_explicit(&cg_granule_tags, tags, memory_order_release);
		}
	}
	if (tags && g < TAGS_BYTES)
		atomic_store_explicit(&tags[g], (unsigned char)tag, memory_order_relaxed);
}

static void mark(uintptr_t base, size_t size, int tag)
{
	if (!base || !size)
		return;
	pthread_mutex_lock(&lock);
	for (uintptr_t g = base >> SHIFT; g <= (base + size - 1) >> SHIFT; g++) {
		uintptr_t v = (uintptr_t)cg_table_get(&granules, g);
		uintptr_t n = v && (int)(v & 255) == tag ? (v >> 8) + 1 : 1;
		cg_table_put(&granules, g, (void *)(n << 8 | (uintptr_t)tag));
		set_tag(g, tag);
		atomic_store_explicit(&negative[g % NEG], 0, memory_order_relaxed);
	}
	pthread_mutex_unlock(&lock);
}

static void unmark(uintptr_t base, size_t size)
{
	if (!base || !size)
		return;
	pthread_mutex_lock(&lock);
	for (uintptr_t g = base >> SHIFT; g <= (base + size - 1) >> SHIFT; g++) {
		uintptr_t v = (uintptr_t)cg_table_get(&granules, g);
		if (!v)
			continue;
		if ((v >> 8) <= 1) {
			cg_table_del(&granules, g);
			set_tag(g, 0);
		} else
			cg_table_put(&granules, g, (void *)(v - 256));
	}
	pthread_mutex_unlock(&lock);
}

static void remember(uintptr_t base, size_t size, int tag)
{
	if (!base)
		return;
	cg_table_put(&allocs, base, (void *)(((uintptr_t)size << 8) | (uintptr_t)tag));
	mark(base, size, tag);
}

static void forget(uintptr_t base)
{
	uintptr_t v = (uintptr_t)cg_table_del(&allocs, base);
	if (v)
		unmark(base, v >> 8);
}

/* Device d's tag; 0 for no device (or one past what a tag can name). */
static int tag_of_device(int d)
{
	return d >= 0 && d < TAG_ANY - 1 ? d + 1 : 0;
}

static int tag_of_ctx(CUcontext ctx)
{
	return tag_of_device(cg_ctx_device(ctx));
}

/* What the driver says about an address nobody told us about; the answer
 * is kept for the granule, until an allocation hook says otherwise. */
static int ask_driver(uintptr_t a)
{
	CUmemorytype type = 0;
	int ordinal = -1;
	unsigned int managed = 0;
	CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				       CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
				       CU_POINTER_ATTRIBUTE_IS_MANAGED};
	void *data[] = {&type, &ordinal, &managed};
	uintptr_t g = a >> SHIFT;
	if (!cg_call.cuPointerGetAttributes ||
	    cg_call.cuPointerGetAttributes(3, attrs, data, (CUdeviceptr)a) != CUDA_SUCCESS ||
	    (type != CU_MEMORYTYPE_DEVICE && !managed)) {
		atomic_store_explicit(&negative[g % NEG], g + 1, memory_order_relaxed);
		return CG_MEM_NONE;
	}
	int tag = managed ? TAG_ANY : tag_of_device(ordinal);
	if (!tag)
		return CG_MEM_NONE;
	mark(g << SHIFT, (size_t)1 << SHIFT, tag);
	return cg_mem_tag_device(tag);
}

int cg_mem_device_unmapped(uintptr_t a, CUstream stream)
{
	if (!atomic_load_explicit(&cg_granule_tags, memory_order_acquire)) {
		uintptr_t v = (uintptr_t)cg_table_get(&granules, a >> SHIFT);
		if (v)
			return cg_mem_tag_device((int)(v & 255));
	}
	if (atomic_load_explicit(&negative[(a >> SHIFT) % NEG], memory_order_relaxed) ==
	    (a >> SHIFT) + 1)
		return CG_MEM_NONE;
	return cg_capturing(stream) ? CG_MEM_NONE : ask_driver(a);
}

void cg_memory_reset(void)
{
	pthread_mutex_init(&lock, NULL);
	cg_tag *tags = atomic_load_explicit(&cg_granule_tags, memory_order_relaxed);
	/* The child forgets the parent's memory: the pages read as zero again. */
	if (tags)
		madvise(tags, TAGS_BYTES, MADV_DONTNEED);
	cg_table_reset(&granules);
	cg_table_reset(&allocs);
	cg_table_reset(&handles);
	for (int i = 0; i < NEG; i++)
		atomic_store_explicit(&negative[i], 0, memory_order_relaxed);
}

/* ---- the allocation hooks ---- */

/* A pool may live on another device than the stream, or in host memory,
 * which every device reaches: ask the driver.  A host pool's allocation
 * names a device ordinal all the same (measured on an H200: the allocating
 * device's), so the memory type decides. */
static int pool_tag(CUdeviceptr p, CUstream s)
{
	CUmemorytype type = 0;
	int ordinal = -1;
	CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				       CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
	void *data[] = {&type, &ordinal};
	if (!p || !cg_call.cuPointerGetAttributes ||
	    cg_call.cuPointerGetAttributes(2, attrs, data, p) != CUDA_SUCCESS)
		ordinal = -1;
	else if (type == CU_MEMORYTYPE_HOST)
		return TAG_ANY;
	int tag = tag_of_device(ordinal);
	return tag ? tag : tag_of_ctx(cg_launch_ctx(s));
}

CG_AFTER(cuMemAlloc, remember(CG_OUT(dptr), bytesize, tag_of_ctx(cg_current_ctx())))
CG_AFTER(cuMemAllocPitch, remember(CG_OUT(dptr), pPitch ? *pPitch * Height : 0,
				   tag_of_ctx(cg_current_ctx())))
/* Stream-ordered allocations come from the stream's device's pool. */
CG_AFTER(cuMemAllocAsync, remember(CG_OUT(dptr), bytesize, tag_of_ctx(cg_launch_ctx(hStream))))
CG_AFTER(cuMemAllocFromPoolAsync, remember(CG_OUT(dptr), bytesize, pool_tag(CG_OUT(dptr), hStream)))
/* Managed and pinned host memory is reachable from every device (UVA). */
CG_AFTER(cuMemAllocManaged, remember(CG_OUT(dptr), bytesize, TAG_ANY))
CG_AFTER(cuMemHostAlloc, remember(CG_OUT(pp), bytesize, TAG_ANY))
CG_AFTER(cuMemAllocHost, remember(CG_OUT(pp), bytesize, TAG_ANY))
CG_AFTER(cuMemHostRegister, remember((uintptr_t)p, bytesize, TAG_ANY))

/* Unpublish before the real free: the driver may hand the range out again
 * at once on another thread. */
CG_BEFORE(cuMemFree, forget(dptr))
CG_BEFORE(cuMemFreeAsync, forget(dptr))
CG_BEFORE(cuMemFreeHost, forget((uintptr_t)p))
CG_BEFORE(cuMemHostUnregister, forget((uintptr_t)p))

/* Virtual memory management (PyTorch's expandable segments): a physical
 * handle has a device; mapping it gives an address range that device. */
static void created(const CUmemGenericAllocationHandle *handle, const CUmemAllocationProp *prop)
{
	if (!handle || !prop || !*handle)
		return;
	/* Memory on no one device (host, host NUMA) every device reaches. */
	int tag = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE
			  ? tag_of_device(prop->location.id) : 0;
	cg_table_put(&handles, (uintptr_t)*handle, (void *)(uintptr_t)(tag ? tag : TAG_ANY));
}

/* An imported handle is unknown here; the fallback learns its range. */
static void mapped(CUdeviceptr ptr, size_t size, CUmemGenericAllocationHandle handle)
{
	uintptr_t tag = (uintptr_t)cg_table_get(&handles, (uintptr_t)handle);
	if (tag)
		mark(ptr, size, (int)tag);
}

static void address_freed(CUdeviceptr ptr, size_t size)
{
	pthread_mutex_lock(&lock);
	for (uintptr_t g = ptr >> SHIFT; size && g <= (ptr + size - 1) >> SHIFT; g++) {
		cg_table_del(&granules, g);
		set_tag(g, 0);
	}
	pthread_mutex_unlock(&lock);
}

CG_AFTER(cuMemCreate, created(handle, prop))
CG_BEFORE(cuMemRelease, cg_table_del(&handles, (uintptr_t)handle))
CG_AFTER(cuMemMap, mapped(ptr, size, handle))
CG_BEFORE(cuMemUnmap, unmark(ptr, size))
CG_BEFORE(cuMemAddressFree, address_freed(ptr, size))
