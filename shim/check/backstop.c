/* The CUPTI backstop (opt-in): CUPTI calls ctxguard back at the entry of
 * every launch API, before the driver runs it.  A launch that came through
 * the hooks is marked (cg_hooked_call) and costs the callback one TLS
 * read; one that did not is checked there with the same check, and
 * counted: the coverage audit.  CUPTI is dlopened only when asked for,
 * never linked.  It allows one callback subscriber, so a profiler that
 * subscribes later (torch.profiler) gets it: ctxguard steps aside. */
#include <cupti.h>
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../policy/outbuf.h"
#include "check.h"
#include "../redirect/shadow.h"
#include "../report/report.h"

_Thread_local unsigned char cg_hooked_call CG_TLS;
_Thread_local unsigned char cg_backstop_checking CG_TLS;

/* Where each watched API's cu*_params struct (generated_cuda_meta.h) holds
 * the function, stream, kernelParams and extra: offsets into that API's own
 * struct, NONE where it has no such field.  CONFIG: the stream is
 * config->hStream.  PARAM_SPACE: the parameters are what cuParamSet* wrote
 * (through the hooks) into the function.  MULTI and GRAPH are read by
 * hand. */
enum shape { PLAIN, CONFIG, PARAM_SPACE, MULTI, GRAPH };
enum { NONE = -1 };
#define AT(name, member) ((short)offsetof(name##_params, member))
#define ROW(name, shape, stream, kp, extra) \
	{CUPTI_DRIVER_TRACE_CBID_##name, #name, shape, AT(name, f), stream, kp, extra}
#define LAUNCH(name) ROW(name, PLAIN, AT(name, hStream), AT(name, kernelParams), AT(name, extra))
#define LAUNCH_EX(name) ROW(name, CONFIG, AT(name, config), AT(name, kernelParams), AT(name, extra))
#define COOP(name) ROW(name, PLAIN, AT(name, hStream), AT(name, kernelParams), NONE)
#define OTHER(name, shape) {CUPTI_DRIVER_TRACE_CBID_##name, #name, shape, NONE, NONE, NONE, NONE}
static const struct watch {
	CUpti_CallbackId cbid;
	const char *api;
	enum shape shape;
	short f, stream, params, extra;
} watched[] = {
	LAUNCH(cuLaunchKernel),
	LAUNCH(cuLaunchKernel_ptsz),
	LAUNCH_EX(cuLaunchKernelEx),
	LAUNCH_EX(cuLaunchKernelEx_ptsz),
	COOP(cuLaunchCooperativeKernel),
	COOP(cuLaunchCooperativeKernel_ptsz),
	OTHER(cuLaunchCooperativeKernelMultiDevice, MULTI),
	ROW(cuLaunch, PARAM_SPACE, NONE, NONE, NONE),
	ROW(cuLaunchGrid, PARAM_SPACE, NONE, NONE, NONE),
	ROW(cuLaunchGridAsync, PARAM_SPACE, AT(cuLaunchGridAsync, hStream), NONE, NONE),
	OTHER(cuGraphLaunch, GRAPH),
	OTHER(cuGraphLaunch_ptsz, GRAPH),
};
#undef OTHER
#undef COOP
#undef LAUNCH_EX
#undef LAUNCH
#undef ROW
#undef AT
#define NWATCHED (sizeof watched / sizeof watched[0])

/* CUPTI's functions, from the libcupti the backstop loaded. */
static struct {
	CUptiResult (*subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
	CUptiResult (*unsubscribe)(CUpti_SubscriberHandle);
	CUptiResult (*enable)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
			      CUpti_CallbackId);
	CUptiResult (*result_string)(CUptiResult, const char **);
} cupti;
static char cupti_path[PATH_MAX];

/* Ours, while subscribed.  The lock orders our subscribe against a
 * profiler's; no driver call is made under it. */
static _Atomic(CUpti_SubscriberHandle) ours;
static pthread_mutex_t sub_lock = PTHREAD_MUTEX_INITIALIZER;
/* The program subscribed (or tried): CUPTI is its own from then on.  Also
 * keeps ctxguard, starting from inside that very call (CUPTI loading the
 * driver), from re-entering CUPTI's subscribe. */
static _Atomic int taken;
static _Atomic int asked, off_once, off_said;
static char off_reason[256];          /* written once, then off_said */

/* The first few launches past the hooks, for the summary and the log. */
enum { NOTED = 4 };
static struct {
	char kernel[160];
	_Atomic(const char *) api;    /* set last: the entry is complete */
} noted[NOTED];
static _Atomic unsigned nnoted;

static const char *result(CUptiResult r)
{
	const char *s = NULL;
	if (cupti.result_string)
		cupti.result_string(r, &s);
	return s ? s : "unknown CUPTI error";
}

/* The backstop stops watching, once, with the reason on stderr, in the log
 * and in the ctxguard command's status (an audit is then incomplete). */
static void off(const char *fmt, const char *a, const char *b)
{
	if (atomic_exchange(&off_once, 1))
		return;
	snprintf(off_reason, sizeof off_reason, fmt, a, b);
	atomic_store_explicit(&off_said, 1, memory_order_release);
	cg_stderr("ctxguard: backstop off: %s\n", off_reason);
	char esc[512];
	cg_json_escape(esc, sizeof esc, off_reason);
	cg_log_event("backstop", "\"state\":\"off\",\"reason\":\"%s\"", esc);
	cg_status_word("unwatched");
}

static void note(const char *api, const char *kernel)
{
	unsigned i = atomic_fetch_add(&nnoted, 1);
	if (i == 0) {
		cg_status_word("unhooked");
		cg_stderr("ctxguard: backstop: %s of %s reached the driver without passing "
			  "ctxguard's hooks; checked at the API's entry and counted as unhooked "
			  "(find the route: ctxguard hooks dlsym, cuGetProcAddress and the "
			  "exported symbols)\n", api, kernel);
	}
	if (i >= NOTED)
		return;
	snprintf(noted[i].kernel, sizeof noted[i].kernel, "%s", kernel);
	atomic_store_explicit(&noted[i].api, api, memory_order_release);
	char esc[sizeof noted[i].kernel * 2];
	cg_json_escape(esc, sizeof esc, kernel);
	cg_log_event("unhooked", "\"api\":\"%s\",\"kernel\":\"%s\"", api, esc);
}

static const char *kernel_name(CUfunction f)
{
	const struct cg_fn *fn = cg_fn_get((uintptr_t)f);
	const char *name = fn ? fn->name : NULL;
	if (!name && (!cg_call.cuFuncGetName || cg_call.cuFuncGetName(&name, f) != CUDA_SUCCESS))
		name = NULL;
	return name ? name : "<unknown kernel>";
}

/* A pointer-sized field of a cu*_params struct, NULL for NONE. */
static void *field(const void *params, short at)
{
	void *v = NULL;
	if (at != NONE)
		memcpy(&v, (const char *)params + at, sizeof v);
	return v;
}

/* A launch past the hooks: the hooks' own check, kinds (a) and (b). */
static void unhooked(const struct watch *w, const void *params)
{
	cg_count(CG_C_UNHOOKED);
	int first = atomic_load_explicit(&nnoted, memory_order_relaxed) < NOTED;
	cg_backstop_checking = 1;
	if (w->shape == MULTI) {
		const cuLaunchCooperativeKernelMultiDevice_params *p = params;
		if (first)
			note(w->api, cg_multi_entries(p->launchParamsList, p->numDevices)
					     ? kernel_name(p->launchParamsList[0].function)
					     : "<no launch>");
		cg_check_each(w->api, p->launchParamsList, p->numDevices);
	} else if (w->shape == GRAPH) {
		/* An executable graph's nodes cannot be read back: they were
		 * checked when set, if that came through the hooks. */
		if (first)
			note(w->api, "<graph>");
	} else {
		CUfunction f = field(params, w->f);
		void *s = field(params, w->stream);
		if (w->shape == CONFIG && s)
			s = ((const CUlaunchConfig *)s)->hStream;
		if (first)
			note(w->api, kernel_name(f));
		if (w->shape == PARAM_SPACE)
			cg_check_launch_space(w->api, f, s);
		else
			cg_check_launch(w->api, f, NULL, s, field(params, w->params),
					field(params, w->extra));
	}
	cg_backstop_checking = 0;
}

/* Whether CUPTI called back at all: every launch through the hooks reaches
 * the driver, where a working CUPTI calls back at its entry.  A libcupti
 * that took the subscription and never calls (a stub on the loader's path)
 * is caught at exit (cg_backstop_summary), from the launches it missed. */
static _Atomic int heard;

static void CUPTIAPI on_api(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
			    const void *cbdata)
{
	(void)userdata;
	if (CG_UNLIKELY(!atomic_load_explicit(&heard, memory_order_relaxed)))
		atomic_store_explicit(&heard, 1, memory_order_relaxed);
	if (CG_LIKELY(cg_hooked_call))
		return;
	const CUpti_CallbackData *d = cbdata;
	if (domain != CUPTI_CB_DOMAIN_DRIVER_API || d->callbackSite != CUPTI_API_ENTER)
		return;
	for (size_t i = 0; i < NWATCHED; i++)
		if (watched[i].cbid == cbid) {
			if (cg_ready(watched[i].api))
				unhooked(&watched[i], d->functionParams);
			return;
		}
}

/* The libcupti already in the process (PyTorch's wheels bring one). */
static int find_loaded(struct dl_phdr_info *info, size_t size, void *out)
{
	(void)size;
	const char *slash = strrchr(info->dlpi_name, '/');
	const char *base = slash ? slash + 1 : info->dlpi_name;
	if (strncmp(base, "libcupti.so", 11) != 0)
		return 0;
	snprintf(out, PATH_MAX, "%s", info->dlpi_name);
	return 1;
}

/* CTXGUARD_CUPTI or else the policy's `cupti` (that file only), the
 * loaded one, the toolkit's, the loader's path; under secure execution
 * neither CTXGUARD_CUPTI nor CUDA_HOME is read (a setuid program must not
 * load a library the caller names), nor under a lock (either could turn a
 * locked backstop off).  Under a lock only the policy's file or the
 * toolkit's is loaded: a stub on LD_LIBRARY_PATH or in LD_PRELOAD would
 * take the subscription and watch nothing.  NULL with `where` saying
 * where it looked. */
static void *load_cupti(char *where, size_t n)
{
	static const char *const names[] = {"libcupti.so", "libcupti.so.13", "libcupti.so.12"};
	const char *env = cg_library_env("CTXGUARD_CUPTI");
	const char *named = env && *env ? env : cg_policy->cupti_path;
	int locked = cg_policy->lock;
	void *h;
	if (named) {
		snprintf(cupti_path, sizeof cupti_path, "%s", named);
		if (!(h = dlopen(named, RTLD_NOW | RTLD_LOCAL)))
			snprintf(where, n, "cannot load %s=%s: %s", named == env ? "CTXGUARD_CUPTI" :
				 "the policy's cupti", named, dlerror());
		return h;
	}
	if (!locked && dl_iterate_phdr(find_loaded, cupti_path) &&
	    (h = dlopen(cupti_path, RTLD_NOW | RTLD_NOLOAD)))
		return h;
	const char *home = cg_library_env("CUDA_HOME");
	if (!home || !*home)
		home = "/usr/local/cuda";
	char toolkit[PATH_MAX];
	snprintf(toolkit, sizeof toolkit, "%s/extras/CUPTI/lib64/", home);
	const char *const dirs[] = {toolkit, ""};      /* "": the loader's path */
	for (size_t d = 0; d < (locked ? 1 : 2); d++)
		for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
			snprintf(cupti_path, sizeof cupti_path, "%s%s", dirs[d], names[k]);
			if ((h = dlopen(cupti_path, RTLD_NOW | RTLD_LOCAL)))
				return h;
		}
	if (locked)
		snprintf(where, n,
			 "libcupti not in %s/extras/CUPTI/lib64, and the locked policy %s names none"
			 " (cupti = /path/to/libcupti.so): under a lock no other place is searched",
			 home, cg_policy->source);
	else
		snprintf(where, n,
			 "libcupti not found (CTXGUARD_CUPTI unset, none loaded, none in "
			 "%s/extras/CUPTI/lib64 or on the loader's path); set CTXGUARD_CUPTI=/path/to/"
			 "libcupti.so",
			 home);
	return NULL;
}

