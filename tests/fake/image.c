/*
 * The fake's module image format, a text the tests can write by hand:
 *     //ctxguard-fake-image
 *     .kernel <name> <parameter sizes, comma separated, may be empty>
 * Blank lines are allowed; anything else is CUDA_ERROR_INVALID_IMAGE.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"

static const char magic[] = "//ctxguard-fake-image";

/* Natural alignment as the compiler lays out kernel parameters.  128 bytes is a CUtensorMap,
 * aligned to 128 in constant bank 0, where sm_90's parameters start at 0x210: measured on H200
 * (cuFuncGetParamInfo), DeepGEMM's (int*, 3 x uint32, 3 x CUtensorMap) has its maps at offsets
 * 112, 240 and 368 -- not 64-byte aligned as the host type is. */
enum { PARAM_BASE = 0x210 };

static size_t param_offset(size_t cur, size_t size)
{
	size_t align = size == 1 || size == 2 || size == 4 || size == 8 ? size : 8;
	if (size == 128)
		return (PARAM_BASE + cur + 127) / 128 * 128 - PARAM_BASE;
	return (cur + align - 1) / align * align;
}

void fake_kdesc_free(struct fake_kdesc *kd)
{
	free(kd->name);
	free(kd->size);
	free(kd->offset);
	memset(kd, 0, sizeof(*kd));
}

void fake_image_free(struct fake_image *img)
{
	for (unsigned i = 0; i < img->nkern; i++)
		fake_kdesc_free(&img->kern[i]);
	free(img->kern);
	memset(img, 0, sizeof(*img));
}

