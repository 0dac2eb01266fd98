/* Kernel nodes of CUDA graphs, checked when their parameters are set: once
 * instantiated, a graph launch replays them without passing through here.
 * A node with a CUfunction runs in that function's own context, so the
 * context it was meant for is the one current when the node is set (what
 * stream capture would have used); a node with a CUkernel runs in its ctx
 * field's context and is context-independent, like any CUkernel. */
#include "shim.h"

static CUresult check_node(const char *api, CUfunction func, CUkernel kern, CUcontext ctx,
			   void **params, void **extra)
{
	CUfunction f = func ? func : (CUfunction)kern;
	if (!f)
		return CUDA_SUCCESS;
	CUcontext launch = func || !ctx ? cg_current_ctx() : ctx;
	CUresult rc = cg_check_launch(api, f, launch, NULL, params, extra);
	if (rc == CUDA_SUCCESS)
		cg_error_clear();
	return rc;
}

#define V1(api, p) ((p) ? check_node(api, (p)->func, NULL, NULL, (p)->kernelParams, (p)->extra) \
			: CUDA_SUCCESS)
#define V2(api, p) ((p) ? check_node(api, (p)->func, (p)->kern, (p)->ctx, (p)->kernelParams, \
				     (p)->extra)                                           \
			: CUDA_SUCCESS)

static CUresult check_generic(const char *api, const CUgraphNodeParams *p)
{
	return p && p->type == CU_GRAPH_NODE_TYPE_KERNEL ? V2(api, &p->kernel) : CUDA_SUCCESS;
}

/* Every handler: check, then the real call with the same arguments. */
#define NODE(fam, params_ok, ...)                                            \
	do {                                                                 \
		CUresult rc_ = (params_ok);                                  \
		return rc_ != CUDA_SUCCESS ? rc_ : CG_REAL(fam, v)(__VA_ARGS__); \
	} while (0)

CUresult cg_on_cuGraphAddKernelNode(const struct cg_variant *v, CUgraphNode *phGraphNode,
				    CUgraph hGraph, const CUgraphNode *dependencies,
				    size_t numDependencies,
				    const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	NODE(cuGraphAddKernelNode, V1(v->symbol, nodeParams),
	     phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
}

CUresult cg_on_cuGraphAddKernelNode_v2(const struct cg_variant *v, CUgraphNode *phGraphNode,
				       CUgraph hGraph, const CUgraphNode *dependencies,
				       size_t numDependencies,
				       const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams)
{
	NODE(cuGraphAddKernelNode_v2, V2(v->symbol, nodeParams),
	     phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
}

CUresult cg_on_cuGraphKernelNodeSetParams(const struct cg_variant *v, CUgraphNode hNode,
					  const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	NODE(cuGraphKernelNodeSetParams, V1(v->symbol, nodeParams),
	     hNode, nodeParams);
}

CUresult cg_on_cuGraphKernelNodeSetParams_v2(const struct cg_variant *v, CUgraphNode hNode,
					     const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams)
{
	NODE(cuGraphKernelNodeSetParams_v2,
	     V2(v->symbol, nodeParams), hNode, nodeParams);
}

CUresult cg_on_cuGraphExecKernelNodeSetParams(const struct cg_variant *v, CUgraphExec hGraphExec,
					      CUgraphNode hNode,
					      const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	NODE(cuGraphExecKernelNodeSetParams,
	     V1(v->symbol, nodeParams), hGraphExec, hNode,
	     nodeParams);
}

CUresult cg_on_cuGraphExecKernelNodeSetParams_v2(const struct cg_variant *v,
						 CUgraphExec hGraphExec, CUgraphNode hNode,
						 const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams)
{
	NODE(cuGraphExecKernelNodeSetParams_v2,
	     V2(v->symbol, nodeParams), hGraphExec, hNode,
	     nodeParams);
}

CUresult cg_on_cuGraphAddNode(const struct cg_variant *v, CUgraphNode *phGraphNode,
			      CUgraph hGraph, const CUgraphNode *dependencies,
			      size_t numDependencies, CUgraphNodeParams *nodeParams)
{
	NODE(cuGraphAddNode, check_generic(v->symbol, nodeParams), phGraphNode, hGraph,
	     dependencies, numDependencies, nodeParams);
}

CUresult cg_on_cuGraphAddNode_v2(const struct cg_variant *v, CUgraphNode *phGraphNode,
				 CUgraph hGraph, const CUgraphNode *dependencies,
				 const CUgraphEdgeData *dependencyData, size_t numDependencies,
				 CUgraphNodeParams *nodeParams)
{
	NODE(cuGraphAddNode_v2, check_generic(v->symbol, nodeParams), phGraphNode, hGraph,
	     dependencies, dependencyData, numDependencies, nodeParams);
}

CUresult cg_on_cuGraphNodeSetParams(const struct cg_variant *v, CUgraphNode hNode,
				    CUgraphNodeParams *nodeParams)
{
	NODE(cuGraphNodeSetParams, check_generic(v->symbol, nodeParams), hNode, nodeParams);
}

CUresult cg_on_cuGraphExecNodeSetParams(const struct cg_variant *v, CUgraphExec hGraphExec,
					CUgraphNode hNode, CUgraphNodeParams *nodeParams)
{
	NODE(cuGraphExecNodeSetParams, check_generic(v->symbol, nodeParams), hGraphExec, hNode,
	     nodeParams);
}
