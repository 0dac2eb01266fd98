/* A library the tests load themselves (dlopen, RTLD_LOCAL), for what only
 * a separately loaded object shows:
 * - dlsym(RTLD_DEFAULT) and dlvsym(RTLD_DEFAULT) called from inside it
 *   (tests/progs/localdl.c): the loader searches the global scope and then
 *   the caller's own local scope, so it finds this library's symbols;
 * - a constructor that blocks while CG_TEST_HOLD names a FIFO, until its
 *   writer closes it (tests/progs/forkstart.c: loaded as CTXGUARD_CUPTI, it
 *   holds the shim's start-up in progress);
 * - a constructor that, while CG_TEST_WATCH names the shim's policy file,
 *   waits (holding the loader lock, as every constructor run by dlopen
 *   does) until another thread's start-up opens that file, then looks up
 *   and calls hooked entry points (tests/progs/loaderlock.c); it says what
 *   it found in cgtest_during_start_up. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include "../hold.h"

int cgtest_marker = 1;
int cuCgtestMarker = 2;    /* a "cu" name, as libcuda's are */

/* Not tail calls: the loader must see this library as the caller. */
void *cgtest_dlsym_default(const char *name)
{
	void *volatile p = dlsym(RTLD_DEFAULT, name);
	return p;
}

void *cgtest_dlvsym_default(const char *name, const char *version)
{
	void *volatile p = dlvsym(RTLD_DEFAULT, name, version);
	return p;
}

__attribute__((constructor)) static void hold(void)
{
	const char *fifo = getenv("CG_TEST_HOLD");
	if (!fifo || !*fifo)
		return;
	hold_on_fifo(fifo);
}

const char *cgtest_during_start_up = "not run";

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The lookups and calls, each answered as it would be after start-up
 * (lookups: the shim's wrapper) or passed through to the driver. */
static const char *lookups_and_calls(void)
{
	static char why[256];
	void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	if (!cuda)
		return "libcuda.so.1 is not loaded";
	double t0 = now();
	void *launch = dlsym(cuda, "cuLaunchKernel");
	double t1 = now();
	void *wrapper = dlsym(RTLD_DEFAULT, "cuLaunchKernel");
	CUresult (*procaddr)(const char *, void **, int, cuuint64_t,
			     CUdriverProcAddressQueryResult *) = dlsym(cuda, "cuGetProcAddress_v2");
	CUresult (*error_string)(CUresult, const char **) = dlsym(cuda, "cuGetErrorString");
	if (!procaddr || !error_string)
		return "cuGetProcAddress_v2 or cuGetErrorString not found";
	void *found = NULL;
	CUdriverProcAddressQueryResult status;
	CUresult rc = procaddr("cuLaunchKernel", &found, 12000, 0, &status);
	const char *s1 = NULL, *s2 = NULL;
	CUresult e1 = error_string(CUDA_ERROR_INVALID_VALUE, &s1);
	CUresult e2 = error_string(CUDA_ERROR_INVALID_HANDLE, &s2);
	double t2 = now();
	dlclose(cuda);
	if (!launch || launch != wrapper)
		snprintf(why, sizeof why, "dlsym(libcuda, cuLaunchKernel) = %p, not the wrapper %p",
			 launch, wrapper);
	else if (rc != CUDA_SUCCESS || found != wrapper)
		snprintf(why, sizeof why, "cuGetProcAddress_v2(cuLaunchKernel) = %d, %p, not the "
			 "wrapper %p", (int)rc, found, wrapper);
	else if (e1 != CUDA_SUCCESS || e2 != CUDA_SUCCESS || !s1 || !s2)
		snprintf(why, sizeof why, "cuGetErrorString returned %d and %d", (int)e1, (int)e2);
	else if (t2 - t1 > (t1 - t0) / 2)
		snprintf(why, sizeof why, "the later calls waited again: %.3f s after %.3f s",
			 t2 - t1, t1 - t0);
	else
		return "ok";
	return why;
}

__attribute__((constructor)) static void during_start_up(void)
{
	const char *watch = getenv("CG_TEST_WATCH"), *ready = getenv("CG_TEST_READY_FD");
	if (!watch || !*watch || !ready)
		return;
	int in = inotify_init1(IN_CLOEXEC);
	int watching = in >= 0 && inotify_add_watch(in, watch, IN_OPEN) >= 0;
	if (write(atoi(ready), "r", 1) != 1 || !watching) {
		cgtest_during_start_up = "cannot watch the policy file";
		return;
	}
	char event[sizeof(struct inotify_event) + NAME_MAX + 1];
	if (read(in, event, sizeof event) <= 0) {
		cgtest_during_start_up = "cannot read the watch";
		return;
	}
	close(in);
	cgtest_during_start_up = lookups_and_calls();
}
