/* Blocks while the FIFO at path is open for writing: until its writer
 * (tests/progs/forkstart.c) closes it.  For the test libraries that hold a
 * start-up in progress at a chosen point. */
#ifndef CG_TEST_HOLD_H
#define CG_TEST_HOLD_H

#include <fcntl.h>
#include <unistd.h>

static inline void hold_on_fifo(const char *path)
{
	int fd = open(path, O_RDONLY);
	char c;
	while (fd >= 0 && read(fd, &c, 1) > 0)
		;
	if (fd >= 0)
		close(fd);
}

#endif
