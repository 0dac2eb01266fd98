/* Internal interface of the interposition layer. */
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
#include "table.h"

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

/* ---- hooked entry points (shim/entry.c, generated from hooks.def) ---- */

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
/* A file whose wrappers and handlers are one unit (shim/launch.c) defines
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

/* The exported wrapper of variant sym (shim/entry.c, and shim/launch.c for
 * the launches): count the call, then the family's handler.  Until the
 * shim is ready (libcuda absent, a call made while initialising, or one
 * that stopped waiting for another thread's start-up) the wrapper forwards
 * untouched, so an inert library never changes behaviour. */
#define CG_WRAPPER(fam, sym) CG_EXPORT CG_WRAPPER_AS(fam, sym, sym)
/* The same body under another name (shim/launch.c's checked path). */
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

/* The hook that stands for real function p, or NULL: the identity map that
 * dlsym and cuGetProcAddress use. */
void *cg_hook_for_real(const void *p);
/* The variant named `symbol` (exact exported name), or NULL. */
const struct cg_variant *cg_variant_named(const char *symbol);
void cg_entry_resolve(void *libcuda);   /* fills every .real */
/* libcuda's own function for v (NULL where it has none) */
void *cg_variant_real(void *libcuda, const struct cg_variant *v);

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

/* ---- libc without our own hooks (shim/libc.c) ---- */

/* 0: dlsym, 1: dlvsym; NULL only if libc has neither (then nothing works). */
void *cg_real_libc(int which);
void *cg_real_dlsym(void *handle, const char *name);
void *cg_real_dlvsym(void *handle, const char *name, const char *version);

/* ---- second copies of the driver (shim/drivers.c) ---- */

/* p, what a lookup of `name` on handle through `api` found: itself, or
 * NULL when it lies in a CUDA driver other than the hooked one and the
 * policy is locked (unlocked, that driver is said once and counted as
 * unhooked). */
void *cg_driver_lookup(void *handle, void *p, const char *api, const char *name);
/* At start-up: says (once) when an object ahead of ctxguard, a preload,
 * defines the driver's entry points, which then bypass the hooks. */
void cg_drivers_check_preloads(void);

/* ---- start-up (shim/init.c) ---- */

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
extern _Atomic int cg_state;                 /* 2: ready */
static inline int cg_ready(const char *what)
{
	return CG_LIKELY(atomic_load_explicit(&cg_state, memory_order_acquire) == 2) ||
	       cg_init(what);
}
extern _Thread_local int cg_in_hook CG_TLS;         /* recursion guard */

/* ---- calls while another thread starts the shim (shim/starting.c) ---- */

/* Waits for that start-up a bounded time; cg_init's answer. */
int cg_starting_wait(const char *what);
/* Publishes start-up's outcome (cg_state) and, when ready, says what
 * passed unchecked while it was under way. */
void cg_started(int state);
/* Start-up is under way on another thread: the real functions and the
 * identity map are still being written, so they are looked up afresh. */
int cg_starting_elsewhere(void);
/* The real function behind v for a call passing through untouched. */
void *cg_starting_real(const struct cg_variant *v);
/* The hook that stands for real function p, looked up afresh. */
void *cg_starting_hook(const void *real);
void cg_starting_forked(void);           /* in a forked child */

/* ---- registries (shim/registry.c) ---- */

struct cg_mod {
	uintptr_t handle;          /* CUmodule or CUlibrary */
	CUcontext owner;           /* NULL for a library: context-independent */
	int dev;
	const char *via;           /* API that loaded it */
	const char *path;          /* file, or NULL */
	const char *hash;          /* "fnv1a64:..." of the image, or NULL */
	const char *image;         /* an in-memory image not hashed, described */
	const struct cg_mod *lib;  /* module handed out by cuLibraryGetModule */
};

enum { CG_FN_KERNEL = 1 };     /* CUkernel: context-independent, never kind (a) */

