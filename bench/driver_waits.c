/* driver_waits -- which driver calls wait for a context's running work.
 * A redirect must never wait for the target device (docs/redirect.md, Deadlock):
 * each call ctxguard might make there is timed while a kernel of the
 * context spins until the host releases it WAIT seconds later.  A call
 * that takes about WAIT seconds waited for it; one that returns at once
 * did not.  The kernels come as PTX (JIT-compiled at load), so nothing but
 * the driver is needed.
 *
 * Then the calls a program makes into the context while another thread's
 * cuModuleLoadData waits there: does the load hold them up too?  (Whether
 * ctxguard could load re-homed kernels ahead on a thread of its own:
 * docs/redirect.md, Deadlock.)
 *
 * Last, the calls into the primary context while a stream of another
 * context of the same device (cuCtxCreate) is held until the host releases
 * it, by a cuStreamWaitValue32 and by a spinning kernel: what waits for
 * another context's work (docs/contexts.md; GPU case 32 hung in a
 * synchronize of the primary context while a created context's stream
 * waited for a host flag).
 *
 * usage: driver_waits [WAIT]    (seconds, default 2) on a GPU machine.
 * Prints one line per call; exits 0, or 1 on a CUDA error. */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cu_check.h"


/* spin(flag, cycles): until *flag != 0 (host memory), or cycles pass. */
static const char ptx[] =
	".version 8.0\n.target sm_80\n.address_size 64\n"
	".visible .entry spin(.param .u64 flag, .param .u64 cycles)\n{\n"
	"  .reg .pred p;\n  .reg .b32 r;\n  .reg .b64 f, m, t0, t1, d;\n"
	"  ld.param.u64 f, [flag];\n  ld.param.u64 m, [cycles];\n  mov.u64 t0, %clock64;\n"
	"LOOP:\n  ld.volatile.u32 r, [f];\n  setp.ne.u32 p, r, 0;\n  @p bra DONE;\n"
	"  mov.u64 t1, %clock64;\n  sub.s64 d, t1, t0;\n  setp.lt.s64 p, d, m;\n  @p bra LOOP;\n"
	"DONE:\n  ret;\n}\n"
	".visible .entry nop()\n{\n  ret;\n}\n";

static volatile unsigned *release;
static unsigned wait_s = 2;
static CUdevice dev;
static CUmodule mod;
static CUfunction fn;
static CUlibrary lib;
static CUkernel kern;

static void *releaser(void *unused)
{
	(void)unused;
	sleep(wait_s);
	*release = 1;
	return NULL;
}

static CUresult load(void)
{
	CUmodule m;
	return cuModuleLoadData(&m, ptx);
}

static CUmodule victim; /* loaded before the kernel spins, never launched */

static CUresult load_victim(void)
{
	return cuModuleLoadData(&victim, ptx);
}

static CUresult unload(void)
{
	return cuModuleUnload(victim);
}

static CUresult get_function(void)
{
	CUfunction f;
	return cuModuleGetFunction(&f, mod, "nop");
}

static CUresult func_attr(void)
{
	return cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1024);
}

static CUresult kernel_attr(void)
{
	return cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1024, kern, dev);
}

static CUresult library_load(void)
{
	CUlibrary l;
	return cuLibraryLoadData(&l, ptx, NULL, NULL, 0, NULL, NULL, 0);
}

static CUresult library_kernel(void)
{
	CUkernel k;
	return cuLibraryGetKernel(&k, lib, "nop");
}

static CUresult kernel_function(void)
{
	CUfunction f;
	return cuKernelGetFunction(&f, kern);
}

static CUresult func_load(void)
{
	return cuFuncLoad(fn);
}

static CUresult stream_create(void)
{
	CUstream s;
	return cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
}

static CUresult event_create(void)
{
	CUevent e;
	return cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
}

static CUcontext ctx;
static CUstream other; /* a stream of the context that the spin is not on */

static CUresult launch_other(void)
{
	return cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, other, NULL, NULL);
}

static CUresult mem_alloc(void)
{
	CUdeviceptr p;
	CUresult rc = cuMemAlloc(&p, 1 << 20);
	return rc == CUDA_SUCCESS ? cuMemFree(p) : rc;
}

