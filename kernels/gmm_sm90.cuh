/* Hopper (sm_90a) grouped GEMM: TMA loads into a ring of shared-memory
 * stages guarded by mbarriers, wgmma from shared memory, one producer
 * warpgroup (warp 0: TMA; warp 1: fp8 scales where TMA cannot load sfa)
 * and BM/64 consumer warpgroups, a persistent grid walking the (group,
 * m-tile, n-tile) work of gmm_sched.cuh.
 *
 * Tile rows are 128 bytes (64 bf16 or 128 fp8 channels) stored with the
 * 128-byte swizzle, so one wgmma descriptor shape serves every operand:
 * 8-row core groups 1024 bytes apart.  B in [G, K, N] is loaded as BN/64
 * boxes of 64 columns x BK rows and read N-major (wgmma's transpose bit).
 * Measurements behind the choices here: kernels/NOTES.md. */
#pragma once

namespace cg {

__device__ __forceinline__ uint32_t smem_u32(const void *p)
{
	return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count)
{
	asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count));
}

__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes)
{
	asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)),
		     "r"(bytes)
		     : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t *bar)
{
	asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

/* CLUSTER: acquire at cluster scope, for arrivals by other CTAs of the
 * cluster (ksplit_gather).  The two differ only in the wait's semantics,
 * which an asm template cannot take as an operand. */
#define CG_MBAR_TRY_WAIT(sem)                                                         \
	asm volatile("{\n.reg .pred p;\n"                                             \
		     "mbarrier.try_wait.parity" sem ".shared::cta.b64 p, [%1], %2;\n" \
		     "selp.u32 %0, 1, 0, p;\n}\n"                                     \
		     : "=r"(done)                                                     \
		     : "r"(smem_u32(bar)), "r"(parity)                                \
		     : "memory")
template <bool CLUSTER = false>
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity)
{
	uint32_t done;
	do {
		if constexpr (CLUSTER)
			CG_MBAR_TRY_WAIT(".acquire.cluster");
		else
			CG_MBAR_TRY_WAIT("");
	} while (!done);
}
#undef CG_MBAR_TRY_WAIT

__device__ __forceinline__ void tma_load_2d(void *dst, const CUtensorMap *map, uint64_t *bar, int c0, int c1)
{
	asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
		     " [%0], [%1, {%3, %4}], [%2];" ::"r"(smem_u32(dst)),
		     "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1)
		     : "memory");
}

__device__ __forceinline__ void tma_load_3d(void *dst, const CUtensorMap *map, uint64_t *bar, int c0, int c1,
					    int c2)
{
	asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
		     " [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(smem_u32(dst)),
		     "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "r"(c2)
		     : "memory");
}

/* 4-byte global -> shared copy whose completion the next
 * cp_async_arrive() reports to an mbarrier */
__device__ __forceinline__ void cp_async_4(void *dst, const void *src)
{
	asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(smem_u32(dst)), "l"(src) : "memory");
}

/* One arrival on bar once this thread's earlier cp.async copies landed. */
__device__ __forceinline__ void cp_async_arrive(uint64_t *bar)
{
	asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_u32(bar)) : "memory");
}

/* Shared -> global TMA store of one box, in the thread's bulk group. */
__device__ __forceinline__ void tma_store_2d(const CUtensorMap *map, const void *src, int c0, int c1)
{
	asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
			     reinterpret_cast<uint64_t>(map)),
		     "r"(smem_u32(src)), "r"(c0), "r"(c1)
		     : "memory");
}

__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

/* the thread's TMA stores have read their shared memory / are complete */
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
__device__ __forceinline__ void bulk_wait() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

/* this thread's shared-memory writes become visible to TMA (async proxy) */
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

/* Barrier id over the 128 threads of one warpgroup, and-reducing p. */
__device__ __forceinline__ bool wg_all(int id, bool p)
{
	uint32_t r;
	asm volatile("{\n.reg .pred p, q;\nsetp.ne.u32 q, %1, 0;\nbar.red.and.pred p, %2, 128, q;\n"
		     "selp.u32 %0, 1, 0, p;\n}\n"
		     : "=r"(r)
		     : "r"(static_cast<uint32_t>(p)), "r"(id)
		     : "memory");
	return r;
}

