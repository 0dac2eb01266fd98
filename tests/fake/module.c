/* Modules loaded into a context, and their functions, bound to that context. */
#include <stdlib.h>
#include <string.h>

#include "fake.h"

static struct fake_pool module_pool = FAKE_POOL_INIT(struct CUmod_st);
struct fake_pool fake_func_pool = FAKE_POOL_INIT(struct CUfunc_st);

const int fake_default_func_attr[FAKE_NATTR] = {
	[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK] = 1024,
	[CU_FUNC_ATTRIBUTE_NUM_REGS] = 32,
	[CU_FUNC_ATTRIBUTE_PTX_VERSION] = 90,
	[CU_FUNC_ATTRIBUTE_BINARY_VERSION] = 90,
	[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES] = 49152,
	[CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT] = -1,
};

/* Attributes cuFuncSetAttribute / cuKernelSetAttribute accept, with their ranges. */
static const struct {
	bool settable;
	int min, max;
} attr_rule[FAKE_NATTR] = {
	[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES] = {true, 0, FAKE_MAX_SHARED_OPTIN},
	[CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT] = {true, -1, 100},
	[CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH] = {true, 0, 16},
	[CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT] = {true, 0, 16},
	[CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH] = {true, 0, 16},
	[CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED] = {true, 0, 1},
	[CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE] = {true, 0, 2},
};

CUresult fake_func_attr_check(CUfunction_attribute attrib, int value)
{
	if (attrib < 0 || attrib >= FAKE_NATTR || !attr_rule[attrib].settable ||
	    value < attr_rule[attrib].min || value > attr_rule[attrib].max)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

const struct fake_kdesc *fake_func_desc(CUfunction f)
{
	return &f->mod->img->kern[f->index];
}

void fake_module_destroy(CUmodule mod)
{
	/* Released in reverse so that reloading the same image yields the same handles. */
	for (unsigned i = mod->img->nkern; i-- > 0;) {
		free(mod->fn[i]->params);
		fake_pool_give(&fake_func_pool, mod->fn[i]);
	}
	free(mod->fn);
	fake_image_free(&mod->own);
	fake_pool_give(&module_pool, mod);
}

CUresult fake_module_create(CUcontext ctx, CUlibrary lib, struct fake_image *own, CUmodule *out)
{
	CUmodule mod = fake_pool_take(&module_pool);
	if (!mod) {
		if (own)
			fake_image_free(own);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	mod->ctx = fake_ctx_domain(ctx); /* loaded in a green context: its primary's */
	mod->lib = lib;
	if (own) {
		mod->own = *own;
		mod->img = &mod->own;
	} else {
		mod->img = &lib->img;
	}
	unsigned n = mod->img->nkern;
	mod->fn = calloc(n ? n : 1, sizeof(CUfunction));
	for (unsigned i = 0; mod->fn && i < n; i++) {
		CUfunction f = fake_pool_take(&fake_func_pool);
		if (!f) {
			for (unsigned j = i; j-- > 0;)
				fake_pool_give(&fake_func_pool, mod->fn[j]);
			free(mod->fn);
			mod->fn = NULL;
			break;
		}
		f->mod = mod;
		f->index = i;
		f->block[0] = f->block[1] = f->block[2] = 1;
		memcpy(f->attr, lib ? lib->kern[i]->attr[ctx->dev] : fake_default_func_attr,
		       sizeof(f->attr));
		mod->fn[i] = f;
	}
	if (!mod->fn) {
		fake_image_free(&mod->own);
		fake_pool_give(&module_pool, mod);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*out = mod;
	return CUDA_SUCCESS;
}

void fake_module_drop_ctx(CUcontext ctx)
{
	for (size_t i = 0; i < module_pool.nall; i++) {
		CUmodule mod = module_pool.all[i];
		if (mod->h.live && mod->ctx == ctx && !mod->lib)
			fake_module_destroy(mod);
	}
}

/* Common tail of the cuModuleLoad* family: a module of the current context. */
static CUresult module_load(CUmodule *module, const char *path, const void *image)
{
	CUcontext ctx;
	struct fake_image img;
	if (!module)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult rc = fake_ctx_require_current(&ctx);
	if (rc != CUDA_SUCCESS)
		return rc;
	rc = path			     ? fake_image_load_file(path, &img)
	     : fake_image_is_fatbin(image) ? fake_image_bundled(&img)
					     : fake_image_parse(image, &img);
	if (rc != CUDA_SUCCESS)
		return rc;
	rc = fake_module_create(ctx, NULL, &img, module);
	if (rc == CUDA_SUCCESS)
		fake_trace_note("cuModuleLoad", ctx, NULL, *module, NULL);
	return rc;
}

CUresult CUDAAPI cuModuleLoad(CUmodule *module, const char *fname)
{
	FAKE_ENTER();
	if (!fname)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	return fake_leave(module_load(module, fname, NULL));
}

CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image)
{
	FAKE_ENTER();
	return fake_leave(module_load(module, NULL, image));
}

CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
				    CUjit_option *options, void **optionValues)
{
	FAKE_ENTER();
	if (numOptions > 0 && (!options || !optionValues))
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	return fake_leave(module_load(module, NULL, image));
}

CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
	FAKE_ENTER();
	return fake_leave(module_load(module, NULL, fatCubin));
}

