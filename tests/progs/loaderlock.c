/* The shim's first start-up against glibc's loader lock.  Thread B loads
 * LIBRARY (libcgtest.so), whose constructor, holding the loader lock,
 * waits until the shim opens its policy file POLICY: start-up is then under
 * way on the main thread, which will need the loader lock itself.  The
 * constructor then looks up and calls hooked entry points.  Exit 0 and
 * "loaderlock: ok" when both threads get through and the constructor saw
 * its lookups answered as after start-up; SIGALRM when they deadlock. */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *load(void *library)
{
	return dlopen(library, RTLD_NOW | RTLD_LOCAL);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: loaderlock LIBRARY POLICY\n");
		return 2;
	}
	alarm(20);
	void *libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	int ready[2];
	char fd[16];
	if (!libcuda || pipe(ready) != 0)
		return 2;
	snprintf(fd, sizeof fd, "%d", ready[1]);
	if (setenv("CG_TEST_WATCH", argv[2], 1) || setenv("CG_TEST_READY_FD", fd, 1))
		return 2;
	pthread_t b;
	if (pthread_create(&b, NULL, load, argv[1]) != 0)
		return 2;
	char c;
	if (read(ready[0], &c, 1) != 1)
		return 2;
	/* B is in the constructor: the first hooked call starts the shim (an
	 * exported one: a dlsym would wait for the loader lock first). */
	const char *s = NULL;
	if (cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s) != CUDA_SUCCESS || !s)
		return 2;
	void *library;
	pthread_join(b, &library);
	const char **said = library ? dlsym(library, "cgtest_during_start_up") : NULL;
	printf("loaderlock: constructor: %s\n", said ? *said : dlerror());
	if (!said || strcmp(*said, "ok") != 0)
		return 1;
	void *launch = dlsym(libcuda, "cuLaunchKernel");
	if (!launch || launch != dlsym(RTLD_DEFAULT, "cuLaunchKernel")) {
		puts("loaderlock: a lookup after start-up did not return the wrapper");
		return 1;
	}
	puts("loaderlock: ok");
	return 0;
}
