/* The driver calls that order work, in the order they were made: what the
 * tests of the redirect path assert (events, waits, stream creation,
 * launches).  A bounded log under the global lock; fake_trace_start clears
 * it. */
#include <stdio.h>
#include <string.h>

#include "fake.h"

#define TRACE_MAX 4096

static struct fake_call calls[TRACE_MAX];
static size_t ncalls;

void fake_trace_note(const char *api, CUcontext ctx, const void *stream, const void *object,
		     const char *kernel)
{
	if (ncalls == TRACE_MAX)
		return;
	struct fake_call *c = &calls[ncalls++];
	snprintf(c->api, sizeof c->api, "%s", api);
	c->ctx = ctx;
	c->stream = stream;
	c->object = object;
	snprintf(c->kernel, sizeof c->kernel, "%s", kernel ? kernel : "");
}

void fake_trace_start(void)
{
	fake_lock();
	ncalls = 0;
	fake_unlock();
}

size_t fake_trace(struct fake_call *out, size_t max)
{
	fake_lock();
	size_t n = ncalls < max ? ncalls : max;
	memcpy(out, calls, n * sizeof *out);
	fake_unlock();
	return n;
}
