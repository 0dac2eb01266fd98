/* Shadow on the fake driver.  The comparison (shim/redirect/shadow_compare.c, linked
 * in): the rows each layout defines, the row error, the tolerances.  Then
 * DeepGEMM-named launches in one context, each run in a child of its own
 * (the policy is read at the first CUDA call): the launch runs, then the
 * bundled kernel on the same stream with the same A, B and grouped_layout
 * and a scratch D; the fake keeps what copies write but computes nothing,
 * so both outputs read back as what the test wrote into D (the launch's)
 * and zeros (the scratch): D left zero matches, a group's row made nonzero
 * mismatches, a padding row made nonzero does not count.  An accumulating
 * GEMM, parameters in the extra buffer, a capturing stream and a
 * cooperative launch are undecodable with the reason; a launch that crosses
 * gets its action, not a shadow; shadow off adds nothing.  The setting
 * parses from the file, the variable and the ctxguard command's flag, and a locked system
 * policy's shadow = on cannot be turned off.  Without nvcc the bundled
 * kernels are absent: the launch is then undecodable, saying so. */
#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cuda.h>

#include "../kernels/gmm_kernels.h"
#include "../policy/policy.h"
#include "../shim/redirect/decode.h"
#include "../shim/redirect/shadow.h"
#include "deepgemm_fixture.h"
#include "fake/fake_api.h"
#include "policy_dump.h"
#include "spawn.h"
#include "suite.h"
#include "tmpdir.h"

/* ---- the comparison ---- */

START_TEST(rows_of_each_layout)
{
	struct cg_rows r[16];
	ck_assert_uint_eq(cg_shadow_rows(CG_LAYOUT_NORMAL, 200, 1, NULL, r, 16), 1);
	ck_assert(r[0].start == 0 && r[0].end == 200);

	/* -1 padding rows and ids past the groups are skipped */
	const int32_t contiguous[10] = {0, 0, -1, -1, 1, 1, 1, 7, -1, 0};
	ck_assert_uint_eq(cg_shadow_rows(CG_LAYOUT_CONTIGUOUS, 10, 2, contiguous, r, 10), 3);
	ck_assert(r[0].start == 0 && r[0].end == 2);
	ck_assert(r[1].start == 4 && r[1].end == 7);
	ck_assert(r[2].start == 9 && r[2].end == 10);

	/* group g starts at the previous end rounded up to 128; ends clamped */
	const int32_t psum[3] = {100, 300, 9999};
	ck_assert_uint_eq(cg_shadow_rows(CG_LAYOUT_PSUM, 400, 3, psum, r, 3), 3);
	ck_assert(r[0].start == 0 && r[0].end == 100);
	ck_assert(r[1].start == 128 && r[1].end == 300);
	ck_assert(r[2].start == 384 && r[2].end == 400);

	/* masked_m of each group's max_m rows; out of range clamped */
	const int32_t masked[3] = {5, -2, 64};
	ck_assert_uint_eq(cg_shadow_rows(CG_LAYOUT_MASKED, 32, 3, masked, r, 3), 2);
	ck_assert(r[0].start == 0 && r[0].end == 5);
	ck_assert(r[1].start == 64 && r[1].end == 96);
}
END_TEST

static uint16_t bf16_of(float f)
{
	uint32_t bits;
	memcpy(&bits, &f, sizeof bits);
	return (uint16_t)(bits >> 16);
}

START_TEST(row_error_is_the_suites_measure)
{
	uint16_t ref[4], got[4];
	for (int i = 0; i < 4; i++) {
		ref[i] = bf16_of((float)(i + 1));
		got[i] = ref[i];
	}
	ck_assert(cg_shadow_row_error(ref, got, 4) == 0);
	got[3] = bf16_of(4.5f); /* ||(0,0,0,.5)|| / ||(1,2,3,4)|| */
	ck_assert_double_eq_tol(cg_shadow_row_error(ref, got, 4), 0.5 / sqrt(30.0), 1e-9);
	/* a zero reference: the absolute error */
	uint16_t zero[4] = {0};
	ck_assert_double_eq_tol(cg_shadow_row_error(zero, got, 4), sqrt(1 + 4 + 9 + 20.25), 1e-9);
	/* the same NaN agrees; a NaN against a number does not */
	got[3] = ref[3] = 0x7fc0;
	ck_assert(cg_shadow_row_error(ref, got, 4) == 0);
	got[3] = bf16_of(1.0f);
	ck_assert(isinf(cg_shadow_row_error(ref, got, 4)));
	ck_assert_double_eq(cg_shadow_tolerance(CG_GMM_BF16), 1e-2);
	ck_assert_double_eq(cg_shadow_tolerance(CG_GMM_FP8_E4M3), 3e-2);
}
END_TEST

