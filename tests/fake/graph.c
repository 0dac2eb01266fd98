/*
 * Graphs of kernel nodes (and empty nodes, which only order others, memory nodes, whose
 * allocation a launch makes and frees: graphmem.c, and child graphs moved into their
 * parent). A kernel node copies its launch by value (parameter values included) and runs in
 * its own context: the function's context, or for a CUkernel the context given in the node
 * parameters (NULL: the one current when the node was set).
 */
#include <stdlib.h>
#include <string.h>

#include "fake.h"

struct knode {
	CUgraphNodeType type; /* KERNEL, EMPTY, MEM_ALLOC, MEM_FREE or GRAPH */
	CUdeviceptr mem;      /* a memory node's allocation */
	CUgraph child;        /* a child graph node's graph, moved into the parent */
	CUfunction func;      /* the CUfunction, or a CUkernel cast to one */
	CUkernel kern;	      /* set when the node runs a CUkernel */
	CUcontext ctx;
	struct fake_dims dims;
	struct fake_kdesc desc;
	unsigned char *args;
	void **argp; /* pointers into args, handed out by the GetParams queries */
};

struct CUgraphNode_st {
	struct fake_hdr h;
	CUgraph graph;
	struct knode k;
};

struct CUgraph_st {
	struct fake_hdr h;
	CUgraphNode *nodes; /* insertion order, which is a topological order */
	size_t n, cap;
	CUgraph owner; /* the parent a child graph was moved into, which destroys it */
};

struct CUgraphExec_st {
	struct fake_hdr h;
	CUgraphNode *src; /* the graph node each copy came from */
	struct knode *k;
	size_t n;
	unsigned long long flags; /* cuGraphInstantiateWithFlags' */
};

/* What every kernel-node parameter struct version says. */
struct knode_req {
	CUfunction func;
	CUkernel kern;
	CUcontext ctx;
	struct fake_dims dims;
	void **kernelParams;
	void **extra;
};

/* A node to add: a kernel node (kernel), an empty node, an allocation node (alloc*) or a
 * free node (free). */
struct node_req {
	CUgraphNodeType type;
	const struct knode_req *kernel;
	const CUmemPoolProps *alloc_props;
	const CUmemAccessDesc *alloc_access;
	size_t alloc_naccess, alloc_size;
	CUdeviceptr *alloc_out;
	CUdeviceptr free;
};

static struct fake_pool graph_pool = FAKE_POOL_INIT(struct CUgraph_st);
static struct fake_pool node_pool = FAKE_POOL_INIT(struct CUgraphNode_st);
static struct fake_pool exec_pool = FAKE_POOL_INIT(struct CUgraphExec_st);

/* Reads any version of the kernel node parameters: they all share these fields. */
#define REQ_FROM(p, kern_, ctx_)                                                                   \
	((struct knode_req){                                                                       \
		.func = (p)->func,                                                                 \
		.kern = (kern_),                                                                   \
		.ctx = (ctx_),                                                                     \
		.dims = {.grid = {(p)->gridDimX, (p)->gridDimY, (p)->gridDimZ},                    \
			 .block = {(p)->blockDimX, (p)->blockDimY, (p)->blockDimZ},                \
			 .shared = (p)->sharedMemBytes},                                           \
		.kernelParams = (p)->kernelParams,                                                 \
		.extra = (p)->extra,                                                               \
	})

#define KERNEL_REQ(r) ((struct node_req){.type = CU_GRAPH_NODE_TYPE_KERNEL, .kernel = (r)})
#define FREE_REQ(p) ((struct node_req){.type = CU_GRAPH_NODE_TYPE_MEM_FREE, .free = (p)})
/* Reads either version of the allocation node parameters, which share these fields. */
#define ALLOC_REQ(p)                                                                               \
	((struct node_req){.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC,                                   \
			   .alloc_props = &(p)->poolProps,                                         \
			   .alloc_access = (p)->accessDescs,                                       \
			   .alloc_naccess = (p)->accessDescCount,                                  \
			   .alloc_size = (p)->bytesize,                                            \
			   .alloc_out = &(p)->dptr})

