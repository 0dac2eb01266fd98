/* What every folder of shim/ shares: the hooks table (hooks.def) and the
 * wrapper and handler shapes, the driver functions ctxguard calls, start-up
 * state, and the launch marks.  Each subsystem's own interface is its
 * folder's header: hook/hook.h, track/track.h, check/check.h,
 * redirect/redirect.h, report/report.h; a folder includes only those below
 * it (report < track < redirect < check < hook; tests/deps_graph.py). */
#ifndef CTXGUARD_SHIM_H
#define CTXGUARD_SHIM_H

/* Every versioned variant (_v2, _ptsz...) declared under its own name. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include "../policy/policy.h"

/* Everything declared below is the library's own (the exports say
 * CG_EXPORT): known local, a global is read without a GOT indirection. */
#pragma GCC visibility push(hidden)

#define CG_EXPORT __attribute__((visibility("default")))
/* Static TLS: the launch path reads it, and a general-dynamic access would
 * be a __tls_get_addr call each time. */
#define CG_TLS __attribute__((tls_model("initial-exec")))
/* For code that runs while a sanitizer runtime is still initialising. */
#define CG_NO_SANITIZE __attribute__((no_sanitize("address", "undefined"), no_sanitize_thread))
/* A call that must stay a tail call, so the callee sees our caller's return
 * address (dlsym's RTLD_NEXT): gcc is told to optimise sibling calls in the
 * function, clang that the return statement is one. */
#ifdef __clang__
#define CG_TAIL_CALLER
#define CG_TAIL_CALL __attribute__((musttail))
#else
#define CG_TAIL_CALLER __attribute__((optimize("optimize-sibling-calls")))
#define CG_TAIL_CALL
#endif
#define CG_LIKELY(x) __builtin_expect(!!(x), 1)
#define CG_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define CG_EXPAND(...) __VA_ARGS__
/* (a, b) -> a, b after the argument itself is macro-expanded */
#define CG_UNPAREN(x) CG_EXPAND x

/* ---- hooked entry points (shim/hook/entry.c, generated from hooks.def) ---- */

struct cg_variant {
	const char *symbol;        /* exported name, e.g. "cuLaunchKernel_ptsz" */
	const char *family;        /* name cuGetProcAddress is asked for */
	void *hook;                /* our exported wrapper */
	void *real;                /* libcuda's function, NULL if absent */
};

#define FAMILY(fam) typedef CUresult(*cg_pfn_##fam) P_##fam;
#define VARIANT(fam, sym)
#include "hooks.def"
#undef FAMILY
#undef VARIANT

enum {
#define FAMILY(fam)
#define VARIANT(fam, sym) CG_V_##sym,
#include "hooks.def"
#undef FAMILY
#undef VARIANT
	CG_NVARIANTS
};

extern struct cg_variant cg_variants[CG_NVARIANTS];

#define FAMILY(fam) CUresult cg_on_##fam(const struct cg_variant *v, CG_UNPAREN(P_##fam));
#define VARIANT(fam, sym)
#include "hooks.def"
#undef FAMILY
#undef VARIANT

/* Call the real variant behind v. */
#define CG_REAL(fam, v) ((cg_pfn_##fam)(v)->real)
/* The real libcuda symbol sym of family fam, for ctxguard's own calls of a
 * hooked entry point (NULL where the driver lacks it). */
#define CG_REAL_SYM(fam, sym) CG_REAL(fam, &cg_variants[CG_V_##sym])

/* The shapes most handlers take, written once; the parameters are in scope
 * under their names in hooks.def, and v is the variant.
 *   CG_AFTER(fam, then)    the real call; `then` when it succeeded (records)
 *   CG_BEFORE(fam, first)  `first`, then the real call (unpublish before a
 *                          free: the driver may hand the handle out again)
 *   CG_CHECKED(fam, check) `check`; its error code, or the real call
 *   CG_CHECKED_THEN(fam, check, then)  the same, and `then` when the real
 *                          call succeeded */
/* What a call wrote back through out-parameter p, as a word; 0 when p is
 * NULL (the recorders then ignore it). */
#define CG_OUT(p) ((p) ? (uintptr_t)*(p) : 0)
/* A file whose wrappers and handlers are one unit (shim/check/launch.c) defines
 * CG_HANDLER_INLINE to have each handler inlined into its wrappers. */
#ifndef CG_HANDLER_INLINE
#define CG_HANDLER_INLINE
#endif
#define CG_HANDLER(fam)                                                      \
	CG_HANDLER_INLINE CUresult cg_on_##fam(const struct cg_variant *v, CG_UNPAREN(P_##fam))
