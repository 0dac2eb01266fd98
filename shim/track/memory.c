/* Where device memory lives: address -> device, kept current by the
 * allocation hooks, with cuPointerGetAttributes as the fallback for memory
 * allocated out of ctxguard's sight: what it says is learned, and unlearned
 * when that memory is freed, its IPC mapping closed or its context ended.
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
#include <stdlib.h>
#include <sys/mman.h>

#include "track.h"
#include "../report/report.h"

enum { SHIFT = CG_MEM_SHIFT, TAG_ANY = CG_MEM_TAG_ANY, NEG = 4096, LEARNED = 1 << 8, ONE = 1 << 9 };
#define TAGS_BYTES ((size_t)1 << (47 - SHIFT))

/* The readers' tags (shim.h); NULL until the first allocation, or for
 * good if the reservation failed (then the table below answers). */
_Atomic(cg_tag *) cg_granule_tags;
/* Granule -> (allocations a hook saw covering it) * ONE | LEARNED | tag,
 * tag = device + 1 or TAG_ANY for memory every device may reach (managed,
 * host-mapped).  LEARNED: the driver named the tag for memory no hook saw
 * allocated, so it goes with that memory and leaves the hooks' count be.
 *
 * A 2 MiB granule is one device's page: cuMemAlloc sub-allocates within a
 * device's own pages, IPC and VMM map whole pages.  A learned tag and a
 * hook's mark of another device in one granule are therefore never both
 * current; the newer, which saw the memory just now, replaces the other. */
static struct cg_table granules = CG_TABLE_INIT;
/* Memory a hook saw allocated, opened or imported, in allocs by its base:
 * what its free or close, or the end of its context (the driver then
 * frees and unmaps it, no free called) or of its allocation node's graph,
 * takes back.  Only allocation paths read allocs, so a record taken out of
 * it is freed at once. */
struct alloc {
	uintptr_t base;
	size_t size;
	uintptr_t add;             /* what it added to its granules: ONE, LEARNED */
	CUcontext owner;           /* NULL: not known; any context's end takes it */
	CUgraph graph;             /* a graph allocation node's graph, else NULL */
	struct alloc *next;        /* on the list of a context's or graph's end */
};
static struct cg_table allocs = CG_TABLE_INIT;
/* VMM physical handle -> its tag + HANDLE_REF x the references the
 * program holds on it (created(), below). */
static struct cg_table handles = CG_TABLE_INIT;
#define HANDLE_REF ((uintptr_t)1 << 16)
/* Granules known not to be device memory (direct-mapped, lossy), and how
 * many times memory has appeared: a lookup's "none" is cached only if no
 * memory appeared while the driver was asked. */
static _Atomic uintptr_t negative[NEG];
static _Atomic unsigned long appeared;
/* Read-modify-write of granule counts and handle references; readers
 * never take it. */
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

/* Memory appeared in [base, base + size): no granule of it stays cached
 * as not device memory. */
static void uncache(uintptr_t base, size_t size)
{
	atomic_fetch_add(&appeared, 1);
	for (uintptr_t g = base >> SHIFT; size && g <= (base + size - 1) >> SHIFT; g++)
		atomic_store(&negative[g % NEG], 0);
}

/* Tags [base, base + size): add is ONE for an allocation a hook saw,
 * LEARNED for memory the driver told of. */
static void tag_range(uintptr_t base, size_t size, int tag, uintptr_t add)
{
	if (!base || !size)
		return;
	pthread_mutex_lock(&lock);
	for (uintptr_t g = base >> SHIFT; g <= (base + size - 1) >> SHIFT; g++) {
		uintptr_t v = (uintptr_t)cg_table_get(&granules, g);
		uintptr_t kept = v && (int)(v & 255) == tag ? v : (uintptr_t)tag;
		cg_table_put(&granules, g, (void *)(add == LEARNED ? kept | LEARNED : kept + ONE));
		set_tag(g, tag);
	}
	pthread_mutex_unlock(&lock);
	uncache(base, size);
}

/* Takes back what tag_range added; a granule left with neither a hook's
 * allocation nor a learned tag is untagged. */