static CUresult event_record(void)
{
	CUevent e;
	CUresult rc = cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
	return rc == CUDA_SUCCESS ? cuEventRecord(e, other) : rc;
}

static CUresult copy_async(void)
{
	static unsigned word;
	CUdeviceptr p;
	CUresult rc = cuMemAlloc(&p, sizeof word);
	return rc == CUDA_SUCCESS ? cuMemcpyHtoDAsync(p, &word, sizeof word, other) : rc;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static double load_took; /* the other thread's load, from its start */

static CUcontext created;   /* a second context of the device */
static CUstream held;       /* its stream, held until the release */
static CUfunction spin_created;
static CUcontext popped;

static CUresult sync_ctx(void)
{
	return cuCtxSynchronize();
}

static CUresult sync_stream(void)
{
	CUresult rc = cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, other, NULL, NULL);
	return rc == CUDA_SUCCESS ? cuStreamSynchronize(other) : rc;
}

static CUresult copy_sync(void)
{
	unsigned word;
	CUdeviceptr p;
	CUresult rc = cuMemAlloc(&p, sizeof word);
	return rc == CUDA_SUCCESS ? cuMemcpyDtoH(&word, p, sizeof word) : rc;
}

/* The other thread: a module load into the context, which waits. */
static void *loader(void *unused)
{
	(void)unused;
	double t0 = now();
	cuCtxSetCurrent(ctx);
	load();
	load_took = now() - t0;
	return NULL;
}

static CUfunction spin;
static CUstream s;         /* the spin's */
static CUdeviceptr flag;   /* release, as the device sees it */
static long long cycles;   /* a bound, should the host never release */
static void *spin_args[] = {&flag, &cycles};

enum hold { SPIN, BESIDE, CREATED_WAIT, CREATED_SPIN };

/* Seconds call takes while a kernel of the context spins until the host
 * releases it wait_s later; BESIDE: while another thread's module load
 * waits there too; CREATED_*: while the created context's stream waits
 * for the release (cuStreamWaitValue32) or spins until it, the primary
 * context current. */
static double timed(CUresult (*call)(void), enum hold how, CUresult *rc)
{
	pthread_t l, t;
	int beside = how == BESIDE;
	*release = 0;
	if (how == CREATED_WAIT || how == CREATED_SPIN) {
		CU(cuCtxPushCurrent(created));
		CU(how == CREATED_WAIT
			   ? cuStreamWaitValue32(held, flag, 1, CU_STREAM_WAIT_VALUE_GEQ)
			   : cuLaunchKernel(spin_created, 1, 1, 1, 1, 1, 1, 0, held, spin_args, NULL));
		CU(cuCtxPopCurrent(&popped));
	} else {
		CU(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, spin_args, NULL));
	}
	usleep(100000); /* running, not just queued */
	if (beside) {
		if (pthread_create(&l, NULL, loader, NULL) != 0)
			exit(1);
		usleep(200000); /* the load is waiting */
	}
	if (pthread_create(&t, NULL, releaser, NULL) != 0)
		exit(1);
	double t0 = now();
	*rc = call();
	double took = now() - t0;
	pthread_join(t, NULL);
	if (beside)
		pthread_join(l, NULL);
	CU(cuCtxSynchronize());
	CU(cuStreamSynchronize(held));
	return took;
}

static const struct {
	const char *name;
	CUresult (*call)(void);
	CUresult (*before)(void); /* made before the kernel spins */
} calls[] = {
	{"cuModuleLoadData", load, NULL},
	{"cuModuleUnload (never launched)", unload, load_victim},
	{"cuModuleGetFunction", get_function, NULL},
	{"cuFuncSetAttribute", func_attr, NULL},
	{"cuKernelSetAttribute", kernel_attr, NULL},
	{"cuLibraryLoadData", library_load, NULL},
	{"cuLibraryGetKernel", library_kernel, NULL},
	{"cuKernelGetFunction", kernel_function, NULL},
	{"cuFuncLoad (loaded)", func_load, NULL},
	{"cuStreamCreate", stream_create, NULL},
	{"cuEventCreate", event_create, NULL},
};

