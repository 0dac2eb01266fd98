/* Which kernel parameters can carry an operand.  The driver gives each
 * parameter's offset and size only; a C++ kernel's demangled name also
 * gives its types, so there a parameter is a pointer when its type says so
 * (an 8-byte struct of flags is not), and a tensor map when it is a
 * CUtensorMap.  Without types (extern "C" kernels: Triton, PTX) every
 * 8-byte parameter may be a pointer and every 128-byte one a tensor map
 * (bytes that no encode produced are never taken for one: tensormap.c).
 * Built once per function and cached in its record. */
#include <stdlib.h>
#include <string.h>

#include "track.h"
#include "../report/report.h"

enum { MAX_PARAMS = 1024 };

static const struct cg_layout empty;

static CUresult param_info(const struct cg_fn *fn, size_t i, size_t *off, size_t *size)
{
	if (fn->flags & CG_FN_KERNEL)
		return cg_call.cuKernelGetParamInfo
			       ? cg_call.cuKernelGetParamInfo((CUkernel)fn->handle, i, off, size)
			       : CUDA_ERROR_NOT_SUPPORTED;
	return cg_call.cuFuncGetParamInfo
		       ? cg_call.cuFuncGetParamInfo((CUfunction)fn->handle, i, off, size)
		       : CUDA_ERROR_NOT_SUPPORTED;
}

enum { MAX_TYPED = 64 };

/* The top-level parameter types of a demangled function name: the last
 * parenthesised group, split at commas outside any brackets.  Returns the
 * count (kinds[] filled per parameter), or -1 when there is no such list. */
static int typed_params(const char *name, uint16_t *kinds, int max)
{
	size_t n = name ? strlen(name) : 0;
	if (!n || name[n - 1] != ')')
		return -1;
	int depth = 0;
	size_t open = n;
	for (size_t i = n; i-- > 0;) {
		char c = name[i];
		depth += c == ')' || c == '>' || c == '}' || c == ']';
		depth -= c == '(' || c == '<' || c == '{' || c == '[';
		if (depth == 0) {
			open = i;
			break;
		}
	}
	if (open == n || name[open] != '(')
		return -1;
	const char *p = name + open + 1, *end = name + n - 1;
	if (p == end)
		return 0;
	int count = 0;
	const char *start = p;
	depth = 0;
	for (; p <= end; p++) {
		if (p < end && (*p == '(' || *p == '<' || *p == '{' || *p == '['))
			depth++;
		else if (p < end && (*p == ')' || *p == '>' || *p == '}' || *p == ']'))
			depth--;
		else if (p == end || (*p == ',' && depth == 0)) {
			if (count == max)
				return -1;
			/* Trailing qualifiers do not change what the type is. */
			const char *e = p;
			for (;;) {
				while (e > start && e[-1] == ' ')
					e--;
				if (e - start >= 5 && !strncmp(e - 5, "const", 5))
					e -= 5;
				else if (e - start >= 10 && !strncmp(e - 10, "__restrict", 10))
					e -= 10;
				else if (e - start >= 8 && !strncmp(e - 8, "volatile", 8))
					e -= 8;
				else
					break;
			}
			int is_ptr = e > start && e[-1] == '*';
			int is_map = !is_ptr && memmem(start, (size_t)(e - start), "CUtensorMap", 11);
			kinds[count++] = is_ptr ? CG_P_PTR : is_map ? CG_P_TMAP : 0;
			start = p + 1;
		}
	}
	return count;
}

static const struct cg_layout *build(const struct cg_fn *fn)
{
	/* Room for as many as a typed list can name (below). */
	uint16_t idx[MAX_TYPED];
	uint16_t kind[MAX_TYPED];
	uint32_t off[MAX_TYPED];
	unsigned n = 0;
	size_t nparams = 0, o, size;
	for (; nparams < MAX_PARAMS && param_info(fn, nparams, &o, &size) == CUDA_SUCCESS; nparams++) {
		/* No alignment test for tensor maps: on H200 the driver puts
		 * them at offsets 112, 240, ... (128-aligned in the constant
		 * bank, which starts at 0x210), not at the host type's 64. */
		int k = size == sizeof(void *) ? CG_P_PTR : size == sizeof(CUtensorMap) ? CG_P_TMAP : 0;
		if (!k || n == sizeof idx / sizeof idx[0])
			continue;
		idx[n] = (uint16_t)nparams;
		kind[n] = (uint16_t)k;
		off[n] = (uint32_t)o;
		n++;
	}
	/* Types that line up with the driver's list (at most MAX_TYPED
	 * parameters, so none was left out above) keep only the parameters
	 * whose type agrees; types that do not line up are not trusted. */
	uint16_t typed[MAX_TYPED];
	if (typed_params(fn->demangled, typed, MAX_TYPED) == (int)nparams) {
		unsigned kept = 0;
		for (unsigned i = 0; i < n; i++)
			if (typed[idx[i]] == kind[i]) {
				idx[kept] = idx[i];
				kind[kept] = kind[i];
				off[kept] = off[i];
				kept++;
			}
		n = kept;
	}
	if (!n)
		return &empty;
	struct cg_layout *l = malloc(sizeof *l + n * sizeof l->p[0]);
	if (!l)
		return &empty;
	l->n = n;
	for (unsigned i = 0; i < n; i++) {
		l->p[i].index = idx[i];
		l->p[i].kind = kind[i];
		l->p[i].offset = off[i];
	}
	return l;
}

const struct cg_layout *cg_layout_build(const struct cg_fn *fn, CUstream stream)
{
	if (cg_capturing(stream))
		return &empty;          /* asked again at the next launch */
	struct cg_fn *f = (struct cg_fn *)fn;
	const struct cg_layout *l = build(fn);
	const struct cg_layout *expected = NULL;
	/* Two threads may race to build it: one wins, the other's is freed. */
	if (!atomic_compare_exchange_strong(&f->layout, &expected, l)) {
		if (l != &empty)
			free((void *)l);
		l = expected;
	}
	return l;
}