__device__ __forceinline__ void bar_sync(int id, int threads)
{
	asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void wg_sync(int id) { bar_sync(id, 128); }
__device__ __forceinline__ void bar_arrive(int id, int threads)
{
	asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void prefetch_tensormap(const CUtensorMap *map)
{
	asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

/* wgmma shared-memory descriptor, 128-byte swizzle, built once; at(bytes)
 * is the descriptor that many bytes further (a 32-bit add to the address
 * field, which cannot carry: shared addresses stay below 256 KB). */
struct Desc {
	uint32_t lo, hi;

	__device__ __forceinline__ Desc(uint32_t addr, uint32_t lbo, uint32_t sbo)
		: lo(((addr & 0x3FFFF) >> 4) | (lbo >> 4) << 16), hi((sbo >> 4) | 1u << 30)
	{
	}

	__device__ __forceinline__ uint64_t at(uint32_t bytes) const
	{
		return static_cast<uint64_t>(hi) << 32 | (lo + (bytes >> 4));
	}
};

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
/* until at most N committed groups of this warpgroup are pending */
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }

/* Pin accumulators after a wait so the compiler reads them only then. */
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N])
{
#pragma unroll
	for (int i = 0; i < N; ++i)
		asm volatile("" : "+f"(r[i])::"memory");
}

#define CG_R32                                                                                           \
	"{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
	"%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define CG_R64                                                                                           \
	"{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
	"%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, "  \
	"%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, "  \
	"%59, %60, %61, %62, %63}"
#define CG_R128                                                                                          \
	"{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
	"%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, "  \
	"%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, "  \
	"%59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, "  \
	"%78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, "  \
	"%97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, "     \
	"%113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
#define CG_F4(d, i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define CG_F16(d, i) CG_F4(d, i), CG_F4(d, i + 4), CG_F4(d, i + 8), CG_F4(d, i + 12)
#define CG_F64(d, i) CG_F16(d, i), CG_F16(d, i + 16), CG_F16(d, i + 32), CG_F16(d, i + 48)

/* D(64 x N, fp32) (+)= A(64 x 16) * B(16 x N), bf16 operands in shared
 * memory; TB: B stored N-major. */
template <int TB>
__device__ __forceinline__ void wgmma_bf16(float (&d)[128], uint64_t da, uint64_t db, int scale_d)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " CG_R128
		     ", %128, %129, p, 1, 1, 0, %131;\n}\n"
		     : CG_F64(d, 0), CG_F64(d, 64)
		     : "l"(da), "l"(db), "r"(scale_d), "n"(TB));
}

template <int TB>
__device__ __forceinline__ void wgmma_bf16(float (&d)[64], uint64_t da, uint64_t db, int scale_d)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " CG_R64
		     ", %64, %65, p, 1, 1, 0, %67;\n}\n"
		     : CG_F64(d, 0)
		     : "l"(da), "l"(db), "r"(scale_d), "n"(TB));
}

/* D(64 x 128, fp32) (+)= A(64 x 32) * B(32 x 128), e4m3, both K-major. */
__device__ __forceinline__ void wgmma_fp8(float (&d)[64], uint64_t da, uint64_t db, int scale_d)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " CG_R64 ", %64, %65, p, 1, 1;\n}\n"
		     : CG_F64(d, 0)
		     : "l"(da), "l"(db), "r"(scale_d));
}

/* D(64 x 64, fp32) (+)= A(64 x 32) * B(32 x 64), e4m3, both K-major. */
__device__ __forceinline__ void wgmma_fp8(float (&d)[32], uint64_t da, uint64_t db, int scale_d)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 " CG_R32 ", %32, %33, p, 1, 1;\n}\n"
		     : CG_F16(d, 0), CG_F16(d, 16)
		     : "l"(da), "l"(db), "r"(scale_d));
}

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

