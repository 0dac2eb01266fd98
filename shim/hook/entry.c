/* The exported wrappers, generated from hooks.def, and the identity map from
 * a real libcuda function to the wrapper that stands for it. */
#include <stdlib.h>

#include "hook.h"
#include "../check/check.h"
#include "../redirect/shadow.h"
#include "../report/report.h"

/* One wrapper per exported variant (CG_WRAPPER, shim.h); the launches'
 * are made in shim/check/launch.c, next to their handlers. */
#define FAMILY(fam)
#define VARIANT(fam, sym) CG_WRAPPER(fam, sym)
#define LAUNCH(fam, sym)
#include "../hooks.def"
#undef FAMILY
#undef VARIANT
#undef LAUNCH

struct cg_variant cg_variants[CG_NVARIANTS] = {
#define FAMILY(fam)
#define VARIANT(fam, sym) [CG_V_##sym] = {#sym, #fam, (void *)sym, NULL},
#include "../hooks.def"
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
