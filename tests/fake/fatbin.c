/* A real fatbin handed to cuModuleLoadData: the only one the tests load is
 * ctxguard's bundled grouped_mm module, so the fake reads it as the image
 * of those kernels (their names and parameters from kernels/gmm_kernels.h,
 * the table the host API launches them by). */
#include <stdio.h>
#include <string.h>

#include "../../kernels/gmm_kernels.h"
#include "fake.h"

enum { FATBIN_MAGIC = 0xBA55ED50u };

bool fake_image_is_fatbin(const void *image)
{
	uint32_t magic;
	if (!image)
		return false;
	memcpy(&magic, image, sizeof magic);
	return magic == FATBIN_MAGIC;
}

/* TMA kernels take A's two (a full tile's box, a short tile's), B's, D's and
 * sfa's tensor maps before the argument block. */
#define FAKE_GMM_LINE_SM90(name) ".kernel " #name " 128,128,128,128,128,%zu\n"
#define FAKE_GMM_LINE_SM80(name) ".kernel " #name " %zu\n"
#define FAKE_GMM_LINE(name, impl, dt, bl, bm, bn, bk, st, epi) FAKE_GMM_LINE_##impl(name)
#define FAKE_GMM_SIZE(name, impl, dt, bl, bm, bn, bk, st, epi) , sizeof(struct cg_gmm_args)

CUresult fake_image_bundled(struct fake_image *out)
{
	char text[4096];
	snprintf(text, sizeof text,
		 "//ctxguard-fake-image\n" CG_GMM_KERNELS(FAKE_GMM_LINE) CG_GMM_KERNELS(FAKE_GMM_SIZE));
	return fake_image_parse(text, out);
}
