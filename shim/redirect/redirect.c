/* Redirect: instead of a crossing launch, run its work on the device that
 * holds its operands and return CUDA_SUCCESS.  A recognized DeepGEMM GEMM
 * becomes the bundled grouped_mm kernel; any other kernel (DeepGEMM's
 * helpers) is re-homed: the same kernel, loaded into that device's context.
 *
 * Ordering.  The program queued the launch on stream S; the operands were
 * produced on the target device by its own streams.  The work runs on T,
 * ctxguard's non-blocking stream of the target context, after an event on
 * S and after the current tail of every stream ctxguard knows there with
 * work pending (the legacy and per-thread default streams, and every
 * stream the program created); then S and each of those streams wait for
 * an event recorded on T.  When the target is the launch context itself (kind a with the
 * operands on the launch device) the work simply runs on S.  Everything
 * that could refuse (decode, devices, capture, stream count) is decided
 * before the first event is recorded; once the work is queued nothing
 * falls back (ordered() says why). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "redirect.h"
#include "../report/report.h"

/* Streams a redirect orders itself with, at most: the copy is on the stack. */
enum { MAX_KNOWN = 512, MAX_DEVICES = 64 };

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

/* What a redirect will do, decided before any driver call that enqueues. */
struct plan {
	int rehome;
	struct cg_decoded gemm;
	int launch_dev;            /* the launch's device, whose kernel attributes a twin takes */
	int to_dev;
	CUcontext target;
	const char *via;           /* the bundled entry point, or "re-homed" */
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

static _Atomic(CUcontext) primary[MAX_DEVICES];

/* The context a redirect to device dev runs in: its primary context, which
 * is where PyTorch (and the runtime API) put the device's memory and work. */
CUcontext cg_device_ctx(int dev)
{
	if (dev < 0 || dev >= MAX_DEVICES)
		return NULL;
	CUcontext c = atomic_load_explicit(&primary[dev], memory_order_acquire);
	CUdevice d;
	if (c || cg_call.cuDeviceGet(&d, dev) != CUDA_SUCCESS ||
	    cg_call.cuDevicePrimaryCtxRetain(&c, d) != CUDA_SUCCESS)
		return c;
	/* A racing retain leaves one more reference on the same context. */
	atomic_store_explicit(&primary[dev], c, memory_order_release);
	return c;
}

/* The one device all of a launch's operands are on (-1: none is device
 * memory); 0 with why filled when they are on several. */
static int operands_device(const char *const *name, const uintptr_t *addr, unsigned n,
			   CUstream s, int *dev, char *why, size_t len)
{
	int first = -1;
	*dev = -1;
	for (unsigned i = 0; i < n; i++) {
		int d = cg_mem_device(addr[i], s);
		if (d < 0)
			continue;
		if (*dev >= 0 && d != *dev) {
			snprintf(why, len, "operands on more than one device (%s on device %d, "
				 "%s on device %d)", name[first], *dev, name[i], d);
			return 0;
		}
		*dev = d;
		first = (int)i;
	}
	return 1;
}

static int plan_bundled(const struct cg_launch *l, const struct cg_fn *fn, struct plan *p,
			char *why, size_t n)
{
	if (!l->params) {
		snprintf(why, n, "undecodable ABI: parameters passed in the extra buffer");
		return 0;
	}
	if (cg_decode_gemm(fn->demangled, l->params, cg_tmap_find, &p->gemm, why, n) < 0 ||
	    cg_decode_check_launch(&p->gemm, &l->config, why, n) < 0)
		return 0;
	p->via = bundled[p->gemm.layout].name;
	const char *name[CG_DECODE_OPERANDS];
	uintptr_t addr[CG_DECODE_OPERANDS];
	for (unsigned i = 0; i < p->gemm.noperands; i++) {
		name[i] = p->gemm.operand[i].name;
		addr[i] = p->gemm.operand[i].addr;
	}
	return operands_device(name, addr, p->gemm.noperands, l->config.hStream, &p->to_dev, why,
			       n);
}

static int plan_rehome(const struct cg_launch *l, const struct cg_fn *fn, struct plan *p,
		       char *why, size_t n)
{
	const struct cg_layout *lay = cg_layout_of(fn, l->config.hStream);
	size_t nbuf = 0;
	const unsigned char *buf = l->params ? NULL : cg_extra_buffer(l->extra, &nbuf);
	enum { MAX = 64 };
	char label[MAX][16];
	const char *name[MAX];
	uintptr_t addr[MAX];
	unsigned k = 0;
	for (unsigned i = 0; lay && i < lay->n && k < MAX && (l->params || buf); i++) {
		const void *bytes;
		if (!cg_operand_address(lay, i, l->params, buf, nbuf, &bytes, &addr[k]))
			continue;
		snprintf(label[k], sizeof label[k], "parameter %u", lay->p[i].index);
		name[k] = label[k];
		k++;
	}
	p->rehome = 1;
	p->via = "re-homed";
	return operands_device(name, addr, k, l->config.hStream, &p->to_dev, why, n);
}

static int plan(const struct cg_launch *l, const struct cg_crossing *c, const struct cg_fn *fn,
		struct plan *p, char *why, size_t n)
{
	memset(p, 0, sizeof *p);
	if (cg_capturing(l->config.hStream)) {
		snprintf(why, n, "the stream is capturing a CUDA graph, and a redirect would "
			 "add work on other streams to it");
		return 0;
	}
	int ok = cg_decode_is_gemm(fn->demangled) && cg_policy->redirect == CG_REDIRECT_BUNDLED
			 ? plan_bundled(l, fn, p, why, n)
			 : plan_rehome(l, fn, p, why, n);
	if (!ok)
		return 0;
	p->launch_dev = c->launch_dev;
	if (p->to_dev < 0)
		p->to_dev = c->launch_dev;
	/* On the launch device, into its module domain: a green launch
	 * context's work goes to its primary context, ordered with the streams
	 * of both (shim/redirect/streams.c lists them together). */
	p->target = p->to_dev == c->launch_dev
			    ? cg_ctx_domain((CUcontext)c->launch_ctx, l->config.hStream)
			    : cg_device_ctx(p->to_dev);
	if (!p->target) {
		snprintf(why, n, "no context for device %d", p->to_dev);
		return 0;
	}
	return 1;
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

/* The work itself on stream s of the target context (current). */
static CUresult run(const struct plan *p, const struct cg_launch *l, const struct cg_fn *fn,
		    CUstream s, char *why, size_t n)
{
	if (!p->rehome)
		return cg_bundled_run(p->target, s, &p->gemm, why, n);
	if (!CG_REAL_SYM(cuLaunchKernelEx, cuLaunchKernelEx)) {
		snprintf(why, n, "the driver has no cuLaunchKernelEx (before CUDA 11.8)");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	CUfunction f = cg_rehome_function(fn, p->target, p->launch_dev, why, n);
	if (!f)
		return CUDA_ERROR_NOT_FOUND;
	CUlaunchConfig config = l->config;
	config.hStream = s;
	CUresult rc =
		CG_REAL_SYM(cuLaunchKernelEx, cuLaunchKernelEx)(&config, f, l->params, l->extra);
	if (rc != CUDA_SUCCESS)
		snprintf(why, n, "the re-homed launch failed (error %d)", (int)rc);
	return rc;
}

static CUresult on_launch_stream(const struct plan *p, const struct cg_launch *l,
				 const struct cg_fn *fn, CUstream s, char *why, size_t n)
{
	if (cg_call.cuCtxPushCurrent_v2(p->target) != CUDA_SUCCESS) {
		snprintf(why, n, "cannot make the launch context current");
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	CUresult rc = run(p, l, fn, s, why, n);
	CUcontext popped;
	cg_call.cuCtxPopCurrent_v2(&popped);
	return rc;
}

/* The default streams first: they are not in the program's list. */
static CUstream known_stream(const CUstream *known, size_t i)
{
	return i == 0 ? CU_STREAM_LEGACY : i == 1 ? CU_STREAM_PER_THREAD : known[i - 2];
}

/* A program stream destroyed since the copy of the list (its handle
 * refused) has no later work to order. */
static int gone(size_t i, CUresult rc)
{
	return i >= 2 && (rc == CUDA_ERROR_INVALID_HANDLE || rc == CUDA_ERROR_INVALID_CONTEXT);
}

/* ctx made current, else the redirect falls back saying why */
#define PUSH(ctx, ...)                                                   \
	do {                                                             \
		if (cg_call.cuCtxPushCurrent_v2(ctx) != CUDA_SUCCESS) {  \
			snprintf(why, n, __VA_ARGS__);                   \
			rc = CUDA_ERROR_INVALID_CONTEXT;                 \
			goto give;                                       \
		}                                                        \
	} while (0)

/* what failed: said in why, kept for a host wait's record */
#define FAIL(call, what)                                                                     \
	do {                                                                                 \
		CUresult rc_ = (call);                                                       \
		if (rc_ != CUDA_SUCCESS) {                                                   \
			snprintf(why, n, "%s failed (error %d)", what, (int)rc_);            \
			failed = what;                                                       \
			rc = rc_;                                                            \
			goto out;                                                            \
		}                                                                            \
	} while (0)

/* How far ordered() got with the work: not queued (a failure falls back),
 * or queued; then, when ordering it failed, how the host waited for it. */
struct progress {
	int queued;
	struct cg_host_wait wait;  /* failed NULL: ordered */
};

static CUresult ordered(const struct plan *p, const struct cg_launch *l, const struct cg_fn *fn,
			CUstream s, CUcontext launch_ctx, struct progress *progress, char *why,
			size_t n)
{
	CUstream known[MAX_KNOWN], t = NULL;
	CUevent before = NULL, inside = NULL, after = NULL;
	CUcontext popped;
	CUresult rc = CUDA_SUCCESS;
	const char *failed = NULL;
	int recorded = 0;
	size_t nk = cg_streams_of(p->target, known, MAX_KNOWN);
	if (nk > MAX_KNOWN) {
		snprintf(why, n, "more than %d streams in device %d's context", MAX_KNOWN, p->to_dev);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	nk += 2;
	PUSH(p->target, "cannot make device %d's context current", p->to_dev);
	/* Waiting on a capturing stream, or recording on the legacy stream
	 * during another thread's global-mode capture, would break it. */
	for (size_t i = 0; i < nk; i++)
		if (cg_capturing(known_stream(known, i))) {
			snprintf(why, n, "a stream of device %d is capturing a CUDA graph",
				 p->to_dev);
			rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
			goto out;
		}
	FAIL(cg_stream_owned(p->target, &t), "creating ctxguard's stream");
	FAIL(cg_event_take(p->target, &inside), "cuEventCreate");
	FAIL(cg_event_take(p->target, &after), "cuEventCreate");
	cg_call.cuCtxPopCurrent_v2(&popped);

	/* S's event comes from S's context (the launch context, current for
	 * the default streams). */
	PUSH(launch_ctx, "cannot make the launch context current");
	FAIL(cg_event_take(launch_ctx, &before), "cuEventCreate");
	FAIL(cg_call.cuEventRecord(before, s), "cuEventRecord on the launch stream");
	cg_call.cuCtxPopCurrent_v2(&popped);

	/* Unchecked, a failure would leave the program's context current:
	 * the twin made there, and `out` popping a context not pushed. */
	PUSH(p->target, "cannot make device %d's context current", p->to_dev);
	FAIL(cg_call.cuStreamWaitEvent(t, before, 0), "cuStreamWaitEvent");
	/* One event serves every tail: each wait takes the record before it.
	 * A stream with nothing pending has no tail to wait for. */
	for (size_t i = 0; i < nk; i++) {
		if (cg_call.cuStreamQuery(known_stream(known, i)) == CUDA_SUCCESS)
			continue;
		CUresult r = cg_call.cuEventRecord(inside, known_stream(known, i));
		if (gone(i, r))
			continue;
		FAIL(r, "cuEventRecord");
		FAIL(cg_call.cuStreamWaitEvent(t, inside, 0), "cuStreamWaitEvent");
	}
	if ((rc = run(p, l, fn, t, why, n)) != CUDA_SUCCESS)
		goto out;
	progress->queued = 1;
	FAIL(cg_call.cuEventRecord(after, t), "cuEventRecord on ctxguard's stream");
	recorded = 1;
	for (size_t i = 0; i < nk; i++) {
		CUresult r = cg_call.cuStreamWaitEvent(known_stream(known, i), after, 0);
		if (!gone(i, r))
			FAIL(r, "cuStreamWaitEvent on a stream of the target context");
	}
	cg_call.cuCtxPopCurrent_v2(&popped);
	/* Back in the launch context: S may be one of its default streams. */
	if ((rc = cg_call.cuStreamWaitEvent(s, after, 0)) != CUDA_SUCCESS) {
		failed = "cuStreamWaitEvent on the launch stream";
		snprintf(why, n, "%s failed (error %d)", failed, (int)rc);
	}
	goto give;
out:
	cg_call.cuCtxPopCurrent_v2(&popped);
give:
	/* Once queued, the work runs: falling back now would launch the
	 * original as well (the work done twice, once across devices), or
	 * refuse or abort a launch that happened.  Unordered, the program's
	 * next work could miss its result, so the host waits for it instead
	 * (for T when the event was not recorded): all later work comes after
	 * it.  The only time a redirect waits for the program's work, on this
	 * error path alone (README, "Deadlock"). */
	if (rc != CUDA_SUCCESS && progress->queued) {
		const char *call = recorded ? "cuEventSynchronize" : "cuStreamSynchronize";
		CUresult host = recorded ? cg_call.cuEventSynchronize(after)
					 : cg_call.cuStreamSynchronize(t);
		progress->wait = (struct cg_host_wait){failed, rc, call, host};
		rc = host;
	}
	if (before)
		cg_event_give(launch_ctx, before);
	if (inside)
		cg_event_give(p->target, inside);
	if (after)
		cg_event_give(p->target, after);
	return rc;
}

static const char *shown_name(const struct cg_fn *fn)
{
	return fn->demangled ? fn->demangled : fn->name ? fn->name : "<unknown>";
}

/* One JSON record per redirect; its buffer is allocated once per thread. */
static pthread_key_t json_key;
static pthread_once_t json_once = PTHREAD_ONCE_INIT;
static _Thread_local char *json;
enum { JSON = 12288 };

static void make_key(void)
{
	pthread_key_create(&json_key, free);
}

static void log_redirect(struct cg_crossing *c)
{
	if (!cg_policy->log_path)
		return;
	if (!json) {
		pthread_once(&json_once, make_key);
		if (!(json = malloc(JSON)))
			return;
		pthread_setspecific(json_key, json);
	}
	cg_log_crossing(c, json, JSON);
}

/* Where a redirect comes from: the function's device for kind (a), the
 * launch's for (b). */
static int from_dev(const struct cg_crossing *c)
{
	return c->kind == CG_KIND_OWNER ? c->owner_dev : c->launch_dev;
}

static void done(struct cg_crossing *c, struct cg_fn *fn, const struct plan *p)
{
	cg_count(CG_C_REDIRECT);
	cg_status_crossing(CG_ACT_REDIRECT);
	c->action = CG_ACT_REDIRECT;
	c->redirect_dev = p->to_dev;
	c->redirect_via = p->via;
	if (!atomic_exchange(&fn->redirected, 1))
		cg_stderr("ctxguard: redirect: %s from device %d to device %d (%s)\n",
			  shown_name(fn), from_dev(c), p->to_dev, p->via);
	log_redirect(c);
}

/* The work was queued but not ordered (why): the host waited for it, with
 * result rc.  Each outcome said once per kernel. */
static void waited(const struct cg_crossing *c, struct cg_fn *fn, const struct plan *p,
		   CUresult rc, const char *why)
{
	unsigned char said = rc == CUDA_SUCCESS ? 1 : 2;
	if (atomic_fetch_or(&fn->waited, said) & said)
		return;
	if (rc == CUDA_SUCCESS)
		cg_stderr("ctxguard: redirect: %s from device %d to device %d (%s) was queued, but "
			  "%s: ctxguard waited on the host for it to finish, so that later work "
			  "sees its result\n",
			  shown_name(fn), from_dev(c), p->to_dev, p->via, why);
	else
		cg_stderr("ctxguard: redirect: %s from device %d to device %d (%s) was queued, but "
			  "%s, and waiting for it on the host failed too (error %d): device %d's "
			  "context is likely broken; the launch returns that error\n",
			  shown_name(fn), from_dev(c), p->to_dev, p->via, why, (int)rc, p->to_dev);
}

/* Stopped after all: one line why; the fallback's usual report follows
 * (the caller's, given the crossing in u). */
static int impossible(const struct cg_crossing *c, const struct cg_fn *fn, const char *why)
{
	int action = cg_policy->redirect_fallback;
	if (atomic_load(&fn->reports) < (unsigned long)cg_policy->print_limit || action == CG_ACT_ABORT)
		cg_stderr("ctxguard: redirect impossible: kernel %s launched on device %d: %s; "
			  "falling back to %s (redirect_fallback)\n",
			  shown_name(fn), c->launch_dev, why, cg_action_name(action));
	return 0;
}

int cg_redirect(const struct cg_launch *l, const struct cg_crossing *crossing, const struct cg_fn *f,
		CUresult *result)
{
	struct cg_crossing c = *crossing;
	struct cg_fn *fn = (struct cg_fn *)f;
	char why[512] = "";
	struct plan p;
	*result = cg_redirect_malformed(l->params, l->extra);
	if (*result != CUDA_SUCCESS)
		return 1;
	if (!plan(l, &c, fn, &p, why, sizeof why))
		return impossible(&c, fn, why);
	CUstream s = l->config.hStream;
	struct progress progress = {0};
	CUresult rc = p.target == c.launch_ctx
			      ? on_launch_stream(&p, l, fn, s, why, sizeof why)
			      : ordered(&p, l, fn, s, (CUcontext)c.launch_ctx, &progress, why,
					sizeof why);
	if (rc != CUDA_SUCCESS && !progress.queued)
		return impossible(&c, fn, why);
	c.host_wait = progress.wait;
	done(&c, fn, &p);
	if (progress.wait.failed)
		waited(&c, fn, &p, rc, why);
	*result = rc;
	return 1;
}

void cg_redirect_on_fork(void)
{
	for (int i = 0; i < MAX_DEVICES; i++)
		atomic_store(&primary[i], NULL);
}

void cg_redirect_refuse(const char *api, const struct cg_crossing *c, const struct cg_fn *fn)
{
	char why[128];
	snprintf(why, sizeof why, "%s is not redirected (cuLaunchKernel and cuLaunchKernelEx are)",
		 api);
	impossible(c, fn, why);
}
