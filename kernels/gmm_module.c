/* Per-context cache of the bundled module: loaded into a context the first
 * time a problem runs there, looked up by the context's unique id (a
 * CUcontext value can be reused after its context is destroyed).  Every
 * problem looks up, so lookups take no lock: entries are only ever pushed
 * at the head, complete, and never removed; pushers compare and swap. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "gmm_internal.h"

#define CG_GMM_SM90_SM90 1
#define CG_GMM_SM90_SM80 0
#define CG_GMM_FP8_FP8 1
#define CG_GMM_FP8_BF16 0
#define CG_GMM_KN_KN 1
#define CG_GMM_KN_NK 0

const struct cg_gmm_kernel_info cg_gmm_kernel_info[CG_GMM_NKERNELS] = {
#define CG_GMM_INFO(name, impl, dt, bl, bm, bn, bk, st, epi) \
	{#name, CG_GMM_SM90_##impl, CG_GMM_FP8_##dt, CG_GMM_KN_##bl, bm, bn, bk, st, CG_GMM_EPI_##epi},
	CG_GMM_KERNELS(CG_GMM_INFO)
#undef CG_GMM_INFO
};

#ifndef CG_NO_KERNELS

struct cg_gmm_entry {
	unsigned long long ctx_id;
	CUmodule module;
	struct cg_gmm_module m;
	CUresult rc;      /* load_functions' failure, kept: said again, never retried */
	char why[200];
	struct cg_gmm_entry *next;
};

/* no lock, which a fork could leave held in the child */
static _Atomic(struct cg_gmm_entry *) cache;

static struct cg_gmm_entry *find_from(struct cg_gmm_entry *e, unsigned long long id)
{
	for (; e; e = e->next)
		if (e->ctx_id == id)
			return e;
	return NULL;
}

static struct cg_gmm_entry *find(unsigned long long id)
{
	return find_from(atomic_load_explicit(&cache, memory_order_acquire), id);
}

static CUresult device_attr(const struct cg_gmm_driver *drv, CUdevice dev, CUdevice_attribute attr, int *out)
{
	const CUresult r = drv->cuDeviceGetAttribute(out, attr, dev);
	return r == CUDA_SUCCESS ? r : cg_gmm_fail(r, "grouped_mm: cuDeviceGetAttribute(%d) failed", (int)attr);
}

/* How many clusters of each size the k-split kernels fit at once, the
 * fewest over them; a driver that cannot say leaves 0 (no k-split).  A
 * cluster takes multiprocessors of one GPC, so this is not simply the
 * multiprocessors over the cluster's size. */
static void ksplit_fit(const struct cg_gmm_driver *drv, struct cg_gmm_module *m)
{
	if (!drv->cuOccupancyMaxActiveClusters)
		return;
	for (int c = 2; c <= CG_GMM_KSPLIT_MAX; ++c) {
		int fit = 0, seen = 0;
		for (int i = 0; i < CG_GMM_NKERNELS; ++i) {
			const struct cg_gmm_kernel_info *k = &cg_gmm_kernel_info[i];
			if (k->epi != CG_GMM_EPI_KSPLIT || !m->fn[i])
				continue;
			CUlaunchAttribute dim = cg_gmm_cluster_dim((unsigned)c);
			const CUlaunchConfig cfg = {.gridDimX = (unsigned)c, .gridDimY = 1, .gridDimZ = 1,
						    .blockDimX = (unsigned)cg_gmm_kernel_threads(k), .blockDimY = 1,
						    .blockDimZ = 1, .sharedMemBytes = cg_gmm_kernel_smem(k, CG_GMM_FORM_CONTIGUOUS, 1),
						    .attrs = &dim, .numAttrs = 1};
			int n = 0;
			if (drv->cuOccupancyMaxActiveClusters(&n, m->fn[i], &cfg) != CUDA_SUCCESS)
				n = 0;
			fit = seen++ ? (n < fit ? n : fit) : n;
		}
		m->ksplit_fit[c] = fit;
	}
}

/* The functions this device can run, each allowed the shared memory its
 * largest problem needs. */
