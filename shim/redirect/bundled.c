/* The bundled grouped_mm kernels as a redirect or the shadow runs them:
 * each DeepGEMM layout's entry point, called through ctxguard's own table
 * of the real driver. */
#include <pthread.h>
#include <stdio.h>

#include "decode.h"
#include "plan.h"
#include "redirect.h"
#include "../report/report.h"

/* GemmType::Normal: one group, every row in it (a grouped_layout of zeros). */
static CUresult run_normal(const struct cg_gmm_driver *drv, CUcontext ctx, CUstream s,
			   const struct cg_gmm_problem *p)
{
	struct cg_gmm_problem one = *p;
	CUresult rc = cg_zeros(ctx, (size_t)p->m * sizeof(int32_t), &one.layout);
	return rc == CUDA_SUCCESS ? cg_gmm_contiguous_with(drv, ctx, s, &one) : rc;
}

/* The bundled entry point for each of DeepGEMM's layouts. */
typedef CUresult (*gmm_entry)(const struct cg_gmm_driver *, CUcontext, CUstream,
			      const struct cg_gmm_problem *);
static const struct {
	const char *name;
	gmm_entry run;
} bundled[CG_NLAYOUTS] = {
	[CG_LAYOUT_NORMAL] = {"cg_gmm_contiguous", run_normal},
	[CG_LAYOUT_CONTIGUOUS] = {"cg_gmm_contiguous", cg_gmm_contiguous_with},
	[CG_LAYOUT_PSUM] = {"cg_gmm_psum", cg_gmm_psum_with},
	[CG_LAYOUT_MASKED] = {"cg_gmm_masked", cg_gmm_masked_with},
};

static pthread_once_t gmm_once = PTHREAD_ONCE_INIT;
static CUresult gmm_ready = CUDA_ERROR_NOT_INITIALIZED;
static struct cg_gmm_driver real_drv;

/* ctxguard's own calls of the bundled API go to the real driver, never the
 * hooks, through a table of their own: the table cg_gmm_init installs is
 * the program's (ctxguard_gmm_init_default resolves it with dlsym, which
 * ctxguard answers with its wrappers), so that its launches are checked
 * like any other. */
static void gmm_init(void)
{
	gmm_ready = cg_gmm_driver_resolve(&real_drv, cg_real_dlsym, cg_libcuda);
}

const struct cg_gmm_driver *cg_bundled_driver(void)
{
	pthread_once(&gmm_once, gmm_init);
	return gmm_ready == CUDA_SUCCESS ? &real_drv : NULL;
}

const char *cg_bundled_name(int layout)
{
	return bundled[layout].name;
}

CUresult cg_bundled_run(CUcontext ctx, CUstream s, const struct cg_decoded *gemm, char *why,
			size_t n)
{
	const struct cg_gmm_driver *drv = cg_bundled_driver();
	CUresult rc = drv ? bundled[gemm->layout].run(drv, ctx, s, &gemm->p) : gmm_ready;
	if (rc != CUDA_SUCCESS)
		snprintf(why, n, "%s (error %d)",
			 *cg_gmm_last_error() ? cg_gmm_last_error() : "the bundled kernels failed",
			 (int)rc);
	return rc;
}