template <int BM, int BN, int BK, int STAGES, bool FP8, bool NK>
struct Sm90 {
	static constexpr int NC = CG_GMM_SM90_CONSUMERS(BM, BN);
	static constexpr bool ROW_SPLIT = BM > 64; /* else the consumers split the columns */
	static constexpr int WN = ROW_SPLIT ? BN : BN / NC; /* columns per consumer warpgroup */
	static constexpr int THREADS = (NC + 1) * 128;
	static constexpr int ESZ = FP8 ? 1 : 2;
	static constexpr int A_BYTES = BM * BK * ESZ;
	static constexpr int A_BOX = CG_GMM_A_BOX_ROWS; /* rows of a short tile's A boxes */
	static constexpr int B_BYTES = BN * BK * ESZ;
	static constexpr int ACC = WN / 2; /* fp32 per thread: 64 x WN per warpgroup */
	static constexpr int NSB = BN / 128; /* fp8: 128-column scale blocks per tile */
	static constexpr int NH = WN / 128;  /* ... per warpgroup */
	/* fp8: columns of one wgmma pass into partial sums; 256 columns a
	 * warpgroup take four passes of 64, pipelined (the consumer loop) */
	static constexpr int PW = WN == 256 ? 64 : 128;
	/* fp8: each stage's scales (gmm_kernels.h); sfa from float SFA_AT on,
	 * W floats per row: 4 where row-major sfa comes by TMA (the 4 k blocks
	 * holding the stage's), else 1 (MN-major sfa by TMA, or the scale warp's
	 * copies) */
	static constexpr int SLOT = FP8 ? CG_GMM_SM90_SLOT(BM) : 0;
	static constexpr int SFA_AT = CG_GMM_SM90_SFA_AT;
	static_assert(BK * ESZ == 128, "tile rows are one 128-byte swizzle span");
	static_assert(BM % A_BOX == 0 && A_BOX % 8 == 0, "A's boxes tile its stage in whole swizzle atoms");
	static_assert(!FP8 || (NK && BK == 128), "fp8: K-major B, one scale block per stage");
	static_assert(WN == 128 || WN == 256, "wgmma n");
};

/* D rows of one consumer thread: row and row + 8 of the tile; columns
 * 8j + 2q, +1 for j < ACC/4 (q = lane % 4), accumulator 4j + 2h + e for
 * row + 8h.  Lane pairs swap halves so that each stores 4 consecutive columns
 * (8 bytes): a warp then writes whole 32-byte sectors. */
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

/* 1024-byte aligned, as the 128-byte swizzle of the tiles needs (the
 * kernel checks it): no slack to align it by */
extern __shared__ __align__(1024) unsigned char cg_smem[];

