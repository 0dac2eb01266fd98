/*
 * Libraries: context-independent loading. A CUkernel works in any context; the library
 * gets a module in a context the first time that context asks for one (cuLibraryGetModule,
 * cuKernelGetFunction), and the CUfunction it hands out is bound to that context.
 */
#include <stdlib.h>
#include <string.h>

#include "fake.h"

static struct fake_pool library_pool = FAKE_POOL_INIT(struct CUlib_st);
struct fake_pool fake_kern_pool = FAKE_POOL_INIT(struct CUkern_st);

const struct fake_kdesc *fake_kern_desc(CUkernel k)
{
	return &k->lib->img.kern[k->index];
}

static void library_destroy(CUlibrary lib)
{
	for (size_t i = 0; i < lib->nmods; i++)
		fake_module_destroy(lib->mods[i]);
	free(lib->mods);
	/* Released in reverse so that reloading the same image yields the same handles. */
	for (unsigned i = lib->kern ? lib->img.nkern : 0; i-- > 0;)
		if (lib->kern[i])
			fake_pool_give(&fake_kern_pool, lib->kern[i]);
	free(lib->kern);
	fake_image_free(&lib->img);
	fake_pool_give(&library_pool, lib);
}

static CUresult library_load(CUlibrary *library, const char *path, const void *code,
			     unsigned numJitOptions, CUjit_option *jitOptions, void **jitValues,
			     unsigned numLibOptions, CUlibraryOption *libOptions, void **libValues)
{
	struct fake_image img;
	if (!library || (numJitOptions > 0 && (!jitOptions || !jitValues)) ||
	    (numLibOptions > 0 && (!libOptions || !libValues)))
		return CUDA_ERROR_INVALID_VALUE;
	CUresult rc = path ? fake_image_load_file(path, &img) : fake_image_parse(code, &img);
	if (rc != CUDA_SUCCESS)
		return rc;
	CUlibrary lib = fake_pool_take(&library_pool);
	if (!lib) {
		fake_image_free(&img);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	lib->img = img;
	lib->kern = calloc(img.nkern ? img.nkern : 1, sizeof(CUkernel));
	for (unsigned i = 0; lib->kern && i < img.nkern; i++) {
		CUkernel k = fake_pool_take(&fake_kern_pool);
		if (!k) {
			library_destroy(lib);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		k->lib = lib;
		k->index = i;
		for (int d = 0; d < FAKE_MAX_DEVICES; d++)
			memcpy(k->attr[d], fake_default_func_attr, sizeof(k->attr[d]));
		lib->kern[i] = k;
	}
	if (!lib->kern) {
		library_destroy(lib);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*library = lib;
	return CUDA_SUCCESS;
}

CUresult fake_library_module(CUlibrary lib, CUcontext ctx, bool create, CUmodule *out)
{
	ctx = fake_ctx_domain(ctx);
	for (size_t i = 0; i < lib->nmods; i++)
		if (lib->mods[i]->ctx == ctx) {
			*out = lib->mods[i];
			return CUDA_SUCCESS;
		}
	if (!create)
		return CUDA_ERROR_NOT_FOUND;
	CUmodule *mods = fake_grow(lib->mods, &lib->capmods, lib->nmods + 1, sizeof(*mods));
	if (!mods)
		return CUDA_ERROR_OUT_OF_MEMORY;
	lib->mods = mods;
	CUresult rc = fake_module_create(ctx, lib, NULL, out);
	if (rc == CUDA_SUCCESS)
		lib->mods[lib->nmods++] = *out;
	return rc;
}

void fake_library_drop_ctx(CUcontext ctx)
{
	for (size_t i = 0; i < library_pool.nall; i++) {
		CUlibrary lib = library_pool.all[i];
		if (!lib->h.live)
			continue;
		for (size_t m = 0; m < lib->nmods;) {
			if (lib->mods[m]->ctx == ctx) {
				fake_module_destroy(lib->mods[m]);
				lib->mods[m] = lib->mods[--lib->nmods];
			} else {
				m++;
			}
		}
	}
}

CUresult CUDAAPI cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
				   void **jitOptionsValues, unsigned int numJitOptions,
				   CUlibraryOption *libraryOptions, void **libraryOptionValues,
				   unsigned int numLibraryOptions)
{
	FAKE_ENTER();
	return fake_leave(library_load(library, NULL, code, numJitOptions, jitOptions,
				       jitOptionsValues, numLibraryOptions, libraryOptions,
				       libraryOptionValues));
}

CUresult CUDAAPI cuLibraryLoadFromFile(CUlibrary *library, const char *fileName,
				       CUjit_option *jitOptions, void **jitOptionsValues,
				       unsigned int numJitOptions, CUlibraryOption *libraryOptions,
				       void **libraryOptionValues, unsigned int numLibraryOptions)
{
	FAKE_ENTER();
	if (!fileName)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	return fake_leave(library_load(library, fileName, NULL, numJitOptions, jitOptions,
				       jitOptionsValues, numLibraryOptions, libraryOptions,
				       libraryOptionValues));
}

CUresult CUDAAPI cuLibraryUnload(CUlibrary library)
{
	FAKE_ENTER();
	if (!fake_pool_live(&library_pool, library))
		return fake_leave(CUDA_ERROR_INVALID_HANDLE);
	library_destroy(library);
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
	FAKE_ENTER();
	if (!pKernel || !name)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	if (!fake_pool_live(&library_pool, library))
		return fake_leave(CUDA_ERROR_INVALID_HANDLE);
	int i = fake_image_find(&library->img, name);
	if (i < 0)
		return fake_leave(CUDA_ERROR_NOT_FOUND);
	*pKernel = library->kern[i];
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuLibraryGetKernelCount(unsigned int *count, CUlibrary lib)
{
	FAKE_ENTER();
	if (!count)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	if (!fake_pool_live(&library_pool, lib))
		return fake_leave(CUDA_ERROR_INVALID_HANDLE);
	*count = lib->img.nkern;
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int numKernels,
					   CUlibrary lib)
{
	FAKE_ENTER();
	if (!kernels && numKernels > 0)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	if (!fake_pool_live(&library_pool, lib))
		return fake_leave(CUDA_ERROR_INVALID_HANDLE);
	for (unsigned i = 0; i < numKernels && i < lib->img.nkern; i++)
		kernels[i] = lib->kern[i];
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
	FAKE_ENTER();
	CUcontext ctx;
	if (!pMod)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	if (!fake_pool_live(&library_pool, library))
		return fake_leave(CUDA_ERROR_INVALID_HANDLE);
	CUresult rc = fake_ctx_require_current(&ctx);
	if (rc == CUDA_SUCCESS)
		rc = fake_library_module(library, ctx, true, pMod);
	return fake_leave(rc);
}

/* Kernel queries take a CUkernel, or a CUkernel cast to CUfunction. */
static CUresult kern_check(CUkernel k, const void *out)
{
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	return fake_pool_live(&fake_kern_pool, k) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult CUDAAPI cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
	FAKE_ENTER();
	CUcontext ctx;
	CUmodule mod;
	CUresult rc = kern_check(kernel, pFunc);
	if (rc == CUDA_SUCCESS)
		rc = fake_ctx_require_current(&ctx);
	if (rc == CUDA_SUCCESS)
		rc = fake_library_module(kernel->lib, ctx, true, &mod);
	if (rc == CUDA_SUCCESS)
		*pFunc = mod->fn[kernel->index];
	return fake_leave(rc);
}

CUresult CUDAAPI cuKernelGetName(const char **name, CUkernel hfunc)
{
	FAKE_ENTER();
	CUresult rc = kern_check(hfunc, name);
	if (rc == CUDA_SUCCESS)
		*name = fake_kern_desc(hfunc)->name;
	return fake_leave(rc);
}

CUresult CUDAAPI cuKernelGetLibrary(CUlibrary *pLib, CUkernel kernel)
{
	FAKE_ENTER();
	CUresult rc = kern_check(kernel, pLib);
	if (rc == CUDA_SUCCESS)
		*pLib = kernel->lib;
	return fake_leave(rc);
}

CUresult CUDAAPI cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset,
				      size_t *paramSize)
{
	FAKE_ENTER();
	CUresult rc = kern_check(kernel, kernel);
	if (rc != CUDA_SUCCESS)
		return fake_leave(rc);
	const struct fake_kdesc *kd = fake_kern_desc(kernel);
	if (paramIndex >= kd->nparams)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	if (paramOffset)
		*paramOffset = kd->offset[paramIndex];
	if (paramSize)
		*paramSize = kd->size[paramIndex];
	return fake_leave(CUDA_SUCCESS);
}

/* The kernel's value applies to its functions in every context on `dev`, present or future. */
CUresult CUDAAPI cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel,
				      CUdevice dev)
{
	FAKE_ENTER();
	CUresult rc = kern_check(kernel, kernel);
	if (rc == CUDA_SUCCESS && !fake_dev_valid(dev))
		rc = CUDA_ERROR_INVALID_DEVICE;
	if (rc == CUDA_SUCCESS)
		rc = fake_func_attr_check(attrib, val);
	if (rc != CUDA_SUCCESS)
		return fake_leave(rc);
	kernel->attr[dev][attrib] = val;
	CUlibrary lib = kernel->lib;
	for (size_t i = 0; i < lib->nmods; i++)
		if (lib->mods[i]->ctx->dev == dev)
			lib->mods[i]->fn[kernel->index]->attr[attrib] = val;
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel,
				      CUdevice dev)
{
	FAKE_ENTER();
	CUresult rc = kern_check(kernel, pi);
	if (rc == CUDA_SUCCESS && !fake_dev_valid(dev))
		rc = CUDA_ERROR_INVALID_DEVICE;
	if (rc == CUDA_SUCCESS && (attrib < 0 || attrib >= FAKE_NATTR))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		*pi = kernel->attr[dev][attrib];
	return fake_leave(rc);
}
