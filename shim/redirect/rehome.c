/* Re-homing: the same kernel, made in another context.  A function of a
 * library (DeepGEMM's cuLibraryLoadFromFile + cuKernelGetFunction) is
 * fetched again there from its CUkernel; a module is loaded again from its
 * file (the registry's path) or from the copy of an in-memory image kept at
 * load (only while the policy can redirect: the copy costs the image's
 * size); a CUkernel launched as a function runs anywhere already, unless
 * the program set attributes on it for the launch's device: its twin is
 * then its function in the target context (cuKernelGetFunction).  The
 * attributes the program set (cuFuncSetAttribute, cuKernelSetAttribute:
 * recorded here) are replayed on the twin with cuFuncSetAttribute, never
 * cuKernelSetAttribute, which waits for the device's running work
 * (measured on an H200: bench/driver_waits.c), as cuModuleUnload does.
 *
 * Twins are made once per original and context, and found by the
 * original's registry record: a handle the driver hands out again has a
 * new record, so it never meets an old twin.  The original's unload, or
 * its context's end, unlists its twins and takes its attributes, but
 * ctxguard never unloads a module itself: cuModuleUnload waits for all the
 * work running in the module's context (bench/driver_waits.c, even for a
 * module never launched), and a redirect must never wait for the device
 * (README, Deadlock).  So a twin's module stays loaded until its context
 * ends: one per re-homed original and target context (and the copy of a
 * thread that lost the race to make it). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redirect.h"
#include "../report/report.h"

enum { NATTR = CU_FUNC_ATTRIBUTE_MAX };

/* An in-memory image to load again. */
struct kept {
	uintptr_t module;
	CUcontext owner;           /* the module's context, for cg_rehome_on_ctx_end */
	void *bytes;
	unsigned users;            /* loads reading bytes outside the lock */
	int gone;                  /* unlisted while in use: its last user frees it */
	struct kept *next;
};

/* Attributes set on a function (dev -1), or on a kernel for device dev: a
 * snapshot, never changed once published (a change publishes a new one). */
struct attrs {
	uintptr_t handle;
	int dev;
	const struct cg_mod *mod;  /* its module or library, for cg_rehome_drop */
	CUcontext owner;           /* a function's context, for cg_rehome_on_ctx_end */
	int value[NATTR];
	uint64_t set;              /* bit a: value[a] was set */
	unsigned stamp;            /* of the last change, unique in the process */
	struct attrs *retired;     /* replaced or dropped snapshots, kept */
};

struct twin {
	const struct cg_fn *fn;    /* the original's record (records are never freed) */
	CUcontext ctx;
	CUfunction f;              /* NULL: not in the image loaded again (rc); not
				    * tried again, each try would load a module */
	CUresult rc;
	_Atomic unsigned stamp;    /* of the attributes replayed (0: none) */
	_Atomic(struct twin *) next;
	struct twin *retired;      /* unlisted twins, kept */
};

/* A redirect's path takes no lock: the attributes are a concurrent table of
 * snapshots (a program setting the same value before each launch, as
 * DeepGEMM's launchers do, changes nothing), the twins a list read without
 * a lock.  Writers (a change of attribute, a new twin, an unload, a
 * context's end) serialise on `lock`, and what they replace or unlist is
 * kept, not freed, because a reader may still be looking at it. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct kept *kept;
static struct cg_table attrs = CG_TABLE_INIT;
static struct attrs *attrs_retired;
static _Atomic(struct twin *) twins;
static struct twin *twins_retired;
static unsigned stamps;

/* A kernel's attributes are per device: its key is the handle with the
 * device above the address bits (a handle is an address below 2^48). */
static uintptr_t attrs_key(uintptr_t handle, int dev)
{
	return handle ^ ((uintptr_t)(unsigned)(dev + 1) << 48);
}