/* Under sub_lock. */
static void subscribe(void)
{
	CUpti_SubscriberHandle s;
	CUptiResult r = atomic_load(&taken) ? CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
					    : cupti.subscribe(&s, on_api, NULL);
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		off("%s%s", "another tool (Nsight Systems, Nsight Compute, a profiler) holds "
			    "CUPTI's callbacks; running without the backstop", "");
		return;
	}
	if (r != CUPTI_SUCCESS) {
		off("cuptiSubscribe failed: %s%s", result(r), "");
		return;
	}
	for (size_t i = 0; i < NWATCHED; i++) {
		r = cupti.enable(1, s, CUPTI_CB_DOMAIN_DRIVER_API, watched[i].cbid);
		if (r != CUPTI_SUCCESS) {
			cupti.unsubscribe(s);
			off("cuptiEnableCallback(%s) failed: %s", watched[i].api, result(r));
			return;
		}
	}
	atomic_store(&ours, s);
}

static void said_on(void)
{
	char esc[PATH_MAX * 2];
	cg_json_escape(esc, sizeof esc, cupti_path);
	cg_log_event("backstop", "\"state\":\"on\",\"cupti\":\"%s\"", esc);
}

/* The self-check, at exit: launches went through the hooks to the driver
 * while subscribed, and CUPTI called back for none of them.  (A launch the
 * driver refuses outright is no probe: the real CUPTI was seen not to call
 * back for cuLaunchKernel of no function.) */
