/*
 * Graph memory nodes' allocations (graph.c makes the nodes). An allocation node fixes its
 * address when it is made: whole granules, first fit in a range of their own, on the device
 * its pool properties name, reachable from that device and those its access descriptors
 * grant. The memory exists (a range of the allocation table, owned by no context) from a
 * launch reaching the node until it is freed: by a free node a launch reaches, cuMemFree or
 * cuMemFreeAsync (not of memory a free node of its own graph frees), or, under
 * CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH, the next launch. The address stays the
 * node's while its graph or an instantiation of it lives, or the memory does (destroying a
 * graph frees nothing): only then can another node be given it.
 */
#include "fake.h"

struct gmem {
	CUdeviceptr base;
	size_t size;
	CUdevice dev;
	unsigned access; /* bit d: device d may access it */
	CUgraph graph;	 /* the allocation node's, NULL once destroyed */
	CUgraph freer;	 /* a graph with a free node for it, or NULL */
	unsigned execs;	 /* instantiations holding the allocation node */
	bool live;
};

static struct gmem *gm;
static size_t ngm, capgm;

static struct gmem *find(CUdeviceptr p)
{
	for (size_t i = 0; i < ngm; i++)
		if (gm[i].base == p)
			return &gm[i];
	return NULL;
}

/* The lowest granule of the range with room for size bytes no node holds. */
static CUdeviceptr first_fit(size_t size)
{
	CUdeviceptr p = FAKE_GRAPH_BASE;
	for (bool moved = true; moved;) {
		moved = false;
		for (size_t i = 0; i < ngm; i++) {
			if (gm[i].base >= p + size || p >= gm[i].base + gm[i].size)
				continue;
			p = (gm[i].base + gm[i].size + FAKE_GRANULARITY - 1) / FAKE_GRANULARITY *
			    FAKE_GRANULARITY;
			moved = true;
		}
	}
	return p;
}

/* The address goes back to the range once nothing holds it. */
static void release_unheld(struct gmem *m)
{
	if (!m->graph && !m->execs && !m->live)
		*m = gm[--ngm];
}

static CUresult access_bits(const CUmemAccessDesc *acc, size_t nacc, unsigned *bits)
{
	if ((nacc && !acc) || nacc > (size_t)fake_ndev)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < nacc; i++) {
		if (!fake_access_desc_valid(&acc[i]))
			return CUDA_ERROR_INVALID_VALUE;
		if (acc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE)
			*bits |= 1u << acc[i].location.id;
	}
	return CUDA_SUCCESS;
}

/* Device pools only; no handle types ("IPC is not supported"). */
CUresult fake_gmem_reserve(CUgraph g, const CUmemPoolProps *props, const CUmemAccessDesc *acc,
			   size_t nacc, size_t size, CUdeviceptr *out)
{
	if (!props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
	    props->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
	    !fake_dev_valid(props->location.id) || props->handleTypes != CU_MEM_HANDLE_TYPE_NONE ||
	    size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	struct gmem m = {.size = size, .dev = props->location.id, .graph = g};
	m.access = 1u << m.dev;
	CUresult rc = access_bits(acc, nacc, &m.access);
	if (rc != CUDA_SUCCESS)
		return rc;
	m.base = first_fit(size);
	if (size > FAKE_REGION_SPAN - (m.base - FAKE_GRAPH_BASE))
		return CUDA_ERROR_OUT_OF_MEMORY;
	struct gmem *grown = fake_grow(gm, &capgm, ngm + 1, sizeof(*gm));
	if (!grown)
		return CUDA_ERROR_OUT_OF_MEMORY;
	gm = grown;
	gm[ngm++] = m;
	*out = m.base;
	return CUDA_SUCCESS;
}

/* Once per allocation, in its own graph or one other: an address no allocation node
 * returned, or one already freed by a graph, is refused. */
CUresult fake_gmem_free_node(CUgraph g, CUdeviceptr p)
{
	struct gmem *m = find(p);
	if (!m || m->freer)
		return CUDA_ERROR_INVALID_VALUE;
	m->freer = g;
	return CUDA_SUCCESS;
}

void fake_gmem_hold(CUdeviceptr p, int delta)
{
	struct gmem *m = find(p);
	if (!m)
		return;
	m->execs = delta < 0 ? m->execs - 1 : m->execs + 1;
	release_unheld(m);
}

bool fake_gmem_live(CUdeviceptr p)
{
	const struct gmem *m = find(p);
	return m && m->live;
}

/* Allocating live memory, or freeing memory not allocated, is refused. */
CUresult fake_gmem_map(CUdeviceptr p, bool live)
{
	struct gmem *m = find(p);
	if (!m || m->live == live)
		return CUDA_ERROR_INVALID_VALUE;
	if (live) {
		struct fake_alloc a = {.base = m->base, .size = m->size, .kind = FAKE_MEM_GRAPH,
				       .dev = m->dev, .access = m->access};
		CUresult rc = fake_mem_add(&a);
		if (rc != CUDA_SUCCESS)
			return rc;
	} else {
		fake_mem_remove(p);
	}
	m->live = live;
	release_unheld(m);
	return CUDA_SUCCESS;
}

/* Memory a free node of its own graph frees "cannot be freed outside the owning graph". */
CUresult fake_gmem_free(CUdeviceptr p)
{
	const struct gmem *m = find(p);
	if (m && m->graph && m->freer == m->graph)
		return CUDA_ERROR_INVALID_VALUE;
	return fake_gmem_map(p, false);
}

void fake_gmem_graph_moved(CUgraph from, CUgraph to)
{
	for (size_t i = 0; i < ngm; i++) {
		if (gm[i].freer == from)
			gm[i].freer = to;
		if (gm[i].graph == from)
			gm[i].graph = to;
	}
}

void fake_gmem_graph_gone(CUgraph g)
{
	for (size_t i = ngm; i-- > 0;) {
		if (gm[i].freer == g)
			gm[i].freer = NULL;
		if (gm[i].graph == g) {
			gm[i].graph = NULL;
			release_unheld(&gm[i]);
		}
	}
}
