/* A program without the driver, under the shim: everything must behave as
 * if the shim were not there.  Exit 0 and "nocuda: ok" when it does. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			 unsigned, void *, void **, void **);

int main(void)
{
	/* Ordinary lookups pass through. */
	if (dlsym(RTLD_DEFAULT, "strlen") != (void *)strlen) {
		puts("nocuda: dlsym(RTLD_DEFAULT) broken");
		return 1;
	}
	/* RTLD_NEXT is relative to this program: the next dlsym after it is
	 * the preloaded one, not libc's. */
	if (dlsym(RTLD_NEXT, "dlsym") != (void *)dlsym) {
		puts("nocuda: dlsym(RTLD_NEXT) resolved relative to the wrong object");
		return 1;
	}
	/* A libc function no sanitizer runtime intercepts. */
	if (dlvsym(RTLD_DEFAULT, "strverscmp", "GLIBC_2.2.5") != dlsym(RTLD_DEFAULT, "strverscmp")) {
		puts("nocuda: dlvsym broken");
		return 1;
	}
	/* The shim's exported entry point, with no driver behind it. */
	launch_fn launch = (launch_fn)dlsym(RTLD_DEFAULT, "cuLaunchKernel");
	if (launch) {
		int rc = launch(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
		if (rc != 3) {      /* CUDA_ERROR_NOT_INITIALIZED */
			printf("nocuda: cuLaunchKernel returned %d\n", rc);
			return 1;
		}
	}
	/* Lookups of "cu" names that are not CUDA's, and the shim's own
	 * entry points, must not have pulled the driver in. */
	dlsym(RTLD_DEFAULT, "curl_easy_init");
	if (dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD)) {
		puts("nocuda: libcuda is loaded");
		return 1;
	}
	puts("nocuda: ok");
	return 0;
}
