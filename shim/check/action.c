/* What happens on a crossing: abort, error, warn or nothing, as the policy
 * says for the kernel's rule. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"
#include "../report/report.h"

/* The error action's message for cuGetErrorString, per thread: a framework
 * turns the refused launch into an exception carrying it (DeepGEMM formats
 * cuGetErrorName/cuGetErrorString into its RuntimeError). */
_Thread_local CUresult cg_refused_code CG_TLS;
static _Thread_local char *refused_text CG_TLS;   /* per thread, on first refusal */
static pthread_key_t text_key;
static pthread_once_t text_once = PTHREAD_ONCE_INIT;
enum { TEXT = 2048 };

static void make_key(void)
{
	pthread_key_create(&text_key, free);
}

static char *text_buffer(void)
{
	if (!refused_text) {
		pthread_once(&text_once, make_key);
		refused_text = malloc(TEXT);
		pthread_setspecific(text_key, refused_text);
	}
	return refused_text;
}

/* Where fn came from, for reports: its file, image hash or image. */
static const char *fn_origin(const struct cg_fn *fn)
{
	const struct cg_mod *m = fn->mod;
	return !m ? NULL : m->path ? m->path : m->hash ? m->hash : m->image;
}

void cg_crossing_init(struct cg_crossing *c, enum cg_crossing_kind kind, const char *api, const struct cg_fn *fn,
		      CUcontext launch_ctx, int launch_dev, CUstream stream)
{
	*c = (struct cg_crossing){
		.kind = kind,
		.api = api,
		.kernel = fn->name,
		.demangled = fn->demangled,
		.origin = fn_origin(fn),
		.load_api = fn->via,
		.function = (const void *)fn->handle,
		.owner_ctx = fn->owner,
		.owner_dev = fn->dev,
		.launch_ctx = launch_ctx,
		.launch_dev = launch_dev,
		.stream = stream,
		.rule = fn->rule,
	};
	c->owner_pci = cg_device_pci(fn->dev);
	c->owner_uuid = cg_device_uuid(fn->dev);
	c->launch_pci = cg_device_pci(launch_dev);
	c->launch_uuid = cg_device_uuid(launch_dev);
}

/* Redirect is carried out by the launch hook, which has the whole launch. */
enum cg_verdict cg_act(struct cg_crossing *c, const struct cg_fn *fn)
{
	int action = cg_policy_action(cg_policy, c->rule);
	if (CG_UNLIKELY(cg_backstop_checking)) {
		c->unhooked = 1;
		c->asked = action;
		if (action >= CG_ACT_ERROR)
			action = CG_ACT_ABORT;
	}
	if (action == CG_ACT_REDIRECT)
		return CG_REDIRECT;
	return cg_act_as(c, fn, action);
}

enum cg_verdict cg_act_as(struct cg_crossing *c, const struct cg_fn *fn, int action)
{
	c->action = action;
	c->pid = getpid();
	c->tid = syscall(SYS_gettid);
	static const enum cg_counter counter[] = {
		[CG_ACT_OFF] = CG_C_CROSS_OFF, [CG_ACT_WARN] = CG_C_CROSS_WARN,
		[CG_ACT_ERROR] = CG_C_CROSS_ERROR, [CG_ACT_ABORT] = CG_C_CROSS_ABORT,
	};
	cg_count(counter[action]);
	if (action == CG_ACT_OFF)
		return CG_PASS;
	cg_status_crossing(action);

	unsigned long n = atomic_fetch_add(&((struct cg_fn *)fn)->reports, 1);
	if (n < (unsigned long)cg_policy->print_limit || action == CG_ACT_ABORT) {
		/* Slow path: the buffers are sized for 2 KB demangled names
		 * (a longer record gets one of its own: cg_log_crossing) and
		 * come from the heap, not from a possibly small stack. */
		enum { JSON = 12288, REPORT = 16384 };
		char *buf = malloc(JSON + REPORT);
		if (buf) {
			cg_log_crossing(c, buf, JSON);
			cg_format_report(buf + JSON, REPORT, cg_policy, c);
			cg_write_stderr(buf + JSON);
			free(buf);
		}
		if (n + 1 == (unsigned long)cg_policy->print_limit && action != CG_ACT_ABORT)
			cg_stderr("ctxguard: further crossings by %s are counted, not printed "
				  "(see the summary at exit)\n", fn->name);
	}

	switch (action) {
	case CG_ACT_ABORT:
		/* abort() skips the destructors: the summary record and the
		 * metrics go first, through files of their own and with no lock
		 * this thread could be holding, so that the operator's counts
		 * see the crossing that stopped the program. */
		cg_report_summary();
		abort();
	case CG_ACT_ERROR: {
		char *text = text_buffer();
		cg_refused_code = (CUresult)cg_policy->error_code;
		if (!text)
			return CG_REFUSE;
		if (c->kind == CG_KIND_OPERAND)
			snprintf(text, TEXT,
				 "%s [ctxguard: %s refused: kernel %s launched on device %d "
				 "with parameter %d on device %d%s]",
				 cg_crossing_message(cg_policy, c->rule), c->api, c->kernel,
				 c->launch_dev, c->operands[0].param, c->operands[0].dev,
				 c->noperands > 1 ? " and more operands on other devices" : "");
		else
			snprintf(text, TEXT,
				 "%s [ctxguard: %s refused: kernel %s belongs to device %d, "
				 "launched on device %d]",
				 cg_crossing_message(cg_policy, c->rule), c->api, c->kernel,
				 c->owner_dev, c->launch_dev);
		return CG_REFUSE;
	}
	default:
		return CG_PASS;
	}
}

/* The message that replaces cuGetErrorString's for this thread, or NULL. */
static const char *error_message(CUresult code)
{
	return cg_refused_code != CUDA_SUCCESS && cg_refused_code == code ? refused_text : NULL;
}

CUresult cg_on_cuGetErrorString(const struct cg_variant *v, CUresult error, const char **str)
{
	const char *mine = error_message(error);
	if (mine && str) {
		*str = mine;
		return CUDA_SUCCESS;
	}
	return CG_REAL(cuGetErrorString, v)(error, str);
}
