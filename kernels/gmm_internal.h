/* Pieces of the grouped_mm host API shared between its files. */
#ifndef CG_GMM_INTERNAL_H
#define CG_GMM_INTERNAL_H

#include "grouped_mm.h"
#include "gmm_kernels.h"

#define CG_GMM_EXPORT __attribute__((visibility("default")))

/* The table cg_gmm_init() installed, NULL before. */
const struct cg_gmm_driver *cg_gmm_drv(void);

/* Record why the current call fails (cg_gmm_last_error()); returns err. */
CUresult cg_gmm_fail(CUresult err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cg_gmm_clear_error(void);

/* p for form (enum cg_gmm_form) checked: CUDA_SUCCESS, else the error
 * with its reason recorded (gmm_check.c); its group index (offs or
 * layout); its rows of A and D (the masked form's [G, max_m] are one
 * [G * max_m] run). */
CUresult cg_gmm_check(const struct cg_gmm_problem *p, int form);
CUdeviceptr cg_gmm_index(const struct cg_gmm_problem *p, int form);
int64_t cg_gmm_rows(const struct cg_gmm_problem *p, int form);

/* The kernel for p on a device of compute capability cc with sms
 * multiprocessors (gmm_choose.c). */
enum cg_gmm_kernel_id cg_gmm_choose(const struct cg_gmm_problem *p, int form, int cc, int sms);
/* Hopper kernels by tile: 64 x 128, 64 x 256 on two consumers side by
 * side ("split"), 128 x 256, and 64 x 128 summed over K by a cluster; the
 * one of that size for p's types. */
enum cg_gmm_sm90_size { SM90_SMALL, SM90_SPLIT, SM90_LARGE, SM90_KSPLIT };
enum cg_gmm_kernel_id cg_gmm_sm90(enum cg_gmm_sm90_size size, const struct cg_gmm_problem *p);

static inline int cg_gmm_aligned(uint64_t x, uint64_t to)
{
	return x % to == 0;
}

/* cg_gmm_FORM() for form = CG_GMM_FORM_* (enum cg_gmm_form). */
CUresult cg_gmm_run(CUcontext ctx, CUstream s, const struct cg_gmm_problem *p, int form);

/* One kernel of the fatbin, from the table in gmm_kernels.h. */
struct cg_gmm_kernel_info {
	const char *name;
	int sm90;  /* TMA + wgmma kernel (sm_90a image only) */
	int fp8;
	int kn;    /* B in [G, K, N] */
	int bm, bn, bk, stages;
	int epi;   /* SM90 epilogue: CG_GMM_EPI_* (gmm_kernels.h) */
};
extern const struct cg_gmm_kernel_info cg_gmm_kernel_info[CG_GMM_NKERNELS];

static inline int cg_gmm_kernel_threads(const struct cg_gmm_kernel_info *k)
{
	return k->sm90 ? (CG_GMM_SM90_CONSUMERS(k->bm, k->bn) + 1) * 128 : 256;
}

static inline unsigned cg_gmm_kernel_smem(const struct cg_gmm_kernel_info *k, int form, int g)
{
	return k->sm90 ? cg_gmm_sm90_smem(k->fp8 ? 1 : 2, k->bm, k->bn, k->bk, k->stages, k->epi, form, g)
		       : cg_gmm_sm80_smem(k->bm, k->bn, k->bk, form, g);
}

/* The launch attribute of clusters of c blocks along x (the KSPLIT
 * kernels': the fit asked once per context, then each tail launch) */
static inline CUlaunchAttribute cg_gmm_cluster_dim(unsigned c)
{
	CUlaunchAttribute a = {.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION};
	a.value.clusterDim.x = c;
	a.value.clusterDim.y = a.value.clusterDim.z = 1;
	return a;
}

/* What one context holds: its device's kernels and properties. */
struct cg_gmm_module {
	CUfunction fn[CG_GMM_NKERNELS]; /* NULL where this device cannot run it */
	int sm_count;
	int cc; /* compute capability, major * 10 + minor */
	int l2_bytes;
	/* clusters of c k-split CTAs (the KSPLIT kernels) that run at once;
	 * 0: unknown, no k-split */
	int ksplit_fit[CG_GMM_KSPLIT_MAX + 1];
};

/* The kernels loaded into ctx, which is current on this thread; loaded on
 * first use and kept for the life of the process. */
CUresult cg_gmm_module_get(const struct cg_gmm_driver *drv, CUcontext ctx, const struct cg_gmm_module **out);

/* The fatbin that kernels/embed.c links in. */
extern const unsigned char cg_gmm_fatbin[] __attribute__((visibility("hidden")));

#endif