struct cg_params;              /* what cuParamSet* wrote (shim/operands.c) */

struct cg_fn {
	uintptr_t handle;          /* CUfunction or CUkernel */
	CUcontext owner;           /* NULL for CUkernel */
	int dev;
	unsigned flags;
	int rule;                  /* policy rule index, -1: not an expert */
	const char *via;           /* API that produced the handle */
	const char *name;
	const char *demangled;     /* NULL when not a C++ name */
	const struct cg_mod *mod;  /* module or library, NULL if unknown */
	_Atomic unsigned long reports; /* crossings printed, to rate-limit */
	_Atomic(const struct cg_layout *) layout; /* filled on first check */
	_Atomic unsigned char redirected; /* its first redirect was printed */
	_Atomic unsigned char waited; /* host waits printed: 1 done, 2 failed */
	/* The parameter space the deprecated launches pass, as cuParamSet*
	 * wrote it; NULL while nothing was written. */
	_Atomic(struct cg_params *) params;
	_Atomic unsigned char unchecked; /* an unreadable launch was said */
	_Atomic unsigned char shadow_said; /* shadow: 1 undecodable, 2 mismatch said */
};

void cg_registry_reset(void);
const struct cg_mod *cg_mod_add(uintptr_t handle, CUcontext owner, const char *via,
				const char *path, const void *image,
				const struct cg_mod *lib);
const struct cg_mod *cg_mod_get(uintptr_t handle);
/* How many bytes an in-memory image spans: cubin (ELF), fatbin, or text
 * (PTX: without its NUL); a fatbin wrapper moves *image to its fatbin. */
size_t cg_image_span(const void **image);
const struct cg_mod *cg_lib_get(uintptr_t handle);
void cg_mod_remove(uintptr_t handle);        /* module or library, and its functions */
const struct cg_fn *cg_fn_add(uintptr_t handle, CUcontext owner, unsigned flags,
			      const char *via, const char *name, const struct cg_mod *mod);
/* CUfunction/CUkernel -> cg_fn (shim/registry.c). */
extern struct cg_table cg_fns;
/* Lock-free and inline: the launch path's only registry read. */
static inline const struct cg_fn *cg_fn_get(uintptr_t handle)
{
	return cg_table_get(&cg_fns, handle);
}
/* A function first met at launch (loaded out of sight): registered once,
 * unowned, so its operands can be checked under scope all. */
const struct cg_fn *cg_fn_seen(uintptr_t handle, CUstream stream);
/* Unpublishes the modules and functions owned by ctx (being destroyed). */
void cg_registry_forget_ctx(CUcontext ctx);
void cg_registry_counts(size_t *mods, size_t *fns, size_t *experts);

/* ---- contexts (shim/context.c) ---- */

CUcontext cg_current_ctx(void);
/* Each thread's last answers, valid while the epoch has not moved since:
 * a context or stream destroyed anywhere moves it (ctxguard sees the
 * destroys it hooks; the handle may come back for another context). */
extern _Atomic unsigned cg_ctx_epoch;
struct cg_last_stream {
	CUstream stream;           /* never NULL, legacy or per-thread */
	CUcontext ctx;
	unsigned epoch;
};
extern _Thread_local struct cg_last_stream cg_last_stream CG_TLS;
struct cg_last_ctx {
	CUcontext ctx;
	int dev;
	unsigned epoch;
};
extern _Thread_local struct cg_last_ctx cg_last_ctx CG_TLS;
CUcontext cg_launch_ctx_ask(CUstream s);
int cg_ctx_device_ask(CUcontext ctx);
/* The context a launch on stream s runs in (current for NULL/legacy/ptds):
 * the thread's last answer for s while no destroy voided it, else the
 * driver's. */