static void prove_live(void)
{
	unsigned long launches = cg_counter_total(CG_C_LAUNCHES);
	if (!atomic_load(&ours) || atomic_load(&heard) || !launches)
		return;
	char n[32];
	snprintf(n, sizeof n, "%lu", launches);
	off("%s never called back, for any of the %s launches made through the hooks: not a "
	    "working CUPTI, so the backstop saw nothing", cupti_path, n);
}

void cg_backstop_start(void)
{
	if (!cg_policy->backstop)
		return;
	atomic_store(&asked, 1);
	char where[PATH_MAX + 256];
	void *h = load_cupti(where, sizeof where);
	if (!h) {
		off("%s%s", where, "");
		return;
	}
#define SYM(field, name) *(void **)&cupti.field = cg_real_dlsym(h, name)
	SYM(subscribe, "cuptiSubscribe");
	SYM(unsubscribe, "cuptiUnsubscribe");
	SYM(enable, "cuptiEnableCallback");
	SYM(result_string, "cuptiGetResultString");
#undef SYM
	if (!cupti.subscribe || !cupti.unsubscribe || !cupti.enable) {
		off("%s has no callback API (cuptiSubscribe...)%s", cupti_path, "");
		return;
	}
	pthread_mutex_lock(&sub_lock);
	subscribe();
	int subscribed = atomic_load(&ours) != NULL;
	pthread_mutex_unlock(&sub_lock);
	if (subscribed)
		said_on();
}

