/* DeepGEMM's sm90 GEMMs decoded into bundled grouped_mm problems.  Each
 * kernel is JIT-compiled per configuration, so everything static (operand
 * majors, group count, GEMM type, accumulation, output type) is a template
 * argument of its demangled name (DESIGN.md lists their order); the runtime
 * parts are its scalars and the encodes of its tensor maps.  Anything that
 * does not match exactly is refused with the reason, never guessed. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"

enum { MAX_TARGS = 24, BF16_TARGS = 21, FP8_TARGS = 20 };

/* One ABI: where its template arguments and parameters sit.  From SHAPE_M
 * on both list the same run: SHAPE_M, SHAPE_N, SHAPE_K, kNumGroups,
 * BLOCK_M, BLOCK_N, BLOCK_K, kSwizzleAMode, kSwizzleBMode, kSwizzleDMode,
 * kNumStages, kNumTMAThreads, kNumMathThreads, kNumTMAMulticast,
 * kIsTMAMulticastOnA, kNumSMs, kGemmType (offsets T_* from shape). */
enum { T_SHAPE, T_GROUPS = 3, T_BM, T_BN, T_BK, T_SWA, T_SWB, T_SWD, T_STAGES, T_TMA, T_MATH,
       T_MCAST, T_MCAST_A, T_SMS, T_TYPE };
static const struct abi {
	const char *prefix;        /* after an optional "void " */
	const char *params;        /* the parameter list, as demangled */
	int fp8;
	int targs;                 /* template argument count */
	int major_a, major_b, major_sfb, shape, accumulate, cd, epilogue; /* indexes, -1: none */
	int p_sfb, p_layout, p_m, p_a;   /* parameter indexes; a, b, d(, sfa) follow p_a */
} abis[] = {
	{"deep_gemm::sm90_bf16_gemm_impl<",
	 "(int*, unsigned int, unsigned int, unsigned int, CUtensorMap_st, CUtensorMap_st, "
	 "CUtensorMap_st)",
	 0, BF16_TARGS, 0, 1, -1, 2, 19, 20, -1, -1, 0, 1, 4},
	{"deep_gemm::sm90_fp8_gemm_1d2d_impl<",
	 "(float*, int*, unsigned int, unsigned int, unsigned int, CUtensorMap_st, "
	 "CUtensorMap_st, CUtensorMap_st, CUtensorMap_st)",
	 1, FP8_TARGS, -1, -1, 0, 1, -1, 18, 19, 0, 1, 2, 5},
};

static const struct abi *abi_of(const char *name)
{
	if (!name)
		return NULL;
	if (strncmp(name, "void ", 5) == 0)
		name += 5;
	for (size_t i = 0; i < sizeof abis / sizeof abis[0]; i++)
		if (strncmp(name, abis[i].prefix, strlen(abis[i].prefix)) == 0)
			return &abis[i];
	return NULL;
}

int cg_decode_is_gemm(const char *demangled)
{
	return abi_of(demangled) != NULL;
}

__attribute__((format(printf, 3, 4))) static int refuse(char *why, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, n, fmt, ap);
	va_end(ap);
	return -1;
}

/* Splits the template argument list that starts after '<' at s into
 * [start, end) spans; returns the count and sets *rest after the closing
 * '>', or -1 when unbalanced. */
static int split_targs(const char *s, const char *arg[], size_t len[], const char **rest)
{
	int depth = 0, n = 0;
	const char *start = s;
	for (; *s; s++) {
		if (*s == '<' || *s == '(')
			depth++;
		else if ((*s == '>' || *s == ')') && depth > 0)
			depth--;
		else if ((*s == ',' || *s == '>') && depth == 0) {
			if (n == MAX_TARGS)
				return -1;
			while (*start == ' ')
				start++;
			arg[n] = start;
			len[n++] = (size_t)(s - start);
			start = s + 1;
			if (*s == '>') {
				*rest = s + 1;
				return n;
			}
		}
	}
	return -1;
}

