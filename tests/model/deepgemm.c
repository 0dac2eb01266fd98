/* DeepGEMM's sm90 GEMMs on the CPU, from DeepGEMM's public source (see
 * deepgemm.h): which rows of D the original writes, from which group, over
 * which channels, and when the launch is one its kernel does not run as
 * written (a map, a thread count or a grid the kernel was not built for). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "deepgemm.h"

static uint64_t up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

static uint64_t cdiv(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a;
}

__attribute__((format(printf, 2, 3))) static void undefined(struct dg_semantics *s, const char *fmt,
							    ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->why, sizeof s->why, fmt, ap);
	va_end(ap);
	s->defined = 0;
}

uint64_t dg_smem(const struct dg_launch *l)
{
	const uint64_t esz = l->fp8 ? 1 : 2, bm = (uint64_t)l->bm, bn = (uint64_t)l->bn;
	const uint64_t bk = (uint64_t)l->bk ? (uint64_t)l->bk : 1;
	const uint64_t smem_cd = up(bm * bn * 2, 1024), barriers = 16 * 8 * 2;
	const uint64_t a = bm * bk * esz, b = bn * bk * esz, sfa = l->fp8 ? up(bm * 4, 128) : 0;
	const uint64_t sfb = l->fp8 ? up(cdiv(l->k, bk) * 4 * (bk % (bn ? bn : 1) ? 2 : 1), 8) : 0;
	return smem_cd + barriers + sfb + (uint64_t)l->stages * (a + b + sfa);
}

/* DeepGEMM's get_swizzle_mode (heuristics/utils.hpp) */
static long swizzle_mode(long bytes)
{
	for (long mode = 128; mode >= 16; mode /= 2)
		if (bytes % mode == 0)
			return mode;
	return 0;
}

/* make_tma_2d_desc's encode of a 2-D map (runtime_utils.hpp) */
struct expect {
	int dtype;
	uint64_t inner, outer, min_stride;
	uint64_t box_inner, box_outer;
	long swizzle;
};

static int as_encoded(const struct cg_tmap *t, const struct expect *e, uint64_t esz)
{
	const int sw = e->swizzle == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
		       : e->swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
		       : e->swizzle == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
					  : CU_TENSOR_MAP_SWIZZLE_NONE;
	const uint64_t box_inner = e->swizzle ? (uint64_t)e->swizzle / esz : e->box_inner;
	/* the L2 promotion is a cache hint: it changes no result */
	return t->tiled && t->rank == 2 && t->dtype == e->dtype && t->dims[0] == e->inner &&
	       t->dims[1] == e->outer && t->strides[0] >= e->min_stride &&
	       t->strides[0] % 16 == 0 && t->box[0] == box_inner && t->box[1] == e->box_outer &&
	       t->swizzle == sw && t->elem_strides[0] == 1 && t->elem_strides[1] == 1 &&
	       t->interleave == CU_TENSOR_MAP_INTERLEAVE_NONE &&
	       t->oobfill == CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
}

/* The kernel as the JIT instantiates it: anything else DeepGEMM's host
 * code never builds, and its device code was not written for. */
static int kernel_as_built(const struct dg_launch *l, struct dg_semantics *s)
{
	const long esz = l->fp8 ? 1 : 2;
	if (l->type != 0 && l->type != 1 && l->type != 2 && l->type != 5)
		return undefined(s, "GemmType %ld: not an m-grouped GEMM", l->type), 0;
	if (strcmp(l->cd, "cutlass::bfloat16_t") && strcmp(l->cd, "__nv_bfloat16"))
		return undefined(s, "writes %s", l->cd), 0;
	if (!l->fp8 && l->accumulate)
		return undefined(s, "adds to D"), 0;
	if (l->bk != 128 / esz || l->tma != 128 || l->math != (l->bm <= 64 ? 128 : 256) ||
	    l->bm < 16 || l->bm > 256 || l->bm % 16 || l->bn < 16 || l->bn > 256 || l->bn % 16 ||
	    l->stages < 1 || l->stages > 16 || (l->mcast != 1 && l->mcast != 2) || l->sms < 1 ||
	    l->groups < 1 || l->groups > DG_MAX_GROUPS)
		return undefined(s, "template arguments the kernel's warp roles and tiles do not "
				    "support"),
		       0;
	const long swa = swizzle_mode(l->bk * esz), swd = swizzle_mode(l->bn * 2);
	const long swb = swizzle_mode((s->b_mn ? l->bn : l->bk) * esz);
	if (l->swa != swa || l->swb != swb || l->swd != swd)
		return undefined(s, "swizzles its shared memory otherwise than it is loaded"), 0;
	return 1;
}

