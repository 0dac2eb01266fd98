/* The differential test (differ.h): generation, rendering as the decoder
 * sees a launch, and the comparison of the two models. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../../kernels/gmm_kernels.h"
#include "../../shim/redirect/decode.h"
#include "../../shim/redirect/redirect.h"
#include "bundled.h"
#include "differ.h"

enum { SMEM_CAPACITY = 232448 };
static const uintptr_t A = 0x10000000, B = 0x20000000, D = 0x30000000, SFA = 0x40000000,
		       SFB = 0x50000000, LAYOUT = 0x60000000;

static unsigned pick(struct cg_choices *c, unsigned options)
{
	return c->at < c->n ? c->p[c->at++] % options : 0;
}

static uint64_t up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

static long swizzle_mode(long bytes)
{
	for (long mode = 128; mode >= 16; mode /= 2)
		if (bytes % mode == 0)
			return mode;
	return 0;
}

static int swizzle_enum(long mode)
{
	return mode == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
	       : mode == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
	       : mode == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
			    : CU_TENSOR_MAP_SWIZZLE_NONE;
}

/* make_tma_2d_desc (runtime_utils.hpp): box inner swizzle / elem when swizzled */
static struct cg_tmap encode(int dtype, uintptr_t addr, uint64_t inner, uint64_t outer,
			     uint64_t stride, uint64_t esz, long box_inner, long box_outer, long sw)
{
	return (struct cg_tmap){.addr = addr,
				.dtype = dtype,
				.rank = 2,
				.dims = {inner, outer},
				.strides = {stride},
				.box = {(uint32_t)(sw ? (uint64_t)sw / esz : (uint64_t)box_inner),
					(uint32_t)box_outer},
				.tiled = 1,
				.elem_strides = {1, 1},
				.swizzle = swizzle_enum(sw),
				.interleave = CU_TENSOR_MAP_INTERLEAVE_NONE,
				.l2promo = CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
				.oobfill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE};
}

/* grouped_layout's contents, in DeepGEMM's contract: contiguous, each
 * group's rows one run padded with -1 to the alignment (BLOCK_M); psum,
 * ends with each group starting at the previous end aligned; masked, at
 * most max_m rows a group. */
static const uint32_t sizes[] = {64, 192, 320, 448, 0, 1, 37, 100, 128, 200, 256, 300};
enum { NSIZES = sizeof sizes / sizeof sizes[0] };

static void gen_layout(struct cg_choices *c, struct dg_launch *l)
{
	const uint32_t align = (uint32_t)l->bm, g = (uint32_t)l->groups;
	static const uint32_t normal_m[] = {200, 128, 1, 64, 777, 1024};
	static const uint32_t max_m[] = {128, 256, 64, 192};
	uint32_t m = 0;
	l->nlayout = 0;
	switch (l->type) {
	case 0:
		l->m = normal_m[pick(c, 6)];
		return;
	case 1:
		for (uint32_t i = 0; i < g; i++) {
			const uint32_t rows = sizes[pick(c, NSIZES)];
			for (uint32_t r = 0; r < up(rows, align) && m < DG_MAX_ROWS; r++)
				l->layout[m++] = r < rows ? (int32_t)i : -1;
		}
		if (!m)
			for (; m < align; m++)
				l->layout[m] = -1;
		l->nlayout = m;
		l->m = m;
		return;
	case 2:
		l->m = max_m[pick(c, 4)];
		for (uint32_t i = 0; i < g; i++) {
			const uint32_t rows = sizes[pick(c, NSIZES)];
			l->layout[i] = (int32_t)(rows < l->m ? rows : l->m);
		}
		l->nlayout = g;
		return;
	default:
		for (uint32_t i = 0; i < g; i++) {
			m = (uint32_t)up(m, align) + sizes[pick(c, NSIZES)];
			l->layout[i] = (int32_t)m;
		}
		l->nlayout = g;
		l->m = pick(c, 2) ? (uint32_t)up(m, align) : m ? m : 1;
	}
}

