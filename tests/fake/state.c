/* The global lock every entry point takes, and the gate in front of it. */
#include "fake.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool initialized;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* A child forked while another thread held the lock would deadlock on it: hold it
 * across fork so the state is consistent on both sides. */
static void before_fork(void)
{
	pthread_mutex_lock(&lock);
}
static void after_fork(void)
{
	pthread_mutex_unlock(&lock);
}
static void register_atfork(void)
{
	pthread_atfork(before_fork, after_fork, after_fork);
}

void fake_lock(void)
{
	pthread_once(&atfork_once, register_atfork);
	pthread_mutex_lock(&lock);
}

void fake_unlock(void)
{
	pthread_mutex_unlock(&lock);
}

bool fake_initialized(void)
{
	return initialized;
}

void fake_set_initialized(void)
{
	initialized = true;
}

CUresult fake_enter(const char *api, bool need_init)
{
	fake_lock();
	CUresult rc =
		need_init && !initialized ? CUDA_ERROR_NOT_INITIALIZED : fake_take_injected(api);
	if (rc != CUDA_SUCCESS)
		fake_unlock();
	else if (fake_after_armed)
		fake_take_after(api);
	return rc;
}

CUresult fake_leave(CUresult rc)
{
	fake_unlock();
	if (fake_due.fn)
		fake_run_after();
	return rc;
}