/* ---- launches on the fake ---- */

/* Real instantiations (nvcc -arch=sm_90a, the template shapes of DESIGN.md):
 * m-grouped contiguous, its kWithAccumulation form, and Normal. */
#define GEMM_PREFIX                                                                                \
	"_ZN9deep_gemm19sm90_bf16_gemm_implILN4cute4UMMA5MajorE0ELS3_0ELj0ELj0ELj0ELj%cELj128ELj"  \
	"128ELj64ELj128ELj128ELj128ELj5ELj128ELj256ELj1ELb1ELj132ELNS_8GemmTypeE%cELb%cEN7cutlass" \
	"10bfloat16_tEEEvPijjj14CUtensorMap_stS8_S8_"
enum gemm { CONTIGUOUS, ACCUMULATING, NORMAL, NGEMMS };
static const char gemm_args[NGEMMS][3] = {{'2', '1', '0'}, {'2', '1', '1'}, {'1', '0', '0'}};
enum { M = 256, N = 128, K = 128, G = 2, SIZE = 1 << 20 };

static char names[NGEMMS][512];
static CUcontext ctx[2];
static CUstream stream;
static CUfunction gemm[NGEMMS];
static CUdeviceptr a, b, d, layout, far_b;   /* far_b on device 1 */
static CUtensorMap ta, tb, tb_one, td, tfar; /* tb_one: Normal's one group */

