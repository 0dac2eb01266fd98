/* The fp8 consumer loop's pass structures on the tensor pipe, with the
 * kernels' own wgmma wrappers (gmm_sm90.cuh; the shapes they lack are
 * below), one block per multiprocessor laid out as the 128 x 256 kernel's:
 * a producer warpgroup at 40 registers, two consumer warpgroups at 232.
 * First with the operands resident in shared memory (no loads, no
 * barriers: a structure's ceiling), then loaded from L2 through the
 * kernels' ring of stages (what the loads and the stages' barriers take; no
 * scales, no epilogue).  How far below these the kernels run is what the
 * rest costs (kernels/NOTES.md v27, v29, v31).  One H200:
 *   make bench-passes [REPS=300]  the median too, at the GPU's power limit
 *   [BLOCKS=66]                   fewer blocks: L2 shared by fewer of them
 *   LOADS=0|1|2 (environment)     what the ring's stages load: 1 A alone, 2 B
 *                                 alone, 0 nothing (the barriers alone); 3,
 *                                 the default, both */
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm_kernels.h"
#include "gmm_sched.cuh"
#include "gmm_sm90.cuh"
#include "gmm_sm80.cuh" /* ldmatrix_x4 */

using namespace cg;

/* The wgmma forms the kernels lack, as overloads of theirs (by the partial
 * sums' size, or A in registers), so that the loops below take any. */

/* D(64 x 192) (+)= A(64 x 32) * B(32 x 192), e4m3: DeepGEMM's pass */
__device__ __forceinline__ void wgmma_fp8(float (&d)[96], uint64_t da, uint64_t db, int scale_d)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3 "
		     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
		     "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, "
		     "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, "
		     "%60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
		     "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, %96, %97, p, 1, 1;\n}\n"
		     : CG_F64(d, 0), CG_F16(d, 64), CG_F16(d, 80)
		     : "l"(da), "l"(db), "r"(scale_d));
}

/* D(64 x 256) (+)= A(64 x 32) * B(32 x 256), e4m3: the rescaled sums' one
 * pass (NOTES v33) */
__device__ __forceinline__ void wgmma_fp8(float (&d)[128], uint64_t da, uint64_t db, int scale_d)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 " CG_R128 ", %128, %129, p, 1, 1;\n}\n"
		     : CG_F64(d, 0), CG_F64(d, 64)
		     : "l"(da), "l"(db), "r"(scale_d));
}

/* D(64 x 96) (+)= A(64 x 32) * B(32 x 96), e4m3: the two-pass 128 x 192
 * tile's (NOTES v29) */
__device__ __forceinline__ void wgmma_fp8(float (&d)[48], uint64_t da, uint64_t db, int scale_d)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %50, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n96k32.f32.e4m3.e4m3 "
		     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
		     "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "
		     "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, %48, %49, p, 1, 1;\n}\n"
		     : CG_F16(d, 0), CG_F16(d, 16), CG_F16(d, 32)
		     : "l"(da), "l"(db), "r"(scale_d));
}

/* D(64 x 64) (+)= A(64 x 32, e4m3 in registers) * B(32 x 64), e4m3: A as
 * ldmatrix_x4 leaves it (rows g and g + 8 of the warp's 16, bytes 4q.. and
 * 16 + 4q.. of the slice) */
__device__ __forceinline__ void wgmma_fp8(float (&d)[32], const uint32_t (&a)[4], uint64_t db, int scale_d)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 " CG_R32
		     ", {%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
		     : CG_F16(d, 0), CG_F16(d, 16)
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
}

/* bytes (a multiple of 16) from global to shared memory, completing on bar */
__device__ __forceinline__ void bulk_load(void *dst, const void *src, uint32_t bytes, uint64_t *bar)
{
	asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
			     smem_u32(dst)),
		     "l"(src), "r"(bytes), "r"(smem_u32(bar))
		     : "memory");
}

