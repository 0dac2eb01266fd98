/* Kernel nodes of CUDA graphs, checked when their parameters are set: once
 * instantiated, a graph launch replays them without passing through here.
 * A node with a CUfunction runs in that function's own context, so the
 * context it was meant for is the one current when the node is set (what
 * stream capture would have used); a node with a CUkernel runs in its ctx
 * field's context and is context-independent, like any CUkernel. */
#include "check.h"
#include "../redirect/shadow.h"
#include "../report/report.h"

static CUresult check_node(const char *api, CUfunction func, CUkernel kern, CUcontext ctx,
			   void **params, void **extra)
{
	CUfunction f = func ? func : (CUfunction)kern;
	if (!f)
		return CUDA_SUCCESS;
	return cg_check_launch(api, f, func || !ctx ? cg_current_ctx() : ctx, NULL, params, extra);
}

/* v1 parameters have no CUkernel and no context; v2 and v3 have both. */
#define V1(p) ((p) ? check_node(v->symbol, (p)->func, NULL, NULL, (p)->kernelParams, (p)->extra) \
		   : CUDA_SUCCESS)
#define V2(p) ((p) ? check_node(v->symbol, (p)->func, (p)->kern, (p)->ctx, (p)->kernelParams, \
				(p)->extra)                                                     \
		   : CUDA_SUCCESS)
/* The generic node API: only kernel nodes are checked; the memory nodes it
 * adds are recorded once the driver made them (shim/track/allocations.c). */
#define ANY(p) ((p) && (p)->type == CU_GRAPH_NODE_TYPE_KERNEL ? V2(&(p)->kernel) : CUDA_SUCCESS)

CG_CHECKED(cuGraphAddKernelNode, V1(nodeParams))
CG_CHECKED(cuGraphAddKernelNode_v2, V2(nodeParams))
CG_CHECKED(cuGraphKernelNodeSetParams, V1(nodeParams))
CG_CHECKED(cuGraphKernelNodeSetParams_v2, V2(nodeParams))
CG_CHECKED(cuGraphExecKernelNodeSetParams, V1(nodeParams))
CG_CHECKED(cuGraphExecKernelNodeSetParams_v2, V2(nodeParams))
CG_CHECKED_THEN(cuGraphAddNode, ANY(nodeParams), cg_memory_node_added(hGraph, nodeParams))
CG_CHECKED_THEN(cuGraphAddNode_v2, ANY(nodeParams), cg_memory_node_added(hGraph, nodeParams))
CG_CHECKED(cuGraphNodeSetParams, ANY(nodeParams))
CG_CHECKED(cuGraphExecNodeSetParams, ANY(nodeParams))
CG_CHECKED(cuGraphLaunch, CUDA_SUCCESS)
