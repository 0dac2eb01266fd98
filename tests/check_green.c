/* Several contexts on one device (docs/contexts.md), on the fake driver:
 * green contexts share their device's primary context's modules, so no
 * launch among them is a crossing, under --scope all --mode abort; a
 * created context (cuCtxCreate, with or without execution affinity) is a
 * module domain of its own, and its functions launched on the primary
 * context's streams cross under every action as before; its memory given
 * to a primary-context kernel does not; a green context's handle, once
 * destroyed and handed out again for a created context, is no alias; a
 * redirect into a device waits for its green streams' work too. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cuda.h>

#include "../policy/policy.h"
#include "fake/fake_api.h"
#include "observe.h"
#include "suite.h"

/* A helper DeepGEMM launches (an expert: redirected by re-homing). */
#define HELPER "_ZN9deep_gemm14transpose_fp32ILj128ELj128EEEvPKfPfj"
static const char image[] = "//ctxguard-fake-image\n.kernel " HELPER " 8,8,4\n";
enum { SIZE = 1 << 20 };

static CUcontext primary[2];
static CUgreenCtx green[2][2]; /* two green contexts on each device */
static CUcontext gctx[2][2];   /* their CUcontexts */
static CUdeviceptr mem[2];     /* allocated in each primary context */

typedef CUresult (*green_create_fn)(CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned);
typedef CUresult (*green_as_ctx_fn)(CUcontext *, CUgreenCtx);

/* A green context of 16 SMs on dev, made and converted by the functions
 * given (the hooked ones, or others reached another way). */
static CUgreenCtx make_green_by(green_create_fn create, green_as_ctx_fn from, int dev,
				CUcontext *as)
{
	CUdevResource all, part[2];
	CUdevResourceDesc desc;
	CUgreenCtx g;
	unsigned n = 2;
	ck_assert_ptr_nonnull(create);
	ck_assert_ptr_nonnull(from);
	ck_assert_int_eq(cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM), CUDA_SUCCESS);
	ck_assert_int_eq(cuDevSmResourceSplitByCount(part, &n, &all, NULL, 0, 16), CUDA_SUCCESS);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(part[0].sm.smCount, 16);
	ck_assert_int_eq(cuDevResourceGenerateDesc(&desc, &part[0], 1), CUDA_SUCCESS);
	ck_assert_int_eq(create(&g, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM), CUDA_SUCCESS);
	ck_assert_int_eq(from(as, g), CUDA_SUCCESS);
	return g;
}

static CUgreenCtx make_green(int dev, CUcontext *as)
{
	return make_green_by(cuGreenCtxCreate, cuCtxFromGreenCtx, dev, as);
}

static void setup_mode(const char *mode)
{
	setenv("CTXGUARD_MODE", mode, 1);
	setenv("CTXGUARD_SCOPE", "all", 1);
	setenv("CTXGUARD_REDIRECT_FALLBACK", "error", 1);
	ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
	for (int dev = 1; dev >= 0; dev--) {
		ck_assert_int_eq(cuDevicePrimaryCtxRetain(&primary[dev], dev), CUDA_SUCCESS);
		ck_assert_int_eq(cuCtxSetCurrent(primary[dev]), CUDA_SUCCESS);
		ck_assert_int_eq(cuMemAlloc(&mem[dev], SIZE), CUDA_SUCCESS);
		for (int i = 0; i < 2; i++) {
			green[dev][i] = make_green(dev, &gctx[dev][i]);
			ck_assert_ptr_ne(gctx[dev][i], primary[dev]);
		}
	}
}

static void setup_abort(void)
{
	setup_mode("abort");
}

static void setup_error(void)
{
	setup_mode("error");
}

static void setup_warn(void)
{
	setup_mode("warn");
}

static void setup_redirect(void)
{
	setup_mode("redirect");
}

/* HELPER loaded with ctx current. */
static CUfunction load_in(CUcontext ctx)
{
	CUmodule mod;
	CUfunction f;
	ck_assert_int_eq(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleLoadData(&mod, image), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleGetFunction(&f, mod, HELPER), CUDA_SUCCESS);
	return f;
}

