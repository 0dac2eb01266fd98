/* The differential test of the redirect's decode (shim/redirect/decode.c) against
 * DeepGEMM's semantics (deepgemm.c) and the bundled kernels' coverage
 * (bundled.cpp): launches as DeepGEMM's host code makes them, generated
 * from a stream of choices, with perturbations of any field; for each the
 * decoder refuses it, or both models agree row for row.  Used by
 * tests/check_differential.c and the libFuzzer target tests/fuzz/decode_diff.c. */
#ifndef CG_MODEL_DIFFER_H
#define CG_MODEL_DIFFER_H

#include <stddef.h>
#include <stdint.h>

#include "deepgemm.h"

/* Choices: each byte picks one of a field's options (byte % options), in
 * the order cg_gen_launch documents; 0 once the bytes run out. */
struct cg_choices {
	const uint8_t *p;
	size_t n, at;
};

/* A launch as DeepGEMM's host code makes it, from the choices (see
 * differ.c, gen_deepgemm, for their order); cg_gen_launch then perturbs up
 * to two fields, by the choices after it. */
void cg_gen_deepgemm(struct cg_choices *c, struct dg_launch *l);
void cg_gen_launch(struct cg_choices *c, struct dg_launch *l);

/* The verdict on one launch: 1 redirected and both models agree, 0
 * refused, -1 redirected although the original does something else (why
 * says what).  The decode's reason when refused goes to refusal. */
int cg_differ(struct dg_launch *l, char *why, size_t n, char *refusal, size_t nr);

#endif
