/* libFuzzer target: the redirect's decode against DeepGEMM's semantics
 * (tests/model/differ.h).  The input is a stream of choices: a launch as
 * DeepGEMM's host code makes it, then up to two perturbed fields.  A launch
 * the decoder lets through although the bundled kernels would compute
 * something else than the original aborts, with what differs.  Seeds:
 * tests/fuzz/corpus/decode_diff, the cases of issue 66.  `make fuzz` runs it
 * (tests/fuzz/run.sh). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../model/differ.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct dg_launch l;
	char why[512], refusal[512];
	struct cg_choices c = {data, size, 0};
	cg_gen_launch(&c, &l);
	if (cg_differ(&l, why, sizeof why, refusal, sizeof refusal) < 0) {
		fprintf(stderr, "decode_diff: the redirect computes something else: %s\n", why);
		abort();
	}
	return 0;
}