void cg_rehome_keep(uintptr_t module, CUcontext owner, const char *path, const void *image)
{
	if (!module || path || !image || !cg_policy_redirects(cg_policy))
		return;
	struct kept *k = calloc(1, sizeof *k);
	if (!k)
		return;
	k->module = module;
	k->owner = owner;
	/* One byte more: text images are loaded as NUL-terminated. */
	size_t n = cg_image_span(&image);
	if (!(k->bytes = calloc(1, n + 1))) {
		free(k);
		return;
	}
	memcpy(k->bytes, image, n);
	pthread_mutex_lock(&lock);
	k->next = kept;
	kept = k;
	pthread_mutex_unlock(&lock);
}

static void free_kept(struct kept *k)
{
	free(k->bytes);
	free(k);
}

/* m is module or library h, or a module of library h. */
static int belongs(const struct cg_mod *m, uintptr_t h)
{
	return m && (m->handle == h || (m->lib && m->lib->handle == h));
}

struct prune_of {
	uintptr_t h;
	CUcontext ctx;
};

/* Under the lock (and the table's): an attribute snapshot of what goes. */
static int attrs_pruned(void *val, const void *arg)
{
	struct attrs *a = val;
	const struct prune_of *of = arg;
	if (of->h ? !belongs(a->mod, of->h) : a->owner != of->ctx)
		return 0;
	a->retired = attrs_retired;
	attrs_retired = a;
	return 1;
}

/* Under the lock: what goes with module (or library) h, or with context
 * ctx when h is 0: image copies, recorded attributes, and twins, unlisted
 * but never unloaded (see above).  A twin of a gone original would not be
 * found again (its record is gone too); one made in ctx would, for a new
 * context that gets ctx's handle. */
static void prune(uintptr_t h, CUcontext ctx)
{
	for (struct kept **q = &kept; *q;) {
		struct kept *k = *q;
		if (h ? k->module != h : k->owner != ctx) {
			q = &k->next;
			continue;
		}
		*q = k->next;
		if (k->users)
			k->gone = 1;
		else
			free_kept(k);
	}
	const struct prune_of of = {h, ctx};
	cg_table_sweep(&attrs, attrs_pruned, &of);
	for (_Atomic(struct twin *) *q = &twins; atomic_load(q);) {
		struct twin *t = atomic_load(q);
		if (h ? !belongs(t->fn->mod, h) : t->ctx != ctx && t->fn->owner != ctx) {
			q = &t->next;
			continue;
		}
		atomic_store_explicit(q, atomic_load(&t->next), memory_order_release);
		t->retired = twins_retired;
		twins_retired = t;
	}
}

/* Before an unload: the handle, and its functions', may come back. */
void cg_rehome_drop(uintptr_t module)
{
	if (!module)
		return;
	pthread_mutex_lock(&lock);
	prune(module, NULL);
	pthread_mutex_unlock(&lock);
}

/* A context that ended took its modules with it: those it owned, whose
 * twins elsewhere are no longer used, and those of the twins made in it.
 * Their handles may come back. */
void cg_rehome_on_ctx_end(CUcontext ctx)
{
	if (!ctx)
		return;
	pthread_mutex_lock(&lock);
	prune(0, ctx);
	pthread_mutex_unlock(&lock);
}

/* In a forked child (see cg_ctx_state_on_fork): the registries start empty. */
void cg_rehome_on_fork(void)
{
	pthread_mutex_init(&lock, NULL);
	while (kept) {
		struct kept *k = kept;
		kept = k->next;
		free_kept(k);
	}
	/* The table's current snapshots stay on the child's heap: a thread the
	 * child lacks may have been writing the table. */
	cg_table_reset(&attrs);
	while (attrs_retired) {
		struct attrs *a = attrs_retired;
		attrs_retired = a->retired;
		free(a);
	}
	for (struct twin *t = atomic_load(&twins); t;) {
		struct twin *next = atomic_load(&t->next);
		free(t);
		t = next;
	}
	atomic_store(&twins, NULL);
	while (twins_retired) {
		struct twin *t = twins_retired;
		twins_retired = t->retired;
		free(t);
	}
}

