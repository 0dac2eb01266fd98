/* Reaches a second copy of the CUDA driver after the first CUDA call:
 *   drivers copy PATH     looks cuLaunchKernel up in the copy at PATH
 *   drivers dlmopen NAME  loads NAME into a namespace of its own
 * and prints what it got. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: drivers copy PATH | dlmopen NAME\n");
		return 2;
	}
	if (cuInit(0) != CUDA_SUCCESS)
		return 3;
	if (strcmp(argv[1], "copy") == 0) {
		void *h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			printf("dlopen: %s\n", dlerror());
			return 1;
		}
		printf("lookup: %s\n", dlsym(h, "cuLaunchKernel") ? "found" : "refused");
		return 0;
	}
	printf("dlmopen: %s\n", dlmopen(LM_ID_NEWLM, argv[2], RTLD_NOW) ? "loaded" : "refused");
	return 0;
}
