/* Re-homing: the same kernel, made in another context.  A function of a
 * library (DeepGEMM's cuLibraryLoadFromFile + cuKernelGetFunction) is
 * fetched again there from its CUkernel; a module is loaded again from its
 * file (the registry's path) or from the copy of an in-memory image kept at
 * load (only while the policy can redirect: the copy costs the image's
 * size); a CUkernel launched as a
 * function runs anywhere already.  The attributes the program set on the
 * original (cuFuncSetAttribute, cuKernelSetAttribute: recorded here) are
 * replayed on the twin.  Twins are made once per context and kept. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redirect.h"

enum { NATTR = CU_FUNC_ATTRIBUTE_MAX };

/* An in-memory image to load again. */
struct kept {
	uintptr_t module;
	void *bytes;
	struct kept *next;
};

/* Attributes set on a function or kernel handle. */
struct attrs {
	uintptr_t handle;
	int value[NATTR];
	uint64_t set;              /* bit a: value[a] was set */
	unsigned version;
	struct attrs *next;
};

struct twin {
	uintptr_t fn;              /* the original */
	uintptr_t module;          /* its module, for cg_rehome_drop */
	CUcontext ctx;
	CUfunction f;
	unsigned version;          /* of the attributes replayed */
	struct twin *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct kept *kept;
static struct attrs *attrs;
static struct twin *twins;

void cg_rehome_keep(uintptr_t module, const char *path, const void *image)
{
	if (!module || path || !image || !cg_policy_redirects(cg_policy))
		return;
	struct kept *k = calloc(1, sizeof *k);
	if (!k)
		return;
	k->module = module;
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

/* Under the lock: the twins of module, or made in ctx (0/NULL: any). */
static void drop_twins(uintptr_t module, CUcontext ctx)
{
	for (struct twin **q = &twins; *q;) {
		struct twin *t = *q;
		if ((module && t->module != module) || (ctx && t->ctx != ctx)) {
			q = &t->next;
			continue;
		}
		*q = t->next;
		free(t);
	}
}

/* Before an unload: the handle, and its functions', may come back. */
void cg_rehome_drop(uintptr_t module)
{
	if (!module)
		return;
	pthread_mutex_lock(&lock);
	for (struct kept **q = &kept; *q;) {
		struct kept *k = *q;
		if (k->module != module) {
			q = &k->next;
			continue;
		}
		*q = k->next;
		free(k->bytes);
		free(k);
	}
	drop_twins(module, NULL);
	pthread_mutex_unlock(&lock);
}

/* A destroyed context took its twins' modules with it; its handle may come
 * back for a new context. */
void cg_rehome_forget(CUcontext ctx)
{
	pthread_mutex_lock(&lock);
	drop_twins(0, ctx);
	pthread_mutex_unlock(&lock);
}

/* In a forked child (see cg_ctx_state_reset): the registries start empty. */
void cg_rehome_reset(void)
{
	pthread_mutex_init(&lock, NULL);
	while (kept) {
		struct kept *k = kept;
		kept = k->next;
		free(k->bytes);
		free(k);
	}
	drop_twins(0, NULL);
	while (attrs) {
		struct attrs *a = attrs;
		attrs = a->next;
		free(a);
	}
}

static void note_attr(uintptr_t handle, int attr, int value)
{
	if (attr < 0 || attr >= NATTR)
		return;
	pthread_mutex_lock(&lock);
	struct attrs *a = attrs;
	while (a && a->handle != handle)
		a = a->next;
	if (!a && (a = calloc(1, sizeof *a))) {
		a->handle = handle;
		a->next = attrs;
		attrs = a;
	}
	if (a) {
		a->value[attr] = value;
		a->set |= 1ull << attr;
		a->version++;
	}
	pthread_mutex_unlock(&lock);
}

/* The recorded attributes of handle, copied under the lock. */
static int attrs_of(uintptr_t handle, struct attrs *out)
{
	pthread_mutex_lock(&lock);
	const struct attrs *a = attrs;
	while (a && a->handle != handle)
		a = a->next;
	if (a)
		*out = *a;
	pthread_mutex_unlock(&lock);
	return a != NULL;
}

/* A function's twin in the current context: loaded again, or fetched from
 * its kernel. */
static CUresult make(const struct cg_fn *fn, CUfunction *f, char *why, size_t n)
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
	void *bytes = NULL;
	pthread_mutex_lock(&lock);
	for (const struct kept *k = kept; k && !path; k = k->next)
		if (k->module == m->handle) {
			bytes = k->bytes; /* lives until the original is unloaded */
			break;
		}
	pthread_mutex_unlock(&lock);
	if (!path && !bytes) {
		snprintf(why, n, "image not re-loadable: the module's image was not kept at load "
			 "(no redirect rule was in force)");
		return CUDA_ERROR_NOT_FOUND;
	}
	CUmodule mod;
	rc = path ? CG_REAL_SYM(cuModuleLoad, cuModuleLoad)(&mod, path)
		  : CG_REAL_SYM(cuModuleLoadData, cuModuleLoadData)(&mod, bytes);
	if (rc != CUDA_SUCCESS) {
		snprintf(why, n, "image not re-loadable: loading it into the target context failed "
			 "(error %d)", (int)rc);
		return rc;
	}
	rc = CG_REAL_SYM(cuModuleGetFunction, cuModuleGetFunction)(f, mod, fn->name);
	if (rc != CUDA_SUCCESS)
		snprintf(why, n, "image not re-loadable: %s not in the re-loaded image (error %d)",
			 fn->name, (int)rc);
	return rc;
}

CUfunction cg_rehome_function(const struct cg_fn *fn, CUcontext ctx, char *why, size_t n)
{
	if (fn->flags & CG_FN_KERNEL)
		return (CUfunction)fn->handle;
	struct attrs a = {0};
	int has_attrs = attrs_of(fn->handle, &a);
	pthread_mutex_lock(&lock);
	struct twin *t = twins;
	while (t && !(t->fn == fn->handle && t->ctx == ctx))
		t = t->next;
	CUfunction f = t ? t->f : NULL;
	unsigned version = t ? t->version : 0;
	pthread_mutex_unlock(&lock);
	if (!f && make(fn, &f, why, n) != CUDA_SUCCESS)
		return NULL;
	if (has_attrs && (!t || version != a.version)) {
		for (int i = 0; i < NATTR; i++) {
			if (!(a.set >> i & 1))
				continue;
			CUresult rc = CG_REAL_SYM(cuFuncSetAttribute, cuFuncSetAttribute)(
				f, (CUfunction_attribute)i, a.value[i]);
			if (rc != CUDA_SUCCESS) {
				snprintf(why, n, "replaying attribute %d = %d failed (error %d)", i,
					 a.value[i], (int)rc);
				return NULL;
			}
		}
	}
	if (t && version == a.version)
		return f;
	pthread_mutex_lock(&lock);
	for (t = twins; t && !(t->fn == fn->handle && t->ctx == ctx);)
		t = t->next;
	if (!t && (t = calloc(1, sizeof *t))) {
		t->fn = fn->handle;
		t->module = fn->mod->handle;
		t->ctx = ctx;
		t->f = f;
		t->next = twins;
		twins = t;
	}
	if (t)
		t->version = a.version;
	pthread_mutex_unlock(&lock);
	return f;
}

CG_AFTER(cuFuncSetAttribute, note_attr((uintptr_t)hfunc, attrib, value))
CG_AFTER(cuKernelSetAttribute, note_attr((uintptr_t)kernel, attrib, val))
