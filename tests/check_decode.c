/* The DeepGEMM decode (shim/decode.c), linked in directly: names exactly as
 * c++filt prints DeepGEMM's sm90 instantiations, parameters and tensor-map
 * encodes as DeepGEMM makes them (DESIGN.md), for every recognized variant
 * and each reason a launch is refused. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "../shim/decode.h"
#include "suite.h"

/* Template arguments: majors, shapes, groups, blocks, swizzles, stages,
 * threads, multicast, SMs, type, accumulation, output type. */
static void bf16_name(char *buf, size_t n, int major_b, unsigned g, int type, const char *accum,
		      const char *cd)
{
	snprintf(buf, n,
		 "void deep_gemm::sm90_bf16_gemm_impl<(cute::UMMA::Major)0, (cute::UMMA::Major)%d, "
		 "0u, 0u, 0u, %uu, 128u, 128u, 64u, 128u, 128u, 128u, 5u, 128u, 256u, 1u, true, "
		 "132u, (deep_gemm::GemmType)%d, %s, %s>(int*, unsigned int, unsigned int, "
		 "unsigned int, CUtensorMap_st, CUtensorMap_st, CUtensorMap_st)",
		 major_b, g, type, accum, cd);
}

static void fp8_name(char *buf, size_t n, unsigned g, int type)
{
	snprintf(buf, n,
		 "void deep_gemm::sm90_fp8_gemm_1d2d_impl<(cute::UMMA::Major)0, 0u, 0u, 0u, %uu, "
		 "128u, 128u, 128u, 128u, 128u, 128u, 5u, 128u, 256u, 1u, true, 132u, "
		 "(deep_gemm::GemmType)%d, cutlass::bfloat16_t, deep_gemm::EpilogueIdentity>"
		 "(float*, int*, unsigned int, unsigned int, unsigned int, CUtensorMap_st, "
		 "CUtensorMap_st, CUtensorMap_st, CUtensorMap_st)",
		 g, type);
}

enum { A = 0x7f1000000000, B = 0x7f1000400000, D = 0x7f1000800000, SFA = 0x7f1000c00000,
       SFB = 0x7f1001000000, LAYOUT = 0x7f1001400000 };

/* A launch as DeepGEMM makes it: the descriptors' bytes are opaque, the
 * encodes are what the registry recorded for them. */
static struct launch {
	unsigned char desc[4][128];
	struct cg_tmap map[4];
	int seen[4];
	uintptr_t sfb, layout;
	uint32_t m, n, k;
	void *params[9];
} L;

static int lookup(const void *desc, struct cg_tmap *out)
{
	for (int i = 0; i < 4; i++)
		if (desc == L.desc[i] && L.seen[i]) {
			*out = L.map[i];
			return 1;
		}
	return 0;
}

static struct cg_tmap map2(int dtype, uintptr_t addr, uint64_t d0, uint64_t d1, uint64_t stride)
{
	return (struct cg_tmap){.addr = addr, .dtype = dtype, .rank = 2, .dims = {d0, d1},
				.box = {64, 128}, .strides = {stride}};
}

/* DESIGN.md's encodes for m rows (max_m when masked), n, k, g groups. */
static void make_launch(int fp8, int nn, int masked, uint32_t m, uint32_t n, uint32_t k,
			unsigned g)
{
	memset(&L, 0, sizeof L);
	const uint64_t gm = masked ? g : 1, esz = fp8 ? 1 : 2;
	const int elem = fp8 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
	L.m = m, L.n = n, L.k = k;
	L.map[0] = map2(elem, A, k, m * gm, k * esz);
	L.map[1] = nn ? map2(elem, B, n, (uint64_t)k * g, n * esz)
		      : map2(elem, B, k, (uint64_t)n * g, k * esz);
	L.map[2] = map2(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, D, n, m * gm, n * 2);
	const uint64_t m4 = (m + 3) / 4 * 4;
	L.map[3] = map2(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, SFA, m4, (k + 127) / 128 * gm, m4 * 4);
	for (int i = 0; i < 4; i++)
		L.seen[i] = 1;
	L.sfb = SFB;
	L.layout = LAYOUT;
	void **p = L.params;
	if (fp8)
		*p++ = &L.sfb;
	*p++ = &L.layout;
	*p++ = &L.m;
	*p++ = &L.n;
	*p++ = &L.k;
	for (int i = 0; i < 3 + fp8; i++)
		*p++ = L.desc[i];
}

static char name[2048], why[512];
static struct cg_decoded out;

static int decode(void)
{
	why[0] = 0;
	return cg_decode_gemm(name, L.params, lookup, &out, why, sizeof why);
}

