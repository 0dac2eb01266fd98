/* The allocation hooks: what the program allocates, frees, maps, opens
 * and imports, told to the address map (addresses.c).  A hook that frees
 * unpublishes before the real call: the driver may hand the range out
 * again at once on another thread. */
#include <pthread.h>

#include "track.h"
#include "addresses.h"
#include "../report/report.h"

/* VMM physical handle -> its tag + HANDLE_REF x the references the
 * program holds on it (created(), below). */
static struct cg_table handles = CG_TABLE_INIT;
#define HANDLE_REF ((uintptr_t)1 << 16)
static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;

void cg_allocations_on_fork(void)
{
	pthread_mutex_init(&handles_lock, NULL);
	cg_table_reset(&handles);
}

/* Device memory of ctx, its owner (a module domain: what a green context
 * allocates is its primary context's, and outlives it). */
static void allocated(uintptr_t base, size_t size, CUcontext ctx)
{
	cg_mem_remember(base, size, cg_mem_tag_of_ctx(ctx), CG_MEM_ONE, ctx, NULL);
}

/* Managed and pinned host memory is reachable from every device (UVA). */
static void everywhere(uintptr_t base, size_t size)
{
	cg_mem_remember(base, size, CG_MEM_TAG_ANY, CG_MEM_ONE, cg_owner_ctx(), NULL);
}

/* A pool may live on another device than the stream, or in host memory,
 * which every device reaches: ask the driver.  A host pool's allocation
 * names a device ordinal all the same (measured on an H200: the allocating
 * device's), so the memory type decides.  Memory on the stream's device is
 * its context's; whose other memory is, is not known here. */
static void pooled(CUdeviceptr p, size_t size, CUcontext ctx)
{
	struct cg_mem_facts f;
	int tag = 0, own = cg_mem_tag_of_ctx(ctx);
	if (cg_mem_ask(p, &f))
		tag = f.type == CU_MEMORYTYPE_HOST ? CG_MEM_TAG_ANY : cg_mem_tag_of_device(f.ordinal);
	tag = tag ? tag : own;
	cg_mem_remember(p, size, tag, CG_MEM_ONE, tag == own ? ctx : NULL, NULL);
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
	struct cg_mem_facts f;
	if (cg_mem_ask(p, &f))
		cg_mem_untag_range(f.start, f.size, CG_MEM_LEARNED);
}

/* async: the stream of a stream-ordered free, else NULL.  A free captured
 * into a graph happens when the graph runs: no driver question is added to
 * the capture (README, operands), so what was learned of that memory
 * outlives it, until a hook or an IPC open tags its granules anew. */
static void freed(uintptr_t p, const CUstream *async)
{
	if (p && !cg_mem_forget(p) && !(async && cg_capturing(*async)))
		unlearn(p);
}

/* Unpublish before the real free: the driver may hand the range out again
 * at once on another thread. */
CG_BEFORE(cuMemFree, freed(dptr, NULL))
CG_BEFORE(cuMemFreeAsync, freed(dptr, &hStream))
CG_BEFORE(cuMemFreeHost, cg_mem_forget((uintptr_t)p))
CG_BEFORE(cuMemHostUnregister, cg_mem_forget((uintptr_t)p))

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
	struct cg_mem_facts f;
	int tag = cg_mem_ask(p, &f) ? cg_mem_device_tag(&f) : 0;
	if (tag)
		cg_mem_remember(f.start, f.size, tag, CG_MEM_LEARNED, cg_owner_ctx(), NULL);
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
	cg_mem_remember(p, size, cg_mem_tag_of_location(at), CG_MEM_ONE, NULL, graph);
}


void cg_memory_node_added(CUgraph graph, const CUgraphNodeParams *p)
{
	if (p && p->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
		graph_allocated(graph, p->alloc.dptr, p->alloc.bytesize, &p->alloc.poolProps.location);
	else if (p && p->type == CU_GRAPH_NODE_TYPE_MEM_FREE)
		cg_mem_forget(p->free.dptr);
#if CUDA_VERSION >= 12090 /* the headers that name the move (XLA's command buffers make them) */
	/* A child graph moved into its parent (the only way one with memory
	 * nodes may be added) goes when the parent does, with no
	 * cuGraphDestroy of its own: its nodes' memory becomes the parent's. */
	else if (p && p->type == CU_GRAPH_NODE_TYPE_GRAPH && p->graph.ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE)
		cg_mem_graph_moved(p->graph.graph, graph);
#endif
}

CG_AFTER(cuGraphAddMemAllocNode,
	 if (nodeParams) graph_allocated(hGraph, nodeParams->dptr, nodeParams->bytesize,
					 &nodeParams->poolProps.location))
CG_AFTER(cuGraphAddMemFreeNode, cg_mem_forget(dptr))
/* Before the graph goes: its handle may come back at once for another. */
CG_BEFORE(cuGraphDestroy, if (hGraph) cg_mem_end(NULL, hGraph))

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
	uintptr_t tag = (uintptr_t)cg_mem_tag_of_location(&prop->location);
	pthread_mutex_lock(&handles_lock);
	cg_table_put(&handles, (uintptr_t)*handle, (void *)(tag + HANDLE_REF));
	pthread_mutex_unlock(&handles_lock);
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
	pthread_mutex_lock(&handles_lock);
	const uintptr_t v = (uintptr_t)cg_table_get(&handles, (uintptr_t)*handle);
	if (v)
		cg_table_put(&handles, (uintptr_t)*handle, (void *)(v + HANDLE_REF));
	pthread_mutex_unlock(&handles_lock);
	if (!v)
		imported(handle);
}

/* Before the driver's release: once released, the handle's value may come
 * back at once for another thread's new memory. */
static void released(CUmemGenericAllocationHandle handle)
{
	pthread_mutex_lock(&handles_lock);
	const uintptr_t v = (uintptr_t)cg_table_get(&handles, (uintptr_t)handle);
	if (v >= 2 * HANDLE_REF)
		cg_table_put(&handles, (uintptr_t)handle, (void *)(v - HANDLE_REF));
	else if (v)
		cg_table_del(&handles, (uintptr_t)handle);
	pthread_mutex_unlock(&handles_lock);
}

/* A handle unknown here (one the driver would not describe) leaves the
 * range to the fallback, which no granule cached as not device memory
 * may then hide it from. */
static void mapped(CUdeviceptr ptr, size_t size, CUmemGenericAllocationHandle handle)
{
	uintptr_t tag = (uintptr_t)cg_table_get(&handles, (uintptr_t)handle) % HANDLE_REF;
	if (tag)
		cg_mem_tag_range(ptr, size, (int)tag, CG_MEM_ONE);
	else
		cg_mem_uncache(ptr, size);
}

/* Nothing stays mapped in an unmapped or freed range's granules (VMM maps
 * whole granules), whoever tagged them. */
static void emptied(CUdeviceptr ptr, size_t size)
{
	cg_mem_unmap(ptr, size);
}

CG_AFTER(cuMemCreate, created(handle, prop))
CG_AFTER(cuMemImportFromShareableHandle, imported(handle))
CG_AFTER(cuMemRetainAllocationHandle, retained(handle))
CG_BEFORE(cuMemRelease, released(handle))
CG_AFTER(cuMemMap, mapped(ptr, size, handle))
CG_BEFORE(cuMemUnmap, emptied(ptr, size))
CG_BEFORE(cuMemAddressFree, emptied(ptr, size))
