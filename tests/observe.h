/* What a test sees of the calls it makes on the fake driver: their stderr
 * (capture_start .. capture_end), and the driver calls that order work
 * (fake_trace into trace, searched with find and count). */
#ifndef CTXGUARD_TESTS_OBSERVE_H
#define CTXGUARD_TESTS_OBSERVE_H

#include <check.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fake/fake_api.h"

/* stderr of the calls between the two. */
static FILE *captured;
static int saved_err = -1;

static inline void capture_start(void)
{
	fflush(stderr);
	captured = tmpfile();
	ck_assert_ptr_nonnull(captured);
	saved_err = dup(2);
	dup2(fileno(captured), 2);
}

static inline const char *capture_end(void)
{
	static char text[16384];
	dup2(saved_err, 2);
	close(saved_err);
	rewind(captured);
	size_t n = fread(text, 1, sizeof text - 1, captured);
	text[n] = 0;
	fclose(captured);
	return text;
}

static struct fake_call trace[4096];

static inline size_t find(size_t n, size_t from, const char *api, CUcontext c, const void *s,
			  const void *object)
{
	for (size_t i = from; i < n; i++)
		if (!strcmp(trace[i].api, api) && (!c || trace[i].ctx == c) &&
		    (!s || trace[i].stream == s) && (!object || trace[i].object == object))
			return i;
	return n;
}

static inline size_t count(size_t n, const char *api)
{
	size_t c = 0;
	for (size_t i = 0; i < n; i++)
		c += !strcmp(trace[i].api, api);
	return c;
}

#endif
