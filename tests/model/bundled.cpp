// kernels/gmm_sched.cuh compiled unchanged for the host: the CUDA names it
// uses, given host meanings (one thread; a load is a read), then its
// Sched walks every tile of a launch as the kernels do.  build_tables needs
// a whole thread block: its result, the per-group row ranges and the prefix
// of m-tile counts, is built here from group_range() itself.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#define __device__
#define __forceinline__ inline
using std::max;
using std::min;
template <typename T> static inline T __ldg(const T *p) { return *p; }
struct host_dim3 { unsigned x; };
inline host_dim3 threadIdx;
inline void __syncthreads() {}
template <typename T> static inline T __shfl_up_sync(unsigned, T v, int) { return v; }
// pack_bf16 reads the pair back as 32 bits: one 32-bit word here (D's
// values are not modelled, only where they go)
typedef uint32_t __nv_bfloat162;
static inline __nv_bfloat162 __floats2bfloat162_rn(float, float) { return 0; }

#include "../../kernels/gmm_kernels.h"
#include "../../kernels/gmm_sched.cuh"

#include "bundled.h"

extern "C" {

const struct cg_cover_shape cg_cover_shapes[] = {
	{64, 128, 0, 0},   // small
	{64, 256, 0, 0},   // split
	{128, 256, 0, 0},  // large
	{128, 128, 0, 0},  // sm80
	{128, 256, 1, 128}, // large with a tail of one tile, small parts
	{128, 256, 3, 256}, // ... of three tiles, split parts
};
const unsigned cg_cover_nshapes = sizeof cg_cover_shapes / sizeof cg_cover_shapes[0];

}

namespace {

template <int BM, int BN>
int walk(const cg_gmm_args &a, const int *tab, int *row_group, uint64_t *row_cols)
{
	const cg::Sched<BM, BN> s(a, tab);
	const int total = s.total();
	for (int t = 0; t < total; ++t) {
		cg::Tile o;
		if (!s.tile(t, o))
			continue;
		if (o.n0 / BN >= 64)
			return -1;
		for (int r = 0; r < BM; ++r) {
			if (!s.row_ok(o, r))
				continue;
			const int row = o.m0 + r;
			if (row < 0 || row >= a.m)
				return -1;
			row_group[row] = row_group[row] == -1 || row_group[row] == o.g ? o.g : -2;
			row_cols[row] |= 1ull << (o.n0 / BN);
		}
	}
	return 0;
}

template <int BM>
int walk_bn(int bn, const cg_gmm_args &a, const int *tab, int *row_group, uint64_t *row_cols)
{
	return bn == 128 ? walk<BM, 128>(a, tab, row_group, row_cols)
			 : walk<BM, 256>(a, tab, row_group, row_cols);
}

int walk_shape(int bm, int bn, const cg_gmm_args &a, const int *tab, int *row_group,
	       uint64_t *row_cols)
{
	return bm == 64 ? walk_bn<64>(bn, a, tab, row_group, row_cols)
			: walk_bn<128>(bn, a, tab, row_group, row_cols);
}

} // namespace

extern "C" int cg_cover(const struct cg_cover_shape *shape, int form, int flags, const int32_t *index,
			int m, int group_rows, int n, int g, int *row_group, uint64_t *row_cols)
{
	if (g < 1 || g > CG_GMM_MAX_OFFS_GROUPS || m < 0 || n < 1)
		return -1;
	for (int r = 0; r < m; ++r)
		row_group[r] = -1, row_cols[r] = 0;
	cg_gmm_args a{};
	a.index = index;
	a.m = m, a.n = n, a.g = g, a.group_rows = group_rows, a.form = form, a.flags = flags;
	a.tiles = 0x7fffffff;
	// The tables build_tables leaves in shared memory: pre[g + 1], start[g], end[g].
	std::vector<int> tab(3 * g + 1 + 32);
	if (cg_gmm_form_has_tables(form)) {
		tab[0] = 0;
		for (int i = 0; i < g; ++i) {
			int lo, hi;
			cg::group_range(a, i, lo, hi);
			tab[g + 1 + i] = lo;
			tab[2 * g + 1 + i] = hi;
			tab[i + 1] = tab[i] + (hi - lo + shape->bm - 1) / shape->bm;
		}
	}
	if (!shape->tail_tiles)
		return walk_shape(shape->bm, shape->bn, a, tab.data(), row_group, row_cols);
	// grouped_mm.c's tail: the contiguous form only; the main launch takes
	// all but the last tail_tiles 128 x 256 tiles, a 64-row kernel the rest
	// in parts.  Column bits are kept per tail_bn columns for both.
	if (form != CG_GMM_FORM_CONTIGUOUS || shape->bm != CG_GMM_TAIL_BM || shape->bn != CG_GMM_TAIL_BN)
		return -1;
	const int tiles = ((m + CG_GMM_TAIL_BM - 1) / CG_GMM_TAIL_BM) *
			  ((n + CG_GMM_TAIL_BN - 1) / CG_GMM_TAIL_BN);
	const int last = std::min(shape->tail_tiles, tiles);
	std::vector<uint64_t> main_cols(m, 0);
	a.tiles = tiles - last;
	if (walk<CG_GMM_TAIL_BM, CG_GMM_TAIL_BN>(a, tab.data(), row_group, main_cols.data()) < 0)
		return -1;
	const int per = CG_GMM_TAIL_BN / shape->tail_bn; // tail column tiles per main one
	for (int r = 0; r < m; ++r)
		for (int c = 0; c < 64 / per; ++c)
			if (main_cols[r] >> c & 1)
				row_cols[r] |= ((1ull << per) - 1) << (c * per);
	cg_gmm_args t = a;
	t.tail0 = tiles - last;
	t.tail_split = (CG_GMM_TAIL_BM / 64) * per;
	t.tiles = last * t.tail_split;
	return walk_shape(64, shape->tail_bn, t, tab.data(), row_group, row_cols);
}
