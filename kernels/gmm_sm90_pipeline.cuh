/* The Hopper grouped GEMM's pipeline (gmm_sm90.cuh): the producer's TMA
 * loads into the ring of shared-memory stages, the consumers' waits and
 * releases, the tile hand-off from the TMA thread, the relay of stages to
 * a consumer's warps, and the cluster's k-split exchange of partial sums.
 * Built on gmm_sm90_ptx.cuh. */
#pragma once

#include "gmm_sm90_ptx.cuh"

namespace cg {

/* sfb [G, ceil(N/128), ceil(K/128)]: block kb of the tile's j-th
 * 128-column block (the last one for columns past N). */
__device__ __forceinline__ const float *sfb_at(const cg_gmm_args &a, const Tile &tl, int j, int kb)
{
	const int nbn = (a.n + 127) / 128, kbn = (a.k + 127) / 128;
	return a.sfb + (static_cast<size_t>(tl.g) * nbn + min(tl.n0 / 128 + j, nbn - 1)) * kbn + kb;
}

/* The TMA thread hands each tile it loads to the consumers through this
 * two-entry ring, ended by a tile of group END: looking a tile up (a division
 * and a search of the group tables, or a global load in the contiguous form)
 * took the consumers 0.3-0.7 us between tiles, while the tensor cores idled;
 * the TMA thread does it ahead of them. */
struct Handoff {
	static constexpr int END = -1;

	Tile *tile;            /* [2] */
	uint64_t *full, *free; /* [2] each: one arrival by the TMA thread; one per consumer warp */

	/* at: CG_GMM_SM90_HANDOFF_BYTES of shared memory, 8-byte aligned */
	__device__ __forceinline__ explicit Handoff(uint64_t *at)
	    : tile(reinterpret_cast<Tile *>(at)), full(at + 2 * sizeof(Tile) / 8), free(full + 2)
	{
	}

	__device__ __forceinline__ void put(uint32_t i, const Tile &tl) const
	{
		mbar_wait(&free[i & 1], ((i >> 1) & 1) ^ 1);
		tile[i & 1] = tl;
		mbar_arrive(&full[i & 1]);
	}