/* The stage count and launch DeepGEMM's heuristics give the arguments. */
static void gen_launch_config(struct dg_launch *l)
{
	const long keep = l->stages;
	l->stages = 0;
	const uint64_t extra = dg_smem(l);
	l->stages = 1;
	const uint64_t stage = dg_smem(l) - extra;
	l->stages =
		keep ? keep
		     : (long)((SMEM_CAPACITY - extra) / stage < 16 ? (SMEM_CAPACITY - extra) / stage
								   : 16);
	CUlaunchConfig *cfg = &l->cfg;
	*cfg = (CUlaunchConfig){.gridDimX = (unsigned)l->sms,
				.gridDimY = 1,
				.gridDimZ = 1,
				.blockDimX = (unsigned)(l->tma + l->math),
				.blockDimY = 1,
				.blockDimZ = 1,
				.sharedMemBytes = (unsigned)dg_smem(l),
				.attrs = l->attrs};
	if (l->mcast > 1)
		l->attrs[cfg->numAttrs++] =
			(CUlaunchAttribute){.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
					    .value.clusterDim = {(unsigned)l->mcast, 1, 1}};
	l->attrs[cfg->numAttrs++] =
		(CUlaunchAttribute){.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
				    .value.programmaticStreamSerializationAllowed = 1};
}

static void gen_maps(struct dg_launch *l)
{
	const uint64_t esz = l->fp8 ? 1 : 2, m = l->m, n = l->n, k = l->k, g = (uint64_t)l->groups;
	const uint64_t gm = l->type == 2 ? g : 1, m4 = up(m, 4);
	const int elem = l->fp8 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
	const int b_mn = !l->fp8 && l->major_b;
	l->map[0] = encode(elem, A, k, m * gm, k * esz, esz, l->bk, l->bm, l->swa);
	l->map[1] = b_mn ? encode(elem, B, n, k * g, n * esz, esz, l->bn, l->bk, l->swb)
			 : encode(elem, B, k, n * g, k * esz, esz, l->bk, l->bn, l->swb);
	l->map[2] = encode(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, D, n, m * gm, n * 2, 2, l->bn, l->bm,
			   l->swd);
	l->map[3] = encode(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, SFA, m4, (k + 127) / 128 * gm, m4 * 4,
			   4, l->bm, 1, 0);
	for (int i = 0; i < 4; i++)
		l->seen[i] = 1;
}

/* What DeepGEMM's host code makes (impls/sm90_*.hpp, heuristics/sm90.hpp). */
void cg_gen_deepgemm(struct cg_choices *c, struct dg_launch *l)
{
	static const long types[] = {1, 5, 2, 0}, groups[] = {4, 2, 8, 1}, bms[] = {128, 64, 256};
	static const uint32_t ns[] = {128, 256, 64, 192, 512, 96, 1024, 320};
	static const uint32_t ks[] = {128, 256, 512, 64, 192, 1024, 384, 640};
	static const long sms[] = {132, 78, 114};
	memset(l, 0, sizeof *l);
	l->fp8 = (int)pick(c, 2);
	l->type = types[pick(c, 4)];
	const unsigned nn = pick(c, 2);
	l->major_b = !l->fp8 && nn && (l->type == 0 || l->type == 1);
	l->groups = l->type == 0 ? 1 : groups[pick(c, 4)];
	l->bm = bms[pick(c, 3) % (l->type == 2 ? 2 : 3)];
	const long esz = l->fp8 ? 1 : 2;
	l->bk = 128 / esz;
	l->bn = 16 * (1 + (long)pick(c, 16));
	const int unroll = l->bn > l->bk && l->bn % (l->bn - l->bk) && l->bk % (l->bn - l->bk);
	if ((l->fp8 && (l->bn > 192 || unroll)) || (l->bm > 128 && l->bn > 128) ||
	    (l->major_b && swizzle_mode(l->bn * 2) % 64))
		l->bn = 128;
	l->swa = swizzle_mode(l->bk * esz);
	l->swb = swizzle_mode((l->major_b ? l->bn : l->bk) * esz);
	l->swd = swizzle_mode(l->bn * 2);
	l->n = ns[pick(c, 8)];
	l->k = ks[pick(c, 8)];
	l->mcast = 1 + (long)pick(c, 2);
	if ((l->type == 2 || l->type == 5) && (l->n + l->bn - 1) / l->bn % 2)
		l->mcast = 1;
	l->mcast_on_a = l->mcast > 1 && pick(c, 2);
	l->sms = sms[pick(c, 3)];
	l->tma = 128;
	l->math = l->bm <= 64 ? 128 : 256;
	l->cd = "cutlass::bfloat16_t";
	l->epilogue = "deep_gemm::epilogue::transform::EpilogueIdentity";
	l->sfb = SFB;
	l->layout_ptr = l->type ? LAYOUT : 0;
	const unsigned compiled = pick(c, 4); /* compiled_dims: "", "nk", "mnk", "k" */
	gen_layout(c, l);
	l->shape[0] = compiled == 2 ? l->m : 0;
	l->shape[1] = compiled == 1 || compiled == 2 ? l->n : 0;
	l->shape[2] = compiled ? l->k : 0;
	gen_maps(l);
	gen_launch_config(l);
}

