/* The shadow's comparison on host copies: which rows of D a DeepGEMM
 * layout defines, and the GPU suite's relative error per row.  Per row
 * rather than over the whole output, so that one wrong group of a few rows
 * is not diluted by thousands of right ones. */
#include <math.h>
#include <string.h>

/* shim.h first: it sets up how <cuda.h> names the entry points */
#include "shadow.h"
#include "decode.h"

static int64_t clamp(int64_t v, int64_t lo, int64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

static size_t add(struct cg_rows *out, size_t n, size_t max, int64_t start, int64_t end)
{
	if (start >= end || n >= max)
		return n;
	/* one run where the previous one ends */
	if (n && out[n - 1].end == start) {
		out[n - 1].end = end;
		return n;
	}
	out[n] = (struct cg_rows){start, end};
	return n + 1;
}

size_t cg_shadow_rows(int layout, int64_t m, int64_t g, const int32_t *index, struct cg_rows *out,
		      size_t max)
{
	size_t n = 0;
	switch (layout) {
	case CG_LAYOUT_NORMAL:
		return add(out, n, max, 0, m);
	case CG_LAYOUT_CONTIGUOUS:
		/* -1 marks a padding row; an id past the groups names no B */
		for (int64_t r = 0; r < m; r++)
			if (index[r] >= 0 && index[r] < g)
				n = add(out, n, max, r, r + 1);
		return n;
	case CG_LAYOUT_PSUM: {
		/* group i: from the previous end rounded up to 128, to its own end */
		int64_t end = 0;
		for (int64_t i = 0; i < g; i++) {
			int64_t start = clamp((end + 127) / 128 * 128, 0, m);
			end = clamp(index[i], 0, m);
			n = add(out, n, max, start, end);
		}
		return n;
	}
	case CG_LAYOUT_MASKED:
		for (int64_t i = 0; i < g; i++)
			n = add(out, n, max, i * m, i * m + clamp(index[i], 0, m));
		return n;
	default:
		return 0;
	}
}

static double bf16(uint16_t v)
{
	uint32_t bits = (uint32_t)v << 16;
	float f;
	memcpy(&f, &bits, sizeof f);
	return f;
}

double cg_shadow_row_error(const uint16_t *ref, const uint16_t *got, int64_t n)
{
	double diff = 0, norm = 0;
	for (int64_t i = 0; i < n; i++) {
		double r = bf16(ref[i]), x = bf16(got[i]);
		if (!isfinite(r) || !isfinite(x)) {
			/* the same NaN or infinity in both is agreement */
			if ((isnan(r) && isnan(x)) || r == x)
				continue;
			return INFINITY;
		}
		diff += (x - r) * (x - r);
		norm += r * r;
	}
	return norm > 0 ? sqrt(diff / norm) : sqrt(diff);
}

/* tests/gpu/cases/22_redirect_contiguous.sh and examples/deepgemm_redirect.c */
double cg_shadow_tolerance(int dtype)
{
	return dtype == CG_GMM_FP8_E4M3 ? 3e-2 : 1e-2;
}
