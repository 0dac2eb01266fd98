/*
 * The deprecated execution control API: a CUfunction carries its block shape, dynamic
 * shared memory and a parameter space, set ahead of cuLaunch / cuLaunchGrid /
 * cuLaunchGridAsync, which then follow the same launch rules as cuLaunchKernel. cuParamSeti,
 * cuParamSetf and cuParamSetv write anywhere in the space, before or after cuParamSetSize
 * (the CUDA samples set every parameter, then the size), which says how many of its bytes a
 * launch passes. Until set, the block is 1x1x1 and parameter bytes read as zero. A CUkernel
 * cast to CUfunction can be launched this way too, with that default configuration.
 */
#include <stdlib.h>
#include <string.h>

#include "fake.h"

#define LEGACY_MAX_PARAMS 4096 /* the parameter space of the old API */

static CUresult func_check(CUfunction f)
{
	return fake_pool_live(&fake_func_pool, f) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult CUDAAPI cuFuncSetBlockShape(CUfunction hfunc, int x, int y, int z)
{
	FAKE_ENTER();
	CUresult rc = func_check(hfunc);
	if (rc == CUDA_SUCCESS && (x <= 0 || y <= 0 || z <= 0))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS) {
		hfunc->block[0] = (unsigned)x;
		hfunc->block[1] = (unsigned)y;
		hfunc->block[2] = (unsigned)z;
	}
	return fake_leave(rc);
}

CUresult CUDAAPI cuFuncSetSharedSize(CUfunction hfunc, unsigned int bytes)
{
	FAKE_ENTER();
	CUresult rc = func_check(hfunc);
	if (rc == CUDA_SUCCESS)
		hfunc->shared = bytes;
	return fake_leave(rc);
}

/* The function's parameter space, all zero until written. */
static CUresult param_space(CUfunction f)
{
	CUresult rc = func_check(f);
	if (rc == CUDA_SUCCESS && !f->params && !(f->params = calloc(1, LEGACY_MAX_PARAMS)))
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	return rc;
}

CUresult CUDAAPI cuParamSetSize(CUfunction hfunc, unsigned int numbytes)
{
	FAKE_ENTER();
	CUresult rc = param_space(hfunc);
	if (rc == CUDA_SUCCESS && numbytes > LEGACY_MAX_PARAMS)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		hfunc->nparams = numbytes;
	return fake_leave(rc);
}

/* Copies n bytes at offset into the parameter space. */
static CUresult param_set(CUfunction f, int offset, const void *src, size_t n)
{
	CUresult rc = param_space(f);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (offset < 0 || !src || (size_t)offset > LEGACY_MAX_PARAMS ||
	    n > LEGACY_MAX_PARAMS - (size_t)offset)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(f->params + offset, src, n);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuParamSeti(CUfunction hfunc, int offset, unsigned int value)
{
	FAKE_ENTER();
	return fake_leave(param_set(hfunc, offset, &value, sizeof(value)));
}

CUresult CUDAAPI cuParamSetf(CUfunction hfunc, int offset, float value)
{
	FAKE_ENTER();
	return fake_leave(param_set(hfunc, offset, &value, sizeof(value)));
}

CUresult CUDAAPI cuParamSetv(CUfunction hfunc, int offset, void *ptr, unsigned int numbytes)
{
	FAKE_ENTER();
	return fake_leave(param_set(hfunc, offset, ptr, numbytes));
}

/* A grid of width x height blocks with the function's stored configuration. */
static CUresult legacy_launch(CUfunction f, int width, int height, CUstream s)
{
	unsigned char buf[FAKE_MAX_PARAM_BYTES] = {0};
	size_t size = sizeof(buf);
	void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
			 CU_LAUNCH_PARAM_END};
	struct fake_dims d = {{(unsigned)width, (unsigned)height, 1}, {1, 1, 1}, 0, {0, 0, 0}};
	if (width <= 0 || height <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (fake_pool_live(&fake_func_pool, f)) {
		memcpy(d.block, f->block, sizeof(d.block));
		d.shared = f->shared;
		if (f->nparams)
			memcpy(buf, f->params, f->nparams);
	}
	return fake_launch(f, &d, s, NULL, extra, false);
}

CUresult CUDAAPI cuLaunch(CUfunction f)
{
	cuLaunch_params p = {f};
	FAKE_TRACED(cuLaunch, &p, legacy_launch(f, 1, 1, NULL));
}

CUresult CUDAAPI cuLaunchGrid(CUfunction f, int grid_width, int grid_height)
{
	cuLaunchGrid_params p = {f, grid_width, grid_height};
	FAKE_TRACED(cuLaunchGrid, &p, legacy_launch(f, grid_width, grid_height, NULL));
}

CUresult CUDAAPI cuLaunchGridAsync(CUfunction f, int grid_width, int grid_height, CUstream hStream)
{
	cuLaunchGridAsync_params p = {f, grid_width, grid_height, hStream};
	FAKE_TRACED(cuLaunchGridAsync, &p, legacy_launch(f, grid_width, grid_height, hStream));
}