static CUresult kdesc_alloc(struct fake_kdesc *kd, const char *name, size_t namelen,
			    unsigned nparams)
{
	memset(kd, 0, sizeof(*kd));
	kd->name = strndup(name, namelen);
	kd->nparams = nparams;
	kd->size = calloc(nparams ? nparams : 1, sizeof(size_t));
	kd->offset = calloc(nparams ? nparams : 1, sizeof(size_t));
	if (!kd->name || !kd->size || !kd->offset) {
		fake_kdesc_free(kd);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return CUDA_SUCCESS;
}

CUresult fake_kdesc_copy(struct fake_kdesc *dst, const struct fake_kdesc *src)
{
	CUresult rc = kdesc_alloc(dst, src->name, strlen(src->name), src->nparams);
	if (rc != CUDA_SUCCESS)
		return rc;
	memcpy(dst->size, src->size, src->nparams * sizeof(size_t));
	memcpy(dst->offset, src->offset, src->nparams * sizeof(size_t));
	dst->argbytes = src->argbytes;
	return CUDA_SUCCESS;
}

/* Parses "<sizes>" (n comma-separated positive decimals) into kd and lays them out. */
static CUresult parse_sizes(const char *s, size_t len, struct fake_kdesc *kd)
{
	size_t cur = 0;
	for (unsigned i = 0; i < kd->nparams; i++) {
		char *end;
		errno = 0;
		unsigned long v = strtoul(s, &end, 10);
		size_t used = (size_t)(end - s);
		if (*s < '0' || *s > '9' || errno || used > len || v == 0 ||
		    v > FAKE_MAX_PARAM_BYTES)
			return CUDA_ERROR_INVALID_IMAGE;
		len -= used;
		s = end;
		if (i + 1 < kd->nparams) {
			if (len == 0 || *s != ',')
				return CUDA_ERROR_INVALID_IMAGE;
			s++;
			len--;
		}
		cur = param_offset(cur, v);
		kd->size[i] = v;
		kd->offset[i] = cur;
		cur += v;
	}
	if (len != 0 || cur > FAKE_MAX_PARAM_BYTES)
		return CUDA_ERROR_INVALID_IMAGE;
	kd->argbytes = cur;
	return CUDA_SUCCESS;
}

/* One ".kernel" line of `len` bytes (no newline) appended to img. */
static CUresult parse_kernel(const char *line, size_t len, struct fake_image *img)
{
	static const char dir[] = ".kernel";
	const char *tok[4];
	size_t toklen[4];
	unsigned ntok = 0;
	for (size_t i = 0; i < len;) {
		if (line[i] == ' ' || line[i] == '\t') {
			i++;
			continue;
		}
		if (ntok == 4)
			return CUDA_ERROR_INVALID_IMAGE;
		tok[ntok] = line + i;
		while (i < len && line[i] != ' ' && line[i] != '\t')
			i++;
		toklen[ntok] = (size_t)(line + i - tok[ntok]);
		ntok++;
	}
	if (ntok < 2 || ntok > 3 || toklen[0] != sizeof(dir) - 1 || memcmp(tok[0], dir, toklen[0]))
		return CUDA_ERROR_INVALID_IMAGE;
	for (unsigned k = 0; k < img->nkern; k++)
		if (strlen(img->kern[k].name) == toklen[1] &&
		    !memcmp(img->kern[k].name, tok[1], toklen[1]))
			return CUDA_ERROR_INVALID_IMAGE;

	unsigned nparams = 0;
	if (ntok == 3) {
		nparams = 1;
		for (size_t i = 0; i < toklen[2]; i++)
			nparams += tok[2][i] == ',';
	}
	struct fake_kdesc *grown = realloc(img->kern, (img->nkern + 1) * sizeof(*grown));
	if (!grown)
		return CUDA_ERROR_OUT_OF_MEMORY;
	img->kern = grown;
	struct fake_kdesc *kd = &img->kern[img->nkern];
	CUresult rc = kdesc_alloc(kd, tok[1], toklen[1], nparams);
	if (rc != CUDA_SUCCESS)
		return rc;
	rc = ntok == 3 ? parse_sizes(tok[2], toklen[2], kd) : CUDA_SUCCESS;
	if (rc != CUDA_SUCCESS) {
		fake_kdesc_free(kd);
		return rc;
	}
	img->nkern++;
	return CUDA_SUCCESS;
}

CUresult fake_image_parse(const char *text, struct fake_image *out)
{
	memset(out, 0, sizeof(*out));
	if (!text)
		return CUDA_ERROR_INVALID_VALUE;
	size_t mlen = sizeof(magic) - 1;
	if (strncmp(text, magic, mlen) != 0)
		return CUDA_ERROR_INVALID_IMAGE;
	const char *p = text + mlen;
	CUresult rc = CUDA_SUCCESS;
	bool first = true;
	while (*p && rc == CUDA_SUCCESS) {
		size_t len = strcspn(p, "\n");
		size_t body = len > 0 && p[len - 1] == '\r' ? len - 1 : len;
		if (first)
			rc = body == 0 ? CUDA_SUCCESS
				       : CUDA_ERROR_INVALID_IMAGE; /* rest of magic line */
		else if (body > strspn(p, " \t"))
			rc = parse_kernel(p, body, out);
		first = false;
		p += len + (p[len] == '\n');
	}
	if (rc != CUDA_SUCCESS)
		fake_image_free(out);
	return rc;
}

CUresult fake_image_load_file(const char *path, struct fake_image *out)
{
	memset(out, 0, sizeof(*out));
	if (!path)
		return CUDA_ERROR_INVALID_VALUE;
	FILE *f = fopen(path, "rb");
	if (!f)
		return CUDA_ERROR_FILE_NOT_FOUND;
	char *text = NULL;
	size_t len = 0, cap = 0;
	CUresult rc = CUDA_SUCCESS;
	for (;;) {
		char *grown = fake_grow(text, &cap, len + 4096 + 1, 1);
		if (!grown) {
			rc = CUDA_ERROR_OUT_OF_MEMORY;
			break;
		}
		text = grown;
		size_t n = fread(text + len, 1, 4096, f);
		len += n;
		if (n < 4096) {
			if (ferror(f))
				rc = CUDA_ERROR_FILE_NOT_FOUND;
			break;
		}
	}
	fclose(f);
	if (rc == CUDA_SUCCESS) {
		text[len] = '\0';
		/* An embedded NUL would hide the rest of the file from the parser. */
		rc = strlen(text) == len ? fake_image_parse(text, out) : CUDA_ERROR_INVALID_IMAGE;
	}
	free(text);
	return rc;
}

int fake_image_find(const struct fake_image *img, const char *name)
{
	for (unsigned i = 0; i < img->nkern; i++)
		if (strcmp(img->kern[i].name, name) == 0)
			return (int)i;
	return -1;
}
