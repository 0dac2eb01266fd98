/* libFuzzer target: policy text, as any file or variable could hold it,
 * through the parser and a lookup.  `make fuzz` runs it (tests/fuzz/run.sh). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	struct cg_policy p;
	cg_policy_init(&p);
	cg_policy_parse(&p, text, "fuzz");
	cg_policy_match(&p, "_ZN9deep_gemm19sm90_bf16_gemm_implILj0EEEvPijjj14CUtensorMap_st",
			"void deep_gemm::sm90_bf16_gemm_impl<0u>(int*)", "/x/.deep_gemm/kernel.cubin",
			"fnv1a64:0123456789abcdef");
	cg_policy_free(&p);
	free(text);
	return 0;
}