/* A non-type argument as printed: "128u", "true", "(deep_gemm::GemmType)1". */
static int targ_value(const char *a, size_t len, long *v)
{
	char buf[64];
	if (len >= sizeof buf)
		return 0;
	memcpy(buf, a, len);
	buf[len] = 0;
	if (!strcmp(buf, "true") || !strcmp(buf, "false")) {
		*v = buf[0] == 't';
		return 1;
	}
	const char *p = buf;
	if (*p == '(') {
		p = strchr(p, ')');
		if (!p)
			return 0;
		p++;
	}
	char *end;
	*v = strtol(p, &end, 10);
	return end != p && strspn(end, "uUlL") == strlen(end);
}

static const char *const type_names[] = {
	"Normal", "MGroupedContiguous", "MGroupedMasked", "KGroupedContiguous", "Batched",
	"MGroupedContiguousWithPsumLayout", "KGroupedContiguousWithPsumLayout",
};

static int layout_of(long type)
{
	switch (type) {
	case 0: return CG_LAYOUT_NORMAL;
	case 1: return CG_LAYOUT_CONTIGUOUS;
	case 2: return CG_LAYOUT_MASKED;
	case 5: return CG_LAYOUT_PSUM;
	default: return -1;
	}
}

/* CUtensorMapDataType values the maps must carry. */
enum { TM_UINT8 = CU_TENSOR_MAP_DATA_TYPE_UINT8, TM_F32 = CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
       TM_BF16 = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 };

/* One 2-D map as DeepGEMM's make_tma_2d_desc encodes it: dims {inner,
 * outer}, a row stride of row_bytes (at least, for sfa, whose stride the
 * problem takes), box {inner, outer}, swizzle mode in bytes (16 means no
 * swizzle, with a 16-byte box row); element strides 1, no interleave, L2
 * promotion 256B, no OOB fill (zeros). */
struct want {
	const char *what;
	int dtype;
	uint64_t dims[2], row_bytes;
	int exact_stride;
	uint32_t box[2];
	int swizzle;
};

static int swizzle_enum(int mode)
{
	return mode == 32 ? CU_TENSOR_MAP_SWIZZLE_32B : mode == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
		 : mode == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE;
}

