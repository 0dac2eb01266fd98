/* grouped_mm host API: a problem checked (gmm_check.c), its kernel chosen
 * (gmm_choose.c), its TMA descriptors built and its launches enqueued in
 * the stream's context. */
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "gmm_internal.h"

#ifndef CG_NO_KERNELS
static CUresult encode(const struct cg_gmm_driver *drv, CUtensorMap *map, const char *what, CUtensorMapDataType type,
		       cuuint32_t rank, CUdeviceptr base, const cuuint64_t *dims, const cuuint64_t *strides,
		       const cuuint32_t *box)
{
	static const cuuint32_t unit[3] = {1, 1, 1};
	/* tiles of 128-byte rows are swizzled (gmm_sm90.cuh); sfa's runs of
	 * rows are read as they are */
	const int tile = type != CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
	const CUresult r = drv->cuTensorMapEncodeTiled(
	    map, type, rank, (void *)(uintptr_t)base, dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
	    tile ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
	    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
	return r == CUDA_SUCCESS ? r : cg_gmm_fail(r, "grouped_mm: cuTensorMapEncodeTiled(%s) failed", what);
}

/* Masked: elements from one group's sfa to the next (the kernels count A's
 * rows across groups, sfa_sg moving each onto its own block); else 0. */
static int64_t sfa_group(const struct cg_gmm_args *args)
{
	return args->group_rows ? args->sfa_sg + args->group_rows * args->sfa_sm : 0;
}

/* A [rows, k] in (bm x bk) boxes (ta, a full tile's) and in
 * (CG_GMM_A_BOX_ROWS x bk) ones (tr, a short tile's rows); B [g, n, k] in (bn x bk)
 * boxes or [g, k, n] in (bk x 64) boxes; out-of-range rows and channels
 * read as zeros.  D [rows, n] in 64 x 64 boxes where the epilogue stores
 * through TMA (CG_GMM_ARG_D_TMA); out-of-range parts of a box are not
 * written.  sfa by TMA (CG_GMM_ARG_SFA_TMA) as [groups, k blocks, rows] in
 * boxes of bm rows of one block (MN-major), or as [groups, rows, k blocks]
 * in boxes of bm rows of 4 blocks (row-major, CG_GMM_ARG_SFA_ROWS): masked
 * groups of max_m rows sfa_group() elements apart, else one group of all
 * rows. */
static CUresult tensor_maps(const struct cg_gmm_driver *drv, const struct cg_gmm_problem *p, int64_t rows,
			    const struct cg_gmm_kernel_info *k, const struct cg_gmm_args *args, CUtensorMap *ta,
			    CUtensorMap *tr, CUtensorMap *tb, CUtensorMap *td, CUtensorMap *ts)
{
	const unsigned flags = (unsigned)args->flags;
	const cuuint64_t esz = k->fp8 ? 1 : 2;
	const CUtensorMapDataType type = k->fp8 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
	const cuuint64_t m = (cuuint64_t)rows, n = (cuuint64_t)p->n, kk = (cuuint64_t)p->k, g = (cuuint64_t)p->g;
	const cuuint64_t a_dims[2] = {kk, m}, a_strides[1] = {kk * esz};
	const cuuint32_t a_box[2] = {(cuuint32_t)k->bk, (cuuint32_t)k->bm};
	const cuuint32_t r_box[2] = {(cuuint32_t)k->bk, CG_GMM_A_BOX_ROWS};
	CUresult r = encode(drv, ta, "A", type, 2, p->a, a_dims, a_strides, a_box);
	if (r == CUDA_SUCCESS)
		r = encode(drv, tr, "A (a short tile's boxes)", type, 2, p->a, a_dims, a_strides, r_box);
	if (r != CUDA_SUCCESS)
		return r;
	if (flags & CG_GMM_ARG_SFA_TMA) {
		const int masked = args->group_rows > 0, rows_major = (flags & CG_GMM_ARG_SFA_ROWS) != 0;
		const cuuint64_t kb = (kk + 127) / 128, rows = masked ? (cuuint64_t)args->group_rows : m;
		const cuuint64_t outer = rows_major ? (cuuint64_t)args->sfa_sm : (cuuint64_t)args->sfa_sk;
		const cuuint64_t sg = masked ? (cuuint64_t)sfa_group(args) : (rows_major ? rows : kb) * outer;
		const cuuint64_t s_dims[3] = {rows_major ? kb : rows, rows_major ? rows : kb, masked ? g : 1};
		const cuuint64_t s_strides[2] = {outer * 4, sg * 4};
		const cuuint32_t s_box[3] = {rows_major ? CG_GMM_SFA_ROW_BOX : (cuuint32_t)k->bm,
					     rows_major ? (cuuint32_t)k->bm : 1u, 1};
		r = encode(drv, ts, "sfa", CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, p->sfa, s_dims, s_strides, s_box);
		if (r != CUDA_SUCCESS)
			return r;
	}
	if (flags & CG_GMM_ARG_D_TMA) {
		const cuuint64_t d_dims[2] = {n, m}, d_strides[1] = {n * 2};
		const cuuint32_t d_box[2] = {64, 64};
		r = encode(drv, td, "D", CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, p->d, d_dims, d_strides, d_box);
		if (r != CUDA_SUCCESS)
			return r;
	}
	if (k->kn) {
		const cuuint64_t dims[3] = {n, kk, g}, strides[2] = {n * esz, kk * n * esz};
		const cuuint32_t box[3] = {64, (cuuint32_t)k->bk, 1};
		return encode(drv, tb, "B", type, 3, p->b, dims, strides, box);
	}
	const cuuint64_t dims[3] = {kk, n, g}, strides[2] = {kk * esz, n * kk * esz};
	const cuuint32_t box[3] = {(cuuint32_t)k->bk, (cuuint32_t)k->bn, 1};
	return encode(drv, tb, "B", type, 3, p->b, dims, strides, box);
}

/* args->flags for kernel k: what p's alignment allows it. */
static int arg_flags(const struct cg_gmm_problem *p, int form, const struct cg_gmm_kernel_info *k,
		     const struct cg_gmm_args *args)
{
	const uint64_t esz = k->fp8 ? 1 : 2;
	const int b_row_vec = k->kn ? p->n % 8 == 0 : p->k % 8 == 0;
	int flags = 0;
	if (cg_gmm_aligned(p->a, 8 * esz) && p->k % 8 == 0)
		flags |= CG_GMM_ARG_VEC_A;
	if (cg_gmm_aligned(p->b, 8 * esz) && b_row_vec)
		flags |= CG_GMM_ARG_VEC_B;
	if (cg_gmm_aligned(p->d, 4) && p->n % 2 == 0)
		flags |= CG_GMM_ARG_D_PAIR;
	if (cg_gmm_aligned(p->d, 8) && p->n % 4 == 0)
		flags |= CG_GMM_ARG_D_QUAD;
	if (k->epi == CG_GMM_EPI_TMA && cg_gmm_aligned(p->d, 16) && p->n % 8 == 0) /* TMA: 16-byte base and row pitch */
		flags |= CG_GMM_ARG_D_TMA;
	/* sfa by TMA: 16-byte base and strides, and each box's contiguous
	 * 16 bytes or more starting on a 16-byte boundary.  MN-major (rows
	 * contiguous): boxes of bm rows, and tiles start on multiples of 64 rows
	 * in every form but offs, whose groups start on any row (tried: such a
	 * box faults, an illegal instruction).  Row-major (k blocks contiguous):
	 * boxes of 4 blocks from a multiple of 4, any row.  Measured: 1-7%
	 * faster fp8 prefill than the scale warp's copies (either layout). */
	if (k->fp8 && k->sm90 && cg_gmm_aligned(p->sfa, 16) && sfa_group(args) % 4 == 0) {
		if (form != CG_GMM_FORM_OFFS && args->sfa_sm == 1 && args->sfa_sk % 4 == 0)
			flags |= CG_GMM_ARG_SFA_TMA;
		else if (args->sfa_sk == 1 && args->sfa_sm % 4 == 0)
			flags |= CG_GMM_ARG_SFA_TMA | CG_GMM_ARG_SFA_ROWS;
	}
	return flags;
}

/* A launch's place in the call (enqueue, "the last round"). */
enum place {
	ALONE,
	AHEAD, /* the main launch, a tail behind it */
	BEHIND /* the tail */
};

/* One launch of kernel id on grid blocks, over the tiles args gives it.
 * A tail launch (BEHIND) may start on the multiprocessors that the kernel
 * AHEAD of it leaves as its blocks end, rather than after its whole grid
 * (programmatic stream serialization, where the driver has cuLaunchKernelEx
 * and takes it; the kernels' griddepcontrol, gmm_sm90.cuh, keeps the order
 * that the stream's next work sees). */
static CUresult launch(const struct cg_gmm_driver *drv, const struct cg_gmm_module *mod, CUstream s,
		       const struct cg_gmm_problem *p, int form, enum cg_gmm_kernel_id id, struct cg_gmm_args args,
		       unsigned grid, unsigned cluster, enum place place)
{
	const struct cg_gmm_kernel_info *k = &cg_gmm_kernel_info[id];
	if (!mod->fn[id])
		return cg_gmm_fail(CUDA_ERROR_NOT_SUPPORTED, "grouped_mm: %s cannot run on this device", k->name);
	/* beside what enqueue chose (CG_GMM_ARG_SKIP_HALF) */
	args.flags |= arg_flags(p, form, k, &args) | (place == AHEAD ? CG_GMM_ARG_TAIL_NEXT : 0);
	const unsigned smem = cg_gmm_kernel_smem(k, form, (int)p->g);
	const unsigned threads = (unsigned)cg_gmm_kernel_threads(k);
	CUtensorMap ta, tr, tb, td = {{0}}, ts = {{0}};
	void *sm90_params[] = {&ta, &tr, &tb, &td, &ts, &args};
	void *sm80_params[] = {&args};
	void **params = k->sm90 ? sm90_params : sm80_params;
	CUresult r;
	if (k->sm90 && (r = tensor_maps(drv, p, args.m, k, &args, &ta, &tr, &tb, &td, &ts)) != CUDA_SUCCESS)
		return r;
	if ((place == BEHIND || cluster > 1) && drv->cuLaunchKernelEx) {
		CUlaunchAttribute attrs[2] = {cg_gmm_cluster_dim(cluster),
					      {.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION}};
		attrs[1].value.programmaticStreamSerializationAllowed = 1;
		CUlaunchConfig cfg = {.gridDimX = grid, .gridDimY = 1, .gridDimZ = 1, .blockDimX = threads,
				      .blockDimY = 1, .blockDimZ = 1, .sharedMemBytes = smem, .hStream = s,
				      .attrs = cluster > 1 ? attrs : attrs + 1,
				      .numAttrs = (cluster > 1) + (place == BEHIND)};
		if (drv->cuLaunchKernelEx(&cfg, mod->fn[id], params, NULL) == CUDA_SUCCESS)
			return CUDA_SUCCESS;
		/* the overlap refused (a driver without it, or one that cannot
		 * capture it in a graph): the clusters alone, in order */
		if (cluster > 1 && place == BEHIND) {
			cfg.numAttrs = 1;
			if (drv->cuLaunchKernelEx(&cfg, mod->fn[id], params, NULL) == CUDA_SUCCESS)
				return CUDA_SUCCESS;
		}
		/* else the plain launch below, in order; a k-split kernel then
		 * sums each tile whole (gmm_sm90.cuh), its extra blocks idle */
	}
	r = drv->cuLaunchKernel(mod->fn[id], grid, 1, 1, threads, 1, 1, smem, s, params, NULL);
	return r == CUDA_SUCCESS ? r : cg_gmm_fail(r, "grouped_mm: launching %s failed", k->name);
}

/* Whether the fp8 128-row kernel k may leave a 64-row half with no row to
 * write uncomputed (CG_GMM_ARG_SKIP_HALF), as DeepGEMM does.  Balanced
 * routing pads each expert to 128 rows, so about half the groups' last
 * m-tiles hold a half of padding.  Such a tile ends early and runs ahead of
 * the m-tiles that share its B slab, which find B in L2 only if L2 holds
 * what one round of tiles streams: the slabs in flight (a round's tiles over
 * the m-tiles per group) times a slab's bytes (bn x K).  And it pays only
 * where the groups' last m-tiles are a quarter of the tiles or more (at most
 * 4 m-tiles a group).  Measured (kernels/NOTES.md v35), time without over
 * time with, balanced: DSV3 down 1.003-1.04, Qwen3 gate_up 1.02-1.04, Qwen3
 * down 0.994-1.03; DSV3 gate_up, whose round streams 121 MB of B, 0.92 (0.945
 * on uniform routing); Mixtral, 8 m-tiles a group, 0.985-1.014 over five
 * draws.  bf16 keeps computing every half (Mixtral 2.4% slower). */
static int skip_halves(const struct cg_gmm_problem *p, const struct cg_gmm_kernel_info *k,
		       const struct cg_gmm_module *mod, int64_t m_tiles, int64_t tiles)
{
	if (!k->fp8 || !k->sm90 || k->bm <= 64)
		return 0;
	const int64_t per_group = m_tiles / p->g; /* g >= 1: check() */
	if (per_group <= 1) /* no slab shared: no m-tile to run ahead of */
		return 1;
	const int64_t in_flight = (tiles < mod->sm_count ? tiles : mod->sm_count) / per_group;
	return per_group <= 4 && in_flight * k->bn * p->k <= (int64_t)mod->l2_bytes;
}

/* The fewest k-steps (128 channels fp8, 64 bf16) a tile of the last round
 * needs for a tail launch to pay (enqueue) */
#define CG_TAIL_MIN_KSTEPS_FP8 16
#define CG_TAIL_MIN_KSTEPS_BF16 12
/* The fewest channels of K each CTA of a k-split cluster sums (enqueue).
 * Measured (kernels/NOTES.md v38), time without the clusters over time with
 * them: 2389 channels (K = 7168 in clusters of 3) 1.015-1.020 fp8, 1.012-
 * 1.014 bf16; 1024 (K = 2048 in clusters of 2) fp8 0.984-1.004, bf16 1.000. */
#define CG_KSPLIT_MIN_K 2048

static CUresult enqueue(const struct cg_gmm_driver *drv, CUcontext ctx, CUstream s, const struct cg_gmm_problem *p,
			int form)
{
	const struct cg_gmm_module *mod;
	CUresult r = cg_gmm_module_get(drv, ctx, &mod);
	if (r != CUDA_SUCCESS)
		return r;
	const enum cg_gmm_kernel_id id = cg_gmm_choose(p, form, mod->cc, mod->sm_count);
	const struct cg_gmm_kernel_info *k = &cg_gmm_kernel_info[id];
	const int blocks64 = p->flags & CG_GMM_BLOCKS_64 ? CG_GMM_ARG_BLOCKS_64 : 0;
	if (!cg_gmm_tile_rows_fit(form, blocks64, k->bm))
		return cg_gmm_fail(CUDA_ERROR_NOT_SUPPORTED,
				   "grouped_mm: the contiguous form in 64-row blocks (CG_GMM_BLOCKS_64) runs "
				   "on the Hopper kernels' 64-row tiles only: it needs sm_90 and A, B and "
				   "K 16-byte aligned (device of compute capability %d.%d here)",
				   mod->cc / 10, mod->cc % 10);

	const int64_t kb = (p->k + 127) / 128, rows = cg_gmm_rows(p, form);
	const int use_default_sfa = p->sfa_stride_m == 0 && p->sfa_stride_k == 0;
	const int64_t sfa_sm = use_default_sfa ? kb : p->sfa_stride_m, sfa_sk = use_default_sfa ? 1 : p->sfa_stride_k;
	/* the kernels count A's rows across groups (masked: g * max_m + row);
	 * the per-group term moves group g's rows onto its own sfa block */
	int64_t sfa_sg = 0;
	if (form == CG_GMM_FORM_MASKED) {
		const int64_t packed = p->m * sfa_sm > kb * sfa_sk ? p->m * sfa_sm : kb * sfa_sk;
		/* masked: elements from one group's sfa to the next */
		sfa_sg = (p->sfa_stride_g ? p->sfa_stride_g : packed) - p->m * sfa_sm;
	}
	struct cg_gmm_args args = {
		.a = (const void *)(uintptr_t)p->a,
		.b = (const void *)(uintptr_t)p->b,
		.d = (void *)(uintptr_t)p->d,
		.index = (const int *)(uintptr_t)cg_gmm_index(p, form),
		.sfa = (const float *)(uintptr_t)p->sfa,
		.sfb = (const float *)(uintptr_t)p->sfb,
		.sfa_sm = sfa_sm,
		.sfa_sk = sfa_sk,
		.sfa_sg = sfa_sg,
		.m = (int)rows,
		.n = (int)p->n,
		.k = (int)p->k,
		.g = (int)p->g,
		.group_rows = form == CG_GMM_FORM_MASKED ? (int)p->m : 0,
		.form = form,
		.flags = blocks64,
		.tiles = INT_MAX,
	};

	/* persistent grid: at most one block per multiprocessor (two for the
	 * portable kernels), never more than there can be tiles */
	const int64_t m_tiles = (rows + k->bm - 1) / k->bm + (cg_gmm_form_has_tables(form) ? p->g : 0);
	const int64_t tiles = m_tiles * ((p->n + k->bn - 1) / k->bn);
	const int64_t sms = mod->sm_count, per_sm = k->sm90 ? 1 : 2;
	const unsigned grid = (unsigned)(tiles < per_sm * sms ? tiles : per_sm * sms);
	if (skip_halves(p, k, mod, m_tiles, tiles))
		args.flags |= CG_GMM_ARG_SKIP_HALF;

	/* The last round.  Tile t runs on block t mod sms, so T tiles take
	 * ceil(T / sms) rounds, the last holding r = T mod sms.  Where r <=
	 * sms / 2, the main launch stops after its full rounds and a second one
	 * runs the r tiles as parts on more multiprocessors: 4r of 64 x 128
	 * where r <= sms / 4, else 2r of 64 x 256.  The second launch overlaps
	 * the first's end (launch(), BEHIND).  The 64-row kernels run at about
	 * 60% of the 128 x 256 kernels' speed.  Measured (kernels/NOTES.md v23,
	 * v24), time without the tail over time with it: DSV3 gate_up r = 8
	 * 1.04 fp8 and bf16 (1.05 with the overlap); r = 44 and 60, in halves,
	 * 1.02-1.035 fp8, 1.04 bf16 (1.03-1.04 and 1.04-1.05 with it); Qwen3
	 * gate_up r = 36-60, in halves, 1.00-1.013 fp8 and 1.02 bf16 with it
	 * (fp8 0.99-1.00 without).
	 * Short tiles (Qwen3 down, K = 768; v23, v25): with the overlapped tail
	 * 12 bf16 k-steps ran 1.008-1.025 times as fast (r = 20-44), 6 fp8
	 * k-steps 0.981-1.001 (without the overlap 0.993 and 0.955-0.975); so
	 * only tiles of CG_TAIL_MIN_KSTEPS_* or more.  The contiguous form only:
	 * there the host knows every tile (the others count theirs from index[]
	 * on the device).
	 * Where 4r parts leave multiprocessors idle still (r <= sms / 8), each
	 * part is summed over K by a cluster of c CTAs (the KSPLIT kernels,
	 * gmm_kernels.h), the largest c <= CG_GMM_KSPLIT_MAX that fits c x 4r
	 * blocks in one round, 4r such clusters at once (an H200 runs 30 of 4,
	 * 39 of 3, 66 of 2) and CG_KSPLIT_MIN_K channels a CTA: DSV3 gate_up
	 * r = 8 (clusters of 3) 1.5-2% faster, fp8 and bf16. */
	const int64_t r_last = tiles % sms;
	const int64_t min_ksteps = k->fp8 ? CG_TAIL_MIN_KSTEPS_FP8 : CG_TAIL_MIN_KSTEPS_BF16;
	if (form == CG_GMM_FORM_CONTIGUOUS && k->sm90 && k->bm == CG_GMM_TAIL_BM && k->bn == CG_GMM_TAIL_BN &&
	    tiles > sms && r_last && 2 * r_last <= sms && (p->k + k->bk - 1) / k->bk >= min_ksteps) {
		const int64_t parts = 4 * r_last;
		int64_t ranks = 1; /* CTAs a part's cluster */
		if (drv->cuLaunchKernelEx && mod->fn[cg_gmm_sm90(SM90_KSPLIT, p)])
			for (int64_t c = CG_GMM_KSPLIT_MAX; c > 1 && ranks == 1; --c)
				if (parts * c <= sms && p->k >= c * CG_KSPLIT_MIN_K && mod->ksplit_fit[c] >= parts)
					ranks = c;
		const enum cg_gmm_kernel_id tail_id =
		    cg_gmm_sm90(ranks > 1 ? SM90_KSPLIT : 4 * r_last <= sms ? SM90_SMALL : SM90_SPLIT, p);
		const struct cg_gmm_kernel_info *tk = &cg_gmm_kernel_info[tail_id];
		const int split = (CG_GMM_TAIL_BM / tk->bm) * (CG_GMM_TAIL_BN / tk->bn);
		args.tiles = (int)(tiles - r_last);
		if ((r = launch(drv, mod, s, p, form, id, args, grid, 1, AHEAD)) != CUDA_SUCCESS)
			return r;
		struct cg_gmm_args tail = args;
		tail.flags &= ~CG_GMM_ARG_SKIP_HALF; /* its parts have no 128-row tile to halve */
		tail.tiles = (int)(r_last * split);
		tail.tail0 = (int)(tiles - r_last);
		tail.tail_split = split;
		if ((r = launch(drv, mod, s, p, form, tail_id, tail, (unsigned)(tail.tiles * ranks), (unsigned)ranks,
				BEHIND)) != CUDA_SUCCESS) {
			char why[200];
			snprintf(why, sizeof why, "%s", cg_gmm_last_error());
			return cg_gmm_fail(r, "%s: the last %lld of D's %lld tiles of 128 x 256 are not computed (the main "
					      "launch before it was queued); the call failed, run it again",
					   why, (long long)r_last, (long long)tiles);
		}
		return CUDA_SUCCESS;
	}
	return launch(drv, mod, s, p, form, id, args, grid, 1, ALONE);
}

#endif

#ifndef CG_NO_KERNELS
/* s's context.  A default stream on a thread with no current context is
 * what a CUDA runtime program hands over before the thread's first runtime
 * call: PyTorch's autograd thread for device 0 never calls cudaSetDevice
 * (it is already the runtime's device), so a backward that starts with one
 * of these GEMMs comes here with nothing current.  The runtime would use
 * its current device's primary context, which on a thread with no context
 * is device 0 (cudaSetDevice makes the context current), and so do we.
 * The reference retained is kept for the life of the process (two racing
 * threads may keep two, of the same context). */
static CUresult stream_context(const struct cg_gmm_driver *drv, CUstream s, CUcontext *ctx)
{
	static _Atomic(CUcontext) device0;
	CUresult r = drv->cuStreamGetCtx(s, ctx);
	if (r == CUDA_SUCCESS)
		return r;
	const int is_default = !s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
	if (r != CUDA_ERROR_INVALID_CONTEXT || !is_default)
		return cg_gmm_fail(r, "grouped_mm: cuStreamGetCtx failed");
	if ((*ctx = atomic_load_explicit(&device0, memory_order_acquire)))
		return CUDA_SUCCESS;
	CUdevice dev;
	if ((r = drv->cuDeviceGet(&dev, 0)) != CUDA_SUCCESS ||
	    (r = drv->cuDevicePrimaryCtxRetain(ctx, dev)) != CUDA_SUCCESS)
		return cg_gmm_fail(r, "grouped_mm: the default stream on a thread with no current context, and "
				      "device 0's primary context cannot be retained");
	atomic_store_explicit(&device0, *ctx, memory_order_release);
	return CUDA_SUCCESS;
}
#endif

/* With ctx current (s's context when ctx is NULL, the stream's context
 * being where the module is loaded and the launch made): p's launch, or
 * with no problem the module load alone (cg_gmm_prepare). */
static CUresult in_context(const struct cg_gmm_driver *drv, CUcontext ctx, CUstream s,
			   const struct cg_gmm_problem *p, int form)
{
#ifdef CG_NO_KERNELS
	(void)drv;
	(void)ctx;
	(void)s;
	(void)p;
	(void)form;
	return cg_gmm_fail(CUDA_ERROR_NOT_SUPPORTED,
			   "grouped_mm: ctxguard was built without nvcc, so without its grouped_mm kernels");
#else
	CUresult r;
	if (!drv)
		return cg_gmm_fail(CUDA_ERROR_NOT_INITIALIZED, "grouped_mm: cg_gmm_init() has not run");
	if (!ctx && (r = stream_context(drv, s, &ctx)) != CUDA_SUCCESS)
		return r;
	if ((r = drv->cuCtxPushCurrent_v2(ctx)) != CUDA_SUCCESS)
		return cg_gmm_fail(r, "grouped_mm: cuCtxPushCurrent failed");
	const struct cg_gmm_module *mod;
	r = p ? enqueue(drv, ctx, s, p, form) : cg_gmm_module_get(drv, ctx, &mod);
	CUcontext popped;
	drv->cuCtxPopCurrent_v2(&popped);
	return r;
#endif
}

CUresult cg_gmm_prepare_with(const struct cg_gmm_driver *drv, CUcontext ctx)
{
	cg_gmm_clear_error();
	return in_context(drv, ctx, NULL, NULL, 0);
}

CUresult cg_gmm_prepare(CUcontext ctx)
{
	return cg_gmm_prepare_with(cg_gmm_drv(), ctx);
}

static CUresult run_with(const struct cg_gmm_driver *drv, CUcontext ctx, CUstream s,
			 const struct cg_gmm_problem *p, int form)
{
	cg_gmm_clear_error();
	CUresult r = cg_gmm_check(p, form);
	if (r != CUDA_SUCCESS)
		return r;
#ifndef CG_NO_KERNELS
	if (cg_gmm_rows(p, form) == 0)
		return CUDA_SUCCESS;
#endif
	return in_context(drv, ctx, s, p, form);
}

CUresult cg_gmm_run(CUcontext ctx, CUstream s, const struct cg_gmm_problem *p, int form)
{
	return run_with(cg_gmm_drv(), ctx, s, p, form);
}

CUresult cg_gmm_offs(CUcontext ctx, CUstream s, const struct cg_gmm_problem *p)
{
	return cg_gmm_run(ctx, s, p, CG_GMM_FORM_OFFS);
}

CUresult cg_gmm_contiguous(CUcontext ctx, CUstream s, const struct cg_gmm_problem *p)
{
	return cg_gmm_run(ctx, s, p, CG_GMM_FORM_CONTIGUOUS);
}

CUresult cg_gmm_psum(CUcontext ctx, CUstream s, const struct cg_gmm_problem *p)
{
	return cg_gmm_run(ctx, s, p, CG_GMM_FORM_PSUM);
}

CUresult cg_gmm_masked(CUcontext ctx, CUstream s, const struct cg_gmm_problem *p)
{
	return cg_gmm_run(ctx, s, p, CG_GMM_FORM_MASKED);
}

CUresult cg_gmm_contiguous_with(const struct cg_gmm_driver *drv, CUcontext ctx, CUstream s,
				const struct cg_gmm_problem *p)
{
	return run_with(drv, ctx, s, p, CG_GMM_FORM_CONTIGUOUS);
}

CUresult cg_gmm_psum_with(const struct cg_gmm_driver *drv, CUcontext ctx, CUstream s,
			  const struct cg_gmm_problem *p)
{
	return run_with(drv, ctx, s, p, CG_GMM_FORM_PSUM);
}

CUresult cg_gmm_masked_with(const struct cg_gmm_driver *drv, CUcontext ctx, CUstream s,
			    const struct cg_gmm_problem *p)
{
	return run_with(drv, ctx, s, p, CG_GMM_FORM_MASKED);
}
