/*
 * Launch entry points and the fake "execution". The rules are the ones measured on H200s
 * (shared/DESIGN.md): the stream's context (the current one for the NULL, legacy and
 * per-thread streams) is the launch context; a CUfunction of another context is
 * CUDA_ERROR_INVALID_HANDLE and nothing runs; a CUkernel runs in any context; an operand on
 * another device runs silently with peer access and poisons the context without.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"

#define MAX_COOPERATIVE_BLOCKS (132u * 32u) /* SMs x resident blocks per SM */

CUresult fake_launch_resolve(CUfunction f, CUcontext ctx, const struct fake_kdesc **kd,
			     const int **attr)
{
	/* A green context runs its primary context's functions (measured on an H100). */
	if (fake_pool_live(&fake_func_pool, f) && f->mod->ctx == fake_ctx_domain(ctx)) {
		*kd = fake_func_desc(f);
		*attr = f->attr;
		return CUDA_SUCCESS;
	}
	CUkernel k = (CUkernel)f;
	if (fake_pool_live(&fake_kern_pool, k)) {
		/* The kernel's function in this context, if one exists, holds its attributes. */
		CUmodule mod;
		*kd = fake_kern_desc(k);
		*attr = fake_library_module(k->lib, ctx, false, &mod) == CUDA_SUCCESS
				? mod->fn[k->index]->attr
				: k->attr[ctx->dev];
		return CUDA_SUCCESS;
	}
	fake_counters.invalid_handle++;
	return CUDA_ERROR_INVALID_HANDLE;
}

CUresult fake_launch_check_dims(const struct fake_dims *d, const int *attr)
{
	static const unsigned grid_max[3] = {2147483647u, 65535u, 65535u};
	static const unsigned block_max[3] = {1024u, 1024u, 64u};
	unsigned long long threads = 1, cluster = 1;
	bool clustered = d->cluster[0] || d->cluster[1] || d->cluster[2];
	for (int i = 0; i < 3; i++) {
		if (d->grid[i] == 0 || d->grid[i] > grid_max[i] || d->block[i] == 0 ||
		    d->block[i] > block_max[i])
			return CUDA_ERROR_INVALID_VALUE;
		threads *= d->block[i];
		if (clustered && (d->cluster[i] == 0 || d->grid[i] % d->cluster[i]))
			return CUDA_ERROR_INVALID_CLUSTER_SIZE;
		cluster *= clustered ? d->cluster[i] : 1;
	}
	if (threads > (unsigned long long)attr[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK] ||
	    d->shared > (unsigned)attr[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES])
		return CUDA_ERROR_INVALID_VALUE;
	if (cluster > (attr[CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED] ? 16u : 8u))
		return CUDA_ERROR_INVALID_CLUSTER_SIZE;
	return CUDA_SUCCESS;
}

/* extra = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, END} */
static CUresult pack_extra(const struct fake_kdesc *kd, void **extra, unsigned char *buf)
{
	const void *src = NULL;
	const size_t *size = NULL;
	for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
		if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
			src = extra[i + 1];
		else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
			size = extra[i + 1];
		else
			return CUDA_ERROR_INVALID_VALUE;
	}
	if (kd->argbytes == 0)
		return CUDA_SUCCESS;
	if (!src || !size || *size < kd->argbytes)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(buf, src, kd->argbytes);
	return CUDA_SUCCESS;
}

CUresult fake_launch_pack(const struct fake_kdesc *kd, void **kernelParams, void **extra,
			  unsigned char *buf)
{
	memset(buf, 0, kd->argbytes);
	if (kernelParams && extra)
		return CUDA_ERROR_INVALID_VALUE;
	if (extra)
		return pack_extra(kd, extra, buf);
	if (kd->nparams > 0 && !kernelParams)
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < kd->nparams; i++) {
		if (!kernelParams[i])
			return CUDA_ERROR_INVALID_VALUE;
		memcpy(buf + kd->offset[i], kernelParams[i], kd->size[i]);
	}
	return CUDA_SUCCESS;
}

struct operand_scan {
	CUcontext ctx;
	unsigned crossings; /* operands on another device */
	unsigned silent;    /* ... reached through peer access */
	bool fault;	    /* an operand the launch device cannot reach */
};

/* Whether a kernel running in ctx reaches device memory a. */
static bool reaches(CUcontext ctx, const struct fake_alloc *a)
{
	if (a->kind == FAKE_MEM_VMM || a->kind == FAKE_MEM_GRAPH)
		return (a->access >> ctx->dev) & 1u;
	/* cuIpcOpenMemHandle's lazy peer access: from the context that opened it. */
	ctx = fake_ctx_domain(ctx);
	return a->dev == ctx->dev || (a->kind == FAKE_MEM_IPC && a->ctx == ctx) ||
	       fake_ctx_peer_enabled(ctx, a->ctx);
}

