/* The address map's write side (shim/track/addresses.c), for the allocation
 * hooks (shim/track/allocations.c); readers use track.h's cg_mem_device. */
#ifndef CTXGUARD_ADDRESSES_H
#define CTXGUARD_ADDRESSES_H

#include "track.h"

#pragma GCC visibility push(hidden)

/* What a granule's count adds: CG_MEM_ONE per allocation a hook saw,
 * CG_MEM_LEARNED for memory the driver told of. */
enum { CG_MEM_LEARNED = 1 << 8, CG_MEM_ONE = 1 << 9 };

/* A hook saw [base, base + size) appear in owner's context (add: see
 * above), for graph's allocation node if graph is set. */
void cg_mem_remember(uintptr_t base, size_t size, int tag, uintptr_t add, CUcontext owner,
		     CUgraph graph);
/* Whether base was memory a hook saw appear (now untagged). */
int cg_mem_forget(uintptr_t base);
/* What went with context ctx, or with graph when set. */
void cg_mem_end(CUcontext ctx, CUgraph graph);
/* Tags [base, base + size) with tag, adding add; takes back what was
 * added; no granule of it stays cached as not device memory; nothing stays
 * mapped in its granules, whoever tagged them. */
void cg_mem_tag_range(uintptr_t base, size_t size, int tag, uintptr_t add);
void cg_mem_untag_range(uintptr_t base, size_t size, uintptr_t drop);
void cg_mem_uncache(uintptr_t base, size_t size);
void cg_mem_unmap(uintptr_t base, size_t size);
#if CUDA_VERSION >= 12090
/* A child graph's allocations now belong to the graph it moved into. */
void cg_mem_graph_moved(CUgraph from, CUgraph to);
#endif

/* The tag of device d (0: none a tag can name), of ctx's device, of memory
 * at a location (a device's, else every device's: host, host NUMA). */
int cg_mem_tag_of_device(int d);
int cg_mem_tag_of_ctx(CUcontext ctx);
int cg_mem_tag_of_location(const CUmemLocation *at);

/* What the driver says of the allocation holding address a, in one call
 * (cg_mem_ask: whether it answered), and its tag if it is device memory,
 * else 0. */
struct cg_mem_facts {
	CUmemorytype type;
	int ordinal;
	unsigned int managed;
	CUdeviceptr start;
	size_t size;
};
int cg_mem_ask(uintptr_t a, struct cg_mem_facts *f);
int cg_mem_device_tag(const struct cg_mem_facts *f);

#pragma GCC visibility pop

#endif