/* A thread of the parent may have been inside CUPTI's subscribe, holding
 * the lock, at the fork: the child, which starts anew, would wait on it for
 * ever. */
void cg_backstop_on_fork(void)
{
	pthread_mutex_init(&sub_lock, NULL);
}

/* A profiler subscribes: CUPTI has room for one, and a user's profile must
 * never fail because of ctxguard, so the backstop gives its place up. */
static void make_room(void)
{
	pthread_mutex_lock(&sub_lock);
	atomic_store(&taken, 1);
	CUpti_SubscriberHandle s = atomic_exchange(&ours, NULL);
	if (s)
		cupti.unsubscribe(s);
	pthread_mutex_unlock(&sub_lock);
	if (!s)
		return;
	/* Counted, and the audit fails (unwatched): under a lock, this is
	 * the program switching the operator's backstop off. */
	cg_count(CG_C_BACKSTOP_YIELDED);
	off("%s%s", "a profiler took CUPTI's callbacks (cuptiSubscribe); launches past "
		    "the hooks are no longer watched (counted as backstop_yielded)", "");
}

/* The program's own cuptiSubscribe[_v2]: what its dlsym found, else the
 * next definition after ours, else the loaded libcupti's (one a library
 * brought in with RTLD_LOCAL is not "next"). */
