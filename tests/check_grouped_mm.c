/* The grouped_mm host API's problem checks, in the psum and masked forms,
 * through the ctypes entry points that libctxguard.so exports (this binary
 * runs under it).  Every case here is refused or finished before a kernel
 * or the driver is needed, so it holds with and without nvcc. */
#include <check.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include "../kernels/grouped_mm.h"
#include "suite.h"

typedef int (*masked_fn)(uint64_t, int, int, unsigned, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
			 uint64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
typedef const char *(*error_fn)(void);

static ctxguard_gmm_flat_fn *psum;
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
	tcase_add_test(t, no_rows_needs_no_operands);
	suite_add_tcase(s, t);
	return run_suite(s);
}
