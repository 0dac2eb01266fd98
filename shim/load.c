/* Module and library loads, function and kernel lookups: each success is
 * recorded with its owning context before the handle reaches the program. */
#include "shim.h"

static const struct cg_mod *load(CUresult rc, CUmodule *out, const char *via,
				 const char *path, const void *image)
{
	if (rc != CUDA_SUCCESS || !out || !*out)
		return NULL;
	return cg_mod_add((uintptr_t)*out, cg_current_ctx(), via, path, image, NULL);
}

CUresult cg_on_cuModuleLoad(const struct cg_variant *v, CUmodule *module, const char *fname)
{
	CUresult rc = CG_REAL(cuModuleLoad, v)(module, fname);
	load(rc, module, v->symbol, fname, NULL);
	return rc;
}

CUresult cg_on_cuModuleLoadData(const struct cg_variant *v, CUmodule *module, const void *image)
{
	CUresult rc = CG_REAL(cuModuleLoadData, v)(module, image);
	load(rc, module, v->symbol, NULL, image);
	return rc;
}

CUresult cg_on_cuModuleLoadDataEx(const struct cg_variant *v, CUmodule *module,
				  const void *image, unsigned int numOptions,
				  CUjit_option *options, void **optionValues)
{
	CUresult rc = CG_REAL(cuModuleLoadDataEx, v)(module, image, numOptions, options, optionValues);
	load(rc, module, v->symbol, NULL, image);
	return rc;
}

CUresult cg_on_cuModuleLoadFatBinary(const struct cg_variant *v, CUmodule *module,
				     const void *fatCubin)
{
	CUresult rc = CG_REAL(cuModuleLoadFatBinary, v)(module, fatCubin);
	load(rc, module, v->symbol, NULL, fatCubin);
	return rc;
}

/* Unpublish first: once the driver has freed the handle it may hand it out
 * again on another thread, and that registration must not be undone. */
CUresult cg_on_cuModuleUnload(const struct cg_variant *v, CUmodule hmod)
{
	cg_mod_remove((uintptr_t)hmod);
	return CG_REAL(cuModuleUnload, v)(hmod);
}

static void add_function(CUfunction f, const char *name, const struct cg_mod *m,
			 const char *via)
{
	if (!name && cg_call.cuFuncGetName)
		cg_call.cuFuncGetName(&name, f);
	/* A module ctxguard did not see load (loaded before preload took
	 * effect, or by cudart's private path) has no known owner: such
	 * functions are never flagged for kind (a) rather than guessed at. */
	cg_fn_add((uintptr_t)f, m ? m->owner : NULL, 0, via, name, m);
}

CUresult cg_on_cuModuleGetFunction(const struct cg_variant *v, CUfunction *hfunc,
				   CUmodule hmod, const char *name)
{
	CUresult rc = CG_REAL(cuModuleGetFunction, v)(hfunc, hmod, name);
	if (rc == CUDA_SUCCESS && hfunc && *hfunc)
		add_function(*hfunc, name, cg_mod_get((uintptr_t)hmod), v->symbol);
	return rc;
}

CUresult cg_on_cuModuleEnumerateFunctions(const struct cg_variant *v, CUfunction *functions,
					  unsigned int numFunctions, CUmodule mod)
{
	CUresult rc = CG_REAL(cuModuleEnumerateFunctions, v)(functions, numFunctions, mod);
	if (rc != CUDA_SUCCESS || !functions)
		return rc;
	const struct cg_mod *m = cg_mod_get((uintptr_t)mod);
	for (unsigned i = 0; i < numFunctions; i++)
		if (functions[i])
			add_function(functions[i], NULL, m, v->symbol);
	return rc;
}

static void load_library(CUresult rc, CUlibrary *out, const char *via, const char *path,
			 const void *image)
{
	if (rc == CUDA_SUCCESS && out && *out)
		cg_mod_add((uintptr_t)*out, NULL, via, path, image, NULL);
}

