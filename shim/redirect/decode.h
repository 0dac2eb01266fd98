/* DeepGEMM's sm90 GEMM launches as bundled grouped_mm problems: a pure
 * function of the kernel's demangled name, its parameters and the recorded
 * encodes of its tensor maps (no driver call), so it is unit-tested alone. */
#ifndef CTXGUARD_DECODE_H
#define CTXGUARD_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "../../kernels/grouped_mm.h"
#include "../track/track.h"

/* How grouped_layout says which rows belong to which group. */
enum cg_gemm_layout {
	CG_LAYOUT_NORMAL,      /* one group, no grouped_layout */
	CG_LAYOUT_CONTIGUOUS,  /* expert id per row, -1 rows skipped */
	CG_LAYOUT_PSUM,        /* end row per group, starts aligned to 128 */
	CG_LAYOUT_MASKED,      /* masked_m per group; A [G, max_m, K] */
	CG_NLAYOUTS
};

enum { CG_DECODE_OPERANDS = 6 };

/* How DeepGEMM's host code launches the kernel (cg_decode_check_launch). */
struct cg_decoded_launch {
	uint32_t grid, block;      /* {grid, 1, 1} (kNumSMs), {block, 1, 1} */
	uint64_t smem;             /* dynamic shared memory, bytes */
	uint32_t cluster;          /* cluster dimension {cluster, 1, 1} */
};

struct cg_decoded {
	int layout;                 /* enum cg_gemm_layout */
	int block_m;                /* DeepGEMM's BLOCK_M */
	struct cg_decoded_launch launch;
	struct cg_gmm_problem p;    /* layout pointer in offs (psum) or layout */
	unsigned noperands;         /* device memory the problem reads or writes */
	struct { const char *name; uintptr_t addr; } operand[CG_DECODE_OPERANDS];
};

/* The recorded encode of a 128-byte descriptor (cg_tmap_find's shape). */
typedef int (*cg_tmap_lookup_fn)(const void *desc, struct cg_tmap *out);

/* Whether demangled names one of the GEMM kernels cg_decode_gemm knows. */
int cg_decode_is_gemm(const char *demangled);

/* 1: *out holds the problem; 0: not a recognized GEMM; -1: a recognized
 * GEMM the bundled kernels cannot run, why says so in one phrase.  params is
 * the launch's kernelParams (one pointer per parameter). */
int cg_decode_gemm(const char *demangled, void *const *params, cg_tmap_lookup_fn tmap,
		   struct cg_decoded *out, char *why, size_t n);

/* 1: the launch configuration c is the one DeepGEMM's host code gives the
 * kernel d was decoded from (grid, block, dynamic shared memory, cluster,
 * no other attribute but programmatic stream serialization); -1 with why
 * filled otherwise.  A redirect needs both this and cg_decode_gemm. */
int cg_decode_check_launch(const struct cg_decoded *d, const CUlaunchConfig *c, char *why,
			   size_t n);

#endif