static int check_map(const struct cg_tmap *t, const struct want *w, char *why, size_t n)
{
	if (t->dtype != w->dtype || t->rank != 2 || !t->tiled)
		return refuse(why, n, "tensor map %s is %d-D%s of data type %d, expected 2-D tiled of %d",
			      w->what, t->rank, t->tiled ? "" : " im2col", t->dtype, w->dtype);
	if (t->dims[0] != w->dims[0] || t->dims[1] != w->dims[1])
		return refuse(why, n, "tensor map %s has dims {%llu, %llu}, expected {%llu, %llu}",
			      w->what, (unsigned long long)t->dims[0], (unsigned long long)t->dims[1],
			      (unsigned long long)w->dims[0], (unsigned long long)w->dims[1]);
	if (w->exact_stride ? t->strides[0] != w->row_bytes
			    : t->strides[0] < w->row_bytes || t->strides[0] % 16)
		return refuse(why, n, "tensor map %s has a row stride of %llu bytes, expected %llu",
			      w->what, (unsigned long long)t->strides[0],
			      (unsigned long long)w->row_bytes);
	if (t->box[0] != w->box[0] || t->box[1] != w->box[1])
		return refuse(why, n, "tensor map %s has a box of {%u, %u}, expected {%u, %u}",
			      w->what, t->box[0], t->box[1], w->box[0], w->box[1]);
	const int sw = swizzle_enum(w->swizzle);
	if (t->swizzle != sw || t->elem_strides[0] != 1 || t->elem_strides[1] != 1 ||
	    t->interleave != CU_TENSOR_MAP_INTERLEAVE_NONE ||
	    t->l2promo != CU_TENSOR_MAP_L2_PROMOTION_L2_256B ||
	    t->oobfill != CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
		return refuse(why, n, "tensor map %s has swizzle %d, element strides {%u, %u}, "
			      "interleave %d, L2 promotion %d, OOB fill %d; expected %d, {1, 1}, %d, "
			      "%d, %d", w->what, t->swizzle, t->elem_strides[0], t->elem_strides[1],
			      t->interleave, t->l2promo, t->oobfill, sw,
			      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
			      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
	return 1;
}

/* DeepGEMM's swizzle for a box row of `bytes`: the largest of 128, 64, 32,
 * 16 dividing it (heuristics/utils.hpp, get_swizzle_mode). */
static int swizzle_for(uint64_t bytes)
{
	for (int mode = 128; mode >= 16; mode /= 2)
		if (bytes % (uint64_t)mode == 0)
			return mode;
	return 0;
}

/* A box row: the swizzle's bytes in elements, else the block (make_tma_2d_desc). */
static uint32_t box_row(int swizzle, uint64_t esz, long block)
{
	return swizzle ? (uint32_t)((uint64_t)swizzle / esz) : (uint32_t)block;
}

static uint64_t align_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

/* The dynamic shared memory DeepGEMM's sm90 heuristics give this kernel
 * (heuristics/sm90.hpp, get_pipeline_config) for its stage count. */
static uint64_t smem_bytes(const long *t, int fp8, uint64_t k)
{
	const uint64_t bm = (uint64_t)t[T_BM], bn = (uint64_t)t[T_BN], bk = (uint64_t)t[T_BK];
	const uint64_t esz = fp8 ? 1 : 2, barriers = 16 * 8 * 2;
	const uint64_t cd = align_up(bm * bn * 2, 1024);
	const uint64_t stage = bm * bk * esz + bn * bk * esz + (fp8 ? align_up(bm * 4, 128) : 0);
	const uint64_t sfb = fp8 ? align_up((k + bk - 1) / bk * 4 * (bk % bn == 0 ? 1 : 2), 8) : 0;
	return cd + barriers + sfb + (uint64_t)t[T_STAGES] * stage;
}

static void add_operand(struct cg_decoded *d, const char *name, uintptr_t addr)
{
	d->operand[d->noperands].name = name;
	d->operand[d->noperands++].addr = addr;
}

/* The template arguments DeepGEMM's host code derives from the others
 * (heuristics/sm90.hpp): anything else is not a kernel it makes. */
static int check_config(const long *t, int fp8, int major_b_mn, char *why, size_t n)
{
	const long esz = fp8 ? 1 : 2;
	const long want[][2] = {
		{T_BK, 128 / esz},
		{T_SWA, swizzle_for((uint64_t)(t[T_BK] * esz))},
		{T_SWB, swizzle_for((uint64_t)((major_b_mn ? t[T_BN] : t[T_BK]) * esz))},
		{T_SWD, swizzle_for((uint64_t)t[T_BN] * 2)},
		{T_TMA, 128},
		{T_MATH, t[T_BM] <= 64 ? 128 : 256},
	};
	static const char *const names[] = {"BLOCK_K", "kSwizzleAMode", "kSwizzleBMode",
					    "kSwizzleDMode", "kNumTMAThreads", "kNumMathThreads"};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
		if (t[want[i][0]] != want[i][1])
			return refuse(why, n, "%s is %ld, where DeepGEMM's host code makes %ld",
				      names[i], t[want[i][0]], want[i][1]);
	if (t[T_BM] < 16 || t[T_BM] > 256 || t[T_BM] % 16 || t[T_BN] < 16 || t[T_BN] > 256 ||
	    t[T_BN] % 8 || t[T_STAGES] < 1 || t[T_STAGES] > 16 || t[T_MCAST] < 1 || t[T_MCAST] > 2 ||
	    t[T_SMS] < 1 || t[T_SMS] > 65535)
		return refuse(why, n, "BLOCK_M %ld, BLOCK_N %ld, %ld stages, multicast %ld, %ld SMs: "
			      "not a configuration DeepGEMM's host code makes", t[T_BM], t[T_BN],
			      t[T_STAGES], t[T_MCAST], t[T_SMS]);
	return 1;
}

/* The epilogue DeepGEMM's fp8 kernels take when the caller gives none
 * (impls/epilogue.hpp): D's columns as computed.  Older releases named it
 * in namespace deep_gemm itself. */
static int identity_epilogue(const char *e, size_t len)
{
	static const char *const ok[] = {"deep_gemm::epilogue::transform::EpilogueIdentity",
					 "deep_gemm::EpilogueIdentity"};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
		if (len == strlen(ok[i]) && !strncmp(e, ok[i], len))
			return 1;
	return 0;
}

int cg_decode_gemm(const char *demangled, void *const *params, cg_tmap_lookup_fn tmap,
		   struct cg_decoded *out, char *why, size_t n)
{
	const struct abi *abi = abi_of(demangled);
	if (!abi)
		return 0;
	const char *targ[MAX_TARGS], *rest = NULL;
	size_t tlen[MAX_TARGS];
	const char *list = strchr(demangled, '<') + 1;
	int nt = split_targs(list, targ, tlen, &rest);
	if (nt != abi->targs)
		return refuse(why, n, "undecodable ABI: %d template arguments, expected %d", nt,
			      abi->targs);
	if (strcmp(rest, abi->params) != 0)
		return refuse(why, n, "undecodable ABI: parameters %s, expected %s", rest,
			      abi->params);
	/* Every argument up to kGemmType is a number, and with_accumulation. */
	long v[MAX_TARGS];
	const int ntype = abi->shape + T_TYPE;
	for (int i = 0; i <= ntype || i == abi->accumulate; i++)
		if (!targ_value(targ[i], tlen[i], &v[i]))
			return refuse(why, n, "undecodable ABI: template argument %d is %.*s", i,
				      (int)tlen[i], targ[i]);
	const long *t = v + abi->shape;
	/* cute::UMMA::Major: K = 0, MN = 1, nothing else */
	const int majors[] = {abi->major_a, abi->major_b, abi->major_sfb};
	for (size_t i = 0; i < sizeof majors / sizeof majors[0]; i++)
		if (majors[i] >= 0 && v[majors[i]] != 0 && v[majors[i]] != 1)
			return refuse(why, n, "template argument %d is %.*s, not a cute::UMMA::Major "
				      "(0 K, 1 MN)", majors[i], (int)tlen[majors[i]], targ[majors[i]]);
	if (abi->major_a >= 0 && v[abi->major_a] != 0)
		return refuse(why, n, "A is MN-major; the bundled kernels read A K-major");
	if (abi->major_sfb >= 0 && v[abi->major_sfb] != 0)
		return refuse(why, n, "sfb is MN-major; the bundled kernels read it K-major");
	long type = t[T_TYPE];
	int layout = layout_of(type);
	if (layout < 0)
		return refuse(why, n, "GemmType::%s is not an m-grouped layout the bundled kernels "
			      "compute", type >= 0 && type < 7 ? type_names[type] : "unknown");
	/* DeepGEMM takes each BLOCK_M-row block's group from its first row
	 * (contiguous: groups start on multiples of BLOCK_M, the mk
	 * alignment) and starts a psum group at the previous end rounded up
	 * to BLOCK_M.  The bundled kernels do both per 128 rows, or per 64
	 * with CG_GMM_BLOCKS_64: with BLOCK_M a multiple of theirs every
	 * contiguous group starts on their tile boundary, and their psum group
	 * starts no later than DeepGEMM's (the rows between are ones DeepGEMM
	 * leaves unspecified). */
	const int grouped_rows = layout == CG_LAYOUT_PSUM || layout == CG_LAYOUT_CONTIGUOUS;
	if (grouped_rows && t[T_BM] % 64)
		return refuse(why, n, "GemmType::%s with BLOCK_M %ld: DeepGEMM's groups are "
			      "%ld-row blocks, the bundled kernels' 64 or 128-row blocks",
			      type_names[type], t[T_BM], t[T_BM]);
	if (abi->accumulate >= 0 && v[abi->accumulate])
		return refuse(why, n, "accumulation into D (with_accumulation)");
	const char *cd = targ[abi->cd];
	size_t cdl = tlen[abi->cd];
	if (!(cdl == 19 && !strncmp(cd, "cutlass::bfloat16_t", cdl)) &&
	    !(cdl == 13 && !strncmp(cd, "__nv_bfloat16", cdl)))
		return refuse(why, n, "output type %.*s; the bundled kernels write bf16", (int)cdl,
			      cd);
	if (abi->epilogue >= 0 && !identity_epilogue(targ[abi->epilogue], tlen[abi->epilogue]))
		return refuse(why, n, "epilogue %.*s; the bundled kernels write D's columns as "
			      "computed (EpilogueIdentity)", (int)tlen[abi->epilogue],
			      targ[abi->epilogue]);

	const int kn = abi->major_b >= 0 && v[abi->major_b] == 1;
	if (check_config(t, abi->fp8, kn, why, n) < 0)
		return -1;
	const uint64_t g = (uint64_t)t[T_GROUPS];
	uint32_t mnk[3];
	for (int i = 0; i < 3; i++) {
		memcpy(&mnk[i], params[abi->p_m + i], sizeof mnk[i]);
		/* compiled in, SHAPE_* replaces the scalar inside the kernel */
		if (t[T_SHAPE + i] != 0 && (uint64_t)t[T_SHAPE + i] != mnk[i])
			return refuse(why, n, "SHAPE_%c is compiled in as %ld but the launch passes "
				      "%u: the kernel computes with %ld", "MNK"[i], t[T_SHAPE + i],
				      mnk[i], t[T_SHAPE + i]);
	}
	const uint64_t m = mnk[0], nn = mnk[1], k = mnk[2], esz = abi->fp8 ? 1 : 2;
	const uint64_t gm = layout == CG_LAYOUT_MASKED ? g : 1; /* G' of DESIGN.md */
	if (g < 1 || (layout == CG_LAYOUT_NORMAL && g != 1))
		return refuse(why, n, "%llu groups for GemmType::%s", (unsigned long long)g,
			      type_names[type]);

	static const char *const names[] = {"a", "b", "d", "sfa"};
	struct cg_tmap tm[4];
	for (int i = 0; i < 3 + abi->fp8; i++)
		if (!tmap(params[abi->p_a + i], &tm[i]))
			return refuse(why, n, "tensor map %s was never seen encoded", names[i]);
	const int elem = abi->fp8 ? TM_UINT8 : TM_BF16;
	const long bm = t[T_BM], bn = t[T_BN], bk = t[T_BK];
	const int swa = (int)t[T_SWA], swb = (int)t[T_SWB], swd = (int)t[T_SWD];
	const struct want w[3] = {
		{"a", elem, {k, m * gm}, k * esz, 1, {box_row(swa, esz, bk), (uint32_t)bm}, swa},
		kn ? (struct want){"b", elem, {nn, k * g}, nn * esz, 1,
				   {box_row(swb, esz, bn), (uint32_t)bk}, swb}
		   : (struct want){"b", elem, {k, nn * g}, k * esz, 1,
				   {box_row(swb, esz, bk), (uint32_t)bn}, swb},
		{"d", TM_BF16, {nn, m * gm}, nn * 2, 1, {box_row(swd, 2, bn), (uint32_t)bm}, swd},
	};
	for (int i = 0; i < 3; i++)
		if (check_map(&tm[i], &w[i], why, n) < 0)
			return -1;

	*out = (struct cg_decoded){.layout = layout, .block_m = (int)bm};
	out->launch.grid = (uint32_t)t[T_SMS];
	out->launch.block = (uint32_t)(t[T_TMA] + t[T_MATH]);
	out->launch.smem = smem_bytes(t, abi->fp8, k);
	out->launch.cluster = (uint32_t)t[T_MCAST];
	struct cg_gmm_problem *p = &out->p;
	p->dtype = abi->fp8 ? CG_GMM_FP8_E4M3 : CG_GMM_BF16;
	p->b_layout = kn ? CG_GMM_B_KN : CG_GMM_B_NK;
	p->flags = grouped_rows && bm % 128 ? CG_GMM_BLOCKS_64 : 0;
	p->a = tm[0].addr;
	p->b = tm[1].addr;
	p->d = tm[2].addr;
	p->m = (int64_t)m;
	p->n = (int64_t)nn;
	p->k = (int64_t)k;
	p->g = (int64_t)g;
	add_operand(out, "A", tm[0].addr);
	add_operand(out, "B", tm[1].addr);
	add_operand(out, "D", tm[2].addr);
	if (abi->fp8) {
		/* MN-major and TMA-aligned: sfa[kb][row], rows padded to 4;
		 * make_tma_sf_desc's box is {BLOCK_M, 1}, unswizzled. */
		const uint64_t kb = (k + 127) / 128;
		const struct want ws = {"sfa", TM_F32, {(m + 3) / 4 * 4, kb * gm},
					(m + 3) / 4 * 16, 0, {(uint32_t)bm, 1}, 0};
		if (check_map(&tm[3], &ws, why, n) < 0)
			return -1;
		uintptr_t sfb;
		memcpy(&sfb, params[abi->p_sfb], sizeof sfb);
		p->sfa = tm[3].addr;
		p->sfb = sfb;
		p->sfa_stride_m = 1;
		p->sfa_stride_k = (int64_t)(tm[3].strides[0] / 4);
		p->sfa_stride_g = layout == CG_LAYOUT_MASKED ? (int64_t)kb * p->sfa_stride_k : 0;
		add_operand(out, "sfa", p->sfa);
		add_operand(out, "sfb", sfb);
	}
	if (layout != CG_LAYOUT_NORMAL) {
		uintptr_t gl;
		memcpy(&gl, params[abi->p_layout], sizeof gl);
		if (!gl)
			return refuse(why, n, "grouped_layout is NULL for GemmType::%s",
				      type_names[type]);
		if (layout == CG_LAYOUT_PSUM)
			p->offs = gl;
		else
			p->layout = gl;
		add_operand(out, "grouped_layout", gl);
	}
	return 1;
}

int cg_decode_check_launch(const struct cg_decoded *d, const CUlaunchConfig *c, char *why,
			   size_t n)
{
	const struct cg_decoded_launch *w = &d->launch;
	if (c->gridDimX != w->grid || c->gridDimY != 1 || c->gridDimZ != 1 ||
	    c->blockDimX != w->block || c->blockDimY != 1 || c->blockDimZ != 1)
		return refuse(why, n, "launched with grid {%u, %u, %u} and block {%u, %u, %u}; "
			      "DeepGEMM launches this kernel with grid {%u, 1, 1} (kNumSMs) and "
			      "block {%u, 1, 1}", c->gridDimX, c->gridDimY, c->gridDimZ,
			      c->blockDimX, c->blockDimY, c->blockDimZ, w->grid, w->block);
	if (c->sharedMemBytes != w->smem)
		return refuse(why, n, "launched with %u bytes of dynamic shared memory; DeepGEMM "
			      "gives this kernel %llu", c->sharedMemBytes,
			      (unsigned long long)w->smem);
	unsigned cluster = 1;
	for (unsigned i = 0; c->attrs && i < c->numAttrs; i++) {
		const CUlaunchAttribute *a = &c->attrs[i];
		switch (a->id) {
		case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
			if (a->value.clusterDim.y != 1 || a->value.clusterDim.z != 1)
				return refuse(why, n, "cluster dimension {%u, %u, %u}; DeepGEMM's "
					      "is {%u, 1, 1}", a->value.clusterDim.x,
					      a->value.clusterDim.y, a->value.clusterDim.z,
					      w->cluster);
			cluster = a->value.clusterDim.x;
			break;
		case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
			break; /* when it may start, not what it computes */
		case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
			if (a->value.cooperative)
				return refuse(why, n, "a cooperative launch; DeepGEMM's is not");
			break;
		default:
			return refuse(why, n, "launch attribute %d, which DeepGEMM never sets",
				      (int)a->id);
		}
	}
	if (cluster != w->cluster)
		return refuse(why, n, "cluster dimension %u; the kernel multicasts over clusters of "
			      "%u (kNumTMAMulticast)", cluster, w->cluster);
	/* DeepGEMM's host code never makes such a launch (kNumSMs is a
	 * multiple of kNumTMAMulticast), and the driver refuses it: run, it
	 * would compute what the original never does */
	if (!cluster || c->gridDimX % cluster)
		return refuse(why, n, "a grid of %u blocks in clusters of %u, no whole number of "
			      "clusters: the driver refuses the original", c->gridDimX, cluster);
	return 1;
}
