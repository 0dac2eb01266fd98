/* Work decomposition shared by every kernel: which (group, rows, columns)
 * output tile a linear tile index stands for, in every addressing form. */
#pragma once

namespace cg {

struct Tile {
	int g;    /* group (expert) */
	int m0;   /* first row of A and D */
	int rows; /* rows of the tile inside the group, 1..BM */
	int n0;   /* first column of D */
};

/* Rows [lo, hi) of group g in a range form (gmm_kernels.h, cg_gmm_form).
 * Clamped into [0, m], and into the group's own rows in masked form; a group
 * ending before it starts is empty: no index content can send a tile
 * outside A or D. */
__device__ __forceinline__ void group_range(const cg_gmm_args &a, int g, int &lo, int &hi)
{
	const int prev = g ? min(max(__ldg(a.index + g - 1), 0), a.m) : 0;
	const int cnt = __ldg(a.index + g);
	switch (a.form) {
	case CG_GMM_FORM_MASKED:
		lo = g * a.group_rows;
		hi = lo + min(max(cnt, 0), a.group_rows);
		return;
	case CG_GMM_FORM_PSUM: { /* in 64 bits: prev may be within 127 of 2^31 */
		const long long align = cg_gmm_psum_align(a.flags);
		lo = static_cast<int>(min((static_cast<long long>(prev) + align - 1) & ~(align - 1),
					  static_cast<long long>(a.m)));
		break;
	}
	default:
		lo = prev;
	}
	hi = min(max(cnt, lo), a.m);
}

/* Range forms: per-group row ranges and the exclusive prefix of m-tile
 * counts, built in shared memory by every thread of the block (THREADS of
 * them).  Layout (cg_gmm_tables_bytes): pre[g + 1], start[g], end[g],
 * chunk[32]. */
template <int BM, int THREADS>
__device__ __forceinline__ void build_tables(const cg_gmm_args &a, int *tab)
{
	int *pre = tab, *start = pre + a.g + 1, *end = start + a.g, *chunk = end + a.g;
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	for (int base = warp * 32; base < a.g; base += THREADS) {
		const int g = base + lane;
		int cnt = 0;
		if (g < a.g) {
			int lo, hi;
			group_range(a, g, lo, hi);
			start[g] = lo;
			end[g] = hi;
			cnt = (hi - lo + BM - 1) / BM;
		}
		for (int o = 1; o < 32; o <<= 1) {
			const int v = __shfl_up_sync(~0u, cnt, o);
			if (lane >= o)
				cnt += v;
		}
		if (g < a.g)
			pre[g + 1] = cnt;
		if (lane == 31)
			chunk[base >> 5] = cnt;
	}
	__syncthreads();
	if (warp == 0) {
		const int v = lane < (a.g + 31) >> 5 ? chunk[lane] : 0;
		int incl = v;
		for (int o = 1; o < 32; o <<= 1) {
			const int u = __shfl_up_sync(~0u, incl, o);
			if (lane >= o)
				incl += u;
		}
		chunk[lane] = incl - v;
		if (lane == 0)
			pre[0] = 0;
	}
	__syncthreads();
	for (int g = threadIdx.x; g < a.g; g += THREADS)
		pre[g + 1] += chunk[g >> 5];
	__syncthreads();
}

/* Linear tile index -> tile.  m-tiles are numbered group after group (range
 * forms) or block after block (contiguous form); tiles are visited in bands of
 * CG_GMM_BAND m-tiles, m fastest, so that the tiles running together read
 * the same few experts' B and the same A rows.  With no more m-tiles than
 * groups (decode, masked decode) no B slab has two m-tiles to share it, and
 * such a band only puts the same columns of 16 experts' weights in flight
 * together, N·K elements apart: there the band is one m-tile, a group's n-tiles
 * in turn (measured on masked decode: 3-7% less time). */
__device__ __forceinline__ void band_place(int t, int m_tiles, int n_tiles, int g, int &mt, int &nb)
{
	const int band = m_tiles > g ? CG_GMM_BAND : 1;
	const int band_tiles = band * n_tiles;
	const int b = t / band_tiles;
	const int r = t - b * band_tiles;
	const int first = b * band;
	const int width = min(band, m_tiles - first);
	nb = r / width;
	mt = first + (r - nb * width);
}

template <int BM, int BN>
struct Sched {
	const int *index, *pre, *start, *end;
	int form, m, n, g, n_tiles, m_tiles, tiles, tail0, tail_split;