/* GemmType values: Normal 0, MGroupedContiguous 1, MGroupedMasked 2,
 * MGroupedContiguousWithPsumLayout 5. */
static const struct {
	int fp8, nn, type, layout;
	unsigned g;
} variants[] = {
	{0, 0, 1, CG_LAYOUT_CONTIGUOUS, 8},
	{0, 1, 1, CG_LAYOUT_CONTIGUOUS, 8},
	{0, 0, 5, CG_LAYOUT_PSUM, 8},
	{0, 1, 5, CG_LAYOUT_PSUM, 8},
	{0, 0, 2, CG_LAYOUT_MASKED, 4},
	{0, 1, 2, CG_LAYOUT_MASKED, 4},
	{0, 0, 0, CG_LAYOUT_NORMAL, 1},
	{1, 0, 1, CG_LAYOUT_CONTIGUOUS, 8},
	{1, 0, 5, CG_LAYOUT_PSUM, 8},
	{1, 0, 2, CG_LAYOUT_MASKED, 4},
	{1, 0, 0, CG_LAYOUT_NORMAL, 1},
};

START_TEST(every_variant)
{
	const int fp8 = variants[_i].fp8, nn = variants[_i].nn, layout = variants[_i].layout;
	const unsigned g = variants[_i].g;
	const uint32_t m = layout == CG_LAYOUT_MASKED ? 256 : 1030, n = 1536, k = 2048;
	if (fp8)
		fp8_name(name, sizeof name, g, variants[_i].type);
	else
		bf16_name(name, sizeof name, nn, g, variants[_i].type, "false",
			  "cutlass::bfloat16_t");
	make_launch(fp8, nn, layout == CG_LAYOUT_MASKED, m, n, k, g);
	ck_assert(cg_decode_is_gemm(name));
	ck_assert_msg(decode() == 1, "%s", why);
	ck_assert_int_eq(out.layout, layout);
	const struct cg_gmm_problem *p = &out.p;
	ck_assert_int_eq(p->dtype, fp8 ? CG_GMM_FP8_E4M3 : CG_GMM_BF16);
	ck_assert_int_eq(p->b_layout, nn ? CG_GMM_B_KN : CG_GMM_B_NK);
	ck_assert_uint_eq(p->a, A);
	ck_assert_uint_eq(p->b, B);
	ck_assert_uint_eq(p->d, D);
	ck_assert_int_eq(p->m, m);
	ck_assert_int_eq(p->n, n);
	ck_assert_int_eq(p->k, k);
	ck_assert_int_eq(p->g, g);
	ck_assert_uint_eq(p->offs, layout == CG_LAYOUT_PSUM ? LAYOUT : 0);
	ck_assert_uint_eq(p->layout,
			  layout == CG_LAYOUT_CONTIGUOUS || layout == CG_LAYOUT_MASKED ? LAYOUT : 0);
	unsigned operands = 3 + 2 * fp8 + (layout != CG_LAYOUT_NORMAL);
	ck_assert_uint_eq(out.noperands, operands);
	if (fp8) {
		/* sfa[kb][row], rows padded to 4 (m = 1030 -> 1032). */
		const int64_t rows = (m + 3) / 4 * 4;
		ck_assert_uint_eq(p->sfa, SFA);
		ck_assert_uint_eq(p->sfb, SFB);
		ck_assert_int_eq(p->sfa_stride_m, 1);
		ck_assert_int_eq(p->sfa_stride_k, rows);
		ck_assert_int_eq(out.p.sfa_stride_g, layout == CG_LAYOUT_MASKED ? 16 * rows : 0);
	} else {
		ck_assert_uint_eq(p->sfa, 0);
		ck_assert_uint_eq(p->sfb, 0);
	}
}
END_TEST

START_TEST(other_kernels_are_not_gemms)
{
	static const char *const others[] = {
		"void deep_gemm::transpose_fp32<128u, 128u>(float const*, float*, unsigned int)",
		"void deep_gemm::sm90_fp8_gemm_1d1d_impl<0u>(float*)",
		"void deep_gemm::sm100_bf16_gemm_impl<0u>(int*)",
		"my_kernel",
	};
	for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
		snprintf(name, sizeof name, "%s", others[i]);
		ck_assert(!cg_decode_is_gemm(name));
		ck_assert_int_eq(decode(), 0);
	}
	ck_assert(!cg_decode_is_gemm(NULL));
}
END_TEST

/* Each refusal: what to change in a good bf16 contiguous launch, and the
 * phrase the reason must carry. */
static void b_not_seen(void) { L.seen[1] = 0; }
static void a_dims(void) { L.map[0].dims[1] = 1000; }
static void a_padded(void) { L.map[0].strides[0] += 128; }
static void b_uint8(void) { L.map[1].dtype = CU_TENSOR_MAP_DATA_TYPE_UINT8; }
static void null_layout(void) { L.layout = 0; }
static void nothing(void) {}