static void note_attr(uintptr_t handle, int dev, int attr, int value)
{
	if (attr < 0 || attr >= NATTR || !cg_policy_redirects(cg_policy))
		return;
	uintptr_t key = attrs_key(handle, dev);
	const struct attrs *a = cg_table_get(&attrs, key);
	if (a && (a->set >> attr & 1) && a->value[attr] == value)
		return;
	/* A function is re-homed from its module: without one, no twin. */
	const struct cg_fn *fn = cg_fn_get(handle);
	if (dev < 0 && !(fn && fn->mod))
		return;
	struct attrs *b = malloc(sizeof *b);
	if (!b)
		return;
	pthread_mutex_lock(&lock);
	if ((a = cg_table_get(&attrs, key)))
		*b = *a;
	else
		*b = (struct attrs){.handle = handle, .dev = dev, .mod = fn ? fn->mod : NULL,
				    .owner = fn ? fn->owner : NULL};
	b->value[attr] = value;
	b->set |= 1ull << attr;
	b->stamp = ++stamps;
	b->retired = NULL;
	struct attrs *old = cg_table_put(&attrs, key, b);
	if (old) {
		old->retired = attrs_retired;
		attrs_retired = old;
	}
	pthread_mutex_unlock(&lock);
}

/* The recorded attributes of handle (for dev), copied. */
static int attrs_of(uintptr_t handle, int dev, struct attrs *out)
{
	const struct attrs *a = cg_table_get(&attrs, attrs_key(handle, dev));
	if (a)
		*out = *a;
	return a != NULL;
}

/* fn's twin in ctx, or NULL: read without the lock. */
static struct twin *twin_of(const struct cg_fn *fn, CUcontext ctx)
{
	struct twin *t = atomic_load_explicit(&twins, memory_order_acquire);
	while (t && !(t->fn == fn && t->ctx == ctx))
		t = atomic_load_explicit(&t->next, memory_order_acquire);
	return t;
}

/* A function's twin in the current context: loaded again (*loaded set,
 * even when the function is not found in it), or fetched from its kernel. */
static CUresult make(const struct cg_fn *fn, CUfunction *f, int *loaded, char *why, size_t n)
{
	const struct cg_mod *m = fn->mod;
	const struct cg_mod *lib = m && m->lib ? m->lib : m && !m->owner ? m : NULL;
	if (!m) {
		snprintf(why, n, "image not re-loadable: its module was loaded out of ctxguard's "
			 "sight");
		return CUDA_ERROR_NOT_FOUND;
	}
	CUresult rc;
	if (lib) {
		CUkernel k;
		rc = CG_REAL_SYM(cuLibraryGetKernel, cuLibraryGetKernel)(
			&k, (CUlibrary)lib->handle, fn->name);
		if (rc == CUDA_SUCCESS)
			rc = CG_REAL_SYM(cuKernelGetFunction, cuKernelGetFunction)(f, k);
		if (rc != CUDA_SUCCESS)
			snprintf(why, n, "image not re-loadable: %s not found in its library (error %d)",
				 fn->name, (int)rc);
		return rc;
	}
	const char *path = m->path; /* the registry keeps it for good */
	struct kept *k = NULL;
	if (!path) {
		/* Held while loading: the program may unload the module meanwhile. */
		pthread_mutex_lock(&lock);
		for (k = kept; k && k->module != m->handle;)
			k = k->next;
		if (k)
			k->users++;
		pthread_mutex_unlock(&lock);
		if (!k) {
			snprintf(why, n, "image not re-loadable: the module's image was not kept at "
				 "load (no redirect rule was in force)");
			return CUDA_ERROR_NOT_FOUND;
		}
	}
	CUmodule mod;
	rc = path ? CG_REAL_SYM(cuModuleLoad, cuModuleLoad)(&mod, path)
		  : CG_REAL_SYM(cuModuleLoadData, cuModuleLoadData)(&mod, k->bytes);
	if (k) {
		pthread_mutex_lock(&lock);
		int last = --k->users == 0 && k->gone;
		pthread_mutex_unlock(&lock);
		if (last)
			free_kept(k);
	}
	if (rc != CUDA_SUCCESS) {
		snprintf(why, n, "image not re-loadable: loading it into the target context failed "
			 "(error %d)", (int)rc);
		return rc;
	}
	*loaded = 1;
	return CG_REAL_SYM(cuModuleGetFunction, cuModuleGetFunction)(f, mod, fn->name);
}