static CUresult load_functions(const struct cg_gmm_driver *drv, struct cg_gmm_entry *e)
{
	CUdevice dev;
	int major, minor, smem_optin;
	CUresult r = drv->cuCtxGetDevice(&dev);
	if (r != CUDA_SUCCESS)
		return cg_gmm_fail(r, "grouped_mm: cuCtxGetDevice failed");
	if ((r = device_attr(drv, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &major)) ||
	    (r = device_attr(drv, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &minor)) ||
	    (r = device_attr(drv, dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &e->m.sm_count)) ||
	    (r = device_attr(drv, dev, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, &e->m.l2_bytes)) ||
	    (r = device_attr(drv, dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &smem_optin)))
		return r;
	e->m.cc = major * 10 + minor;
	for (int i = 0; i < CG_GMM_NKERNELS; ++i) {
		const struct cg_gmm_kernel_info *k = &cg_gmm_kernel_info[i];
		const unsigned smem = cg_gmm_kernel_smem(k, CG_GMM_FORM_OFFS, CG_GMM_MAX_OFFS_GROUPS);
		/* the sm_90a image runs on compute capability 9.0 only */
		if ((k->sm90 && e->m.cc != 90) || smem > (unsigned)smem_optin)
			continue;
		r = drv->cuModuleGetFunction(&e->m.fn[i], e->module, k->name);
		if (r != CUDA_SUCCESS)
			return cg_gmm_fail(r, "grouped_mm: kernel %s not in the fatbin", k->name);
		r = drv->cuFuncSetAttribute(e->m.fn[i], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem);
		if (r != CUDA_SUCCESS)
			return cg_gmm_fail(r, "grouped_mm: %s: cannot allow %u bytes of shared memory", k->name,
					   smem);
		/* now, not at the first launch (lazy loading): see cg_gmm_prepare */
		if (drv->cuFuncLoad && (r = drv->cuFuncLoad(e->m.fn[i])) != CUDA_SUCCESS)
			return cg_gmm_fail(r, "grouped_mm: loading %s failed", k->name);
	}
	ksplit_fit(drv, &e->m);
	return CUDA_SUCCESS;
}

CUresult cg_gmm_module_get(const struct cg_gmm_driver *drv, CUcontext ctx, const struct cg_gmm_module **out)
{
	unsigned long long id;
	CUresult r = drv->cuCtxGetId(ctx, &id);
	if (r != CUDA_SUCCESS)
		return cg_gmm_fail(r, "grouped_mm: cuCtxGetId failed");
	struct cg_gmm_entry *e = find(id);
	if (e) {
		*out = &e->m;
		return e->rc == CUDA_SUCCESS ? CUDA_SUCCESS : cg_gmm_fail(e->rc, "%s", e->why);
	}

	struct cg_gmm_entry *mine = calloc(1, sizeof *mine);
	if (!mine)
		return cg_gmm_fail(CUDA_ERROR_OUT_OF_MEMORY, "grouped_mm: out of host memory");
	mine->ctx_id = id;
	r = drv->cuModuleLoadData(&mine->module, cg_gmm_fatbin);
	if (r != CUDA_SUCCESS) {
		free(mine);
		return cg_gmm_fail(r, "grouped_mm: cuModuleLoadData of the bundled fatbin failed");
	}
	/* A module that failed, or lost the race below, stays loaded: an unload
	 * waits for all the work running in the context (bench/driver_waits.c),
	 * which a redirect's warming must never do.  A failure is kept, so that
	 * it costs one module, not one per call. */
	if ((mine->rc = load_functions(drv, mine)) != CUDA_SUCCESS)
		snprintf(mine->why, sizeof mine->why, "%s", cg_gmm_last_error());

	/* another thread may have loaded the same context meanwhile: keep one
	 * (a failed swap means new entries in front: look among them again) */
	struct cg_gmm_entry *head = atomic_load_explicit(&cache, memory_order_acquire);
	for (;;) {
		if ((e = find_from(head, id))) {
			free(mine);
			break;
		}
		mine->next = head;
		if (atomic_compare_exchange_weak_explicit(&cache, &head, mine, memory_order_acq_rel,
							  memory_order_acquire)) {
			e = mine;
			break;
		}
	}
	*out = &e->m;
	return e->rc == CUDA_SUCCESS ? CUDA_SUCCESS : cg_gmm_fail(e->rc, "%s", e->why);
}

#endif