/* A node's launch as the fields all kernel node parameter versions share. */
#define PARAMS_OF(k, func_)                                                                        \
	.func = (func_), .gridDimX = (k)->dims.grid[0], .gridDimY = (k)->dims.grid[1],             \
	.gridDimZ = (k)->dims.grid[2], .blockDimX = (k)->dims.block[0],                            \
	.blockDimY = (k)->dims.block[1], .blockDimZ = (k)->dims.block[2],                          \
	.sharedMemBytes = (k)->dims.shared, .kernelParams = (k)->argp, .extra = NULL

static void knode_free(struct knode *k)
{
	fake_kdesc_free(&k->desc);
	free(k->args);
	free(k->argp);
	memset(k, 0, sizeof(*k));
}

/* Points argp at each parameter inside args. */
static CUresult knode_index_args(struct knode *k)
{
	k->argp = calloc(k->desc.nparams ? k->desc.nparams : 1, sizeof(void *));
	if (!k->argp)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (unsigned i = 0; i < k->desc.nparams; i++)
		k->argp[i] = k->args + k->desc.offset[i];
	return CUDA_SUCCESS;
}

/* Builds a node from a request; *k is left untouched on failure. */
static CUresult knode_make(struct knode *k, const struct knode_req *r)
{
	struct knode n = {.type = CU_GRAPH_NODE_TYPE_KERNEL, .dims = r->dims};
	const struct fake_kdesc *kd;
	const int *attr;
	if (fake_pool_live(&fake_func_pool, r->func)) {
		n.func = r->func;
		n.ctx = r->func->mod->ctx;
		kd = fake_func_desc(r->func);
		attr = r->func->attr;
	} else {
		n.kern = r->func ? (CUkernel)r->func : r->kern;
		if (!fake_pool_live(&fake_kern_pool, n.kern))
			return CUDA_ERROR_INVALID_VALUE;
		n.func = (CUfunction)n.kern;
		n.ctx = r->ctx ? r->ctx : fake_ctx_current();
		kd = fake_kern_desc(n.kern);
		attr = NULL; /* the context's device's, once the context is known usable */
	}
	if (!fake_ctx_usable(n.ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!attr)
		attr = n.kern->attr[n.ctx->dev];
	CUresult rc = fake_launch_check_dims(&n.dims, attr);
	if (rc != CUDA_SUCCESS)
		return rc;
	n.args = malloc(kd->argbytes ? kd->argbytes : 1);
	if (!n.args)
		return CUDA_ERROR_OUT_OF_MEMORY;
	rc = fake_launch_pack(kd, r->kernelParams, r->extra, n.args);
	if (rc == CUDA_SUCCESS)
		rc = fake_kdesc_copy(&n.desc, kd);
	if (rc == CUDA_SUCCESS)
		rc = knode_index_args(&n);
	if (rc != CUDA_SUCCESS) {
		knode_free(&n);
		return rc;
	}
	knode_free(k);
	*k = n;
	return CUDA_SUCCESS;
}

static CUresult knode_copy(struct knode *dst, const struct knode *src)
{
	*dst = *src;
	if (src->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
		fake_gmem_hold(src->mem, 1);
	if (src->type != CU_GRAPH_NODE_TYPE_KERNEL)
		return CUDA_SUCCESS;
	dst->desc = (struct fake_kdesc){0};
	dst->args = malloc(src->desc.argbytes ? src->desc.argbytes : 1);
	dst->argp = NULL;
	CUresult rc =
		dst->args ? fake_kdesc_copy(&dst->desc, &src->desc) : CUDA_ERROR_OUT_OF_MEMORY;
	if (rc == CUDA_SUCCESS) {
		memcpy(dst->args, src->args, src->desc.argbytes);
		rc = knode_index_args(dst);
	}
	if (rc != CUDA_SUCCESS)
		knode_free(dst);
	return rc;
}

/* Runs one node under the launch rules, in the node's context. */
static CUresult knode_run(const struct knode *k)
{
	const struct fake_kdesc *kd;
	const int *attr;
	if (k->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || k->type == CU_GRAPH_NODE_TYPE_MEM_FREE)
		return fake_gmem_map(k->mem, k->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC);
	if (k->type != CU_GRAPH_NODE_TYPE_KERNEL)
		return CUDA_SUCCESS;
	if (!fake_ctx_usable(k->ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (k->ctx->sticky != CUDA_SUCCESS)
		return k->ctx->sticky;
	/* The handle may have been freed and handed out again since the node was set. */
	CUresult rc = fake_launch_resolve(k->func, k->ctx, &kd, &attr);
	return rc == CUDA_SUCCESS ? fake_launch_run(k->ctx, &k->desc, k->args) : rc;
}

CUresult CUDAAPI cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
	FAKE_ENTER();
	if (!phGraph || flags != 0)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	CUgraph g = fake_pool_take(&graph_pool);
	if (!g)
		return fake_leave(CUDA_ERROR_OUT_OF_MEMORY);
	*phGraph = g;
	return fake_leave(CUDA_SUCCESS);
}

/* g and the children moved into it (their nodes are g's by then). */
static void graph_free(CUgraph g)
{
	fake_gmem_graph_gone(g);
	for (size_t i = 0; i < g->n; i++) {
		if (g->nodes[i]->k.child)
			graph_free(g->nodes[i]->k.child);
		knode_free(&g->nodes[i]->k);
		fake_pool_give(&node_pool, g->nodes[i]);
	}
	free(g->nodes);
	fake_pool_give(&graph_pool, g);
}

/* A child moved into a parent is the parent's to destroy. */
CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph)
{
	FAKE_ENTER();
	if (!fake_pool_live(&graph_pool, hGraph) || hGraph->owner)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	graph_free(hGraph);
	return fake_leave(CUDA_SUCCESS);
}

/* Makes fresh node k of graph g as r says. */
static CUresult node_make(struct knode *k, CUgraph g, const struct node_req *r)
{
	CUresult rc = CUDA_SUCCESS;
	switch (r->type) {
	case CU_GRAPH_NODE_TYPE_KERNEL:
		return knode_make(k, r->kernel);
	case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
		rc = fake_gmem_reserve(g, r->alloc_props, r->alloc_access, r->alloc_naccess,
				       r->alloc_size, &k->mem);
		if (rc == CUDA_SUCCESS)
			*r->alloc_out = k->mem;
		break;
	case CU_GRAPH_NODE_TYPE_MEM_FREE:
		rc = fake_gmem_free_node(g, r->free);
		k->mem = r->free;
		break;
	default:
		break;
	}
	k->type = r->type;
	return rc;
}

static CUresult add_node(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps,
			 const struct node_req *r)
{
	if (!out || !fake_pool_live(&graph_pool, g) || (ndeps > 0 && !deps))
		return CUDA_ERROR_INVALID_VALUE;
	/* a moved child takes no memory nodes (the driver's rule and answer,
	 * measured on an H200); the fake, which ran its nodes into the
	 * parent's, takes none at all (the driver takes others) */
	if (g->owner)
		return CUDA_ERROR_NOT_SUPPORTED;
	for (size_t i = 0; i < ndeps; i++)
		if (!fake_pool_live(&node_pool, deps[i]) || deps[i]->graph != g)
			return CUDA_ERROR_INVALID_VALUE;
	CUgraphNode *nodes = fake_grow(g->nodes, &g->cap, g->n + 1, sizeof(*nodes));
	if (!nodes)
		return CUDA_ERROR_OUT_OF_MEMORY;
	g->nodes = nodes;
	CUgraphNode node = fake_pool_take(&node_pool);
	if (!node)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult rc = node_make(&node->k, g, r);
	if (rc != CUDA_SUCCESS) {
		fake_pool_give(&node_pool, node);
		return rc;
	}
	node->graph = g;
	g->nodes[g->n++] = node;
	*out = node;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
				      const CUgraphNode *dependencies, size_t numDependencies,
				      const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	FAKE_ENTER();
	if (!nodeParams)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	struct knode_req r = REQ_FROM(nodeParams, NULL, NULL);
	return fake_leave(add_node(phGraphNode, hGraph, dependencies, numDependencies,
				   &KERNEL_REQ(&r)));
}

CUresult CUDAAPI cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
					 const CUgraphNode *dependencies, size_t numDependencies,
					 const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
	FAKE_ENTER();
	if (!nodeParams)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	struct knode_req r = REQ_FROM(nodeParams, nodeParams->kern, nodeParams->ctx);
	return fake_leave(add_node(phGraphNode, hGraph, dependencies, numDependencies,
				   &KERNEL_REQ(&r)));
}

CUresult CUDAAPI cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
				     const CUgraphNode *dependencies, size_t numDependencies)
{
	FAKE_ENTER();
	return fake_leave(add_node(phGraphNode, hGraph, dependencies, numDependencies,
				   &(struct node_req){.type = CU_GRAPH_NODE_TYPE_EMPTY}));
}