static CUdeviceptr alloc_on(int dev)
{
	CUdeviceptr p;
	ck_assert_int_eq(cuCtxSetCurrent(ctx[dev]), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemAlloc(&p, SIZE), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	return p;
}

/* Rows [0, 100) are expert 0's, [128, 228) expert 1's, the rest -1. */
static int32_t layout_host[M];

static void setup_launches(void)
{
	ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
	for (int dev = 1; dev >= 0; dev--) {
		CUdevice dv;
		ck_assert_int_eq(cuDeviceGet(&dv, dev), CUDA_SUCCESS);
		ck_assert_int_eq(cuDevicePrimaryCtxRetain(&ctx[dev], dv), CUDA_SUCCESS);
	}
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	ck_assert_int_eq(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	char image[4096] = "//ctxguard-fake-image\n";
	for (int i = 0; i < NGEMMS; i++) {
		snprintf(names[i], sizeof names[i], GEMM_PREFIX, gemm_args[i][0], gemm_args[i][1],
			 gemm_args[i][2]);
		snprintf(image + strlen(image), sizeof image - strlen(image),
			 ".kernel %s 8,4,4,4,128,128,128\n", names[i]);
	}
	CUmodule mod;
	ck_assert_int_eq(cuModuleLoadData(&mod, image), CUDA_SUCCESS);
	/* DeepGEMM sets each function's shared memory once, after the load */
	for (int i = 0; i < NGEMMS; i++) {
		ck_assert_int_eq(cuModuleGetFunction(&gemm[i], mod, names[i]), CUDA_SUCCESS);
		ck_assert_int_eq(cuFuncSetAttribute(gemm[i],
						    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
						    GEMM_SMEM),
				 CUDA_SUCCESS);
	}
	a = alloc_on(0);
	b = alloc_on(0);
	d = alloc_on(0);
	layout = alloc_on(0);
	far_b = alloc_on(1);
	/* DeepGEMM's encodes (DESIGN.md): a {K, M}, b {K, N*G}, d {N, M}. */
	ta = encode(a, K, M);
	tb = encode(b, K, N * G);
	tb_one = encode(b, K, N);
	td = encode(d, N, M);
	tfar = encode(far_b, K, N * G);
	for (int r = 0; r < M; r++)
		layout_host[r] = r < 100 ? 0 : r >= 128 && r < 228 ? 1 : -1;
	ck_assert_int_eq(cuMemcpyHtoD(layout, layout_host, sizeof layout_host), CUDA_SUCCESS);
}

/* DeepGEMM's launch: cuLaunchKernelEx on the current device's stream. */
static CUresult launch(enum gemm which, const CUtensorMap *mb, int extra_buffer, int cooperative)
{
	uint32_t m = M, n = N, k = K;
	CUtensorMap A = ta, B = *mb, D = td;
	CUdeviceptr gl = which == NORMAL ? 0 : layout;
	void *params[] = {&gl, &m, &n, &k, &A, &B, &D};
	/* the shadow refuses this form before reading it: zeros will do */
	unsigned char buf[1024] = {0};
	size_t size = sizeof buf;
	void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
			 CU_LAUNCH_PARAM_END};
	if (cooperative)
		return cuLaunchCooperativeKernel(gemm[which], 132, 1, 1, 384, 1, 1, GEMM_SMEM,
						 stream, params);
	/* DeepGEMM's configuration for these names: one CTA per SM, its
	 * pipeline's shared memory (stages of A and B, D, barriers), a
	 * cluster of kNumTMAMulticast */
	CUlaunchAttribute attr = {.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
				  .value.clusterDim = {1, 1, 1}};
	CUlaunchConfig cfg = {.gridDimX = 132,
			      .gridDimY = 1,
			      .gridDimZ = 1,
			      .blockDimX = 384,
			      .blockDimY = 1,
			      .blockDimZ = 1,
			      .sharedMemBytes = GEMM_SMEM,
			      .hStream = stream,
			      .attrs = &attr,
			      .numAttrs = 1};
	return cuLaunchKernelEx(&cfg, gemm[which], extra_buffer ? NULL : params,
				extra_buffer ? extra : NULL);
}

/* Each child: the setup, the launch, then its own checks (exit 3 and a
 * line on stderr when one fails). */
enum child {
	MATCH,        /* D as the fake leaves it: zeros, like the scratch */
	MISMATCH,     /* row 130 (expert 1's) of D made nonzero */
	PADDING_ONLY, /* row 110 (padding) made nonzero: not compared */
	NORMAL_MATCH, /* GemmType::Normal, through the zeros layout */
	ACCUMULATE,   /* kWithAccumulation: undecodable */
	EXTRA_BUFFER, /* parameters in the extra buffer: undecodable */
	CAPTURING,    /* a capturing stream: undecodable */
	COOPERATIVE,  /* cuLaunchCooperativeKernel: undecodable */
	CROSSING,     /* B on device 1 (mode warn): the crossing, no shadow */
	NCHILDREN
};
static enum child child_kind;

static void child_fail(const char *what)
{
	fprintf(stderr, "child check failed: %s\n", what);
	_exit(3);
}

static void set_row(int row, float v)
{
	uint16_t vals[N];
	for (int i = 0; i < N; i++)
		vals[i] = bf16_of(v + (float)i);
	ck_assert_int_eq(cuMemcpyHtoD(d + (CUdeviceptr)row * N * 2, vals, sizeof vals),
			 CUDA_SUCCESS);
}

/* The shadow's bundled launch came after the program's, on its stream,
 * with A, B and grouped_layout as given and D elsewhere. */
static void check_bundled_launch(size_t n, struct fake_call *trace)
{
	size_t orig = n, shadow = n;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(trace[i].api, "launch"))
			continue;
		if (orig == n && !strncmp(trace[i].kernel, "_ZN9deep_gemm", 13))
			orig = i;
		else if (orig < n && !strncmp(trace[i].kernel, "cg_gmm_", 7))
			shadow = i;
	}
	if (orig == n || shadow == n)
		child_fail("the launch, then the bundled kernel");
	if (trace[shadow].stream != stream || trace[shadow].ctx != ctx[0])
		child_fail("the bundled kernel on the launch's stream");
	struct fake_launch_info ran;
	if (!fake_last_launch(&ran) || ran.argbytes < sizeof(struct cg_gmm_args) ||
	    ran.argbytes > FAKE_ARGS_COPY)
		child_fail("the bundled kernel's arguments");
	struct cg_gmm_args args;
	memcpy(&args, ran.args + ran.argbytes - sizeof args, sizeof args);
	if ((CUdeviceptr)(uintptr_t)args.a != a || (CUdeviceptr)(uintptr_t)args.b != b ||
	    (CUdeviceptr)(uintptr_t)args.index != layout || args.m != M || args.n != N ||
	    args.k != K || args.g != G)
		child_fail("the bundled kernel takes the launch's A, B, grouped_layout and sizes");
	if ((CUdeviceptr)(uintptr_t)args.d == d || !args.d)
		child_fail("the bundled kernel writes a scratch D");
}

