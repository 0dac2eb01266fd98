/* Launch entry points: the check every kernel launch in the process goes
 * through.  The hot path is one lock-free registry read and, for a checked
 * function, one cuCtxGetCurrent or cuStreamGetCtx, plus one lock-free map
 * read per pointer operand; nothing is allocated. */
#include <string.h>

#include "shim.h"

static CUresult crossing(const char *api, const struct cg_fn *fn, CUcontext launch_ctx,
			 CUstream stream)
{
	struct cg_crossing c;
	cg_crossing_init(&c, 'a', api, fn, launch_ctx, cg_ctx_device(launch_ctx), stream);
	return cg_act(&c, fn);
}

CUresult cg_check_launch(const char *api, CUfunction f, CUcontext launch_ctx, CUstream stream,
			 void **params, void **extra)
{
	cg_count(CG_C_LAUNCHES);
	const struct cg_fn *fn = cg_fn_get((uintptr_t)f);
	int all = cg_policy->scope == CG_SCOPE_ALL;
	if (CG_UNLIKELY(!fn)) {
		/* Loaded out of sight (cudart's own fatbins): only its
		 * operands can be checked, and only when asked for. */
		if (!all || !cg_policy->operands || !(fn = cg_fn_seen((uintptr_t)f, stream)))
			return CUDA_SUCCESS;
	}
	if (fn->rule < 0 && !all)
		return CUDA_SUCCESS;
	if (!launch_ctx)
		launch_ctx = cg_launch_ctx(stream);
	/* No launch context: the driver itself refuses the launch. */
	if (!launch_ctx)
		return CUDA_SUCCESS;
	/* A CUkernel (owner NULL) runs wherever it is launched. */
	if (fn->owner && CG_UNLIKELY(launch_ctx != fn->owner))
		return crossing(api, fn, launch_ctx, stream);
	if (cg_policy->operands)
		return cg_check_operands(api, fn, launch_ctx, stream, params, extra);
	return CUDA_SUCCESS;
}

/* Checks, then the real call; a refusal (error action) returns its code. */
#define CHECKED(api, f, ctx, stream, params, extra, call)                     \
	do {                                                                 \
		CUresult rc_ = cg_check_launch(api, f, ctx, stream, params, extra); \
		if (rc_ != CUDA_SUCCESS)                                     \
			return rc_;                                          \
		cg_error_clear();                                            \
		return call;                                                 \
	} while (0)

CUresult cg_on_cuLaunchKernel(const struct cg_variant *v, CUfunction f, unsigned int gridDimX,
			      unsigned int gridDimY, unsigned int gridDimZ,
			      unsigned int blockDimX, unsigned int blockDimY,
			      unsigned int blockDimZ, unsigned int sharedMemBytes,
			      CUstream hStream, void **kernelParams, void **extra)
{
	CHECKED(v->symbol, f, NULL, hStream, kernelParams, extra,
		CG_REAL(cuLaunchKernel, v)(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
					   blockDimZ, sharedMemBytes, hStream, kernelParams, extra));
}

CUresult cg_on_cuLaunchKernelEx(const struct cg_variant *v, const CUlaunchConfig *config,
				CUfunction f, void **kernelParams, void **extra)
{
	CHECKED(v->symbol, f, NULL, config ? config->hStream : NULL, kernelParams, extra,
		CG_REAL(cuLaunchKernelEx, v)(config, f, kernelParams, extra));
}

CUresult cg_on_cuLaunchCooperativeKernel(const struct cg_variant *v, CUfunction f,
					 unsigned int gridDimX, unsigned int gridDimY,
					 unsigned int gridDimZ, unsigned int blockDimX,
					 unsigned int blockDimY, unsigned int blockDimZ,
					 unsigned int sharedMemBytes, CUstream hStream,
					 void **kernelParams)
{
	CHECKED(v->symbol, f, NULL, hStream, kernelParams, NULL,
		CG_REAL(cuLaunchCooperativeKernel, v)(f, gridDimX, gridDimY, gridDimZ, blockDimX,
						      blockDimY, blockDimZ, sharedMemBytes,
						      hStream, kernelParams));
}

CUresult cg_on_cuLaunchCooperativeKernelMultiDevice(const struct cg_variant *v,
						    CUDA_LAUNCH_PARAMS *list,
						    unsigned int numDevices, unsigned int flags)
{
	for (unsigned i = 0; list && i < numDevices; i++) {
		CUresult rc = cg_check_launch(v->symbol, list[i].function, NULL, list[i].hStream,
					      list[i].kernelParams, NULL);
		if (rc != CUDA_SUCCESS)
			return rc;
	}
	cg_error_clear();
	return CG_REAL(cuLaunchCooperativeKernelMultiDevice, v)(list, numDevices, flags);
}

CUresult cg_on_cuLaunch(const struct cg_variant *v, CUfunction f)
{
	CHECKED(v->symbol, f, NULL, NULL, NULL, NULL, CG_REAL(cuLaunch, v)(f));
}

CUresult cg_on_cuLaunchGrid(const struct cg_variant *v, CUfunction f, int grid_width,
			    int grid_height)
{
	CHECKED(v->symbol, f, NULL, NULL, NULL, NULL,
		CG_REAL(cuLaunchGrid, v)(f, grid_width, grid_height));
}

CUresult cg_on_cuLaunchGridAsync(const struct cg_variant *v, CUfunction f, int grid_width,
				 int grid_height, CUstream hStream)
{
	CHECKED(v->symbol, f, NULL, hStream, NULL, NULL,
		CG_REAL(cuLaunchGridAsync, v)(f, grid_width, grid_height, hStream));
}
