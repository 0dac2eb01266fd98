/* The fp8 consumer loop's pass structures on the tensor pipe alone: no
 * TMA, no barriers, no epilogue, operands resident in shared memory, the
 * kernels' own wgmma wrappers (gmm_sm90.cuh; the two shapes they lack are
 * below).  Two consumer warpgroups per block, one block per multiprocessor,
 * as in the 128 x 256 kernel.  What a structure reaches here is its ceiling
 * in the real kernel; how far below it the real kernel runs is what loads
 * and barriers cost (kernels/NOTES.md v27, v29, v31).  One H200:
 * make bench-passes (REPS=300: the median too, at the GPU's power limit) */
#include <cuda.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gmm_kernels.h"
#include "gmm_sched.cuh"
#include "gmm_sm90.cuh"

using namespace cg;

/* The two wgmma shapes the kernels lack, as overloads of theirs (by the
 * partial sums' size), so that the loops below take any width. */

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

enum {
	FOUR_64,
	FOUR_64_CARRY,
	FOUR_64_STAGGER,
	TWO_128,
	TWO_128_STAGGER,
	TWO_96,
	ONE_192,
	ONE_192_STAGGER,
	ONE_192_BARE,
	NMODES
};
static const struct {
	const char *name;
	int cols; /* of a warpgroup's share, 64 rows */
} mode[NMODES] = {
	{"4 pipelined passes of m64n64k32 x4, 32 FFMA each (ours)", 256},
	{"... the last promoted after the next k-step's first, 2 of 3", 256},
	{"... the second warpgroup started 500 clocks late", 256},
	{"2 passes of m64n128k32 x4, each waited, 64 FFMA each", 256},
	{"... the second warpgroup started 500 clocks late", 256},
	{"2 pipelined passes of m64n96k32 x4, 48 FFMA each", 192},
	{"1 pass of m64n192k32 x4, waited, 96 FFMA (DeepGEMM's)", 192},
	{"... the second warpgroup started 500 clocks late", 192},
	{"1 pass of m64n192k32 x4, waited, no promotion", 192},
};

