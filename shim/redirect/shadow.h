/* Shadow (shim/redirect/shadow.c): with `shadow = on`, every launch of a recognized
 * DeepGEMM GEMM that does not cross runs as the program made it, and then
 * the bundled kernel a redirect would run takes the same operands on the
 * same stream, into a scratch D of the launch's context; the two outputs
 * are compared over the rows the layout defines (shim/redirect/shadow_compare.c).
 * Off, the launch path never reaches this file. */
#ifndef CTXGUARD_SHADOW_H
#define CTXGUARD_SHADOW_H

#include <stddef.h>
#include <stdint.h>

#include "redirect.h"

/* With shadow on: whether a launch of fn that passed its checks is
 * shadowed (an expert's recognized GEMM). */
int cg_shadow_wanted(const struct cg_fn *fn);
/* After the program's launch l of fn in ctx succeeded: the bundled kernel
 * beside it, compared and reported.  Never changes the launch's result. */
void cg_shadow(const struct cg_launch *l, const struct cg_fn *fn, CUcontext ctx);
/* A launch to shadow made by an API the shadow does not take (the
 * cooperative and deprecated launches): reported undecodable, with the
 * API named. */
void cg_shadow_refuse(const char *api, const struct cg_fn *fn, CUcontext ctx);
/* The exit summary's part: ", shadowed N, mismatched M, undecodable K"
 * (line) and ",\"shadow\":{...}" (json); both empty with shadow off. */
void cg_shadow_summary(char *line, size_t nline, char *json, size_t njson);
/* A forked child counts its own launches. */
void cg_shadow_on_fork(void);

/* ---- the comparison (shim/redirect/shadow_compare.c): pure, host buffers ---- */

/* Rows [start, end) of D that the launch defines. */
struct cg_rows {
	int64_t start, end;
};
/* The runs of rows layout (enum cg_gemm_layout) defines for m rows (masked:
 * max_m) and g groups, read from index (the host copy of grouped_layout:
 * int32 [m] contiguous, [g] psum ends or masked_m; unused for normal), in
 * increasing order, at most max (contiguous: m, else g); returns the count. */
size_t cg_shadow_rows(int layout, int64_t m, int64_t g, const int32_t *index, struct cg_rows *out,
		      size_t max);
/* The relative error of one row of n bf16 values, got against ref:
 * ||got - ref|| / ||ref|| (||got - ref|| when ref is all zeros), as the GPU
 * suite measures; a non-finite value in one and not the same in the other
 * is an infinite error. */
double cg_shadow_row_error(const uint16_t *ref, const uint16_t *got, int64_t n);
/* The tolerance for dtype (enum cg_gmm_dtype), the GPU suite's. */
double cg_shadow_tolerance(int dtype);

#endif