static void check_operand(struct operand_scan *s, CUdeviceptr v)
{
	const struct fake_alloc *a = fake_mem_find(v);
	if (!a || a->kind == FAKE_MEM_MANAGED || a->kind == FAKE_MEM_HOST ||
	    a->kind == FAKE_MEM_REGISTERED || a->kind == FAKE_MEM_POOL_HOST)
		return;
	bool remote = a->dev != s->ctx->dev;
	bool reachable = reaches(s->ctx, a);
	s->crossings += remote;
	s->silent += remote && reachable;
	s->fault |= !reachable;
}

CUresult fake_launch_run(CUcontext ctx, const struct fake_kdesc *kd, const unsigned char *buf)
{
	struct operand_scan s = {.ctx = ctx};
	for (unsigned i = 0; i < kd->nparams; i++) {
		CUdeviceptr v;
		if (kd->size[i] == sizeof(CUdeviceptr)) {
			memcpy(&v, buf + kd->offset[i], sizeof(v));
			check_operand(&s, v);
		} else if (kd->size[i] == sizeof(CUtensorMap) &&
			   fake_tmap_lookup(buf + kd->offset[i], &v)) {
			check_operand(&s, v);
		}
	}
	fake_counters.silent_cross += s.silent;
	if (s.fault) {
		/* The launch itself succeeds; the fault surfaces at the next synchronization. */
		ctx->sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
		fake_counters.sticky_errors++;
	}
	fake_note_launch(ctx, kd, buf, s.crossings);
	return CUDA_SUCCESS;
}

static CUresult check_cooperative(const struct fake_dims *d)
{
	unsigned long long blocks = (unsigned long long)d->grid[0] * d->grid[1] * d->grid[2];
	return blocks > MAX_COOPERATIVE_BLOCKS ? CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE
					       : CUDA_SUCCESS;
}

CUresult fake_launch(CUfunction f, const struct fake_dims *d, CUstream hStream, void **kernelParams,
		     void **extra, bool cooperative)
{
	CUcontext ctx;
	const struct fake_kdesc *kd;
	const int *attr;
	unsigned char buf[FAKE_MAX_PARAM_BYTES];
	CUresult rc = fake_stream_ctx(hStream, &ctx);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (ctx->sticky != CUDA_SUCCESS)
		return ctx->sticky;
	if (!f)
		return CUDA_ERROR_INVALID_VALUE;
	rc = fake_launch_resolve(f, ctx, &kd, &attr);
	if (rc == CUDA_SUCCESS)
		rc = fake_launch_check_dims(d, attr);
	if (rc == CUDA_SUCCESS && cooperative)
		rc = check_cooperative(d);
	if (rc == CUDA_SUCCESS)
		rc = fake_launch_pack(kd, kernelParams, extra, buf);
	if (rc != CUDA_SUCCESS)
		return rc;
	fake_trace_note("launch", ctx, hStream, f, kd->name);
	fake_stream_note_work(hStream, ctx);
	return fake_launch_run(ctx, kd, buf);
}

/* A CUlaunchConfig's dimensions, its cluster shape (zero without the
 * attribute) and the cooperative and overlap attributes; other attributes
 * (priority...) only affect scheduling, which the fake does not model. */
static CUresult config_dims(const CUlaunchConfig *config, struct fake_dims *d, bool *cooperative,
			    bool *programmatic)
{
	if (!config || (config->numAttrs > 0 && !config->attrs))
		return CUDA_ERROR_INVALID_VALUE;
	*d = (struct fake_dims){
		{config->gridDimX, config->gridDimY, config->gridDimZ},
		{config->blockDimX, config->blockDimY, config->blockDimZ},
		config->sharedMemBytes,
		{0, 0, 0},
	};
	*cooperative = *programmatic = false;
	for (unsigned i = 0; i < config->numAttrs; i++) {
		const CUlaunchAttribute *a = &config->attrs[i];
		if (a->id < 0 || a->id >= CU_LAUNCH_ATTRIBUTE_MAX)
			return CUDA_ERROR_INVALID_VALUE;
		if (a->id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
			d->cluster[0] = a->value.clusterDim.x;
			d->cluster[1] = a->value.clusterDim.y;
			d->cluster[2] = a->value.clusterDim.z;
		} else if (a->id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE) {
			*cooperative = a->value.cooperative != 0;
		} else if (a->id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION) {
			*programmatic = a->value.programmaticStreamSerializationAllowed != 0;
		}
	}
	return CUDA_SUCCESS;
}

