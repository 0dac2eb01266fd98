/* Shadow: proves, on the program's own launches, that a redirect would
 * compute what DeepGEMM computes.  A launch of a recognized DeepGEMM GEMM
 * that does not cross runs as the program made it; then the same decode a
 * redirect makes (shim/redirect/decode.c) becomes the same bundled launch
 * (cg_bundled_run), on the same stream, with D pointed at a scratch buffer
 * of the launch's context; the host waits for the stream and compares the
 * two outputs over the rows the layout defines.
 *
 * The comparison runs on the host, from copies of both outputs, rather than
 * in a reduction kernel: the result has to reach the host before the
 * launch returns anyway (it is reported there), so the wait is paid either
 * way, and the copies cost a few milliseconds per hundred megabytes next to
 * it.  What it buys: one plain C function (shim/redirect/shadow_compare.c) that the
 * CPU suite tests on the fake driver, and nothing added to the kernels.
 *
 * Reached only with shadow on (launch.c): it may cost what it must.  A
 * launch whose operands cross gets the crossing's action instead, and one
 * the shadow cannot take (undecodable, extra-buffer parameters, a stream
 * capturing a graph, a launch API other than cuLaunchKernel[Ex]) is
 * counted undecodable with the reason. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* shim.h first: it sets up how <cuda.h> names the entry points */
#include "shadow.h"
#include "decode.h"
#include "plan.h"
#include "../report/report.h"

static _Atomic unsigned long shadowed, mismatched, undecodable;

int cg_shadow_wanted(const struct cg_fn *fn)
{
	return fn->rule >= 0 && cg_decode_is_gemm(fn->demangled);
}

static const char *const layout_names[CG_NLAYOUTS] = {
	[CG_LAYOUT_NORMAL] = "normal",
	[CG_LAYOUT_CONTIGUOUS] = "contiguous",
	[CG_LAYOUT_PSUM] = "psum",
	[CG_LAYOUT_MASKED] = "masked",
};

static const char *dtype_name(const struct cg_decoded *g)
{
	return g->p.dtype == CG_GMM_FP8_E4M3 ? "fp8" : "bf16";
}

/* What a shadowed launch came to, named in its record. */
enum result { UNDECODABLE, MATCH, MISMATCH };
static const char *const result_names[] = {
	[UNDECODABLE] = "undecodable", [MATCH] = "match", [MISMATCH] = "mismatch"};

/* One shadowed launch's outcome. */
struct outcome {
	enum result result;
	const struct cg_decoded *gemm; /* NULL: not decoded */
	char reason[512];          /* undecodable: why */
	double err;                /* the largest row error (compared launches) */
	int64_t row, rows;         /* where it is; rows compared */
	double tolerance;
};

static char *escaped(const char *s)
{
	size_t n = s ? cg_json_escape(NULL, 0, s) + 1 : 1;
	char *e = malloc(n);
	if (e)
		cg_json_escape(e, n, s ? s : "");
	return e;
}

static void log_outcome(const char *api, const struct cg_fn *fn, int dev, const struct outcome *o)
{
	if (!cg_policy->log_path)
		return;
	char *name = escaped(fn->name), *dem = escaped(fn->demangled), *why = escaped(o->reason);
	const struct cg_decoded *g = o->gemm;
	char layout[32] = "null", dtype[16] = "null", err[32] = "null", tol[32] = "null";
	char sizes[160] = "";
	if (g) {
		snprintf(layout, sizeof layout, "\"%s\"", layout_names[g->layout]);
		snprintf(dtype, sizeof dtype, "\"%s\"", dtype_name(g));
		snprintf(tol, sizeof tol, "%g", o->tolerance);
		snprintf(sizes, sizeof sizes, ",\"m\":%lld,\"n\":%lld,\"k\":%lld,\"g\":%lld",
			 (long long)g->p.m, (long long)g->p.n, (long long)g->p.k, (long long)g->p.g);
	}
	/* JSON has no infinity: a non-finite error is null, the reason says why */
	if (o->result != UNDECODABLE && isfinite(o->err))
		snprintf(err, sizeof err, "%.6g", o->err);
	if (name && dem && why)
		cg_log_event("shadow",
			     "\"api\":\"%s\",\"kernel\":\"%s\",\"demangled\":%s%s%s,\"launch_dev\":%d,"
			     "\"layout\":%s,\"dtype\":%s%s,\"result\":\"%s\",\"reason\":%s%s%s,"
			     "\"max_rel_err\":%s,\"row\":%lld,\"rows\":%lld,\"tolerance\":%s",
			     api, name, fn->demangled ? "\"" : "", fn->demangled ? dem : "null",
			     fn->demangled ? "\"" : "", dev, layout, dtype, sizes,
			     result_names[o->result], o->reason[0] ? "\"" : "",
			     o->reason[0] ? why : "null", o->reason[0] ? "\"" : "", err,
			     (long long)o->row, (long long)o->rows, tol);
	free(name);
	free(dem);
	free(why);
}

