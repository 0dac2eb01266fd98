/*
 * Internal state of the fake CUDA driver (build/fake/libcuda.so.1).
 *
 * The fake reproduces the driver behaviour measured on H200s (shared/DESIGN.md) so
 * the shim can be tested on machines without a GPU. Every exported cu* entry point
 * takes the one global lock through FAKE_ENTER and releases it with fake_leave; the
 * helpers declared here assume the lock is held unless they say otherwise.
 *
 * Driver objects are the opaque CUDA handle structs themselves (struct CUctx_st is a
 * context, ...). They come from per-kind pools with LIFO free lists so that a handle
 * released by destroy/unload is handed out again by the next create/load: tests use
 * that to check that the shim never keeps a stale owner for a reused handle.
 */
#ifndef CTXGUARD_FAKE_H
#define CTXGUARD_FAKE_H

/* Declare every versioned variant un-macroed so definitions are checked against them. */
#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>

#include <cupti_driver_cbid.h>
#include <generated_cuda_meta.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fake_api.h"

#pragma GCC visibility push(hidden)

#define FAKE_DRIVER_VERSION 13000
#define FAKE_DEFAULT_DEVICES 2
#define FAKE_MAX_PARAM_BYTES 32764 /* kernel parameter limit since CUDA 12.1 */
#define FAKE_GRANULARITY (2ull << 20)
#define FAKE_MAX_SHARED_OPTIN 232448 /* H200 opt-in dynamic shared memory per block */

/* ---- lock and entry gate (state.c) ---- */

/*
 * Takes the global lock for entry point `api` (pass __func__). Returns an error with the
 * lock released when the driver is not initialized (need_init) or a failure was injected
 * for `api` with fake_fail_next; CUDA_SUCCESS with the lock held otherwise.
 */
CUresult fake_enter(const char *api, bool need_init);
CUresult fake_leave(CUresult rc);
void fake_lock(void); /* for the introspection API, which bypasses the gate */
void fake_unlock(void);
bool fake_initialized(void);
void fake_set_initialized(void);

#define FAKE_ENTER_IMPL(need_init)                                                                 \
	do {                                                                                       \
		CUresult fake_enter_rc_ = fake_enter(__func__, (need_init));                       \
		if (fake_enter_rc_ != CUDA_SUCCESS)                                                \
			return fake_enter_rc_;                                                     \
	} while (0)
#define FAKE_ENTER() FAKE_ENTER_IMPL(true)
/* An entry point CUPTI traces (sym: the exported name, whose cbid is
 * CUPTI_DRIVER_TRACE_CBID_<sym>): the entry callback, the gate, `call`
 * under the lock, the exit callback; returns from the caller. */
