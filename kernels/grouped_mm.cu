/* Every kernel of the bundled fatbin, defined from the table in
 * gmm_kernels.h with C names so that the host API finds them by name.
 * Built once per target (sm_90a, sm_80, compute_80 PTX): the Hopper kernels
 * only do work in the sm_90a image. */
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include "gmm_kernels.h"
#include "gmm_sched.cuh"
#include "gmm_sm90.cuh"
#include "gmm_sm80.cuh"

#define CG_FP8_BF16 false
#define CG_FP8_FP8 true
#define CG_NK_NK true
#define CG_NK_KN false

#define CG_DEFINE_SM90(name, dt, bl, bm, bn, bk, st, epi)                                          \
	extern "C" __global__ void __launch_bounds__((CG_GMM_SM90_CONSUMERS(bm, bn) + 1) * 128, 1) \
	    name(const __grid_constant__ CUtensorMap tma, const __grid_constant__ CUtensorMap tmr, \
		 const __grid_constant__ CUtensorMap tmb, const __grid_constant__ CUtensorMap tmd, \
		 const __grid_constant__ CUtensorMap tms, const cg_gmm_args args)                  \
	{                                                                                          \
		cg::sm90_gemm<bm, bn, bk, st, CG_FP8_##dt, CG_NK_##bl, CG_GMM_EPI_##epi>(tma, tmr, tmb,  \
									      tmd, tms, args); \
	}

#define CG_DEFINE_SM80(name, dt, bl, bm, bn, bk, st, epi)                             \
	extern "C" __global__ void __launch_bounds__(cg::SM80_THREADS) name(const cg_gmm_args args) \
	{                                                                             \
		cg::sm80_gemm<bm, bn, bk, CG_FP8_##dt, CG_NK_##bl>(args);             \
	}

#define CG_DEFINE(name, impl, dt, bl, bm, bn, bk, st, epi) CG_DEFINE_##impl(name, dt, bl, bm, bn, bk, st, epi)
CG_GMM_KERNELS(CG_DEFINE)