static void run_child(void)
{
	static struct fake_call trace[4096];
	setup_launches();
	const CUtensorMap *mb = child_kind == CROSSING       ? &tfar
				: child_kind == NORMAL_MATCH ? &tb_one
							     : &tb;
	enum gemm which = child_kind == ACCUMULATE     ? ACCUMULATING
			  : child_kind == NORMAL_MATCH ? NORMAL
						       : CONTIGUOUS;
	if (child_kind == MISMATCH)
		set_row(130, 1.0f);
	if (child_kind == PADDING_ONLY)
		set_row(110, 1.0f);
	if (child_kind == CAPTURING)
		fake_stream_set_capturing(stream, 1);
	fake_trace_start();
	if (launch(which, mb, child_kind == EXTRA_BUFFER, child_kind == COOPERATIVE) !=
	    CUDA_SUCCESS)
		child_fail("the launch succeeds");
	/* a library built without nvcc has no bundled kernel to launch (the
	 * parent then checks that the launch was counted undecodable) */
	if (child_kind == MATCH && getenv("CTXGUARD_SHADOW") &&
	    !strcmp(getenv("CTXGUARD_SHADOW"), "on")) {
		size_t n = fake_trace(trace, 4096);
		if (bundled_built())
			check_bundled_launch(n, trace);
	}
	if (child_kind == CAPTURING)
		fake_stream_set_capturing(stream, 0);
}

/* The child under mode with shadow on (or off): its log and stderr. */
static char *run_as(enum child kind, const char *mode, const char *shadow, struct run *r)
{
	char log[] = "/tmp/ctxguard-shadow-XXXXXX";
	int fd = mkstemp(log);
	ck_assert_int_ge(fd, 0);
	close(fd);
	setenv("CTXGUARD_LOG", log, 1);
	setenv("CTXGUARD_MODE", mode, 1);
	setenv("CTXGUARD_SHADOW", shadow, 1);
	child_kind = kind;
	spawn_fn(r, run_child);
	ck_assert_msg(exited(r, 0), "status %#x\n%s", r->status, r->err);
	char *text = slurp(log);
	unlink(log);
	ck_assert_ptr_nonnull(text);
	return text;
}

static const char *const modes[] = {"abort", "error", "warn", "off", "redirect"};
#define NMODES (int)(sizeof modes / sizeof modes[0])

static void assert_summary(const struct run *r, int shadowed, int mismatched, int undecodable)
{
	char want[96];
	snprintf(want, sizeof want, "shadowed %d, mismatched %d, undecodable %d", shadowed,
		 mismatched, undecodable);
	ck_assert_msg(strstr(r->err, want), "want '%s' in\n%s", want, r->err);
}

/* Under every mode: one decodable launch, shadowed, matching. */
START_TEST(decodable_launch_is_shadowed_under_every_mode)
{
	static struct run r;
	char *log = run_as(MATCH, modes[_i], "on", &r);
	if (!bundled_built()) {
		assert_summary(&r, 0, 0, 1);
		ck_assert_msg(strstr(log, "without its grouped_mm kernels"), "%s", log);
		return;
	}
	assert_summary(&r, 1, 0, 0);
	ck_assert_int_eq(count_of(log, "\"event\":\"shadow\""), 1);
	ck_assert_msg(strstr(log,
			     "\"layout\":\"contiguous\",\"dtype\":\"bf16\",\"m\":256,"
			     "\"n\":128,\"k\":128,\"g\":2,\"result\":\"match\",\"reason\":null,"
			     "\"max_rel_err\":0,"),
		      "%s", log);
	ck_assert_msg(strstr(log, "\"rows\":200,\"tolerance\":0.01"), "%s", log);
	ck_assert_msg(strstr(log, "\"shadow\":{\"shadowed\":1,\"mismatched\":0,\"undecodable\":0}"),
		      "%s", log);
	ck_assert_ptr_null(strstr(r.err, "ctxguard: shadow:"));
}
END_TEST

/* The bundled launch is ctxguard's own: the backstop does not count it. */
START_TEST(backstop_does_not_count_the_bundled_launch)
{
	static struct run r;
	char cupti[4096];
	snprintf(cupti, sizeof cupti, "%s/fake/cupti/libcupti.so", build_dir());
	setenv("CTXGUARD_CUPTI", cupti, 1);
	setenv("CTXGUARD_BACKSTOP", "on", 1);
	run_as(MATCH, "abort", "on", &r);
	ck_assert_msg(strstr(r.err, "backstop: unhooked 0"), "%s", r.err);
	if (bundled_built())
		assert_summary(&r, 1, 0, 0);
}
END_TEST

