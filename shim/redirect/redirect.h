/* Redirect (shim/redirect/): a crossing launch under the redirect action
 * runs where its operands live instead (redirect.c, planned in plan.c),
 * either as the bundled grouped_mm kernel (a recognized DeepGEMM GEMM,
 * decode.c, bundled.c) or as the same kernel re-homed into that context
 * (rehome.c), ordered with both devices' streams (order.c, streams.c,
 * events.c). */
#ifndef CTXGUARD_REDIRECT_H
#define CTXGUARD_REDIRECT_H

#include <pthread.h>

#include "../track/track.h"

/* One launch as the program made it. */
struct cg_launch {
	const char *api;
	CUfunction f;
	CUlaunchConfig config;     /* grid, block, shared memory, stream, attributes */
	void **params, **extra;
};

/* The driver refuses a launch given both kernelParams and extra before
 * running anything (CUDA_ERROR_INVALID_VALUE); so does its redirect.
 * CUDA_SUCCESS: not such a launch. */
static inline CUresult cg_redirect_malformed(void **params, void **extra)
{
	return params && extra ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* Runs launch l, whose crossing is c (by fn), where its operands live:
 * 1 with *result CUDA_SUCCESS, or the error of the host's wait for work
 * queued that could not be ordered; 0 when it cannot be done, said why:
 * the launch hook then gives c the fallback action (redirect_fallback). */
int cg_redirect(const struct cg_launch *l, const struct cg_crossing *c, const struct cg_fn *fn,
		CUresult *result);
/* A crossing to redirect, made by a launch API redirect does not take:
 * said why, before the fallback. */
void cg_redirect_refuse(const char *api, const struct cg_crossing *c, const struct cg_fn *fn);

/* The bundled kernel a decoded GEMM runs as (shim/redirect/decode.h), on stream s
 * of ctx (current): CUDA_SUCCESS, else the error with why filled. */
struct cg_decoded;
CUresult cg_bundled_run(CUcontext ctx, CUstream s, const struct cg_decoded *gemm, char *why,
			size_t n);

/* Device dev's primary context, retained once and kept (NULL: none). */
CUcontext cg_device_ctx(int dev);
/* The real driver's table that ctxguard's own calls of the bundled
 * kernels' API take (resolved once), or NULL when it cannot be. */
struct cg_gmm_driver;
const struct cg_gmm_driver *cg_bundled_driver(void);

/* Warming (shim/redirect/warm.c): what a redirect into a context needs there, made
 * ahead.  cg_warm: ctx, where the program just created a stream (the
 * caller checks cg_policy_redirects); cg_warm_devices: every device's
 * active primary context, at a load, when the policy redirects. */
void cg_warm(CUcontext ctx);
void cg_warm_devices(void);

/* A forked child retains its own primary contexts (cg_device_ctx); its
 * streams, events and twins go with cg_ctx_state_on_fork and
 * cg_rehome_on_fork. */
void cg_redirect_on_fork(void);

/* Per-context state (shim/redirect/ctxstate.c), each part kept by its own file. */
struct cg_zeros {
	CUdeviceptr ptr;
	size_t bytes;
	struct cg_zeros *next;     /* newer (larger) buffers first */
};
struct cg_ctx_state {
	CUcontext ctx;
	pthread_mutex_t lock;      /* this context's: guards what follows */
	CUstream owned;            /* ctxguard's stream, made at the first need */
	CUstream *streams;         /* the program's, in creation order */
	size_t nstreams, capstreams;
	CUevent *events;           /* pooled events not in use */
	size_t nevents, capevents, made; /* capevents >= made: all fit back */
	struct cg_zeros *zeros;
	CUdeviceptr scratch;       /* the shadow's D not in use (shim/redirect/shadow.c) */
	size_t scratch_bytes;
	struct cg_ctx_state *next; /* the list of them all (shim/redirect/ctxstate.c) */
};
/* ctx's state with its lock held (created when asked), or NULL when absent
 * or out of memory; the unlock (NULL: nothing held). */
struct cg_ctx_state *cg_ctx_state_lock(CUcontext ctx, int create);
void cg_ctx_state_unlock(struct cg_ctx_state *c);
/* fn on every context's state in turn, each locked meanwhile. */
void cg_ctx_states_each(void (*fn)(struct cg_ctx_state *c, const void *arg), const void *arg);
void cg_ctx_state_on_ctx_end(CUcontext ctx);
void cg_ctx_state_on_fork(void);

/* Known streams of ctx (shim/redirect/streams.c): copies up to max, returns how
 * many there are. */
size_t cg_streams_of(CUcontext ctx, CUstream *out, size_t max);
/* ctxguard's own non-blocking stream in ctx (current), created once. */
CUresult cg_stream_owned(CUcontext ctx, CUstream *out);

/* Pooled events of ctx (shim/redirect/events.c); ctx is current for a take. */
CUresult cg_event_take(CUcontext ctx, CUevent *out);
void cg_event_give(CUcontext ctx, CUevent e);

/* A buffer of at least bytes zeros in ctx (current), made once per size
 * class (shim/redirect/zeros.c). */
CUresult cg_zeros(CUcontext ctx, size_t bytes, CUdeviceptr *out);

/* Re-homing (shim/redirect/rehome.c). */
/* At load: keeps a copy of an in-memory image, which it takes to load the
 * module again elsewhere, when the policy can redirect (a file is loaded
 * again from the registry's path), until the module's unload or its
 * owner's end. */
void cg_rehome_keep(uintptr_t module, CUcontext owner, const char *path, const void *image);
/* Before the unload of a module or library: its twins are unlisted (never
 * unloaded), its image copy and recorded attributes go. */
void cg_rehome_drop(uintptr_t module);
/* After a context's end: the same for the originals it owned, and the twins
 * made in it are unlisted. */
void cg_rehome_on_ctx_end(CUcontext ctx);
void cg_rehome_on_fork(void);
/* fn's twin in ctx (current): made once, attributes replayed (a CUkernel's:
 * those set for device from_dev, set for ctx's device); fn itself in its
 * own context; NULL with why filled when it cannot be made. */
CUfunction cg_rehome_function(const struct cg_fn *fn, CUcontext ctx, int from_dev, char *why,
			      size_t n);

#endif
