/* The Hopper grouped GEMM's epilogue (gmm_sm90.cuh): a consumer's
 * accumulators stored to D as bf16, straight from registers or through
 * shared memory and a TMA store. */
#pragma once

#include "gmm_sm90_ptx.cuh"

namespace cg {

template <int ACC>
__device__ __forceinline__ void sm90_store(const float (&acc)[ACC], const cg_gmm_args &a, const Tile &tl, int row,
					   const bool (&ok)[2], int lane)
{
	__nv_bfloat16 *d = static_cast<__nv_bfloat16 *>(a.d);
	const int q = lane & 3;
	__nv_bfloat16 *rp[2];
#pragma unroll
	for (int h = 0; h < 2; ++h)
		rp[h] = d + static_cast<size_t>(tl.m0 + row + 8 * h) * a.n + tl.n0;
	const int ncols = a.n - tl.n0;
	if (a.flags & CG_GMM_ARG_D_QUAD) {
		const bool odd = q & 1;
#pragma unroll
		for (int j = 0; j < ACC / 4; j += 2) {
#pragma unroll
			for (int h = 0; h < 2; ++h) {
				const uint32_t own0 = pack_bf16(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
				const uint32_t own1 = pack_bf16(acc[4 * j + 4 + 2 * h], acc[4 * j + 5 + 2 * h]);
				const uint32_t recv = __shfl_xor_sync(~0u, odd ? own0 : own1, 1);
				const int col = 8 * j + 2 * q + (odd ? 6 : 0);
				if (ok[h] && col < ncols) {
					const uint2 v = make_uint2(odd ? recv : own0, odd ? own1 : recv);
					*reinterpret_cast<uint2 *>(rp[h] + col) = v;
				}
			}
		}
		return;
	}
#pragma unroll
	for (int j = 0; j < ACC / 4; ++j)
#pragma unroll
		for (int h = 0; h < 2; ++h)
#pragma unroll
			for (int e = 0; e < 2; ++e) {
				const int col = 8 * j + 2 * q + e;
				if (ok[h] && col < ncols)
					rp[h][col] = __float2bfloat16_rn(acc[4 * j + 2 * h + e]);
			}
}

/* TMA-store epilogue: boxes of a tile's D written to shared memory but not
 * yet stored.  The consumer issues them one per k-step of its next tile, so
 * that D's writes spread over that tile's compute instead of every SM
 * writing its whole tile at once at the tile boundary (measured: fp8
 * prefill 1-3% faster than issuing them all at the tile's end). */
template <int BOXES>
struct Pending {
	int left;   /* boxes not yet issued; box BOXES - left goes next */
	int n0, m0; /* D's column and row of box 0 */

	__device__ __forceinline__ void issue_one(const CUtensorMap &tmd, const unsigned char *buf)
	{
		if (left > 0) {
			--left;
			tma_store_2d(&tmd, buf + (BOXES - 1 - left) * 8192, n0 + 64 * (BOXES - 1 - left), m0);
			bulk_commit();
		}
	}

	__device__ __forceinline__ void issue_all(const CUtensorMap &tmd, const unsigned char *buf)
	{
#pragma unroll
		for (int b = 0; b < BOXES; ++b)
			issue_one(tmd, buf);
	}
};

/* The same rows through shared memory, for a consumer warpgroup: its
 * 64 x WN share of the tile as WN/64 boxes of 64 x 64 in buf, 128-byte rows
 * with the 128-byte swizzle (16-byte chunk c of row r at c ^ (r & 7): a
 * warp's 8 rows then hit 8 distinct bank groups).  With all 64 rows written,
 * TMA stores, which the warpgroup's first thread (the only one whose pend
 * counts) issues later (Pending); else each warp copies its written rows out
 * of buf, a row of WN columns per instruction, 16 bytes a lane (measured:
 * register stores of such a tile, a 32-byte piece of 8 rows per warp
 * instruction, took 1.5 us against 0.4 us through buf).  This epilogue
 * first issues what the last one left and waits until the stores have read
 * buf.  D is 16-byte aligned with rows a multiple of 8 columns (the host's
 * CG_GMM_ARG_D_TMA), so each 16-byte chunk lies wholly inside D or past N. */
template <int ACC>
__device__ __forceinline__ void sm90_store_smem(const float (&acc)[ACC], const CUtensorMap &tmd, const cg_gmm_args &a,
						const Tile &tl, int row, const bool (&ok)[2], int lane, int cw,
						unsigned char *buf, Pending<ACC / 32> &pend)
{
	constexpr int WN = ACC * 2, LPR = WN / 8; /* columns; lanes per row */
	const bool leader = (threadIdx.x & 127) == 0;
	if (leader) {
		pend.issue_all(tmd, buf);
		bulk_wait_read();
	}
	wg_sync(1 + cw); /* buf free */
	const int q = lane & 3, r = row & 63;
#pragma unroll
	for (int j = 0; j < ACC / 4; ++j)
#pragma unroll
		for (int h = 0; h < 2; ++h) {
			const int rr = r + 8 * h;
			const uint32_t off = (j / 8) * 8192 + rr * 128 + (((j & 7) ^ (rr & 7)) << 4) + 4 * q;
			asm volatile("st.shared.b32 [%0], %1;" ::"r"(smem_u32(buf) + off),
				     "r"(pack_bf16(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]))
				     : "memory");
		}
	fence_async_shared();
	const int m0 = tl.m0 + (row & ~63);
	if (wg_all(1 + cw, ok[0] && ok[1])) { /* also: buf written */
		if (leader)
			pend = {ACC / 32, tl.n0, m0};
		return;
	}
	/* this warp's 16 rows, i and i + 8 held by lanes 4i (ok[0], ok[1]) */
	const uint32_t ok_lo = __ballot_sync(~0u, ok[0]), ok_hi = __ballot_sync(~0u, ok[1]);
	const int w16 = r & ~15, chunk = lane % LPR, col = chunk * 8;
	__nv_bfloat16 *d = static_cast<__nv_bfloat16 *>(a.d) + tl.n0 + col;
#pragma unroll
	for (int i = lane / LPR; i < 16; i += 32 / LPR) {
		const int rr = w16 + i;
		if ((((i < 8 ? ok_lo : ok_hi) >> (4 * (i & 7))) & 1) && col < a.n - tl.n0) {
			uint4 v;
			asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
				     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
				     : "r"(smem_u32(buf) + (chunk / 8) * 8192 + rr * 128 + (((chunk & 7) ^ (rr & 7)) << 4)));
			*reinterpret_cast<uint4 *>(d + static_cast<size_t>(m0 + rr) * a.n) = v;
		}
	}
}

} // namespace cg