static int launched_as_built(const struct dg_launch *l, struct dg_semantics *s, uint64_t blocks)
{
	const CUlaunchConfig *c = &l->cfg;
	unsigned cluster[3] = {1, 1, 1};
	for (unsigned i = 0; i < c->numAttrs; i++)
		if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
			memcpy(cluster, &c->attrs[i].value.clusterDim, sizeof cluster);
	if (c->gridDimX % cluster[0] || c->gridDimY % cluster[1] || c->gridDimZ % cluster[2]) {
		s->driver_refuses = 1;
		return undefined(s,
				 "the driver refuses a grid that is no whole number of clusters"),
		       0;
	}
	if (c->gridDimY != 1 || c->gridDimZ != 1 || c->blockDimY != 1 || c->blockDimZ != 1 ||
	    c->blockDimX != (unsigned)(l->tma + l->math) || cluster[1] != 1 || cluster[2] != 1 ||
	    cluster[0] != (unsigned)l->mcast)
		return undefined(s, "launched with threads or clusters its warp roles and "
				    "multicast do not expect"),
		       0;
	if (c->sharedMemBytes < dg_smem(l))
		return undefined(s, "given less shared memory than its pipeline uses"), 0;
	/* CTA x takes blocks x, x + kNumSMs, ...: a smaller grid skips some */
	if (c->gridDimX < (unsigned)l->sms && blocks > c->gridDimX)
		return undefined(s, "a grid of %u for kNumSMs %ld: blocks never computed",
				 c->gridDimX, l->sms),
		       0;
	return 1;
}

static void mark(struct dg_semantics *s, uint64_t row, int state, int group)
{
	if (row >= s->rows) /* the TMA store clips at D's map */
		return;
	if (s->state[row] != DG_UNTOUCHED && (s->state[row] != state || s->group[row] != group))
		state = DG_UNSPECIFIED; /* two blocks race for it */
	s->state[row] = (uint8_t)state;
	s->group[row] = (int16_t)group;
}

/* Which block writes which rows, scheduler/gemm.cuh and the kernels' TMA
 * stores; returns the number of blocks (for the grid), 0 when undefined. */
static uint64_t rows_written(const struct dg_launch *l, struct dg_semantics *s, uint64_t m_eff,
			     uint64_t n_blocks)
{
	const uint64_t bm = (uint64_t)l->bm, g = (uint64_t)l->groups;
	uint64_t blocks = 0;
	switch (l->type) {
	case 0:
		for (uint64_t r = 0; r < up(m_eff, bm); r++)
			mark(s, r, r < m_eff ? DG_GROUP : DG_UNSPECIFIED, 0);
		return cdiv(m_eff, bm) * n_blocks;
	case 1:
		if (m_eff > l->nlayout)
			return undefined(s, "reads grouped_layout past its %zu rows", l->nlayout),
			       0;
		for (uint64_t b0 = 0; b0 < m_eff; b0 += bm) {
			const int32_t gid = l->layout[b0];
			for (uint64_t r = b0; r < b0 + bm; r++) {
				/* fp8: math warpgroup w takes rows w * 64 + 64-row waves
				 * of wgs * 64; it computes nothing and stores zeros when
				 * its first row is -1 (is_computation_valid) */
				const uint64_t wgs = (uint64_t)l->math / 128;
				const uint64_t first = b0 + (r - b0) / 64 % wgs * 64;
				const int32_t half = l->layout[first < m_eff ? first : b0];
				const int ok = r < m_eff && gid >= 0 && (uint64_t)gid < g &&
					       l->layout[r] == gid && (!l->fp8 || half >= 0);
				mark(s, r, ok ? DG_GROUP : DG_UNSPECIFIED, ok ? gid : 0);
			}
		}
		return cdiv(m_eff, bm) * n_blocks;
	case 2:
		if (l->nlayout < g)
			return undefined(s, "reads masked_m past its %zu groups", l->nlayout), 0;
		for (uint64_t i = 0; i < g; i++) {
			if (l->layout[i] < 0)
				return undefined(s,
						 "a negative masked_m counts blocks without end"),
				       0;
			const uint64_t mm = (uint64_t)l->layout[i];
			for (uint64_t lr = 0; lr < up(mm, bm); lr++)
				mark(s, i * m_eff + lr,
				     lr < mm && lr < m_eff ? DG_GROUP : DG_UNSPECIFIED, (int)i);
			blocks += cdiv(mm, bm) * n_blocks;
		}
		return blocks;
	default: {
		if (l->nlayout < g)
			return undefined(s, "reads the psum ends past its %zu groups", l->nlayout),
			       0;
		uint64_t start = 0;
		for (uint64_t i = 0; i < g; i++) {
			if (l->layout[i] < 0 || (uint64_t)l->layout[i] < start)
				return undefined(s,
						 "psum end %d before its group's start %llu: the "
						 "scheduler's block count wraps",
						 l->layout[i], (unsigned long long)start),
				       0;
			const uint64_t end = (uint64_t)l->layout[i];
			for (uint64_t r = start; r < up(end, bm); r++)
				mark(s, r, r < end ? DG_GROUP : DG_UNSPECIFIED, (int)i);
			blocks += cdiv(end - start, bm) * n_blocks;
			start = up(end, bm);
		}
		return blocks;
	}
	}
}