/* bf16 template arguments: A's and B's majors, then the fixed middle
 * (shapes, groups, blocks, swizzles, stages, threads, multicast, SMs). */
#define TARGS(major_a, tail)                                                             \
	"(cute::UMMA::Major)" #major_a ", (cute::UMMA::Major)0, 0u, 0u, 0u, 8u, 128u, 128u, " \
	"64u, 128u, 128u, 128u, 5u, 128u, 256u, 1u, true, 132u, " tail

static const struct {
	const char *template_args; /* replaces the template argument list */
	const char *params;        /* replaces the parameter list */
	void (*change)(void);
	const char *reason;
} refusals[] = {
	{TARGS(0, "(deep_gemm::GemmType)1, true, cutlass::bfloat16_t"), NULL, nothing,
	 "accumulation into D"},
	{TARGS(0, "(deep_gemm::GemmType)3, false, cutlass::bfloat16_t"), NULL, nothing,
	 "GemmType::KGroupedContiguous is not"},
	{TARGS(0, "(deep_gemm::GemmType)4, false, cutlass::bfloat16_t"), NULL, nothing,
	 "GemmType::Batched is not"},
	{TARGS(1, "(deep_gemm::GemmType)1, false, cutlass::bfloat16_t"), NULL, nothing,
	 "A is MN-major"},
	{TARGS(0, "(deep_gemm::GemmType)1, false, float"), NULL, nothing,
	 "output type float"},
	{TARGS(0, "(deep_gemm::GemmType)1, false"), NULL, nothing,
	 "undecodable ABI: 20 template arguments, expected 21"},
	{NULL, "(int*, unsigned int, unsigned int, CUtensorMap_st, CUtensorMap_st, "
	 "CUtensorMap_st)", nothing, "undecodable ABI: parameters"},
	{NULL, NULL, b_not_seen, "tensor map b was never seen encoded"},
	{NULL, NULL, a_dims, "tensor map a has dims {2048, 1000}, expected {2048, 1030}"},
	{NULL, NULL, a_padded, "tensor map a has a row stride of 4224 bytes, expected 4096"},
	{NULL, NULL, b_uint8, "tensor map b is 2-D of data type 0, expected 2-D of 9"},
	{NULL, NULL, null_layout, "grouped_layout is NULL"},
	{"(cute::UMMA::Major)0, (cute::UMMA::Major)0, 0u, 0u, 0u, 8u, 256u, 128u, 64u, 128u, "
	 "128u, 128u, 5u, 128u, 256u, 1u, true, 132u, (deep_gemm::GemmType)5, false, "
	 "cutlass::bfloat16_t", NULL, nothing,
	 "with BLOCK_M 256: its groups start at multiples of 256 rows"},
};

START_TEST(each_refusal)
{
	char good[2048], targs[1024];
	bf16_name(good, sizeof good, 0, 8, 1, "false", "cutlass::bfloat16_t");
	const char *lt = strchr(good, '<'), *gt = strstr(good, ">(");
	snprintf(targs, sizeof targs, "%.*s", (int)(gt - lt - 1), lt + 1);
	snprintf(name, sizeof name, "%.*s%s>%s", (int)(lt + 1 - good), good,
		 refusals[_i].template_args ? refusals[_i].template_args : targs,
		 refusals[_i].params ? refusals[_i].params : gt + 1);
	make_launch(0, 0, 0, 1030, 1536, 2048, 8);
	refusals[_i].change();
	ck_assert_int_eq(decode(), -1);
	ck_assert_msg(strstr(why, refusals[_i].reason), "reason '%s', expected '%s'", why,
		      refusals[_i].reason);
}
END_TEST

/* fp8: the scale map must be DeepGEMM's MN-major, TMA-aligned one. */
START_TEST(fp8_scale_map_refused)
{
	fp8_name(name, sizeof name, 8, 1);
	make_launch(1, 0, 0, 1030, 1536, 2048, 8);
	L.map[3].dims[0] = 1030;
	ck_assert_int_eq(decode(), -1);
	ck_assert_str_eq(why, "tensor map sfa has dims {1030, 16}, expected {1032, 16}");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("decode");
	TCase *t = tcase_create("decode");
	tcase_add_loop_test(t, every_variant, 0, sizeof variants / sizeof variants[0]);
	tcase_add_test(t, other_kernels_are_not_gemms);
	tcase_add_loop_test(t, each_refusal, 0, sizeof refusals / sizeof refusals[0]);
	tcase_add_test(t, fp8_scale_map_refused);
	suite_add_tcase(s, t);
	return run_suite(s);
}