static inline CUcontext cg_launch_ctx(CUstream s)
{
	if (CG_LIKELY(s == cg_last_stream.stream) &&
	    (uintptr_t)s > (uintptr_t)CU_STREAM_PER_THREAD &&
	    CG_LIKELY(cg_last_stream.epoch ==
		      atomic_load_explicit(&cg_ctx_epoch, memory_order_acquire)))
		return cg_last_stream.ctx;
	return cg_launch_ctx_ask(s);
}
/* -1 if unknown; cached (the thread's last answer, then a table) */
static inline int cg_ctx_device(CUcontext ctx)
{
	if (CG_LIKELY(ctx == cg_last_ctx.ctx) && ctx &&
	    CG_LIKELY(cg_last_ctx.epoch == atomic_load_explicit(&cg_ctx_epoch, memory_order_acquire)))
		return cg_last_ctx.dev;
	return cg_ctx_device_ask(ctx);
}
/* A stream was destroyed: every thread's last stream answer is void. */
static inline void cg_stream_gone(void)
{
	atomic_fetch_add(&cg_ctx_epoch, 1);
}
/* The context whose modules ctx runs (docs/contexts.md): for a green
 * context's CUcontext, its device's primary context; for any other, ctx.
 * Known when the context was made (the hooks of shim/green.c and
 * cuCtxCreate), else asked of the driver once, with s a stream of ctx
 * (NULL: ctx is current).  Lock-free once known; never asked on the
 * launch path's fast path, only where handles differ. */
CUcontext cg_ctx_domain(CUcontext ctx, CUstream s);
/* Who owns what is made now (a module, memory): the current context's
 * domain; and what is made on stream s: its context's domain. */
CUcontext cg_owner_ctx(void);
CUcontext cg_stream_domain(CUstream s);
/* A green context's CUcontext, on device dev (-1: ask), made or met:
 * recorded, once, as an alias of dev's primary context. */
void cg_ctx_alias(CUcontext ctx, int dev);
/* dev's primary context while it is active (its reference count left as
 * it was), else NULL. */
CUcontext cg_ctx_primary(CUdevice dev);
/* Whether s is capturing a graph (or cannot be asked): then the slow paths
 * (naming a new function, its layout, an unknown address) wait for a
 * launch outside the capture, so ctxguard adds no driver call that a
 * global-mode capture could refuse. */
int cg_capturing(CUstream s);
void cg_ctx_forget(CUcontext ctx);
void cg_context_reset(void);

/* ---- device names (shim/device.c) ---- */

/* dev's PCI bus id and UUID, asked of the driver the first time a name is
 * wanted (a crossing's report); NULL when the driver does not say. */
const char *cg_device_pci(int dev);
const char *cg_device_uuid(int dev);
void cg_device_forked(void);                 /* in a forked child */

/* ---- operands (shim/memory.c, shim/tensormap.c, shim/layout.c) ---- */

enum { CG_MEM_NONE = -1, CG_MEM_ANY = -2 };
/* The allocation map's tag per 2 MiB granule of the 47-bit address space:
 * 0 unknown, device + 1, or CG_MEM_TAG_ANY (shim/memory.c keeps it). */
enum { CG_MEM_SHIFT = 21, CG_MEM_TAG_ANY = 255 };
typedef _Atomic unsigned char cg_tag;
extern _Atomic(cg_tag *) cg_granule_tags;
/* An address with no tag: the table (if the tags could not be reserved),
 * the negative cache, then the driver. */
int cg_mem_device_unmapped(uintptr_t a, CUstream stream);
/* What a tag says: the device, or CG_MEM_ANY. */
static inline int cg_mem_tag_device(int tag)
{
	return tag == CG_MEM_TAG_ANY ? CG_MEM_ANY : tag - 1;
}
/* Device holding address a, CG_MEM_ANY (managed, host-mapped) or
 * CG_MEM_NONE (not device memory).  Inline, lock-free: one load for any
 * address inside known memory. */
