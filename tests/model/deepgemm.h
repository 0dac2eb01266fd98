/* DeepGEMM's sm90 GEMM launches, described field by field, and what the
 * original kernel does with one (deepgemm.c): a model written from
 * DeepGEMM's public source (HEAD 54e2261: csrc/jit_kernels/impls/sm90_*.hpp,
 * heuristics/sm90.hpp, deep_gemm/include/deep_gemm/impls/sm90_*.cuh,
 * scheduler/gemm.cuh), independent of shim/redirect/decode.c: it never parses a
 * name.  The differential test (differ.c) renders the fields as the
 * demangled name and the recorded encodes the decoder reads. */
#ifndef CG_MODEL_DEEPGEMM_H
#define CG_MODEL_DEEPGEMM_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "../../shim/track/track.h"

enum { DG_MAX_ROWS = 8192, DG_MAX_GROUPS = 16 };

struct dg_launch {
	int fp8;
	/* template arguments (the fp8 kernel has no major_a/major_b, no
	 * accumulate; the bf16 one no major_sfb, no epilogue) */
	long major_a, major_b, major_sfb;
	long shape[3]; /* SHAPE_M, SHAPE_N, SHAPE_K; 0: the scalar */
	long groups, bm, bn, bk, swa, swb, swd, stages, tma, math, mcast, mcast_on_a, sms;
	long type, accumulate;
	const char *cd, *epilogue;
	/* parameters */
	uint32_t m, n, k;
	uintptr_t sfb, layout_ptr;
	struct cg_tmap map[4]; /* a, b, d, sfa */
	int seen[4];           /* the encode was recorded */
	/* the launch */
	CUlaunchConfig cfg;
	CUlaunchAttribute attrs[4]; /* DeepGEMM's two, two perturbations */
	int with_extra;             /* kernelParams and extra both given */
	/* grouped_layout's contents: per row (contiguous) or per group */
	int32_t layout[DG_MAX_ROWS];
	size_t nlayout;
};

/* What one D row holds after the original ran. */
enum dg_row_state {
	DG_UNTOUCHED,   /* as before the call */
	DG_GROUP,       /* A's row times the row's group's B */
	DG_UNSPECIFIED, /* written, with something no caller reads */
};

struct dg_semantics {
	/* 0: the original computes nothing the model describes (a hang, a
	 * scrambled D, a launch the driver refuses): why says so */
	int defined;
	int driver_refuses; /* the driver's error, nothing runs */
	char why[160];
	int fp8, b_mn, a_mn, sfb_mn;           /* e4m3 operands; B [G, K, N]; A, sfb MN-major */
	int identity;                          /* D's columns as computed (the epilogue) */
	uint64_t a_stride, b_stride, d_stride; /* row strides, bytes */
	uintptr_t a, b, d, sfa, sfb;
	uint64_t sfa_stride_k, sfa_stride_g;
	uint64_t k_extent;     /* channels summed */
	uint64_t n_extent;     /* columns written, as computed (identity) */
	uint64_t rows;         /* D's rows, m or G x max_m */
	uint64_t group_stride; /* masked: rows of A and D a group owns */
	uint8_t state[DG_MAX_ROWS];
	int16_t group[DG_MAX_ROWS];
};

/* The original's effect; s->defined says whether it has one to compare. */
void dg_model(const struct dg_launch *l, struct dg_semantics *s);

/* DeepGEMM's sm90 pipeline shared memory for l's template arguments
 * (heuristics/sm90.hpp, get_pipeline_config). */
uint64_t dg_smem(const struct dg_launch *l);

#endif
