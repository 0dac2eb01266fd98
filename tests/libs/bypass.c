/* A library preloaded ahead of ctxguard that defines cuLaunchKernel and
 * takes the call to the driver by a route no hook covers (the fake's own
 * entry point), as an interposer of another tool might: the program's
 * launches then pass the hooks.  The shim says so at start-up; a locked
 * backstop sees the launches. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <cuda.h>
#include <dlfcn.h>

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
			      unsigned, unsigned, CUstream, void **, void **);

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
			unsigned by, unsigned bz, unsigned shared, CUstream stream, void **params,
			void **extra)
{
	void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	void *(*entry)(const char *, int) =
		(void *(*)(const char *, int))(cuda ? dlsym(cuda, "fake_entry_point") : NULL);
	launch_fn real = (launch_fn)(entry ? entry("cuLaunchKernel", 0) : NULL);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	return real(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}