/* fn's new twin in ctx (current), listed, in *out; or the one
 * another thread listed meanwhile, this copy (never launched) left loaded
 * unlisted.  0 with why filled when none was made. */
static int made(const struct cg_fn *fn, CUcontext ctx, struct twin **out, char *why, size_t n)
{
	struct twin *t = calloc(1, sizeof *t);
	if (!t) {
		snprintf(why, n, "out of memory");
		return 0;
	}
	t->fn = fn;
	t->ctx = ctx;
	int loaded = 0;
	if (fn->flags & CG_FN_KERNEL) {
		CUresult rc = CG_REAL_SYM(cuKernelGetFunction, cuKernelGetFunction)(
			&t->f, (CUkernel)fn->handle);
		if (rc != CUDA_SUCCESS) {
			snprintf(why, n, "cuKernelGetFunction in the target context failed (error %d)",
				 (int)rc);
			free(t);
			return 0;
		}
	} else if ((t->rc = make(fn, &t->f, &loaded, why, n)) != CUDA_SUCCESS) {
		t->f = NULL;
		if (!loaded) {
			free(t);
			return 0;
		}
	}
	/* Listed after an unload of the original that has already pruned:
	 * never found (its record is gone), unlisted at a context's end. */
	pthread_mutex_lock(&lock);
	struct twin *first = twin_of(fn, ctx);
	if (!first) {
		atomic_store_explicit(&t->next, atomic_load(&twins), memory_order_relaxed);
		atomic_store_explicit(&twins, t, memory_order_release);
	}
	pthread_mutex_unlock(&lock);
	if (first)
		free(t);
	*out = first ? first : t;
	return 1;
}

CUfunction cg_rehome_function(const struct cg_fn *fn, CUcontext ctx, int from_dev, char *why,
			      size_t n)
{
	/* In its own context the original itself runs, with the attributes
	 * the program set on it (kind (a) sent back to its owner's device). */
	if (ctx == fn->owner)
		return (CUfunction)fn->handle;
	/* A CUkernel takes its attributes per device: those set for the
	 * device the program launched on go to its function in ctx. */
	int kernel = fn->flags & CG_FN_KERNEL;
	struct attrs a = {0};
	int has_attrs = (!kernel || from_dev >= 0) && attrs_of(fn->handle, kernel ? from_dev : -1, &a);
	if (kernel && !has_attrs)
		return (CUfunction)fn->handle;
	struct twin *t = twin_of(fn, ctx);
	if (!t && !made(fn, ctx, &t, why, n))
		return NULL;
	if (!t->f) {
		snprintf(why, n, "image not re-loadable: %s not in the re-loaded image (error %d)",
			 fn->name, (int)t->rc);
		return NULL;
	}
	if (!has_attrs || atomic_load_explicit(&t->stamp, memory_order_relaxed) == a.stamp)
		return t->f;
	for (int i = 0; i < NATTR; i++) {
		if (!(a.set >> i & 1))
			continue;
		CUresult rc = CG_REAL_SYM(cuFuncSetAttribute, cuFuncSetAttribute)(
			t->f, (CUfunction_attribute)i, a.value[i]);
		if (rc != CUDA_SUCCESS) {
			snprintf(why, n, "replaying attribute %d = %d failed (error %d)", i,
				 a.value[i], (int)rc);
			return NULL;
		}
	}
	atomic_store_explicit(&t->stamp, a.stamp, memory_order_relaxed);
	return t->f;
}

CG_AFTER(cuFuncSetAttribute, note_attr((uintptr_t)hfunc, -1, attrib, value))
CG_AFTER(cuKernelSetAttribute, note_attr((uintptr_t)kernel, (int)dev, attrib, val))
