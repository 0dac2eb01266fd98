/* The redirect action on the fake driver: a DeepGEMM GEMM launched on
 * device 0 with its operands on device 1 runs as the bundled kernel on
 * device 1, ordered by events with the launch stream and every known stream
 * of device 1 (asserted on the fake's call trace); kind (a) with the
 * operands on the launch device runs on the launch stream; DeepGEMM's
 * helper is re-homed with its attributes, and its twin and attributes are
 * retired with the original (unload, context end, racing threads), its
 * module never unloaded; a CUkernel takes its launch device's attributes
 * along; pools are reused; each reason a redirect is impossible leads to
 * redirect_fallback, but ordering that fails once the work is queued
 * leads to a host wait instead, which the log record names; 16 threads
 * redirect on two devices.  The bundled kernels exist only in a build with
 * nvcc: without them the GEMM cases assert the fallback that says so. */
#include <check.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cuda.h>

#include "../policy/policy.h"
#include "deepgemm_fixture.h"
#include "fake/fake_api.h"
#include "observe.h"
#include "suite.h"
#include "spawn.h"

/* Real instantiations (nvcc -arch=sm_90a, the template shapes of DESIGN.md). */
#define GEMM_BF16 "_ZN9deep_gemm19sm90_bf16_gemm_implILN4cute4UMMA5MajorE0ELS3_0ELj0ELj0ELj0ELj2ELj128ELj128ELj64ELj128ELj128ELj128ELj5ELj128ELj256ELj1ELb1ELj132ELNS_8GemmTypeE1ELb0EN7cutlass10bfloat16_tEEEvPijjj14CUtensorMap_stS8_S8_"
#define GEMM_PSUM "_ZN9deep_gemm19sm90_bf16_gemm_implILN4cute4UMMA5MajorE0ELS3_0ELj0ELj0ELj0ELj2ELj128ELj128ELj64ELj128ELj128ELj128ELj5ELj128ELj256ELj1ELb1ELj132ELNS_8GemmTypeE5ELb0EN7cutlass10bfloat16_tEEEvPijjj14CUtensorMap_stS8_S8_"
#define GEMM_ACCUM "_ZN9deep_gemm19sm90_bf16_gemm_implILN4cute4UMMA5MajorE0ELS3_0ELj0ELj0ELj0ELj2ELj128ELj128ELj64ELj128ELj128ELj128ELj5ELj128ELj256ELj1ELb1ELj132ELNS_8GemmTypeE1ELb1EN7cutlass10bfloat16_tEEEvPijjj14CUtensorMap_stS8_S8_"
#define GEMM_NORMAL "_ZN9deep_gemm19sm90_bf16_gemm_implILN4cute4UMMA5MajorE0ELS3_0ELj0ELj0ELj0ELj1ELj128ELj128ELj64ELj128ELj128ELj128ELj5ELj128ELj256ELj1ELb1ELj132ELNS_8GemmTypeE0ELb0EN7cutlass10bfloat16_tEEEvPijjj14CUtensorMap_stS8_S8_"
#define HELPER "_ZN9deep_gemm14transpose_fp32ILj128ELj128EEEvPKfPfj"
/* Device 1's own work, queued before the redirect (the producer of A). */
static const char producer_image[] = "//ctxguard-fake-image\n.kernel producer 8\n";
static const char image[] = "//ctxguard-fake-image\n"
			    ".kernel " GEMM_BF16 " 8,4,4,4,128,128,128\n"
			    ".kernel " GEMM_PSUM " 8,4,4,4,128,128,128\n"
			    ".kernel " GEMM_ACCUM " 8,4,4,4,128,128,128\n"
			    ".kernel " GEMM_NORMAL " 8,4,4,4,128,128,128\n"
			    ".kernel " HELPER " 8,8,4\n";
enum { M = 256, N = 128, K = 128, G = 2, SIZE = 1 << 20, HELPER_SMEM = 100000 };

static CUcontext ctx[2];
static CUstream stream[2];
static CUfunction gemm, psum, accum, normal, helper; /* loaded in device 0's context */
static CUdeviceptr a, b, d, layout, b0;     /* on device 1; b0 on device 0 */
static CUtensorMap ta, tb, td, tb0;

static CUdeviceptr alloc_on(int dev)
{
	CUdeviceptr p;
	ck_assert_int_eq(cuCtxSetCurrent(ctx[dev]), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemAlloc(&p, SIZE), CUDA_SUCCESS);
	return p;
}

/* A context created on device dev, made current. */
static CUcontext created_on(int dev)
{
	CUdevice dv;
	CUcontext c;
	ck_assert_int_eq(cuDeviceGet(&dv, dev), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxCreate(&c, NULL, 0, dv), CUDA_SUCCESS);
	return c;
}

