/* Tracking (shim/track/): what the driver made and where it lives: modules
 * and functions, contexts and devices, memory, tensor maps, parameter
 * layouts.  Reads on the launch path are lock-free and inline. */
#ifndef CTXGUARD_TRACK_H
#define CTXGUARD_TRACK_H

#include "../shim.h"
#include "table.h"

#pragma GCC visibility push(hidden)

/* ---- registries (shim/track/registry.c) ---- */

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

struct cg_params;              /* what cuParamSet* wrote (shim/check/operands.c) */

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

void cg_registry_on_fork(void);
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
/* CUfunction/CUkernel -> cg_fn (shim/track/registry.c). */
extern struct cg_table cg_fns;
/* Lock-free and inline: the launch path's only registry read. */
static inline const struct cg_fn *cg_fn_get(uintptr_t handle)
{
	return cg_table_get(&cg_fns, handle);
}
/* A function first met at launch (loaded out of sight): registered once,
 * unowned, so its operands can be checked under scope all. */
const struct cg_fn *cg_fn_seen(uintptr_t handle, CUstream stream);
/* Moves before and after any function record goes or is replaced. */
extern _Atomic unsigned cg_fn_epoch;
/* Unpublishes the modules and functions owned by ctx (being destroyed). */
void cg_registry_on_ctx_end(CUcontext ctx);
void cg_registry_counts(size_t *mods, size_t *fns, size_t *experts);

/* ---- contexts (shim/track/context.c) ---- */

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
 * Known when the context was made (the hooks of shim/track/green.c and
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
/* The CUcontext standing for green context g (shim/track/green.c), or NULL. */
CUcontext cg_green_ctx(CUgreenCtx g);
/* dev's primary context while it is active (its reference count left as
 * it was), else NULL. */
CUcontext cg_ctx_primary(CUdevice dev);
/* Whether s is capturing a graph (or cannot be asked): then the slow paths
 * (naming a new function, its layout, an unknown address) wait for a
 * launch outside the capture, so ctxguard adds no driver call that a
 * global-mode capture could refuse. */
int cg_capturing(CUstream s);
void cg_context_on_ctx_end(CUcontext ctx);
void cg_context_on_fork(void);

/* ---- device names (shim/track/device.c) ---- */

/* dev's PCI bus id and UUID, asked of the driver the first time a name is
 * wanted (a crossing's report); NULL when the driver does not say. */
const char *cg_device_pci(int dev);
const char *cg_device_uuid(int dev);
void cg_device_on_fork(void);                 /* in a forked child */

/* ---- operands (shim/track/addresses.c, shim/track/tensormap.c, shim/track/layout.c) ---- */

enum { CG_MEM_NONE = -1, CG_MEM_ANY = -2 };
/* The allocation map's tag per 2 MiB granule of the 47-bit address space:
 * 0 unknown, device + 1, or CG_MEM_TAG_ANY (shim/track/addresses.c keeps it). */
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
void cg_memory_on_fork(void);
void cg_allocations_on_fork(void);      /* the VMM handles' references */
/* ctx ended: the driver freed or unmapped its memory, forgotten as if freed. */
void cg_memory_on_ctx_end(CUcontext ctx);
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
void cg_tmap_on_fork(void);                /* in a forked child */
/* Bit i set: word i of every descriptor encoded so far held its global
 * address (shim/track/tensormap.c learns it); CG_TMAP_WORDS masks those bits. */
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


#pragma GCC visibility pop

#endif
