/* The redirect's decode against DeepGEMM's semantics (tests/model): for
 * launches as DeepGEMM's host code makes them, and each with fields
 * perturbed, the decoder refuses it or the bundled kernels write what the
 * original writes, row for row.  The seeds of tests/fuzz/corpus/decode_diff
 * are the six cases of issue 66; random choices cover the rest (the fuzz
 * target, tests/fuzz/decode_diff.c, runs the same check longer). */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "model/differ.h"
#include "suite.h"

static struct dg_launch L;
static char why[512], refusal[512];

static int verdict(const uint8_t *bytes, size_t n)
{
	struct cg_choices c = {bytes, n, 0};
	cg_gen_launch(&c, &L);
	why[0] = refusal[0] = 0;
	return cg_differ(&L, why, sizeof why, refusal, sizeof refusal);
}

/* Each seed: its file, and the refusal it must meet ("" for a launch that is
 * redirected and agrees). */
static const struct {
	const char *file;
	const char *refusal;
} seeds[] = {
	{"1_contiguous_block_m_64", ""},
	{"2_compiled_shape_k", "SHAPE_K is compiled in as 64 but the launch passes 128"},
	{"3_epilogue_head_splits", "epilogue deep_gemm::epilogue::transform::EpilogueHeadSplits"},
	{"3_major_2", "not a cute::UMMA::Major"},
	{"4_a_unswizzled", "tensor map a has swizzle 0"},
	{"4_nan_fill", "OOB fill 1"},
	{"4_box", "has a box of {8, 8}"},
	{"4_half_grid", "launched with grid {66, 1, 1}"},
	{"5_params_and_extra", "refused as the driver refuses it"},
	{"6_contiguous_padding", ""},
	{"6_psum_gaps", ""},
	{"6_masked_tail", ""},
};

START_TEST(seed)
{
	char path[256];
	uint8_t bytes[256];
	snprintf(path, sizeof path, "tests/fuzz/corpus/decode_diff/%s", seeds[_i].file);
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f, "%s: run from the repository root", path);
	size_t n = fread(bytes, 1, sizeof bytes, f);
	fclose(f);
	int v = verdict(bytes, n);
	ck_assert_msg(v >= 0, "%s: %s", seeds[_i].file, why);
	if (*seeds[_i].refusal) {
		ck_assert_msg(v == 0, "%s: redirected", seeds[_i].file);
		ck_assert_msg(strstr(refusal, seeds[_i].refusal),
			      "%s: refused with '%s', expected '%s'", seeds[_i].file, refusal,
			      seeds[_i].refusal);
	} else {
		ck_assert_msg(v == 1, "%s: refused: %s", seeds[_i].file, refusal);
	}
}
END_TEST

/* Launches as DeepGEMM makes them, unperturbed: every form, dtype, tile
 * and shape the generator knows (BLOCK_M 64, 128 and 256 among them); every
 * one is redirected, and agrees. */
START_TEST(deepgemm_launches_agree)
{
	unsigned redirected = 0, total = 0;
	for (unsigned i = 0; i < 20000; i++) {
		uint8_t b[40];
		uint64_t x = i * 0x9e3779b97f4a7c15ull + 1;
		for (size_t j = 0; j < sizeof b; j++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			b[j] = (uint8_t)x;
		}
		struct cg_choices c = {b, sizeof b, 0};
		cg_gen_deepgemm(&c, &L);
		why[0] = refusal[0] = 0;
		int v = cg_differ(&L, why, sizeof why, refusal, sizeof refusal);
		ck_assert_msg(v >= 0, "choices %u: %s", i, why);
		ck_assert_msg(v == 1, "choices %u: DeepGEMM's own launch (BLOCK_M %ld) refused: %s",
			      i, L.bm, refusal);
		redirected += v == 1;
		total++;
	}
	ck_assert_uint_eq(redirected, total);
}
END_TEST

/* Random choices, perturbations included. */
START_TEST(perturbed_launches_agree_or_are_refused)
{
	unsigned redirected = 0;
	uint64_t x = 88172645463325252ull;
	for (unsigned i = 0; i < 50000; i++) {
		uint8_t b[48];
		for (size_t j = 0; j < sizeof b; j++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			b[j] = (uint8_t)x;
		}
		int v = verdict(b, sizeof b);
		ck_assert_msg(v >= 0, "choices %u: %s", i, why);
		redirected += v == 1;
	}
	ck_assert_msg(redirected > 1000, "only %u redirected", redirected);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("differential");
	TCase *t = tcase_create("differential");
	tcase_set_timeout(t, 300);
	tcase_add_loop_test(t, seed, 0, sizeof seeds / sizeof seeds[0]);
	tcase_add_test(t, deepgemm_launches_agree);
	tcase_add_test(t, perturbed_launches_agree_or_are_refused);
	suite_add_tcase(s, t);
	return run_suite(s);
}
