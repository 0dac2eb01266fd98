/* The real dlsym and dlvsym, found without calling either.
 *
 * ctxguard exports dlsym and dlvsym, so any call to them from inside the
 * library binds to our own hooks.  Asking the loader for the real ones
 * (dlvsym(RTLD_NEXT, "dlsym", ...)) would need the real dlvsym first, and a
 * versioned reference would still bind to our unversioned definition.  So
 * the default-version definitions are read straight out of libc's dynamic
 * symbol table (libdl's before glibc 2.34). */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdatomic.h>

#include "hook.h"
#include "../check/check.h"
#include "../redirect/shadow.h"
#include "../report/report.h"

typedef void *(*dlsym_fn)(void *, const char *);
typedef void *(*dlvsym_fn)(void *, const char *, const char *);

static _Atomic(dlsym_fn) real_dlsym;
static _Atomic(dlvsym_fn) real_dlvsym;

/* Nothing here may be instrumented or call an intercepted function: the
 * sanitizer runtimes call dlsym while they are still being set up. */
static CG_NO_SANITIZE int same(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return *a == *b;
}

static CG_NO_SANITIZE int ends_with(const char *s, const char *suffix)
{
	size_t n = 0, m = 0;
	while (s[n])
		n++;
	while (suffix[m])
		m++;
	return n >= m && same(s + n - m, suffix);
}

static CG_NO_SANITIZE uintptr_t dyn_ptr(uintptr_t base, ElfW(Addr) p)
{
	/* glibc relocates these entries in place on most targets; where the
	 * dynamic section is read-only they are still link-time values. */
	return p < base ? base + p : p;
}

static CG_NO_SANITIZE size_t gnu_hash_count(const uint32_t *h)
{
	uint32_t nbuckets = h[0], symoffset = h[1], bloom = h[2];
	const uint32_t *buckets = h + 4 + bloom * (sizeof(ElfW(Addr)) / 4);
	const uint32_t *chain = buckets + nbuckets;
	uint32_t last = 0;
	for (uint32_t i = 0; i < nbuckets; i++)
		if (buckets[i] > last)
			last = buckets[i];
	if (last < symoffset)
		return symoffset;
	while (!(chain[last - symoffset] & 1))
		last++;
	return last + 1;
}

/* The default-version dlsym and dlvsym defined by one loaded object. */
static CG_NO_SANITIZE void scan(const struct link_map *m, void **want_dlsym, void **want_dlvsym)
{
	const ElfW(Sym) *sym = NULL;
	const char *str = NULL;
	const ElfW(Half) *versym = NULL;
	size_t count = 0;
	for (const ElfW(Dyn) *dyn = m->l_ld; dyn && dyn->d_tag != DT_NULL; dyn++) {
		uintptr_t p = dyn_ptr(m->l_addr, dyn->d_un.d_ptr);
		switch (dyn->d_tag) {
		case DT_SYMTAB: sym = (const void *)p; break;
		case DT_STRTAB: str = (const void *)p; break;
		case DT_VERSYM: versym = (const void *)p; break;
		case DT_HASH: count = ((const uint32_t *)p)[1]; break;
		case DT_GNU_HASH:
			if (!count)
				count = gnu_hash_count((const void *)p);
			break;
		}
	}
	if (!sym || !str)
		return;
	for (size_t i = 0; i < count; i++) {
		if (!sym[i].st_value || ELF64_ST_TYPE(sym[i].st_info) != STT_FUNC)
			continue;
		if (versym && (versym[i] & 0x8000))   /* hidden: not the default */
			continue;
		const char *n = str + sym[i].st_name;
		void *addr = (void *)(m->l_addr + sym[i].st_value);
		if (!*want_dlsym && same(n, "dlsym"))
			*want_dlsym = addr;
		else if (!*want_dlvsym && same(n, "dlvsym"))
			*want_dlvsym = addr;
	}
}

/* Walks the loader's own list of objects: no call into libc at all. */
static CG_NO_SANITIZE void find(void)
{
	void *ds = NULL, *dvs = NULL;
	for (const struct link_map *m = _r_debug.r_map; m && !(ds && dvs); m = m->l_next)
		if (m->l_name && (ends_with(m->l_name, "/libc.so.6") ||
				  ends_with(m->l_name, "/libdl.so.2")))
			scan(m, &ds, &dvs);
	atomic_store(&real_dlsym, (dlsym_fn)ds);
	atomic_store(&real_dlvsym, (dlvsym_fn)dvs);
}

CG_NO_SANITIZE void *cg_real_libc(int which)
{
	void *f = which ? (void *)atomic_load_explicit(&real_dlvsym, memory_order_acquire)
			: (void *)atomic_load_explicit(&real_dlsym, memory_order_acquire);
	if (CG_UNLIKELY(!f)) {
		find();
		f = which ? (void *)atomic_load(&real_dlvsym) : (void *)atomic_load(&real_dlsym);
	}
	return f;
}

CG_NO_SANITIZE void *cg_real_dlsym(void *handle, const char *name)
{
	dlsym_fn f = (dlsym_fn)cg_real_libc(0);
	return f ? f(handle, name) : NULL;
}

CG_NO_SANITIZE void *cg_real_dlvsym(void *handle, const char *name, const char *version)
{
	dlvsym_fn f = (dlvsym_fn)cg_real_libc(1);
	return f ? f(handle, name, version) : NULL;
}
