/* A library the tests load themselves (dlopen, RTLD_LOCAL), for what only
 * a separately loaded object shows:
 * - dlsym(RTLD_DEFAULT) and dlvsym(RTLD_DEFAULT) called from inside it
 *   (tests/progs/localdl.c): the loader searches the global scope and then
 *   the caller's own local scope, so it finds this library's symbols;
 * - a constructor that blocks while CG_TEST_HOLD names a FIFO, until its
 *   writer closes it (tests/progs/forkstart.c: loaded as CTXGUARD_CUPTI, it
 *   holds the shim's start-up in progress). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

int cgtest_marker = 1;
int cuCgtestMarker = 2;    /* a "cu" name, as libcuda's are */

/* Not tail calls: the loader must see this library as the caller. */
void *cgtest_dlsym_default(const char *name)
{
	void *volatile p = dlsym(RTLD_DEFAULT, name);
	return p;
}

void *cgtest_dlvsym_default(const char *name, const char *version)
{
	void *volatile p = dlvsym(RTLD_DEFAULT, name, version);
	return p;
}

__attribute__((constructor)) static void hold(void)
{
	const char *fifo = getenv("CG_TEST_HOLD");
	if (!fifo || !*fifo)
		return;
	int fd = open(fifo, O_RDONLY);
	char c;
	while (fd >= 0 && read(fd, &c, 1) > 0)
		;
	if (fd >= 0)
		close(fd);
}