/* A value for a perturbed field: one of options, by v. */
#define ONE_OF(v, ...) \
	((const long[]){__VA_ARGS__}[(v) % (sizeof((const long[]){__VA_ARGS__}) / sizeof(long))])

enum { P_MAPS = 24, MAP_KINDS = 14, P_CONFIG = P_MAPS + MAP_KINDS, P_FIELDS = P_CONFIG + 7 };

static void perturb_map(struct cg_tmap *t, int *seen, unsigned kind, unsigned v)
{
	switch (kind) {
	case 0:
		t->dtype = (int)ONE_OF(
			v, CU_TENSOR_MAP_DATA_TYPE_UINT8, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
			CU_TENSOR_MAP_DATA_TYPE_FLOAT32, CU_TENSOR_MAP_DATA_TYPE_FLOAT16);
		break;
	case 1:
		t->dims[0] += (uint64_t)ONE_OF(v, 1, 64, -1);
		break;
	case 2:
		t->dims[1] += (uint64_t)ONE_OF(v, 1, 128, -1);
		break;
	case 3:
		t->strides[0] += (uint64_t)ONE_OF(v, 16, 128, -16);
		break;
	case 4:
		t->box[0] = (uint32_t)ONE_OF(v, 8, t->box[0] * 2, t->box[0] / 2);
		break;
	case 5:
		t->box[1] = (uint32_t)ONE_OF(v, 8, t->box[1] * 2, t->box[1] / 2);
		break;
	case 6:
		t->swizzle = (int)ONE_OF(v, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_SWIZZLE_32B,
					 CU_TENSOR_MAP_SWIZZLE_64B, CU_TENSOR_MAP_SWIZZLE_128B);
		break;
	case 7:
		t->elem_strides[v % 2] = 2;
		break;
	case 8:
		t->interleave = CU_TENSOR_MAP_INTERLEAVE_16B;
		break;
	case 9:
		t->l2promo = (int)ONE_OF(v, CU_TENSOR_MAP_L2_PROMOTION_NONE,
					 CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
		break;
	case 10:
		t->oobfill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA;
		break;
	case 11:
		t->tiled = 0;
		break;
	case 12:
		t->rank = 3;
		break;
	default:
		*seen = 0;
	}
}

static void perturb_config(struct dg_launch *l, unsigned field, unsigned v)
{
	CUlaunchConfig *c = &l->cfg;
	switch (field) {
	case 0:
		c->gridDimX = (unsigned)ONE_OF(v, 66, l->sms * 2, l->sms - 1);
		break;
	case 1:
		c->blockDimX += (unsigned)ONE_OF(v, 128, -128);
		break;
	case 2:
		c->sharedMemBytes += (unsigned)ONE_OF(v, -1024, 1024, -(long)c->sharedMemBytes);
		break;
	case 3:
		if (c->numAttrs == 2 && v % 2) /* the cluster dropped */
			l->attrs[0] = l->attrs[--c->numAttrs];
		else
			l->attrs[c->numAttrs++] = (CUlaunchAttribute){
				.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
				.value.clusterDim = {(unsigned)ONE_OF(v / 2, 2, 1, 4),
						     v % 4 == 2 ? 2 : 1, 1}};
		break;
	case 4:
		l->attrs[c->numAttrs] = (CUlaunchAttribute){
			.id = (CUlaunchAttributeID)ONE_OF(v, CU_LAUNCH_ATTRIBUTE_COOPERATIVE,
							  CU_LAUNCH_ATTRIBUTE_COOPERATIVE,
							  CU_LAUNCH_ATTRIBUTE_PRIORITY)};
		l->attrs[c->numAttrs++].value.cooperative = (int)(v % 2);
		break;
	case 5:
		l->layout_ptr = 0;
		break;
	default:
		l->with_extra = 1;
	}
}

/* One field of the launch changed: a template argument, a scalar, an
 * attribute of a map, the launch configuration, a parameter. */
static void perturb(struct dg_launch *l, unsigned field, unsigned v)
{
	static const char *const cds[] = {"float", "__nv_bfloat16", "cutlass::float_e4m3_t"};
	static const char *const epilogues[] = {
		"deep_gemm::epilogue::transform::EpilogueHeadSplits<128u, 64u, 128u>",
		"deep_gemm::EpilogueIdentity", "my::Epilogue"};
	const long shape_value = (long)(field == 3 ? l->m : field == 4 ? l->n : l->k);
	if (field >= P_CONFIG) {
		perturb_config(l, field - P_CONFIG, v);
		return;
	}
	if (field >= P_MAPS) {
		const unsigned i = v % (l->fp8 ? 4 : 3);
		perturb_map(&l->map[i], &l->seen[i], field - P_MAPS, v / 4);
		return;
	}
	switch (field) {
	case 0:
		l->major_a = ONE_OF(v, 1, 2, -1);
		break;
	case 1:
		l->major_b = ONE_OF(v, 2, -1, 1, 0);
		break;
	case 2:
		l->major_sfb = ONE_OF(v, 1, 2);
		break;
	case 3:
	case 4:
	case 5:
		l->shape[field - 3] =
			ONE_OF(v, shape_value / 2, shape_value + 64, 64, 0, shape_value);
		break;
	case 6:
		l->groups += 1 + v % 3;
		break;
	case 7:
		l->bm = ONE_OF(v, 64, 128, 256, 32);
		break;
	case 8:
		l->bn = ONE_OF(v, 64, 128, 256, 96);
		break;
	case 9:
		l->bk = ONE_OF(v, 64, 128, 32);
		break;
	case 10:
		l->swa = ONE_OF(v, 0, 32, 64, 128);
		break;
	case 11:
		l->swb = ONE_OF(v, 0, 32, 64, 128);
		break;
	case 12:
		l->swd = ONE_OF(v, 0, 32, 64, 128);
		break;
	case 13:
		l->stages += v % 2 ? 1 : -1;
		break;
	case 14:
		l->tma = ONE_OF(v, 256, 64);
		break;
	case 15:
		l->math = ONE_OF(v, 128, 256, 384);
		break;
	case 16:
		l->mcast = ONE_OF(v, 1, 2);
		break;
	case 17:
		l->sms = ONE_OF(v, 66, 264, 131, 132);
		break;
	case 18:
		l->type = ONE_OF(v, 3, 4, 0, 1, 2, 5, 6);
		break;
	case 19:
		l->accumulate = 1;
		break;
	case 20:
		l->cd = cds[v % 3];
		break;
	case 21:
		l->epilogue = epilogues[v % 3];
		break;
	case 22:
		l->m += (uint32_t)ONE_OF(v, 1, -1, 64);
		break;
	case 23:
		l->k += (uint32_t)ONE_OF(v, 64, -64, 1);
		break;
	}
}

/* grouped_layout's contents for a kernel whose GemmType or group count was
 * perturbed: the caller's tensor is what that kernel reads (m rows, or a
 * value per group), in its contract, for the m of the launch. */
static void refit_layout(struct cg_choices *c, struct dg_launch *l)
{
	const uint32_t g = (uint32_t)l->groups, m = l->m < DG_MAX_ROWS ? l->m : DG_MAX_ROWS;
	const uint32_t align = l->bm > 0 ? (uint32_t)l->bm : 128;
	uint32_t r = 0, end = 0;
	l->nlayout = l->type == 1 ? m : g;
	for (uint32_t i = 0; i < g && i < DG_MAX_ROWS; i++) {
		const uint32_t rows = sizes[pick(c, NSIZES)];
		if (l->type == 1)
			for (uint32_t j = 0; j < up(rows, align) && r < m; j++)
				l->layout[r++] = j < rows ? (int32_t)i : -1;
		else if (l->type == 2)
			l->layout[i] = (int32_t)(rows < m ? rows : m);
		else {
			end = (uint32_t)up(end, align) + rows;
			l->layout[i] = (int32_t)(end = end < m ? end : m);
		}
	}
	for (; l->type == 1 && r < m; r++)
		l->layout[r] = -1;
}

void cg_gen_launch(struct cg_choices *c, struct dg_launch *l)
{
	cg_gen_deepgemm(c, l);
	const long type = l->type, groups = l->groups;
	for (unsigned i = 0, n = pick(c, 3); i < n; i++) {
		const unsigned field = pick(c, P_FIELDS);
		perturb(l, field, pick(c, 256));
	}
	if (l->type != type || l->groups != groups)
		refit_layout(c, l);
}

/* ---- the launch as the decoder sees it ---- */

static struct {
	const struct dg_launch *l;
	unsigned char desc[4][128];
} seen_by;

static int lookup(const void *desc, struct cg_tmap *out)
{
	for (int i = 0; i < 4; i++)
		if (desc == seen_by.desc[i] && seen_by.l->seen[i]) {
			*out = seen_by.l->map[i];
			return 1;
		}
	return 0;
}

/* c++filt's rendering of the instantiation */
static void render(const struct dg_launch *l, char *name, size_t n)
{
	char mid[512];
	snprintf(mid, sizeof mid,
		 "%ldu, %ldu, %ldu, %ldu, %ldu, %ldu, %ldu, %ldu, %ldu, %ldu, %ldu, %ldu, %ldu, "
		 "%ldu, %s, %ldu, (deep_gemm::GemmType)%ld",
		 l->shape[0], l->shape[1], l->shape[2], l->groups, l->bm, l->bn, l->bk, l->swa,
		 l->swb, l->swd, l->stages, l->tma, l->math, l->mcast,
		 l->mcast_on_a ? "true" : "false", l->sms, l->type);
	if (l->fp8)
		snprintf(name, n,
			 "void deep_gemm::sm90_fp8_gemm_1d2d_impl<(cute::UMMA::Major)%ld, %s, %s, "
			 "%s>"
			 "(float*, int*, unsigned int, unsigned int, unsigned int, CUtensorMap_st, "
			 "CUtensorMap_st, CUtensorMap_st, CUtensorMap_st)",
			 l->major_sfb, mid, l->cd, l->epilogue);
	else
		snprintf(name, n,
			 "void deep_gemm::sm90_bf16_gemm_impl<(cute::UMMA::Major)%ld, "
			 "(cute::UMMA::Major)%ld, %s, %s, %s>(int*, unsigned int, unsigned int, "
			 "unsigned int, CUtensorMap_st, CUtensorMap_st, CUtensorMap_st)",
			 l->major_a, l->major_b, mid, l->accumulate ? "true" : "false", l->cd);
}

__attribute__((format(printf, 3, 4))) static int differs(char *why, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, n, fmt, ap);
	va_end(ap);
	return -1;
}