static void untag_range(uintptr_t base, size_t size, uintptr_t drop)
{
	if (!base || !size)
		return;
	pthread_mutex_lock(&lock);
	for (uintptr_t g = base >> SHIFT; g <= (base + size - 1) >> SHIFT; g++) {
		uintptr_t v = (uintptr_t)cg_table_get(&granules, g);
		if (drop == LEARNED ? !(v & LEARNED) : v < ONE)
			continue;
		if ((v - drop) & ~(uintptr_t)255) {
			cg_table_put(&granules, g, (void *)(v - drop));
		} else {
			cg_table_del(&granules, g);
			set_tag(g, 0);
		}
	}
	pthread_mutex_unlock(&lock);
}

/* Untags a's memory and frees a; whether there was one. */
static int drop(struct alloc *a)
{
	if (!a)
		return 0;
	untag_range(a->base, a->size, a->add);
	free(a);
	return 1;
}

/* A hook saw [base, base + size) appear in owner's context (add: see
 * tag_range), for graph's allocation node if graph is set.  A record
 * already at base is of memory that went out of sight (freed past the
 * hooks): it is dropped.  Without room for a record the memory is left to
 * the fallback, which learns it. */
static void remember(uintptr_t base, size_t size, int tag, uintptr_t add, CUcontext owner,
		     CUgraph graph)
{
	struct alloc *a = base ? malloc(sizeof *a) : NULL;
	if (!a)
		return;
	*a = (struct alloc){base, size, add, owner, graph, NULL};
	drop(cg_table_put(&allocs, base, a));
	tag_range(base, size, tag, add);
}

/* Whether base was memory a hook saw appear (now untagged). */
static int forget(uintptr_t base)
{
	return drop(cg_table_del(&allocs, base));
}

struct ending {
	CUcontext ctx;             /* a context's end, */
	CUgraph graph;             /* or, when set, a graph's */
	struct alloc **gone;
};

/* Under the table's lock: whether the allocation went with the context or
 * the graph, listed in *gone to be dropped after. */
static int ended(void *val, const void *arg)
{
	const struct ending *e = arg;
	struct alloc *a = val;
	if (e->graph ? a->graph != e->graph : a->owner && a->owner != e->ctx)
		return 0;
	a->next = *e->gone;
	*e->gone = a;
	return 1;
}

static void end(CUcontext ctx, CUgraph graph)
{
	struct alloc *gone = NULL;
	cg_table_sweep(&allocs, ended, &(struct ending){ctx, graph, &gone});
	while (gone) {
		struct alloc *a = gone;
		gone = a->next;
		drop(a);
	}
}

/* The memory of no known context goes too: while it lives, a lookup
 * learns it back. */
void cg_memory_on_ctx_end(CUcontext ctx)
{
	end(ctx, NULL);
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

/* Memory at a location: a device's, or on no one device (host, host NUMA),
 * which every device reaches. */
static int tag_of_location(const CUmemLocation *at)
{
	int tag = at->type == CU_MEM_LOCATION_TYPE_DEVICE ? tag_of_device(at->id) : 0;
	return tag ? tag : TAG_ANY;
}

/* What the driver says of the allocation holding address a, in one call. */
struct facts {
	CUmemorytype type;
	int ordinal;
	unsigned int managed;
	CUdeviceptr start;
	size_t size;
};

static int ask(uintptr_t a, struct facts *f)
{
	CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				       CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
				       CU_POINTER_ATTRIBUTE_IS_MANAGED,
				       CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
				       CU_POINTER_ATTRIBUTE_RANGE_SIZE};
	void *data[] = {&f->type, &f->ordinal, &f->managed, &f->start, &f->size};
	*f = (struct facts){.ordinal = -1};
	return a && cg_call.cuPointerGetAttributes &&
	       cg_call.cuPointerGetAttributes(5, attrs, data, (CUdeviceptr)a) == CUDA_SUCCESS;
}

/* The tag of the memory f describes if it is device memory, else 0. */
static int device_tag(const struct facts *f)
{
	if (f->managed)
		return TAG_ANY;
	return f->type == CU_MEMORYTYPE_DEVICE ? tag_of_device(f->ordinal) : 0;
}

/* What the driver says about an address nobody told us about, learned for
 * its granule until that memory goes. */
