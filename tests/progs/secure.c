/* A CUDA program for the secure-execution test, installed setuid by it.
 * The loader ignores LD_PRELOAD and LD_LIBRARY_PATH in such a program, so
 * it loads the fake driver and the shim itself, by absolute path, and calls
 * the shim's exports.  It launches a plain kernel across contexts (checked
 * only under scope all), then DeepGEMM's kernel with a pointer operand on
 * the other device (stopped under the built-in policy).
 *
 *   secure LIBCUDA LIBCTXGUARD
 * Prints "at_secure N", "plain: RC" and, if the second launch returns,
 * "expert: RC". */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#define EXPERT "_ZN9deep_gemm19sm90_bf16_gemm_implILj0EEEvPijjj14CUtensorMap_stS2_S2_"

static void *cuda, *shim;

/* The shim's wrapper where it has one, else the driver's own. */
static void *fn(const char *name)
{
	void *f = dlsym(shim, name);
	if (!f)
		f = dlsym(cuda, name);
	if (!f) {
		fprintf(stderr, "secure: no %s\n", name);
		exit(1);
	}
	return f;
}

#define CALL(name, ...) ((CUresult(*)())fn(#name))(__VA_ARGS__)
#define CHECK(call)                                                              \
	do {                                                                     \
		CUresult rc_ = (call);                                           \
		if (rc_ != CUDA_SUCCESS) {                                       \
			fprintf(stderr, "secure: %s failed: %d\n", #call, rc_);   \
			exit(1);                                                 \
		}                                                                \
	} while (0)

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: secure LIBCUDA LIBCTXGUARD\n");
		return 1;
	}
	printf("at_secure %lu\n", getauxval(AT_SECURE));
	fflush(stdout);
	/* The shim first, as a preload would be: its references to its own
	 * exports must bind to itself, not to the driver's. */
	shim = dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL);
	cuda = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
	if (!cuda || !shim) {
		fprintf(stderr, "secure: %s\n", dlerror());
		return 1;
	}
	static const char image[] = "//ctxguard-fake-image\n"
				    ".kernel " EXPERT " 8,4,4,4,128,128,128\n"
				    ".kernel vector_add 8,8,8,4\n";
	CUdevice d0, d1;
	CUcontext c0, c1;
	CUmodule mod;
	CUfunction plain, expert;
	CUdeviceptr other;
	CHECK(CALL(cuInit, 0u));
	CHECK(CALL(cuDeviceGet, &d0, 0));
	CHECK(CALL(cuDeviceGet, &d1, 1));
	CHECK(CALL(cuDevicePrimaryCtxRetain, &c0, d0));
	CHECK(CALL(cuDevicePrimaryCtxRetain, &c1, d1));
	CHECK(CALL(cuCtxSetCurrent, c1));
	CHECK(CALL(cuMemAlloc_v2, &other, (size_t)4096));
	CHECK(CALL(cuCtxSetCurrent, c0));
	CHECK(CALL(cuModuleLoadData, &mod, image));
	CHECK(CALL(cuModuleGetFunction, &plain, mod, "vector_add"));
	CHECK(CALL(cuModuleGetFunction, &expert, mod, EXPERT));

	CUdeviceptr a = other, b = other;
	int n = 1;
	void *plain_args[] = {&a, &b, &a, &n};
	CHECK(CALL(cuCtxSetCurrent, c1));
	printf("plain: %d\n", (int)CALL(cuLaunchKernel, plain, 1u, 1u, 1u, 1u, 1u, 1u, 0u,
					(CUstream)0, plain_args, (void **)0));
	fflush(stdout);

	unsigned m = 128, nn = 128, k = 128;
	static CUtensorMap maps[3];
	void *args[] = {&other, &m, &nn, &k, &maps[0], &maps[1], &maps[2]};
	CHECK(CALL(cuCtxSetCurrent, c0));
	printf("expert: %d\n", (int)CALL(cuLaunchKernel, expert, 1u, 1u, 1u, 1u, 1u, 1u, 0u,
					 (CUstream)0, args, (void **)0));
	return 0;
}