/* What the bundled kernels read and write, against the original's. */
static int same_problem(const struct dg_semantics *s, const struct cg_decoded *d, char *why,
			size_t n)
{
	const struct cg_gmm_problem *p = &d->p;
	const uint64_t esz = s->fp8 ? 1 : 2;
	const int fp8 = p->dtype == CG_GMM_FP8_E4M3, b_mn = p->b_layout == CG_GMM_B_KN;
	if (fp8 != s->fp8 || b_mn != s->b_mn || s->a_mn || s->sfb_mn || !s->identity)
		return differs(why, n,
			       "operand layouts: fp8 %d/%d, B MN-major %d/%d, A MN-major %d, "
			       "sfb MN-major %d, epilogue identity %d",
			       fp8, s->fp8, b_mn, s->b_mn, s->a_mn, s->sfb_mn, s->identity);
	if (p->a != s->a || p->b != s->b || p->d != s->d || s->a_stride != (uint64_t)p->k * esz ||
	    s->b_stride != (uint64_t)(b_mn ? p->n : p->k) * esz ||
	    s->d_stride != (uint64_t)p->n * 2)
		return differs(why, n, "operand addresses or row strides");
	if (fp8 && (p->sfa != s->sfa || p->sfb != s->sfb || p->sfa_stride_m != 1 ||
		    (uint64_t)p->sfa_stride_k != s->sfa_stride_k ||
		    (uint64_t)p->sfa_stride_g != s->sfa_stride_g))
		return differs(why, n, "fp8 scales: sfa stride k %lld/%llu, g %lld/%llu",
			       (long long)p->sfa_stride_k, (unsigned long long)s->sfa_stride_k,
			       (long long)p->sfa_stride_g, (unsigned long long)s->sfa_stride_g);
	if ((uint64_t)p->k != s->k_extent || (uint64_t)p->n != s->n_extent)
		return differs(why, n,
			       "the original sums %llu channels into %llu columns, the "
			       "bundled kernel %lld into %lld",
			       (unsigned long long)s->k_extent, (unsigned long long)s->n_extent,
			       (long long)p->k, (long long)p->n);
	const int masked = d->layout == CG_LAYOUT_MASKED;
	const uint64_t rows = masked ? (uint64_t)(p->m * p->g) : (uint64_t)p->m;
	if (rows != s->rows || (masked && (uint64_t)p->m != s->group_stride))
		return differs(why, n,
			       "D has %llu rows for the original, %llu for the bundled "
			       "kernel",
			       (unsigned long long)s->rows, (unsigned long long)rows);
	return 1;
}