enum {
	FOUR_64,
	FOUR_64_RS,
	FOUR_64_CARRY,
	FOUR_64_STAGGER,
	FOUR_64_SOLO,
	FOUR_64_BAROPS,
	FOUR_64_BARWAIT,
	FOUR_64_BARARRIVE,
	FOUR_64_KOPS,
	FOUR_64_WGREL,
	FOUR_64_EARLY,
	FOUR_64_RELFIRST,
	FOUR_64_NAMED,
	FOUR_64_ONEWAIT,
	TWO_128,
	TWO_128_STAGGER,
	TWO_96,
	ONE_192,
	ONE_192_STAGGER,
	ONE_192_BARE,
	ONE_256_RESCALED,
	NMODES
};
static const char *const name[NMODES] = {
	"4 pipelined passes of m64n64k32 x4, 32 FFMA each (ours)",
	"... A from registers (ldmatrix once a k-step)",
	"... the last promoted after the next k-step's first, 2 of 3",
	"... the second warpgroup started 500 clocks late",
	"... one consumer warpgroup alone (the other idle)",
	"... with a ring's barrier operations, never blocking",
	"... with only the wait of those",
	"... with only the arrival of those",
	"... with those and the kernels' three scale loads",
	"... the release one arrival a warpgroup, not a warp",
	"... the next stage waited for before the drain",
	"... the stage released before the last promotion",
	"... the stage's wait a producer warp's, passed on by bar.sync",
	"... the stage's wait one warp's a warpgroup, then bar.sync",
	"2 passes of m64n128k32 x4, each waited, 64 FFMA each",
	"... the second warpgroup started 500 clocks late",
	"2 pipelined passes of m64n96k32 x4, 48 FFMA each",
	"1 pass of m64n192k32 x4, waited, 96 FFMA (DeepGEMM's)",
	"... the second warpgroup started 500 clocks late",
	"1 pass of m64n192k32 x4, waited, no promotion",
	"1 pass of m64n256k32 x4 into the sums, waited, 128 FMUL",
};

/* out of phase: each warpgroup's promotion no longer meets the other's */
__device__ constexpr bool staggered(int m)
{
	return m == FOUR_64_STAGGER || m == TWO_128_STAGGER || m == ONE_192_STAGGER;
}

/* the ring's barrier operations on barriers that never block, without
 * the ring: the wait for a stage, the release's arrival (FOUR_64_WGREL:
 * both, one arrival a warpgroup; through the ring, its release so) */
__device__ constexpr bool waits_done(int m, int ring)
{
	return m == FOUR_64_BAROPS || m == FOUR_64_BARWAIT || m == FOUR_64_KOPS || (!ring && m == FOUR_64_WGREL);
}
__device__ constexpr bool arrives_never(int m, int ring)
{
	return m == FOUR_64_BAROPS || m == FOUR_64_BARARRIVE || m == FOUR_64_KOPS || (!ring && m == FOUR_64_WGREL);
}

/* one pass's partial sums into its columns of acc */
template <int R>
__device__ __forceinline__ void promote(float (&acc)[128], float (&part)[R], int p, float s)
{
	fence_regs(part);
#pragma unroll
	for (int i = 0; i < R; ++i)
		acc[R * p + i] = fmaf(part[i], s, acc[R * p + i]);
}

/* an empty hook of pipelined() */
struct Nop {
	__device__ void operator()() const {}
};

/* NP pipelined passes a k-step, each of 2R columns (R partial sums a
 * thread), promoted while the next pass computes: the kernels' consumer
 * loop.  With CARRY_OUT the last pass, waited for, is left for the next
 * k-step to promote once its first pass is issued (CARRY_IN), so that no
 * promotion stands between two k-steps' wgmma; ptxas accepts that only
 * within straight-line code, not across a loop's back edge (C7517).
 * Hooks: drain() after the last pass is issued, drained() after it
 * completes, before its promotion (where the kernels release the stage) */
template <int NP, int R, bool CARRY_IN = false, bool CARRY_OUT = false, bool RS = false, class D1 = Nop,
	  class D2 = Nop>