static int ask_driver(uintptr_t a)
{
	struct facts f;
	uintptr_t g = a >> SHIFT;
	const unsigned long before = atomic_load(&appeared);
	int tag = ask(a, &f) ? device_tag(&f) : 0;
	if (!tag) {
		/* Memory mapped there while the driver was asked (another
		 * thread's cuMemMap) may be missing from its answer: the entry
		 * is taken back if anything appeared meanwhile.  Sequentially
		 * consistent with uncache(): its clearing then lands after
		 * this store, or its count is seen by the load after it. */
		atomic_store(&negative[g % NEG], g + 1);
		uintptr_t mine = g + 1;
		if (atomic_load(&appeared) != before)
			atomic_compare_exchange_strong(&negative[g % NEG], &mine, 0);
		return CG_MEM_NONE;
	}
	tag_range(g << SHIFT, (size_t)1 << SHIFT, tag, LEARNED);
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

void cg_memory_on_fork(void)
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

/* Device memory of ctx, its owner (a module domain: what a green context
 * allocates is its primary context's, and outlives it). */
static void allocated(uintptr_t base, size_t size, CUcontext ctx)
{
	remember(base, size, tag_of_ctx(ctx), ONE, ctx, NULL);
}

/* Managed and pinned host memory is reachable from every device (UVA). */
static void everywhere(uintptr_t base, size_t size)
{
	remember(base, size, TAG_ANY, ONE, cg_owner_ctx(), NULL);
}

/* A pool may live on another device than the stream, or in host memory,
 * which every device reaches: ask the driver.  A host pool's allocation
 * names a device ordinal all the same (measured on an H200: the allocating
 * device's), so the memory type decides.  Memory on the stream's device is
 * its context's; whose other memory is, is not known here. */
static void pooled(CUdeviceptr p, size_t size, CUcontext ctx)
{
	struct facts f;
	int tag = 0, own = tag_of_ctx(ctx);
	if (ask(p, &f))
		tag = f.type == CU_MEMORYTYPE_HOST ? TAG_ANY : tag_of_device(f.ordinal);
	tag = tag ? tag : own;
	remember(p, size, tag, ONE, tag == own ? ctx : NULL, NULL);
}

CG_AFTER(cuMemAlloc, allocated(CG_OUT(dptr), bytesize, cg_owner_ctx()))
CG_AFTER(cuMemAllocPitch, allocated(CG_OUT(dptr), pPitch ? *pPitch * Height : 0, cg_owner_ctx()))
/* Stream-ordered allocations come from the stream's device's pool. */
CG_AFTER(cuMemAllocAsync, allocated(CG_OUT(dptr), bytesize, cg_stream_domain(hStream)))
CG_AFTER(cuMemAllocFromPoolAsync, pooled(CG_OUT(dptr), bytesize, cg_stream_domain(hStream)))
CG_AFTER(cuMemAllocManaged, everywhere(CG_OUT(dptr), bytesize))
CG_AFTER(cuMemHostAlloc, everywhere(CG_OUT(pp), bytesize))
CG_AFTER(cuMemAllocHost, everywhere(CG_OUT(pp), bytesize))
CG_AFTER(cuMemHostRegister, everywhere((uintptr_t)p, bytesize))

/* Memory no hook saw appear (allocated or imported past the hooks) goes:
 * what was learned of its range goes too, asked of the driver while the
 * memory still exists.  Other such memory in those granules, or an IPC
 * mapping a close leaves open (the driver counts opens of one handle),
 * costs its next launch one lookup. */
static void unlearn(uintptr_t p)
{
	struct facts f;
	if (ask(p, &f))
		untag_range(f.start, f.size, LEARNED);
}

/* async: the stream of a stream-ordered free, else NULL.  A free captured
 * into a graph happens when the graph runs: no driver question is added to
 * the capture (README, operands), so what was learned of that memory
 * outlives it, until a hook or an IPC open tags its granules anew. */
static void freed(uintptr_t p, const CUstream *async)
{
	if (p && !forget(p) && !(async && cg_capturing(*async)))
		unlearn(p);
}

/* Unpublish before the real free: the driver may hand the range out again
 * at once on another thread. */
CG_BEFORE(cuMemFree, freed(dptr, NULL))
CG_BEFORE(cuMemFreeAsync, freed(dptr, &hStream))
CG_BEFORE(cuMemFreeHost, forget((uintptr_t)p))
CG_BEFORE(cuMemHostUnregister, forget((uintptr_t)p))

/* Memory another process shares (torch.multiprocessing, weights passed
 * between processes, a pool's pointer) is learned as it is mapped, its
 * whole range: the first launch then asks nothing, and no granule cached
 * as not device memory hides it.  Recorded as the current context's: an
 * IPC mapping goes with it.  A pool's import outlives it (measured, H200,
 * driver 580), and is forgotten there all the same: a launch's lookup
 * learns it back, where keeping it could name a device for addresses a
 * mapping we never see ended has handed on. */
static void opened(uintptr_t p)
{
	struct facts f;
	int tag = ask(p, &f) ? device_tag(&f) : 0;
	if (tag)
		remember(f.start, f.size, tag, LEARNED, cg_owner_ctx(), NULL);
}

CG_AFTER(cuIpcOpenMemHandle, opened(CG_OUT(pdptr)))
CG_BEFORE(cuIpcCloseMemHandle, freed(dptr, NULL))
CG_AFTER(cuMemPoolImportPointer, opened(CG_OUT(ptr_out)))
/* Another API's memory (Vulkan's, another process's) is imported into the
 * current context, and a buffer mapped onto it is that context's device
 * memory until cuMemFree or the context's end. */
CG_AFTER(cuExternalMemoryGetMappedBuffer,
	 allocated(CG_OUT(devPtr), bufferDesc ? bufferDesc->size : 0, cg_owner_ctx()))

/* A graph's allocation node fixes its address when it is made, on the
 * device its pool names, in no one context (the graph may be launched in
 * any); each launch of the graph maps the memory there again.  It is
 * recorded from the node on, and taken back by the first of: a free node
 * for it (as a captured cuMemFreeAsync, which makes one, is: past a free
 * node in its own graph only that graph's nodes, checked as they were set,
 * may use the address); cuMemFree[Async] of it (freed(), by its base); its
 * graph's destruction (a moved child's: its parent's), which ends the
 * node's hold on the address; any
 * context's end (as all memory of no known context).  Memory still
 * allocated then (a graph's end frees none; another graph's free node
 * frees when that graph runs) is the driver's to name: a launch's lookup
 * learns it.  Taken back early, it costs a lookup; kept past the node, it
 * could name a device for addresses the driver has handed to other memory. */
static void graph_allocated(CUgraph graph, uintptr_t p, size_t size, const CUmemLocation *at)
{
	remember(p, size, tag_of_location(at), ONE, NULL, graph);
}

#if CUDA_VERSION >= 12090
struct move {
	CUgraph from, to;
};

/* Under the table's lock, where ended() reads a->graph too. */
static int moved(void *val, const void *arg)
{
	const struct move *m = arg;
	struct alloc *a = val;
	if (a->graph == m->from)
		a->graph = m->to;
	return 0;
}
#endif

void cg_memory_node_added(CUgraph graph, const CUgraphNodeParams *p)
{
	if (p && p->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
		graph_allocated(graph, p->alloc.dptr, p->alloc.bytesize, &p->alloc.poolProps.location);
	else if (p && p->type == CU_GRAPH_NODE_TYPE_MEM_FREE)
		forget(p->free.dptr);
#if CUDA_VERSION >= 12090 /* the headers that name the move (XLA's command buffers make them) */
	/* A child graph moved into its parent (the only way one with memory
	 * nodes may be added) goes when the parent does, with no
	 * cuGraphDestroy of its own: its nodes' memory becomes the parent's. */
	else if (p && p->type == CU_GRAPH_NODE_TYPE_GRAPH && p->graph.ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE)
		cg_table_sweep(&allocs, moved, &(struct move){p->graph.graph, graph});
#endif
}

CG_AFTER(cuGraphAddMemAllocNode,
	 if (nodeParams) graph_allocated(hGraph, nodeParams->dptr, nodeParams->bytesize,
					 &nodeParams->poolProps.location))
CG_AFTER(cuGraphAddMemFreeNode, forget(dptr))
/* Before the graph goes: its handle may come back at once for another. */
CG_BEFORE(cuGraphDestroy, if (hGraph) end(NULL, hGraph))

/* Virtual memory management (PyTorch's expandable segments): a physical
 * handle has a device; mapping it gives an address range that device.  A
 * handle stays known while the program holds a reference to it: the one
 * cuMemCreate or an import gives, and one per cuMemRetainAllocationHandle
 * (NCCL's free retains and releases one around its unmap), each
 * cuMemRelease giving one back.  A mapping keeps the memory, not the
 * handle: once released it can be mapped again only after a retain, which
 * hands back the same handle. */
static void created(const CUmemGenericAllocationHandle *handle, const CUmemAllocationProp *prop)
{
	if (!handle || !prop || !*handle)
		return;
	uintptr_t tag = (uintptr_t)tag_of_location(&prop->location);
	pthread_mutex_lock(&lock);
	cg_table_put(&handles, (uintptr_t)*handle, (void *)(tag + HANDLE_REF));
	pthread_mutex_unlock(&lock);
}

/* A handle another process exported: the driver says where its memory is. */
static void imported(const CUmemGenericAllocationHandle *handle)
{
	CUmemAllocationProp prop;
	if (handle && cg_call.cuMemGetAllocationPropertiesFromHandle &&
	    cg_call.cuMemGetAllocationPropertiesFromHandle(&prop, *handle) == CUDA_SUCCESS)
		created(handle, &prop);
}

/* One more reference; a handle not known here (released before, or made
 * past the hooks) is asked of the driver.  (Two threads retaining one such
 * handle at once may count one reference: the handle is then forgotten a
 * release early, and its next mapping left to the fallback below.) */
static void retained(const CUmemGenericAllocationHandle *handle)
{
	if (!handle || !*handle)
		return;
	pthread_mutex_lock(&lock);
	const uintptr_t v = (uintptr_t)cg_table_get(&handles, (uintptr_t)*handle);
	if (v)
		cg_table_put(&handles, (uintptr_t)*handle, (void *)(v + HANDLE_REF));
	pthread_mutex_unlock(&lock);
	if (!v)
		imported(handle);
}

/* Before the driver's release: once released, the handle's value may come
 * back at once for another thread's new memory. */
static void released(CUmemGenericAllocationHandle handle)
{
	pthread_mutex_lock(&lock);
	const uintptr_t v = (uintptr_t)cg_table_get(&handles, (uintptr_t)handle);
	if (v >= 2 * HANDLE_REF)
		cg_table_put(&handles, (uintptr_t)handle, (void *)(v - HANDLE_REF));
	else if (v)
		cg_table_del(&handles, (uintptr_t)handle);
	pthread_mutex_unlock(&lock);
}

/* A handle unknown here (one the driver would not describe) leaves the
 * range to the fallback, which no granule cached as not device memory
 * may then hide it from. */
static void mapped(CUdeviceptr ptr, size_t size, CUmemGenericAllocationHandle handle)
{
	uintptr_t tag = (uintptr_t)cg_table_get(&handles, (uintptr_t)handle) % HANDLE_REF;
	if (tag)
		tag_range(ptr, size, (int)tag, ONE);
	else
		uncache(ptr, size);
}

/* Nothing stays mapped in an unmapped or freed range's granules (VMM maps
 * whole granules), whoever tagged them. */
static void emptied(CUdeviceptr ptr, size_t size)
{
	pthread_mutex_lock(&lock);
	for (uintptr_t g = ptr >> SHIFT; size && g <= (ptr + size - 1) >> SHIFT; g++) {
		cg_table_del(&granules, g);
		set_tag(g, 0);
	}
	pthread_mutex_unlock(&lock);
}

CG_AFTER(cuMemCreate, created(handle, prop))
CG_AFTER(cuMemImportFromShareableHandle, imported(handle))
CG_AFTER(cuMemRetainAllocationHandle, retained(handle))
CG_BEFORE(cuMemRelease, released(handle))
CG_AFTER(cuMemMap, mapped(ptr, size, handle))
CG_BEFORE(cuMemUnmap, emptied(ptr, size))
CG_BEFORE(cuMemAddressFree, emptied(ptr, size))