static _Atomic(void *) program_subscribe, program_subscribe_v2;

static void *real_for(_Atomic(void *) *found, const char *name)
{
	void *p = atomic_load(found);
	if (!p)
		p = cg_real_dlsym(RTLD_NEXT, name);
	char path[PATH_MAX];
	void *h;
	if (!p && dl_iterate_phdr(find_loaded, path) && (h = dlopen(path, RTLD_NOW | RTLD_NOLOAD))) {
		p = cg_real_dlsym(h, name);
		dlclose(h);
	}
	return p;
}

CG_EXPORT CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *subscriber,
					      CUpti_CallbackFunc fn, void *userdata)
{
	CUptiResult (*real)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *) =
		(CUptiResult(*)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *))real_for(
			&program_subscribe, "cuptiSubscribe");
	if (!real)
		return CUPTI_ERROR_NOT_INITIALIZED;
	make_room();
	return real(subscriber, fn, userdata);
}

CG_EXPORT CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle *subscriber,
						 CUpti_CallbackFunc fn, void *userdata,
						 CUpti_SubscriberParams *params)
{
	CUptiResult (*real)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *,
			    CUpti_SubscriberParams *) =
		(CUptiResult(*)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *,
				CUpti_SubscriberParams *))real_for(&program_subscribe_v2,
								   "cuptiSubscribe_v2");
	if (!real)
		return CUPTI_ERROR_NOT_INITIALIZED;
	make_room();
	return real(subscriber, fn, userdata, params);
}

void *cg_backstop_hook_for(const char *name, void *real)
{
	/* A lookup that found our own export (RTLD_DEFAULT) is no real one. */
	if (strncmp(name, "cuptiSubscribe", 14) != 0 || real == (void *)cuptiSubscribe ||
	    real == (void *)cuptiSubscribe_v2)
		return NULL;
	if (strcmp(name + 14, "") == 0) {
		atomic_store(&program_subscribe, real);
		return (void *)cuptiSubscribe;
	}
	if (strcmp(name + 14, "_v2") == 0) {
		atomic_store(&program_subscribe_v2, real);
		return (void *)cuptiSubscribe_v2;
	}
	return NULL;
}

void cg_backstop_summary(char *line, size_t nline, char *json, size_t njson)
{
	*line = *json = 0;
	if (!atomic_load(&asked))
		return;
	prove_live();
	unsigned long n = cg_counter_total(CG_C_UNHOOKED);
	int is_off = atomic_load_explicit(&off_said, memory_order_acquire);
	char first[NOTED * 200], first_json[NOTED * 400];
	struct cg_out o, oj;
	cg_out_init(&o, first, sizeof first);
	cg_out_init(&oj, first_json, sizeof first_json);
	for (unsigned i = 0; i < NOTED; i++) {
		const char *api = atomic_load_explicit(&noted[i].api, memory_order_acquire);
		if (!api)
			continue;
		char esc[sizeof noted[i].kernel * 2];
		cg_json_escape(esc, sizeof esc, noted[i].kernel);
		cg_out_printf(&o, "%s%s of %s", o.len ? ", " : " (", api, noted[i].kernel);
		cg_out_printf(&oj, "%s{\"api\":\"%s\",\"kernel\":\"%s\"}", oj.len ? "," : "", api,
			      esc);
	}
	snprintf(line, nline, "; backstop%s: unhooked %lu%s%s", is_off ? " off" : "", n, first,
		 o.len ? ")" : "");
	char esc[sizeof off_reason * 2] = "";
	if (is_off)
		cg_json_escape(esc, sizeof esc, off_reason);
	snprintf(json, njson, ",\"backstop\":{\"on\":%s,\"off_reason\":%s%s%s,\"unhooked\":%lu,"
		 "\"first_unhooked\":[%s]}",
		 is_off ? "false" : "true", is_off ? "\"" : "", is_off ? esc : "null",
		 is_off ? "\"" : "", n, first_json);
}