__device__ __forceinline__ void pipelined(float (&acc)[128], float (&part)[2][R], const Desc &a, const Desc &b, float s,
					  uint32_t a_rows = 0, D1 drain = {}, D2 drained = {})
{
	static_assert(!CARRY_IN || NP % 2 == 0, "the carried pass's set is not the first pass's");
	/* RS: the k-step's A read once, from the thread's ldmatrix row a_rows
	 * (each 16-byte chunk where the 128-byte swizzle puts it) */
	uint32_t af[RS ? 4 : 1][4];
	const int lane = threadIdx.x & 31;
	if constexpr (RS) {
#pragma unroll
		for (int k = 0; k < 4; ++k)
			ldmatrix_x4(af[k], a_rows + (((2 * k + (lane >> 4)) ^ (lane & 7)) << 4));
	}
#pragma unroll
	for (int p = 0; p < NP; ++p) {
		wgmma_fence();
#pragma unroll
		for (int k = 0; k < 4; ++k) {
			if constexpr (RS)
				wgmma_fp8(part[p & 1], af[k], b.at(p * 2 * R * 128 + k * 32), k != 0);
			else
				wgmma_fp8(part[p & 1], a.at(k * 32), b.at(p * 2 * R * 128 + k * 32), k != 0);
		}
		wgmma_commit();
		if (p == NP - 1)
			drain();
		if (p > 0) {
			wgmma_wait<1>();
			promote(acc, part[(p - 1) & 1], p - 1, s);
		} else if (CARRY_IN) {
			promote(acc, part[(NP - 1) & 1], NP - 1, s);
		}
	}
	wgmma_wait<0>();
	drained();
	if (!CARRY_OUT)
		promote(acc, part[(NP - 1) & 1], NP - 1, s);
}

/* NP passes a k-step, each of 2R columns, each waited for before its
 * promotion (without PROMOTE: the tensor pipe alone, the partial sums
 * summed across k-steps, else ptxas drops the dead wgmma) */
template <int NP, int R, bool PROMOTE = true>
__device__ __forceinline__ void waited(float (&acc)[128], float (&part)[R], const Desc &a, const Desc &b, float s)
{
#pragma unroll
	for (int p = 0; p < NP; ++p) {
		wgmma_fence();
#pragma unroll
		for (int k = 0; k < 4; ++k)
			wgmma_fp8(part, a.at(k * 32), b.at(p * 2 * R * 128 + k * 32), !PROMOTE || k != 0);
		wgmma_commit();
		wgmma_wait<0>();
		if constexpr (PROMOTE)
			promote(acc, part, p, s);
		else
			fence_regs(part);
	}
}

/* No partial sums: the wgmma accumulates into the sums themselves, which
 * hold the sum over the k blocks so far divided by the last block's scale,
 * rescaled by the ratio of the scales before each k-step (one ratio here;
 * four a thread in a kernel: two rows by two 128-column blocks) */
__device__ __forceinline__ void rescaled(float (&acc)[128], const Desc &a, const Desc &b, float r)
{
#pragma unroll
	for (int i = 0; i < 128; ++i)
		acc[i] *= r;
	fence_regs(acc); /* the products before the fence, or the compiler moves them past it */
	wgmma_fence();
#pragma unroll
	for (int k = 0; k < 4; ++k)
		wgmma_fp8(acc, a.at(k * 32), b.at(k * 32), 1);
	wgmma_commit();
	wgmma_wait<0>();
	fence_regs(acc);
}

/* A and B are whatever the shared memory holds: the tensor pipe's speed
 * does not depend on the values, and the timing is in clocks */
extern __shared__ __align__(1024) unsigned char bench_smem[];

/* columns of a structure's warpgroup share */
__host__ __device__ constexpr int cols_of(int m)
{
	return m == TWO_96 || (m >= ONE_192 && m <= ONE_192_BARE) ? 192 : 256;
}

/* RING > 0: the operands come through a ring of RING stages as in the
 * kernels: a producer warpgroup's thread loads each k-step's A (128 rows)
 * and B (128 bytes a column) from L2 by TMA, the consumers wait for it and
 * release the stage after the k-step (the kernels' 128 x 256 tile has 3
 * stages of 48 KB, DeepGEMM's 128 x 192 4 of 40 KB).  RING = 0: the
 * operands stay in stage 0 and the producer idles. */
enum { A_BYTES = 16 * 1024, STAGE_BYTES = 48 * 1024, SMEM_BYTES = 4 * STAGE_BYTES + 10 * 8 + 128 * 4 };

/* iters k-steps of 128 channels over one 64 x cols share per consumer
 * warpgroup; cyc: the first consumer's clocks; sink keeps the sums alive;
 * src: STAGE_BYTES a block, L2-resident */