/* Launch configuration from cuLaunchKernelEx attributes; an overlap
 * allowed and clusters are only traced. */
static CUresult launch_ex(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
			  void **extra)
{
	struct fake_dims d;
	bool cooperative, programmatic;
	CUresult rc = config_dims(config, &d, &cooperative, &programmatic);
	if (rc != CUDA_SUCCESS)
		return rc;
	rc = fake_launch(f, &d, config->hStream, kernelParams, extra, cooperative);
	if (rc == CUDA_SUCCESS && programmatic)
		fake_trace_note("programmatic", NULL, config->hStream, f, NULL);
	if (rc == CUDA_SUCCESS && (d.cluster[0] || d.cluster[1] || d.cluster[2])) {
		char dims[64]; /* "clusters of X x Y x Z, grid X x Y x Z" */
		snprintf(dims, sizeof dims, "clusters of %u x %u x %u, grid %u x %u x %u", d.cluster[0],
			 d.cluster[1], d.cluster[2], d.grid[0], d.grid[1], d.grid[2]);
		fake_trace_note("cluster", NULL, config->hStream, f, dims);
	}
	return rc;
}

/* Clusters of config's size resident at once on the fake H200: its 132
 * multiprocessors each hold as many blocks as their 228 KB of shared memory
 * (1 KB reserved a block) and 2048 threads allow, up to 32.  A cluster's
 * blocks share a GPC, so at one block a multiprocessor an H200 fit 66, 39
 * and 30 clusters of 2, 3 and 4 (measured), not 132 / size; larger
 * clusters, or several blocks a multiprocessor, count as 132 x blocks /
 * size (GPCs are not modelled further). */
static CUresult occupancy_clusters(int *n, CUfunction f, const CUlaunchConfig *config)
{
	struct fake_dims d;
	bool cooperative, programmatic;
	CUresult rc = config_dims(config, &d, &cooperative, &programmatic);
	if (rc != CUDA_SUCCESS || !n)
		return rc != CUDA_SUCCESS ? rc : CUDA_ERROR_INVALID_VALUE;
	if (!fake_pool_live(&fake_func_pool, f))
		return CUDA_ERROR_INVALID_HANDLE;
	if (!d.cluster[0] && !d.cluster[1] && !d.cluster[2])
		d.cluster[0] = d.cluster[1] = d.cluster[2] = 1;
	if ((rc = fake_launch_check_dims(&d, f->attr)) != CUDA_SUCCESS)
		return rc;
	const unsigned threads = d.block[0] * d.block[1] * d.block[2];
	const unsigned cluster = d.cluster[0] * d.cluster[1] * d.cluster[2];
	unsigned per_sm = 2048u / threads, by_smem = 233472u / (d.shared + 1024u);
	per_sm = per_sm < by_smem ? per_sm : by_smem;
	per_sm = per_sm < 32u ? per_sm : 32u;
	static const int h200_fit[5] = {132, 132, 66, 39, 30};
	*n = per_sm == 1 && cluster <= 4 ? h200_fit[cluster] : (int)(132u * per_sm / cluster);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuOccupancyMaxActiveClusters(int *numClusters, CUfunction func, const CUlaunchConfig *config)
{
	cuOccupancyMaxActiveClusters_params p = {numClusters, func, config};
	FAKE_TRACED(cuOccupancyMaxActiveClusters, &p, occupancy_clusters(numClusters, func, config));
}

/* Legacy and per-thread (_ptsz) variants behave alike: see fake_stream_ctx. */
#define LAUNCH_VARIANTS(X) X() X(_ptsz)

#define DEFINE_LAUNCHES(suffix)                                                                    \
	CUresult CUDAAPI cuLaunchKernel##suffix(                                                   \
		CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, \
		unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,            \
		unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)  \
	{                                                                                          \
		cuLaunchKernel##suffix##_params p = {f,         gridDimX,       gridDimY, gridDimZ, \
						     blockDimX, blockDimY,      blockDimZ,          \
						     sharedMemBytes, hStream,   kernelParams, extra};   \
		struct fake_dims d = {{gridDimX, gridDimY, gridDimZ},                              \
				      {blockDimX, blockDimY, blockDimZ},                           \
				      sharedMemBytes,                                              \
				      {0, 0, 0}};                                                  \
		FAKE_TRACED(cuLaunchKernel##suffix, &p,                                            \
			    fake_launch(f, &d, hStream, kernelParams, extra, false));              \
	}                                                                                          \
	CUresult CUDAAPI cuLaunchKernelEx##suffix(const CUlaunchConfig *config, CUfunction f,      \
						  void **kernelParams, void **extra)               \
	{                                                                                          \
		cuLaunchKernelEx##suffix##_params p = {config, f, kernelParams, extra};            \
		FAKE_TRACED(cuLaunchKernelEx##suffix, &p, launch_ex(config, f, kernelParams, extra)); \
	}                                                                                          \
	CUresult CUDAAPI cuLaunchCooperativeKernel##suffix(                                        \
		CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, \
		unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,            \
		unsigned int sharedMemBytes, CUstream hStream, void **kernelParams)                \
	{                                                                                          \
		cuLaunchCooperativeKernel##suffix##_params p = {                                   \
			f,	   gridDimX,	   gridDimY, gridDimZ,	   blockDimX,                 \
			blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams};               \
		struct fake_dims d = {{gridDimX, gridDimY, gridDimZ},                              \
				      {blockDimX, blockDimY, blockDimZ},                           \
				      sharedMemBytes,                                              \
				      {0, 0, 0}};                                                  \
		FAKE_TRACED(cuLaunchCooperativeKernel##suffix, &p,                                 \
			    fake_launch(f, &d, hStream, kernelParams, NULL, true));                \
	}