/* Row by row, for every kernel shape grouped_mm.c may run it with. */
static int same_rows(const struct dg_launch *l, const struct dg_semantics *s,
		     const struct cg_decoded *d, char *why, size_t n)
{
	static const int forms[CG_NLAYOUTS] = {[CG_LAYOUT_NORMAL] = CG_GMM_FORM_CONTIGUOUS,
					       [CG_LAYOUT_CONTIGUOUS] = CG_GMM_FORM_CONTIGUOUS,
					       [CG_LAYOUT_PSUM] = CG_GMM_FORM_PSUM,
					       [CG_LAYOUT_MASKED] = CG_GMM_FORM_MASKED};
	static int32_t zeros[DG_MAX_ROWS];
	static int group[DG_MAX_ROWS];
	static uint64_t cols[DG_MAX_ROWS];
	const struct cg_gmm_problem *p = &d->p;
	const int form = forms[d->layout], masked = d->layout == CG_LAYOUT_MASKED;
	const int32_t *index = d->layout == CG_LAYOUT_NORMAL ? zeros : l->layout;
	const int m = (int)s->rows;
	const int flags = p->flags & CG_GMM_BLOCKS_64 ? CG_GMM_ARG_BLOCKS_64 : 0;
	for (unsigned i = 0; i < cg_cover_nshapes; i++) {
		const struct cg_cover_shape *sh = &cg_cover_shapes[i];
		/* the shapes grouped_mm.c may run the problem with (enqueue) */
		if ((sh->tail_tiles && form != CG_GMM_FORM_CONTIGUOUS) ||
		    !cg_gmm_tile_rows_fit(form, flags, sh->bm))
			continue;
		if (cg_cover(sh, form, flags, index, m, masked ? (int)p->m : 0, (int)p->n,
			     (int)p->g, group, cols) < 0)
			return differs(why, n, "the bundled model cannot walk %d x %d tiles",
				       sh->bm, sh->bn);
		const int bn = sh->tail_tiles ? sh->tail_bn : sh->bn;
		const int tiles = (int)((p->n + bn - 1) / bn);
		const uint64_t all = tiles >= 64 ? ~0ull : (1ull << tiles) - 1;
		for (int r = 0; r < m; r++) {
			const int st = s->state[r];
			if ((st == DG_UNTOUCHED && group[r] != -1) ||
			    (st == DG_GROUP && (group[r] != s->group[r] || (cols[r] & all) != all)))
				return differs(why, n,
					       "row %d: the original %s%d, the bundled %d x %d "
					       "kernel writes it %s%d (columns %#llx of %#llx)",
					       r,
					       st == DG_UNTOUCHED ? "leaves it (group "
								  : "writes group ",
					       s->group[r], sh->bm, sh->bn,
					       group[r] < 0 ? "not at all, group " : "with group ",
					       group[r], (unsigned long long)cols[r],
					       (unsigned long long)all);
		}
	}
	return 1;
}

