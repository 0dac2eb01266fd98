/* The exported wrappers, generated from hooks.def, and the identity map from
 * a real libcuda function to the wrapper that stands for it. */
#include <stdlib.h>
#include <string.h>

#include "shim.h"

/* cuGetProcAddress hands out entry points: while another thread starts
 * the shim it still answers with wrappers (found afresh), so what it
 * returns is checked once start-up is done; it passes nothing unchecked. */
#define CG_LOOKUP(sym) \
	(CG_V_##sym == CG_V_cuGetProcAddress || CG_V_##sym == CG_V_cuGetProcAddress_v2)

/* One wrapper per exported variant: count the call, then the family's
 * handler.  Until the shim is ready (libcuda absent, a call made while
 * initialising, or one that stopped waiting for another thread's start-up)
 * the wrapper forwards untouched, so an inert library never changes
 * behaviour. */
#define FAMILY(fam)
#define VARIANT(fam, sym)                                                    \
	CG_EXPORT CUresult sym P_##fam                                       \
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
#include "hooks.def"
#undef FAMILY
#undef VARIANT

struct cg_variant cg_variants[CG_NVARIANTS] = {
#define FAMILY(fam)
#define VARIANT(fam, sym) [CG_V_##sym] = {#sym, #fam, (void *)sym, NULL},
#include "hooks.def"
#undef FAMILY
#undef VARIANT
};

/* Real pointer -> variant index, sorted by pointer for bsearch.  Written
 * once by cg_entry_resolve() before cg_state says ready, read-only after. */
static struct ident { const void *real; int variant; } idents[CG_NVARIANTS];
static size_t nidents;

static int ident_cmp(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)((const struct ident *)a)->real;
	uintptr_t y = (uintptr_t)((const struct ident *)b)->real;
	return (x > y) - (x < y);
}

void *cg_variant_real(void *libcuda, const struct cg_variant *v)
{
	void *p = cg_real_dlsym(libcuda, v->symbol);
	/* Never one of our own wrappers as "real": that would recurse
	 * forever. */
	return p == v->hook ? NULL : p;
}

void cg_entry_resolve(void *libcuda)
{
	nidents = 0;
	for (int i = 0; i < CG_NVARIANTS; i++) {
		void *p = cg_variant_real(libcuda, &cg_variants[i]);
		cg_variants[i].real = p;
		if (p)
			idents[nidents++] = (struct ident){p, i};
	}
	qsort(idents, nidents, sizeof idents[0], ident_cmp);
}

void *cg_hook_for_real(const void *p)
{
	if (cg_starting_elsewhere())
		return cg_starting_hook(p);
	struct ident key = {p, 0};
	struct ident *hit = bsearch(&key, idents, nidents, sizeof idents[0], ident_cmp);
	return hit ? cg_variants[hit->variant].hook : NULL;
}

const struct cg_variant *cg_variant_named(const char *symbol)
{
	for (int i = 0; i < CG_NVARIANTS; i++)
		if (strcmp(cg_variants[i].symbol, symbol) == 0)
			return &cg_variants[i];
	return NULL;
}
