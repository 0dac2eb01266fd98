/* Second copies of the CUDA driver.  ctxguard hooks one driver: the
 * libcuda.so.1 the process loaded.  A copy under another path (dlopen of
 * /tmp/x/libcuda.so.1, or under another name) or the driver loaded again in
 * a namespace of its own (dlmopen) has state and entry points of its own
 * that no hook and no backstop sees.  Such a copy is recognised by what it
 * exports (cuGetProcAddress and cuLaunchKernel), not by its file name, at
 * the two places a program can reach it: a lookup on its handle (dlsym,
 * dlvsym: shim/hook/dlsym.c) and dlmopen, hooked here.  Under a locked policy
 * the lookup or the load is refused; unlocked, it is said once per copy and
 * counted as unhooked (an audit then fails).  And a library preloaded
 * ahead of ctxguard that defines the driver's entry points wins over the
 * hooks: said at start-up, as unhooked. */
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <string.h>

#include "hook.h"
#include "../check/check.h"
#include "../redirect/shadow.h"
#include "../report/report.h"

/* The CUDA driver among the objects a lookup on handle h searches (h and
 * its dependencies), or NULL: the object that itself exports what every
 * driver exports and no other library does. */
static struct link_map *driver_in(void *h)
{
	static const char *const exports[] = {"cuGetProcAddress", "cuLaunchKernel"};
	struct link_map *owner[2] = {NULL, NULL};
	for (int i = 0; i < 2; i++) {
		void *p = cg_real_dlsym(h, exports[i]);
		Dl_info info;
		if (!p || !dladdr1(p, &info, (void **)&owner[i], RTLD_DL_LINKMAP))
			return NULL;
	}
	return owner[0] == owner[1] ? owner[0] : NULL;
}

/* The driver the hooks stand for (the handle is glibc's link map), or
 * ctxguard itself, which exports the driver's names too. */
static int is_hooked_driver(const struct link_map *m)
{
	Dl_info info;
	struct link_map *self = NULL;
	if (dladdr1((void *)is_hooked_driver, &info, (void **)&self, RTLD_DL_LINKMAP) && self == m)
		return 1;
	if (cg_libcuda)
		return (const void *)m == cg_libcuda;
	void *h = dlopen(cg_libcuda_name(), RTLD_LAZY | RTLD_NOLOAD);
	if (h)
		dlclose(h);
	return h == (void *)m;
}

/* The copies said so far: each once. */
enum { SAID = 8 };
static _Atomic(const void *) said[SAID];

static int first_time(const struct link_map *m)
{
	for (int i = 0; i < SAID; i++) {
		const void *cur = NULL;
		if (atomic_compare_exchange_strong(&said[i], &cur, m))
			return 1;
		if (cur == m)
			return 0;
	}
	return 1;      /* past the table: said again rather than never */
}

/* A second driver m met through `api`: 1 when the lock refuses it. */
static int second_driver(const struct link_map *m, const char *api, const char *what)
{
	/* The policy, even before the first CUDA call. */
	cg_init(NULL);
	int locked = cg_policy && cg_policy->lock;
	if (!first_time(m))
		return locked;
	const char *path = m->l_name && *m->l_name ? m->l_name : "<unnamed>";
	if (locked) {
		cg_stderr("ctxguard: %s %s refused: %s is a second CUDA driver, which ctxguard's hooks"
			  " do not cover, and the policy %s is locked; load the driver once, as %s\n",
			  api, what, path, cg_policy->source, cg_libcuda_name());
	} else {
		cg_count(CG_C_UNHOOKED);
		cg_status_word("unhooked");
		cg_stderr("ctxguard: %s %s: %s is a second CUDA driver; launches through it pass "
			  "unchecked, unseen even by the backstop (counted as unhooked); load the "
			  "driver once, as %s\n", api, what, path, cg_libcuda_name());
	}
	char esc[1024];
	cg_json_escape(esc, sizeof esc, path);
	cg_log_event("unhooked", "\"api\":\"%s\",\"driver\":\"%s\",\"refused\":%s", api, esc,
		     locked ? "true" : "false");
	return locked;
}

void *cg_driver_lookup(void *handle, void *p, const char *api, const char *name)
{
	Dl_info info;
	struct link_map *m = NULL;
	if (handle == RTLD_DEFAULT || !dladdr1(p, &info, (void **)&m, RTLD_DL_LINKMAP) || !m ||
	    is_hooked_driver(m) || driver_in(handle) != m)
		return p;
	return second_driver(m, api, name) ? NULL : p;
}

/* dlmopen into the base namespace is a dlopen; into another, the objects
 * it loaded are checked (a driver that one of them loads later, inside that
 * namespace, is beyond reach: docs/security.md). */
typedef void *(*dlmopen_fn)(Lmid_t, const char *, int);

CG_EXPORT void *dlmopen(Lmid_t lmid, const char *file, int mode)
{
	static _Atomic(dlmopen_fn) real;
	dlmopen_fn f = atomic_load(&real);
	if (!f) {
		f = (dlmopen_fn)cg_real_dlsym(RTLD_NEXT, "dlmopen");
		atomic_store(&real, f);
	}
	if (!f)
		return NULL;
	void *h = f(lmid, file, mode);
	Lmid_t ns;
	if (!h || cg_in_hook || lmid == LM_ID_BASE || dlinfo(h, RTLD_DI_LMID, &ns) != 0 ||
	    ns == LM_ID_BASE)
		return h;
	struct link_map *m = driver_in(h);
	if (m && second_driver(m, "dlmopen", file ? file : "<main>")) {
		dlclose(h);
		return NULL;
	}
	return h;
}

/* At start-up: whose definitions a program's call to these binds to.  Any
 * object ahead of ctxguard in the global scope (an LD_PRELOAD entry before
 * it, or the program itself) that defines one takes those calls past the
 * hooks; only a locked backstop sees the launches then. */
void cg_drivers_check_preloads(void)
{
	static const char *const names[] = {"cuLaunchKernel", "cuLaunchKernelEx", "cuGetProcAddress",
					    "cuModuleLoadData", "cuLibraryLoadData"};
	Dl_info self, info;
	if (!dladdr((void *)cg_drivers_check_preloads, &self))
		return;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		void *p = cg_real_dlsym(RTLD_DEFAULT, names[i]);
		if (!p || !dladdr(p, &info) || info.dli_fbase == self.dli_fbase)
			continue;
		const char *path = info.dli_fname && *info.dli_fname ? info.dli_fname : "the program";
		cg_count(CG_C_UNHOOKED);
		cg_status_word("unhooked");
		cg_stderr("ctxguard: %s, ahead of ctxguard in the preload order, defines %s: calls to "
			  "it bypass the hooks (counted as unhooked; only a locked backstop sees their "
			  "launches). Preload ctxguard first, or list it in /etc/ld.so.preload with the "
			  "backstop locked on (docs/security.md)\n", path, names[i]);
		char esc[1024];
		cg_json_escape(esc, sizeof esc, path);
		cg_log_event("unhooked", "\"api\":\"%s\",\"preload\":\"%s\"", names[i], esc);
		return;     /* one line says it */
	}
}
