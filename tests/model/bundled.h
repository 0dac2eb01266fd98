/* The bundled kernels' coverage on the CPU: kernels/gmm_sched.cuh compiled
 * unchanged for the host (bundled.cpp) walks every tile of a problem in the
 * order one kernel shape would, and says which D row each tile writes with
 * which group's B, over which columns.  Which kernel shape grouped_mm.c
 * picks depends on the device and the problem, so a caller checks all. */
#ifndef CG_MODEL_BUNDLED_H
#define CG_MODEL_BUNDLED_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One way grouped_mm.c may run a problem: a kernel's tile, and for the
 * contiguous form's tail (gmm_kernels.h, cg_gmm_args) the 128 x 256 tiles
 * of the last round, 0 for none, cut into tail_bn-wide 64-row parts. */
struct cg_cover_shape {
	int bm, bn;
	int tail_tiles, tail_bn;
};
extern const struct cg_cover_shape cg_cover_shapes[];
extern const unsigned cg_cover_nshapes;

/* Rows of D the problem writes: row_group[r] is the group row r is written
 * with (-1 never, -2 by two groups), row_cols[r] a bit per column tile of
 * width shape->bn (or tail_bn) written.  form: enum cg_gmm_form; flags
 * cg_gmm_args' (CG_GMM_ARG_BLOCKS_64); index the form's int32 array (m
 * rows, or g groups); m, n, g as cg_gmm_args has them (masked: m = g *
 * group_rows).  0 on success, -1 when the model cannot represent it (more
 * than 64 column tiles, a table too large). */
int cg_cover(const struct cg_cover_shape *shape, int form, int flags, const int32_t *index, int m,
	     int group_rows, int n, int g, int *row_group, uint64_t *row_cols);

#ifdef __cplusplus
}
#endif
#endif
