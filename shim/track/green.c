/* Green contexts (CUDA 12.4+): each runs on a share of one device's SMs,
 * with its primary context's modules and memory (docs/contexts.md).  A
 * green context's CUcontext is recorded as an alias of that primary
 * context when it is made, or converted having been made out of sight,
 * and forgotten when it ends: the primary context's modules and memory
 * stay, as they do in the driver. */
#include "track.h"
#include "../report/report.h"

/* The real call: not counted as the program's. */
CUcontext cg_green_ctx(CUgreenCtx g)
{
	CUcontext c = NULL;
	CUresult (*from)(CUcontext *, CUgreenCtx) =
		CG_REAL_SYM(cuCtxFromGreenCtx, cuCtxFromGreenCtx);
	if (!g || !from || from(&c, g) != CUDA_SUCCESS)
		return NULL;
	return c;
}

CG_AFTER(cuGreenCtxCreate, cg_ctx_alias(cg_green_ctx(phCtx ? *phCtx : NULL), dev))
CG_AFTER(cuCtxFromGreenCtx, cg_ctx_alias(pContext ? *pContext : NULL, -1))
