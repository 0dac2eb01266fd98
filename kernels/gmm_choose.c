/* grouped_mm's choice of kernel for a problem on a device: the portable
 * (sm80) kernels, or a Hopper kernel by tile size. */
#include <stdint.h>

#include "gmm_internal.h"

enum cg_gmm_kernel_id cg_gmm_sm90(enum cg_gmm_sm90_size size, const struct cg_gmm_problem *p)
{
#define CG_GMM_SM90_KINDS(size)                                                           \
	{                                                                                 \
		CG_GMM_K_cg_gmm_sm90_bf16_nk_##size, CG_GMM_K_cg_gmm_sm90_bf16_kn_##size, \
			CG_GMM_K_cg_gmm_sm90_fp8_nk_##size                                \
	}
	static const enum cg_gmm_kernel_id by_size[4][3] = {
		CG_GMM_SM90_KINDS(small), CG_GMM_SM90_KINDS(split), CG_GMM_SM90_KINDS(large),
		CG_GMM_SM90_KINDS(ksplit)};
#undef CG_GMM_SM90_KINDS
	return by_size[size][p->dtype == CG_GMM_FP8_E4M3 ? 2 : p->b_layout == CG_GMM_B_KN];
}

/* Decode-sized groups stream B: 64-row tiles, deep ring; otherwise
 * 128 x 256 tiles.  Decode-sized is, by form: */
enum {
	/* offs: at most 64 rows per group on average, one 64-row tile */
	DECODE_ROWS_OFFS = 64,
	/* contiguous, psum: one 128-row block per group (the block DeepGEMM
	 * aligns each group's rows to) */
	DECODE_ROWS_BLOCK = 128,
	/* masked: masked_m is on the device and max_m bounds it; groups of
	 * 32-128 rows in max_m = 256 ran at 85% of HBM on 128-row tiles, which
	 * read each expert's B once, against 73-82% on 64-row ones */
	DECODE_ROWS_MASKED = 64,
};
/* Decode-sized, 64 x 256 tiles on two consumers where at least one such
 * tile per group (or per 64 rows) and 256 columns fills every
 * multiprocessor (measured: 1.0-1.3x the 64 x 128 tiles on decode
 * shapes); else 64 x 128, twice the tiles. */
enum { SPLIT_ROWS = 64, SPLIT_COLS = 256 };

/* The kernel for p on a device of compute capability cc with sms
 * multiprocessors. */
enum cg_gmm_kernel_id cg_gmm_choose(const struct cg_gmm_problem *p, int form, int cc, int sms)
{
	const int fp8 = p->dtype == CG_GMM_FP8_E4M3, kn = p->b_layout == CG_GMM_B_KN;
	const int64_t esz = fp8 ? 1 : 2;
	/* TMA: 16-byte aligned bases and row strides; fp8 wgmma reads K-major B only */
	const int tma = cc == 90 && !(p->flags & CG_GMM_FORCE_PORTABLE) && !(fp8 && kn) &&
			cg_gmm_aligned(p->a, 16) && cg_gmm_aligned(p->b, 16) &&
			cg_gmm_aligned((uint64_t)(p->k * esz), 16) &&
			(!kn || cg_gmm_aligned((uint64_t)(p->n * esz), 16));
	if (!tma)
		return fp8 ? (kn ? CG_GMM_K_cg_gmm_sm80_fp8_kn : CG_GMM_K_cg_gmm_sm80_fp8_nk)
			   : (kn ? CG_GMM_K_cg_gmm_sm80_bf16_kn : CG_GMM_K_cg_gmm_sm80_bf16_nk);
	/* contiguous in 64-row blocks: only the 64-row tiles take each block's group */
	const int blocks64 = form == CG_GMM_FORM_CONTIGUOUS && (p->flags & CG_GMM_BLOCKS_64);
	const int small = form == CG_GMM_FORM_OFFS ? p->m <= DECODE_ROWS_OFFS * p->g
			  : form == CG_GMM_FORM_MASKED
				  ? p->m <= DECODE_ROWS_MASKED
				  : blocks64 || p->m <= DECODE_ROWS_BLOCK * p->g;
	if (!small)
		return cg_gmm_sm90(SM90_LARGE, p);
	const int64_t rows = form == CG_GMM_FORM_MASKED
				     ? p->g
				     : (p->m / SPLIT_ROWS > p->g ? p->m / SPLIT_ROWS : p->g);
	return cg_gmm_sm90(
		rows * ((p->n + SPLIT_COLS - 1) / SPLIT_COLS) >= sms ? SM90_SPLIT : SM90_SMALL, p);
}
