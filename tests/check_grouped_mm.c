/* The grouped_mm host API's problem checks, in the psum and masked forms,
 * and the kernel it picks for each shape of problem, through the ctypes
 * entry points that libctxguard.so exports (this binary runs under it, on
 * the fake driver).  The checks hold with and without nvcc; the choice is
 * read back from the fake's last launch where the kernels are built in. */
#include <check.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../kernels/gmm_internal.h"
#include "fake/fake_api.h"
#include "suite.h"

typedef int (*masked_fn)(uint64_t, int, int, unsigned, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
			 uint64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
typedef const char *(*error_fn)(void);

static ctxguard_gmm_flat_fn *psum, *offs, *contiguous;
static masked_fn masked;
static error_fn last_error;

/* memcpy: ISO C has no cast from an object pointer to a function pointer */
static void resolve(void *out, const char *name)
{
	void *p = dlsym(RTLD_DEFAULT, name);
	ck_assert_msg(p != NULL, "%s is not exported by the preloaded library", name);
	memcpy(out, &p, sizeof p);
}

static void setup(void)
{
	resolve(&psum, "ctxguard_gmm_psum");
	resolve(&offs, "ctxguard_gmm_offs");
	resolve(&contiguous, "ctxguard_gmm_contiguous");
	resolve(&masked, "ctxguard_gmm_masked");
	resolve(&last_error, "ctxguard_gmm_last_error");
}

/* Device addresses are never touched by the checks. */
enum { A = 0x1000, B = 0x2000, D = 0x3000, INDEX = 0x4000, SFA = 0x5000, SFB = 0x6000 };

static void refused(int rc, int want, const char *text)
{
	ck_assert_int_eq(rc, want);
	ck_assert_msg(strstr(last_error(), text), "error \"%s\" lacks \"%s\"", last_error(), text);
}

START_TEST(psum_needs_offs)
{
	refused(psum(0, CG_GMM_BF16, CG_GMM_B_NK, 0, A, B, D, 0, 0, 0, 0, 0, 512, 256, 256, 4),
		CUDA_ERROR_INVALID_VALUE, "the psum form needs offs");
}
END_TEST

START_TEST(masked_needs_masked_m)
{
	refused(masked(0, CG_GMM_BF16, CG_GMM_B_NK, 0, A, B, D, 0, 0, 0, 0, 0, 0, 64, 256, 256, 4),
		CUDA_ERROR_INVALID_VALUE, "masked_m");
}
END_TEST

START_TEST(masked_rows_fit_an_int)
{
	refused(masked(0, CG_GMM_BF16, CG_GMM_B_NK, 0, A, B, D, INDEX, 0, 0, 0, 0, 0, 1 << 30, 256, 256, 2),
		CUDA_ERROR_INVALID_VALUE, "g * max_m must be < 2^31");
}
END_TEST

START_TEST(range_forms_take_1024_groups)
{
	refused(masked(0, CG_GMM_BF16, CG_GMM_B_NK, 0, A, B, D, INDEX, 0, 0, 0, 0, 0, 16, 256, 256, 1025),
		CUDA_ERROR_NOT_SUPPORTED, "more than 1024 groups in masked form");
	refused(psum(0, CG_GMM_BF16, CG_GMM_B_NK, 0, A, B, D, INDEX, 0, 0, 0, 0, 4096, 256, 256, 1025),
		CUDA_ERROR_NOT_SUPPORTED, "more than 1024 groups in psum form");
}
END_TEST

START_TEST(masked_fp8_strides)
{
	refused(masked(0, CG_GMM_FP8_E4M3, CG_GMM_B_NK, 0, A, B, D, INDEX, 0, SFB, 0, 0, 0, 64, 256, 256, 4),
		CUDA_ERROR_INVALID_VALUE, "fp8 needs sfa and sfb");
	refused(masked(0, CG_GMM_FP8_E4M3, CG_GMM_B_NK, 0, A, B, D, INDEX, SFA, SFB, 1, 64, -1, 64, 256, 256, 4),
		CUDA_ERROR_INVALID_VALUE, "negative sfa strides");
}
END_TEST

/* An operand off its element's alignment would make the kernel fault (a
 * misaligned address: a sticky error that ends the context), so it is a
 * malformed problem: bf16 A, B and D on 2 bytes, the int32 index and the
 * fp32 scales on 4. */
START_TEST(misaligned_operands)
{
	const char *why = "aligned";
	refused(offs(0, CG_GMM_BF16, CG_GMM_B_NK, 0, A + 1, B, D, INDEX, 0, 0, 0, 0, 512, 256, 256, 4),
		CUDA_ERROR_INVALID_VALUE, why);
	refused(offs(0, CG_GMM_BF16, CG_GMM_B_KN, 0, A, B + 1, D, INDEX, 0, 0, 0, 0, 512, 256, 256, 4),
		CUDA_ERROR_INVALID_VALUE, why);
	refused(offs(0, CG_GMM_FP8_E4M3, CG_GMM_B_NK, 0, A + 1, B + 1, D + 1, INDEX, SFA, SFB, 0, 0, 512,
		     256, 256, 4),
		CUDA_ERROR_INVALID_VALUE, why);
	refused(contiguous(0, CG_GMM_BF16, CG_GMM_B_NK, 0, A, B, D, INDEX + 2, 0, 0, 0, 0, 512, 256, 256, 4),
		CUDA_ERROR_INVALID_VALUE, why);
	refused(masked(0, CG_GMM_FP8_E4M3, CG_GMM_B_NK, 0, A + 1, B + 1, D, INDEX, SFA + 2, SFB, 0, 0, 0, 64,
		       256, 256, 4),
		CUDA_ERROR_INVALID_VALUE, why);
	refused(psum(0, CG_GMM_FP8_E4M3, CG_GMM_B_NK, 0, A, B, D, INDEX, SFA, SFB + 1, 0, 0, 512, 256, 256, 4),
		CUDA_ERROR_INVALID_VALUE, why);
}
END_TEST

/* Flags: unknown ones, and 64-row blocks outside the two forms that have
 * blocks, are refused. */
START_TEST(flags_checked)
{
	refused(offs(0, CG_GMM_BF16, CG_GMM_B_NK, 4, A, B, D, INDEX, 0, 0, 0, 0, 512, 256, 256, 4),
		CUDA_ERROR_INVALID_VALUE, "unknown flags");
	refused(offs(0, CG_GMM_BF16, CG_GMM_B_NK, CG_GMM_BLOCKS_64, A, B, D, INDEX, 0, 0, 0, 0, 512, 256, 256, 4),
		CUDA_ERROR_INVALID_VALUE, "CG_GMM_BLOCKS_64 is for the contiguous and psum forms, not offs");
	refused(masked(0, CG_GMM_BF16, CG_GMM_B_NK, CG_GMM_BLOCKS_64, A, B, D, INDEX, 0, 0, 0, 0, 0, 64, 256, 256, 4),
		CUDA_ERROR_INVALID_VALUE, "not masked");
}
END_TEST

/* Accepted: done, or refused only because this build has no kernels. */
static void accepted(int rc)
{
	ck_assert_msg(rc == CUDA_SUCCESS || (rc == CUDA_ERROR_NOT_SUPPORTED && strstr(last_error(), "without nvcc")),
		      "rc %d: %s", rc, last_error());
}

START_TEST(no_rows_needs_no_operands)
{
	/* max_m = 0 or m = 0: nothing to compute */
	accepted(masked(0, CG_GMM_BF16, CG_GMM_B_NK, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 256, 256, 4));
	accepted(psum(0, CG_GMM_BF16, CG_GMM_B_NK, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 256, 256, 4));
}
END_TEST

/* Which kernel each shape of problem runs on an H200 (132 multiprocessors):
 * 64-row tiles for decode-sized groups, 256 columns wide on two consumers
 * where such tiles fill every multiprocessor, else 128; 128 x 256 tiles
 * otherwise, and for masked groups of more than 64 rows; the portable
 * kernels where TMA or wgmma cannot serve. */
static const struct choice {
	const char *what;
	int form; /* enum cg_gmm_form */
	int dtype, b_layout;
	unsigned flags;
	int64_t m, n, k, g; /* masked: m = max_m */
	const char *kernel;
} choices[] = {
    {"offs decode, 128 experts x 6 column tiles", CG_GMM_FORM_OFFS, CG_GMM_BF16, CG_GMM_B_NK, 0, 512, 1536, 2048,
     128, "cg_gmm_sm90_bf16_nk_split"},
    {"offs decode, 8 experts x 2 column tiles", CG_GMM_FORM_OFFS, CG_GMM_BF16, CG_GMM_B_KN, 0, 64, 384, 256, 8,
     "cg_gmm_sm90_bf16_kn_small"},
    {"offs prefill", CG_GMM_FORM_OFFS, CG_GMM_BF16, CG_GMM_B_KN, 0, 8192, 4096, 7168, 32,
     "cg_gmm_sm90_bf16_kn_large"},
    {"contiguous decode, 128-row blocks", CG_GMM_FORM_CONTIGUOUS, CG_GMM_FP8_E4M3, CG_GMM_B_NK, 0, 16384, 1536,
     2048, 128, "cg_gmm_sm90_fp8_nk_split"},
    {"psum prefill", CG_GMM_FORM_PSUM, CG_GMM_FP8_E4M3, CG_GMM_B_NK, 0, 32768, 1536, 2048, 128,
     "cg_gmm_sm90_fp8_nk_large"},
    {"masked, max_m 256", CG_GMM_FORM_MASKED, CG_GMM_BF16, CG_GMM_B_NK, 0, 256, 4096, 7168, 32,
     "cg_gmm_sm90_bf16_nk_large"},
    {"masked, max_m 64, 32 experts x 16 column tiles", CG_GMM_FORM_MASKED, CG_GMM_FP8_E4M3, CG_GMM_B_NK, 0, 64,
     4096, 7168, 32, "cg_gmm_sm90_fp8_nk_split"},
    {"masked, max_m 64, 4 experts", CG_GMM_FORM_MASKED, CG_GMM_FP8_E4M3, CG_GMM_B_NK, 0, 64, 512, 512, 4,
     "cg_gmm_sm90_fp8_nk_small"},
    {"contiguous prefill in 64-row blocks: 64-row tiles", CG_GMM_FORM_CONTIGUOUS, CG_GMM_FP8_E4M3, CG_GMM_B_NK,
     CG_GMM_BLOCKS_64, 32768, 1536, 2048, 128, "cg_gmm_sm90_fp8_nk_split"},
    {"contiguous in 64-row blocks, few tiles", CG_GMM_FORM_CONTIGUOUS, CG_GMM_BF16, CG_GMM_B_NK, CG_GMM_BLOCKS_64,
     1024, 128, 128, 4, "cg_gmm_sm90_bf16_nk_small"},
    {"psum prefill in 64-row blocks", CG_GMM_FORM_PSUM, CG_GMM_FP8_E4M3, CG_GMM_B_NK, CG_GMM_BLOCKS_64, 32768, 1536,
     2048, 128, "cg_gmm_sm90_fp8_nk_large"},
    {"forced portable", CG_GMM_FORM_OFFS, CG_GMM_BF16, CG_GMM_B_NK, CG_GMM_FORCE_PORTABLE, 512, 1536, 2048, 128,
     "cg_gmm_sm80_bf16_nk"},
    {"fp8 with B [G, K, N]: wgmma reads fp8 K-major only", CG_GMM_FORM_OFFS, CG_GMM_FP8_E4M3, CG_GMM_B_KN, 0,
     8192, 4096, 7168, 32, "cg_gmm_sm80_fp8_kn"},
};

/* Device 0's primary context, made current, and the kernels' driver table
 * resolved (the launches' address ranges are allocated in it after). */
static CUcontext device0_current(void)
{
	CUdevice dev;
	CUcontext ctx;
	ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
	ck_assert_int_eq(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
	ck_assert_int_eq(cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
	int (*init)(void);
	resolve(&init, "ctxguard_gmm_init_default");
	ck_assert_int_eq(init(), CUDA_SUCCESS);
	return ctx;
}

/* launch_one: where set, the next call of this entry point fails with
 * CUDA_ERROR_NOT_SUPPORTED */
static const char *refuse;
/* launch_one: where set, the first kernel launched, as *first_launch */
static struct fake_launch_info *first_launch;
/* launch_one: where set, the launch after the first fails with this (the
 * expected result then) */
static CUresult fail_second;

static void keep_launch(void *out)
{
	fake_last_launch(out);
	if (fail_second) {
		fake_fail_next("cuLaunchKernel", fail_second);
		fake_fail_next("cuLaunchKernelEx", fail_second); /* a cluster launch's retry without the overlap */
	}
}

/* One fp8 or bf16 problem of the given form launched on the fake in device
 * 0's primary context: its operands fresh address ranges (the fake backs
 * nothing: sizes need not be exact), sfa sfa_offset bytes into its range
 * (*sfa set to that address), sfa strides (m, k, g) as the ctypes API takes
 * them.  Returns whether it launched (false in a build without kernels),
 * the launch in *ran. */
static int launch_one(const char *what, int form, int dtype, int b_layout, unsigned flags, const int64_t strides[3],
		      uint64_t sfa_offset, int64_t m, int64_t n, int64_t k, int64_t g, struct fake_launch_info *ran,
		      CUdeviceptr *sfa)
{
	device0_current();
	CUdeviceptr a, b, d, index, sfb;
	ck_assert_int_eq(cuMemAlloc(&a, 1 << 30), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemAlloc(&b, 1 << 30), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemAlloc(&d, 1 << 30), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemAlloc(&index, 1 << 20), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemAlloc(sfa, 1 << 24), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemAlloc(&sfb, 1 << 24), CUDA_SUCCESS);
	*sfa += sfa_offset;
	fake_reset();
	if (refuse)
		fake_fail_next(refuse, CUDA_ERROR_NOT_SUPPORTED);
	if (first_launch)
		fake_after_next("cuLaunchKernel", keep_launch, first_launch);
	const int rc = form == CG_GMM_FORM_MASKED
			   ? masked(0, dtype, b_layout, flags, a, b, d, index, *sfa, sfb, strides[0], strides[1],
				    strides[2], m, n, k, g)
			   : (form == CG_GMM_FORM_OFFS ? offs : form == CG_GMM_FORM_PSUM ? psum : contiguous)(
				 0, dtype, b_layout, flags, a, b, d, index, *sfa, sfb, strides[0], strides[1], m, n, k, g);
	if (fail_second && rc == (int)fail_second)
		return 0;
	accepted(rc);
	if (rc != CUDA_SUCCESS)
		return 0;
	ck_assert_msg(fake_last_launch(ran), "%s: nothing launched", what);
	return 1;
}

START_TEST(kernel_by_shape)
{
	const struct choice *c = &choices[_i];
	static const int64_t row_major[3] = {0, 0, 0};
	struct fake_launch_info ran;
	CUdeviceptr sfa;
	if (!launch_one(c->what, c->form, c->dtype, c->b_layout, c->flags, row_major, 0, c->m, c->n, c->k, c->g, &ran,
			&sfa))
		return; /* no kernels in this build */
	ck_assert_msg(!strcmp(ran.kernel, c->kernel), "%s: ran %s, expected %s", c->what, ran.kernel, c->kernel);
}
END_TEST

/* The bundled functions fail to load in a context (here their shared
 * memory is refused): the failure is kept and said again, and the module
 * loaded for them stays loaded -- one load, never an unload, which would
 * wait for all the work running in the context (bench/driver_waits.c). */
START_TEST(failed_load_is_kept_not_unloaded)
{
	device0_current();
	CUdeviceptr a, b, d, index;
	ck_assert_int_eq(cuMemAlloc(&a, 1 << 20), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemAlloc(&b, 1 << 20), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemAlloc(&d, 1 << 20), CUDA_SUCCESS);
	ck_assert_int_eq(cuMemAlloc(&index, 1 << 12), CUDA_SUCCESS);
	fake_trace_start();
	fake_fail_next("cuFuncSetAttribute", CUDA_ERROR_INVALID_VALUE);
	int rc[2];
	char first[256] = "";
	for (int i = 0; i < 2; i++) {
		rc[i] = offs(0, CG_GMM_BF16, CG_GMM_B_NK, 0, a, b, d, index, 0, 0, 0, 0, 256, 256, 256, 2);
		if (rc[i] == CUDA_ERROR_NOT_SUPPORTED && strstr(last_error(), "without nvcc"))
			return; /* no kernels in this build */
		if (!i)
			snprintf(first, sizeof first, "%s", last_error());
	}
	ck_assert_int_eq(rc[0], CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(rc[1], CUDA_ERROR_INVALID_VALUE);
	ck_assert_str_eq(last_error(), first);
	static struct fake_call trace[256];
	size_t n = fake_trace(trace, 256), loads = 0;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(trace[i].api, "cuModuleLoad")) {
			loads++;
			unsigned nfn;
			ck_assert_msg(cuModuleGetFunctionCount(&nfn, (CUmodule)trace[i].object) == CUDA_SUCCESS,
				      "the module was unloaded");
		}
	ck_assert_uint_eq(loads, 1);
}
END_TEST

/* Which fp8 problems load sfa by TMA (CG_GMM_ARG_SFA_TMA, with a fourth
 * tensor map on sfa), and in which boxes: DeepGEMM's MN-major layout with a
 * 16-byte aligned base and strides, in every form whose tiles start on a
 * multiple of 64 rows, so not offs; row-major sfa (CG_GMM_ARG_SFA_ROWS)
 * whose rows are a multiple of 4 blocks (16 bytes) apart, in every form;
 * every other sfa goes through the scale warp. */
static const struct sfa_choice {
	const char *what;
	int form;
	int64_t sfa_strides[3]; /* m, k, g */
	uint64_t sfa_offset;    /* bytes past a 256-byte aligned allocation */
	int64_t m, n, k, g;  /* masked: m = max_m */
	int tma, rows;
} sfa_choices[] = {
    {"contiguous, MN-major", CG_GMM_FORM_CONTIGUOUS, {1, 8192, 0}, 0, 8192, 4096, 7168, 32, 1, 0},
    {"contiguous, row-major, 56 blocks", CG_GMM_FORM_CONTIGUOUS, {0, 0, 0}, 0, 8192, 4096, 7168, 32, 1, 1},
    {"psum, MN-major", CG_GMM_FORM_PSUM, {1, 32768, 0}, 0, 32768, 1536, 2048, 128, 1, 0},
    {"offs, MN-major: groups start on any row", CG_GMM_FORM_OFFS, {1, 8192, 0}, 0, 8192, 4096, 7168, 32, 0, 0},
    {"offs, row-major, 16 blocks", CG_GMM_FORM_OFFS, {0, 0, 0}, 0, 32768, 1536, 2048, 128, 1, 1},
    {"offs, row-major, 6 blocks (rows 24 bytes apart)", CG_GMM_FORM_OFFS, {0, 0, 0}, 0, 32768, 2048, 768, 128, 0,
     0},
    {"offs, row-major, 6 blocks in rows of 8", CG_GMM_FORM_OFFS, {8, 1, 0}, 0, 32768, 2048, 768, 128, 1, 1},
    {"offs, row-major, 16 blocks, sfa 4 bytes past 16", CG_GMM_FORM_OFFS, {0, 0, 0}, 4, 32768, 1536, 2048, 128, 0,
     0},
    {"contiguous, MN-major, sfa 4 bytes past 16", CG_GMM_FORM_CONTIGUOUS, {1, 8192, 0}, 4, 8192, 4096, 7168, 32, 0,
     0},
    {"contiguous, MN-major, k stride of 8190 rows", CG_GMM_FORM_CONTIGUOUS, {1, 8190, 0}, 0, 8190, 4096, 7168, 32,
     0, 0},
    {"masked, MN-major, groups packed", CG_GMM_FORM_MASKED, {1, 256, 0}, 0, 256, 4096, 7168, 32, 1, 0},
    {"masked, MN-major, groups 5 floats apart", CG_GMM_FORM_MASKED, {1, 256, 56 * 256 + 5}, 0, 256, 4096, 7168, 32,
     0, 0},
    {"masked, row-major, groups packed", CG_GMM_FORM_MASKED, {0, 0, 0}, 0, 256, 4096, 7168, 32, 1, 1},
    {"masked, row-major, groups 5 floats apart", CG_GMM_FORM_MASKED, {56, 1, 56 * 256 + 5}, 0, 256, 4096, 7168, 32,
     0, 0},
    {"masked decode on split tiles, MN-major", CG_GMM_FORM_MASKED, {1, 64, 0}, 0, 64, 4096, 7168, 32, 1, 0},
    {"masked decode on split tiles, row-major", CG_GMM_FORM_MASKED, {0, 0, 0}, 0, 64, 4096, 7168, 32, 1, 1},
};

START_TEST(sfa_by_tma)
{
	const struct sfa_choice *c = &sfa_choices[_i];
	struct fake_launch_info ran;
	CUdeviceptr sfa;
	if (!launch_one(c->what, c->form, CG_GMM_FP8_E4M3, CG_GMM_B_NK, 0, c->sfa_strides, c->sfa_offset, c->m, c->n,
			c->k, c->g, &ran, &sfa))
		return; /* no kernels in this build */
	/* sm90 parameters: tensor maps of A (two), B, D and sfa, then the
	 * argument block, last and right after sfa's map */
	struct cg_gmm_args args;
	CUtensorMap map;
	ck_assert_msg(ran.argbytes >= 5 * sizeof map + sizeof args, "%s: %zu bytes of arguments", c->what,
		      ran.argbytes);
	const size_t at = ran.argbytes - sizeof args;
	memcpy(&args, ran.args + at, sizeof args);
	ck_assert_msg(!(args.flags & CG_GMM_ARG_SFA_TMA) == !c->tma, "%s: sfa by TMA %s", c->what,
		      c->tma ? "expected, not set" : "set, not expected");
	ck_assert_msg(!(args.flags & CG_GMM_ARG_SFA_ROWS) == !c->rows, "%s: row-major sfa boxes %s", c->what,
		      c->rows ? "expected, not set" : "set, not expected");
	CUdeviceptr mapped = 0;
	memcpy(&map, ran.args + at - sizeof map, sizeof map);
	if (c->tma)
		ck_assert_msg(fake_tensor_map_address(&map, &mapped) && mapped == sfa, "%s: no tensor map on sfa",
			      c->what);
}
END_TEST

/* The last round of the prefill kernels' tiles (T tiles, 132 a round on
 * the fake H200): run by a second launch, overlapping the first's end, where
 * it leaves half the grid or more idle and a tile has 16 fp8 or 12 bf16
 * k-steps or more, in
 * the contiguous form, the only one whose tiles the host can count: as 4r
 * parts of 64 x 128 where r <= 33, else as 2r of 64 x 256.  Where clusters
 * of c (at most 4) CTAs fit c x 4r <= 132, each summing 2048 channels of K
 * or more, and the driver runs 4r such clusters at once (the fake, as an H200: 66, 39, 30
 * clusters of 2, 3, 4), each part is summed over K by a cluster (the k-split
 * kernels), the largest c.  Each choice three times: the second time
 * the driver refuses the overlap, and the tail runs all the same, launched
 * after the main launch (in clusters, or plainly); the third time it
 * refuses that launch too, and the call fails saying which of D's tiles are
 * left out. */
static const struct tail_choice {
	const char *what;
	int form, dtype, b_layout;
	int64_t m, n, k, g;
	const char *main, *tail; /* tail NULL: one launch */
	int tail0, split, ranks;
} tail_choices[] = {
    {"T = 83 x 16 = 1328, r = 8: 32 parts, 30 clusters of 4 fit, so of 3", CG_GMM_FORM_CONTIGUOUS,
     CG_GMM_FP8_E4M3, CG_GMM_B_NK, 83 * 128, 4096, 7168, 32, "cg_gmm_sm90_fp8_nk_large", "cg_gmm_sm90_fp8_nk_ksplit",
     1320, 4, 3},
    {"T = 83 x 16 = 1328, r = 8, B [G, K, N]", CG_GMM_FORM_CONTIGUOUS, CG_GMM_BF16, CG_GMM_B_KN, 83 * 128, 4096,
     7168, 32, "cg_gmm_sm90_bf16_kn_large", "cg_gmm_sm90_bf16_kn_ksplit", 1320, 4, 3},
    {"T = 139 x 1 = 139 (N = 256), r = 7, K = 8192: 28 parts, clusters of 4", CG_GMM_FORM_CONTIGUOUS,
     CG_GMM_FP8_E4M3, CG_GMM_B_NK, 139 * 128, 256, 8192, 8, "cg_gmm_sm90_fp8_nk_large", "cg_gmm_sm90_fp8_nk_ksplit",
     132, 4, 4},
    {"r = 7, K = 2048: 512 channels a CTA in clusters of 4, too few", CG_GMM_FORM_CONTIGUOUS, CG_GMM_FP8_E4M3,
     CG_GMM_B_NK, 139 * 128, 256, 2048, 8, "cg_gmm_sm90_fp8_nk_large", "cg_gmm_sm90_fp8_nk_small", 132, 4, 1},
    {"r = 7, K = 1920: 15 fp8 k-steps, too few for a tail", CG_GMM_FORM_CONTIGUOUS, CG_GMM_FP8_E4M3, CG_GMM_B_NK,
     139 * 128, 256, 1920, 8, "cg_gmm_sm90_fp8_nk_large", NULL, 0, 0, 0},
    {"T = 21 x 7 = 147 (N = 1664), r = 15, K = 4096: 60 parts, clusters of 2", CG_GMM_FORM_CONTIGUOUS, CG_GMM_BF16,
     CG_GMM_B_NK, 21 * 128, 1664, 4096, 4, "cg_gmm_sm90_bf16_nk_large", "cg_gmm_sm90_bf16_nk_ksplit", 132, 4, 2},
    {"T = 21 x 7 = 147 (N = 1664), r = 15, K = 1024: too few channels to split", CG_GMM_FORM_CONTIGUOUS,
     CG_GMM_BF16, CG_GMM_B_NK, 21 * 128, 1664, 1024, 4, "cg_gmm_sm90_bf16_nk_large", "cg_gmm_sm90_bf16_nk_small", 132,
     4, 1},
    {"r = 8, K = 4096: clusters of 2 (2048 channels each), of 3 too few", CG_GMM_FORM_CONTIGUOUS, CG_GMM_FP8_E4M3,
     CG_GMM_B_NK, 83 * 128, 4096, 4096, 32, "cg_gmm_sm90_fp8_nk_large", "cg_gmm_sm90_fp8_nk_ksplit", 1320, 4, 2},
    {"r = 8, K = 2560: 1280 channels a CTA in clusters of 2, too few", CG_GMM_FORM_CONTIGUOUS, CG_GMM_FP8_E4M3,
     CG_GMM_B_NK, 83 * 128, 4096, 2560, 32, "cg_gmm_sm90_fp8_nk_large", "cg_gmm_sm90_fp8_nk_small", 1320, 4, 1},
    {"T = 81 x 16 = 1296, r = 108: no tail", CG_GMM_FORM_CONTIGUOUS, CG_GMM_FP8_E4M3, CG_GMM_B_NK, 81 * 128, 4096,
     2048, 32, "cg_gmm_sm90_fp8_nk_large", NULL, 0, 0, 0},
    {"T = 11 x 13 = 143 (N = 3328), r = 11, K = 6144: 44 parts, 39 clusters of 3 fit, so of 2",
     CG_GMM_FORM_CONTIGUOUS, CG_GMM_FP8_E4M3, CG_GMM_B_NK, 11 * 128, 3328, 6144, 4, "cg_gmm_sm90_fp8_nk_large",
     "cg_gmm_sm90_fp8_nk_ksplit", 132, 4, 2},
    {"T = 33 x 5 = 165 (N = 1280), r = 33: a quarter round", CG_GMM_FORM_CONTIGUOUS, CG_GMM_FP8_E4M3, CG_GMM_B_NK,
     33 * 128, 1280, 2048, 8, "cg_gmm_sm90_fp8_nk_large", "cg_gmm_sm90_fp8_nk_small", 132, 4, 1},
    {"T = 86 x 5 = 430 (N = 1280), r = 34: halves", CG_GMM_FORM_CONTIGUOUS, CG_GMM_BF16, CG_GMM_B_NK, 86 * 128,
     1280, 1024, 16, "cg_gmm_sm90_bf16_nk_large", "cg_gmm_sm90_bf16_nk_split", 396, 2, 1},
    {"T = 85 x 16 = 1360, r = 40: halves", CG_GMM_FORM_CONTIGUOUS, CG_GMM_BF16, CG_GMM_B_NK, 85 * 128, 4096, 7168,
     32, "cg_gmm_sm90_bf16_nk_large", "cg_gmm_sm90_bf16_nk_split", 1320, 2, 1},
    {"T = 33 x 6 = 198 (N = 1536), r = 66: halves", CG_GMM_FORM_CONTIGUOUS, CG_GMM_FP8_E4M3, CG_GMM_B_NK, 33 * 128,
     1536, 2048, 8, "cg_gmm_sm90_fp8_nk_large", "cg_gmm_sm90_fp8_nk_split", 132, 2, 1},
    {"T = 87 x 16 = 1392, r = 72: more than half a round", CG_GMM_FORM_CONTIGUOUS, CG_GMM_BF16, CG_GMM_B_NK,
     87 * 128, 4096, 7168, 32, "cg_gmm_sm90_bf16_nk_large", NULL, 0, 0, 0},
    {"r = 8, but K = 768: 6 fp8 k-steps", CG_GMM_FORM_CONTIGUOUS, CG_GMM_FP8_E4M3, CG_GMM_B_NK, 83 * 128, 4096, 768,
     32, "cg_gmm_sm90_fp8_nk_large", NULL, 0, 0, 0},
    {"r = 15, K = 768: 12 bf16 k-steps, enough", CG_GMM_FORM_CONTIGUOUS, CG_GMM_BF16, CG_GMM_B_NK, 21 * 128, 1664,
     768, 4, "cg_gmm_sm90_bf16_nk_large", "cg_gmm_sm90_bf16_nk_small", 132, 4, 1},
    {"r = 15, but K = 704: 11 bf16 k-steps", CG_GMM_FORM_CONTIGUOUS, CG_GMM_BF16, CG_GMM_B_NK, 21 * 128, 1664, 704,
     4, "cg_gmm_sm90_bf16_nk_large", NULL, 0, 0, 0},
    {"r = 8, but K = 1920: 15 fp8 k-steps", CG_GMM_FORM_CONTIGUOUS, CG_GMM_FP8_E4M3, CG_GMM_B_NK, 83 * 128, 4096,
     1920, 32, "cg_gmm_sm90_fp8_nk_large", NULL, 0, 0, 0},
    {"T = 33 x 16 = 528, whole rounds", CG_GMM_FORM_CONTIGUOUS, CG_GMM_FP8_E4M3, CG_GMM_B_NK, 33 * 128, 4096, 7168,
     32, "cg_gmm_sm90_fp8_nk_large", NULL, 0, 0, 0},
    {"T = 7 x 16 = 112, under a round", CG_GMM_FORM_CONTIGUOUS, CG_GMM_FP8_E4M3, CG_GMM_B_NK, 7 * 128, 4096, 7168,
     4, "cg_gmm_sm90_fp8_nk_large", NULL, 0, 0, 0},
    {"psum: tiles counted on the device", CG_GMM_FORM_PSUM, CG_GMM_FP8_E4M3, CG_GMM_B_NK, 83 * 128, 4096, 7168, 32,
     "cg_gmm_sm90_fp8_nk_large", NULL, 0, 0, 0},
};

#define TAIL_CHOICES ((int)(sizeof tail_choices / sizeof tail_choices[0]))

START_TEST(last_round)
{
	const struct tail_choice *c = &tail_choices[_i % TAIL_CHOICES];
	const int refused = _i >= TAIL_CHOICES, failed = _i >= 2 * TAIL_CHOICES;
	static const int64_t row_major[3] = {0, 0, 0};
	struct fake_launch_info ran, first = {.argbytes = 0};
	CUdeviceptr sfa;
	fake_trace_start();
	refuse = refused ? "cuLaunchKernelEx" : NULL;
	fail_second = failed ? CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES : 0;
	first_launch = &first;
	const int launched_any =
		launch_one(c->what, c->form, c->dtype, c->b_layout, 0, row_major, 0, c->m, c->n, c->k, c->g, &ran, &sfa);
	refuse = NULL;
	fail_second = 0;
	first_launch = NULL;
	if (!launched_any && strstr(last_error(), "without nvcc"))
		return; /* no kernels in this build */
	if (failed && c->tail) {
		const int64_t total = (c->m + 127) / 128 * ((c->n + 255) / 256);
		char lacks[64];
		snprintf(lacks, sizeof lacks, "the last %lld of D's %lld tiles", (long long)(total - c->tail0),
			 (long long)total);
		ck_assert_msg(!launched_any && strstr(last_error(), lacks) && strstr(last_error(), c->tail),
			      "%s: the tail failing after the main launch said \"%s\"", c->what, last_error());
		return;
	}
	ck_assert_msg(launched_any, "%s: %s", c->what, last_error());
	static struct fake_call trace[64];
	const size_t n = fake_trace(trace, 64);
	const char *launched[3] = {NULL, NULL, NULL}, *clusters[3] = {NULL, NULL, NULL};
	int behind[3] = {0, 0, 0};
	size_t launches = 0;
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(trace[i].api, "launch") && launches < 3)
			launched[launches++] = trace[i].kernel;
		if (!strcmp(trace[i].api, "programmatic") && launches)
			behind[launches - 1] = 1;
		if (!strcmp(trace[i].api, "cluster") && launches)
			clusters[launches - 1] = trace[i].kernel;
	}
	ck_assert_msg(!clusters[0], "%s: the main launch ran in %s", c->what, clusters[0]);
	ck_assert_uint_eq(launches, c->tail ? 2 : 1);
	ck_assert_msg(!strcmp(launched[0], c->main), "%s: ran %s first, expected %s", c->what, launched[0], c->main);
	ck_assert_msg(!behind[0], "%s: the main launch may overlap the work before it", c->what);
	/* the main kernel lets the work behind it start early only when that
	 * is our tail (gmm_sm90.cuh, griddepcontrol.launch_dependents) */
	struct cg_gmm_args args;
	ck_assert_msg(first.argbytes >= sizeof args && !strcmp(first.kernel, c->main), "%s: main launch not seen",
		      c->what);
	memcpy(&args, first.args + first.argbytes - sizeof args, sizeof args);
	ck_assert_msg(!(args.flags & CG_GMM_ARG_TAIL_NEXT) == !c->tail, "%s: the main launch %s a tail behind it",
		      c->what, c->tail ? "does not announce" : "announces");
	memcpy(&args, ran.args + ran.argbytes - sizeof args, sizeof args);
	ck_assert_msg(!(args.flags & CG_GMM_ARG_TAIL_NEXT), "%s: the last launch announces a tail", c->what);
	if (!c->tail) {
		ck_assert_int_eq(args.tail_split, 0);
		ck_assert_int_eq(args.tiles, INT_MAX);
		return;
	}
	ck_assert_msg(!strcmp(launched[1], c->tail), "%s: ran %s second, expected %s", c->what, launched[1], c->tail);
	ck_assert_msg(behind[1] == !refused, "%s: the tail was %s to overlap the main launch's end", c->what,
		      refused ? "launched, refused," : "not launched");
	ck_assert_int_eq(args.tail0, c->tail0);
	ck_assert_int_eq(args.tail_split, c->split);
	const int64_t total = (c->m + 127) / 128 * ((c->n + 255) / 256);
	ck_assert_int_eq(args.tiles, (total - c->tail0) * c->split);
	if (c->ranks > 1) {
		char want[64];
		snprintf(want, sizeof want, "clusters of %d x 1 x 1, grid %lld x 1 x 1", c->ranks,
			 (long long)(args.tiles * c->ranks));
		ck_assert_msg(clusters[1] && !strcmp(clusters[1], want), "%s: the tail ran in %s, expected %s", c->what,
			      clusters[1] ? clusters[1] : "no clusters", want);
	} else {
		ck_assert_msg(!clusters[1], "%s: the tail ran in %s", c->what, clusters[1]);
	}
}
END_TEST

/* A default stream on a thread with no current context (PyTorch's autograd
 * thread for device 0, before its first runtime call) runs in device 0's
 * primary context, as the CUDA runtime would; with a context current, the
 * default stream is that context's. */
struct default_stream_call {
	CUdeviceptr buf[4];
	int rc;
	char error[256]; /* the calling thread's cg_gmm_last_error() */
};

static void *offs_on_default_stream(void *arg)
{
	struct default_stream_call *c = arg;
	c->rc = offs(0, CG_GMM_BF16, CG_GMM_B_NK, 0, c->buf[0], c->buf[1], c->buf[2], c->buf[3], 0, 0, 0, 0, 512, 1536,
		     2048, 128);
	snprintf(c->error, sizeof c->error, "%s", last_error());
	return NULL;
}

/* 64-row blocks of the contiguous form need the 64-row Hopper tiles: on the
 * portable kernels (128-row tiles) the call is refused, and nothing runs. */
START_TEST(blocks_64_not_on_portable_kernels)
{
	device0_current();
	CUdeviceptr buf[4];
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(cuMemAlloc(&buf[i], 1 << 24), CUDA_SUCCESS);
	fake_reset();
	const int rc = contiguous(0, CG_GMM_BF16, CG_GMM_B_NK, CG_GMM_BLOCKS_64 | CG_GMM_FORCE_PORTABLE, buf[0],
				  buf[1], buf[2], buf[3], 0, 0, 0, 0, 1024, 256, 256, 4);
	if (rc == CUDA_ERROR_NOT_SUPPORTED && strstr(last_error(), "without nvcc"))
		return; /* no kernels in this build */
	refused(rc, CUDA_ERROR_NOT_SUPPORTED, "runs on the Hopper kernels' 64-row tiles only");
	struct fake_launch_info ran;
	ck_assert_msg(!fake_last_launch(&ran), "%s launched", ran.kernel);
}
END_TEST

START_TEST(default_stream_without_context)
{
	const CUcontext primary = device0_current();
	CUcontext other;
	struct default_stream_call call = {.rc = -1};
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(cuMemAlloc(&call.buf[i], 1 << 24), CUDA_SUCCESS);
	fake_reset();
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, offs_on_default_stream, &call), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	if (call.rc == CUDA_ERROR_NOT_SUPPORTED && strstr(call.error, "without nvcc"))
		return; /* no kernels in this build */
	ck_assert_msg(call.rc == CUDA_SUCCESS, "rc %d: %s", call.rc, call.error);
	struct fake_launch_info ran;
	ck_assert_msg(fake_last_launch(&ran), "nothing launched");
	ck_assert_msg(ran.ctx == primary, "ran in %p, not device 0's primary context %p", (void *)ran.ctx,
		      (void *)primary);
	/* a context of its own current: the default stream is that context's */
	CUdevice dev;
	ck_assert_int_eq(cuCtxGetDevice(&dev), CUDA_SUCCESS);
	ck_assert_int_eq(cuCtxCreate(&other, NULL, 0, dev), CUDA_SUCCESS);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(cuMemAlloc(&call.buf[i], 1 << 24), CUDA_SUCCESS);
	offs_on_default_stream(&call);
	ck_assert_msg(call.rc == CUDA_SUCCESS, "rc %d: %s", call.rc, call.error);
	ck_assert_int_eq(fake_last_launch(&ran), 1);
	ck_assert_msg(ran.ctx == other, "ran in %p, not the current context %p", (void *)ran.ctx, (void *)other);
	ck_assert_int_eq(cuCtxDestroy(other), CUDA_SUCCESS);
}
END_TEST