/* out of phase: each warpgroup's promotion no longer meets the other's */
__device__ constexpr bool staggered(int m)
{
	return m == FOUR_64_STAGGER || m == TWO_128_STAGGER || m == ONE_192_STAGGER;
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

/* NP pipelined passes a k-step, each of 2R columns (R partial sums a
 * thread), promoted while the next pass computes: the kernels' consumer
 * loop.  With CARRY_OUT the last pass, waited for, is left for the next
 * k-step to promote once its first pass is issued (CARRY_IN), so that no
 * promotion stands between two k-steps' wgmma; ptxas accepts that only
 * within straight-line code, not across a loop's back edge (C7517) */
template <int NP, int R, bool CARRY_IN = false, bool CARRY_OUT = false>
__device__ __forceinline__ void pipelined(float (&acc)[128], float (&part)[2][R], const Desc &a, const Desc &b, float s)
{
	static_assert(!CARRY_IN || NP % 2 == 0, "the carried pass's set is not the first pass's");
#pragma unroll
	for (int p = 0; p < NP; ++p) {
		wgmma_fence();
#pragma unroll
		for (int k = 0; k < 4; ++k)
			wgmma_fp8(part[p & 1], a.at(k * 32), b.at(p * 2 * R * 128 + k * 32), k != 0);
		wgmma_commit();
		if (p > 0) {
			wgmma_wait<1>();
			promote(acc, part[(p - 1) & 1], p - 1, s);
		} else if (CARRY_IN) {
			promote(acc, part[(NP - 1) & 1], NP - 1, s);
		}
	}
	wgmma_wait<0>();
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

/* A and B are whatever the shared memory holds: the tensor pipe's speed
 * does not depend on the values, and the timing is in clocks */
extern __shared__ __align__(1024) unsigned char bench_smem[];

/* iters k-steps of 128 channels over one 64 x cols share per warpgroup;
 * cyc: the block's clocks; sink keeps the sums alive */
template <int MODE>
__global__ void __launch_bounds__(256, 1) passes(int iters, long long *cyc, float *sink, float s)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
	const int wg = threadIdx.x / 128;
	const Desc a(smem_u32(bench_smem) + wg * 8192, 16, 1024), b(smem_u32(bench_smem) + 16384, 16, 1024);
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
	__syncthreads();
	if (staggered(MODE) && wg == 1)
		for (const long long w = clock64(); clock64() - w < 500;)
			;
	const long long t0 = clock64();
	/* the carried structure: three k-steps a turn, as the kernel's
	 * three-stage ring (iters a multiple of 3) */
	for (int it = 0; it < iters; it += MODE == FOUR_64_CARRY ? 3 : 1) {
		if constexpr (MODE == FOUR_64 || MODE == FOUR_64_STAGGER) {
			pipelined<4>(acc, p64, a, b, s);
		} else if constexpr (MODE == FOUR_64_CARRY) {
			pipelined<4, 32, false, true>(acc, p64, a, b, s);
			pipelined<4, 32, true, true>(acc, p64, a, b, s);
			pipelined<4, 32, true, false>(acc, p64, a, b, s);
		} else if constexpr (MODE == TWO_96) {
			pipelined<2>(acc, p96, a, b, s);
		} else if constexpr (MODE == TWO_128 || MODE == TWO_128_STAGGER) {
			waited<2>(acc, p128, a, b, s);
		} else {
			waited<1, 96, MODE != ONE_192_BARE>(acc, p192, a, b, s);
		}
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
	if (threadIdx.x == 0)
		cyc[blockIdx.x] = t1 - t0;
#else
	(void)iters;
	(void)cyc;
	(void)sink;
	(void)s;
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

template <int MODE>
static int run(int nsm, int reps, long long *cyc, float *sink)
{
	const int smem = 48 * 1024, iters = 4095;
	static Rep rep[100000];
	CHECK(cudaFuncSetAttribute(passes<MODE>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
	passes<MODE><<<nsm, 256, smem>>>(63, cyc, sink, 1.f); /* warm-up */
	CHECK(cudaDeviceSynchronize());
	cudaEvent_t e0, e1;
	CHECK(cudaEventCreate(&e0));
	CHECK(cudaEventCreate(&e1));
	for (int r = 0; r < reps; ++r) {
		CHECK(cudaEventRecord(e0));
		passes<MODE><<<nsm, 256, smem>>>(iters, cyc, sink, 1.f);
		CHECK(cudaEventRecord(e1));
		long long h[1024];
		CHECK(cudaMemcpy(h, cyc, nsm * sizeof(*h), cudaMemcpyDeviceToHost));
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
	/* two warpgroups, 64 rows x cols x 128 channels a k-step each */
	const double fma = 2.0 * 64 * mode[MODE].cols * 128 * iters;
	const Rep &best = rep[0], &med = rep[reps / 2];
	printf("%-58s %5.0f FMA/clk/SM  %3.0f%% of 4096", mode[MODE].name, fma / best.clk, 100 * fma / best.clk / 4096);
	if (reps > 7)
		printf("; median %3.0f%% at %4.0f MHz", 100 * fma / med.clk / 4096, med.mhz);
	printf("\n");
	return 0;
}

/* bench_passes [launches per structure]: 7 by default, the best of them;
 * given more (a few hundred keep the GPU at its power limit), the median
 * too and the SM clock it ran at */
int main(int argc, char **argv)
{
	int dev, nsm, major;
	const int reps = argc > 1 ? atoi(argv[1]) : 7;
	if (reps < 1 || reps > 100000) {
		fprintf(stderr, "usage: bench_passes [launches per structure, 1-100000]\n");
		return 2;
	}
	CHECK(cudaGetDevice(&dev));
	CHECK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev));
	CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
	if (nsm > 1024) /* run()'s copy of the clocks */
		nsm = 1024;
	if (major != 9) {
		fprintf(stderr, "bench_passes: needs an sm_90 GPU (this one is sm_%d*)\n", major);
		return 1;
	}
	long long *cyc;
	float *sink;
	CHECK(cudaMalloc(&cyc, nsm * sizeof(*cyc)));
	CHECK(cudaMalloc(&sink, nsm * 256 * sizeof(*sink)));
	printf("# %d blocks of two consumer warpgroups, 4095 k-steps of 128 channels; best of %d\n", nsm, reps);
	return run<FOUR_64>(nsm, reps, cyc, sink) || run<FOUR_64_CARRY>(nsm, reps, cyc, sink) ||
	       run<FOUR_64_STAGGER>(nsm, reps, cyc, sink) || run<TWO_128>(nsm, reps, cyc, sink) ||
	       run<TWO_128_STAGGER>(nsm, reps, cyc, sink) || run<TWO_96>(nsm, reps, cyc, sink) ||
	       run<ONE_192>(nsm, reps, cyc, sink) || run<ONE_192_STAGGER>(nsm, reps, cyc, sink) ||
	       run<ONE_192_BARE>(nsm, reps, cyc, sink);
}