static void setup_mode(const char *fallback)
{
	setenv("CTXGUARD_MODE", "redirect", 1);
	setenv("CTXGUARD_REDIRECT_FALLBACK", fallback, 1);
	ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
	for (int dev = 1; dev >= 0; dev--) {
		CUdevice dv;
		ck_assert_int_eq(cuDeviceGet(&dv, dev), CUDA_SUCCESS);
		ck_assert_int_eq(cuDevicePrimaryCtxRetain(&ctx[dev], dv), CUDA_SUCCESS);
		ck_assert_int_eq(cuCtxSetCurrent(ctx[dev]), CUDA_SUCCESS);
		ck_assert_int_eq(cuStreamCreate(&stream[dev], CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	}
	CUmodule mod;
	ck_assert_int_eq(cuModuleLoadData(&mod, image), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleGetFunction(&gemm, mod, GEMM_BF16), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleGetFunction(&psum, mod, GEMM_PSUM), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleGetFunction(&accum, mod, GEMM_ACCUM), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleGetFunction(&normal, mod, GEMM_NORMAL), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleGetFunction(&helper, mod, HELPER), CUDA_SUCCESS);
	/* DeepGEMM sets the dynamic shared memory once per function. */
	ck_assert_int_eq(cuFuncSetAttribute(helper, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
					    HELPER_SMEM),
			 CUDA_SUCCESS);
	a = alloc_on(1);
	b = alloc_on(1);
	d = alloc_on(1);
	layout = alloc_on(1);
	b0 = alloc_on(0);
	/* DeepGEMM's encodes (DESIGN.md): a {K, M}, b {K, N*G}, d {N, M}. */
	ta = encode(a, K, M);
	tb = encode(b, K, N * G);
	td = encode(d, N, M);
	tb0 = encode(b0, K, N * G);
}

/* Device 1's work pending on stream s (NULL: its legacy stream). */
static void produce_on(CUstream s)
{
	CUmodule mod;
	CUfunction producer;
	ck_assert_int_eq(cuCtxSetCurrent(ctx[1]), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleLoadData(&mod, producer_image), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleGetFunction(&producer, mod, "producer"), CUDA_SUCCESS);
	void *params[] = {&a};
	ck_assert_int_eq(cuLaunchKernel(producer, 1, 1, 1, 1, 1, 1, 0, s, params, NULL),
			 CUDA_SUCCESS);
}

/* As when PyTorch is still producing A on device 1's legacy stream and on
 * a side stream; its per-thread stream stays idle. */
static void produce_on_device_1(void)
{
	produce_on(NULL);
	produce_on(stream[1]);
}

static void setup_abort(void)
{
	setup_mode("abort");
}

static void setup_error(void)
{
	setup_mode("error");
}

/* What launch_gemm launches with: DeepGEMM's grid (kNumSMs) and A, unless
 * a test changes them. */
static unsigned gemm_grid = 132;
static const CUtensorMap *gemm_a = &ta;

/* DeepGEMM's launch: cuLaunchKernelEx on the current device's stream. */
static CUresult launch_gemm(CUfunction f, CUcontext current, CUstream s, const CUtensorMap *mb)
{
	ck_assert_int_eq(cuCtxSetCurrent(current), CUDA_SUCCESS);
	uint32_t m = M, n = N, k = K;
	CUtensorMap A = *gemm_a, B = *mb, D = td;
	void *params[] = {&layout, &m, &n, &k, &A, &B, &D};
	CUlaunchAttribute attr = {.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
				  .value.clusterDim = {1, 1, 1}};
	CUlaunchConfig cfg = {.gridDimX = gemm_grid, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 384,
			      .blockDimY = 1, .blockDimZ = 1, .sharedMemBytes = GEMM_SMEM,
			      .hStream = s, .attrs = &attr, .numAttrs = 1};
	return cuLaunchKernelEx(&cfg, f, params, NULL);
}

/* A helper function f launched with shared memory smem. */
static CUresult launch_as_helper(CUfunction f, unsigned smem, CUcontext current, CUstream s,
				 CUdeviceptr in, CUdeviceptr out)
{
	ck_assert_int_eq(cuCtxSetCurrent(current), CUDA_SUCCESS);
	unsigned mn = 128;
	void *params[] = {&in, &out, &mn};
	return cuLaunchKernel(f, 4, 1, 1, 128, 1, 1, smem, s, params, NULL);
}

static CUresult launch_helper(CUcontext current, CUstream s, CUdeviceptr in, CUdeviceptr out)
{
	return launch_as_helper(helper, HELPER_SMEM, current, s, in, out);
}

/* The bundled launch ran on ctxguard's stream T of device 1, after S and
 * every known stream of device 1 with work pending, before all of them go
 * on. */
static void assert_ordered(size_t n)
{
	size_t run = n;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(trace[i].api, "launch")) {
			ck_assert_msg(!strncmp(trace[i].kernel, "cg_gmm_", 7), "launched %s",
				      trace[i].kernel);
			run = i;
		}
	ck_assert_msg(run < n, "no bundled launch");
	ck_assert_ptr_eq(trace[run].ctx, ctx[1]);
	const void *t = trace[run].stream;
	ck_assert(t != stream[0] && t != stream[1] && t != NULL);
	/* Before: S's event, waited on by T. */
	size_t rec = find(run, 0, "cuEventRecord", ctx[0], stream[0], NULL);
	ck_assert_msg(rec < run, "no event recorded on the launch stream");
	ck_assert(find(run, rec, "cuStreamWaitEvent", ctx[1], t, trace[rec].object) < run);
	/* ... and each busy stream's tail; the idle per-thread stream has none. */
	const void *known[] = {CU_STREAM_LEGACY, stream[1], CU_STREAM_PER_THREAD};
	ck_assert(find(run, 0, "cuEventRecord", ctx[1], CU_STREAM_PER_THREAD, NULL) == run);
	for (size_t k = 0; k < 2; k++) {
		size_t r = find(run, 0, "cuEventRecord", ctx[1], known[k], NULL);
		ck_assert_msg(r < run, "tail of stream %zu not recorded", k);
		size_t w = find(run, r, "cuStreamWaitEvent", ctx[1], t, trace[r].object);
		ck_assert_msg(w < run, "T does not wait for stream %zu", k);
	}
	/* After: T's event, waited on by S and every known stream. */
	size_t after = find(n, run, "cuEventRecord", ctx[1], t, NULL);
	ck_assert(after < n);
	const void *e = trace[after].object;
	ck_assert(find(n, after, "cuStreamWaitEvent", ctx[0], stream[0], e) < n);
	for (size_t k = 0; k < 3; k++)
		ck_assert_msg(find(n, after, "cuStreamWaitEvent", ctx[1], known[k], e) < n,
			      "stream %zu does not wait for the result", k);
}

START_TEST(silent_crossing_runs_bundled_on_the_operands_device)
{
	struct fake_stats st;
	produce_on_device_1();
	fake_reset();
	fake_trace_start();
	capture_start();
	CUresult rc = launch_gemm(gemm, ctx[0], stream[0], &tb);
	const char *err = capture_end();
	size_t n = fake_trace(trace, 4096);
	fake_get_stats(&st);
	ck_assert_uint_eq(st.silent_cross, 0);
	ck_assert_msg(find(n, 0, "launch", NULL, stream[0], NULL) == n,
		      "the original ran on the launch stream");
	if (!bundled_built()) {
		ck_assert_int_eq(rc, CUDA_ERROR_INVALID_HANDLE);
		ck_assert_msg(strstr(err, "ctxguard: redirect impossible:") &&
			      strstr(err, "without nvcc"), "%s", err);
		return;
	}
	ck_assert_int_eq(rc, CUDA_SUCCESS);
	ck_assert_msg(strstr(err, "ctxguard: redirect: void deep_gemm::sm90_bf16_gemm_impl<") &&
		      strstr(err, "from device 0 to device 1 (cg_gmm_contiguous)"), "%s", err);
	/* Warmed when setup created device 1's stream: nothing loaded now. */
	ck_assert_uint_eq(count(n, "cuModuleLoad"), 0);
	ck_assert_uint_eq(count(n, "cuFuncLoad"), 0);
	ck_assert_uint_eq(count(n, "cuStreamCreate"), 0);
	assert_ordered(n);
	ck_assert_uint_eq(st.launches_on[1], 1);
	ck_assert_uint_eq(st.launches_on[0], 0);

	/* Warm: the same events and stream, nothing created, one line only. */
	fake_trace_start();
	capture_start();
	ck_assert_int_eq(launch_gemm(gemm, ctx[0], stream[0], &tb), CUDA_SUCCESS);
	err = capture_end();
	n = fake_trace(trace, 4096);
	assert_ordered(n);
	ck_assert_uint_eq(count(n, "cuEventCreate"), 0);
	ck_assert_uint_eq(count(n, "cuStreamCreate"), 0);
	ck_assert_msg(!strstr(err, "ctxguard: redirect:"), "printed again: %s", err);
}
END_TEST

/* A psum GEMM goes to the bundled psum form (masked is decoded the same
 * way: check_decode). */
START_TEST(psum_gemm_runs_bundled_psum)
{
	struct fake_stats st;
	produce_on_device_1();
	fake_reset();
	capture_start();
	CUresult rc = launch_gemm(psum, ctx[0], stream[0], &tb);
	const char *err = capture_end();
	fake_get_stats(&st);
	if (!bundled_built()) {
		ck_assert_int_eq(rc, CUDA_ERROR_INVALID_HANDLE);
		return;
	}
	ck_assert_int_eq(rc, CUDA_SUCCESS);
	ck_assert_msg(strstr(err, "from device 0 to device 1 (cg_gmm_psum)"), "%s", err);
	ck_assert_uint_eq(st.launches_on[1], 1);
	ck_assert_uint_eq(st.launches_on[0], 0);
}
END_TEST

/* Kind (a): DeepGEMM called with device 1 current (the driver's
 * INVALID_HANDLE case): the work runs on S itself, no events. */
START_TEST(handle_crossing_runs_on_the_launch_stream)
{
	fake_reset();
	fake_trace_start();
	CUresult rc = launch_gemm(gemm, ctx[1], NULL, &tb);
	size_t n = fake_trace(trace, 4096);
	ck_assert_uint_eq(count(n, "cuEventRecord"), 0);
	ck_assert_uint_eq(count(n, "cuStreamWaitEvent"), 0);
	if (!bundled_built()) {
		ck_assert_int_eq(rc, CUDA_ERROR_INVALID_HANDLE);
		return;
	}
	ck_assert_int_eq(rc, CUDA_SUCCESS);
	size_t run = find(n, 0, "launch", ctx[1], NULL, NULL);
	ck_assert(run < n && !strncmp(trace[run].kernel, "cg_gmm_", 7));
}
END_TEST

/* DeepGEMM's fp8 helper crosses first: re-homed into device 1 with the
 * shared-memory attribute replayed (the fake refuses the launch without),
 * under the same ordering; made once, then reused. */
START_TEST(helper_is_rehomed_with_its_attributes)
{
	fake_reset();
	fake_trace_start();
	capture_start();
	ck_assert_int_eq(launch_helper(ctx[0], stream[0], a, d), CUDA_SUCCESS);
	const char *err = capture_end();
	size_t n = fake_trace(trace, 4096);
	ck_assert_msg(strstr(err, "ctxguard: redirect: void deep_gemm::transpose_fp32<128u, 128u>"
				  "(float const*, float*, unsigned int) from device 0 to device 1 "
				  "(re-homed)"), "%s", err);
	size_t run = find(n, 0, "launch", ctx[1], NULL, NULL);
	ck_assert_msg(run < n, "not launched on device 1");
	ck_assert_str_eq(trace[run].kernel, HELPER);
	ck_assert(trace[run].stream != stream[1] && trace[run].stream != NULL);
	ck_assert(find(run, 0, "cuEventRecord", ctx[0], stream[0], NULL) < run);
	ck_assert(find(n, run, "cuStreamWaitEvent", ctx[0], stream[0], NULL) < n);
	ck_assert(find(n, 0, "launch", ctx[0], NULL, NULL) == n);

	fake_trace_start();
	ck_assert_int_eq(launch_helper(ctx[0], stream[0], a, d), CUDA_SUCCESS);
	n = fake_trace(trace, 4096);
	ck_assert_uint_eq(count(n, "cuEventCreate"), 0);
	ck_assert_uint_eq(count(n, "launch"), 1);
}
END_TEST

static const char helper_image[] = "//ctxguard-fake-image\n.kernel " HELPER " 8,8,4\n";

/* HELPER from a module loaded in device 0's context from a file made from
 * the template path; the caller unlinks it. */
static CUfunction helper_from_file(char *path)
{
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, helper_image, sizeof helper_image - 1),
			 (ssize_t)(sizeof helper_image - 1));
	close(fd);
	CUmodule mod;
	CUfunction f;
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleLoad(&mod, path), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleGetFunction(&f, mod, HELPER), CUDA_SUCCESS);
	return f;
}