struct named_call {
	const char *name;
	CUresult (*call)(void);
};

/* While another thread's cuModuleLoadData waits on the context. */
static const struct named_call beside[] = {
	{"cuLaunchKernel (another stream)", launch_other},
	{"cuMemAlloc + cuMemFree", mem_alloc},
	{"cuStreamCreate", stream_create},
	{"cuEventCreate + cuEventRecord", event_record},
	{"cuMemAlloc + cuMemcpyHtoDAsync", copy_async},
	{"cuModuleGetFunction", get_function},
};

/* In the primary context while the created context's stream is held. */
static const struct named_call across[] = {
	{"cuCtxSynchronize (idle)", sync_ctx},
	{"cuLaunchKernel + cuStreamSynchronize", sync_stream},
	{"cuMemAlloc + cuMemFree", mem_alloc},
	{"cuMemAlloc + cuMemcpyDtoH", copy_sync},
	{"cuStreamCreate", stream_create},
	{"cuModuleLoadData", load},
};

static const char *verdict(double took)
{
	return took > 0.5 * wait_s ? "waited" : "at once";
}

int main(int argc, char **argv)
{
	if (argc > 1 && (wait_s = (unsigned)atoi(argv[1])) == 0) {
		fprintf(stderr, "usage: driver_waits [WAIT seconds, >= 1]\n");
		return 1;
	}
	CUmodule spin_mod;
	CU(cuInit(0));
	CU(cuDeviceGet(&dev, 0));
	CU(cuDevicePrimaryCtxRetain(&ctx, dev));
	CU(cuCtxSetCurrent(ctx));
	CU(cuModuleLoadData(&spin_mod, ptx));
	CU(cuModuleGetFunction(&spin, spin_mod, "spin"));
	CU(cuModuleLoadData(&mod, ptx));
	CU(cuModuleGetFunction(&fn, mod, "nop"));
	CU(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
	CU(cuLibraryGetKernel(&kern, lib, "nop"));
	CU(cuMemHostAlloc((void **)&release, sizeof *release,
			   CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE)); /* the created context reads it too */
	CU(cuMemHostGetDevicePointer(&flag, (void *)release, 0));
	CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CU(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
	CUmodule spin_created_mod;
	CU(cuCtxCreate(&created, NULL, 0, dev)); /* CUDA 12.5+: its parameters struct, none given */
	CU(cuModuleLoadData(&spin_created_mod, ptx));
	CU(cuModuleGetFunction(&spin_created, spin_created_mod, "spin"));
	CU(cuStreamCreate(&held, CU_STREAM_NON_BLOCKING));
	CU(cuCtxPopCurrent(&popped));
	cycles = 4000000000LL * (wait_s + 8);
	printf("driver_waits: each call while a kernel of its context spins for %u s\n", wait_s);
	for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
		CUresult rc;
		if (calls[i].before)
			CU(calls[i].before());
		double took = timed(calls[i].call, SPIN, &rc);
		printf("%-32s %6.3f s  %s (rc %d)\n", calls[i].name, took, verdict(took), (int)rc);
	}
	printf("driver_waits: each call while another thread's cuModuleLoadData waits there\n");
	for (size_t i = 0; i < sizeof beside / sizeof beside[0]; i++) {
		CUresult rc;
		double took = timed(beside[i].call, BESIDE, &rc);
		printf("%-32s %6.3f s  %s (rc %d; the load took %.3f s)\n", beside[i].name, took,
		       verdict(took), (int)rc, load_took);
	}
	for (int how = CREATED_WAIT; how <= CREATED_SPIN; how++) {
		printf("driver_waits: each call into the primary context while a stream of a "
		       "created context of the device %s\n",
		       how == CREATED_WAIT ? "waits (cuStreamWaitValue32)" : "spins");
		for (size_t i = 0; i < sizeof across / sizeof across[0]; i++) {
			CUresult rc;
			double took = timed(across[i].call, (enum hold)how, &rc);
			printf("%-32s %6.3f s  %s (rc %d)\n", across[i].name, took, verdict(took),
			       (int)rc);
		}
	}
	return 0;
}