CUresult cg_on_cuLibraryLoadData(const struct cg_variant *v, CUlibrary *library,
				 const void *code, CUjit_option *jitOptions,
				 void **jitOptionsValues, unsigned int numJitOptions,
				 CUlibraryOption *libraryOptions, void **libraryOptionValues,
				 unsigned int numLibraryOptions)
{
	CUresult rc = CG_REAL(cuLibraryLoadData, v)(library, code, jitOptions, jitOptionsValues,
						    numJitOptions, libraryOptions,
						    libraryOptionValues, numLibraryOptions);
	load_library(rc, library, v->symbol, NULL, code);
	return rc;
}

CUresult cg_on_cuLibraryLoadFromFile(const struct cg_variant *v, CUlibrary *library,
				     const char *fileName, CUjit_option *jitOptions,
				     void **jitOptionsValues, unsigned int numJitOptions,
				     CUlibraryOption *libraryOptions, void **libraryOptionValues,
				     unsigned int numLibraryOptions)
{
	CUresult rc = CG_REAL(cuLibraryLoadFromFile, v)(library, fileName, jitOptions,
							jitOptionsValues, numJitOptions,
							libraryOptions, libraryOptionValues,
							numLibraryOptions);
	load_library(rc, library, v->symbol, fileName, NULL);
	return rc;
}

CUresult cg_on_cuLibraryUnload(const struct cg_variant *v, CUlibrary library)
{
	cg_mod_remove((uintptr_t)library);
	return CG_REAL(cuLibraryUnload, v)(library);
}

/* A CUkernel is context-independent: recorded for its name and origin, so
 * operand checks can use them, but never owned by a context. */
static void add_kernel(CUkernel k, const char *name, CUlibrary lib, const char *via)
{
	if (!name && cg_call.cuKernelGetName)
		cg_call.cuKernelGetName(&name, k);
	cg_fn_add((uintptr_t)k, NULL, CG_FN_KERNEL, via, name, cg_lib_get((uintptr_t)lib));
}

CUresult cg_on_cuLibraryGetKernel(const struct cg_variant *v, CUkernel *pKernel,
				  CUlibrary library, const char *name)
{
	CUresult rc = CG_REAL(cuLibraryGetKernel, v)(pKernel, library, name);
	if (rc == CUDA_SUCCESS && pKernel && *pKernel)
		add_kernel(*pKernel, name, library, v->symbol);
	return rc;
}

CUresult cg_on_cuLibraryEnumerateKernels(const struct cg_variant *v, CUkernel *kernels,
					 unsigned int numKernels, CUlibrary lib)
{
	CUresult rc = CG_REAL(cuLibraryEnumerateKernels, v)(kernels, numKernels, lib);
	if (rc != CUDA_SUCCESS || !kernels)
		return rc;
	for (unsigned i = 0; i < numKernels; i++)
		if (kernels[i])
			add_kernel(kernels[i], NULL, lib, v->symbol);
	return rc;
}

/* The module a library has in the current context: owned by that context. */
CUresult cg_on_cuLibraryGetModule(const struct cg_variant *v, CUmodule *pMod, CUlibrary library)
{
	CUresult rc = CG_REAL(cuLibraryGetModule, v)(pMod, library);
	if (rc == CUDA_SUCCESS && pMod && *pMod && !cg_mod_get((uintptr_t)*pMod)) {
		const struct cg_mod *lib = cg_lib_get((uintptr_t)library);
		cg_mod_add((uintptr_t)*pMod, cg_current_ctx(), v->symbol, NULL, NULL, lib);
	}
	return rc;
}

/* The CUfunction is bound to the context current now (DeepGEMM fetches it
 * once, at JIT time, and caches it process-wide). */
CUresult cg_on_cuKernelGetFunction(const struct cg_variant *v, CUfunction *pFunc, CUkernel kernel)
{
	CUresult rc = CG_REAL(cuKernelGetFunction, v)(pFunc, kernel);
	if (rc != CUDA_SUCCESS || !pFunc || !*pFunc)
		return rc;
	const struct cg_fn *k = cg_fn_get((uintptr_t)kernel);
	const char *name = k ? k->name : NULL;
	if (!name && cg_call.cuKernelGetName)
		cg_call.cuKernelGetName(&name, kernel);
	cg_fn_add((uintptr_t)*pFunc, cg_current_ctx(), 0, v->symbol, name, k ? k->mod : NULL);
	return rc;
}