/* A module loaded from a file is loaded again from that file. */
START_TEST(file_module_is_rehomed)
{
	char path[] = "/tmp/ctxguard-rehome-XXXXXX";
	CUfunction f = helper_from_file(path);
	fake_trace_start();
	unsigned mn = 128;
	void *params[] = {&a, &d, &mn};
	CUresult rc = cuLaunchKernel(f, 4, 1, 1, 128, 1, 1, 0, stream[0], params, NULL);
	unlink(path);
	ck_assert_int_eq(rc, CUDA_SUCCESS);
	size_t n = fake_trace(trace, 4096);
	ck_assert(find(n, 0, "cuModuleLoad", ctx[1], NULL, NULL) < n);
	size_t run = find(n, 0, "launch", ctx[1], NULL, NULL);
	ck_assert_msg(run < n, "not launched on device 1");
	ck_assert_str_eq(trace[run].kernel, HELPER);
}
END_TEST

/* A twin made in a context the program destroys is not handed out for the
 * next context that gets the same handle (kind (a), operands on the launch
 * device: the twin is made in the launch context). */
START_TEST(destroyed_context_forgets_its_twins)
{
	CUcontext own = created_on(1);
	ck_assert_int_eq(launch_helper(own, NULL, a, d), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxDestroy(own), CUDA_SUCCESS);
	CUcontext again = created_on(1);
	ck_assert_ptr_eq(again, own); /* the fake hands the handle out again */
	fake_trace_start();
	ck_assert_int_eq(launch_helper(again, NULL, a, d), CUDA_SUCCESS);
	size_t n = fake_trace(trace, 4096);
	ck_assert_msg(find(n, 0, "launch", again, NULL, NULL) < n, "the helper did not run");
}
END_TEST

/* Kind (a) back to the owner's device: the helper, loaded in device 0's
 * primary context, launched in device 1's with device 0's operands runs
 * there as itself, with its own attributes: nothing is loaded again. */
START_TEST(redirect_into_the_owners_context_runs_the_original)
{
	fake_trace_start();
	ck_assert_int_eq(launch_helper(ctx[1], stream[1], b0, b0), CUDA_SUCCESS);
	size_t n = fake_trace(trace, 4096);
	size_t run = find(n, 0, "launch", ctx[0], NULL, NULL);
	ck_assert_msg(run < n, "not launched on device 0");
	ck_assert_ptr_eq(trace[run].object, helper);
	ck_assert_uint_eq(count(n, "cuModuleLoad"), 0);
}
END_TEST

/* Kind (a) between two contexts of one device (GPU case 32): the helper,
 * loaded in device 0's primary context, launched on a stream of a context
 * created on device 0 with device 0's operands runs as itself in its own
 * context on ctxguard's stream there, ordered with the launch stream alone
 * (the program ordered nothing else with it); nothing is loaded, so
 * nothing waits for the launch context's queued work (an H100 held the
 * twin's cuModuleLoadData while that context's stream waited for a host
 * flag the program sets after the call). */
