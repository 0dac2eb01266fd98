/* What the host API and the kernels must agree on, in one place: the kernel
 * table, each kernel's tile shape, the argument block and the shared-memory
 * size.  Included by C (host) and by CUDA C++ (kernels). */
#ifndef CG_GMM_KERNELS_H
#define CG_GMM_KERNELS_H

#ifdef __CUDACC__
#define CG_HD __host__ __device__
#else
#define CG_HD
#endif

/* X(name, impl, dtype, b_layout, bm, bn, bk, stages, epilogue)
 *   impl SM90: TMA + wgmma, warp-specialized, persistent; one producer
 *              warpgroup and CG_GMM_SM90_CONSUMERS(bm, bn) consumer
 *              warpgroups; stages-deep ring.
 *   impl SM80: mma.sync, 256 threads, portable to every GPU from sm_80.
 *   epilogue TMA: D through a shared-memory tile and TMA stores, which
 *              drain while the next tile computes (SM90, where the ring
 *              leaves room for bm x bn of bf16: the 128 x 256 kernels give a
 *              stage for it; measured on bf16, Qwen3 down 4% and Mixtral 2%
 *              faster, two balanced gate_up shapes 1-2% slower); REG:
 *              stores from registers; KSPLIT: the CTAs of a cluster
 *              each sum a share of K into the same tile, and the first adds
 *              the others' sums, received in its shared memory, before
 *              storing from registers (a tail launch's parts, grouped_mm.c).
 * 64-row tiles serve decode-sized groups: "split" ones (two consumers side by
 * side) where there are tiles enough for every multiprocessor, "small" ones
 * (one consumer, twice the tiles) below that; "large" ones serve prefill. */
/* The fp8 prefill kernel.  A measurement build (-DCG_GMM_X_FP8_DEEP for nvcc
 * and the host compiler alike; bench/ab_grouped_mm.py, journal v48) gives
 * it a fourth ring stage in the room of the D tile, storing from registers:
 * each load a k-step more ahead, for a card whose SMs outrun their loads. */
#ifdef CG_GMM_X_FP8_DEEP
#define CG_GMM_FP8_LARGE(X) X(cg_gmm_sm90_fp8_nk_large, SM90, FP8, NK, 128, 256, 128, 4, REG)
#else
#define CG_GMM_FP8_LARGE(X) X(cg_gmm_sm90_fp8_nk_large, SM90, FP8, NK, 128, 256, 128, 3, TMA)
#endif
#define CG_GMM_KERNELS(X)                                                  \
	X(cg_gmm_sm90_bf16_nk_small, SM90, BF16, NK, 64, 128, 64, 8, REG)  \
	X(cg_gmm_sm90_bf16_kn_small, SM90, BF16, KN, 64, 128, 64, 8, REG)  \
	X(cg_gmm_sm90_bf16_nk_split, SM90, BF16, NK, 64, 256, 64, 5, REG)  \
	X(cg_gmm_sm90_bf16_kn_split, SM90, BF16, KN, 64, 256, 64, 5, REG)  \
	X(cg_gmm_sm90_bf16_nk_large, SM90, BF16, NK, 128, 256, 64, 3, TMA) \
	X(cg_gmm_sm90_bf16_kn_large, SM90, BF16, KN, 128, 256, 64, 3, TMA) \
	X(cg_gmm_sm90_fp8_nk_small, SM90, FP8, NK, 64, 128, 128, 8, REG)   \
	X(cg_gmm_sm90_fp8_nk_split, SM90, FP8, NK, 64, 256, 128, 5, REG)   \
	CG_GMM_FP8_LARGE(X)                                                \
	X(cg_gmm_sm90_bf16_nk_ksplit, SM90, BF16, NK, 64, 128, 64, 4, KSPLIT) \
	X(cg_gmm_sm90_bf16_kn_ksplit, SM90, BF16, KN, 64, 128, 64, 4, KSPLIT) \
	X(cg_gmm_sm90_fp8_nk_ksplit, SM90, FP8, NK, 64, 128, 128, 4, KSPLIT) \
	X(cg_gmm_sm80_bf16_nk, SM80, BF16, NK, 128, 128, 32, 1, REG)       \
	X(cg_gmm_sm80_bf16_kn, SM80, BF16, KN, 128, 128, 32, 1, REG)       \
	X(cg_gmm_sm80_fp8_nk, SM80, FP8, NK, 128, 128, 32, 1, REG)         \
	X(cg_gmm_sm80_fp8_kn, SM80, FP8, KN, 128, 128, 32, 1, REG)

/* The table's epilogue column */
#define CG_GMM_EPI_REG 0
#define CG_GMM_EPI_TMA 1
#define CG_GMM_EPI_KSPLIT 2