/* Counted, logged, and the first mismatch and the first undecodable launch
 * of each kernel said on stderr. */
static void report(const char *api, const struct cg_fn *fn, int dev, const struct outcome *o)
{
	const char *shown = fn->demangled ? fn->demangled : fn->name;
	if (o->result == UNDECODABLE) {
		atomic_fetch_add(&undecodable, 1);
		if (!(atomic_fetch_or(&((struct cg_fn *)fn)->shadow_said, 1) & 1))
			cg_stderr("ctxguard: shadow: %s on device %d not shadowed: %s; a redirect of "
				  "it would not run the bundled kernel either\n",
				  shown, dev, o->reason);
	} else {
		atomic_fetch_add(&shadowed, 1);
		if (o->result == MISMATCH) {
			atomic_fetch_add(&mismatched, 1);
			if (!(atomic_fetch_or(&((struct cg_fn *)fn)->shadow_said, 2) & 2))
				cg_stderr("ctxguard: shadow: %s on device %d (%s, %s): the bundled "
					  "kernel's D differs from the launch's: relative error %g "
					  "at row %lld, tolerance %g%s%s; a redirect of it would not "
					  "compute what it computes\n",
					  shown, dev, layout_names[o->gemm->layout],
					  dtype_name(o->gemm), o->err, (long long)o->row, o->tolerance,
					  o->reason[0] ? ": " : "", o->reason);
		}
	}
	log_outcome(api, fn, dev, o);
}

/* The scratch D of ctx (current), at least bytes: taken from the context's
 * state while in use, so that no lock is held across the driver's calls and
 * two threads never share one; *bytes gets its size. */
static CUresult scratch_take(CUcontext ctx, size_t *bytes, CUdeviceptr *out)
{
	struct cg_ctx_state *c = cg_ctx_state_lock(ctx, 1);
	CUdeviceptr have = c ? c->scratch : 0;
	size_t size = c ? c->scratch_bytes : 0;
	if (c) {
		c->scratch = 0;
		c->scratch_bytes = 0;
	}
	cg_ctx_state_unlock(c);
	if (have && size >= *bytes) {
		*out = have;
		*bytes = size;
		return CUDA_SUCCESS;
	}
	/* Grown to the next power of two: no regrowth for each shape. */
	if (have)
		CG_REAL_SYM(cuMemFree, cuMemFree_v2)(have);
	size_t n = 1 << 20;
	while (n < *bytes)
		n *= 2;
	CUresult rc = CG_REAL_SYM(cuMemAlloc, cuMemAlloc_v2)(out, n);
	if (rc != CUDA_SUCCESS)
		*out = 0;
	*bytes = n;
	return rc;
}

static void scratch_give(CUcontext ctx, CUdeviceptr p, size_t bytes)
{
	struct cg_ctx_state *c = cg_ctx_state_lock(ctx, 1);
	CUdeviceptr spare = p;
	if (c && c->scratch_bytes < bytes) {
		spare = c->scratch;
		c->scratch = p;
		c->scratch_bytes = bytes;
	}
	cg_ctx_state_unlock(c);
	if (spare)
		CG_REAL_SYM(cuMemFree, cuMemFree_v2)(spare);
}

