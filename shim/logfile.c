/* Opening the log file safely.  Preloaded from /etc/ld.so.preload the
 * library runs in root and setuid processes too, and a "%p" name in /tmp is
 * a classic target: another user plants a symlink or a file of theirs at
 * the name and lets the process append where they choose.  So the final
 * component is never followed, a directory anyone may rename files in
 * (world-writable, not sticky) is refused, and in a sticky world-writable
 * directory (/tmp) only a file this process created or owns, with no
 * other link to it, is used. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shim.h"

static int directory_of(const char *path, char *dir, size_t n)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return snprintf(dir, n, ".") < (int)n ? 0 : -1;
	size_t len = slash == path ? 1 : (size_t)(slash - path);
	if (len >= n)
		return -1;
	memcpy(dir, path, len);
	dir[len] = 0;
	return 0;
}

int cg_log_open(const char *path, int mode, char *why, size_t n)
{
	char dir[4096];
	struct stat ds, st;

	if (directory_of(path, dir, sizeof dir) < 0) {
		snprintf(why, n, "%s", strerror(ENAMETOOLONG));
		return -1;
	}
	if (stat(dir, &ds) < 0) {
		snprintf(why, n, "its directory %s: %s", dir, strerror(errno));
		return -1;
	}
	int shared = (ds.st_mode & S_IWOTH) != 0;
	if (shared && !(ds.st_mode & S_ISVTX)) {
		snprintf(why, n, "%s is writable by everyone and not sticky, so anyone could"
			 " replace the file; choose a private directory", dir);
		return -1;
	}
	/* O_NONBLOCK: a FIFO planted at the name must not hang the program. */
	int flags = O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
	int fd = open(path, flags | O_CREAT | O_EXCL, 0600);
	int created = fd >= 0;
	if (!created && errno == EEXIST)
		fd = open(path, flags);
	if (fd < 0) {
		snprintf(why, n, "%s", errno == ELOOP ? "it is a symbolic link, which a log never"
			 " follows" : strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0 ||
	    (shared && (st.st_uid != geteuid() || st.st_nlink != 1 || !S_ISREG(st.st_mode)))) {
		snprintf(why, n, "in the world-writable directory %s it belongs to another user"
			 " or has other links; remove it or choose a private directory", dir);
		close(fd);
		return -1;
	}
	/* The umask must not decide who may read it: the policy does. */
	if (created)
		fchmod(fd, (mode_t)mode);
	fcntl(fd, F_SETFL, O_WRONLY | O_APPEND);
	return fd;
}