/* f launched with ctx current on stream s, over memory p. */
static CUresult launch(CUfunction f, CUcontext ctx, CUstream s, CUdeviceptr p)
{
	ck_assert_int_eq(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
	unsigned mn = 128;
	void *params[] = {&p, &p, &mn};
	return cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
}

static void assert_ran(CUresult rc, unsigned long long launches)
{
	struct fake_stats st;
	fake_get_stats(&st);
	ck_assert_int_eq(rc, CUDA_SUCCESS);
	ck_assert_uint_eq(st.launches, launches);
	ck_assert_uint_eq(st.invalid_handle, 0);
	ck_assert_uint_eq(st.sticky_errors, 0);
}

/* torch.cuda.green_contexts around a kernel JIT-loaded before: the green
 * context current, its default stream. */
START_TEST(primary_module_runs_in_green_context)
{
	CUfunction f = load_in(primary[0]);
	fake_reset();
	assert_ran(launch(f, gctx[0][0], NULL, mem[0]), 1);
	assert_ran(launch(f, gctx[0][1], CU_STREAM_PER_THREAD, mem[0]), 2);
}
END_TEST

/* Loaded while a green context was current, launched on a stream the
 * primary context made. */
START_TEST(green_module_runs_on_primary_stream)
{
	CUfunction f = load_in(gctx[0][0]);
	CUstream s;
	ck_assert_int_eq(cuCtxSetCurrent(primary[0]), CUDA_SUCCESS);
	ck_assert_int_eq(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	fake_reset();
	assert_ran(launch(f, primary[0], s, mem[0]), 1);
	assert_ran(launch(f, primary[0], NULL, mem[0]), 2);
}
END_TEST

/* cuGreenCtxStreamCreate's streams, whatever is current: the stream's
 * context decides, and it is one of the same domain. */
START_TEST(green_stream_launches)
{
	CUfunction f = load_in(primary[0]), g = load_in(gctx[0][1]);
	CUstream s;
	CUcontext of;
	ck_assert_int_eq(cuGreenCtxStreamCreate(&s, green[0][0], CU_STREAM_NON_BLOCKING, 0),
			 CUDA_SUCCESS);
	ck_assert_int_eq(cuStreamGetCtx(s, &of), CUDA_SUCCESS);
	ck_assert_ptr_eq(of, gctx[0][0]); /* as measured: the green context's handle */
	fake_reset();
	assert_ran(launch(f, primary[0], s, mem[0]), 1);
	assert_ran(launch(f, gctx[0][0], s, mem[0]), 2);
	assert_ran(launch(g, primary[0], s, mem[0]), 3);
}
END_TEST

/* Loaded in green context A, launched in green context B of the device. */
START_TEST(module_of_one_green_context_runs_in_another)
{
	CUfunction f = load_in(gctx[0][0]);
	fake_reset();
	assert_ran(launch(f, gctx[0][1], NULL, mem[0]), 1);
}
END_TEST

/* A CUkernel runs anywhere, green contexts included. */
START_TEST(cukernel_runs_in_green_contexts)
{
	CUlibrary lib;
	CUkernel k;
	ck_assert_int_eq(cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0),
			 CUDA_SUCCESS);
	ck_assert_int_eq(cuLibraryGetKernel(&k, lib, HELPER), CUDA_SUCCESS);
	fake_reset();
	assert_ran(launch((CUfunction)k, gctx[0][0], NULL, mem[0]), 1);
	assert_ran(launch((CUfunction)k, gctx[1][1], NULL, mem[1]), 2);
}
END_TEST

/* Memory of a created context given to a primary-context kernel of the
 * same device: accepted by the driver, and no operand crossing. */
START_TEST(created_context_memory_in_primary_kernel)
{
	CUcontext own;
	CUdeviceptr p;
	CUfunction f = load_in(primary[0]);
	ck_assert_int_eq(cuCtxCreate(&own, NULL, 0, 0), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemAlloc(&p, SIZE), CUDA_SUCCESS);
	fake_reset();
	assert_ran(launch(f, primary[0], NULL, p), 1);
	assert_ran(launch(f, gctx[0][0], NULL, p), 2);
}
END_TEST

/* A created context, plain (0) or with execution affinity (1). */
static CUcontext create_context(int affinity)
{
	CUcontext own;
	CUexecAffinityParam sm = {.type = CU_EXEC_AFFINITY_TYPE_SM_COUNT, .param.smCount.val = 64};
	CUctxCreateParams p = {.execAffinityParams = &sm, .numExecAffinityParams = 1};
	ck_assert_int_eq(cuCtxCreate(&own, affinity ? &p : NULL, 0, 0), CUDA_SUCCESS);
	return own;
}

/* Where a created context's function is launched on device 0: a stream of
 * the primary context, the primary context current, a green one current. */
enum { ON_PRIMARY_STREAM, PRIMARY_CURRENT, GREEN_CURRENT, WHERE };

static CUresult launch_created(int affinity, int where)
{
	CUcontext own = create_context(affinity);
	CUfunction f = load_in(own);
	CUstream s = NULL;
	if (where == ON_PRIMARY_STREAM) {
		ck_assert_int_eq(cuCtxSetCurrent(primary[0]), CUDA_SUCCESS);
		ck_assert_int_eq(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	}
	fake_reset();
	return launch(f,
		      where == GREEN_CURRENT       ? gctx[0][0]
		      : where == ON_PRIMARY_STREAM ? own
						   : primary[0],
		      s, mem[0]);
}

/* The loop index: execution affinity or not, and where. */
#define AFFINITY (_i / WHERE)
#define PLACE (_i % WHERE)

/* Refused by ctxguard, before the driver, with the documented message. */
START_TEST(created_context_crosses_under_error)
{
	struct fake_stats st;
	CUresult rc = launch_created(AFFINITY, PLACE);
	fake_get_stats(&st);
	ck_assert_int_eq(rc, CUDA_ERROR_INVALID_HANDLE);
	ck_assert_uint_eq(st.invalid_handle, 0);
	ck_assert_uint_eq(st.launches, 0);
	const char *msg = NULL;
	cuGetErrorString(rc, &msg);
	ck_assert_msg(msg && strstr(msg, cg_deepgemm_message), "%s", msg ? msg : "(null)");
}
END_TEST

START_TEST(created_context_crosses_under_abort)
{
	launch_created(AFFINITY, PLACE);
}
END_TEST

/* Reported, then the driver refuses it as it would without ctxguard. */
START_TEST(created_context_crosses_under_warn)
{
	struct fake_stats st;
	capture_start();
	CUresult rc = launch_created(AFFINITY, PLACE);
	const char *err = capture_end();
	fake_get_stats(&st);
	ck_assert_int_eq(rc, CUDA_ERROR_INVALID_HANDLE);
	ck_assert_uint_eq(st.invalid_handle, 1);
	ck_assert_msg(strstr(err, cg_deepgemm_message), "%s", err);
}
END_TEST

/* Run as itself in its own (created) context, on ctxguard's stream there,
 * ordered with the launch stream alone: nothing is loaded again, so
 * nothing waits for the launch context's queued work (docs/redirect.md). */
START_TEST(created_context_crosses_under_redirect)
{
	fake_trace_start();
	capture_start();
	CUresult rc = launch_created(AFFINITY, PLACE);
	const char *err = capture_end();
	size_t n = fake_trace(trace, 4096);
	assert_ran(rc, 1);
	/* the program's own load (first: warming follows it), in the created context */
	size_t load = find(n, 0, "cuModuleLoad", NULL, NULL, NULL);
	ck_assert(load < n);
	CUcontext own = trace[load].ctx;
	ck_assert(own != primary[0]);
	/* one device: the report names the two contexts, not device 0 twice */
	char where[96];
	snprintf(where, sizeof where, "to context %p of device 0 (re-homed)", (void *)own);
	ck_assert_msg(strstr(err, "ctxguard: redirect: ") && strstr(err, " from context ") &&
			      strstr(err, where),
		      "%s", err);
	size_t run = find(n, 0, "launch", own, NULL, NULL);
	ck_assert_msg(run < n, "not run in its own context");
	ck_assert_str_eq(trace[run].kernel, HELPER);
	const void *t = trace[run].stream;
	size_t rec = find(run, 0, "cuEventRecord", NULL, NULL, NULL);
	ck_assert_msg(rec < run, "no event recorded on the launch stream");
	ck_assert(find(run, rec, "cuStreamWaitEvent", own, t, trace[rec].object) < run);
	ck_assert_msg(find(run, rec, "cuModuleLoad", NULL, NULL, NULL) == run, "loaded again");
	ck_assert_uint_eq(count(n, "cuStreamWaitEvent"), 2);
}
END_TEST

/* A green context made past the hooks (before ctxguard started, or by a
 * route it does not see) is met first at a launch, and asked of the
 * driver there once: an alias all the same. */
START_TEST(green_context_made_out_of_sight)
{
	CUcontext as;
	make_green_by((green_create_fn)fake_entry_point("cuGreenCtxCreate", 0),
		      (green_as_ctx_fn)fake_entry_point("cuCtxFromGreenCtx", 0), 0, &as);
	CUfunction f = load_in(primary[0]);
	fake_reset();
	assert_ran(launch(f, as, NULL, mem[0]), 1);
	/* Loaded there, it is the primary context's. */
	CUfunction h = load_in(as);
	assert_ran(launch(h, primary[0], NULL, mem[0]), 2);
}
END_TEST

/* Kernels captured into a graph on a green stream are checked as they are
 * captured: the domain's own run, another domain's cross. */
START_TEST(capture_on_green_stream)
{
	struct fake_stats st;
	CUfunction f = load_in(primary[0]), other = load_in(create_context(0));
	CUstream gs;
	ck_assert_int_eq(cuGreenCtxStreamCreate(&gs, green[0][0], CU_STREAM_NON_BLOCKING, 0),
			 CUDA_SUCCESS);
	fake_stream_set_capturing(gs, 1);
	fake_reset();
	assert_ran(launch(f, primary[0], gs, mem[0]), 1);
	CUresult rc = launch(other, primary[0], gs, mem[0]);
	fake_get_stats(&st);
	ck_assert_int_eq(rc, CUDA_ERROR_INVALID_HANDLE);
	ck_assert_uint_eq(st.invalid_handle, 0);
	fake_stream_set_capturing(gs, 0);
}
END_TEST

/* PyTorch's route: the green API looked up through cuGetProcAddress, and
 * the alias recorded when the context is made, so that no launch has to
 * ask the driver (here it could not: cuStreamGetCtx_v2 fails). */
START_TEST(green_context_known_when_made)
{
	green_create_fn create;
	green_as_ctx_fn from;
	CUcontext as;
	ck_assert_int_eq(cuGetProcAddress("cuGreenCtxCreate", (void **)&create, 12040, 0, NULL),
			 CUDA_SUCCESS);
	ck_assert_int_eq(cuGetProcAddress("cuCtxFromGreenCtx", (void **)&from, 12040, 0, NULL),
			 CUDA_SUCCESS);
	make_green_by(create, from, 0, &as);
	CUfunction f = load_in(primary[0]);
	fake_reset();
	for (int i = 0; i < 4; i++)
		fake_fail_next("cuStreamGetCtx", CUDA_ERROR_NOT_SUPPORTED);
	assert_ran(launch(f, as, NULL, mem[0]), 1);
	fake_reset();
}
END_TEST

/* A green context of another device crosses as any context there. */
START_TEST(green_contexts_of_two_devices_cross)
{
	struct fake_stats st;
	CUfunction f = load_in(gctx[0][0]);
	fake_reset();
	CUresult rc = launch(f, gctx[1][0], NULL, mem[1]);
	fake_get_stats(&st);
	ck_assert_int_eq(rc, CUDA_ERROR_INVALID_HANDLE);
	ck_assert_uint_eq(st.invalid_handle, 0);
}
END_TEST

/* A green context destroyed: the primary context keeps its modules, and
 * its CUcontext's handle, handed out again for a created context, is no
 * alias of the primary context any more. */
START_TEST(destroyed_green_context_handle_reused)
{
	struct fake_stats st;
	CUfunction f = load_in(primary[0]);
	CUcontext as, own;
	CUgreenCtx g = make_green(0, &as);
	fake_reset();
	assert_ran(launch(f, as, NULL, mem[0]), 1);
	ck_assert_int_eq(cuCtxSetCurrent(primary[0]), CUDA_SUCCESS);
	ck_assert_int_eq(cuGreenCtxDestroy(g), CUDA_SUCCESS);
	assert_ran(launch(f, primary[0], NULL, mem[0]), 2);
	own = create_context(0);
	ck_assert_ptr_eq(own, as); /* the fake hands the handle out again */
	CUresult rc = launch(f, own, NULL, mem[0]);
	fake_get_stats(&st);
	/* ctxguard's refusal: the driver never saw it. */
	ck_assert_int_eq(rc, CUDA_ERROR_INVALID_HANDLE);
	ck_assert_uint_eq(st.invalid_handle, 0);
	ck_assert_uint_eq(st.launches, 2);
}
END_TEST

/* A kernel of device 0 over device 1's memory, redirected into device 1's
 * primary context: it waits for the work pending on device 1's green
 * streams as for its other streams, and they wait for its result. */
START_TEST(redirect_orders_with_green_streams)
{
	CUfunction f = load_in(primary[0]), producer = load_in(primary[1]);
	CUstream gs, s0;
	ck_assert_int_eq(cuGreenCtxStreamCreate(&gs, green[1][1], CU_STREAM_NON_BLOCKING, 0),
			 CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxSetCurrent(primary[0]), CUDA_SUCCESS);
	ck_assert_int_eq(cuStreamCreate(&s0, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	/* Device 1's work still running on the green stream. */
	ck_assert_int_eq(launch(producer, gctx[1][1], gs, mem[1]), CUDA_SUCCESS);
	fake_trace_start();
	CUresult rc = launch(f, primary[0], s0, mem[1]);
	size_t n = fake_trace(trace, 4096);
	ck_assert_int_eq(rc, CUDA_SUCCESS);
	size_t run = find(n, 0, "launch", primary[1], NULL, NULL);
	ck_assert_msg(run < n, "not run on device 1");
	const void *t = trace[run].stream;
	size_t rec = find(run, 0, "cuEventRecord", NULL, gs, NULL);
	ck_assert_msg(rec < run, "the green stream's tail was not recorded");
	ck_assert_msg(find(run, rec, "cuStreamWaitEvent", NULL, t, trace[rec].object) < run,
		      "the redirect does not wait for the green stream");
	size_t after = find(n, run, "cuEventRecord", NULL, t, NULL);
	ck_assert(after < n);
	ck_assert_msg(find(n, after, "cuStreamWaitEvent", NULL, gs, trace[after].object) < n,
		      "the green stream does not wait for the result");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("green");
	TCase *t = tcase_create("abort");
	tcase_add_checked_fixture(t, setup_abort, NULL);
	tcase_add_test(t, primary_module_runs_in_green_context);
	tcase_add_test(t, green_module_runs_on_primary_stream);
	tcase_add_test(t, green_stream_launches);
	tcase_add_test(t, module_of_one_green_context_runs_in_another);
	tcase_add_test(t, cukernel_runs_in_green_contexts);
	tcase_add_test(t, created_context_memory_in_primary_kernel);
	tcase_add_loop_test_raise_signal(t, created_context_crosses_under_abort, SIGABRT, 0,
					 2 * WHERE);
	suite_add_tcase(s, t);
	TCase *e = tcase_create("error");
	tcase_add_checked_fixture(e, setup_error, NULL);
	tcase_add_loop_test(e, created_context_crosses_under_error, 0, 2 * WHERE);
	tcase_add_test(e, green_contexts_of_two_devices_cross);
	tcase_add_test(e, destroyed_green_context_handle_reused);
	tcase_add_test(e, green_context_made_out_of_sight);
	tcase_add_test(e, green_context_known_when_made);
	tcase_add_test(e, capture_on_green_stream);
	suite_add_tcase(s, e);
	TCase *w = tcase_create("warn");
	tcase_add_checked_fixture(w, setup_warn, NULL);
	tcase_add_loop_test(w, created_context_crosses_under_warn, 0, 2 * WHERE);
	suite_add_tcase(s, w);
	TCase *r = tcase_create("redirect");
	tcase_set_timeout(r, 60);
	tcase_add_checked_fixture(r, setup_redirect, NULL);
	tcase_add_loop_test(r, created_context_crosses_under_redirect, 0, 2 * WHERE);
	tcase_add_test(r, redirect_orders_with_green_streams);
	suite_add_tcase(s, r);
	return run_suite(s);
}