#define FAKE_TRACED(sym, params, call)                                                             \
	do {                                                                                       \
		fake_api_trace(0, CUPTI_DRIVER_TRACE_CBID_##sym, #sym, (params), NULL);            \
		CUresult traced_rc_ = fake_enter(#sym, true);                                      \
		if (traced_rc_ == CUDA_SUCCESS)                                                    \
			traced_rc_ = fake_leave(call);                                             \
		fake_api_trace(1, CUPTI_DRIVER_TRACE_CBID_##sym, #sym, (params), &traced_rc_);     \
		return traced_rc_;                                                                 \
	} while (0)
/* The subscriber's callback, if any (apitrace.c). */
void fake_api_trace(int site, unsigned cbid, const char *name, const void *params, CUresult *rc);
#define FAKE_ENTER_NOINIT() FAKE_ENTER_IMPL(false)

/* Pending failure injected for `api` (any variant of it), consumed; CUDA_SUCCESS if none. */
CUresult fake_take_injected(const char *api);
/* The hook of fake_after_next, if it is for `api`: due on this thread
 * (under the lock); fake_run_after runs it (after the unlock, when
 * fake_due.fn is set: every call leaves through that test). */
struct fake_due {
	void (*fn)(void *);
	void *arg;
};
extern bool fake_after_armed; /* a hook waits for its call (under the lock) */
extern _Thread_local struct fake_due fake_due __attribute__((tls_model("initial-exec")));
void fake_take_after(const char *api);
void fake_run_after(void);

/* ---- growable arrays and object pools (pool.c) ---- */

/* Returns `arr` with room for `need` elements of `elem` bytes, updating *cap; NULL on out
 * of memory, leaving `arr` as it was. */
void *fake_grow(void *arr, size_t *cap, size_t need, size_t elem);

struct fake_hdr {
	bool live; /* false while the object waits on its pool's free list */
};

struct fake_pool {
	size_t objsize;
	void **all; /* every object ever made, in creation order */
	size_t nall, capall;
	void **free; /* released objects, reused last-in first-out */
	size_t nfree, capfree;
};

#define FAKE_POOL_INIT(type) {.objsize = sizeof(type)}

void *fake_pool_take(struct fake_pool *p); /* zeroed live object, NULL on out of memory */
void fake_pool_give(struct fake_pool *p, void *obj);
bool fake_pool_live(const struct fake_pool *p, const void *obj);
/* Every live object whose CUcontext member at byte offset ctx_at is ctx goes back. */
void fake_pool_give_ctx(struct fake_pool *p, size_t ctx_at, CUcontext ctx);
/* Gives obj back; CUDA_ERROR_INVALID_HANDLE if p holds no such live object. */
CUresult fake_pool_destroy(struct fake_pool *p, void *obj);

/* ---- module images (image.c) ---- */

struct fake_kdesc {
	char *name;
	unsigned nparams;
	size_t *size;	/* bytes of each parameter */
	size_t *offset; /* offset of each parameter in the packed argument buffer */
	size_t argbytes;
};

struct fake_image {
	unsigned nkern;
	struct fake_kdesc *kern;
};

CUresult fake_image_parse(const char *text, struct fake_image *out);
CUresult fake_image_load_file(const char *path, struct fake_image *out);
/* fatbin.c: whether image starts like a fatbin; the bundled kernels' image. */
bool fake_image_is_fatbin(const void *image);
CUresult fake_image_bundled(struct fake_image *out);
int fake_image_find(const struct fake_image *img, const char *name); /* index or -1 */
void fake_image_free(struct fake_image *img);
CUresult fake_kdesc_copy(struct fake_kdesc *dst, const struct fake_kdesc *src);
void fake_kdesc_free(struct fake_kdesc *kd);

/* ---- devices (device.c) ---- */

struct fake_device {
	CUcontext primary;
	CUmemoryPool default_pool;
};

extern int fake_ndev;
extern struct fake_device fake_dev[FAKE_MAX_DEVICES];
bool fake_dev_valid(CUdevice dev);

/* ---- contexts (context.c) ---- */

struct CUctx_st {
	struct fake_hdr h;
	CUdevice dev;
	bool primary;
	unsigned retain; /* primary contexts: usable while retained */
	unsigned flags;
	unsigned long long id;
	CUresult sticky;  /* error every later sync and launch in this context returns */
	bool pending;	  /* work on its legacy stream not yet synchronized */
	CUcontext *peers; /* contexts whose memory this one may access */
	size_t npeers, cappeers;
	CUcontext green_of; /* a green context's CUcontext: its device's primary context */
	CUgreenCtx green;   /* ... and the green context it stands for */
};

extern struct fake_pool fake_ctx_pool;
/* The context whose modules, memory and events ctx shares: a green context's primary
 * context, else ctx itself. */
CUcontext fake_ctx_domain(CUcontext ctx);
/* The CUcontext of a new green context on dev (its primary retained), and its end. */
CUresult fake_ctx_create_green(CUdevice dev, CUgreenCtx green, CUcontext *out);
void fake_ctx_destroy_green(CUcontext ctx);

CUresult fake_ctx_create_primary(CUdevice dev, CUcontext *out);
CUcontext fake_ctx_current(void); /* calling thread's current context, possibly stale */
bool fake_ctx_usable(CUcontext ctx);
CUresult fake_ctx_require_current(CUcontext *out); /* INVALID_CONTEXT without a usable one */
bool fake_ctx_peer_enabled(CUcontext from, CUcontext to);

/* ---- streams (stream.c) ---- */

struct CUstream_st {
	struct fake_hdr h;
	CUcontext ctx;
	unsigned flags;
	int priority;
	bool capturing; /* set by fake_stream_set_capturing */
	bool pending;	/* a kernel was launched on it since its last synchronization */
};

bool fake_stream_is_special(CUstream s); /* NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD */
CUresult fake_stream_create(CUcontext ctx, CUstream *phStream, unsigned flags, int priority);
CUresult fake_stream_ctx(CUstream s, CUcontext *out);
void fake_stream_drop_ctx(CUcontext ctx);
/* Work queued on s (in ctx), pending until a synchronization; ctx's synchronization
 * covers all its streams. */
void fake_stream_note_work(CUstream s, CUcontext ctx);
void fake_stream_sync_ctx(CUcontext ctx);

/* ---- events (event.c) ---- */

struct CUevent_st {
	struct fake_hdr h;
	CUcontext ctx;
	unsigned flags;
	bool recorded;
};

void fake_event_drop_ctx(CUcontext ctx);

/* ---- the call trace (trace.c) ---- */

void fake_trace_note(const char *api, CUcontext ctx, const void *stream, const void *object,
		     const char *kernel);

/* ---- modules, functions, libraries, kernels (module.c, library.c) ---- */

#define FAKE_NATTR CU_FUNC_ATTRIBUTE_MAX

struct CUmod_st {
	struct fake_hdr h;
	CUcontext ctx;
	CUlibrary lib;	       /* owning library, NULL for modules loaded directly */
	struct fake_image own; /* image of a directly loaded module */
	const struct fake_image *img;
	CUfunction *fn; /* one function per kernel of img, same order */
};

struct CUfunc_st {
	struct fake_hdr h;
	CUmodule mod;
	unsigned index;
	int attr[FAKE_NATTR];
	/* Execution configuration of the deprecated cuLaunch / cuLaunchGrid* (legacy.c). */
	unsigned block[3];
	unsigned shared;
	unsigned char *params; /* the parameter space cuParamSet* write, or NULL */
	size_t nparams;	       /* its bytes a launch passes: cuParamSetSize's */
};

struct CUlib_st {
	struct fake_hdr h;
	struct fake_image img;
	CUkernel *kern;
	CUmodule *mods; /* the library's module in each context that asked for one */
	size_t nmods, capmods;
};

struct CUkern_st {
	struct fake_hdr h;
	CUlibrary lib;
	unsigned index;
	int attr[FAKE_MAX_DEVICES][FAKE_NATTR]; /* cuKernelSetAttribute's, per device */
};

extern struct fake_pool fake_func_pool;
extern struct fake_pool fake_kern_pool;

extern const int fake_default_func_attr[FAKE_NATTR];
CUresult fake_func_attr_check(CUfunction_attribute attrib, int value); /* settable, in range */
/* A module in ctx, either of a library (own NULL) or owning the image *own (moved in,
 * freed on failure). */
CUresult fake_module_create(CUcontext ctx, CUlibrary lib, struct fake_image *own, CUmodule *out);
void fake_module_destroy(CUmodule mod);
void fake_module_drop_ctx(CUcontext ctx);
const struct fake_kdesc *fake_func_desc(CUfunction f);
const struct fake_kdesc *fake_kern_desc(CUkernel k);
CUresult fake_library_module(CUlibrary lib, CUcontext ctx, bool create, CUmodule *out);
void fake_library_drop_ctx(CUcontext ctx);

/* ---- memory (memory.c, mempool.c, vmm.c, ipc.c) ---- */

enum fake_mem_kind {
	FAKE_MEM_DEVICE,     /* cuMemAlloc*, stream-ordered allocations; never backed */
	FAKE_MEM_MANAGED,    /* cuMemAllocManaged; never backed, reachable from every device */
	FAKE_MEM_HOST,	     /* cuMemAllocHost / cuMemHostAlloc: real memory */
	FAKE_MEM_REGISTERED, /* cuMemHostRegister: the caller's memory */
	FAKE_MEM_VMM,	     /* a cuMemMap mapping of a cuMemCreate (or imported) handle */
	FAKE_MEM_POOL_HOST,  /* from a host-located pool; never backed, reachable from every device */
	FAKE_MEM_IPC,	     /* a cuIpcOpenMemHandle mapping of another allocation; never backed */
	FAKE_MEM_POOL_IMPORT, /* a cuMemPoolImportPointer mapping of a pool allocation; never backed */
	FAKE_MEM_EXTERNAL,    /* a buffer mapped onto imported external memory; never backed */
	FAKE_MEM_GRAPH,	      /* a graph allocation node's memory while allocated; never backed */
};

struct fake_phys; /* cuMemCreate handle (vmm.c) */

struct fake_alloc {
	CUdeviceptr base;
	size_t size;
	enum fake_mem_kind kind;
	CUdevice dev;
	CUcontext ctx;	       /* owner, NULL for VMM mappings and graph memory */
	CUmemoryPool pool;     /* stream-ordered allocations */
	unsigned long long id; /* CU_POINTER_ATTRIBUTE_BUFFER_ID */
	void *host;	       /* FAKE_MEM_HOST: the memory to free */
	struct fake_phys *phys;
	CUdeviceptr resv_base; /* VMM: the reservation holding the mapping */
	size_t resv_size;
	unsigned access; /* VMM, graph memory: bit d set when device d may access it */
	unsigned long long source; /* IPC, pool imports: the mapped allocation's buffer id */
	unsigned opens;		   /* IPC: opens of its handle in ctx not yet closed */
	unsigned char *bytes;	   /* what copies wrote (NULL: all zeros so far) */
};

struct CUmemPoolHandle_st {
	struct fake_hdr h;
	CUdevice dev; /* a device pool's */
	bool host;    /* located in host memory (HOST or HOST_NUMA) */
	bool is_default;
	bool shareable; /* made with a handle type: its allocations can be exported */
};

extern struct fake_pool fake_mempool_pool;

/* Address ranges, one per device so that devices are distinguishable by address. */
#define FAKE_DEVICE_BASE(d) (0x7f0000000000ull + ((CUdeviceptr)(d) + 1) * 0x1000000000ull)
#define FAKE_DEVICE_SPAN 0x1000000000ull
#define FAKE_MANAGED_BASE 0x7e0000000000ull
#define FAKE_VMM_BASE 0x7d0000000000ull
#define FAKE_SHARED_BASE 0x7c0000000000ull /* IPC, pool-import and external-memory mappings */
#define FAKE_GRAPH_BASE 0x7b0000000000ull  /* graph allocation nodes' addresses */
#define FAKE_REGION_SPAN 0x10000000000ull

/* Range pointers stay valid until the next add or remove. */
struct fake_alloc *fake_mem_find(CUdeviceptr p);   /* live range holding p, or NULL */
CUresult fake_mem_add(const struct fake_alloc *a); /* fails if it overlaps a live range */
void fake_mem_remove(CUdeviceptr base);
bool fake_mem_overlaps(CUdeviceptr base, size_t size);
/* Allocates device memory of `dev` owned by `ctx`; `pool` for stream-ordered allocations. */
CUresult fake_mem_alloc_device(CUdevice dev, CUcontext ctx, CUmemoryPool pool, size_t size,
			       CUdeviceptr *out);
/* ... and memory of a host-located pool, allocated in `ctx`. */
CUresult fake_mem_alloc_pool_host(CUcontext ctx, CUmemoryPool pool, size_t size, CUdeviceptr *out);
void fake_mem_drop_ctx(CUcontext ctx);
void fake_mem_drop_pool(CUmemoryPool pool);
/* An access descriptor the driver takes: a valid device, a known protection (vmm.c). */
bool fake_access_desc_valid(const CUmemAccessDesc *d);
/* Maps m (its size set) at the lowest granule of the shared range with room for it (ipc.c). */
CUresult fake_mem_map_shared(struct fake_alloc m, CUdeviceptr *out);
void fake_extmem_drop_ctx(CUcontext ctx); /* external.c */

/* ---- graph memory nodes (graphmem.c) ---- */

/* Reserves an allocation node's addresses for graph g: *out, on the device props names. */
CUresult fake_gmem_reserve(CUgraph g, const CUmemPoolProps *props, const CUmemAccessDesc *acc,
			   size_t nacc, size_t size, CUdeviceptr *out);
/* A free node in graph g for the allocation at p. */
CUresult fake_gmem_free_node(CUgraph g, CUdeviceptr p);
/* An instantiation holding the allocation node at p made (+1) or destroyed (-1). */
void fake_gmem_hold(CUdeviceptr p, int delta);
bool fake_gmem_live(CUdeviceptr p); /* allocated by a launch and not freed since */
/* A launch reaching the allocation node (live true) or a free node of p. */
CUresult fake_gmem_map(CUdeviceptr p, bool live);
/* cuMemFree[Async] of the graph allocation at p. */
CUresult fake_gmem_free(CUdeviceptr p);
/* Graph g destroyed: its allocation and free nodes end. */
void fake_gmem_graph_gone(CUgraph g);
/* Graph from moved into graph to: its allocation and free nodes are to's. */
void fake_gmem_graph_moved(CUgraph from, CUgraph to);
size_t fake_mem_count(void);
struct fake_alloc *fake_mem_at(size_t i); /* i-th range in address order */

/* ---- tensor maps (tensormap.c) ---- */

/* Global address recorded for a descriptor made by cuTensorMapEncode*, if any. */
bool fake_tmap_lookup(const void *desc, CUdeviceptr *addr);

/* ---- launches (launch.c) ---- */

struct fake_dims {
	unsigned grid[3];
	unsigned block[3];
	unsigned shared;
	unsigned cluster[3]; /* all zero without a cluster dimension attribute */
};

/*
 * Finds what `f` runs in context `ctx`: a CUfunction of that context or a CUkernel cast
 * to CUfunction. A CUfunction of another context or a dead handle is
 * CUDA_ERROR_INVALID_HANDLE (counted as refused).
 */
CUresult fake_launch_resolve(CUfunction f, CUcontext ctx, const struct fake_kdesc **kd,
			     const int **attr);
CUresult fake_launch_check_dims(const struct fake_dims *d, const int *attr);
/* A whole launch: context from the stream, sticky error, function, checks, execution. */
CUresult fake_launch(CUfunction f, const struct fake_dims *d, CUstream hStream, void **kernelParams,
		     void **extra, bool cooperative);
/* Packs kernelParams or an `extra` buffer into buf (kd->argbytes bytes). */
CUresult fake_launch_pack(const struct fake_kdesc *kd, void **kernelParams, void **extra,
			  unsigned char *buf);
/* "Executes" a kernel: checks the operands it reaches and records the launch. */
CUresult fake_launch_run(CUcontext ctx, const struct fake_kdesc *kd, const unsigned char *buf);

/* ---- introspection counters (introspect.c) ---- */

extern struct fake_stats fake_counters;
void fake_note_launch(CUcontext ctx, const struct fake_kdesc *kd, const unsigned char *buf,
		      unsigned crossings);

#pragma GCC visibility pop

#endif
