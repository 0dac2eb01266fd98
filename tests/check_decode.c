/* The DeepGEMM decode (shim/redirect/decode.c), linked in directly: names exactly as
 * c++filt prints DeepGEMM's sm90 instantiations, parameters and tensor-map
 * encodes as DeepGEMM makes them (DESIGN.md), for every recognized variant
 * and each reason a launch is refused. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "../shim/redirect/decode.h"
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

/* As make_tma_2d_desc encodes it: element strides 1, no interleave, L2
 * promotion 256B, no OOB fill. */
static struct cg_tmap map2(int dtype, uintptr_t addr, uint64_t d0, uint64_t d1, uint64_t stride,
			   uint32_t box0, uint32_t box1, int swizzle)
{
	return (struct cg_tmap){.addr = addr, .dtype = dtype, .rank = 2, .dims = {d0, d1},
				.box = {box0, box1}, .strides = {stride}, .tiled = 1,
				.elem_strides = {1, 1}, .swizzle = swizzle,
				.interleave = CU_TENSOR_MAP_INTERLEAVE_NONE,
				.l2promo = CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
				.oobfill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE};
}

enum { SW128 = CU_TENSOR_MAP_SWIZZLE_128B, SWNONE = CU_TENSOR_MAP_SWIZZLE_NONE };

/* DESIGN.md's encodes for m rows (max_m when masked), n, k, g groups, with
 * the boxes and swizzles of the names above (BLOCK_M = BLOCK_N = 128, BLOCK_K
 * 128 / element size, 128-byte swizzles). */
static void make_launch(int fp8, int nn, int masked, uint32_t m, uint32_t n, uint32_t k,
			unsigned g)
{
	memset(&L, 0, sizeof L);
	const uint64_t gm = masked ? g : 1, esz = fp8 ? 1 : 2;
	const uint32_t row = (uint32_t)(128 / esz); /* a 128-byte swizzle's box row */
	const int elem = fp8 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
	L.m = m, L.n = n, L.k = k;
	L.map[0] = map2(elem, A, k, m * gm, k * esz, row, 128, SW128);
	L.map[1] = nn ? map2(elem, B, n, (uint64_t)k * g, n * esz, row, row, SW128)
		      : map2(elem, B, k, (uint64_t)n * g, k * esz, row, 128, SW128);
	L.map[2] = map2(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, D, n, m * gm, n * 2, 64, 128, SW128);
	const uint64_t m4 = (m + 3) / 4 * 4;
	L.map[3] = map2(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, SFA, m4, (k + 127) / 128 * gm, m4 * 4,
			128, 1, SWNONE);
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
static void a_unswizzled(void) { L.map[0].swizzle = CU_TENSOR_MAP_SWIZZLE_NONE; }
static void a_elem_strides(void) { L.map[0].elem_strides[0] = 2; }
static void a_box(void) { L.map[0].box[0] = L.map[0].box[1] = 8; }
static void d_nan_fill(void) { L.map[2].oobfill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA; }
static void b_interleaved(void) { L.map[1].interleave = CU_TENSOR_MAP_INTERLEAVE_16B; }
static void b_l2(void) { L.map[1].l2promo = CU_TENSOR_MAP_L2_PROMOTION_NONE; }
static void b_im2col(void) { L.map[1].tiled = 0; }
static void d_box(void) { L.map[2].box[0] = 128; }

/* bf16 template arguments with the majors, compiled shapes, BLOCK_M,
 * kSwizzleAMode, kNumMathThreads and GemmType given. */
#define CONFIG(majors, shapes, bm, swa, math, type)                                      \
	majors ", " shapes ", 8u, " bm ", 128u, 64u, " swa ", 128u, 128u, 5u, 128u, " math \
	", 1u, true, 132u, (deep_gemm::GemmType)" type ", false, cutlass::bfloat16_t"
#define K_K "(cute::UMMA::Major)0, (cute::UMMA::Major)0"

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
	{NULL, NULL, b_uint8, "tensor map b is 2-D of data type 0, expected 2-D tiled of 9"},
	{NULL, NULL, null_layout, "grouped_layout is NULL"},
	/* issue 66, 1: DeepGEMM takes each BLOCK_M-row block's group from its
	 * first row; the bundled kernels do it per 128 or 64 rows
	 * (block_m_64), no finer */
	{CONFIG(K_K, "0u, 0u, 0u", "32u", "128u", "128u", "5"), NULL, nothing,
	 "with BLOCK_M 32: DeepGEMM's groups are 32-row blocks"},
	{CONFIG(K_K, "0u, 0u, 0u", "32u", "128u", "128u", "1"), NULL, nothing,
	 "GemmType::MGroupedContiguous with BLOCK_M 32: DeepGEMM's groups are 32-row blocks"},
	/* 2: a compiled-in shape replaces the scalar inside the kernel */
	{CONFIG(K_K, "0u, 0u, 1024u", "128u", "128u", "256u", "1"), NULL, nothing,
	 "SHAPE_K is compiled in as 1024 but the launch passes 2048"},
	{CONFIG(K_K, "0u, 64u, 0u", "128u", "128u", "256u", "1"), NULL, nothing,
	 "SHAPE_N is compiled in as 64 but the launch passes 1536"},
	/* 3: only K (0) and MN (1) are majors */
	{CONFIG("(cute::UMMA::Major)0, (cute::UMMA::Major)2", "0u, 0u, 0u", "128u", "128u",
		"256u", "1"), NULL, nothing,
	 "template argument 1 is (cute::UMMA::Major)2, not a cute::UMMA::Major"},
	{CONFIG("(cute::UMMA::Major)-1, (cute::UMMA::Major)0", "0u, 0u, 0u", "128u", "128u",
		"256u", "1"), NULL, nothing,
	 "template argument 0 is (cute::UMMA::Major)-1, not a cute::UMMA::Major"},
	/* 4: names DeepGEMM's host code does not make */
	{CONFIG(K_K, "0u, 0u, 0u", "128u", "64u", "256u", "1"), NULL, nothing,
	 "kSwizzleAMode is 64, where DeepGEMM's host code makes 128"},
	{CONFIG(K_K, "0u, 0u, 0u", "128u", "128u", "128u", "1"), NULL, nothing,
	 "kNumMathThreads is 128, where DeepGEMM's host code makes 256"},
};