	__device__ Sched(const cg_gmm_args &a, const int *tab)
	    : index(a.index), pre(tab), start(tab + a.g + 1), end(tab + 2 * a.g + 1),
	      form(a.form), m(a.m), n(a.n), g(a.g), n_tiles((a.n + BN - 1) / BN),
	      m_tiles(cg_gmm_form_has_tables(a.form) ? tab[a.g] : (a.m + BM - 1) / BM), tiles(a.tiles),
	      tail0(a.tail0), tail_split(a.tail_split)
	{
	}

	__device__ int total() const
	{
		return BM < CG_GMM_TAIL_BM && tail_split ? tiles : min(m_tiles * n_tiles, tiles);
	}

	/* Part t of a tail launch's tiles (gmm_kernels.h): contiguous form
	 * only (the host's choice), whose rows' group ids place any 64 rows as
	 * well as 128. */
	__device__ bool tail_tile(int t, Tile &o) const
	{
		constexpr int parts = CG_GMM_TAIL_BN / BN; /* column parts of a 64-row half */
		const int big = t / tail_split, part = t - big * tail_split;
		int mt, nb;
		band_place(tail0 + big, (m + CG_GMM_TAIL_BM - 1) / CG_GMM_TAIL_BM, (n + CG_GMM_TAIL_BN - 1) / CG_GMM_TAIL_BN,
			   g, mt, nb);
		o.m0 = mt * CG_GMM_TAIL_BM + part / parts * BM;
		o.n0 = nb * CG_GMM_TAIL_BN + part % parts * BN;
		o.rows = min(BM, m - o.m0);
		if (o.rows <= 0 || o.n0 >= n)
			return false;
		o.g = __ldg(index + o.m0);
		return o.g >= 0 && o.g < g;
	}

	/* False when the tile has nothing to compute (a padding block). */
	__device__ bool tile(int t, Tile &o) const
	{
		/* only the 64-row kernels run tails: the prefill kernels' producer
		 * loop stays as it was */
		if constexpr (BM < CG_GMM_TAIL_BM)
			if (tail_split)
				return tail_tile(t, o);
		int mt, nb;
		band_place(t, m_tiles, n_tiles, g, mt, nb);
		o.n0 = nb * BN;
		if (cg_gmm_form_has_tables(form)) {
			/* largest group whose first m-tile is <= mt: pre[lo] <= mt < pre[hi] */
			int lo = 0, hi = g;
			while (hi - lo > 1) {
				const int mid = (lo + hi) >> 1;
				if (pre[mid] <= mt)
					lo = mid;
				else
					hi = mid;
			}
			o.g = lo;
			o.m0 = start[lo] + (mt - pre[lo]) * BM;
			o.rows = min(BM, end[lo] - o.m0);
			return true;
		}
		o.m0 = mt * BM;
		o.rows = min(BM, m - o.m0);
		o.g = __ldg(index + o.m0);
		return o.g >= 0 && o.g < g;
	}

	/* Row r (0-based in the tile) of tile o is written where this is o.g
	 * (-1 past the tile's rows): in the contiguous form the row's group id,
	 * a global load, which the SM90 consumers issue at a tile's start and
	 * compare after its k-loop (fp8's padding-half check, at once). */
	__device__ int row_group(const Tile &o, int r) const
	{
		if (r >= o.rows)
			return -1;
		return cg_gmm_form_has_tables(form) ? o.g : __ldg(index + o.m0 + r);
	}

	__device__ bool row_ok(const Tile &o, int r) const { return row_group(o, r) == o.g; }
};

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
	const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
	return *reinterpret_cast<const uint32_t *>(&v);
}

} // namespace cg