static inline int cg_mem_device(uintptr_t a, CUstream stream)
{
	/* Small integers and non-canonical values are not user addresses:
	 * most 8-byte kernel parameters that are not pointers end here. */
	if (a < 0x10000 || (a >> 47))
		return CG_MEM_NONE;
	cg_tag *tags = atomic_load_explicit(&cg_granule_tags, memory_order_acquire);
	int tag = tags ? atomic_load_explicit(&tags[a >> CG_MEM_SHIFT], memory_order_relaxed) : 0;
	if (CG_LIKELY(tag))
		return cg_mem_tag_device(tag);
	return cg_mem_device_unmapped(a, stream);
}
void cg_memory_reset(void);
/* ctx ended: the driver freed or unmapped its memory, forgotten as if freed. */
void cg_memory_forget_ctx(CUcontext ctx);
/* The driver added a node to graph from generic parameters: a memory
 * allocation or free node is recorded as its own API's would be. */
void cg_memory_node_added(CUgraph graph, const CUgraphNodeParams *p);

struct cg_tmap {
	uintptr_t addr;            /* global address; first: see cg_tmap_address */
	int dtype, rank;
	uint64_t dims[5];
	uint32_t box[5];
	uint64_t strides[4];       /* bytes, dimension 1 up (tiled encodes) */
	/* How a TMA copy through it moves data (a redirect must match them):
	 * tiled encodes only; the CUtensorMap* enum values as encoded. */
	int tiled;
	uint32_t elem_strides[5];
	int interleave, swizzle, l2promo, oobfill;
};
/* The tensor map whose 128 descriptor bytes are desc, if ctxguard saw it
 * encoded (bounded: the oldest are forgotten). */
int cg_tmap_find(const void *desc, struct cg_tmap *out);
void cg_tmap_reset(void);                /* in a forked child */
/* Bit i set: word i of every descriptor encoded so far held its global
 * address (shim/tensormap.c learns it); CG_TMAP_WORDS masks those bits. */
extern _Atomic uint32_t cg_tmap_addr_words;
enum { CG_TMAP_WORDS = 0xffff };
int cg_tmap_lookup_address(const void *desc, uintptr_t *addr);
/* The launch path's question: desc's global address, read where the
 * encodes showed the descriptor keeps it (else looked up).  Unconfirmed:
 * bytes never encoded give a meaningless value, so a finding is confirmed
 * with cg_tmap_find before it is reported. */
static inline int cg_tmap_address(const void *desc, uintptr_t *addr)
{
	uint32_t m = atomic_load_explicit(&cg_tmap_addr_words, memory_order_relaxed) & CG_TMAP_WORDS;
	if (CG_LIKELY(m)) {
		memcpy(addr, (const unsigned char *)desc + 8 * __builtin_ctz(m), sizeof *addr);
		return 1;
	}
	return cg_tmap_lookup_address(desc, addr);
}
/* Which 8-byte word of a descriptor holds its address; -1: the encodes
 * disagreed (the launch path hashes instead); -2: nothing encoded yet. */
int cg_tmap_address_word(void);
void cg_tmap_describe(const struct cg_tmap *t, char *buf, size_t n);

enum { CG_P_PTR = 1, CG_P_TMAP = 2 };
struct cg_layout {
	unsigned n;                /* pointer and tensor-map parameters only */
	struct { uint16_t index; uint16_t kind; uint32_t offset; } p[];
};
/* The parameters worth checking, from cuFuncGetParamInfo, once per
 * function (cached in the record: inline, one load once built). */
const struct cg_layout *cg_layout_build(const struct cg_fn *fn, CUstream stream);
static inline const struct cg_layout *cg_layout_of(const struct cg_fn *fn, CUstream stream)
{
	const struct cg_layout *l =
		atomic_load_explicit(&((struct cg_fn *)fn)->layout, memory_order_acquire);
	return CG_LIKELY(l) ? l : cg_layout_build(fn, stream);
}