START_TEST(group_row_that_differs_is_a_mismatch)
{
	static struct run r;
	char *log = run_as(MISMATCH, "abort", "on", &r);
	if (!bundled_built())
		return;
	assert_summary(&r, 1, 1, 0);
	/* the scratch row is zeros: ||0 - ref|| / ||ref|| = 1, at row 130 */
	ck_assert_msg(strstr(log, "\"result\":\"mismatch\",\"reason\":null,\"max_rel_err\":1,"
				  "\"row\":130,"),
		      "%s", log);
	ck_assert_msg(strstr(r.err, "ctxguard: shadow: void deep_gemm::sm90_bf16_gemm_impl<") &&
			      strstr(r.err, "(contiguous, bf16): the bundled kernel's D differs "
					    "from the launch's: relative error 1 at row 130"),
		      "%s", r.err);
}
END_TEST

START_TEST(padding_rows_are_not_compared)
{
	static struct run r;
	char *log = run_as(PADDING_ONLY, "abort", "on", &r);
	if (!bundled_built())
		return;
	assert_summary(&r, 1, 0, 0);
	ck_assert_msg(strstr(log, "\"result\":\"match\""), "%s", log);
}
END_TEST

START_TEST(normal_gemm_is_shadowed_as_one_group)
{
	static struct run r;
	char *log = run_as(NORMAL_MATCH, "abort", "on", &r);
	if (!bundled_built())
		return;
	assert_summary(&r, 1, 0, 0);
	ck_assert_msg(strstr(log, "\"layout\":\"normal\"") && strstr(log, "\"rows\":256,"), "%s",
		      log);
}
END_TEST

/* Each launch the shadow cannot take: counted, its reason logged and said. */
static const struct {
	enum child kind;
	const char *reason;
} refused[] = {
	{ACCUMULATE, "accumulation into D (with_accumulation)"},
	{EXTRA_BUFFER, "undecodable ABI: parameters passed in the extra buffer"},
	{CAPTURING, "the stream is capturing a CUDA graph"},
	{COOPERATIVE, "launched by cuLaunchCooperativeKernel (the redirect takes cuLaunchKernel"},
};

START_TEST(undecodable_launch_is_counted_with_its_reason)
{
	static struct run r;
	char *log = run_as(refused[_i].kind, "abort", "on", &r);
	assert_summary(&r, 0, 0, 1);
	ck_assert_msg(strstr(log, "\"result\":\"undecodable\",\"reason\":\"") &&
			      strstr(log, refused[_i].reason),
		      "%s", log);
	ck_assert_msg(strstr(log, "\"max_rel_err\":null"), "%s", log);
	ck_assert_msg(strstr(r.err, "not shadowed: ") && strstr(r.err, refused[_i].reason), "%s",
		      r.err);
}
END_TEST

START_TEST(crossing_launch_gets_its_action_not_a_shadow)
{
	static struct run r;
	char *log = run_as(CROSSING, "warn", "on", &r);
	assert_summary(&r, 0, 0, 0);
	ck_assert_int_eq(count_of(log, "\"event\":\"shadow\""), 0);
	ck_assert_int_eq(count_of(log, "\"action\":\"warn\""), 1);
}
END_TEST

START_TEST(shadow_off_adds_nothing)
{
	static struct run r;
	char *log = run_as(_i ? MISMATCH : ACCUMULATE, "abort", "off", &r);
	ck_assert_int_eq(count_of(log, "\"event\":\"shadow\""), 0);
	ck_assert_ptr_null(strstr(log, "\"shadow\":{"));
	ck_assert_ptr_null(strstr(r.err, "shadowed"));
	ck_assert_ptr_null(strstr(r.err, "ctxguard: shadow:"));
}
END_TEST

/* ---- the setting ---- */

static void setup_files(void)
{
	tmpdir_make("check_shadow");
}

static void teardown_files(void)
{
	tmpdir_remove();
}

/* shadow after loading with the system file's text, the user's file's
 * text (NULL: none) and variable env (NULL: none). */
static int shadow_after(const char *system, const char *user, const char *env, struct cg_policy *p)
{
	const char *sys = in_tmpdir("system.conf"), *mine = in_tmpdir("user.conf");
	write_to(sys, system, 0);
	char user_env[300];
	snprintf(user_env, sizeof user_env, "CTXGUARD_POLICY=%s", mine);
	char *envp[3] = {NULL, NULL, NULL};
	int n = 0;
	if (user) {
		write_to(mine, user, 0);
		envp[n++] = user_env;
	}
	if (env)
		envp[n++] = (char *)env;
	cg_policy_load_from(p, envp, sys);
	return p->shadow;
}