#define CG_AFTER(fam, then)                                                  \
	CG_HANDLER(fam)                                                      \
	{                                                                    \
		CUresult rc_ = CG_REAL(fam, v)(CG_UNPAREN(A_##fam));          \
		if (rc_ == CUDA_SUCCESS) {                                   \
			then;                                                \
		}                                                            \
		return rc_;                                                  \
	}
#define CG_BEFORE(fam, first)                                                \
	CG_HANDLER(fam)                                                      \
	{                                                                    \
		first;                                                       \
		return CG_REAL(fam, v)(CG_UNPAREN(A_##fam));                  \
	}
/* A launch the hooks passed (or ctxguard made itself) reaches the driver
 * marked, so the CUPTI backstop does not count it as unhooked.  Without
 * the backstop nothing reads the mark, and the call stays a tail call. */
#define CG_MARKED(call)                                                      \
	(CG_LIKELY(!cg_policy->backstop) ? (call) : __extension__({         \
		cg_hooked_call = 1;                                          \
		CUresult m_ = (call);                                        \
		cg_hooked_call = 0;                                          \
		m_;                                                          \
	}))
/* The same mark around a step of ctxguard's own that makes several driver
 * calls (a redirect, a shadow). */
#define CG_MARKED_DO(stmt)                                                   \
	do {                                                                 \
		cg_hooked_call = cg_policy->backstop;                        \
		stmt;                                                        \
		cg_hooked_call = 0;                                          \
	} while (0)
#define CG_CHECKED_THEN(fam, check, then)                                    \
	CG_HANDLER(fam)                                                      \
	{                                                                    \
		CUresult rc_ = (check);                                      \
		if (rc_ != CUDA_SUCCESS)                                     \
			return rc_;                                          \
		rc_ = CG_MARKED(CG_REAL(fam, v)(CG_UNPAREN(A_##fam)));       \
		if (rc_ == CUDA_SUCCESS) {                                   \
			then;                                                \
		}                                                            \
		return rc_;                                                  \
	}
#define CG_CHECKED(fam, check) CG_CHECKED_THEN(fam, check, (void)0)

/* cuGetProcAddress hands out entry points: while another thread starts
 * the shim it still answers with wrappers (found afresh), so what it
 * returns is checked once start-up is done; it passes nothing unchecked. */
#define CG_LOOKUP(sym) \
	(CG_V_##sym == CG_V_cuGetProcAddress || CG_V_##sym == CG_V_cuGetProcAddress_v2)

/* The exported wrapper of variant sym (shim/hook/entry.c, and shim/check/launch.c for
 * the launches): count the call, then the family's handler.  Until the
 * shim is ready (libcuda absent, a call made while initialising, or one
 * that stopped waiting for another thread's start-up) the wrapper forwards
 * untouched, so an inert library never changes behaviour. */
#define CG_WRAPPER(fam, sym) CG_EXPORT CG_WRAPPER_AS(fam, sym, sym)
/* The same body under another name (shim/check/launch.c's checked path). */
#define CG_WRAPPER_AS(fam, sym, name)                                        \
	CUresult name P_##fam                                                \
	{                                                                    \
		const struct cg_variant *v = &cg_variants[CG_V_##sym];       \
		if (CG_UNLIKELY(!cg_ready(CG_LOOKUP(sym) ? NULL : #sym))) {  \
			struct cg_variant u = {v->symbol, v->family, v->hook, \
					       cg_starting_real(v)};         \
			if (!u.real)                                         \
				return CUDA_ERROR_NOT_INITIALIZED;           \
			if (CG_LOOKUP(sym) && cg_starting_elsewhere())       \
				return cg_on_##fam(&u, CG_UNPAREN(A_##fam)); \
			return CG_REAL(fam, &u)(CG_UNPAREN(A_##fam));        \
		}                                                            \
		/* A variant this driver lacks (an older driver; a probe  \
		 * with dlsym(RTLD_DEFAULT) finds our export all the      \
		 * same): refused, as the driver would, not called. */    \
		if (CG_UNLIKELY(!v->real))                                   \
			return CUDA_ERROR_NOT_FOUND;                         \
		cg_count_variant(CG_V_##sym);                                \
		return cg_on_##fam(v, CG_UNPAREN(A_##fam));                  \
	}

/* ---- real driver functions the shim calls but does not hook ---- */

#define CG_CALLS(X)                                                          \
	X(cuCtxGetCurrent, (CUcontext * pctx))                               \
	X(cuStreamGetCtx, (CUstream s, CUcontext * pctx))                    \
	X(cuStreamGetCtx_v2, (CUstream s, CUcontext * pctx, CUgreenCtx * green)) \
	X(cuCtxGetDevice, (CUdevice * dev))                                  \
	X(cuCtxGetDevice_v2, (CUdevice * dev, CUcontext ctx))                \
	X(cuCtxPushCurrent_v2, (CUcontext ctx))                              \
	X(cuCtxPopCurrent_v2, (CUcontext * pctx))                            \
	X(cuFuncGetName, (const char **name, CUfunction f))                  \
	X(cuKernelGetName, (const char **name, CUkernel k))                  \
	X(cuFuncGetParamInfo, (CUfunction f, size_t i, size_t *off, size_t *size)) \
	X(cuKernelGetParamInfo, (CUkernel k, size_t i, size_t *off, size_t *size)) \
	X(cuPointerGetAttributes, (unsigned n, CUpointer_attribute *a, void **data, CUdeviceptr p)) \
	X(cuMemGetAllocationPropertiesFromHandle, (CUmemAllocationProp * prop, CUmemGenericAllocationHandle h)) \
	X(cuGetErrorName, (CUresult e, const char **name))                  \
	X(cuStreamIsCapturing, (CUstream s, CUstreamCaptureStatus * status)) \
	X(cuDeviceGet, (CUdevice * dev, int ordinal))                        \
	X(cuDevicePrimaryCtxRetain, (CUcontext * pctx, CUdevice dev))        \
	X(cuDevicePrimaryCtxGetState, (CUdevice dev, unsigned *flags, int *active)) \
	X(cuDeviceGetCount, (int *count))                                    \
	X(cuEventCreate, (CUevent * e, unsigned flags))                      \
	X(cuEventRecord, (CUevent e, CUstream s))                            \
	X(cuStreamWaitEvent, (CUstream s, CUevent e, unsigned flags))        \
	X(cuStreamQuery, (CUstream s))                                       \
	X(cuStreamSynchronize, (CUstream s))                                 \
	X(cuEventSynchronize, (CUevent e))                                   \
	X(cuMemsetD8Async, (CUdeviceptr p, unsigned char v, size_t n, CUstream s)) \
	X(cuMemcpyDtoH_v2, (void *dst, CUdeviceptr src, size_t n))         \
	X(cuThreadExchangeStreamCaptureMode, (CUstreamCaptureMode * mode))  \
	X(cuDeviceGetPCIBusId, (char *bus, int len, CUdevice dev))          \
	X(cuDeviceGetUuid_v2, (CUuuid * uuid, CUdevice dev))

struct cg_calls {
#define X(name, params) CUresult(*name) params;
	CG_CALLS(X)
#undef X
};
extern struct cg_calls cg_call;

/* ---- libc without our own hooks (shim/hook/libc.c) ---- */

/* 0: dlsym, 1: dlvsym; NULL only if libc has neither (then nothing works). */
void *cg_real_libc(int which);
void *cg_real_dlsym(void *handle, const char *name);
void *cg_real_dlvsym(void *handle, const char *name, const char *version);

/* ---- start-up (shim/hook/init.c) ---- */

extern const struct cg_policy *cg_policy;   /* valid once cg_ready() */
extern void *cg_libcuda;                     /* the driver's handle, once ready */
/* Lazy, thread-safe initialisation; false when libcuda is absent (the
 * library is then inert), when called re-entrantly during init, or when
 * another thread's start-up did not end in time: the call then passes
 * unchecked, counted against `what` unless it is NULL (a lookup). */
int cg_init(const char *what);
/* The driver start-up loads: libcuda.so.1, or CTXGUARD_LIBCUDA (tests). */
const char *cg_libcuda_name(void);
/* A variable the shim reads outside the policy (a path it loads or
 * writes): NULL under secure execution, where the environment belongs to
 * the caller and not to the program's owner, as for CTXGUARD_* settings. */
const char *cg_user_env(const char *name);
/* One that says where a library the shim loads lives (CTXGUARD_LIBCUDA,
 * CTXGUARD_CUPTI, CUDA_HOME): also NULL under a locked policy, which
 * would otherwise let a variable leave the shim inert or its backstop
 * off. */
const char *cg_library_env(const char *name);
/* Start-up's state (cg_state), in this order: a state from CG_READY on
 * is final. */
enum cg_start {
	CG_UNSTARTED,              /* not started, or libcuda not loaded yet */
	CG_STARTING,               /* a thread is starting the shim */
	CG_READY,
	CG_INERT,                  /* no libcuda: every call passes untouched */
};
extern _Atomic int cg_state;                 /* enum cg_start */
static inline int cg_ready(const char *what)
{
	return CG_LIKELY(atomic_load_explicit(&cg_state, memory_order_acquire) == CG_READY) ||
	       cg_init(what);
}
extern _Thread_local int cg_in_hook CG_TLS;         /* recursion guard */

/* Start-up under way on another thread (shim/hook/starting.c): the real
 * functions and the identity map are still being written, so a wrapper
 * looks them up afresh. */
int cg_starting_elsewhere(void);
/* The real function behind v for a call passing through untouched. */
void *cg_starting_real(const struct cg_variant *v);

/* Set while a hooked launch is in the real driver: the backstop's callback
 * then knows the launch was checked and returns at once. */
extern _Thread_local unsigned char cg_hooked_call CG_TLS;
/* Set while the backstop checks a launch that bypassed the hooks: CUPTI
 * cannot refuse a call, so an action that would refuse aborts instead. */
extern _Thread_local unsigned char cg_backstop_checking CG_TLS;

#pragma GCC visibility pop

#endif
