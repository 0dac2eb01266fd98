/* unhooked_route -- a launch by a route ctxguard's hooks do not cover.
 *
 * Everything else goes through dlopen + dlsym (hooked, so ctxguard records
 * modules and memory), but cuLaunchKernel is found by reading libcuda's
 * dynamic symbol table from its file (.dynsym of the loaded libcuda.so.1,
 * plus its load address): no dlsym, no cuGetProcAddress, no preload.
 * Only the CUPTI backstop can see such a launch.
 *
 * usage: unhooked_route [--created] same|cross|silent CUBIN   (the fixture cubin)
 *   --created  "device 1" is a context made by cuCtxCreate on device 0: one
 *           GPU is enough for cross (the driver refuses a function of one
 *           context in another of the same device); silent needs two
 *   same    ctxguard_fixture_empty loaded and launched on device 0
 *   cross   loaded on device 0, launched with device 1 current (kind a):
 *           the driver itself refuses it, INVALID_HANDLE
 *   silent  ctxguard_fixture_producer launched on device 0 with its output
 *           in device 1 memory, peer access on (kind b): it runs and writes
 *           device 1's memory from GPU 0
 * exit: 0 launched (same), 1 set-up failure, 3 launch refused by the
 * driver, 4 silent: device 1 memory written by a device 0 kernel, 5 fewer
 * than 2 GPUs or no peer access, or silent with --created.  stdout is
 * line-buffered evidence. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../libcuda_symbol.h"

static void *cuda;

static void *sym(const char *name)
{
	void *p = dlsym(cuda, name);
	if (!p) {
		fprintf(stderr, "unhooked_route: libcuda has no %s\n", name);
		exit(1);
	}
	return p;
}

/* cuda.h maps names to their current versions (cuMemAlloc -> cuMemAlloc_v2):
 * look up the name after that expansion, the one the prototype is for. */
#define NAME_(x) #x
#define NAME(x) NAME_(x)
#define D(name) ((__typeof__(&name))sym(NAME(name)))
#define CHECK(call)                                                                      \
	do {                                                                             \
		CUresult rc_ = (call);                                                   \
		if (rc_ != CUDA_SUCCESS) {                                               \
			fprintf(stderr, "unhooked_route: %s failed: %d\n", #call, rc_);   \
			exit(1);                                                         \
		}                                                                        \
	} while (0)

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const int created = argc > 1 && strcmp(argv[1], "--created") == 0;
	argc -= created;
	argv += created;
	if (argc < 3 || (strcmp(argv[1], "same") && strcmp(argv[1], "cross") &&
			 strcmp(argv[1], "silent"))) {
		fprintf(stderr, "usage: unhooked_route [--created] same|cross|silent CUBIN\n");
		return 1;
	}
	const char *mode = argv[1];
	if (created && strcmp(mode, "silent") == 0) {
		printf("silent needs a second device: memory of a context created on device 0 is device 0's\n");
		return 5;
	}
	if (!(cuda = dlopen("libcuda.so.1", RTLD_NOW))) {
		fprintf(stderr, "unhooked_route: %s\n", dlerror());
		return 1;
	}
	CHECK(D(cuInit)(0));
	int n = 0;
	CHECK(D(cuDeviceGetCount)(&n));
	if (n < 2 - created) {
		printf("needs 2 GPUs, %d visible\n", n);
		return 5;
	}
	CUdevice dev[2];
	CUcontext ctx[2];
	for (int i = 0; i < 2; i++) {
		CHECK(D(cuDeviceGet)(&dev[i], created ? 0 : i));
		if (i && created)
			CHECK(D(cuCtxCreate)(&ctx[i], NULL, 0, dev[i]));
		else
			CHECK(D(cuDevicePrimaryCtxRetain)(&ctx[i], dev[i]));
	}
	const char *where;
	void *raw = libcuda_symbol("cuLaunchKernel", &where);
	if (!raw)
		return 1;
	void *looked_up = dlsym(cuda, "cuLaunchKernel");
	printf("cuLaunchKernel at %p from the .dynsym of %s; dlsym gives %p (%s)\n", raw, where,
	       looked_up, raw == looked_up ? "the same" : "a wrapper");
	__typeof__(&cuLaunchKernel) launch = (__typeof__(&cuLaunchKernel))raw;

	CHECK(D(cuCtxSetCurrent)(ctx[0]));
	CUmodule mod;
	CUfunction empty, producer;
	CHECK(D(cuModuleLoad)(&mod, argv[2]));
	CHECK(D(cuModuleGetFunction)(&empty, mod, "ctxguard_fixture_empty"));
	CHECK(D(cuModuleGetFunction)(&producer, mod, "ctxguard_fixture_producer"));

	CUresult rc;
	CUdeviceptr buf = 0;
	enum { COUNT = 4096 };
	if (strcmp(mode, "silent") == 0) {
		int peer = 0;
		CHECK(D(cuDeviceCanAccessPeer)(&peer, dev[0], dev[1]));
		if (!peer) {
			printf("no peer access from device 0 to device 1\n");
			return 5;
		}
		CHECK(D(cuCtxSetCurrent)(ctx[1]));
		CHECK(D(cuMemAlloc)(&buf, COUNT * 2));
		CHECK(D(cuMemsetD8)(buf, 0, COUNT * 2));
		CHECK(D(cuCtxSynchronize)());
		CHECK(D(cuCtxSetCurrent)(ctx[0]));
		rc = D(cuCtxEnablePeerAccess)(ctx[1], 0);
		if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
			CHECK(rc);
		uint64_t count = COUNT, spin = 0;
		uint32_t seed = 7;
		void *args[] = {&buf, &count, &spin, &seed};
		printf("launching ctxguard_fixture_producer on device 0, output in device 1 memory\n");
		rc = launch(producer, 4, 1, 1, 256, 1, 1, 0, NULL, args, NULL);
	} else {
		if (strcmp(mode, "cross") == 0)
			CHECK(D(cuCtxSetCurrent)(ctx[1]));
		printf("launching ctxguard_fixture_empty (device 0's) with %s current\n",
		       strcmp(mode, "cross") ? "device 0" : created ? "a context created on device 0"
							  : "device 1");
		rc = launch(empty, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
	}
	const char *name = "?";
	D(cuGetErrorName)(rc, &name);
	printf("launch returned %d %s\n", (int)rc, name);
	if (rc != CUDA_SUCCESS)
		return 3;
	CHECK(D(cuCtxSynchronize)());
	if (!buf)
		return 0;
	unsigned short host[COUNT];
	CHECK(D(cuCtxSetCurrent)(ctx[1]));
	CHECK(D(cuMemcpyDtoH)(host, buf, sizeof host));
	size_t written = 0;
	for (size_t i = 0; i < COUNT; i++)
		written += host[i] != 0;
	printf("device 1 memory written by the device 0 kernel: %zu of %d values\n", written,
	       COUNT);
	return written ? 4 : 0;
}
