/* Fake CUPTI (build/fake/cupti/libcupti.so): the callback API's subscriber
 * protocol over the fake driver's launch callbacks.  As in CUPTI, one
 * subscriber at a time (a second gets
 * CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED), nothing is enabled at
 * subscribe, and a callback receives a CUpti_CallbackData whose
 * functionParams points at the call's cu*_params struct.  Like CUPTI it
 * may be loaded before the driver: libcuda is found at subscribe.
 * CG_FAKE_CUPTI_STUB=1 makes it a stub that never calls back.
 * While CG_FAKE_CUPTI_HOLD names a FIFO, the first subscribe blocks until
 * the FIFO's writer closes it (tests/progs/forkstart.c forks then). */
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../../hold.h"
#include "../fake_api.h"

struct CUpti_Subscriber_st {
	int live;
	CUpti_CallbackFunc fn;
	void *userdata;
	unsigned char on[CUPTI_DRIVER_TRACE_CBID_SIZE];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct CUpti_Subscriber_st sub;
static uint32_t correlation;

static void dispatch(int site, unsigned cbid, const char *name, const void *params, CUcontext ctx,
		     CUresult *rc)
{
	pthread_mutex_lock(&lock);
	int on = sub.live && cbid < CUPTI_DRIVER_TRACE_CBID_SIZE && sub.on[cbid];
	CUpti_CallbackFunc fn = sub.fn;
	void *userdata = sub.userdata;
	uint32_t id = site == CUPTI_API_ENTER ? ++correlation : correlation;
	pthread_mutex_unlock(&lock);
	if (!on)
		return;
	uint64_t shared = 0;
	CUpti_CallbackData d = {
		.callbackSite = (CUpti_ApiCallbackSite)site,
		.functionName = name,
		.functionParams = params,
		.functionReturnValue = rc,
		.context = ctx,
		.correlationData = &shared,
		.correlationId = id,
	};
	fn(userdata, CUPTI_CB_DOMAIN_DRIVER_API, cbid, &d);
}

/* Once per process image: a fork child inherits "held". */
static void hold_once(void)
{
	static _Atomic int held;
	const char *fifo = getenv("CG_FAKE_CUPTI_HOLD");
	if (!fifo || !*fifo || atomic_exchange(&held, 1))
		return;
	hold_on_fifo(fifo);
}

static CUptiResult subscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc fn,
			     void *userdata)
{
	hold_once();
	if (!subscriber)
		return CUPTI_ERROR_INVALID_PARAMETER;
	void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
	void (*set)(fake_api_tracer) =
		(void (*)(fake_api_tracer))(cuda ? dlsym(cuda, "fake_api_tracer_set") : NULL);
	if (!set)
		return CUPTI_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&lock);
	if (sub.live) {
		pthread_mutex_unlock(&lock);
		return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	}
	memset(&sub, 0, sizeof sub);
	sub.live = 1;
	sub.fn = fn;
	sub.userdata = userdata;
	pthread_mutex_unlock(&lock);
	/* CG_FAKE_CUPTI_STUB: a stub that takes the subscription and never
	 * calls back. */
	const char *stub = getenv("CG_FAKE_CUPTI_STUB");
	if (!stub || !*stub)
		set(dispatch);
	*subscriber = &sub;
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc fn,
				    void *userdata)
{
	return subscribe(subscriber, fn, userdata);
}

CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc fn,
				       void *userdata, CUpti_SubscriberParams *params)
{
	if (params && params->structSize == 0)
		return CUPTI_ERROR_INVALID_PARAMETER;
	return subscribe(subscriber, fn, userdata);
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber)
{
	CUptiResult rc = CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&lock);
	if (subscriber == &sub && sub.live) {
		sub.live = 0;
		rc = CUPTI_SUCCESS;
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

static CUptiResult enable(uint32_t on, CUpti_SubscriberHandle subscriber,
			  CUpti_CallbackDomain domain, long cbid)
{
	CUptiResult rc = CUPTI_SUCCESS;
	pthread_mutex_lock(&lock);
	if (subscriber != &sub || !sub.live || cbid >= CUPTI_DRIVER_TRACE_CBID_SIZE)
		rc = CUPTI_ERROR_INVALID_PARAMETER;
	/* Only the driver domain is modelled: the others are accepted and
	 * never called back. */
	else if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid >= 0)
		sub.on[cbid] = on != 0;
	else if (domain == CUPTI_CB_DOMAIN_DRIVER_API)
		memset(sub.on, on != 0, sizeof sub.on);
	pthread_mutex_unlock(&lock);
	return rc;
}

CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t on, CUpti_SubscriberHandle subscriber,
					 CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
	return enable(on, subscriber, domain, (long)cbid);
}

CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t on, CUpti_SubscriberHandle subscriber,
				       CUpti_CallbackDomain domain)
{
	return enable(on, subscriber, domain, -1);
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char **str)
{
	static const char *const names[] = {
		[CUPTI_SUCCESS] = "CUPTI_SUCCESS",
		[CUPTI_ERROR_INVALID_PARAMETER] = "CUPTI_ERROR_INVALID_PARAMETER",
		[CUPTI_ERROR_NOT_INITIALIZED] = "CUPTI_ERROR_NOT_INITIALIZED",
		[CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED] =
			"CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED",
	};
	if (!str)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*str = (unsigned)result < sizeof names / sizeof names[0] && names[result]
		       ? names[result]
		       : "CUPTI_ERROR_UNKNOWN";
	return CUPTI_SUCCESS;
}