START_TEST(setting_parses_from_file_and_variable)
{
	struct cg_policy p;
	ck_assert_int_eq(shadow_after("", NULL, NULL, &p), 0);
	cg_policy_free(&p);
	ck_assert_int_eq(shadow_after("shadow = on\n", NULL, NULL, &p), 1);
	cg_policy_free(&p);
	ck_assert_int_eq(shadow_after("", "shadow = on\n", NULL, &p), 1);
	cg_policy_free(&p);
	ck_assert_int_eq(shadow_after("shadow = on\n", NULL, "CTXGUARD_SHADOW=off", &p), 0);
	cg_policy_free(&p);
	ck_assert_int_eq(shadow_after("", NULL, "CTXGUARD_SHADOW=on", &p), 1);
	cg_policy_free(&p);
	/* a bad value: one line, and the value before it kept */
	ck_assert_int_eq(shadow_after("", NULL, "CTXGUARD_SHADOW=maybe", &p), 0);
	ck_assert_uint_eq(p.nerrors, 1);
	ck_assert_msg(strstr(p.errors[0], "CTXGUARD_SHADOW=maybe: expected on|off (using off)"),
		      "%s", p.errors[0]);
	cg_policy_free(&p);
}
END_TEST

START_TEST(locked_shadow_cannot_be_turned_off)
{
	struct cg_policy p;
	/* by the variable, then by the user's file: refused, one line each */
	ck_assert_int_eq(shadow_after("lock = on\nshadow = on\n", NULL, "CTXGUARD_SHADOW=off", &p),
			 1);
	ck_assert_uint_eq(p.nrefused, 1);
	ck_assert_msg(strstr(p.refused[0], "shadow = off") && strstr(p.refused[0], "system.conf"),
		      "%s", p.refused[0]);
	cg_policy_free(&p);
	ck_assert_int_eq(shadow_after("lock = on\nshadow = on\n", "shadow = off\n", NULL, &p), 1);
	ck_assert_uint_eq(p.nrefused, 1);
	cg_policy_free(&p);
	/* turning it on under a lock that has it off is tighter: taken */
	ck_assert_int_eq(shadow_after("lock = on\n", NULL, "CTXGUARD_SHADOW=on", &p), 1);
	ck_assert_uint_eq(p.nrefused, 0);
	cg_policy_free(&p);
}
END_TEST

/* ctxguard --shadow sets CTXGUARD_SHADOW=on for the program. */
START_TEST(flag_turns_it_on)
{
	static struct run r;
	char prog[4096];
	const char *sys = in_tmpdir("system.conf");
	write_to(sys, "", 0);
	snprintf(prog, sizeof prog, "%s/tests/progs/showpolicy", build_dir());
	const char *argv[] = {"ctxguard", "--shadow", "--", prog, sys, NULL};
	spawn(&r, NULL, argv);
	ck_assert_msg(exited(&r, 0), "status %#x\n%s", r.status, r.err);
	ck_assert_msg(strstr(r.out, "shadow on\n"), "%s", r.out);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("shadow");
	TCase *c = tcase_create("comparison");
	tcase_add_test(c, rows_of_each_layout);
	tcase_add_test(c, row_error_is_the_suites_measure);
	suite_add_tcase(s, c);
	TCase *l = tcase_create("launches");
	tcase_set_timeout(l, 60);
	tcase_add_loop_test(l, decodable_launch_is_shadowed_under_every_mode, 0, NMODES);
	tcase_add_test(l, backstop_does_not_count_the_bundled_launch);
	tcase_add_test(l, group_row_that_differs_is_a_mismatch);
	tcase_add_test(l, padding_rows_are_not_compared);
	tcase_add_test(l, normal_gemm_is_shadowed_as_one_group);
	tcase_add_loop_test(l, undecodable_launch_is_counted_with_its_reason, 0,
			    (int)(sizeof refused / sizeof refused[0]));
	tcase_add_test(l, crossing_launch_gets_its_action_not_a_shadow);
	tcase_add_loop_test(l, shadow_off_adds_nothing, 0, 2);
	suite_add_tcase(s, l);
	TCase *p = tcase_create("setting");
	tcase_add_checked_fixture(p, setup_files, teardown_files);
	tcase_add_test(p, setting_parses_from_file_and_variable);
	tcase_add_test(p, locked_shadow_cannot_be_turned_off);
	tcase_add_test(p, flag_turns_it_on);
	suite_add_tcase(s, p);
	return run_suite(s);
}