/* Kind (b) for one launch of fn in ctx (shim/operands.c): its parameters
 * are kernelParams, else extra's buffer, or with extra CG_PARAM_SPACE what
 * cuParamSet* wrote into fn's parameter space (the deprecated launches). */
CUresult cg_check_operands(const char *api, const struct cg_fn *fn, CUcontext ctx,
			   CUstream stream, void **params, void **extra);
/* A mark, never handed to the driver: no extra array can be at address 1. */
#define CG_PARAM_SPACE ((void **)1)

/* The packed parameter buffer of a launch's extra form, or NULL, and in
 * *size the bytes its CU_LAUNCH_PARAM_BUFFER_SIZE says it holds (0 when
 * not given): a buffer too short for the kernel is the driver's to refuse,
 * never read past. */
static inline const unsigned char *cg_extra_buffer(void **extra, size_t *size)
{
	const unsigned char *buf = NULL;
	*size = 0;
	for (size_t i = 0; extra && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
		if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
			buf = extra[i + 1];
		else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1])
			memcpy(size, extra[i + 1], sizeof *size);
	}
	return buf;
}

/* The address operand p of layout l holds in a launch's parameters (the
 * kernelParams array, else the extra form's buffer of nbuf bytes), if it
 * is one: a tensor map's is unconfirmed (see cg_tmap_address). */
static inline int cg_operand_address(const struct cg_layout *l, unsigned p, void **params,
				     const unsigned char *buf, size_t nbuf, const void **bytes,
				     uintptr_t *a)
{
	if (!params && (nbuf < l->p[p].offset ||
			nbuf - l->p[p].offset < (l->p[p].kind == CG_P_PTR ? sizeof *a
									  : sizeof(CUtensorMap))))
		return 0;
	*bytes = params ? params[l->p[p].index] : buf + l->p[p].offset;
	if (l->p[p].kind == CG_P_PTR) {
		memcpy(a, *bytes, sizeof *a);
		return 1;
	}
	return cg_tmap_address(*bytes, a);
}

/* ---- the CUPTI backstop (shim/backstop.c) ---- */

/* Set while a hooked launch is in the real driver: the backstop's callback
 * then knows the launch was checked and returns at once. */
extern _Thread_local unsigned char cg_hooked_call CG_TLS;
/* Set while the backstop checks a launch that bypassed the hooks: CUPTI
 * cannot refuse a call, so an action that would refuse aborts instead. */
extern _Thread_local unsigned char cg_backstop_checking CG_TLS;
void cg_backstop_start(void);            /* at init, when the policy asks */
void cg_backstop_forked(void);           /* in a forked child */
/* Our hook for a CUPTI function the program looked up (dlsym), or NULL;
 * real is what the lookup found. */
void *cg_backstop_hook_for(const char *name, void *real);
/* "; backstop: ..." for the summary line, and the log's JSON fields. */
void cg_backstop_summary(char *line, size_t nline, char *json, size_t njson);

/* ---- launch checks (shim/launch.c) ---- */

/* Chooses the launch check's parts from the policy (once, at start-up). */
void cg_launch_configure(const struct cg_policy *p);
/* CUDA_SUCCESS to go on with the real call, else the code to return.
 * launch_ctx NULL: the stream's (or current) context. */
CUresult cg_check_launch(const char *api, CUfunction f, CUcontext launch_ctx,
			 CUstream stream, void **params, void **extra);
/* How many entries of cuLaunchCooperativeKernelMultiDevice's list the
 * driver would read: n, or 0 for a count it refuses unread. */
unsigned cg_multi_entries(const CUDA_LAUNCH_PARAMS *list, unsigned n);
/* cuLaunchCooperativeKernelMultiDevice's n launches, each checked. */
CUresult cg_check_each(const char *api, const CUDA_LAUNCH_PARAMS *list, unsigned n);

/* ---- actions (shim/action.c) ---- */

/* Where fn came from, for reports: its file, image hash or image. */
const char *cg_fn_origin(const struct cg_fn *fn);