/* Host copies of each run of rows, a chunk at a time, compared row by row. */
enum { CHUNK = 16 << 20 };

static CUresult compare_rows(const struct cg_gmm_problem *p, CUdeviceptr scratch,
			     const struct cg_rows *runs, size_t nruns, struct outcome *o)
{
	const size_t row = (size_t)p->n * 2;
	const int64_t per = CHUNK / row > 0 ? (int64_t)(CHUNK / row) : 1;
	uint16_t *ref = malloc((size_t)per * row), *got = malloc((size_t)per * row);
	CUresult rc = ref && got ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; i < nruns && rc == CUDA_SUCCESS; i++)
		for (int64_t r = runs[i].start; r < runs[i].end && rc == CUDA_SUCCESS; r += per) {
			int64_t k = runs[i].end - r < per ? runs[i].end - r : per;
			size_t off = (size_t)r * row, len = (size_t)k * row;
			if ((rc = cg_call.cuMemcpyDtoH_v2(ref, p->d + off, len)) != CUDA_SUCCESS ||
			    (rc = cg_call.cuMemcpyDtoH_v2(got, scratch + off, len)) != CUDA_SUCCESS)
				break;
			for (int64_t j = 0; j < k; j++) {
				double e = cg_shadow_row_error(ref + j * p->n, got + j * p->n, p->n);
				if (!(e <= o->err)) { /* NaN never is */
					o->err = e;
					o->row = r + j;
				}
			}
			o->rows += k;
		}
	free(ref);
	free(got);
	return rc;
}

/* The host copy of grouped_layout: [m] for contiguous, [g] for psum and
 * masked (NULL for normal, which has none). */