template <int MODE, int RING>
__global__ void __launch_bounds__(384, 1) passes(int iters, long long *cyc, float *sink, float s, const char *src,
						  int loads)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
	constexpr int COLS = cols_of(MODE), STAGES = RING ? RING : 1;
	static_assert(STAGES <= 4, "shared memory holds 4 stages");
	static_assert(!RING || MODE != FOUR_64_CARRY, "the carried structure takes three k-steps a turn");
	static_assert(RING || (MODE != FOUR_64_NAMED && MODE != FOUR_64_ONEWAIT), "ring structures");
	uint64_t *full = reinterpret_cast<uint64_t *>(bench_smem + 4 * STAGE_BYTES), *empty = full + 4;
	/* waits_done() and arrives_never(): a barrier whose phase 0 is complete,
	 * waited on, and one whose phase never completes, arrived on; after
	 * them FOUR_64_KOPS's scales (whatever shared memory holds) */
	uint64_t *done = empty + 4, *never = done + 1;
	if (threadIdx.x == 0) {
		for (int i = 0; i < STAGES; ++i) {
			mbar_init(&full[i], 1);
			mbar_init(&empty[i], MODE == FOUR_64_WGREL ? 2 : 8); /* one arrival per consumer warp(group) */
		}
		mbar_init(done, 1);
		mbar_init(never, (1u << 20) - 1);
		asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
		mbar_arrive(done);
	}
	__syncthreads();
	const int wg = __shfl_sync(~0u, threadIdx.x / 128, 0);
	if (wg == 0) {
		asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
		if (RING && threadIdx.x == 0) {
			const char *from = src + blockIdx.x * STAGE_BYTES;
			for (int it = 0; it < iters; ++it) {
				const int st = it % STAGES, turn = it / STAGES;
				if (turn > 0)
					mbar_wait(&empty[st], (turn - 1) & 1);
				unsigned char *stage = bench_smem + st * STAGE_BYTES;
				mbar_expect_tx(&full[st], (loads & 1 ? A_BYTES : 0) + (loads & 2 ? COLS * 128 : 0));
				if (loads & 1)
					bulk_load(stage, from, A_BYTES, &full[st]);
				if (loads & 2)
					bulk_load(stage + A_BYTES, from + A_BYTES, COLS * 128, &full[st]);
			}
		}
		/* FOUR_64_NAMED: warp 1 waits for each stage and passes it on to
		 * each consumer warpgroup through the kernels' named barrier per
		 * stage and warpgroup (relay_bar; at most one arrival ahead: the
		 * stage's next phase needs the consumers' release, after their
		 * bar.sync) */
		if (RING && MODE == FOUR_64_NAMED && (threadIdx.x >> 5) == 1) {
			for (int it = 0; it < iters; ++it) {
				const int st = it % STAGES;
				mbar_wait(&full[st], (it / STAGES) & 1);
#pragma unroll
				for (int c = 0; c < 2; ++c)
					bar_arrive(relay_bar(st, 2, c), CG_RELAY_THREADS);
			}
		}
		return;
	}
	asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
	const int cw = wg - 1, lane = threadIdx.x & 31;
	if (MODE == FOUR_64_SOLO && cw == 1)
		return;
	const uint32_t base = smem_u32(bench_smem) + cw * 8192;
	const uint32_t a_rows = base + (((threadIdx.x >> 5) & 3) * 16 + (lane & 7) + 8 * ((lane >> 3) & 1)) * 128;
	/* the partial sums each structure needs (the others fold away) */
	float acc[128], p64[2][32], p96[2][48], p128[64], p192[96];
#pragma unroll
	for (int i = 0; i < 128; ++i)
		acc[i] = 0.f;
#pragma unroll
	for (int i = 0; i < 32; ++i)
		p64[0][i] = p64[1][i] = 0.f;
#pragma unroll
	for (int i = 0; i < 48; ++i)
		p96[0][i] = p96[1][i] = 0.f;
#pragma unroll
	for (int i = 0; i < 64; ++i)
		p128[i] = 0.f;