/* Every kernel's shared memory at the most groups the range forms take,
 * as the host sizes it at launch, fits the smallest per-block limit of the
 * GPUs it runs on: Hopper's 227 KB for SM90, and for the portable kernels
 * the 99 KB of sm_86/sm_89. */
START_TEST(shared_memory_fits)
{
	for (int i = 0; i < CG_GMM_NKERNELS; ++i) {
		const struct cg_gmm_kernel_info *k = &cg_gmm_kernel_info[i];
		const unsigned smem = cg_gmm_kernel_smem(k, CG_GMM_FORM_OFFS, CG_GMM_MAX_OFFS_GROUPS);
		ck_assert_msg(smem <= (k->sm90 ? 227u : 99u) * 1024u, "%s: %u bytes of shared memory", k->name, smem);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("grouped_mm");
	TCase *t = tcase_create("problem checks");
	tcase_add_checked_fixture(t, setup, NULL);
	tcase_add_test(t, psum_needs_offs);
	tcase_add_test(t, masked_needs_masked_m);
	tcase_add_test(t, masked_rows_fit_an_int);
	tcase_add_test(t, range_forms_take_1024_groups);
	tcase_add_test(t, masked_fp8_strides);
	tcase_add_test(t, misaligned_operands);
	tcase_add_test(t, no_rows_needs_no_operands);
	tcase_add_test(t, flags_checked);
	suite_add_tcase(s, t);
	TCase *k = tcase_create("kernel choice");
	tcase_add_checked_fixture(k, setup, NULL);
	tcase_add_loop_test(k, kernel_by_shape, 0, sizeof choices / sizeof choices[0]);
	tcase_add_loop_test(k, sfa_by_tma, 0, sizeof sfa_choices / sizeof sfa_choices[0]);
	tcase_add_loop_test(k, last_round, 0, 3 * TAIL_CHOICES);
	tcase_add_test(k, default_stream_without_context);
	tcase_add_test(k, blocks_64_not_on_portable_kernels);
	tcase_add_test(k, failed_load_is_kept_not_unloaded);
	suite_add_tcase(s, k);
	TCase *m = tcase_create("kernel table");
	tcase_add_test(m, shared_memory_fits);
	suite_add_tcase(s, m);
	return run_suite(s);
}