	/* by every thread of a consumer warp */
	__device__ __forceinline__ Tile take(uint32_t i, int lane) const
	{
		mbar_wait(&full[i & 1], (i >> 1) & 1);
		const Tile tl = tile[i & 1];
		__syncwarp();
		if (lane == 0)
			mbar_arrive(&free[i & 1]);
		return tl;
	}
};
static_assert(2 * sizeof(Tile) + 4 * sizeof(uint64_t) == CG_GMM_SM90_HANDOFF_BYTES, "the host's hand-off size");

/* Named barriers a consumer warpgroup waits for a relayed stage on (relay()):
 * one per stage and consumer warpgroup, after __syncthreads' 0 and
 * wg_sync's 1 + warpgroup. */
#define CG_RELAY_BAR0 3
#define CG_RELAY_THREADS 160 /* a consumer warpgroup and the relaying warp */
__device__ __forceinline__ int relay_bar(int stage, int nc, int cw)
{
	return CG_RELAY_BAR0 + stage * nc + cw;
}

/* The ring restarts at stage 0 with every tile, so that the k-loop unrolled
 * over the stages knows each stage at compile time; stages a short tile
 * leaves unused keep their own parity (bit s of parity).  A consumer's walk
 * over one tile: wait for each stage to be full, then step(kb, stage);
 * RELAY, for the stage relayed to warpgroup cw of nc.  (The producer's walk
 * in produce() is written out: this form of it, or the producer's form
 * here, made ptxas spill.) */
template <int STAGES, bool RELAY, class F>
__device__ __forceinline__ void consume(int k_iters, uint64_t *full, uint32_t &parity, int cw, int nc, F step)
{
	for (int kb0 = 0; kb0 < k_iters; kb0 += STAGES) {
#pragma unroll
		for (int stage = 0; stage < STAGES; ++stage) {
			if (kb0 + stage >= k_iters)
				break;
			if constexpr (RELAY) {
				bar_sync(relay_bar(stage, nc, cw), CG_RELAY_THREADS);
			} else {
				mbar_wait(&full[stage], (parity >> stage) & 1);
				parity ^= 1u << stage;
			}
			step(kb0 + stage, stage);
		}
	}
}

/* The producer's tiles, each stage loaded once the consumers released it;
 * KSPLIT: its cluster's one tile of ranks (gmm_kernels.h).  ho: the TMA
 * thread's, passing the tiles on (the scale warp passes none).  FULL: the
 * same walk over the full barriers, each stage handed to fill once loaded
 * (relay()).  The tile index stays blockIdx-based for the other kernels:
 * computed outside and passed in, it left the compiler unsure that the TMA
 * coordinates were warp-uniform, and every TMA load went through a loop
 * (fp8 3-5% slower). */
template <int STAGES, bool KSPLIT, bool FULL = false, class S, class F>
__device__ __forceinline__ void produce(const S &sc, uint32_t ranks, int k_iters, uint64_t *bars, const Handoff *ho,
					F fill)
{
	uint32_t parity = 0, n = 0;
	for (int t = KSPLIT ? blockIdx.x / ranks : blockIdx.x; t < sc.total();
	     t += KSPLIT ? gridDim.x / ranks : gridDim.x) {
		Tile tl;
		if (!sc.tile(t, tl))
			continue;
		if (ho)
			ho->put(n++, tl);
		for (int kb0 = 0; kb0 < k_iters; kb0 += STAGES) {
#pragma unroll
			for (int s = 0; s < STAGES; ++s) {
				if (kb0 + s < k_iters) {
					mbar_wait(&bars[s], ((parity >> s) & 1) ^ (FULL ? 0u : 1u));
					fill(tl, kb0 + s, s);
					parity ^= 1u << s;
				}
			}
		}
	}
	if (ho)
		ho->put(n, Tile{Handoff::END, 0, 0, 0});
}

/* fp8 128 x 256: a producer warp waits for each full stage in the consumers'
 * place and passes it on to each consumer warpgroup through a named barrier
 * (bar.arrive, then their bar.sync: that pair orders the stage's loads
 * before their reads as the mbarrier's wait did).  Measured (kernels/NOTES.md
 * v39): Mixtral 1.1-1.7% faster, the other fp8 shapes level to 2% faster but
 * Qwen3 down (6 k-steps a tile) 0.3-1.6% slower; bf16 level to 1% slower,
 * so its consumers wait for themselves.  At most one arrival is ever pending
 * on a barrier: the stage's next phase needs the consumers' release, after
 * their bar.sync. */
template <int STAGES, int NC, class S>
__device__ __forceinline__ void relay(const S &sc, int k_iters, uint64_t *full)
{
	produce<STAGES, false, true>(sc, 1, k_iters, full, nullptr, [&](const Tile &, int, int stage) {
#pragma unroll
		for (int c = 0; c < NC; ++c)
			bar_arrive(relay_bar(stage, NC, c), CG_RELAY_THREADS);
	});
}

/* A consumer warp done reading a stage: its one arrival on the stage's
 * empty barrier. */
__device__ __forceinline__ void release(uint64_t *empty, int stage, int lane)
{
	__syncwarp();
	if (lane == 0)
		mbar_arrive(&empty[stage]);
}

__device__ __forceinline__ uint32_t cluster_rank()
{
	uint32_t r;
	asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
	return r;
}

__device__ __forceinline__ uint32_t cluster_size()
{
	uint32_t r;
	asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
	return r;
}

/* every thread of every CTA of the cluster */
__device__ __forceinline__ void cluster_sync()
{
	asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

/* A k-split tile's sums (gmm_kernels.h, KSPLIT): the CTA of cluster rank
 * r > 0 writes its ACC floats a thread into slot r - 1 of rank 0's buffer,
 * float4 j of thread i at (slot * ACC/4 + j) * THREADS + i, and arrives on
 * rank 0's mbarrier; rank 0 waits for all of them and adds the slots in rank
 * order, so the sums do not depend on which CTA finished first.  Once a
 * launch: the host gives each cluster one tile (grid = tiles x ranks), so
 * the buffer is written once and the mbarrier completes its phase 0 only. */
template <int ACC, int THREADS>
__device__ __forceinline__ void ksplit_send(const float (&acc)[ACC], float *buf, uint64_t *bar, uint32_t rank)
{
	uint32_t rbuf, rbar;
	asm volatile("mapa.shared::cluster.u32 %0, %1, 0;" : "=r"(rbuf) : "r"(smem_u32(buf)));
	asm volatile("mapa.shared::cluster.u32 %0, %1, 0;" : "=r"(rbar) : "r"(smem_u32(bar)));
	const uint32_t i = threadIdx.x % THREADS;
#pragma unroll
	for (int j = 0; j < ACC / 4; ++j)
		asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(
				     rbuf + (((rank - 1) * (ACC / 4) + j) * THREADS + i) * 16),
			     "f"(acc[4 * j]), "f"(acc[4 * j + 1]), "f"(acc[4 * j + 2]), "f"(acc[4 * j + 3])
			     : "memory");
	asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(rbar) : "memory");
}

template <int ACC, int THREADS>
__device__ __forceinline__ void ksplit_gather(float (&acc)[ACC], const float *buf, uint64_t *bar, uint32_t ranks)
{
	mbar_wait<true>(bar, 0);
	const uint32_t i = threadIdx.x % THREADS;
	for (uint32_t slot = 0; slot + 1 < ranks; ++slot)
#pragma unroll
		for (int j = 0; j < ACC / 4; ++j) {
			const float4 v = reinterpret_cast<const float4 *>(buf)[(slot * (ACC / 4) + j) * THREADS + i];
			acc[4 * j] += v.x;
			acc[4 * j + 1] += v.y;
			acc[4 * j + 2] += v.z;
			acc[4 * j + 3] += v.w;
		}
}

} // namespace cg