/* KSPLIT: CTAs in a cluster at most, and the shared memory where the first
 * receives the others' bm x bn fp32 sums, then its mbarrier (128 bytes
 * keep the scales after it aligned) */
#define CG_GMM_KSPLIT_MAX 4
#define CG_GMM_KSPLIT_BYTES(bm, bn) ((CG_GMM_KSPLIT_MAX - 1) * (bm) * (bn) * 4 + 128)

/* SM90 consumer warpgroups: each computes 64 rows; a 64-row tile wider than
 * 128 columns is split by columns (128 each), so that decode-sized groups,
 * which fill one 64-row tile, still keep two warpgroups issuing wgmma. */
#define CG_GMM_SM90_CONSUMERS(bm, bn) ((bm) > 64 ? (bm) / 64 : (bn) / 128)

/* SM90 fp8: k blocks per row of a row-major sfa TMA box (16 bytes, the
 * least a box's contiguous dimension may span); the box holding block kb
 * starts at kb rounded down to a multiple of it. */
#define CG_GMM_SFA_ROW_BOX 4

/* SM90 fp8: floats of each stage's scale slot.  sfb of the tile's 128-column
 * blocks first, padded to CG_GMM_SM90_SFA_AT floats (128 bytes, a TMA
 * destination's alignment), then sfa: bm rows of CG_GMM_SFA_ROW_BOX k blocks
 * where row-major sfa comes by TMA, else of 1. */
#define CG_GMM_SM90_SFA_AT 32
#define CG_GMM_SM90_SLOT(bm) (CG_GMM_SM90_SFA_AT + CG_GMM_SFA_ROW_BOX * (bm))

/* SM90: the TMA thread's tile hand-off to the consumers, after the ring's
 * mbarriers: two 16-byte tiles, then two pairs of mbarriers */
#define CG_GMM_SM90_HANDOFF_BYTES 64

/* SM90 kernels load a short tile's A in TMA boxes of this many rows (the
 * host's second tensor map of A and the producer agree on it), skipping
 * boxes past its rows; a full tile's comes in one box. */
#define CG_GMM_A_BOX_ROWS 32

enum cg_gmm_kernel_id {
#define CG_GMM_KERNEL_ID(name, impl, dt, bl, bm, bn, bk, st, epi) CG_GMM_K_##name,
	CG_GMM_KERNELS(CG_GMM_KERNEL_ID)
#undef CG_GMM_KERNEL_ID
	CG_GMM_NKERNELS
};

/* How the kernels find each group's rows: contiguous reads a group id per
 * row; the other forms give each group one range [start, end) of rows, read
 * from index[] into shared-memory tables (gmm_sched.cuh, group_range()):
 *   offs   start = index[g - 1] (0 for g = 0), end = index[g]
 *   psum   start = index[g - 1] rounded up to cg_gmm_psum_align(), end = index[g]
 *   masked start = g * group_rows, end = start + index[g] (at most group_rows) */
enum cg_gmm_form {
	CG_GMM_FORM_OFFS = 0,
	CG_GMM_FORM_CONTIGUOUS = 1,
	CG_GMM_FORM_PSUM = 2,
	CG_GMM_FORM_MASKED = 3
};

CG_HD static inline int cg_gmm_form_has_tables(int form)
{
	return form != CG_GMM_FORM_CONTIGUOUS;
}

/* cg_gmm_args.flags: what the operands' alignment allows */
#define CG_GMM_ARG_VEC_A 1   /* A rows: 16-byte loads of 8 elements (SM80) */
#define CG_GMM_ARG_VEC_B 2   /* B rows along the contiguous dim, likewise */
#define CG_GMM_ARG_D_PAIR 4  /* D: 4-byte stores of 2 elements */
#define CG_GMM_ARG_D_QUAD 8  /* D: 8-byte stores of 4 elements */
#define CG_GMM_ARG_D_TMA 16  /* D: TMA stores (the kernel's epilogue, D aligned) */
#define CG_GMM_ARG_SFA_TMA 32 /* fp8 sfa: TMA loads (16-byte base and strides; SM90) */
#define CG_GMM_ARG_SFA_ROWS 64 /* ... of row-major sfa, boxes of 4 k blocks (else MN-major) */
#define CG_GMM_ARG_TAIL_NEXT 128 /* a tail launch follows this one (SM90, grouped_mm.c) */
#define CG_GMM_ARG_SKIP_HALF 256 /* fp8 128-row tiles: a half with no row to write computes nothing */
#define CG_GMM_ARG_BLOCKS_64 512 /* contiguous, psum: groups aligned to 64 rows (CG_GMM_BLOCKS_64) */

/* psum: where a group starts, the previous group's end rounded up to this */
CG_HD static inline int cg_gmm_psum_align(int flags)
{
	return flags & CG_GMM_ARG_BLOCKS_64 ? 64 : 128;
}