/* Issue 66, 1: set_mk_alignment_for_contiguous_layout(64) gives BLOCK_M 64;
 * the contiguous and psum forms then run with CG_GMM_BLOCKS_64 (64-row
 * blocks), masked ones as ever. */
START_TEST(block_m_64)
{
	static const struct {
		const char *type;
		int layout, masked;
		unsigned flags;
	} forms[] = {{"1", CG_LAYOUT_CONTIGUOUS, 0, CG_GMM_BLOCKS_64},
		     {"5", CG_LAYOUT_PSUM, 0, CG_GMM_BLOCKS_64},
		     {"2", CG_LAYOUT_MASKED, 1, 0}};
	for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
		snprintf(name, sizeof name,
			 "void deep_gemm::sm90_bf16_gemm_impl<" CONFIG(K_K, "0u, 0u, 0u", "64u", "128u",
								     "128u", "%s") ">(int*, unsigned "
			 "int, unsigned int, unsigned int, CUtensorMap_st, CUtensorMap_st, "
			 "CUtensorMap_st)",
			 forms[i].type);
		make_launch(0, 0, forms[i].masked, 1030, 1536, 2048, 8);
		L.map[0].box[1] = L.map[2].box[1] = 64;
		ck_assert_msg(decode() == 1, "GemmType %s: %s", forms[i].type, why);
		ck_assert_int_eq(out.layout, forms[i].layout);
		ck_assert_int_eq(out.block_m, 64);
		ck_assert_uint_eq(out.p.flags, forms[i].flags);
	}
}
END_TEST

static void assert_refused(const char *reason)
{
	ck_assert_int_eq(decode(), -1);
	ck_assert_msg(strstr(why, reason), "reason '%s', expected '%s'", why, reason);
}

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
	assert_refused(refusals[_i].reason);
}
END_TEST

/* Issue 66, 4: the maps must be what DeepGEMM's host code encodes for the
 * name; a change to a good bf16 contiguous launch and the reason. */
static const struct {
	void (*change)(void);
	const char *reason;
} map_refusals[] = {
	{a_unswizzled, "tensor map a has swizzle 0, element strides {1, 1}"},
	{a_elem_strides, "tensor map a has swizzle 3, element strides {2, 1}"},
	{a_box, "tensor map a has a box of {8, 8}, expected {64, 128}"},
	{d_nan_fill, "tensor map d has swizzle 3, element strides {1, 1}, "
	 "interleave 0, L2 promotion 3, OOB fill 1"},
	{b_interleaved, "interleave 1"},
	{b_l2, "L2 promotion 0"},
	{b_im2col, "tensor map b is 2-D im2col"},
	{d_box, "tensor map d has a box of {128, 128}, expected {64, 128}"},
};