void dg_model(const struct dg_launch *l, struct dg_semantics *s)
{
	memset(s, 0, sizeof *s);
	s->defined = 1;
	if (l->with_extra) {
		s->driver_refuses = 1;
		undefined(s, "the driver refuses kernelParams with extra");
		return;
	}
	const uint64_t esz = l->fp8 ? 1 : 2;
	/* the kernels compare majors with Major::K: any other value is MN */
	s->fp8 = l->fp8;
	s->a_mn = !l->fp8 && l->major_a != 0;
	s->b_mn = !l->fp8 && l->major_b != 0;
	s->sfb_mn = l->fp8 && l->major_sfb != 0;
	s->identity = !l->fp8 ||
		      !strcmp(l->epilogue, "deep_gemm::epilogue::transform::EpilogueIdentity") ||
		      !strcmp(l->epilogue, "deep_gemm::EpilogueIdentity");
	if (l->fp8 && !s->identity &&
	    strncmp(l->epilogue, "deep_gemm::epilogue::transform::EpilogueHeadSplits<", 51)) {
		undefined(s, "an epilogue type of unknown effect");
		return;
	}
	if (!kernel_as_built(l, s))
		return;
	const uint64_t m = l->m, n = l->n, k = l->k, g = (uint64_t)l->groups;
	const uint64_t m_eff = l->shape[0] ? (uint64_t)l->shape[0] : m;
	const uint64_t n_eff = l->shape[1] ? (uint64_t)l->shape[1] : n;
	const uint64_t k_eff = l->shape[2] ? (uint64_t)l->shape[2] : k;
	const int masked = l->type == 2;
	const uint64_t gm = masked ? g : 1;
	/* The maps DeepGEMM's host code encodes for these arguments (any row
	 * stride its tensors may have, as make_tma_*_desc takes a.stride()) */
	const int elem = l->fp8 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
	const uint64_t bm = (uint64_t)l->bm, bn = (uint64_t)l->bn, bk = (uint64_t)l->bk;
	const struct expect want[4] = {
		{elem, s->a_mn ? m * gm : k, s->a_mn ? k : m * gm, (s->a_mn ? m * gm : k) * esz,
		 s->a_mn ? bm : bk, s->a_mn ? bk : bm, l->swa},
		{elem, s->b_mn ? n : k, s->b_mn ? k * g : n * g, (s->b_mn ? n : k) * esz,
		 s->b_mn ? bn : bk, s->b_mn ? bk : bn, l->swb},
		{CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, n, m * gm, n * 2, bn, bm, l->swd},
		{CU_TENSOR_MAP_DATA_TYPE_FLOAT32, up(m, 4), cdiv(k, bk) * gm, up(m, 4) * 4, bm, 1,
		 0},
	};
	static const char *const names[] = {"a", "b", "d", "sfa"};
	for (int i = 0; i < 3 + l->fp8; i++)
		if (!as_encoded(&l->map[i], &want[i], i == 3 ? 4 : i == 2 ? 2 : esz)) {
			undefined(s, "tensor map %s is not encoded as the kernel loads it",
				  names[i]);
			return;
		}
	s->a = l->map[0].addr, s->b = l->map[1].addr, s->d = l->map[2].addr;
	s->a_stride = l->map[0].strides[0], s->b_stride = l->map[1].strides[0];
	s->d_stride = l->map[2].strides[0];
	if (l->fp8) {
		s->sfa = l->map[3].addr, s->sfb = l->sfb;
		s->sfa_stride_k = l->map[3].strides[0] / 4;
		/* group i's scales start at map row i * ceil(shape_k / BLOCK_K) */
		s->sfa_stride_g = masked ? cdiv(k_eff, bk) * s->sfa_stride_k : 0;
	}
	/* K blocks of BLOCK_K channels up to shape_k; the map's zeros past k */
	s->k_extent = up(k_eff, bk) < k ? up(k_eff, bk) : k;
	s->n_extent = up(n_eff, bn) < n ? up(n_eff, bn) : n;
	s->rows = m * gm;
	s->group_stride = masked ? m_eff : 0;
	if (s->rows > DG_MAX_ROWS) {
		undefined(s, "more rows than the model keeps");
		return;
	}
	const uint64_t blocks = rows_written(l, s, m_eff, cdiv(n_eff, bn));
	if (s->defined)
		launched_as_built(l, s, blocks);
}