static CUresult index_copy(const struct cg_decoded *g, int32_t **out)
{
	*out = NULL;
	if (g->layout == CG_LAYOUT_NORMAL)
		return CUDA_SUCCESS;
	size_t n = (size_t)(g->layout == CG_LAYOUT_CONTIGUOUS ? g->p.m : g->p.g);
	CUdeviceptr src = g->layout == CG_LAYOUT_PSUM ? g->p.offs : g->p.layout;
	if (!(*out = malloc((n ? n : 1) * sizeof **out)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	return n ? cg_call.cuMemcpyDtoH_v2(*out, src, n * sizeof **out) : CUDA_SUCCESS;
}

/* Both outputs compared, the launch's already queued on s; ctx current. */
static void compare(const struct cg_decoded *g, CUcontext ctx, CUstream s, struct outcome *o)
{
	const int64_t rows = g->layout == CG_LAYOUT_MASKED ? g->p.m * g->p.g : g->p.m;
	size_t bytes = (size_t)rows * (size_t)g->p.n * 2;
	CUdeviceptr scratch = 0;
	int32_t *index = NULL;
	struct cg_rows *runs = NULL;
	CUresult rc = scratch_take(ctx, &bytes, &scratch);
	if (rc != CUDA_SUCCESS) {
		snprintf(o->reason, sizeof o->reason,
			 "no scratch output: allocating %zu bytes on the device failed (error %d)",
			 bytes, (int)rc);
		return;
	}
	struct cg_decoded shadow = *g;
	shadow.p.d = scratch;
	if (cg_bundled_run(ctx, s, &shadow, o->reason, sizeof o->reason) != CUDA_SUCCESS)
		goto out;
	if ((rc = cg_call.cuStreamSynchronize(s)) != CUDA_SUCCESS) {
		snprintf(o->reason, sizeof o->reason,
			 "waiting for the launch stream failed (error %d): nothing to compare", (int)rc);
		goto out;
	}
	size_t max = (size_t)(g->layout == CG_LAYOUT_CONTIGUOUS ? g->p.m : g->p.g) + 1;
	if ((rc = index_copy(g, &index)) != CUDA_SUCCESS ||
	    !(runs = malloc(max * sizeof *runs))) {
		snprintf(o->reason, sizeof o->reason,
			 "reading grouped_layout back failed (error %d): nothing to compare",
			 rc ? (int)rc : (int)CUDA_ERROR_OUT_OF_MEMORY);
		goto out;
	}
	size_t nruns = cg_shadow_rows(g->layout, g->p.m, g->p.g, index, runs, max);
	o->err = 0;
	if ((rc = compare_rows(&g->p, scratch, runs, nruns, o)) != CUDA_SUCCESS) {
		snprintf(o->reason, sizeof o->reason,
			 "reading the outputs back failed (error %d): nothing to compare", (int)rc);
		goto out;
	}
	o->result = o->err <= o->tolerance ? MATCH : MISMATCH;
	if (!isfinite(o->err))
		snprintf(o->reason, sizeof o->reason,
			 "a NaN or infinity in one output where the other has another value");
out:
	free(index);
	free(runs);
	scratch_give(ctx, scratch, bytes);
}

void cg_shadow(const struct cg_launch *l, const struct cg_fn *fn, CUcontext ctx)
{
	CUstream s = l->config.hStream;
	struct cg_decoded g;
	struct outcome o = {.result = UNDECODABLE};
	int dev = cg_ctx_device(ctx);
	/* what the redirect would decide */
	if (cg_redirect_decode(l, fn, &g, o.reason, sizeof o.reason)) {
		o.gemm = &g;
		o.tolerance = cg_shadow_tolerance(g.p.dtype);
		if (cg_capturing(s))
			snprintf(o.reason, sizeof o.reason,
				 "the stream is capturing a CUDA graph, and the comparison needs a "
				 "host wait, which a capture cannot take");
		else if (!cg_call.cuMemcpyDtoH_v2)
			snprintf(o.reason, sizeof o.reason, "the driver has no cuMemcpyDtoH_v2");
		else if (cg_call.cuCtxPushCurrent_v2(ctx) != CUDA_SUCCESS)
			snprintf(o.reason, sizeof o.reason,
				 "cannot make the launch context current");
		else {
			/* Another thread's capture in global mode forbids this
			 * thread's allocation and wait, and a forbidden call ends
			 * that capture: the shadow's calls run in relaxed mode, as
			 * PyTorch's own do. */
			CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
			int relaxed = cg_call.cuThreadExchangeStreamCaptureMode &&
				      cg_call.cuThreadExchangeStreamCaptureMode(&mode) == CUDA_SUCCESS;
			compare(&g, ctx, s, &o);
			if (relaxed)
				cg_call.cuThreadExchangeStreamCaptureMode(&mode);
			CUcontext popped;
			cg_call.cuCtxPopCurrent_v2(&popped);
		}
	}
	report(l->api, fn, dev, &o);
}

void cg_shadow_refuse(const char *api, const struct cg_fn *fn, CUcontext ctx)
{
	struct outcome o = {.result = UNDECODABLE};
	if (cg_backstop_checking)
		snprintf(o.reason, sizeof o.reason,
			 "launched by %s past ctxguard's hooks (seen by the CUPTI backstop)", api);
	else
		snprintf(o.reason, sizeof o.reason,
			 "launched by %s (the redirect takes cuLaunchKernel and cuLaunchKernelEx)",
			 api);
	report(api, fn, cg_ctx_device(ctx), &o);
}

void cg_shadow_summary(char *line, size_t nline, char *json, size_t njson)
{
	line[0] = json[0] = 0;
	if (!cg_policy->shadow)
		return;
	unsigned long n = atomic_load(&shadowed), m = atomic_load(&mismatched),
		      k = atomic_load(&undecodable);
	snprintf(line, nline, ", shadowed %lu, mismatched %lu, undecodable %lu", n, m, k);
	snprintf(json, njson, ",\"shadow\":{\"shadowed\":%lu,\"mismatched\":%lu,\"undecodable\":%lu}",
		 n, m, k);
}

void cg_shadow_on_fork(void)
{
	atomic_store(&shadowed, 0);
	atomic_store(&mismatched, 0);
	atomic_store(&undecodable, 0);
}
