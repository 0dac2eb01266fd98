/* Modules, libraries and functions, each with the context that owns it.
 *
 * Records are immutable once published and never freed: a launch racing an
 * unload may still hold one.  Removing a handle only unpublishes it, so a
 * handle the driver hands out again after an unload starts from nothing
 * and never carries its old owner. */
#include <dlfcn.h>
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "track.h"
#include "../report/report.h"

static struct cg_table mods = CG_TABLE_INIT;   /* CUmodule -> cg_mod */
static struct cg_table libs = CG_TABLE_INIT;   /* CUlibrary -> cg_mod */
struct cg_table cg_fns = CG_TABLE_INIT;        /* CUfunction/CUkernel -> cg_fn */
static _Atomic size_t nexperts;

/* Unpublished records stay reachable from here (and so are not leaks).
 * Only ever pushed, by compare-and-swap: no lock that a fork could leave
 * held in the child. */
static struct kept { struct kept *next; } *_Atomic kept;

static void *record(size_t size)
{
	struct kept *k = calloc(1, sizeof *k + size);
	if (!k)
		return NULL;
	k->next = atomic_load_explicit(&kept, memory_order_relaxed);
	while (!atomic_compare_exchange_weak_explicit(&kept, &k->next, k, memory_order_release,
						      memory_order_relaxed))
		;
	return k + 1;
}

static char *keep_string(const char *s)
{
	if (!s)
		return NULL;
	size_t n = strlen(s) + 1;
	char *p = record(n);
	if (p)
		memcpy(p, s, n);
	return p;
}

/* __cxa_demangle lives in libstdc++, which a CUDA program nearly always has
 * loaded; a C program gets it loaded here, since demangled names carry the
 * parameter types that operand checks rely on.  Without it names stay
 * mangled. */
static const char *demangle(const char *name)
{
	typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);
	static _Atomic(demangle_fn) fn;
	if (!name || name[0] != '_' || name[1] != 'Z')
		return NULL;
	demangle_fn f = atomic_load(&fn);
	if (!f) {
		f = (demangle_fn)cg_real_dlsym(RTLD_DEFAULT, "__cxa_demangle");
		if (!f) {
			void *cxx = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
			f = cxx ? (demangle_fn)cg_real_dlsym(cxx, "__cxa_demangle") : NULL;
		}
		if (!f)
			return NULL;
		atomic_store(&fn, f);
	}
	int status = 0;
	char *out = f(name, NULL, NULL, &status);
	if (!out || status != 0)
		return NULL;
	const char *kept_out = keep_string(out);
	free(out);
	return kept_out;
}

size_t cg_image_span(const void **image)
{
	const unsigned char *p = *image;
	const uint32_t fatbin_magic = 0xBA55ED50, wrapper_magic = 0x466243b1;
	uint32_t magic;
	memcpy(&magic, p, 4);
	if (magic == wrapper_magic) {            /* __fatBinC_Wrapper_t */
		const void *data;
		memcpy(&data, p + 8, sizeof data);
		*image = data;
		return cg_image_span(image);
	}
	if (magic == fatbin_magic) {
		uint16_t header;
		uint64_t body;
		memcpy(&header, p + 6, 2);
		memcpy(&body, p + 8, 8);
		return header + body;
	}
	if (memcmp(p, ELFMAG, SELFMAG) == 0 && p[EI_CLASS] == ELFCLASS64) {
		Elf64_Ehdr eh;
		memcpy(&eh, p, sizeof eh);
		size_t end = eh.e_shoff + (size_t)eh.e_shnum * eh.e_shentsize;
		size_t ph = eh.e_phoff + (size_t)eh.e_phnum * eh.e_phentsize;
		return end > ph ? end : ph;
	}
	return strlen((const char *)p);
}

static const char *image_hash(const void *image)
{
	if (!image)
		return NULL;
	size_t n = cg_image_span(&image);
	const size_t cap = (size_t)256 << 20;   /* a sanity bound, not a limit */
	char hex[25];
	cg_fnv1a64_hex(image, n < cap ? n : cap, hex);
	return keep_string(hex);
}

const struct cg_mod *cg_mod_add(uintptr_t handle, CUcontext owner, const char *via,
				const char *path, const void *image,
				const struct cg_mod *lib)
{
	struct cg_mod *m = record(sizeof *m);
	if (!m)
		return NULL;
	m->handle = handle;
	m->owner = owner;
	m->dev = owner ? cg_ctx_device(owner) : -1;
	m->via = via;
	m->path = keep_string(path ? path : lib ? lib->path : NULL);
	m->hash = image && cg_policy_uses_images(cg_policy) ? image_hash(image)
		  : lib ? lib->hash : NULL;
	if (image && !m->hash) {
		/* Named without hashing it: see cg_policy_uses_images(). */
		char desc[64];
		const void *start = image;
		size_t bytes = cg_image_span(&start);
		snprintf(desc, sizeof desc, "in-memory image of %zu bytes at %p", bytes, start);
		m->image = keep_string(desc);
	} else if (lib) {
		m->image = lib->image;
	}
	m->lib = lib;
	cg_table_put(owner || lib ? &mods : &libs, handle, m);
	return m;
}

const struct cg_mod *cg_mod_get(uintptr_t handle)
{
	return cg_table_get(&mods, handle);
}

const struct cg_mod *cg_lib_get(uintptr_t handle)
{
	return cg_table_get(&libs, handle);
}

