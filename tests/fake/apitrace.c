/* CUPTI's driver-API callbacks as the fake delivers them: at entry, before
 * the call takes the driver's lock (a subscriber may call the driver from
 * its callback, as CUPTI allows), and at exit with the result.  The fake
 * libcupti (tests/fake/cupti/) installs its dispatcher here. */
#include "fake.h"

static _Atomic(fake_api_tracer) tracer;

void fake_api_tracer_set(fake_api_tracer t)
{
	atomic_store_explicit(&tracer, t, memory_order_release);
}

void fake_api_trace(int site, unsigned cbid, const char *name, const void *params, CUresult *rc)
{
	fake_api_tracer t = atomic_load_explicit(&tracer, memory_order_acquire);
	if (t)
		t(site, cbid, name, params, fake_ctx_current(), rc);
}