CUresult CUDAAPI cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
					const CUgraphNode *dependencies, size_t numDependencies,
					CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
	FAKE_ENTER();
	if (!nodeParams)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	return fake_leave(add_node(phGraphNode, hGraph, dependencies, numDependencies,
				   &ALLOC_REQ(nodeParams)));
}

CUresult CUDAAPI cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph,
				       const CUgraphNode *dependencies, size_t numDependencies,
				       CUdeviceptr dptr)
{
	FAKE_ENTER();
	return fake_leave(
		add_node(phGraphNode, hGraph, dependencies, numDependencies, &FREE_REQ(dptr)));
}

/* Generic node parameters: the fake only sets kernel nodes' this way (memory nodes' cannot
 * be modified). */
static CUresult generic_req(const CUgraphNodeParams *p, struct knode_req *r)
{
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	if (p->type != CU_GRAPH_NODE_TYPE_KERNEL)
		return CUDA_ERROR_NOT_SUPPORTED;
	*r = REQ_FROM(&p->kernel, p->kernel.kern, p->kernel.ctx);
	return CUDA_SUCCESS;
}

/* A child graph node whose graph is moved into g (CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE, the
 * only way a child with memory nodes may be added): the child's nodes, its memory nodes'
 * allocations included, become g's, run where the node is, and go when g is destroyed, the
 * child with them.  The fake clones no graphs, and adds nothing to a moved child (add_node). */