template <int BM, int BN, int BK, int STAGES, bool FP8, bool NK, int EPI>
__device__ __forceinline__ void sm90_gemm(const CUtensorMap &tma, const CUtensorMap &tmr, const CUtensorMap &tmb,
					  const CUtensorMap &tmd, const CUtensorMap &tms, const cg_gmm_args &a)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
	using C = Sm90<BM, BN, BK, STAGES, FP8, NK>;
	constexpr bool EPI_TMA = EPI == CG_GMM_EPI_TMA, KSPLIT = EPI == CG_GMM_EPI_KSPLIT;
	constexpr bool RELAY = FP8 && BM == 128 && !KSPLIT; /* relay() */
	static_assert(!RELAY || CG_RELAY_BAR0 + STAGES * C::NC <= 16, "16 named barriers");
	static_assert(!KSPLIT || C::NC == 1, "a k-split tile is one consumer warpgroup's");
	/* offsets from cg_smem, never through an integer: the compiler then
	 * knows every pointer below is shared memory (the fp8 scales and the
	 * group tables are read with LDS, not generic loads) */
	unsigned char *smem = cg_smem;
	if (smem_u32(cg_smem) & 1023u)
		__trap();
	unsigned char *sa = smem;
	unsigned char *sb = smem + STAGES * C::A_BYTES;
	/* the epilogue's: TMA, the D tile, 64 x WN bf16 per consumer
	 * warpgroup; KSPLIT, the other CTAs' sums and their mbarrier */
	unsigned char *sd = smem + STAGES * (C::A_BYTES + C::B_BYTES);
	float *scales = reinterpret_cast<float *>(sd + cg_gmm_sm90_epi_bytes(EPI, BM, BN));
	uint64_t *recv = reinterpret_cast<uint64_t *>(sd + CG_GMM_KSPLIT_BYTES(BM, BN) - 128);
	uint64_t *full = reinterpret_cast<uint64_t *>(scales + STAGES * C::SLOT);
	uint64_t *empty = full + STAGES;
	const Handoff ho(empty + STAGES);
	int *tab = reinterpret_cast<int *>(empty + STAGES + CG_GMM_SM90_HANDOFF_BYTES / 8);
	/* fp8: sfa by TMA with A and B (the host's tensor map, where the layout
	 * allows), else by the scale warp: measured, the scale warp's per-stage
	 * work cost 3-9% of fp8 prefill time */
	const bool sfa_tma = FP8 && (a.flags & CG_GMM_ARG_SFA_TMA);
	/* sfa floats per row in a stage's slot: a row-major box's, else 1 */
	const int sfa_w = FP8 && (a.flags & CG_GMM_ARG_SFA_ROWS) ? CG_GMM_SFA_ROW_BOX : 1;
	/* broadcast, so that the compiler knows them warp-uniform */
	const uint32_t ranks = KSPLIT ? __shfl_sync(~0u, cluster_size(), 0) : 1;
	const uint32_t rank = KSPLIT ? __shfl_sync(~0u, cluster_rank(), 0) : 0;

	/* a tail launched behind this kernel (grouped_mm.c, launch) may take
	 * each multiprocessor as this kernel's block there ends.  Only then:
	 * whatever else the stream runs next with programmatic serialization
	 * waits for the whole grid, as it would behind a kernel that never
	 * triggers, even if it never executes griddepcontrol.wait. */
	if constexpr (BM == CG_GMM_TAIL_BM)
		if (a.flags & CG_GMM_ARG_TAIL_NEXT)
			asm volatile("griddepcontrol.launch_dependents;");
	if (cg_gmm_form_has_tables(a.form))
		build_tables<BM, C::THREADS>(a, tab);
	if (threadIdx.x == 0) {
		prefetch_tensormap(&tma);
		prefetch_tensormap(&tmr);
		prefetch_tensormap(&tmb);
		if (EPI_TMA && (a.flags & CG_GMM_ARG_D_TMA))
			prefetch_tensormap(&tmd);
		if (sfa_tma)
			prefetch_tensormap(&tms);
		for (int s = 0; s < STAGES; ++s) {
			/* the TMA thread's expect_tx; fp8: plus its sfb copies, or each
			 * lane of the scale warp */
			mbar_init(&full[s], FP8 ? (sfa_tma ? 2 : 33) : 1);
			mbar_init(&empty[s], C::NC * 4); /* one arrival per consumer warp */
		}
		for (int i = 0; i < 2; ++i) {
			mbar_init(&ho.full[i], 1);
			mbar_init(&ho.free[i], C::NC * 4);
		}
		if (KSPLIT && ranks > 1)
			mbar_init(recv, (ranks - 1) * 128); /* every consumer thread of the others */
		asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
	}
	__syncthreads();
	if (KSPLIT && ranks > 1)
		cluster_sync(); /* rank 0's mbarrier initialized before anyone arrives on it */

	/* KSPLIT: this CTA's k blocks [kb0, kb0 + k_iters) of its cluster's
	 * tile; a launch without clusters (ranks 1) computes whole tiles */
	const int k_all = (a.k + BK - 1) / BK;
	const int kb0 = KSPLIT ? static_cast<int>(rank) * k_all / static_cast<int>(ranks) : 0;
	const int k_iters = KSPLIT ? (static_cast<int>(rank) + 1) * k_all / static_cast<int>(ranks) - kb0 : k_all;
	/* broadcast from lane 0 so that the compiler knows it is warp-uniform:
	 * the consumers' wgmma descriptors then live in uniform registers
	 * instead of being moved there before every wgmma (measured: fp8
	 * 128 x 256 k-step 210 -> 186 instructions per warp, 1-3.5% faster) */
	const int wg = __shfl_sync(~0u, threadIdx.x / 128, 0);
	const int lane = threadIdx.x & 31;

	if (wg == 0) {
		/* this warpgroup at 40 registers and two at 232 use exactly the
		 * block's 384 x 168: the consumers' setmaxnreg.inc waits until the
		 * producer has freed what it takes, for ever if the producer keeps
		 * more (kernels/NOTES.md v28: 48 hung) */
		if (C::NC > 1)
			asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
		/* built after the register split: values live across setmaxnreg
		 * must fit the producer's 40 registers, else they spill */
		const Sched<BM, BN> sc(a, tab);
		const int warp = threadIdx.x >> 5;
		if (warp == 0 && lane == 0) {
			/* TMA: A and B tiles of each k-step */
			produce<STAGES, KSPLIT>(sc, ranks, k_iters, empty, &ho, [&](const Tile &tl, int kb, int stage) {
				kb += kb0;
				/* A: a full tile's in one box (tma; measured: 0.4-2.6% less
				 * fp8 prefill time than four boxes of 32 rows), a short
				 * tile's in boxes of A_BOX rows (tmr), only those holding
				 * its rows: a short group's tile (decode) leaves the rest of
				 * its A stage stale, computed on but never stored, instead
				 * of reading rows past the group through L2 once per column
				 * tile (masked decode is bound by L2 throughput) */
				const int a_boxes = (tl.rows + C::A_BOX - 1) / C::A_BOX;
				mbar_expect_tx(&full[stage],
					       a_boxes * C::A_BOX * 128 + C::B_BYTES + (sfa_tma ? sfa_w * BM * 4 : 0));
				const int k0 = kb * BK;
				/* sfa [groups][k blocks][rows of a group] (MN-major) or
				 * [groups][rows of a group][k blocks] (row-major: the box of
				 * the 4 blocks holding kb); masked rows count from their
				 * group's first, the other forms' from A's */
				if (sfa_tma) {
					float *slot = scales + stage * C::SLOT;
					const int r = tl.m0 - tl.g * a.group_rows;
					const bool rows = sfa_w != 1;
					tma_load_3d(slot + C::SFA_AT, &tms, &full[stage],
						    rows ? kb & ~(CG_GMM_SFA_ROW_BOX - 1) : r, rows ? r : kb,
						    a.group_rows ? tl.g : 0);
#pragma unroll
					for (int j = 0; j < C::NSB; ++j)
						cp_async_4(slot + j, sfb_at(a, tl, j, kb));
					cp_async_arrive(&full[stage]);
				}
				if (tl.rows >= BM) {
					tma_load_2d(sa + stage * C::A_BYTES, &tma, &full[stage], k0, tl.m0);
				} else {
#pragma unroll
					for (int i = 0; i < BM / C::A_BOX; ++i)
						if (i < a_boxes)
							tma_load_2d(sa + stage * C::A_BYTES + i * C::A_BOX * 128, &tmr,
								    &full[stage], k0, tl.m0 + i * C::A_BOX);
				}
				if (NK) {
					tma_load_3d(sb + stage * C::B_BYTES, &tmb, &full[stage], k0, tl.n0, tl.g);
				} else {
#pragma unroll
					for (int j = 0; j < BN / 64; ++j)
						tma_load_3d(sb + stage * C::B_BYTES + j * 64 * BK * 2, &tmb, &full[stage],
							    tl.n0 + 64 * j, k0, tl.g);
				}
			});
		} else if (RELAY && warp == 2) { /* warp 1 may be the scale warp */
			relay<STAGES, C::NC>(sc, k_iters, full);
		} else if (FP8 && !sfa_tma && warp == 1) {
			produce<STAGES, KSPLIT>(sc, ranks, k_iters, empty, nullptr, [&](const Tile &tl, int kb, int stage) {
				kb += kb0;
				const float *sfa = a.sfa + tl.g * a.sfa_sg + tl.m0 * a.sfa_sm + kb * a.sfa_sk;
				float *slot = scales + stage * C::SLOT;
#pragma unroll
				for (int i = 0; i < BM / 32; ++i)
					cp_async_4(slot + C::SFA_AT + i * 32 + lane, sfa + min(i * 32 + lane, tl.rows - 1) * a.sfa_sm);
				if (lane < C::NSB)
					cp_async_4(slot + lane, sfb_at(a, tl, lane, kb));
				cp_async_arrive(&full[stage]);
			});
		}
		return;
	}

	if (C::NC > 1)
		asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
	const Sched<BM, BN> sc(a, tab);
	/* consumer warpgroup cw: tile rows [r0, r0 + 64), columns [c0, c0 + WN);
	 * smem rows of A and B (NK: one per column; KN: 64-column boxes of BK
	 * rows) are 128 bytes */
	const int cw = wg - 1;
	const int r0 = C::ROW_SPLIT ? cw * 64 : 0, c0 = C::ROW_SPLIT ? 0 : cw * C::WN;
	const int row = r0 + ((threadIdx.x >> 5) & 3) * 16 + (lane >> 2); /* this thread's tile row */
	const int sa_at = C::SFA_AT + row * sfa_w; /* fp8: its sfa in a stage's slot */
	const Desc a_desc(smem_u32(sa) + r0 * 128, 16, 1024);
	const Desc b_desc(smem_u32(sb) + c0 * 128, NK ? 16 : BK * 128, 1024);
	float acc[C::ACC];
	float part[2][FP8 ? C::PW / 2 : 1]; /* fp8: two sets of partial sums */