static int fn_of(void *val, const void *mod)
{
	const struct cg_fn *f = val;
	return f->mod && (f->mod == mod || f->mod->lib == mod);
}

static int mod_of(void *val, const void *lib)
{
	return ((const struct cg_mod *)val)->lib == lib;
}

/* Of a module ctxguard never saw: see fn_owned. */
static int fn_unseen(void *val, const void *unused)
{
	const struct cg_fn *f = val;
	(void)unused;
	return !f->owner && !f->mod && !(f->flags & CG_FN_KERNEL);
}

/* Moves whenever a function record goes or is replaced, before and after:
 * a thread's kept cuKernelGetFunction answer is void from then on. */
_Atomic unsigned cg_fn_epoch;

void cg_mod_remove(uintptr_t handle)
{
	atomic_fetch_add(&cg_fn_epoch, 1);
	const struct cg_mod *m = cg_table_del(&mods, handle);
	if (!m) {
		m = cg_table_del(&libs, handle);
		if (m)
			cg_table_sweep(&mods, mod_of, m);
	}
	/* An unload of a module loaded out of sight may take any function
	 * first met at launch with it. */
	cg_table_sweep(&cg_fns, m ? fn_of : fn_unseen, m);
	atomic_fetch_add(&cg_fn_epoch, 1);
}

const struct cg_fn *cg_fn_add(uintptr_t handle, CUcontext owner, unsigned flags,
			      const char *via, const char *name, const struct cg_mod *mod)
{
	/* A library may ask cuKernelGetFunction again at every launch: the same
	 * answer again costs one lookup, not a new record. */
	const struct cg_fn *old = cg_table_get(&cg_fns, handle);
	if (old && old->owner == owner && old->mod == mod && old->flags == flags &&
	    strcmp(old->name, name ? name : "<unnamed>") == 0)
		return old;
	struct cg_fn *f = record(sizeof *f);
	if (!f)
		return NULL;
	f->handle = handle;
	f->owner = owner;
	f->dev = owner ? cg_ctx_device(owner) : -1;
	f->flags = flags;
	f->via = via;
	f->name = keep_string(name ? name : "<unnamed>");
	f->demangled = demangle(name);
	f->mod = mod;
	/* The same function asked for again (cuKernelGetFunction of a
	 * library's kernel after cuModuleGetFunction in its module): the
	 * driver keeps the parameters cuParamSet* wrote into it. */
	if (old && old->owner == owner && strcmp(old->name, f->name) == 0)
		atomic_store(&f->params, atomic_load(&((struct cg_fn *)old)->params));
	f->rule = cg_policy_match(cg_policy, f->name, f->demangled,
				  mod ? mod->path : NULL, mod ? mod->hash : NULL);
	if (f->rule >= 0)
		atomic_fetch_add(&nexperts, 1);
	if (old)
		atomic_fetch_add(&cg_fn_epoch, 1);
	cg_table_put(&cg_fns, handle, f);
	if (old)
		atomic_fetch_add(&cg_fn_epoch, 1);
	return f;
}

const struct cg_fn *cg_fn_seen(uintptr_t handle, CUstream stream)
{
	if (cg_capturing(stream))
		return NULL;            /* registered at a launch outside capture */
	/* Not a CUfunction: a CUkernel cast to one (cudart's lazy loading
	 * hands those out), or a handle the driver will not name — recorded
	 * nameless all the same, so that its next launch is one lookup
	 * instead of two failing queries. */
	const char *name = NULL;
	unsigned flags = 0;
	if (!cg_call.cuFuncGetName ||
	    cg_call.cuFuncGetName(&name, (CUfunction)handle) != CUDA_SUCCESS) {
		name = NULL;
		if (cg_call.cuKernelGetName &&
		    cg_call.cuKernelGetName(&name, (CUkernel)handle) == CUDA_SUCCESS)
			flags = CG_FN_KERNEL;
		else
			name = NULL;
	}
	return cg_fn_add(handle, NULL, flags, "first launch", name, NULL);
}

static int mod_owned(void *val, const void *ctx)
{
	return ((const struct cg_mod *)val)->owner == ctx;
}

/* Owned by ctx; or of a module ctxguard never saw (first met at launch,
 * cudart's own): whose context that is cannot be known, so any destroy
 * may have unloaded it, and a launch meets it anew. */
static int fn_owned(void *val, const void *ctx)
{
	return ((const struct cg_fn *)val)->owner == ctx || fn_unseen(val, NULL);
}

/* A destroyed context unloads its modules: their handles, and those of
 * the functions bound to it, may come back from a load ctxguard does not
 * see (cudart's own fatbins) for another kernel, and must carry neither
 * the dead owner nor the old kernel's parameter layout. */
void cg_registry_on_ctx_end(CUcontext ctx)
{
	if (!ctx)
		return;
	atomic_fetch_add(&cg_fn_epoch, 1);
	cg_table_sweep(&mods, mod_owned, ctx);
	cg_table_sweep(&cg_fns, fn_owned, ctx);
	atomic_fetch_add(&cg_fn_epoch, 1);
}

void cg_registry_counts(size_t *nmods, size_t *nfns, size_t *nexp)
{
	*nmods = cg_table_live(&mods) + cg_table_live(&libs);
	*nfns = cg_table_live(&cg_fns);
	*nexp = atomic_load(&nexperts);
}

void cg_registry_on_fork(void)
{
	cg_table_reset(&mods);
	cg_table_reset(&libs);
	cg_table_reset(&cg_fns);
	atomic_store(&nexperts, 0);
}
