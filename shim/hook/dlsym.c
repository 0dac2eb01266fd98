/* dlsym and dlvsym: programs that dlopen libcuda and look symbols up on the
 * handle (DeepGEMM, Triton's Ex calls) never see preloaded definitions, so
 * the lookup itself is hooked and answers with our wrapper. */
#include <dlfcn.h>

#include "hook.h"
#include "../check/check.h"
#include "../redirect/shadow.h"
#include "../report/report.h"

static CG_NO_SANITIZE void *hooked(void *handle, void *p, const char *name)
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
	/* While another thread starts the shim, answered as after start-up;
	 * what maps to no hook may be a second driver's (shim/hook/drivers.c). */
	if ((!cg_ready(NULL) && !cg_starting_elsewhere()) || !(h = cg_hook_for_real(p)))
		return cg_driver_lookup(handle, p, "dlsym", name);
	cg_count(CG_C_HOOKED_DLSYM);
	return h;
}

/* RTLD_NEXT and RTLD_DEFAULT are resolved relative to the caller's return
 * address (RTLD_DEFAULT searches the global scope and then the caller's own
 * local scope: a library loaded RTLD_LOCAL finds its dependencies' symbols,
 * and its own), so those lookups go to the real function as a tail call
 * that keeps the caller's address.  Only a "cu" name can map to a wrapper:
 * that one is looked up here first, and an RTLD_DEFAULT lookup that maps to
 * nothing is made again as the caller's.  RTLD_NEXT lookups are never
 * mapped: a library that stacks itself above libcuda that way is itself an
 * interposer. */
typedef void *(*dlsym_fn)(void *, const char *);
typedef void *(*dlvsym_fn)(void *, const char *, const char *);

static inline CG_NO_SANITIZE int maybe_hooked(void *handle, const char *name)
{
	return handle != RTLD_NEXT && name && name[0] == 'c' && name[1] == 'u';
}

/* p, what the real lookup of name on handle found, answers it as its
 * wrapper (*out); or as itself, except on RTLD_DEFAULT, where the caller's
 * own lookup may find what ctxguard's cannot. */
static inline CG_NO_SANITIZE int answered(void *handle, const char *name, void *p, void **out)
{
	*out = hooked(handle, p, name);
	return *out != p || handle != RTLD_DEFAULT;
}

CG_TAIL_CALLER CG_NO_SANITIZE
CG_EXPORT void *dlsym(void *handle, const char *name)
{
	void *h;
	if (maybe_hooked(handle, name) && answered(handle, name, cg_real_dlsym(handle, name), &h))
		return h;
	dlsym_fn real = (dlsym_fn)cg_real_libc(0);
	if (!real)
		return NULL;
	CG_TAIL_CALL return real(handle, name);
}

CG_TAIL_CALLER CG_NO_SANITIZE
CG_EXPORT void *dlvsym(void *handle, const char *name, const char *version)
{
	void *h;
	if (maybe_hooked(handle, name) &&
	    answered(handle, name, cg_real_dlvsym(handle, name, version), &h))
		return h;
	dlvsym_fn real = (dlvsym_fn)cg_real_libc(1);
	if (!real)
		return NULL;
	CG_TAIL_CALL return real(handle, name, version);
}