#pragma unroll
	for (int i = 0; i < 96; ++i)
		p192[i] = 0.f;
	if (staggered(MODE) && cw == 1)
		for (const long long w = clock64(); clock64() - w < 500;)
			;
	const long long t0 = clock64();
	/* the carried structure: three k-steps a turn, as the kernel's
	 * three-stage ring (iters a multiple of 3) */
	for (int it = 0; it < iters; it += MODE == FOUR_64_CARRY ? 3 : 1) {
		const int st = RING ? it % STAGES : 0;
		if constexpr (MODE == FOUR_64_NAMED) {
			bar_sync(relay_bar(st, 2, cw), CG_RELAY_THREADS);
		} else if constexpr (MODE == FOUR_64_ONEWAIT) {
			if (((threadIdx.x >> 5) & 3) == 0)
				mbar_wait(&full[st], (it / STAGES) & 1);
			wg_sync(relay_bar(st, 2, cw));
		} else if (RING && (MODE != FOUR_64_EARLY || it == 0)) {
			mbar_wait(&full[st], (it / STAGES) & 1);
		}
		if (waits_done(MODE, RING))
			mbar_wait(done, 0);
		/* FOUR_64_KOPS: the scale of the promotions read from shared memory
		 * as the kernels read theirs (a row's two, a block's pair) */
		float ks = s;
		if constexpr (MODE == FOUR_64_KOPS) {
			const float *sl = reinterpret_cast<const float *>(never + 1);
			const float2 sb = *reinterpret_cast<const float2 *>(sl + 2 * (it & 7));
			ks = sl[16 + (threadIdx.x & 31)] * sl[64 + (threadIdx.x & 31)] * sb.x * sb.y;
		}
		const uint32_t at = st * STAGE_BYTES;
		const Desc a(base + at, 16, 1024), b(smem_u32(bench_smem) + at + A_BYTES, 16, 1024);
		/* the kernels' release(), or WGREL's: thread 0 of the warpgroup,
		 * after its warp's wait for the k-step's wgmma */
		auto free_stage = [&] {
			uint64_t *bar = arrives_never(MODE, RING) ? never : &empty[st];
			if (MODE != FOUR_64_WGREL)
				release(bar, 0, lane);
			else if ((threadIdx.x & 127) == 0)
				mbar_arrive(bar);
		};
		if constexpr (MODE == FOUR_64 || MODE == FOUR_64_STAGGER || MODE == FOUR_64_SOLO || waits_done(MODE, RING) ||
			      arrives_never(MODE, RING) || MODE == FOUR_64_WGREL || MODE == FOUR_64_NAMED ||
			      MODE == FOUR_64_ONEWAIT) {
			pipelined<4>(acc, p64, a, b, ks);
		} else if constexpr (MODE == FOUR_64_EARLY) {
			pipelined<4, 32, false, false, false>(acc, p64, a, b, s, 0, [&] {
				if (it + 1 < iters)
					mbar_wait(&full[(it + 1) % STAGES], ((it + 1) / STAGES) & 1);
			});
		} else if constexpr (MODE == FOUR_64_RELFIRST) {
			pipelined<4, 32, false, false, false>(acc, p64, a, b, s, 0, Nop{}, free_stage);
		} else if constexpr (MODE == FOUR_64_RS) {
			pipelined<4, 32, false, false, true>(acc, p64, a, b, s, a_rows + at);
		} else if constexpr (MODE == FOUR_64_CARRY) {
			pipelined<4, 32, false, true>(acc, p64, a, b, s);
			pipelined<4, 32, true, true>(acc, p64, a, b, s);
			pipelined<4, 32, true, false>(acc, p64, a, b, s);
		} else if constexpr (MODE == TWO_96) {
			pipelined<2>(acc, p96, a, b, s);
		} else if constexpr (MODE == TWO_128 || MODE == TWO_128_STAGGER) {
			waited<2>(acc, p128, a, b, s);
		} else if constexpr (MODE == ONE_256_RESCALED) {
			rescaled(acc, a, b, s);
		} else {
			waited<1, 96, MODE != ONE_192_BARE>(acc, p192, a, b, s);
		}
		if ((RING && MODE != FOUR_64_RELFIRST) || arrives_never(MODE, RING))
			free_stage();
	}
	const long long t1 = clock64();
	float x = 0.f;
