/* Module and library loads, function and kernel lookups: each success is
 * recorded with its owning context before the handle reaches the program. */
#include "hook.h"
#include "../check/check.h"
#include "../redirect/shadow.h"
#include "../report/report.h"

/* A module belongs to the context current at its load (its module domain:
 * a green context's loads are its primary context's); a library to none. */
static void load(uintptr_t handle, CUcontext owner, const char *via, const char *path,
		 const void *image)
{
	if (!handle)
		return;
	cg_mod_add(handle, owner, via, path, image, NULL);
	cg_rehome_keep(handle, owner, path, image);
	/* The kernels that may cross are loaded before they can. */
	cg_warm_devices();
}

static void unload(uintptr_t handle)
{
	cg_rehome_drop(handle);
	cg_mod_remove(handle);
}

CG_AFTER(cuModuleLoad, load(CG_OUT(module), cg_owner_ctx(), v->symbol, fname, NULL))
CG_AFTER(cuModuleLoadData, load(CG_OUT(module), cg_owner_ctx(), v->symbol, NULL, image))
CG_AFTER(cuModuleLoadDataEx, load(CG_OUT(module), cg_owner_ctx(), v->symbol, NULL, image))
CG_AFTER(cuModuleLoadFatBinary, load(CG_OUT(module), cg_owner_ctx(), v->symbol, NULL, fatCubin))
CG_AFTER(cuLibraryLoadData, load(CG_OUT(library), NULL, v->symbol, NULL, code))
CG_AFTER(cuLibraryLoadFromFile, load(CG_OUT(library), NULL, v->symbol, fileName, NULL))
CG_BEFORE(cuModuleUnload, unload((uintptr_t)hmod))
CG_BEFORE(cuLibraryUnload, unload((uintptr_t)library))

static void add_function(CUfunction f, const char *name, const struct cg_mod *m,
			 const char *via)
{
	if (!f)
		return;
	if (!name && cg_call.cuFuncGetName)
		cg_call.cuFuncGetName(&name, f);
	/* A module ctxguard did not see load (loaded before preload took
	 * effect, or by cudart's private path) has no known owner: such
	 * functions are never flagged for kind (a) rather than guessed at. */
	cg_fn_add((uintptr_t)f, m ? m->owner : NULL, 0, via, name, m);
}

static void add_functions(CUfunction *f, unsigned n, CUmodule mod, const char *via)
{
	const struct cg_mod *m = cg_mod_get((uintptr_t)mod);
	for (unsigned i = 0; f && i < n; i++)
		add_function(f[i], NULL, m, via);
}

CG_AFTER(cuModuleGetFunction,
	 add_function(hfunc ? *hfunc : NULL, name, cg_mod_get((uintptr_t)hmod), v->symbol))
CG_AFTER(cuModuleEnumerateFunctions, add_functions(functions, numFunctions, mod, v->symbol))

/* A CUkernel is context-independent: recorded for its name and origin, so
 * operand checks can use them, but never owned by a context. */
static void add_kernel(CUkernel k, const char *name, CUlibrary lib, const char *via)
{
	if (!k)
		return;
	if (!name && cg_call.cuKernelGetName)
		cg_call.cuKernelGetName(&name, k);
	cg_fn_add((uintptr_t)k, NULL, CG_FN_KERNEL, via, name, cg_lib_get((uintptr_t)lib));
}

static void add_kernels(CUkernel *k, unsigned n, CUlibrary lib, const char *via)
{
	for (unsigned i = 0; k && i < n; i++)
		add_kernel(k[i], NULL, lib, via);
}

CG_AFTER(cuLibraryGetKernel, add_kernel(pKernel ? *pKernel : NULL, name, library, v->symbol))
CG_AFTER(cuLibraryEnumerateKernels, add_kernels(kernels, numKernels, lib, v->symbol))

/* The module a library has in the current context: owned by that context. */
static void add_library_module(CUmodule *out, CUlibrary library, const char *via)
{
	if (out && *out && !cg_mod_get((uintptr_t)*out))
		cg_mod_add((uintptr_t)*out, cg_owner_ctx(), via, NULL, NULL,
			   cg_lib_get((uintptr_t)library));
}

CG_AFTER(cuLibraryGetModule, add_library_module(pMod, library, v->symbol))

/* The CUfunction is bound to the context current now (DeepGEMM fetches it
 * once, at JIT time, and caches it process-wide).  A library may ask again
 * before every launch, so each thread keeps the last pair it saw recorded:
 * the same pair again, while no function record went since (a live
 * CUfunction stays in the context it was made in), is known without a
 * registry read. */
static _Thread_local struct {
	CUkernel kernel;
	CUfunction fn;
	unsigned epoch;
} last_kernel_fn CG_TLS;

static void add_kernel_function(CUfunction *out, CUkernel kernel, const char *via)
{
	if (!out || !*out)
		return;
	unsigned epoch = atomic_load_explicit(&cg_fn_epoch, memory_order_acquire);
	if (CG_LIKELY(*out == last_kernel_fn.fn && kernel == last_kernel_fn.kernel &&
		      epoch == last_kernel_fn.epoch))
		return;
	const struct cg_fn *k = cg_fn_get((uintptr_t)kernel);
	const struct cg_fn *f = cg_fn_get((uintptr_t)*out);
	if (!(k && f && f->owner && !f->flags && f->mod == k->mod && strcmp(f->name, k->name) == 0)) {
		const char *name = k ? k->name : NULL;
		if (!name && cg_call.cuKernelGetName)
			cg_call.cuKernelGetName(&name, kernel);
		f = cg_fn_add((uintptr_t)*out, cg_owner_ctx(), 0, via, name, k ? k->mod : NULL);
	}
	if (f && k) {
		last_kernel_fn.kernel = kernel;
		last_kernel_fn.fn = *out;
		last_kernel_fn.epoch = epoch;
	}
}

CG_AFTER(cuKernelGetFunction, add_kernel_function(pFunc, kernel, v->symbol))
