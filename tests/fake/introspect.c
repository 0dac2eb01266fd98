/* The introspection API of fake_api.h: counters, the last launch, injected failures. */
#include <stdio.h>
#include <string.h>

#include "fake.h"

#define MAX_INJECTED 32

struct fake_stats fake_counters;

static struct fake_launch_info last;
static bool have_last;

static struct {
	char api[128];
	CUresult rc;
} injected[MAX_INJECTED];
static size_t ninjected;

void fake_note_launch(CUcontext ctx, const struct fake_kdesc *kd, const unsigned char *buf,
		      unsigned crossings)
{
	fake_counters.launches++;
	fake_counters.launches_on[ctx->dev]++;
	last.ctx = ctx;
	last.device = ctx->dev;
	snprintf(last.kernel, sizeof(last.kernel), "%s", kd->name);
	last.crossings = crossings;
	last.argbytes = kd->argbytes;
	memset(last.args, 0, sizeof(last.args));
	memcpy(last.args, buf, kd->argbytes < sizeof(last.args) ? kd->argbytes : sizeof(last.args));
	have_last = true;
}

/* `sym` is an entry point's own name: "cuMemAlloc_v2" is a variant of "cuMemAlloc". */
static bool variant_of(const char *sym, const char *api)
{
	size_t n = strlen(api);
	return strncmp(sym, api, n) == 0 && (sym[n] == '\0' || sym[n] == '_');
}

CUresult fake_take_injected(const char *api)
{
	for (size_t i = 0; i < ninjected; i++) {
		if (!variant_of(api, injected[i].api))
			continue;
		CUresult rc = injected[i].rc;
		memmove(&injected[i], &injected[i + 1], (ninjected - i - 1) * sizeof(injected[0]));
		ninjected--;
		return rc;
	}
	return CUDA_SUCCESS;
}

void fake_fail_next(const char *api, CUresult rc)
{
	if (!api || strlen(api) >= sizeof(injected[0].api))
		return;
	fake_lock();
	if (ninjected < MAX_INJECTED) {
		snprintf(injected[ninjected].api, sizeof(injected[0].api), "%s", api);
		injected[ninjected].rc = rc;
		ninjected++;
	}
	fake_unlock();
}

/* One hook to run after a call; moved to the calling thread when the call
 * enters, run by it as the call leaves, outside the lock. */
static struct {
	char api[128];
	void (*fn)(void *);
	void *arg;
} after;
bool fake_after_armed;
_Thread_local struct fake_due fake_due __attribute__((tls_model("initial-exec")));

void fake_after_next(const char *api, void (*fn)(void *), void *arg)
{
	if (!api || strlen(api) >= sizeof(after.api))
		return;
	fake_lock();
	snprintf(after.api, sizeof(after.api), "%s", api);
	after.fn = fn;
	after.arg = arg;
	fake_after_armed = fn != NULL;
	fake_unlock();
}

void fake_take_after(const char *api)
{
	if (!variant_of(api, after.api))
		return;
	fake_due.fn = after.fn;
	fake_due.arg = after.arg;
	after.fn = NULL;
	fake_after_armed = false;
}

void fake_run_after(void)
{
	void (*fn)(void *) = fake_due.fn;
	fake_due.fn = NULL;
	fn(fake_due.arg);
}

void fake_get_stats(struct fake_stats *out)
{
	fake_lock();
	*out = fake_counters;
	fake_unlock();
}

int fake_last_launch(struct fake_launch_info *out)
{
	fake_lock();
	bool have = have_last;
	if (have)
		*out = last;
	fake_unlock();
	return have;
}

void fake_reset(void)
{
	fake_lock();
	memset(&fake_counters, 0, sizeof(fake_counters));
	memset(&last, 0, sizeof(last));
	have_last = false;
	after.fn = NULL;
	fake_after_armed = false;
	ninjected = 0;
	fake_unlock();
}
