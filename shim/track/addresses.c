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
#include "addresses.h"
#include "../report/report.h"

enum { SHIFT = CG_MEM_SHIFT, TAG_ANY = CG_MEM_TAG_ANY, NEG = 4096 };
#define TAGS_BYTES ((size_t)1 << (47 - SHIFT))

/* The readers' tags (shim.h); NULL until the first allocation, or for
 * good if the reservation failed (then the table below answers). */
_Atomic(cg_tag *) cg_granule_tags;
/* Granule -> (allocations a hook saw covering it) * CG_MEM_ONE | CG_MEM_LEARNED | tag,
 * tag = device + 1 or TAG_ANY for memory every device may reach (managed,
 * host-mapped).  CG_MEM_LEARNED: the driver named the tag for memory no hook saw
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
	uintptr_t add;             /* what it added to its granules: CG_MEM_ONE, CG_MEM_LEARNED */
	CUcontext owner;           /* NULL: not known; any context's end takes it */
	CUgraph graph;             /* a graph allocation node's graph, else NULL */
	struct alloc *next;        /* on the list of a context's or graph's end */
};
static struct cg_table allocs = CG_TABLE_INIT;
/* Granules known not to be device memory (direct-mapped, lossy), and how
 * many times memory has appeared: a lookup's "none" is cached only if no
 * memory appeared while the driver was asked. */
static _Atomic uintptr_t negative[NEG];
static _Atomic unsigned long appeared;
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

/* Memory appeared in [base, base + size): no granule of it stays cached
 * as not device memory. */
void cg_mem_uncache(uintptr_t base, size_t size)
{
	atomic_fetch_add(&appeared, 1);
	for (uintptr_t g = base >> SHIFT; size && g <= (base + size - 1) >> SHIFT; g++)
		atomic_store(&negative[g % NEG], 0);
}

/* Tags [base, base + size): add is CG_MEM_ONE for an allocation a hook saw,
 * CG_MEM_LEARNED for memory the driver told of. */
void cg_mem_tag_range(uintptr_t base, size_t size, int tag, uintptr_t add)
{
	if (!base || !size)
		return;
	pthread_mutex_lock(&lock);
	for (uintptr_t g = base >> SHIFT; g <= (base + size - 1) >> SHIFT; g++) {
		uintptr_t v = (uintptr_t)cg_table_get(&granules, g);
		uintptr_t kept = v && (int)(v & 255) == tag ? v : (uintptr_t)tag;
		cg_table_put(&granules, g, (void *)(add == CG_MEM_LEARNED ? kept | CG_MEM_LEARNED : kept + CG_MEM_ONE));
		set_tag(g, tag);
	}
	pthread_mutex_unlock(&lock);
	cg_mem_uncache(base, size);
}

/* Takes back what tag_range added; a granule left with neither a hook's
 * allocation nor a learned tag is untagged. */
void cg_mem_untag_range(uintptr_t base, size_t size, uintptr_t drop)
{
	if (!base || !size)
		return;
	pthread_mutex_lock(&lock);
	for (uintptr_t g = base >> SHIFT; g <= (base + size - 1) >> SHIFT; g++) {
		uintptr_t v = (uintptr_t)cg_table_get(&granules, g);
		if (drop == CG_MEM_LEARNED ? !(v & CG_MEM_LEARNED) : v < CG_MEM_ONE)
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
	cg_mem_untag_range(a->base, a->size, a->add);
	free(a);
	return 1;
}

/* A hook saw [base, base + size) appear in owner's context (add: see
 * tag_range), for graph's allocation node if graph is set.  A record
 * already at base is of memory that went out of sight (freed past the
 * hooks): it is dropped.  Without room for a record the memory is left to
 * the fallback, which learns it. */
void cg_mem_remember(uintptr_t base, size_t size, int tag, uintptr_t add, CUcontext owner,
		     CUgraph graph)
{
	struct alloc *a = base ? malloc(sizeof *a) : NULL;
	if (!a)
		return;
	*a = (struct alloc){base, size, add, owner, graph, NULL};
	drop(cg_table_put(&allocs, base, a));
	cg_mem_tag_range(base, size, tag, add);
}

/* Whether base was memory a hook saw appear (now untagged). */
int cg_mem_forget(uintptr_t base)
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

void cg_mem_end(CUcontext ctx, CUgraph graph)
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
	cg_mem_end(ctx, NULL);
}