#pragma unroll
	for (int i = 0; i < (FP8 ? C::PW / 2 : 1); ++i)
		part[0][i] = part[1][i] = 0.f;
	uint32_t parity = 0;
	const bool epi_tma = EPI_TMA && (a.flags & CG_GMM_ARG_D_TMA);
	const bool leader = (threadIdx.x & 127) == 0;
	unsigned char *dbuf = sd + cw * 64 * C::WN * 2;
	Pending<C::WN / 64> pend{0, 0, 0};

	for (uint32_t i = 0;; ++i) {
		const Tile tl = ho.take(i, lane);
		if (tl.g == Handoff::END)
			break;
		/* whether this thread's two rows are written: their group ids,
		 * loaded now and compared after the k-loop (measured: compared
		 * here, the load's latency held up every tile's start; bf16
		 * prefill up to 1.7% slower, kernels/NOTES.md v45) */
		const int rg[2] = {sc.row_group(tl, row), sc.row_group(tl, row + 8)};
		/* fp8: a warpgroup whose 64 rows hold none to write (padding,
		 * rows past the group) only waits for and releases each stage,
		 * leaving the tensor cores to the other (the host's
		 * CG_GMM_ARG_SKIP_HALF, where this tile's lead over the m-tiles
		 * sharing its B cannot cost them B's reads; kernels/NOTES.md v35) */
		if (FP8 && C::ROW_SPLIT && (a.flags & CG_GMM_ARG_SKIP_HALF) && wg_all(1 + cw, rg[0] != tl.g && rg[1] != tl.g)) {
			consume<STAGES, RELAY>(k_iters, full, parity, cw, C::NC, [&](int, int stage) {
				if (epi_tma && leader)
					pend.issue_one(tmd, dbuf);
				release(empty, stage, lane);
			});
			continue;
		}
		/* Otherwise every warpgroup computes every tile, also rows past the
		 * group's end (never stored; their A may be stale, see the
		 * producer): tiles of equal length keep the m-tiles that share a B
		 * slab in step, so that B streams from DRAM once (measured: idling
		 * on short tiles made DSV3 gate_up 16% slower). */
		if (FP8) {
#pragma unroll
			for (int i = 0; i < C::ACC; ++i)
				acc[i] = 0.f;
		}
		consume<STAGES, RELAY>(k_iters, full, parity, cw, C::NC, [&](int kb, int stage) {
			const uint32_t ad = stage * C::A_BYTES, bd = stage * C::B_BYTES;
			if constexpr (FP8) {
				const float *slot = scales + stage * C::SLOT;
				const int q = (kb0 + kb) & (sfa_w - 1);
				const float sa_0 = slot[sa_at + q], sa_1 = slot[sa_at + 8 * sfa_w + q];
				float sb_h[C::NH];
#pragma unroll
				for (int h = 0; h < C::NH; ++h)
					sb_h[h] = slot[c0 / 128 + h];
				/* per 128-channel block: fresh fp32 partial sums, then
				 * acc += partial * sfa[row] * sfb[block] (DeepGEMM's
				 * promotion).  Passes alternate between two sets of partial
				 * sums, each promoted while the next pass computes (measured,
				 * 256 columns as four passes of 64 against two of 128 each
				 * waited for: level to 2.6% faster; kernels/NOTES.md v20). */
				constexpr int NP = C::WN / C::PW;
				auto promote = [&](int p) {
					float(&t)[C::PW / 2] = part[p & 1];
					fence_regs(t);
					const float sb = sb_h[p * C::PW / 128];
					const float s0 = sa_0 * sb, s1 = sa_1 * sb;
#pragma unroll
					for (int i = 0; i < C::PW / 2; ++i)
						acc[p * C::PW / 2 + i] = fmaf(t[i], (i & 2) ? s1 : s0, acc[p * C::PW / 2 + i]);
				};
#pragma unroll
				for (int p = 0; p < NP; ++p) {
					wgmma_fence();
#pragma unroll
					for (int k = 0; k < BK / 32; ++k)
						wgmma_fp8(part[p & 1], a_desc.at(ad + k * 32),
							  b_desc.at(bd + p * C::PW * 128 + k * 32), k != 0);
					wgmma_commit();
					if (p == 0 && epi_tma && leader)
						pend.issue_one(tmd, dbuf);
					if (p > 0) {
						wgmma_wait<1>();
						promote(p - 1);
					}
				}
				wgmma_wait<0>();
				/* stage read: release it before the last promotion */
				release(empty, stage, lane);
				promote(NP - 1);
			} else {
				wgmma_fence();
#pragma unroll
				for (int k = 0; k < BK / 16; ++k)
					wgmma_bf16<NK ? 0 : 1>(acc, a_desc.at(ad + k * 32), b_desc.at(bd + k * (NK ? 32 : 2048)),
							       (kb | k) != 0);
				wgmma_commit();
				if (epi_tma && leader)
					pend.issue_one(tmd, dbuf);
				wgmma_wait<0>();
				fence_regs(acc);
				release(empty, stage, lane);
			}
		});
		if constexpr (KSPLIT) {
			if (ranks > 1) {
				if (rank != 0) {
					ksplit_send<C::ACC, 128>(acc, reinterpret_cast<float *>(sd), recv, rank);
					continue;
				}
				ksplit_gather<C::ACC, 128>(acc, reinterpret_cast<const float *>(sd), recv, ranks);
			}
		}
		const bool ok[2] = {rg[0] == tl.g, rg[1] == tl.g};
		Tile mine = tl;
		mine.n0 += c0;
		if (epi_tma)
			sm90_store_smem(acc, tmd, a, mine, row, ok, lane, cw, dbuf, pend);
		else
			sm90_store(acc, a, mine, row, ok, lane);
	}
	if (epi_tma && leader) {
		pend.issue_all(tmd, dbuf);
		bulk_wait(); /* the stores read shared memory until they complete */
	}
	/* A tail reads only what was ready before the kernel ahead of it began
	 * and writes other tiles of D, so it waits only here, at its end, for
	 * that kernel to finish: whatever the stream runs next then sees all of
	 * D.  (Without an overlapped launch the wait returns at once.) */
	if constexpr (BM < CG_GMM_TAIL_BM)
		if (a.tail_split)
			asm volatile("griddepcontrol.wait;" ::: "memory");
#else
	(void)tma;
	(void)tmr;
	(void)tmb;
	(void)tmd;
	(void)tms;
	(void)a;
	__trap(); /* the host launches these only on sm_90 */
#endif
}

} // namespace cg