START_TEST(created_context_runs_the_original_in_its_own_context)
{
	CUcontext own = created_on(0);
	CUstream s;
	ck_assert_int_eq(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	fake_trace_start();
	capture_start();
	ck_assert_int_eq(launch_helper(own, s, b0, b0), CUDA_SUCCESS);
	const char *err = capture_end();
	size_t n = fake_trace(trace, 4096);
	char route[160];
	snprintf(route, sizeof route, "from context %p to context %p of device 0 (re-homed)", (void *)own,
		 (void *)ctx[0]);
	ck_assert_msg(strstr(err, route), "%s", err);
	ck_assert_uint_eq(count(n, "cuModuleLoad"), 0);
	size_t run = find(n, 0, "launch", ctx[0], NULL, NULL);
	ck_assert_msg(run < n, "not launched in device 0's primary context");
	ck_assert_ptr_eq(trace[run].object, helper);
	const void *t = trace[run].stream;
	ck_assert(t != s && t != stream[0] && t != NULL);
	size_t rec = find(run, 0, "cuEventRecord", own, s, NULL);
	ck_assert_msg(rec < run, "no event recorded on the launch stream");
	ck_assert(find(run, rec, "cuStreamWaitEvent", ctx[0], t, trace[rec].object) < run);
	size_t after = find(n, run, "cuEventRecord", ctx[0], t, NULL);
	ck_assert(after < n);
	ck_assert(find(n, after, "cuStreamWaitEvent", own, s, trace[after].object) < n);
	/* The primary context's own streams are neither waited for nor held. */
	ck_assert_uint_eq(count(n, "cuStreamWaitEvent"), 2);
	ck_assert_uint_eq(count(n, "cuEventRecord"), 2);
	ck_assert_int_eq(cuCtxDestroy(own), CUDA_SUCCESS);
}
END_TEST

/* DeepGEMM's own route: a library, its kernel's function fetched once while
 * device 0 is current; the twin is fetched from the same kernel in device
 * 1's context. */
START_TEST(library_function_is_rehomed)
{
	static const char lib_image[] = "//ctxguard-fake-image\n.kernel " HELPER " 8,8,4\n";
	CUlibrary lib;
	CUkernel k;
	CUfunction f;
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	ck_assert_int_eq(cuLibraryLoadData(&lib, lib_image, NULL, NULL, 0, NULL, NULL, 0),
			 CUDA_SUCCESS);
	ck_assert_int_eq(cuLibraryGetKernel(&k, lib, HELPER), CUDA_SUCCESS);
	ck_assert_int_eq(cuKernelGetFunction(&f, k), CUDA_SUCCESS);
	fake_reset();
	fake_trace_start();
	unsigned mn = 128;
	void *params[] = {&a, &d, &mn};
	capture_start();
	ck_assert_int_eq(cuLaunchKernel(f, 4, 1, 1, 128, 1, 1, 0, stream[0], params, NULL),
			 CUDA_SUCCESS);
	capture_end();
	size_t n = fake_trace(trace, 4096);
	size_t run = find(n, 0, "launch", ctx[1], NULL, NULL);
	ck_assert_msg(run < n, "not launched on device 1");
	ck_assert_str_eq(trace[run].kernel, HELPER);
	ck_assert(find(n, 0, "launch", ctx[0], NULL, NULL) == n);
}
END_TEST

/* The helper alone, as a module of the program's. */
static int live(CUmodule mod)
{
	unsigned n;
	return cuModuleGetFunctionCount(&n, mod) == CUDA_SUCCESS;
}

/* Every module loaded in device 1's context in the n calls traced is still
 * loaded: ctxguard unloads none (cuModuleUnload waits for the context's
 * queued work). */
static void none_unloaded(size_t n)
{
	for (size_t i = find(n, 0, "cuModuleLoad", ctx[1], NULL, NULL); i < n;
	     i = find(n, i + 1, "cuModuleLoad", ctx[1], NULL, NULL))
		ck_assert_msg(live((CUmodule)trace[i].object), "ctxguard unloaded a twin");
}

/* The function launched in device 1's context since the trace started. */
static CUfunction launched_on_1(void)
{
	size_t n = fake_trace(trace, 4096);
	size_t run = find(n, 0, "launch", ctx[1], NULL, NULL);
	ck_assert_msg(run < n, "not re-homed into device 1");
	return (CUfunction)trace[run].object;
}

/* The program's module in ctx c, its helper f with the shared memory
 * attribute set. */
static void load_helper(CUcontext c, CUmodule *orig, CUfunction *f)
{
	ck_assert_int_eq(cuCtxSetCurrent(c), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleLoadData(orig, helper_image), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleGetFunction(f, *orig, HELPER), CUDA_SUCCESS);
	ck_assert_int_eq(cuFuncSetAttribute(*f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
					    HELPER_SMEM),
			 CUDA_SUCCESS);
}

/* That helper launched in c with device 1's operands: its twin. */
static CUfunction rehomed(CUcontext c, CUstream s, CUmodule *orig, CUfunction *f)
{
	load_helper(c, orig, f);
	fake_trace_start();
	ck_assert_int_eq(launch_as_helper(*f, HELPER_SMEM, c, s, a, d), CUDA_SUCCESS);
	return launched_on_1();
}

/* After f's original went: its twin old stays loaded; f's handle, handed
 * out again by a new load of the same image in c and launched across
 * without attributes, gets a twin of its own, without the old attributes. */
static void reused_handle_gets_a_new_twin(CUcontext c, CUstream s, CUfunction f, CUfunction old)
{
	CUmodule again;
	CUfunction g;
	int smem;
	ck_assert_msg(cuFuncGetAttribute(&smem, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
					 old) == CUDA_SUCCESS,
		      "ctxguard unloaded the old twin");
	ck_assert_int_eq(cuCtxSetCurrent(c), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleLoadData(&again, helper_image), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleGetFunction(&g, again, HELPER), CUDA_SUCCESS);
	ck_assert_ptr_eq(g, f); /* the fake hands the handle out again */
	fake_trace_start();
	ck_assert_int_eq(launch_as_helper(g, 0, c, s, a, d), CUDA_SUCCESS);
	CUfunction twin = launched_on_1();
	ck_assert_msg(twin != old, "the old twin ran for the handle handed out again");
	ck_assert_int_eq(cuFuncGetAttribute(&smem, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
					    twin),
			 CUDA_SUCCESS);
	ck_assert_msg(smem != HELPER_SMEM, "the old function's attribute was replayed");
}

/* The original's unload: its twin is no longer used, but stays loaded, and
 * its attributes go. */
START_TEST(unload_retires_the_twin_and_the_attributes)
{
	CUmodule orig;
	CUfunction f;
	CUfunction twin = rehomed(ctx[0], stream[0], &orig, &f);
	ck_assert_int_eq(cuModuleUnload(orig), CUDA_SUCCESS);
	reused_handle_gets_a_new_twin(ctx[0], stream[0], f, twin);
}
END_TEST

/* The same at the end of the original's context (the twin is in another). */
START_TEST(context_end_retires_the_twin_and_the_attributes)
{
	CUmodule orig;
	CUfunction f;
	CUcontext own = created_on(0);
	CUfunction twin = rehomed(own, NULL, &orig, &f);
	ck_assert_int_eq(cuCtxDestroy(own), CUDA_SUCCESS);
	CUcontext again = created_on(0);
	reused_handle_gets_a_new_twin(again, NULL, f, twin);
}
END_TEST

/* Another thread acting in the window after the fake's next call of api:
 * run(arg), its result kept for the test. */
struct other {
	CUresult (*run)(void *);
	void *arg;
	CUresult rc;
};

static void *other_thread(void *arg)
{
	struct other *o = arg;
	o->rc = o->run(o->arg);
	return NULL;
}

static void in_another_thread(void *arg)
{
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, other_thread, arg), 0);
	pthread_join(th, NULL);
}

static CUresult launch_across(void *f)
{
	return launch_as_helper(f, HELPER_SMEM, ctx[0], stream[0], a, d);
}

static CUresult unload(void *mod)
{
	return cuModuleUnload(mod);
}

/* Two threads re-home the same function into the same context at once:
 * both launch the one twin listed; the other copy stays loaded. */
START_TEST(racing_threads_share_one_twin)
{
	CUmodule orig;
	CUfunction f;
	load_helper(ctx[0], &orig, &f);
	struct other o = {launch_across, f, CUDA_ERROR_UNKNOWN};
	fake_after_next("cuModuleLoadData", in_another_thread, &o);
	fake_trace_start();
	ck_assert_int_eq(launch_across(f), CUDA_SUCCESS);
	ck_assert_int_eq(o.rc, CUDA_SUCCESS);
	size_t n = fake_trace(trace, 4096);
	size_t l1 = find(n, 0, "cuModuleLoad", ctx[1], NULL, NULL);
	ck_assert_msg(find(n, l1 + 1, "cuModuleLoad", ctx[1], NULL, NULL) < n,
		      "the threads did not race");
	size_t r1 = find(n, 0, "launch", ctx[1], NULL, NULL);
	size_t r2 = find(n, r1 + 1, "launch", ctx[1], NULL, NULL);
	ck_assert(r2 < n);
	ck_assert_msg(trace[r1].object == trace[r2].object, "the threads launched two twins");
	none_unloaded(n);
	ck_assert_int_eq(cuModuleUnload(orig), CUDA_SUCCESS);
	none_unloaded(n);
}
END_TEST

/* The original is unloaded by another thread while a redirect makes its
 * twin: after the twin's load (api cuModuleLoadData: before it is listed)
 * or while its attributes are replayed (cuFuncSetAttribute).  The launch
 * runs the twin, which stays loaded but is not used for the handle handed
 * out again. */
START_TEST(unload_during_a_redirect_retires_the_twin)
{
	static const char *const during[] = {"cuModuleLoadData", "cuFuncSetAttribute"};
	CUmodule orig;
	CUfunction f;
	load_helper(ctx[0], &orig, &f);
	struct other o = {unload, orig, CUDA_ERROR_UNKNOWN};
	fake_after_next(during[_i], in_another_thread, &o);
	fake_trace_start();
	ck_assert_int_eq(launch_across(f), CUDA_SUCCESS);
	ck_assert_int_eq(o.rc, CUDA_SUCCESS);
	CUfunction twin = launched_on_1();
	reused_handle_gets_a_new_twin(ctx[0], stream[0], f, twin);
}
END_TEST

/* A function that the image loaded again lacks (its file rewritten since):
 * the redirect is impossible, and the module loaded for it is loaded once,
 * not at each launch, and kept. */
