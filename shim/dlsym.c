/* dlsym and dlvsym: programs that dlopen libcuda and look symbols up on the
 * handle (DeepGEMM, Triton's Ex calls) never see preloaded definitions, so
 * the lookup itself is hooked and answers with our wrapper. */
#include <dlfcn.h>

#include "shim.h"

static CG_NO_SANITIZE void *hooked(void *p, const char *name)
{
	/* Only libcuda's names can map to a wrapper; everything else (and
	 * every call made while ctxguard initialises) passes untouched. */
	if (!p || name[0] != 'c' || name[1] != 'u' || cg_in_hook)
		return p;
	/* CUPTI's subscribe, even before start-up: a profiler that looks it
	 * up early must still get the backstop's place when it calls. */
	void *h = cg_backstop_hook_for(name, p);
	if (h)
		return h;
	if (!cg_ready() || !(h = cg_hook_for_real(p)))
		return p;
	cg_count(CG_C_HOOKED_DLSYM);
	return h;
}

/* RTLD_NEXT is resolved relative to the caller's return address, so those
 * lookups go to the real function as a tail call that keeps the caller's
 * address, and are not mapped: a library that stacks itself above libcuda
 * that way is itself an interposer. */
typedef void *(*dlsym_fn)(void *, const char *);
typedef void *(*dlvsym_fn)(void *, const char *, const char *);

CG_TAIL_CALLER CG_NO_SANITIZE
CG_EXPORT void *dlsym(void *handle, const char *name)
{
	if (handle == RTLD_NEXT)
		CG_TAIL_CALL return ((dlsym_fn)cg_real_libc(0))(handle, name);
	return hooked(cg_real_dlsym(handle, name), name);
}

CG_TAIL_CALLER CG_NO_SANITIZE
CG_EXPORT void *dlvsym(void *handle, const char *name, const char *version)
{
	if (handle == RTLD_NEXT)
		CG_TAIL_CALL return ((dlvsym_fn)cg_real_libc(1))(handle, name, version);
	return hooked(cg_real_dlvsym(handle, name, version), name);
}