static CUresult child_add(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps,
			  const CUDA_CHILD_GRAPH_NODE_PARAMS *c)
{
	CUgraph child = c->graph;
	if (!fake_pool_live(&graph_pool, g) || !fake_pool_live(&graph_pool, child) || child == g)
		return CUDA_ERROR_INVALID_VALUE;
	/* moved once already (the driver's answer), or cloned */
	if (child->owner || c->ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE)
		return CUDA_ERROR_NOT_SUPPORTED;
	CUgraphNode *nodes = fake_grow(g->nodes, &g->cap, g->n + 1 + child->n, sizeof(*nodes));
	if (!nodes)
		return CUDA_ERROR_OUT_OF_MEMORY;
	g->nodes = nodes;
	CUresult rc = add_node(out, g, deps, ndeps, &(struct node_req){.type = CU_GRAPH_NODE_TYPE_GRAPH});
	if (rc != CUDA_SUCCESS)
		return rc;
	(*out)->k.child = child;
	memcpy(g->nodes + g->n, child->nodes, child->n * sizeof(*nodes));
	g->n += child->n;
	child->n = 0;
	child->owner = g;
	fake_gmem_graph_moved(child, g);
	return CUDA_SUCCESS;
}

/* ... and adds kernel, memory and (moved) child graph nodes. */
static CUresult generic_add(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps,
			    CUgraphNodeParams *p)
{
	struct knode_req r;
	if (p && p->type == CU_GRAPH_NODE_TYPE_GRAPH)
		return child_add(out, g, deps, ndeps, &p->graph);
	if (p && p->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
		return add_node(out, g, deps, ndeps, &ALLOC_REQ(&p->alloc));
	if (p && p->type == CU_GRAPH_NODE_TYPE_MEM_FREE)
		return add_node(out, g, deps, ndeps, &FREE_REQ(p->free.dptr));
	CUresult rc = generic_req(p, &r);
	return rc == CUDA_SUCCESS ? add_node(out, g, deps, ndeps, &KERNEL_REQ(&r)) : rc;
}

CUresult CUDAAPI cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph,
				const CUgraphNode *dependencies, size_t numDependencies,
				CUgraphNodeParams *nodeParams)
{
	FAKE_ENTER();
	return fake_leave(
		generic_add(phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
}

/* Edge data only annotates dependencies, which the fake runs in insertion order anyway. */
CUresult CUDAAPI cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
				   const CUgraphNode *dependencies,
				   const CUgraphEdgeData *dependencyData, size_t numDependencies,
				   CUgraphNodeParams *nodeParams)
{
	FAKE_ENTER();
	(void)dependencyData;
	return fake_leave(
		generic_add(phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
}

static bool is_kernel_node(CUgraphNode node)
{
	return fake_pool_live(&node_pool, node) && node->k.type == CU_GRAPH_NODE_TYPE_KERNEL;
}

static CUresult node_set(CUgraphNode node, const struct knode_req *r)
{
	if (!is_kernel_node(node))
		return CUDA_ERROR_INVALID_VALUE;
	return knode_make(&node->k, r);
}

CUresult CUDAAPI cuGraphKernelNodeSetParams(CUgraphNode hNode,
					    const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	FAKE_ENTER();
	if (!nodeParams)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	struct knode_req r = REQ_FROM(nodeParams, NULL, NULL);
	return fake_leave(node_set(hNode, &r));
}

CUresult CUDAAPI cuGraphKernelNodeSetParams_v2(CUgraphNode hNode,
					       const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
	FAKE_ENTER();
	if (!nodeParams)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	struct knode_req r = REQ_FROM(nodeParams, nodeParams->kern, nodeParams->ctx);
	return fake_leave(node_set(hNode, &r));
}

CUresult CUDAAPI cuGraphNodeSetParams(CUgraphNode hNode, CUgraphNodeParams *nodeParams)
{
	FAKE_ENTER();
	struct knode_req r;
	CUresult rc = generic_req(nodeParams, &r);
	if (rc == CUDA_SUCCESS)
		rc = node_set(hNode, &r);
	return fake_leave(rc);
}

CUresult CUDAAPI cuGraphKernelNodeGetParams(CUgraphNode hNode,
					    CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	FAKE_ENTER();
	if (!nodeParams || !is_kernel_node(hNode))
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	*nodeParams = (CUDA_KERNEL_NODE_PARAMS_v1){PARAMS_OF(&hNode->k, hNode->k.func)};
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuGraphKernelNodeGetParams_v2(CUgraphNode hNode,
					       CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
	FAKE_ENTER();
	if (!nodeParams || !is_kernel_node(hNode))
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	const struct knode *k = &hNode->k;
	*nodeParams = (CUDA_KERNEL_NODE_PARAMS){PARAMS_OF(k, k->kern ? NULL : k->func),
						.kern = k->kern, .ctx = k->ctx};
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
	FAKE_ENTER();
	if (!type || !fake_pool_live(&node_pool, hNode))
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	*type = hNode->k.type;
	return fake_leave(CUDA_SUCCESS);
}

static void exec_free(CUgraphExec e)
{
	for (size_t i = 0; i < e->n; i++) {
		if (e->k[i].type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
			fake_gmem_hold(e->k[i].mem, -1);
		knode_free(&e->k[i]);
	}
	free(e->k);
	free(e->src);
	fake_pool_give(&exec_pool, e);
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
					     unsigned long long flags)
{
	FAKE_ENTER();
	if (!phGraphExec || !fake_pool_live(&graph_pool, hGraph) ||
	    (flags & ~(unsigned long long)(CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
					   CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
					   CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH |
					   CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)))
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	if (hGraph->owner) /* a moved child (the driver's answer) */
		return fake_leave(CUDA_ERROR_NOT_SUPPORTED);
	CUgraphExec e = fake_pool_take(&exec_pool);
	if (!e)
		return fake_leave(CUDA_ERROR_OUT_OF_MEMORY);
	size_t n = hGraph->n;
	e->flags = flags;
	e->k = calloc(n ? n : 1, sizeof(*e->k));
	e->src = calloc(n ? n : 1, sizeof(*e->src));
	CUresult rc = e->k && e->src ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; i < n && rc == CUDA_SUCCESS; i++) {
		rc = knode_copy(&e->k[i], &hGraph->nodes[i]->k);
		e->src[i] = hGraph->nodes[i];
		e->n += rc == CUDA_SUCCESS;
	}
	if (rc != CUDA_SUCCESS) {
		exec_free(e);
		return fake_leave(rc);
	}
	*phGraphExec = e;
	return fake_leave(CUDA_SUCCESS);
}

/* An instantiated node may change anything but the context its function runs in. */
static CUresult exec_set(CUgraphExec e, CUgraphNode node, const struct knode_req *r)
{
	if (!fake_pool_live(&exec_pool, e))
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < e->n; i++) {
		if (e->src[i] != node)
			continue;
		if (e->k[i].type != CU_GRAPH_NODE_TYPE_KERNEL)
			return CUDA_ERROR_INVALID_VALUE;
		struct knode k = {0};
		CUresult rc = knode_make(&k, r);
		if (rc == CUDA_SUCCESS && k.ctx != e->k[i].ctx)
			rc = CUDA_ERROR_INVALID_VALUE;
		if (rc != CUDA_SUCCESS) {
			knode_free(&k);
			return rc;
		}
		knode_free(&e->k[i]);
		e->k[i] = k;
		return CUDA_SUCCESS;
	}
	return CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
						const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	FAKE_ENTER();
	if (!nodeParams)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	struct knode_req r = REQ_FROM(nodeParams, NULL, NULL);
	return fake_leave(exec_set(hGraphExec, hNode, &r));
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
						   const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
	FAKE_ENTER();
	if (!nodeParams)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	struct knode_req r = REQ_FROM(nodeParams, nodeParams->kern, nodeParams->ctx);
	return fake_leave(exec_set(hGraphExec, hNode, &r));
}

CUresult CUDAAPI cuGraphExecNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
					  CUgraphNodeParams *nodeParams)
{
	FAKE_ENTER();
	struct knode_req r;
	CUresult rc = generic_req(nodeParams, &r);
	if (rc == CUDA_SUCCESS)
		rc = exec_set(hGraphExec, hNode, &r);
	return fake_leave(rc);
}

/* Allocations an earlier launch of e left unfreed: freed first if e was instantiated to,
 * else the launch fails. */
static CUresult unfreed(CUgraphExec e)
{
	bool auto_free = e->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
	for (size_t i = 0; i < e->n; i++) {
		const struct knode *k = &e->k[i];
		if (k->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC || !fake_gmem_live(k->mem))
			continue;
		if (!auto_free)
			return CUDA_ERROR_INVALID_VALUE;
		fake_gmem_map(k->mem, false);
	}
	return CUDA_SUCCESS;
}

static CUresult graph_launch(CUgraphExec e, CUstream s)
{
	CUcontext ctx;
	if (!fake_pool_live(&exec_pool, e))
		return CUDA_ERROR_INVALID_VALUE;
	CUresult rc = fake_stream_ctx(s, &ctx);
	if (rc == CUDA_SUCCESS)
		rc = ctx->sticky;
	if (rc == CUDA_SUCCESS)
		rc = unfreed(e);
	for (size_t i = 0; i < e->n && rc == CUDA_SUCCESS; i++)
		rc = knode_run(&e->k[i]);
	return rc;
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	cuGraphLaunch_params p = {hGraphExec, hStream};
	FAKE_TRACED(cuGraphLaunch, &p, graph_launch(hGraphExec, hStream));
}

CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
	cuGraphLaunch_ptsz_params p = {hGraphExec, hStream};
	FAKE_TRACED(cuGraphLaunch_ptsz, &p, graph_launch(hGraphExec, hStream));
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	FAKE_ENTER();
	if (!fake_pool_live(&exec_pool, hGraphExec))
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	exec_free(hGraphExec);
	return fake_leave(CUDA_SUCCESS);
}