#pragma unroll
	for (int i = 0; i < 128; ++i)
		x += acc[i];
#pragma unroll
	for (int i = 0; i < 96; ++i)
		x += p192[i] + (i < 64 ? p128[i] : 0.f) + (i < 48 ? p96[0][i] + p96[1][i] : 0.f) +
		     (i < 32 ? p64[0][i] + p64[1][i] : 0.f);
	sink[blockIdx.x * blockDim.x + threadIdx.x] = x;
	if (threadIdx.x == 128)
		cyc[blockIdx.x] = t1 - t0;
#else
	(void)iters;
	(void)cyc;
	(void)sink;
	(void)s;
	(void)src;
	(void)loads;
	__trap();
#endif
}

#define CHECK(x)                                                                          \
	do {                                                                              \
		cudaError_t e_ = (x);                                                     \
		if (e_ != cudaSuccess) {                                                  \
			fprintf(stderr, "bench_passes: %s: %s\n", #x, cudaGetErrorString(e_)); \
			return 1;                                                         \
		}                                                                         \
	} while (0)

/* clocks of the mean block, and the SM clock they ran at, per launch */
struct Rep {
	double clk, mhz;
};

static int by_clk(const void *x, const void *y)
{
	const double a = ((const Rep *)x)->clk, b = ((const Rep *)y)->clk;
	return (a > b) - (a < b);
}

/* What every structure's run shares: blocks, launches, the device buffers
 * (passes), what the ring's stages load. */
struct Bench {
	int nsm, reps;
	long long *cyc;
	float *sink;
	const char *src;
	int loads;
};

template <int MODE, int RING = 0>
static int run(const Bench &b)
{
	const int nsm = b.nsm, reps = b.reps;
	const int smem = SMEM_BYTES, iters = 4095;
	static Rep rep[100000];
	CHECK(cudaFuncSetAttribute(passes<MODE, RING>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
	passes<MODE, RING><<<nsm, 384, smem>>>(63, b.cyc, b.sink, 1.f, b.src, b.loads); /* warm-up */
	CHECK(cudaDeviceSynchronize());
	cudaEvent_t e0, e1;
	CHECK(cudaEventCreate(&e0));
	CHECK(cudaEventCreate(&e1));
	for (int r = 0; r < reps; ++r) {
		CHECK(cudaEventRecord(e0));
		passes<MODE, RING><<<nsm, 384, smem>>>(iters, b.cyc, b.sink, 1.f, b.src, b.loads);
		CHECK(cudaEventRecord(e1));
		long long h[1024];
		CHECK(cudaMemcpy(h, b.cyc, nsm * sizeof(*h), cudaMemcpyDeviceToHost));
		float ms;
		CHECK(cudaEventElapsedTime(&ms, e0, e1));
		double mean = 0, most = 0;
		for (int i = 0; i < nsm; ++i) {
			mean += (double)h[i] / nsm;
			most = h[i] > most ? h[i] : most;
		}
		rep[r] = (Rep){mean, most / ms / 1e3};
	}
	CHECK(cudaEventDestroy(e0));
	CHECK(cudaEventDestroy(e1));
	qsort(rep, reps, sizeof(*rep), by_clk);
	/* two warpgroups (one, SOLO), 64 rows x cols x 128 channels a k-step each */
	const double fma = (MODE == FOUR_64_SOLO ? 1.0 : 2.0) * 64 * cols_of(MODE) * 128 * iters;
	const Rep &best = rep[0], &med = rep[reps / 2];
	printf("%-58s %5.0f FMA/clk/SM  %3.0f%% of 4096", name[MODE], fma / best.clk, 100 * fma / best.clk / 4096);
	if (reps > 7)
		printf("; median %3.0f%% at %4.0f MHz", 100 * fma / med.clk / 4096, med.mhz);
	printf("\n");
	return 0;
}

/* bench_passes [launches per structure [blocks]]: 7 launches by default,
 * the best of them; given more (a few hundred keep the GPU at its power
 * limit), the median too and the SM clock it ran at.  blocks: one per
 * multiprocessor by default; fewer leave L2 to fewer of them. */
int main(int argc, char **argv)
{
	int dev, nsm, major;
	const int reps = argc > 1 ? atoi(argv[1]) : 7;
	if (reps < 1 || reps > 100000) {
		fprintf(stderr, "usage: bench_passes [launches per structure, 1-100000 [blocks]]\n");
		return 2;
	}
	CHECK(cudaGetDevice(&dev));
	CHECK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev));
	CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
	if (major != 9) {
		fprintf(stderr, "bench_passes: needs an sm_90 GPU (this one is sm_%d*)\n", major);
		return 1;
	}
	if (argc > 2 && (atoi(argv[2]) < 1 || atoi(argv[2]) > nsm)) {
		fprintf(stderr, "bench_passes: blocks 1-%d (one per multiprocessor at most)\n", nsm);
		return 2;
	}
	const char *env = getenv("LOADS");
	const int loads = env ? atoi(env) : 3;
	if (env && (strlen(env) != 1 || *env < '0' || *env > '3')) {
		fprintf(stderr, "bench_passes: LOADS=%s: 0 (nothing), 1 (A), 2 (B) or 3 (both, the default)\n", env);
		return 2;
	}
	if (argc > 2)
		nsm = atoi(argv[2]);
	if (nsm > 1024) /* run()'s copy of the clocks */
		nsm = 1024;
	long long *cyc;
	float *sink;
	char *src;
	CHECK(cudaMalloc(&cyc, nsm * sizeof(*cyc)));
	CHECK(cudaMalloc(&sink, nsm * 384 * sizeof(*sink)));
	CHECK(cudaMalloc(&src, (size_t)nsm * STAGE_BYTES));
	CHECK(cudaMemset(src, 0, (size_t)nsm * STAGE_BYTES));
	printf("# %d blocks of two consumer warpgroups, 4095 k-steps of 128 channels; best of %d\n", nsm, reps);
	static const char *const what[] = {"nothing", "A alone", "B alone"};
	if (loads != 3)
		printf("# the ring's stages load %s\n", what[loads]);
	const Bench b = {nsm, reps, cyc, sink, src, loads};
	if (run<FOUR_64>(b) || run<FOUR_64_RS>(b) || run<FOUR_64_CARRY>(b) || run<FOUR_64_STAGGER>(b) ||
	    run<FOUR_64_SOLO>(b) || run<FOUR_64_BAROPS>(b) || run<FOUR_64_BARWAIT>(b) || run<FOUR_64_BARARRIVE>(b) ||
	    run<FOUR_64_KOPS>(b) || run<FOUR_64_WGREL>(b) ||
	    run<TWO_128>(b) || run<TWO_128_STAGGER>(b) || run<TWO_96>(b) || run<ONE_192>(b) ||
	    run<ONE_192_STAGGER>(b) || run<ONE_192_BARE>(b) || run<ONE_256_RESCALED>(b))
		return 1;
	printf("# the same, the operands loaded from L2 through the kernels' ring: 3 stages of 48 KB (256 columns)\n");
	if (run<FOUR_64, 3>(b) || run<FOUR_64_RS, 3>(b) || run<FOUR_64_STAGGER, 3>(b) || run<FOUR_64_EARLY, 3>(b) ||
	    run<FOUR_64_WGREL, 3>(b) || run<FOUR_64_NAMED, 3>(b) || run<FOUR_64_ONEWAIT, 3>(b) ||
	    run<FOUR_64_RELFIRST, 3>(b) || run<TWO_128, 3>(b) ||
	    run<TWO_128_STAGGER, 3>(b) || run<ONE_256_RESCALED, 3>(b))
		return 1;
	printf("# 4 stages (48 KB; 40 KB for 192 columns, DeepGEMM's ring)\n");
	return run<FOUR_64, 4>(b) || run<FOUR_64_STAGGER, 4>(b) || run<FOUR_64_EARLY, 4>(b) || run<FOUR_64_WGREL, 4>(b) ||
	       run<FOUR_64_RELFIRST, 4>(b) || run<FOUR_64_NAMED, 4>(b) || run<FOUR_64_ONEWAIT, 4>(b) || run<TWO_128, 4>(b) || run<TWO_96, 4>(b) ||
	       run<ONE_192, 4>(b) || run<ONE_192_STAGGER, 4>(b) || run<ONE_256_RESCALED, 4>(b);
}