CUresult CUDAAPI cuModuleUnload(CUmodule hmod)
{
	FAKE_ENTER();
	/* A library's modules live and die with the library. */
	if (!fake_pool_live(&module_pool, hmod) || hmod->lib)
		return fake_leave(CUDA_ERROR_INVALID_HANDLE);
	fake_module_destroy(hmod);
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	FAKE_ENTER();
	if (!hfunc || !name)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	if (!fake_pool_live(&module_pool, hmod))
		return fake_leave(CUDA_ERROR_INVALID_HANDLE);
	int i = fake_image_find(hmod->img, name);
	if (i < 0)
		return fake_leave(CUDA_ERROR_NOT_FOUND);
	*hfunc = hmod->fn[i];
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuModuleGetFunctionCount(unsigned int *count, CUmodule mod)
{
	FAKE_ENTER();
	if (!count)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	if (!fake_pool_live(&module_pool, mod))
		return fake_leave(CUDA_ERROR_INVALID_HANDLE);
	*count = mod->img->nkern;
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuModuleEnumerateFunctions(CUfunction *functions, unsigned int numFunctions,
					    CUmodule mod)
{
	FAKE_ENTER();
	if (!functions && numFunctions > 0)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	if (!fake_pool_live(&module_pool, mod))
		return fake_leave(CUDA_ERROR_INVALID_HANDLE);
	for (unsigned i = 0; i < numFunctions && i < mod->img->nkern; i++)
		functions[i] = mod->fn[i];
	return fake_leave(CUDA_SUCCESS);
}

/* The cuFunc* queries need a CUfunction; a CUkernel cast to one is rejected. */
static CUresult func_check(CUfunction f, const void *out)
{
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	return fake_pool_live(&fake_func_pool, f) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult CUDAAPI cuFuncGetName(const char **name, CUfunction hfunc)
{
	FAKE_ENTER();
	CUresult rc = func_check(hfunc, name);
	if (rc == CUDA_SUCCESS)
		*name = fake_func_desc(hfunc)->name;
	return fake_leave(rc);
}

CUresult CUDAAPI cuFuncGetModule(CUmodule *hmod, CUfunction hfunc)
{
	FAKE_ENTER();
	CUresult rc = func_check(hfunc, hmod);
	if (rc == CUDA_SUCCESS)
		*hmod = hfunc->mod;
	return fake_leave(rc);
}

CUresult CUDAAPI cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset,
				    size_t *paramSize)
{
	FAKE_ENTER();
	CUresult rc = func_check(func, func);
	if (rc != CUDA_SUCCESS)
		return fake_leave(rc);
	const struct fake_kdesc *kd = fake_func_desc(func);
	if (paramIndex >= kd->nparams)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	if (paramOffset)
		*paramOffset = kd->offset[paramIndex];
	if (paramSize)
		*paramSize = kd->size[paramIndex];
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
	FAKE_ENTER();
	CUresult rc = func_check(hfunc, hfunc);
	if (rc == CUDA_SUCCESS)
		rc = fake_func_attr_check(attrib, value);
	if (rc == CUDA_SUCCESS)
		hfunc->attr[attrib] = value;
	return fake_leave(rc);
}

CUresult CUDAAPI cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
	FAKE_ENTER();
	CUresult rc = func_check(hfunc, pi);
	if (rc == CUDA_SUCCESS && (attrib < 0 || attrib >= FAKE_NATTR))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		*pi = hfunc->attr[attrib];
	return fake_leave(rc);
}

/* Every function is loaded with its module here; the call is traced, as
 * the redirect tests assert that ctxguard loads its kernels eagerly. */
CUresult CUDAAPI cuFuncLoad(CUfunction function)
{
	FAKE_ENTER();
	CUresult rc = func_check(function, function);
	if (rc == CUDA_SUCCESS)
		fake_trace_note("cuFuncLoad", function->mod->ctx, NULL, function, NULL);
	return fake_leave(rc);
}

CUresult CUDAAPI cuFuncIsLoaded(CUfunctionLoadingState *state, CUfunction function)
{
	FAKE_ENTER();
	CUresult rc = func_check(function, state);
	if (rc == CUDA_SUCCESS)
		*state = CU_FUNCTION_LOADING_STATE_LOADED;
	return fake_leave(rc);
}