/* A crossing by fn, launched in launch_ctx, with everything the report
 * names filled in; kind (b) adds the operand fields. */
void cg_crossing_init(struct cg_crossing *c, char kind, const char *api, const struct cg_fn *fn,
		      CUcontext launch_ctx, int launch_dev, CUstream stream);

/* Decides and carries out the action for a crossing; returns CUDA_SUCCESS
 * (warn/off: launch anyway) or the error code to return (error).  abort
 * does not return. */
CUresult cg_act(struct cg_crossing *c, const struct cg_fn *fn);
/* The same with the action given (a redirect's fallback). */
CUresult cg_act_as(struct cg_crossing *c, const struct cg_fn *fn, int action);
/* Each kernel's first print_limit crossings are reported in full; after
 * that they are counted, so a warn-mode loop cannot flood stderr or the log.
 * The code this thread's last refusal returned (shim/action.c), whose
 * message cuGetErrorString gives while it stands. */
extern _Thread_local CUresult cg_refused_code CG_TLS;
static inline void cg_error_clear(void)      /* a launch went through */
{
	cg_refused_code = CUDA_SUCCESS;
}
/* The message that replaces cuGetErrorString's for this thread, or NULL. */
const char *cg_error_message(CUresult code);

/* ---- reporting (shim/report.c) ---- */

/* "exit PID LAUNCHES" in the command's status file, if it named one. */
void cg_status_exit(unsigned long launches);

/* The summary's counters, X(NAME, key, group, one, many, help): key names it
 * in the log and the metrics; group NULL for a count of its own, else the
 * group it is one member of ("crossings", by action); one/many: its words
 * on the summary line (NULL: not there); help: the metric's # HELP (a
 * group's first member says it for the group).  Adding a counter is one line. */
#define CG_COUNTERS(X)                                                                    \
	X(LAUNCHES, "launches", NULL, "launch checked", "launches checked",                \
	  "Kernel launches ctxguard checked")                                               \
	X(CROSS_ABORT, "abort", "crossings", NULL, NULL,                                   \
	  "Launches that crossed CUDA contexts or devices, by the action taken")           \
	X(CROSS_ERROR, "error", "crossings", NULL, NULL, NULL)                            \
	X(CROSS_WARN, "warn", "crossings", NULL, NULL, NULL)                              \
	X(CROSS_OFF, "off", "crossings", NULL, NULL, NULL)                                \
	X(REDIRECT, "redirect", "crossings", NULL, NULL, NULL)                            \
	X(HOOKED_DLSYM, "hooked_by_dlsym", NULL, NULL, NULL,                               \
	  "Driver entry points handed out through dlsym")                                   \
	X(HOOKED_PROCADDR, "hooked_by_getprocaddress", NULL, NULL, NULL,                   \
	  "Driver entry points handed out through cuGetProcAddress")                        \
	X(LOG_LOST, "log_records_lost", NULL, NULL, NULL,                                  \
	  "Log records that could not be written whole")                                    \
	X(UNHOOKED, "unhooked", NULL, NULL, NULL,                                          \
	  "Launches the CUPTI backstop saw bypass the hooks")                                \
	X(LOG_FALLBACK, "log_name_fallbacks", NULL, NULL, NULL,                            \
	  "Logs opened under a fresh name because the planned one was taken")               \
	X(BACKSTOP_YIELDED, "backstop_yielded", NULL, NULL, NULL,                          \
	  "Times the CUPTI backstop stepped aside for the program's own subscriber")

enum cg_counter {
#define X(name, ...) CG_C_##name,
	CG_COUNTERS(X)
#undef X
	CG_NCOUNTERS
};
extern const struct cg_counter_info {
	const char *key, *group, *one, *many, *help;
} cg_counters[CG_NCOUNTERS];
/* The calling thread's block of counters (shim/report.c), and whether
 * other threads share it (past the pool's size); v is NULL until its
 * first count, which cg_bump_first makes. */
