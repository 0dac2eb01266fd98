/* The CUresult values an "error" action can plausibly return, by name.
 * A table rather than cuda.h: policy stays free of CUDA headers; the
 * numbers are the driver ABI and never change. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "policy.h"

static const struct {
	int code;
	const char *name;
} cuda_errors[] = {
	{1, "CUDA_ERROR_INVALID_VALUE"},
	{3, "CUDA_ERROR_NOT_INITIALIZED"},
	{4, "CUDA_ERROR_DEINITIALIZED"},
	{101, "CUDA_ERROR_INVALID_DEVICE"},
	{201, "CUDA_ERROR_INVALID_CONTEXT"},
	{400, "CUDA_ERROR_INVALID_HANDLE"},
	{401, "CUDA_ERROR_ILLEGAL_STATE"},
	{500, "CUDA_ERROR_NOT_FOUND"},
	{700, "CUDA_ERROR_ILLEGAL_ADDRESS"},
	{705, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED"},
	{709, "CUDA_ERROR_CONTEXT_IS_DESTROYED"},
	{719, "CUDA_ERROR_LAUNCH_FAILED"},
	{800, "CUDA_ERROR_NOT_PERMITTED"},
	{801, "CUDA_ERROR_NOT_SUPPORTED"},
	{999, "CUDA_ERROR_UNKNOWN"},
};

#define NERRORS (sizeof cuda_errors / sizeof cuda_errors[0])
#define PREFIX "CUDA_ERROR_"

const char *cg_cuda_error_name(int code)
{
	for (size_t i = 0; i < NERRORS; i++)
		if (cuda_errors[i].code == code)
			return cuda_errors[i].name;
	return NULL;
}

int cg_cuda_error_parse(const char *s)
{
	if (!s || !*s)
		return -1;
	if (*s >= '0' && *s <= '9') {
		char *end;
		errno = 0;
		long v = strtol(s, &end, 10);
		/* 0 would make a refused launch look successful; CUresult
		 * codes all lie below 1000. */
		if (errno || *end || v < 1 || v > 999)
			return -1;
		return (int)v;
	}
	const char *bare = strncasecmp(s, PREFIX, strlen(PREFIX)) == 0 ?
		s + strlen(PREFIX) : s;
	for (size_t i = 0; i < NERRORS; i++)
		if (strcasecmp(bare, cuda_errors[i].name + strlen(PREFIX)) == 0)
			return cuda_errors[i].code;
	return -1;
}
