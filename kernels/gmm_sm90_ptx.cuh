/* Hopper (sm_90a) PTX primitives of the grouped GEMM (gmm_sm90.cuh):
 * shared-memory addresses, mbarriers, TMA and bulk copies, named barriers,
 * wgmma descriptors and the wgmma instructions themselves. */
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
#ifdef CG_GMM_X_D_EVICT_FIRST
	/* a measurement build's (journal v48): D, never read again, first out
	 * of L2, so that a round's A and B keep its room */
	uint64_t policy;
	asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
	asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group.L2::cache_hint [%0, {%2, %3}], [%1], %4;" ::"l"(
			     reinterpret_cast<uint64_t>(map)),
		     "r"(smem_u32(src)), "r"(c0), "r"(c1), "l"(policy)
		     : "memory");
#else
	asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
			     reinterpret_cast<uint64_t>(map)),
		     "r"(smem_u32(src)), "r"(c0), "r"(c1)
		     : "memory");
#endif
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

} // namespace cg