LAUNCH_VARIANTS(DEFINE_LAUNCHES)

/* One launch per device, each in its stream's context; all are checked before any runs. */
static CUresult launch_multi(CUDA_LAUNCH_PARAMS *list, unsigned n, unsigned flags)
{
	CUcontext ctx[FAKE_MAX_DEVICES];
	const struct fake_kdesc *kd[FAKE_MAX_DEVICES];
	if (!list || n == 0 || n > (unsigned)fake_ndev ||
	    (flags & ~(unsigned)(CUDA_COOPERATIVE_LAUNCH_MULTI_DEVICE_NO_PRE_LAUNCH_SYNC |
				 CUDA_COOPERATIVE_LAUNCH_MULTI_DEVICE_NO_POST_LAUNCH_SYNC)))
		return CUDA_ERROR_INVALID_VALUE;
	unsigned char *bufs = malloc((size_t)n * FAKE_MAX_PARAM_BYTES);
	if (!bufs)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult rc = CUDA_SUCCESS;
	struct fake_dims d0 = {{list[0].gridDimX, list[0].gridDimY, list[0].gridDimZ},
			       {list[0].blockDimX, list[0].blockDimY, list[0].blockDimZ},
			       list[0].sharedMemBytes,
			       {0, 0, 0}};
	for (unsigned i = 0; i < n && rc == CUDA_SUCCESS; i++) {
		const CUDA_LAUNCH_PARAMS *p = &list[i];
		const int *attr;
		struct fake_dims d = {{p->gridDimX, p->gridDimY, p->gridDimZ},
				      {p->blockDimX, p->blockDimY, p->blockDimZ},
				      p->sharedMemBytes,
				      {0, 0, 0}};
		/* The grids, blocks and shared memory must match across devices. */
		if (fake_stream_is_special(p->hStream) || memcmp(&d, &d0, sizeof(d)) ||
		    !p->function)
			rc = CUDA_ERROR_INVALID_VALUE;
		if (rc == CUDA_SUCCESS)
			rc = fake_stream_ctx(p->hStream, &ctx[i]);
		for (unsigned j = 0; rc == CUDA_SUCCESS && j < i; j++)
			if (ctx[j]->dev == ctx[i]->dev)
				rc = CUDA_ERROR_INVALID_VALUE;
		if (rc == CUDA_SUCCESS && ctx[i]->sticky != CUDA_SUCCESS)
			rc = ctx[i]->sticky;
		if (rc == CUDA_SUCCESS)
			rc = fake_launch_resolve(p->function, ctx[i], &kd[i], &attr);
		if (rc == CUDA_SUCCESS)
			rc = fake_launch_check_dims(&d, attr);
		if (rc == CUDA_SUCCESS)
			rc = check_cooperative(&d);
		if (rc == CUDA_SUCCESS)
			rc = fake_launch_pack(kd[i], p->kernelParams, NULL,
					      bufs + (size_t)i * FAKE_MAX_PARAM_BYTES);
	}
	for (unsigned i = 0; i < n && rc == CUDA_SUCCESS; i++)
		rc = fake_launch_run(ctx[i], kd[i], bufs + (size_t)i * FAKE_MAX_PARAM_BYTES);
	free(bufs);
	return rc;
}

CUresult CUDAAPI cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS *launchParamsList,
						      unsigned int numDevices, unsigned int flags)
{
	cuLaunchCooperativeKernelMultiDevice_params p = {launchParamsList, numDevices, flags};
	FAKE_TRACED(cuLaunchCooperativeKernelMultiDevice, &p,
		    launch_multi(launchParamsList, numDevices, flags));
}