enum { CG_NSLOTS = CG_NCOUNTERS + CG_NVARIANTS };
struct cg_counts {
	_Atomic unsigned long *v;
	int shared;
};
extern _Thread_local struct cg_counts cg_counts CG_TLS;
void cg_bump_first(int slot);
/* A count in a block the thread owns: a plain add, no locked instruction. */
static inline void cg_bump_own(_Atomic unsigned long *v, int slot)
{
	atomic_store_explicit(&v[slot], atomic_load_explicit(&v[slot], memory_order_relaxed) + 1,
			      memory_order_relaxed);
}
/* Inline: the launch path counts twice (the variant, the check). */
static inline void cg_bump(int slot)
{
	_Atomic unsigned long *v = cg_counts.v;
	if (CG_UNLIKELY(!v))
		cg_bump_first(slot);
	else if (CG_LIKELY(!cg_counts.shared))
		cg_bump_own(v, slot);
	else
		atomic_fetch_add_explicit(&v[slot], 1, memory_order_relaxed);
}
/* sharded, no shared cache line */
static inline void cg_count(enum cg_counter c) { cg_bump(c); }
static inline void cg_count_variant(int variant) { cg_bump(CG_NCOUNTERS + variant); }
unsigned long cg_counter_total(enum cg_counter c);
void cg_report_start(void);              /* once, at init */
void cg_report_forked(void);             /* in a forked child */
/* One JSON object {"event":"...",...} per line of the log, time, host,
 * pid, tid and job added after the event; under `log = syslog` only the
 * events shim/syslog.c lists go there. */
void cg_log_event(const char *event, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* A crossing's record (cg_format_json), at its action's syslog priority:
 * in buf when it fits in n bytes, else in one of its length, never cut
 * short. */
void cg_log_crossing(const struct cg_crossing *c, char *buf, size_t n);
void cg_stderr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cg_write_stderr(const char *s);
void cg_status_crossing(int action);         /* for the ctxguard command */
/* A status line of its own ("unhooked", "unwatched", "unchecked",
 * "unmapped"): each word once per process, however often it is said. */
void cg_status_word(const char *word);
void cg_status_forked(void);                 /* in a forked child */
void cg_report_summary(void);

/* ---- who writes (shim/identity.c) ---- */

/* ,"pid":..,"version":..,"host":.. and the job's keys present in the
 * environment (RANK, SLURM_JOB_ID, POD_NAME...), read once per process. */
const char *cg_identity_json(void);
const char *cg_identity_labels(void);        /* the same as Prometheus labels */
/* A path with %p (pid), %h (host), %r (rank or "-") filled in. */
int cg_identity_expand(const char *tpl, char *out, size_t n);
void cg_identity_forked(void);               /* re-read on next use */

/* ---- syslog (shim/syslog.c) ---- */

/* "syslog" or "syslog:SOCKET" (default /dev/log): whether path names it. */
int cg_syslog_named(const char *path);
void cg_syslog_open(const char *path);
/* The priority of a record of event (len bytes) and action (a crossing's,
 * else CG_ACT_UNSET), -1 when syslog does not take it. */
int cg_syslog_priority(const char *event, size_t len, int action);
void cg_syslog_send(int prio, const struct iovec *v, int n);

/* ---- metrics (shim/metrics.c) ---- */

/* The counters in Prometheus text format, written to a temporary file and
 * renamed over the policy's metrics path. */
void cg_metrics_write(const unsigned long *totals);
/* Opens a log file for appending, refusing symlinks in the path and
 * anything but a regular file (shim/logfile.c); a new file gets mode.  -1
 * with the reason in why.  Where others may write, a name taken by
 * something else gives a fresh name beside it: then that path is in fresh
 * and why says what was at the name (counted: log_name_fallbacks). */
int cg_log_open(const char *path, int mode, char *why, size_t n, char *fresh, size_t nfresh);

#pragma GCC visibility pop

#endif
