/* Loads the library the way ctypes does, after start-up (no preload):
 * a library with initial-exec TLS must fit glibc's static TLS surplus. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: dlopen LIBRARY\n");
		return 2;
	}
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		printf("dlopen: %s\n", dlerror());
		return 1;
	}
	printf("dlopen: ok\n");
	return 0;
}