START_TEST(function_missing_from_its_image_is_tried_once)
{
	char path[] = "/tmp/ctxguard-rehome-XXXXXX";
	CUfunction f = helper_from_file(path);
	FILE *w = fopen(path, "w");
	ck_assert_ptr_nonnull(w);
	fputs(producer_image, w);
	fclose(w);
	fake_trace_start();
	for (int i = 0; i < 2; i++) {
		capture_start();
		CUresult rc = launch_as_helper(f, 0, ctx[0], stream[0], a, d);
		const char *err = capture_end();
		ck_assert_int_ne(rc, CUDA_SUCCESS);
		ck_assert_msg(strstr(err, "not in the re-loaded image"), "%s", err);
	}
	unlink(path);
	size_t n = fake_trace(trace, 4096);
	size_t l = find(n, 0, "cuModuleLoad", ctx[1], NULL, NULL);
	ck_assert_msg(l < n, "not loaded again");
	ck_assert_msg(find(n, l + 1, "cuModuleLoad", ctx[1], NULL, NULL) == n,
		      "loaded again at the second launch");
	none_unloaded(n);
}
END_TEST

/* A CUkernel (launched as a function, it runs in any context) whose shared
 * memory the program raised for device 0, where it launches it with
 * device 1's operands, and lowered for device 1: the redirect runs its
 * function in device 1's context with device 0's value (the fake, like the
 * driver, keeps one per device). */
START_TEST(kernel_attributes_follow_it_to_the_target_device)
{
	CUlibrary lib;
	CUkernel k;
	CUdevice d0, d1;
	int smem;
	ck_assert_int_eq(cuDeviceGet(&d0, 0), CUDA_SUCCESS);
	ck_assert_int_eq(cuDeviceGet(&d1, 1), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	ck_assert_int_eq(cuLibraryLoadData(&lib, helper_image, NULL, NULL, 0, NULL, NULL, 0),
			 CUDA_SUCCESS);
	ck_assert_int_eq(cuLibraryGetKernel(&k, lib, HELPER), CUDA_SUCCESS);
	ck_assert_int_eq(cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
					      HELPER_SMEM, k, d0),
			 CUDA_SUCCESS);
	ck_assert_int_eq(cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
					      HELPER_SMEM / 2, k, d1),
			 CUDA_SUCCESS);
	fake_trace_start();
	capture_start();
	CUresult rc = launch_as_helper((CUfunction)k, HELPER_SMEM, ctx[0], stream[0], a, d);
	const char *err = capture_end();
	ck_assert_msg(rc == CUDA_SUCCESS, "%d: %s", rc, err);
	size_t n = fake_trace(trace, 4096);
	ck_assert_msg(find(n, 0, "launch", ctx[1], NULL, NULL) < n, "not launched on device 1");
	/* through its function there: the program's own value for device 1
	 * stays (cuKernelSetAttribute would wait for the device's work) */
	ck_assert_int_eq(cuKernelGetAttribute(&smem,
					      CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k, d1),
			 CUDA_SUCCESS);
	ck_assert_int_eq(smem, HELPER_SMEM / 2);
}
END_TEST

/* A destroyed stream is no longer ordered with; a live one still is. */
START_TEST(destroyed_stream_is_dropped)
{
	CUstream kept, dropped;
	/* ctxguard's own stream first: it would take the freed handle. */
	ck_assert_int_eq(launch_helper(ctx[0], stream[0], a, d), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxSetCurrent(ctx[1]), CUDA_SUCCESS);
	ck_assert_int_eq(cuStreamCreate(&kept, 0), CUDA_SUCCESS);
	ck_assert_int_eq(cuStreamCreate(&dropped, 0), CUDA_SUCCESS);
	produce_on(kept);
	produce_on(dropped);
	ck_assert_int_eq(cuStreamDestroy(dropped), CUDA_SUCCESS);
	fake_trace_start();
	ck_assert_int_eq(launch_helper(ctx[0], stream[0], a, d), CUDA_SUCCESS);
	size_t n = fake_trace(trace, 4096);
	ck_assert(find(n, 0, "cuEventRecord", NULL, dropped, NULL) == n);
	ck_assert(find(n, 0, "cuStreamWaitEvent", NULL, dropped, NULL) == n);
	ck_assert(find(n, 0, "cuEventRecord", ctx[1], kept, NULL) < n);
	ck_assert(find(n, 0, "cuStreamWaitEvent", ctx[1], kept, NULL) < n);
}
END_TEST

/* GemmType::Normal has no grouped_layout: one group, rows from a buffer of
 * zeros ctxguard keeps in device 1's context. */
/* The Normal GEMM launched on device 0 with device 1's operands, traced,
 * its stderr in *err. */
static CUresult launch_normal(const char **err)
{
	CUtensorMap A = ta, B = encode(b, K, N), D = td;
	CUdeviceptr none = 0;
	uint32_t m = M, n = N, k = K;
	void *params[] = {&none, &m, &n, &k, &A, &B, &D};
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	fake_trace_start();
	capture_start();
	CUresult rc =
		cuLaunchKernel(normal, 132, 1, 1, 384, 1, 1, GEMM_SMEM, stream[0], params, NULL);
	*err = capture_end();
	return rc;
}

START_TEST(normal_gemm_runs_as_one_group)
{
	const char *err;
	CUresult rc = launch_normal(&err);
	size_t nt = fake_trace(trace, 4096);
	if (!bundled_built()) {
		ck_assert_int_eq(rc, CUDA_ERROR_INVALID_HANDLE);
		ck_assert_msg(strstr(err, "without nvcc"), "%s", err);
		return;
	}
	ck_assert_int_eq(rc, CUDA_SUCCESS);
	size_t run = find(nt, 0, "launch", ctx[1], NULL, NULL);
	ck_assert(run < nt && !strncmp(trace[run].kernel, "cg_gmm_", 7));
	ck_assert_msg(strstr(err, "(cg_gmm_contiguous)"), "%s", err);
}
END_TEST

/* The buffer of zeros a Normal GEMM reads is made (and its memset waited
 * for by the host) on a stream that waits for nothing of the program's:
 * were it T after T's waits, the host would block until S and every busy
 * stream of device 1 drained, and hang for good when one of those waits
 * for work the program queues after this call (docs/redirect.md, "Deadlock"). */
START_TEST(normal_gemm_zeros_do_not_wait_for_the_programs_streams)
{
	produce_on_device_1();
	const char *err;
	launch_normal(&err);
	size_t nt = fake_trace(trace, 4096);
	size_t sync = find(nt, 0, "cuStreamSynchronize", ctx[1], NULL, NULL);
	ck_assert_msg(sync < nt, "the zeros were never synchronized");
	for (size_t i = 0; i < sync; i++)
		ck_assert_msg(strcmp(trace[i].api, "cuStreamWaitEvent") ||
				      trace[i].stream != trace[sync].stream,
			      "the host synchronizes a stream that waits for the program's work");
}
END_TEST

/* The target context cannot be made current again after S's event is
 * recorded: the redirect falls back and leaves the program's current
 * context as it was (it must not pop a context it did not push, nor make
 * the twin in the wrong context). */
static void fail_next_push(void *arg)
{
	(void)arg;
	fake_fail_next("cuCtxPushCurrent", CUDA_ERROR_INVALID_CONTEXT);
}