int cg_differ(struct dg_launch *l, char *why, size_t n, char *refusal, size_t nr)
{
	static struct dg_semantics s;
	static char name[2048];
	dg_model(l, &s);
	render(l, name, sizeof name);
	seen_by.l = l;
	void *params[9], **p = params;
	if (l->fp8)
		*p++ = &l->sfb;
	*p++ = &l->layout_ptr;
	*p++ = &l->m;
	*p++ = &l->n;
	*p++ = &l->k;
	for (int i = 0; i < 3 + l->fp8; i++)
		*p++ = seen_by.desc[i];
	void *extra[] = {CU_LAUNCH_PARAM_END};
	/* What shim/redirect/plan.c decides, in its order: a launch the driver
	 * refuses, then the decode, then the launch configuration. */
	struct cg_decoded dec;
	memset(&dec, 0, sizeof dec);
	refusal[0] = 0;
	if (cg_redirect_malformed(params, l->with_extra ? extra : NULL) != CUDA_SUCCESS) {
		snprintf(refusal, nr, "refused as the driver refuses it");
		return 0;
	}
	if (cg_decode_gemm(name, params, lookup, &dec, refusal, nr) != 1 ||
	    cg_decode_check_launch(&dec, &l->cfg, refusal, nr) != 1)
		return 0;
	if (!s.defined)
		return differs(why, n, "redirected, but the original %s", s.why);
	if (same_problem(&s, &dec, why, n) < 0 || same_rows(l, &s, &dec, why, n) < 0)
		return -1;
	return 1;
}