/* Whether bm-row tiles compute the form's groups as the caller laid them
 * out: a contiguous tile takes one group, its first row's, so with 64-row
 * blocks only 64-row tiles do. */
CG_HD static inline int cg_gmm_tile_rows_fit(int form, int flags, int bm)
{
	return form != CG_GMM_FORM_CONTIGUOUS || !(flags & CG_GMM_ARG_BLOCKS_64) || bm <= 64;
}

/* Groups the range forms keep in shared memory (row ranges, tile prefix). */
#define CG_GMM_MAX_OFFS_GROUPS 1024
/* Consecutive m-tiles swept across all n-tiles before the next band, so that
 * the tiles in flight share A rows and B experts in L2. */
#define CG_GMM_BAND 16

/* The kernels' only non-TMA parameter; identical layout in C and C++. */
struct cg_gmm_args {
	const void *a, *b;
	void *d;
	const int *index;         /* offs / psum ends / masked_m [g], or grouped_layout [m] */
	const float *sfa, *sfb;
	/* sfa element of row m of A (masked: [g * group_rows, ...) for group g)
	 * and channel block kb: sfa[m * sfa_sm + kb * sfa_sk + g * sfa_sg] */
	long long sfa_sm, sfa_sk, sfa_sg;
	int m, n, k, g;           /* m: rows of A and D (masked: g * group_rows) */
	int group_rows;           /* masked: max_m, the rows each group owns */
	int form;                 /* enum cg_gmm_form */
	int flags;                /* CG_GMM_ARG_* */
	/* The launch's share of the problem's tiles (grouped_mm.c, "the last
	 * round"): tiles bounds the kernel's own tile indices; tail_split > 0
	 * makes it a tail launch (contiguous form, 64-row kernels), its tile t
	 * being part t % tail_split of the 128 x 256 tile tail0 + t / tail_split
	 * (rows before columns: CG_GMM_TAIL_BN / bn column parts of each 64-row
	 * half). */
	int tiles;
	int tail0, tail_split;
};

/* The tile of the prefill kernels, whose last round a tail launch cuts up */
#define CG_GMM_TAIL_BM 128
#define CG_GMM_TAIL_BN 256

/* Shared-memory layout sizes; the kernels carve the same regions in this
 * order: the tile buffers (SM90: from a 1024-byte aligned base, for the
 * swizzled tiles), the D tile of a TMA epilogue, the fp8 scales, the
 * mbarriers, the tile hand-off, the group tables. */
CG_HD static inline unsigned cg_gmm_tables_bytes(int form, int g)
{
	/* pre[g + 1], start[g], end[g], 32 warp-chunk totals */
	return cg_gmm_form_has_tables(form) ? (unsigned)(3 * g + 1 + 32) * 4u : 0u;
}

CG_HD static inline unsigned cg_gmm_sm90_ring_bytes(int esize, int bm, int bn, int bk, int stages)
{
	return (unsigned)((bm + bn) * bk * esize * stages);
}

/* The epilogue's shared memory: a TMA epilogue's bm x bn bf16 tile, or a
 * KSPLIT epilogue's sums received */
CG_HD static inline unsigned cg_gmm_sm90_epi_bytes(int epi, int bm, int bn)
{
	return epi == CG_GMM_EPI_TMA ? (unsigned)(bm * bn * 2)
	       : epi == CG_GMM_EPI_KSPLIT ? (unsigned)CG_GMM_KSPLIT_BYTES(bm, bn)
					  : 0u;
}

/* esize 1 (fp8) adds each stage's scale slot (CG_GMM_SM90_SLOT) */
CG_HD static inline unsigned cg_gmm_sm90_smem(int esize, int bm, int bn, int bk, int stages, int epi, int form,
					      int g)
{
	return cg_gmm_sm90_ring_bytes(esize, bm, bn, bk, stages) + cg_gmm_sm90_epi_bytes(epi, bm, bn) +
	       (unsigned)(2 * stages * 8) + CG_GMM_SM90_HANDOFF_BYTES + (esize == 1 ? (unsigned)(stages * CG_GMM_SM90_SLOT(bm) * 4) : 0u) +
	       cg_gmm_tables_bytes(form, g);
}

/* SM80: A and B tiles of 16-bit elements, rows padded by 8 elements so that
 * ldmatrix's eight 16-byte row reads hit distinct banks. */
#define CG_GMM_SM80_LDS(bk) ((bk) + 8)
CG_HD static inline unsigned cg_gmm_sm80_smem(int bm, int bn, int bk, int form, int g)
{
	return (unsigned)((bm + bn) * CG_GMM_SM80_LDS(bk) * 2) + cg_gmm_tables_bytes(form, g);
}

#endif