START_TEST(each_map_refusal)
{
	bf16_name(name, sizeof name, 0, 8, 1, "false", "cutlass::bfloat16_t");
	make_launch(0, 0, 0, 1030, 1536, 2048, 8);
	map_refusals[_i].change();
	assert_refused(map_refusals[_i].reason);
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

/* 3: the fp8 epilogue is DeepGEMM's identity or nothing; sfb's major too. */
START_TEST(fp8_epilogue_and_majors)
{
	fp8_name(name, sizeof name, 8, 1);
	make_launch(1, 0, 0, 1030, 1536, 2048, 8);
	char good[2048];
	snprintf(good, sizeof good, "%s", name);
	const char *e = strstr(good, "deep_gemm::EpilogueIdentity");
	snprintf(name, sizeof name, "%.*sdeep_gemm::epilogue::transform::EpilogueIdentity%s",
		 (int)(e - good), good, e + strlen("deep_gemm::EpilogueIdentity"));
	ck_assert_msg(decode() == 1, "%s", why);
	snprintf(name, sizeof name,
		 "%.*sdeep_gemm::epilogue::transform::EpilogueHeadSplits<128u, 64u, 128u>%s",
		 (int)(e - good), good, e + strlen("deep_gemm::EpilogueIdentity"));
	ck_assert_int_eq(decode(), -1);
	ck_assert_msg(strstr(why, "epilogue deep_gemm::epilogue::transform::EpilogueHeadSplits"
			     "<128u, 64u, 128u>; the bundled kernels write"), "%s", why);
	snprintf(name, sizeof name, "%.*s(cute::UMMA::Major)3%s", (int)(strchr(good, '<') + 1 - good),
		 good, strchr(good, '<') + 1 + strlen("(cute::UMMA::Major)0"));
	ck_assert_int_eq(decode(), -1);
	ck_assert_msg(strstr(why, "template argument 0 is (cute::UMMA::Major)3"), "%s", why);
}
END_TEST

/* An m-grouped contiguous bf16 kernel with compiled-in SHAPE_M, N, K (0:
 * runtime), its multicast (on A or B) and the SM count it was built for. */
static void contiguous_name(const char *shape, unsigned mcast, const char *on_a, unsigned sms)
{
	snprintf(name, sizeof name,
		 "void deep_gemm::sm90_bf16_gemm_impl<(cute::UMMA::Major)0, (cute::UMMA::Major)0, "
		 "%s, 8u, 128u, 128u, 64u, 128u, 128u, 128u, 5u, 128u, 256u, %uu, %s, %uu, "
		 "(deep_gemm::GemmType)1, false, cutlass::bfloat16_t>(int*, unsigned int, unsigned "
		 "int, unsigned int, CUtensorMap_st, CUtensorMap_st, CUtensorMap_st)",
		 shape, mcast, on_a, sms);
}

/* 2: a compiled-in shape equal to the scalar changes nothing. */
START_TEST(compiled_shape_equal_to_the_scalar)
{
	contiguous_name("0u, 1536u, 2048u", 1, "false", 132);
	make_launch(0, 0, 0, 1030, 1536, 2048, 8);
	ck_assert_msg(decode() == 1, "%s", why);
	ck_assert_int_eq(out.p.k, 2048);
}
END_TEST

/* 4: the launch configuration DeepGEMM's host code gives the kernel:
 * grid kNumSMs, 128 TMA + math threads, its pipeline's shared memory
 * (bf16 128 x 128 x 64, 5 stages: a 32 KiB D tile, 256 bytes of barriers,
 * 32 KiB a stage), a cluster of kNumTMAMulticast. */
START_TEST(launch_configuration)
{
	bf16_name(name, sizeof name, 0, 8, 1, "false", "cutlass::bfloat16_t");
	make_launch(0, 0, 0, 1030, 1536, 2048, 8);
	ck_assert_msg(decode() == 1, "%s", why);
	ck_assert_uint_eq(out.launch.smem, 32768 + 256 + 5 * 32768);
	CUlaunchAttribute attr[2] = {
		{.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, .value.clusterDim = {1, 1, 1}},
		{.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
		 .value.programmaticStreamSerializationAllowed = 1}};
	const CUlaunchConfig good = {.gridDimX = 132, .gridDimY = 1, .gridDimZ = 1,
				     .blockDimX = 384, .blockDimY = 1, .blockDimZ = 1,
				     .sharedMemBytes = 196864, .attrs = attr, .numAttrs = 2};
	ck_assert_msg(cg_decode_check_launch(&out, &good, why, sizeof why) == 1, "%s", why);
	CUlaunchConfig c = good;
	c.numAttrs = 0; /* cuLaunchKernel's: no cluster of 1 is a cluster of 1 */
	ck_assert_msg(cg_decode_check_launch(&out, &c, why, sizeof why) == 1, "%s", why);
	static const struct {
		int field;
		unsigned value;
		const char *reason;
	} bad[] = {
		{0, 66, "launched with grid {66, 1, 1} and block {384, 1, 1}; DeepGEMM launches "
			"this kernel with grid {132, 1, 1}"},
		{1, 256, "block {256, 1, 1}"},
		{2, 100000, "launched with 100000 bytes of dynamic shared memory; DeepGEMM gives "
			    "this kernel 196864"},
		{3, 2, "cluster dimension 2; the kernel multicasts over clusters of 1"},
		{4, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, "a cooperative launch"},
		{4, CU_LAUNCH_ATTRIBUTE_PRIORITY, "launch attribute 8, which DeepGEMM never sets"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		CUlaunchAttribute a[2] = {attr[0], attr[1]};
		c = good;
		c.attrs = a;
		switch (bad[i].field) {
		case 0: c.gridDimX = bad[i].value; break;
		case 1: c.blockDimX = bad[i].value; break;
		case 2: c.sharedMemBytes = bad[i].value; break;
		case 3: a[0].value.clusterDim.x = bad[i].value; break;
		default:
			a[1].id = (CUlaunchAttributeID)bad[i].value;
			a[1].value.cooperative = 1;
		}
		ck_assert_int_eq(cg_decode_check_launch(&out, &c, why, sizeof why), -1);
		ck_assert_msg(strstr(why, bad[i].reason), "reason '%s', expected '%s'", why,
			      bad[i].reason);
	}
	/* A kernel built for 131 SMs in clusters of 2 (DeepGEMM's host code
	 * never builds one): its grid is no whole number of clusters, which the
	 * driver refuses, so the redirect must not run it either. */
	contiguous_name("0u, 0u, 0u", 2, "true", 131);
	make_launch(0, 0, 0, 1030, 1536, 2048, 8);
	ck_assert_msg(decode() == 1, "%s", why);
	CUlaunchAttribute two = {.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
				 .value.clusterDim = {2, 1, 1}};
	c = good;
	c.gridDimX = 131;
	c.attrs = &two;
	c.numAttrs = 1;
	ck_assert_int_eq(cg_decode_check_launch(&out, &c, why, sizeof why), -1);
	ck_assert_msg(strstr(why, "a grid of 131 blocks in clusters of 2, no whole number of "
			      "clusters"), "%s", why);
	/* fp8 adds a stage's sfa (512 bytes) and sfb for K's 16 blocks (64). */
	fp8_name(name, sizeof name, 8, 1);
	make_launch(1, 0, 0, 1030, 1536, 2048, 8);
	ck_assert_msg(decode() == 1, "%s", why);
	ck_assert_uint_eq(out.launch.smem, 32768 + 256 + 64 + 5 * (16384 + 16384 + 512));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("decode");
	TCase *t = tcase_create("decode");
	tcase_add_loop_test(t, every_variant, 0, sizeof variants / sizeof variants[0]);
	tcase_add_test(t, other_kernels_are_not_gemms);
	tcase_add_test(t, block_m_64);
	tcase_add_loop_test(t, each_refusal, 0, sizeof refusals / sizeof refusals[0]);
	tcase_add_loop_test(t, each_map_refusal, 0, sizeof map_refusals / sizeof map_refusals[0]);
	tcase_add_test(t, fp8_scale_map_refused);
	tcase_add_test(t, fp8_epilogue_and_majors);
	tcase_add_test(t, compiled_shape_equal_to_the_scalar);
	tcase_add_test(t, launch_configuration);
	suite_add_tcase(s, t);
	return run_suite(s);
}