/* Device d's tag; 0 for no device (or one past what a tag can name). */
int cg_mem_tag_of_device(int d)
{
	return d >= 0 && d < TAG_ANY - 1 ? d + 1 : 0;
}

int cg_mem_tag_of_ctx(CUcontext ctx)
{
	return cg_mem_tag_of_device(cg_ctx_device(ctx));
}

/* Memory at a location: a device's, or on no one device (host, host NUMA),
 * which every device reaches. */
int cg_mem_tag_of_location(const CUmemLocation *at)
{
	int tag = at->type == CU_MEM_LOCATION_TYPE_DEVICE ? cg_mem_tag_of_device(at->id) : 0;
	return tag ? tag : TAG_ANY;
}

int cg_mem_ask(uintptr_t a, struct cg_mem_facts *f)
{
	CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				       CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
				       CU_POINTER_ATTRIBUTE_IS_MANAGED,
				       CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
				       CU_POINTER_ATTRIBUTE_RANGE_SIZE};
	void *data[] = {&f->type, &f->ordinal, &f->managed, &f->start, &f->size};
	*f = (struct cg_mem_facts){.ordinal = -1};
	return a && cg_call.cuPointerGetAttributes &&
	       cg_call.cuPointerGetAttributes(5, attrs, data, (CUdeviceptr)a) == CUDA_SUCCESS;
}

/* The tag of the memory f describes if it is device memory, else 0. */
int cg_mem_device_tag(const struct cg_mem_facts *f)
{
	if (f->managed)
		return TAG_ANY;
	return f->type == CU_MEMORYTYPE_DEVICE ? cg_mem_tag_of_device(f->ordinal) : 0;
}

/* What the driver says about an address nobody told us about, learned for
 * its granule until that memory goes. */
static int ask_driver(uintptr_t a)
{
	struct cg_mem_facts f;
	uintptr_t g = a >> SHIFT;
	const unsigned long before = atomic_load(&appeared);
	int tag = cg_mem_ask(a, &f) ? cg_mem_device_tag(&f) : 0;
	if (!tag) {
		/* Memory mapped there while the driver was asked (another
		 * thread's cuMemMap) may be missing from its answer: the entry
		 * is taken back if anything appeared meanwhile.  Sequentially
		 * consistent with cg_mem_uncache(): its clearing then lands after
		 * this store, or its count is seen by the load after it. */
		atomic_store(&negative[g % NEG], g + 1);
		uintptr_t mine = g + 1;
		if (atomic_load(&appeared) != before)
			atomic_compare_exchange_strong(&negative[g % NEG], &mine, 0);
		return CG_MEM_NONE;
	}
	cg_mem_tag_range(g << SHIFT, (size_t)1 << SHIFT, tag, CG_MEM_LEARNED);
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
	for (int i = 0; i < NEG; i++)
		atomic_store_explicit(&negative[i], 0, memory_order_relaxed);
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

void cg_mem_graph_moved(CUgraph from, CUgraph to)
{
	cg_table_sweep(&allocs, moved, &(struct move){from, to});
}
#endif

void cg_mem_unmap(uintptr_t base, size_t size)
{
	pthread_mutex_lock(&lock);
	for (uintptr_t g = base >> SHIFT; size && g <= (base + size - 1) >> SHIFT; g++) {
		cg_table_del(&granules, g);
		set_tag(g, 0);
	}
	pthread_mutex_unlock(&lock);
}