START_TEST(failed_push_leaves_the_current_context)
{
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	fake_after_next("cuEventRecord", fail_next_push, NULL);
	capture_start();
	CUresult rc = launch_helper(ctx[0], stream[0], a, d);
	capture_end();
	ck_assert_int_ne(rc, CUDA_SUCCESS);
	CUcontext cur = NULL;
	ck_assert_int_eq(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
	ck_assert_ptr_eq(cur, ctx[0]);
	/* and the next redirect still works */
	fake_trace_start();
	ck_assert_int_eq(launch_helper(ctx[0], stream[0], a, d), CUDA_SUCCESS);
	size_t n = fake_trace(trace, 4096);
	ck_assert_msg(find(n, 0, "launch", ctx[1], NULL, NULL) < n, "not launched on device 1");
}
END_TEST

/* Ordering fails once the work is queued on T: the launch has happened,
 * so no fallback (the original would run as well, or a launch that ran
 * would be refused or abort) but a host wait for the work, said once per
 * kernel, and the call succeeds; when even that wait fails, its error.
 * Each fault is armed as the work's launch leaves the fake. */
static void fail_record(void *arg)
{
	(void)arg;
	fake_fail_next("cuEventRecord", CUDA_ERROR_OUT_OF_MEMORY);
}

/* The first wait for T's event: device 1's legacy stream's. */
static void fail_wait(void *arg)
{
	(void)arg;
	fake_fail_next("cuStreamWaitEvent", CUDA_ERROR_OUT_OF_MEMORY);
}

/* The launch stream's wait, made once the target context is popped. */
static void fail_launch_stream_wait(void *arg)
{
	fake_after_next("cuCtxPopCurrent", fail_wait, arg);
}

static void fail_wait_and_host_wait(void *arg)
{
	fail_wait(arg);
	fake_fail_next("cuEventSynchronize", CUDA_ERROR_ILLEGAL_ADDRESS);
}

#define RECORD "cuEventRecord on ctxguard's stream"
#define WAIT "cuStreamWaitEvent on a stream of the target context"
#define S_WAIT "cuStreamWaitEvent on the launch stream"
/* What the redirect's log record adds: the call that failed, the host's wait. */
#define WAITED(failed, wait, result)                                                        \
	",\"redirect_order_failed\":\"" failed "\",\"redirect_order_error\":2,"               \
	"\"redirect_host_wait\":\"" wait "\",\"redirect_host_wait_error\":" result "}"

static const struct {
	int gemm;                /* the bundled GEMM, else the re-homed helper */
	void (*fault)(void *);
	const char *failed;      /* what the report names */
	CUresult rc;
	const char *record;      /* the end of the log record */
} unordered[] = {
	{0, fail_record, RECORD, CUDA_SUCCESS, WAITED(RECORD, "cuStreamSynchronize", "0")},
	{0, fail_wait, WAIT, CUDA_SUCCESS, WAITED(WAIT, "cuEventSynchronize", "0")},
	{0, fail_launch_stream_wait, S_WAIT, CUDA_SUCCESS,
	 WAITED(S_WAIT, "cuEventSynchronize", "0")},
	{1, fail_record, RECORD, CUDA_SUCCESS, WAITED(RECORD, "cuStreamSynchronize", "0")},
	{1, fail_wait, WAIT, CUDA_SUCCESS, WAITED(WAIT, "cuEventSynchronize", "0")},
	{0, fail_wait_and_host_wait, WAIT, CUDA_ERROR_ILLEGAL_ADDRESS,
	 WAITED(WAIT, "cuEventSynchronize", "700")},
};

/* Row i of unordered: its fault armed, its kernel launched on device 0
 * with device 1's operands. */
static CUresult launch_unordered(size_t i)
{
	int is_gemm = unordered[i].gemm;
	fake_after_next(is_gemm ? "cuLaunchKernel" : "cuLaunchKernelEx", unordered[i].fault, NULL);
	return is_gemm ? launch_gemm(gemm, ctx[0], stream[0], &tb)
		       : launch_helper(ctx[0], stream[0], a, d);
}

START_TEST(failed_ordering_after_the_work_is_queued_waits_on_the_host)
{
	if (unordered[_i].gemm && !bundled_built())
		return;
	produce_on_device_1();
	fake_reset();
	capture_start();
	for (int round = 0; round < 2; round++) {
		fake_trace_start();
		CUresult rc = launch_unordered(_i);
		ck_assert_int_eq(rc, unordered[_i].rc);
		size_t n = fake_trace(trace, 4096);
		size_t run = find(n, 0, "launch", ctx[1], NULL, NULL);
		ck_assert_msg(run < n, "the work did not run on device 1");
		/* The host waited for the event recorded on T, or for T itself
		 * when there is none (a wait that failed is not traced). */
		size_t after = find(n, run, "cuEventRecord", ctx[1], trace[run].stream, NULL);
		size_t w = after < n ? find(n, after, "cuEventSynchronize", ctx[1], NULL,
					    trace[after].object)
				     : find(n, run, "cuStreamSynchronize", ctx[1], trace[run].stream,
					    NULL);
		ck_assert_msg(w < n || unordered[_i].rc != CUDA_SUCCESS,
			      "the host did not wait for the work");
	}
	const char *err = capture_end();
	struct fake_stats st;
	fake_get_stats(&st);
	ck_assert_uint_eq(st.launches_on[0], 0);
	ck_assert_uint_eq(st.launches_on[1], 2);
	ck_assert_msg(!strstr(err, "redirect impossible") && !strstr(err, "refused"), "%s", err);
	/* A redirect (its first line), the failure said once. */
	ck_assert_msg(strstr(err, unordered[_i].gemm ? "(cg_gmm_contiguous)\n" : "(re-homed)\n"),
		      "%s", err);
	const char *said = unordered[_i].rc == CUDA_SUCCESS
				   ? "ctxguard waited on the host for it to finish"
				   : "waiting for it on the host failed too (error 700)";
	char failed[128];
	snprintf(failed, sizeof failed, "%s failed (error 2)", unordered[_i].failed);
	ck_assert_msg(count_of(err, said) == 1 && count_of(err, failed) == 1, "%s", err);
}
END_TEST

/* Such a redirect's log record says what failed and how the host waited. */
START_TEST(host_wait_is_in_the_log_record)
{
	char log[] = "/tmp/ctxguard-redirect-XXXXXX";
	int fd = mkstemp(log);
	ck_assert_int_ge(fd, 0);
	close(fd);
	setenv("CTXGUARD_LOG", log, 1);
	setup_mode("abort");
	if (unordered[_i].gemm && !bundled_built()) {
		unlink(log);
		return;
	}
	produce_on_device_1();
	capture_start();
	CUresult rc = launch_unordered(_i);
	capture_end();
	char *text = slurp(log);
	unlink(log);
	ck_assert_int_eq(rc, unordered[_i].rc);
	ck_assert_msg(text && count_of(text, "\"action\":\"redirect\"") == 1 &&
			      strstr(text, unordered[_i].record),
		      "no %s in:\n%s", unordered[_i].record, text ? text : "(no log)");
}
END_TEST

/* Each impossible redirect: one line why, then the error fallback. */
static void capture_only(void) {}
/* Checked once outside the capture first: under capture ctxguard asks the
 * driver nothing new (the kernel's parameter layout). */
static void capturing(void)
{
	launch_gemm(gemm, ctx[0], stream[0], &tb);
	fake_stream_set_capturing(stream[0], 1);
}
static void reload_fails(void) { fake_fail_next("cuModuleLoadData", CUDA_ERROR_INVALID_IMAGE); }
/* Issue 66, 4: launches DeepGEMM's host code never makes, which the
 * original would run differently (half of D; D scrambled). */
static void half_grid(void) { gemm_grid = 66; }
static void a_unswizzled(void)
{
	static CUtensorMap m;
	m = encode_swizzled(a, K, M, CU_TENSOR_MAP_SWIZZLE_NONE);
	gemm_a = &m;
}

static const struct {
	int helper;              /* launch the helper, else a GEMM */
	CUfunction *f;
	const CUtensorMap *b;
	void (*before)(void);
	const char *reason;
} impossible[] = {
	{0, &gemm, &tb0, capture_only, "operands on more than one device (A on device 1, B on device 0)"},
	{0, &accum, &tb, capture_only, "accumulation into D (with_accumulation)"},
	{0, &gemm, &tb, capturing, "the stream is capturing a CUDA graph"},
	{1, NULL, NULL, reload_fails, "image not re-loadable: loading it into the target context failed"},
	{0, &gemm, &tb, half_grid, "launched with grid {66, 1, 1} and block {384, 1, 1}; DeepGEMM "
	 "launches this kernel with grid {132, 1, 1} (kNumSMs)"},
	{0, &gemm, &tb, a_unswizzled, "tensor map a has swizzle 0"},
};

/* Issue 66, 5: the driver refuses a launch with both kernelParams and
 * extra, crossing or not, and runs nothing; so does the redirect. */
START_TEST(params_and_extra_are_refused_as_the_driver_does)
{
	produce_on_device_1();
	fake_reset();
	uint32_t m = M, n = N, k = K;
	CUtensorMap A = ta, B = tb, D = td;
	void *params[] = {&layout, &m, &n, &k, &A, &B, &D};
	void *extra[] = {CU_LAUNCH_PARAM_END};
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	capture_start();
	CUresult rc = cuLaunchKernel(gemm, 132, 1, 1, 384, 1, 1, GEMM_SMEM, stream[0], params,
				     extra);
	const char *err = capture_end();
	struct fake_stats st;
	fake_get_stats(&st);
	ck_assert_int_eq(rc, CUDA_ERROR_INVALID_VALUE);
	ck_assert_uint_eq(st.launches_on[0], 0);
	ck_assert_uint_eq(st.launches_on[1], 0);
	ck_assert_msg(!strstr(err, "ctxguard: redirect:"), "%s", err);
}
END_TEST

START_TEST(each_impossible_redirect_falls_back_to_error)
{
	impossible[_i].before();
	capture_start();
	CUresult rc = impossible[_i].helper ? launch_helper(ctx[0], stream[0], a, d)
					    : launch_gemm(*impossible[_i].f, ctx[0], stream[0],
							  impossible[_i].b);
	const char *err = capture_end();
	ck_assert_int_eq(rc, CUDA_ERROR_INVALID_HANDLE);
	ck_assert_msg(strstr(err, "ctxguard: redirect impossible: kernel ") &&
		      strstr(err, impossible[_i].reason) &&
		      strstr(err, "falling back to error (redirect_fallback)"), "%s", err);
	/* Then the usual report, and the message for the framework. */
	ck_assert_msg(strstr(err, "ctxguard: cross-context launch refused"), "%s", err);
	const char *s = NULL;
	cuGetErrorString(rc, &s);
	ck_assert_ptr_nonnull(s);
	ck_assert_ptr_nonnull(strstr(s, cg_deepgemm_message));
}
END_TEST

START_TEST(impossible_redirect_aborts_by_default)
{
	launch_gemm(accum, ctx[0], stream[0], &tb);
}
END_TEST

/* 16 threads, each redirecting the helper back and forth between the two
 * devices (and the GEMM, when built), sharing pools and streams. */
enum { THREADS = 16, ROUNDS = 50 };

static void *redirecting(void *arg)
{
	long t = (long)arg;
	int from = t % 2, gemm_too = bundled_built();
	CUdeviceptr in = from ? b0 : a, out = from ? b0 : d;
	for (int r = 0; r < ROUNDS; r++) {
		if (launch_helper(ctx[from], stream[from], in, out) != CUDA_SUCCESS)
			return (void *)1;
		if (gemm_too && !from && launch_gemm(gemm, ctx[0], stream[0], &tb) != CUDA_SUCCESS)
			return (void *)2;
	}
	return NULL;
}

START_TEST(threads_redirect_on_two_devices)
{
	pthread_t th[THREADS];
	fake_reset();
	capture_start();
	for (long t = 0; t < THREADS; t++)
		ck_assert_int_eq(pthread_create(&th[t], NULL, redirecting, (void *)t), 0);
	for (int t = 0; t < THREADS; t++) {
		void *r;
		pthread_join(th[t], &r);
		ck_assert_ptr_null(r);
	}
	capture_end();
	struct fake_stats st;
	fake_get_stats(&st);
	ck_assert_uint_eq(st.silent_cross, 0);
	ck_assert_uint_ge(st.launches_on[1], THREADS / 2 * ROUNDS);
	ck_assert_uint_ge(st.launches_on[0], THREADS / 2 * ROUNDS);
}
END_TEST

/* The child of log_record_and_summary: three redirected helper launches. */
static void three_redirects(void)
{
	setup_mode("abort");
	for (int i = 0; i < 3; i++)
		if (launch_helper(ctx[0], stream[0], a, d) != CUDA_SUCCESS)
			_exit(3);
}

/* Every redirect is a log record; the summary counts them. */
START_TEST(log_record_and_summary)
{
	static struct run r;
	char log[] = "/tmp/ctxguard-redirect-XXXXXX";
	int fd = mkstemp(log);
	ck_assert_int_ge(fd, 0);
	close(fd);
	setenv("CTXGUARD_LOG", log, 1);
	spawn_fn(&r, three_redirects);
	ck_assert_msg(exited(&r, 0), "status %#x\n%s", r.status, r.err);
	char *text = slurp(log);
	unlink(log);
	ck_assert_int_eq(count_of(text, "\"action\":\"redirect\""), 3);
	ck_assert_ptr_nonnull(strstr(text, "\"redirect_dev\":1,\"redirect_via\":\"re-homed\"}"));
	ck_assert_ptr_nonnull(strstr(text, "\"redirect\":3}"));
	ck_assert_msg(strstr(r.err, "redirect 3)"), "%s", r.err);
}
END_TEST

/* A stream created under a redirect policy warms its context: ctxguard's
 * stream and the bundled kernels, each loaded (cuFuncLoad) there and then. */
START_TEST(stream_creation_warms_its_context)
{
	CUcontext own = created_on(1);
	CUstream s;
	fake_trace_start();
	ck_assert_int_eq(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	size_t n = fake_trace(trace, 4096);
	ck_assert_uint_eq(count(n, "cuStreamCreate"), 2);
	if (bundled_built()) {
		ck_assert(find(n, 0, "cuModuleLoad", own, NULL, NULL) < n);
		ck_assert(find(n, 0, "cuFuncLoad", own, NULL, NULL) < n);
	} else {
		ck_assert_uint_eq(count(n, "cuModuleLoad"), 0);
	}
	/* Once per context. */
	fake_trace_start();
	ck_assert_int_eq(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	n = fake_trace(trace, 4096);
	ck_assert_uint_eq(count(n, "cuStreamCreate"), 1);
	ck_assert_uint_eq(count(n, "cuModuleLoad"), 0);
}
END_TEST

/* A module load warms every device's active primary context, and creates
 * none: device 2's is retained (active), device 3's never is. */
START_TEST(module_load_warms_active_primary_contexts)
{
	setenv("FAKE_CUDA_DEVICES", "4", 1);
	setenv("CTXGUARD_MODE", "redirect", 1);
	ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
	CUcontext c0, c2;
	CUdevice d0, d2, d3;
	ck_assert_int_eq(cuDeviceGet(&d0, 0), CUDA_SUCCESS);
	ck_assert_int_eq(cuDeviceGet(&d2, 2), CUDA_SUCCESS);
	ck_assert_int_eq(cuDeviceGet(&d3, 3), CUDA_SUCCESS);
	ck_assert_int_eq(cuDevicePrimaryCtxRetain(&c2, d2), CUDA_SUCCESS);
	ck_assert_int_eq(cuDevicePrimaryCtxRetain(&c0, d0), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxSetCurrent(c0), CUDA_SUCCESS);
	fake_trace_start();
	CUmodule mod;
	ck_assert_int_eq(cuModuleLoadData(&mod, producer_image), CUDA_SUCCESS);
	size_t n = fake_trace(trace, 4096);
	unsigned flags;
	int active;
	ck_assert_int_eq(cuDevicePrimaryCtxGetState(d3, &flags, &active), CUDA_SUCCESS);
	ck_assert_int_eq(active, 0);
	ck_assert(find(n, 0, "cuStreamCreate", c2, NULL, NULL) < n);
	ck_assert(find(n, 0, "cuStreamCreate", c0, NULL, NULL) < n);
	if (bundled_built()) {
		ck_assert(find(n, 0, "cuFuncLoad", c2, NULL, NULL) < n);
		ck_assert(find(n, 0, "cuFuncLoad", c0, NULL, NULL) < n);
	}
}
END_TEST

/* A process of its own (no fixture) under mode: device 1's primary
 * context, current. */
static CUcontext start_on_device_1(const char *mode)
{
	CUcontext c;
	CUdevice d;
	setenv("CTXGUARD_MODE", mode, 1);
	ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
	ck_assert_int_eq(cuDeviceGet(&d, 1), CUDA_SUCCESS);
	ck_assert_int_eq(cuDevicePrimaryCtxRetain(&c, d), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxSetCurrent(c), CUDA_SUCCESS);
	return c;
}

/* The program initialized the bundled API itself first (the ctypes entry
 * point, as the Python benchmarks do): its driver table holds the hooks,
 * and warming loads the kernels once, through the real driver. */
START_TEST(warming_with_the_programs_bundled_table)
{
	CUcontext c = start_on_device_1("redirect");
	int (*init)(void);
	*(void **)&init = dlsym(RTLD_DEFAULT, "ctxguard_gmm_init_default");
	ck_assert_ptr_nonnull(init);
	int built = bundled_built(), rc = init();
	if (built)
		ck_assert_int_eq(rc, 0);
	fake_trace_start();
	CUstream s;
	ck_assert_int_eq(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	size_t n = fake_trace(trace, 4096);
	if (built) {
		ck_assert(find(n, 0, "cuFuncLoad", c, NULL, NULL) < n);
		ck_assert_uint_eq(count(n, "cuModuleLoad"), 1);
	}
}
END_TEST

/* The other order: ctxguard readied the bundled kernels for a redirect (a
 * stream creation warms) before the program's first call of their exported
 * entry points.  The program's launches still pass the hooks, which a
 * CUPTI backstop would otherwise see as unhooked (failing an audit); only
 * ctxguard's own calls take the real driver. */
START_TEST(programs_bundled_calls_pass_the_hooks_after_warming)
{
	char cupti[4096];
	snprintf(cupti, sizeof cupti, "%s/fake/cupti/libcupti.so", build_dir());
	setenv("CTXGUARD_BACKSTOP", "on", 1);
	setenv("CTXGUARD_CUPTI", cupti, 1);
	CUcontext c = start_on_device_1("redirect");
	CUstream s;
	ck_assert_int_eq(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	int (*init)(void);
	int (*run)(uint64_t, int, int, unsigned, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
		   uint64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
	*(void **)&init = dlsym(RTLD_DEFAULT, "ctxguard_gmm_init_default");
	*(void **)&run = dlsym(RTLD_DEFAULT, "ctxguard_gmm_contiguous");
	ck_assert(init && run);
	if (!bundled_built())
		return;
	ck_assert_int_eq(init(), 0);
	enum { M = 128, N = 128, K = 128 };
	CUdeviceptr a, b, d, layout;
	ck_assert_int_eq(cuMemAlloc(&a, M * K * 2), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemAlloc(&b, N * K * 2), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemAlloc(&d, M * N * 2), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemAlloc(&layout, M * 4), CUDA_SUCCESS);
	fake_trace_start();
	capture_start();
	int rc = run((uint64_t)(uintptr_t)s, 0, 0, 0, a, b, d, layout, 0, 0, 0, 0, M, N, K, 1);
	const char *err = capture_end();
	ck_assert_msg(rc == 0, "%d: %s", rc, err);
	size_t n = fake_trace(trace, 4096);
	ck_assert(find(n, 0, "launch", c, s, NULL) < n);
	ck_assert_msg(!strstr(err, "without passing ctxguard's hooks"), "%s", err);
}
END_TEST

/* Under a policy that never redirects, nothing is made ahead. */
START_TEST(no_warming_without_redirect)
{
	start_on_device_1("abort");
	fake_trace_start();
	CUstream s;
	CUmodule mod;
	ck_assert_int_eq(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleLoadData(&mod, producer_image), CUDA_SUCCESS);
	size_t n = fake_trace(trace, 4096);
	ck_assert_uint_eq(count(n, "cuStreamCreate"), 1);
	ck_assert_uint_eq(count(n, "cuModuleLoad"), 1);
	ck_assert_uint_eq(count(n, "cuFuncLoad"), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("redirect");
	TCase *t = tcase_create("redirect");
	tcase_set_timeout(t, 120);
	tcase_add_checked_fixture(t, setup_abort, NULL);
	tcase_add_test(t, helper_is_rehomed_with_its_attributes);
	tcase_add_test(t, library_function_is_rehomed);
	tcase_add_test(t, created_context_runs_the_original_in_its_own_context);
	tcase_add_test(t, destroyed_context_forgets_its_twins);
	tcase_add_test(t, redirect_into_the_owners_context_runs_the_original);
	tcase_add_test(t, file_module_is_rehomed);
	tcase_add_test(t, destroyed_stream_is_dropped);
	tcase_add_test_raise_signal(t, impossible_redirect_aborts_by_default, SIGABRT);
	tcase_add_loop_test(t, failed_ordering_after_the_work_is_queued_waits_on_the_host, 0,
			    sizeof unordered / sizeof unordered[0]);
	suite_add_tcase(s, t);
	/* The GEMM cases fall back to error where the kernels are not built. */
	TCase *e = tcase_create("fallback error");
	tcase_set_timeout(e, 120);
	tcase_add_checked_fixture(e, setup_error, NULL);
	tcase_add_test(e, silent_crossing_runs_bundled_on_the_operands_device);
	tcase_add_test(e, handle_crossing_runs_on_the_launch_stream);
	tcase_add_test(e, normal_gemm_runs_as_one_group);
	tcase_add_test(e, normal_gemm_zeros_do_not_wait_for_the_programs_streams);
	tcase_add_test(e, failed_push_leaves_the_current_context);
	tcase_add_test(e, psum_gemm_runs_bundled_psum);
	tcase_add_test(e, threads_redirect_on_two_devices);
	tcase_add_test(e, stream_creation_warms_its_context);
	tcase_add_test(e, unload_retires_the_twin_and_the_attributes);
	tcase_add_test(e, context_end_retires_the_twin_and_the_attributes);
	tcase_add_test(e, racing_threads_share_one_twin);
	tcase_add_loop_test(e, unload_during_a_redirect_retires_the_twin, 0, 2);
	tcase_add_test(e, function_missing_from_its_image_is_tried_once);
	tcase_add_test(e, kernel_attributes_follow_it_to_the_target_device);
	tcase_add_loop_test(e, each_impossible_redirect_falls_back_to_error, 0,
			    sizeof impossible / sizeof impossible[0]);
	tcase_add_test(e, params_and_extra_are_refused_as_the_driver_does);
	tcase_add_loop_test(e, failed_ordering_after_the_work_is_queued_waits_on_the_host, 0,
			    sizeof unordered / sizeof unordered[0]);
	suite_add_tcase(s, e);
	TCase *l = tcase_create("log");
	tcase_add_test(l, log_record_and_summary);
	tcase_add_loop_test(l, host_wait_is_in_the_log_record, 0,
			    sizeof unordered / sizeof unordered[0]);
	tcase_add_test(l, module_load_warms_active_primary_contexts);
	tcase_add_test(l, no_warming_without_redirect);
	tcase_add_test(l, warming_with_the_programs_bundled_table);
	tcase_add_test(l, programs_bundled_calls_pass_the_hooks_after_warming);
	suite_add_tcase(s, l);
	return run_suite(s);
}
