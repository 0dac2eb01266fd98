/* The bench programs stop at the first driver call that fails, naming the
 * call, its line and the error. */
#ifndef CG_BENCH_CU_CHECK_H
#define CG_BENCH_CU_CHECK_H

#include <cuda.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static inline void cu_check(CUresult e, const char *call, int line)
{
	const char *name = NULL, *text = NULL;
	if (e == CUDA_SUCCESS)
		return;
	if (cuGetErrorName(e, &name) != CUDA_SUCCESS || !name)
		name = "<unknown>";
	if (cuGetErrorString(e, &text) != CUDA_SUCCESS || !text)
		text = "<unknown>";
	fprintf(stderr, "%s: line %d: %s: %d (%s, %s)\n", program_invocation_short_name, line, call, (int)e,
		name, text);
	exit(1);
}

#define CU(call) cu_check((call), #call, __LINE__)

#endif
