/* A test's scratch directory under /tmp, made by its fixture and removed
 * after, and files in it. */
#ifndef CTXGUARD_TESTS_TMPDIR_H
#define CTXGUARD_TESTS_TMPDIR_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static char tmpdir[64];

static inline void tmpdir_make(const char *tag)
{
	snprintf(tmpdir, sizeof tmpdir, "/tmp/%s.XXXXXX", tag);
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static inline void tmpdir_remove(void)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

/* tmpdir/name, in one of eight static buffers used in turn. */
static inline const char *in_tmpdir(const char *name)
{
	static char paths[8][256];
	static int slot;
	char *p = paths[slot++ % 8];
	snprintf(p, 256, "%s/%s", tmpdir, name);
	return p;
}

/* text into path, then mode unless 0. */
static inline void write_to(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_ge(fputs(text, f), 0);
	ck_assert_int_eq(fclose(f), 0);
	if (mode)
		ck_assert_int_eq(chmod(path, mode), 0);
}

#endif
