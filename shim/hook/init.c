/* Start-up: nothing happens at load time but registering the fork handler
 * (shim/hook/lifecycle.c); the first hooked call loads the policy, finds
 * libcuda and resolves the real functions.  A process that never touches
 * CUDA pays nothing. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hook.h"
#include "../check/check.h"
#include "../redirect/shadow.h"
#include "../report/report.h"

extern char **environ;

_Atomic int cg_state;
_Thread_local int cg_in_hook CG_TLS;
const struct cg_policy *cg_policy;
struct cg_calls cg_call;
void *cg_libcuda;

static struct cg_policy policy;
/* Read by threads that pass while start-up sets it (shim/hook/starting.c). */
static _Atomic(const char *) libcuda = "libcuda.so.1";

const char *cg_libcuda_name(void)
{
	return atomic_load_explicit(&libcuda, memory_order_acquire);
}

const char *cg_user_env(const char *name)
{
	return policy.secure ? NULL : getenv(name);
}

const char *cg_library_env(const char *name)
{
	return policy.lock ? NULL : cg_user_env(name);
}

/* The ctxguard variables that name a library to load: under a lock each
 * is refused, as a loosening (a driver that is not loaded leaves the shim
 * inert; a file that is no CUPTI turns a locked backstop off). */
static void refuse_locked_libraries(void)
{
	static const struct {
		const char *name, *instead;
	} libraries[] = {
		{"CTXGUARD_LIBCUDA", "the driver is libcuda.so.1"},
		{"CTXGUARD_CUPTI", "the backstop looks for CUPTI as if it were unset"},
	};
	for (size_t i = 0; policy.lock && i < sizeof libraries / sizeof libraries[0]; i++) {
		const char *path = cg_user_env(libraries[i].name);
		if (!path || !*path)
			continue;
		char asked[128];
		snprintf(asked, sizeof asked, "%s=%.80s", libraries[i].name, path);
		cg_policy_refuse(&policy, asked, libraries[i].instead);
	}
}

/* CTXGUARD_LIBCUDA names no library the program loaded, yet a hooked call
 * came: from the program's own libcuda.so.1, which the shim then checks,
 * saying so in one line (else every call failed, NOT_INITIALIZED, with
 * nothing said).  NULL when that driver is not loaded either. */
static void *named_driver_absent(void)
{
	static const char standard[] = "libcuda.so.1";
	const char *named = cg_libcuda_name();
	void *h = strcmp(named, standard) ? dlopen(standard, RTLD_LAZY | RTLD_NOLOAD) : NULL;
	if (h) {
		cg_stderr("ctxguard: CTXGUARD_LIBCUDA=%s is no library this process loaded;"
			  " checking the libcuda.so.1 the program loaded instead\n", named);
		atomic_store_explicit(&libcuda, standard, memory_order_release);
	}
	return h;
}

/* 1: ready; 0: libcuda not loaded (yet): ask again at the next call;
 * -1: a libcuda without the basics: inert for good. */
static int start(void)
{
	static int have_policy;
	if (!have_policy) {
		cg_policy_load(&policy, environ);
		refuse_locked_libraries();
		const char *path = cg_library_env("CTXGUARD_LIBCUDA"); /* for tests */
		if (path && *path)
			atomic_store_explicit(&libcuda, path, memory_order_release);
		cg_policy = &policy;
		cg_launch_configure(cg_policy);
		have_policy = 1;
	}
	/* Only a driver the program loaded itself: a lookup of some other
	 * "cu" name (curl_easy_init) must not pull libcuda into a process
	 * that never uses it.  Every route to a hook comes after that load. */
	void *h = dlopen(cg_libcuda_name(), RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		h = named_driver_absent();
	if (!h)
		return 0;
	cg_libcuda = h;
	cg_entry_resolve(h);
#define X(name, params) cg_call.name = (CUresult(*) params)cg_real_dlsym(h, #name);
	CG_CALLS(X)
#undef X
	if (!cg_call.cuCtxGetCurrent || !cg_call.cuStreamGetCtx)
		return -1;
	static const struct cg_summary_parts parts = {
		cg_registry_counts, cg_tmap_address_word, cg_backstop_summary, cg_shadow_summary};
	cg_summary_start(&parts);
	cg_report_start();
	cg_drivers_check_preloads();
	cg_backstop_start();
	return 1;
}

int cg_init(const char *what)
{
	int s = atomic_load_explicit(&cg_state, memory_order_acquire);
	if (s == CG_READY)
		return 1;
	/* Re-entered from inside start() (libcuda's constructors may call
	 * dlsym): answer "not ready" so the call passes through untouched. */
	if (s == CG_INERT || cg_in_hook)
		return 0;
	int expected = CG_UNSTARTED;
	if (atomic_compare_exchange_strong(&cg_state, &expected, CG_STARTING)) {
		cg_in_hook = 1;
		int r = start();
		s = r > 0 ? CG_READY : r < 0 ? CG_INERT : CG_UNSTARTED;
		cg_in_hook = 0;
		cg_started(s);
		return s == CG_READY;
	}
	return cg_starting_wait(what);
}

__attribute__((destructor)) static void at_unload(void)
{
	if (atomic_load(&cg_state) == CG_READY)
		cg_report_summary();
	else
		cg_status_exit(0);
}
