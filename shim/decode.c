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

/* One ABI: where its template arguments and parameters sit. */
static const struct abi {
	const char *prefix;        /* after an optional "void " */
	const char *params;        /* the parameter list, as demangled */
	int fp8;
	int targs;                 /* template argument count */
	int major_a, major_b, major_sfb, groups, block_m, type, accumulate, cd; /* indexes, -1: none */
	int p_sfb, p_layout, p_m, p_a;   /* parameter indexes; a, b, d(, sfa) follow p_a */
} abis[] = {
	{"deep_gemm::sm90_bf16_gemm_impl<",
	 "(int*, unsigned int, unsigned int, unsigned int, CUtensorMap_st, CUtensorMap_st, "
	 "CUtensorMap_st)",
	 0, BF16_TARGS, 0, 1, -1, 5, 6, 18, 19, 20, -1, 0, 1, 4},
	{"deep_gemm::sm90_fp8_gemm_1d2d_impl<",
	 "(float*, int*, unsigned int, unsigned int, unsigned int, CUtensorMap_st, "
	 "CUtensorMap_st, CUtensorMap_st, CUtensorMap_st)",
	 1, FP8_TARGS, -1, -1, 0, 4, 5, 17, -1, 18, 0, 1, 2, 5},
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

/* A 2-D map of dtype with dims {inner, outer} and a dense row stride of
 * row_bytes (at least, for sfa: stride_out gets it). */
static int check_map(const struct cg_tmap *t, const char *what, int dtype, uint64_t inner,
		     uint64_t outer, uint64_t row_bytes, int exact_stride, char *why, size_t n)
{
	if (t->dtype != dtype || t->rank != 2)
		return refuse(why, n, "tensor map %s is %d-D of data type %d, expected 2-D of %d",
			      what, t->rank, t->dtype, dtype);
	if (t->dims[0] != inner || t->dims[1] != outer)
		return refuse(why, n, "tensor map %s has dims {%llu, %llu}, expected {%llu, %llu}",
			      what, (unsigned long long)t->dims[0], (unsigned long long)t->dims[1],
			      (unsigned long long)inner, (unsigned long long)outer);
	if (exact_stride ? t->strides[0] != row_bytes
			 : t->strides[0] < row_bytes || t->strides[0] % 4)
		return refuse(why, n, "tensor map %s has a row stride of %llu bytes, expected %llu",
			      what, (unsigned long long)t->strides[0],
			      (unsigned long long)row_bytes);
	return 1;
}

static void add_operand(struct cg_decoded *d, const char *name, uintptr_t addr)
{
	d->operand[d->noperands].name = name;
	d->operand[d->noperands++].addr = addr;
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
	long v[MAX_TARGS];
	int idx[] = {abi->major_a, abi->major_b, abi->major_sfb, abi->groups, abi->block_m,
		     abi->type, abi->accumulate};
	for (size_t i = 0; i < sizeof idx / sizeof idx[0]; i++)
		if (idx[i] >= 0 && !targ_value(targ[idx[i]], tlen[idx[i]], &v[idx[i]]))
			return refuse(why, n, "undecodable ABI: template argument %d is %.*s",
				      idx[i], (int)tlen[idx[i]], targ[idx[i]]);
	/* cute::UMMA::Major: K = 0, MN = 1 */
	if (abi->major_a >= 0 && v[abi->major_a] != 0)
		return refuse(why, n, "A is MN-major; the bundled kernels read A K-major");
	if (abi->major_sfb >= 0 && v[abi->major_sfb] != 0)
		return refuse(why, n, "sfb is MN-major; the bundled kernels read it K-major");
	long type = v[abi->type];
	int layout = layout_of(type);
	if (layout < 0)
		return refuse(why, n, "GemmType::%s is not an m-grouped layout the bundled kernels "
			      "compute", type >= 0 && type < 7 ? type_names[type] : "unknown");
	/* DeepGEMM starts a psum group at the previous end rounded up to
	 * BLOCK_M; the bundled psum form rounds up to 128 */
	if (layout == CG_LAYOUT_PSUM && v[abi->block_m] != 128)
		return refuse(why, n, "GemmType::%s with BLOCK_M %ld: its groups start at multiples "
			      "of %ld rows, the bundled psum form's at multiples of 128",
			      type_names[type], v[abi->block_m], v[abi->block_m]);
	if (abi->accumulate >= 0 && v[abi->accumulate])
		return refuse(why, n, "accumulation into D (with_accumulation)");
	const char *cd = targ[abi->cd];
	size_t cdl = tlen[abi->cd];
	if (!(cdl == 19 && !strncmp(cd, "cutlass::bfloat16_t", cdl)) &&
	    !(cdl == 13 && !strncmp(cd, "__nv_bfloat16", cdl)))
		return refuse(why, n, "output type %.*s; the bundled kernels write bf16", (int)cdl,
			      cd);

	const int kn = abi->major_b >= 0 && v[abi->major_b] == 1;
	const uint64_t g = (uint64_t)v[abi->groups];
	uint32_t mnk[3];
	for (int i = 0; i < 3; i++)
		memcpy(&mnk[i], params[abi->p_m + i], sizeof mnk[i]);
	const uint64_t m = mnk[0], nn = mnk[1], k = mnk[2], esz = abi->fp8 ? 1 : 2;
	const uint64_t gm = layout == CG_LAYOUT_MASKED ? g : 1; /* G' of DESIGN.md */
	if (g < 1 || (layout == CG_LAYOUT_NORMAL && g != 1))
		return refuse(why, n, "%llu groups for GemmType::%s", (unsigned long long)g,
			      type_names[type]);

	static const char *const names[] = {"a", "b", "d", "sfa"};
	struct cg_tmap t[4];
	for (int i = 0; i < 3 + abi->fp8; i++)
		if (!tmap(params[abi->p_a + i], &t[i]))
			return refuse(why, n, "tensor map %s was never seen encoded", names[i]);
	const int elem = abi->fp8 ? TM_UINT8 : TM_BF16;
	if (check_map(&t[0], "a", elem, k, m * gm, k * esz, 1, why, n) < 0 ||
	    (kn ? check_map(&t[1], "b", elem, nn, k * g, nn * esz, 1, why, n)
		: check_map(&t[1], "b", elem, k, nn * g, k * esz, 1, why, n)) < 0 ||
	    check_map(&t[2], "d", TM_BF16, nn, m * gm, nn * 2, 1, why, n) < 0)
		return -1;

	*out = (struct cg_decoded){.layout = layout};
	struct cg_gmm_problem *p = &out->p;
	p->dtype = abi->fp8 ? CG_GMM_FP8_E4M3 : CG_GMM_BF16;
	p->b_layout = kn ? CG_GMM_B_KN : CG_GMM_B_NK;
	p->a = t[0].addr;
	p->b = t[1].addr;
	p->d = t[2].addr;
	p->m = (int64_t)m;
	p->n = (int64_t)nn;
	p->k = (int64_t)k;
	p->g = (int64_t)g;
	add_operand(out, "A", t[0].addr);
	add_operand(out, "B", t[1].addr);
	add_operand(out, "D", t[2].addr);
	if (abi->fp8) {
		/* MN-major and TMA-aligned: sfa[kb][row], rows padded to 4. */
		const uint64_t kb = (k + 127) / 128;
		if (check_map(&t[3], "sfa", TM_F32, (m + 3) / 4 * 4, kb * gm, (m + 3) / 4 * 16, 0,
			      why, n) < 0)
			return -1;
		uintptr_t sfb;
		memcpy(&sfb, params[abi->p_sfb], sizeof sfb);
		p->sfa = t[3].addr;
		p->sfb = sfb;
		p->sfa_stride_m = 1;
		p->sfa_stride_k = (int64_t)(t[3].strides[0] / 4);
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
