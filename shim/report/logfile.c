/* Opening the log file safely.  Preloaded from /etc/ld.so.preload the
 * library runs in root and setuid processes too, and a "%p" name in /tmp is
 * a classic target: another user plants a symlink, a FIFO, a directory or a
 * file of theirs at the name and lets the process append where they choose,
 * hang, or run with logging off.  So:
 *   - the directory is reached one component at a time, never through a
 *     symbolic link (a planted link would move root's log elsewhere);
 *   - only a regular file is ever opened, and never through a link at the
 *     name (a FIFO would block the launch that writes a record);
 *   - a directory anyone may rename files in (world-writable, not sticky)
 *     is refused;
 *   - where others may write (a sticky /tmp, a 1733 or group-writable log
 *     directory, one another user owns) the file must be one this process
 *     created, or its own with no other link; a name taken by anything else
 *     is left alone and a fresh name beside it is created instead, so that
 *     planting cannot switch the log off.
 * The descriptor stays non-blocking: a write that would block is dropped
 * and counted (log_records_lost), never waited for. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "report.h"

enum { FRESH_TRIES = 16 };
/* Every open of a log name, the planted one's and a fresh one's: appended
 * to, never through a link at the name, never blocking. */
enum { LOG_FLAGS = O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK };

/* The directory of path (everything before its last '/'), opened without
 * following a symbolic link in any component; -1 with the reason in why. */
static int open_directory(const char *path, char *why, size_t n)
{
	const char *slash = strrchr(path, '/');
	int fd = open(path[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, n, "%s", strerror(errno));
		return -1;
	}
	for (const char *c = path; slash && c < slash;) {
		size_t len = strcspn(c, "/");
		if (c + len > slash)
			len = (size_t)(slash - c);
		char part[256];
		if (len >= sizeof part) {
			snprintf(why, n, "%s", strerror(ENAMETOOLONG));
			close(fd);
			return -1;
		}
		memcpy(part, c, len);
		part[len] = 0;
		c += len + 1;
		if (!len)
			continue;
		int next = openat(fd, part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0) {
			int err = errno;
			struct stat st;
			if (fstatat(fd, part, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
				snprintf(why, n, "its directory %.*s is a symbolic link, which a log"
					 " never follows; name the directory it points to",
					 (int)(c - 1 - path), path);
			else
				snprintf(why, n, "its directory %.*s: %s", (int)(c - 1 - path), path,
					 strerror(err));
			close(fd);
			return -1;
		}
		close(fd);
		fd = next;
	}
	return fd;
}

/* Opens name in dir: created (*created), or an existing regular file that,
 * where others may write (shared), is ours with a single link.  -1 with
 * the reason in why. */
static int open_name(int dir, const char *name, int shared, int *created, char *why, size_t n)
{
	struct stat at, st;

	*created = 0;
	int fd = openat(dir, name, LOG_FLAGS | O_CREAT | O_EXCL, 0600);
	if (fd >= 0) {
		*created = 1;
		return fd;
	}
	if (errno != EEXIST || fstatat(dir, name, &at, AT_SYMLINK_NOFOLLOW) < 0) {
		snprintf(why, n, "%s", strerror(errno));
		return -1;
	}
	/* Looked at before opening: opening a FIFO or a device has effects. */
	if (!S_ISREG(at.st_mode)) {
		snprintf(why, n, "%s", S_ISLNK(at.st_mode) ? "it is a symbolic link, which a log"
			 " never follows" : "it is not a regular file (a directory, FIFO, socket"
			 " or device)");
		return -1;
	}
	fd = openat(dir, name, LOG_FLAGS);
	if (fd < 0) {
		snprintf(why, n, "%s", errno == ELOOP ? "it is a symbolic link, which a log never"
			 " follows" : strerror(errno));
		return -1;
	}
	/* Checked on the descriptor: what was opened, not what was looked at. */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_ino != at.st_ino ||
	    st.st_dev != at.st_dev) {
		snprintf(why, n, "it was replaced while being opened");
		close(fd);
		return -1;
	}
	if (shared && (st.st_uid != geteuid() || st.st_nlink != 1)) {
		snprintf(why, n, "in a directory others may write to it belongs to another user"
			 " or has other links");
		close(fd);
		return -1;
	}
	return fd;
}

/* name with a random part before its extension ("h.12.jsonl" ->
 * "h.12.k3x9q2.jsonl"): a name nobody could have planted in advance. */
static void fresh_name(const char *name, char *out, size_t n)
{
	static const char digits[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char r[6];
	/* the system call, not glibc's getrandom (2.25): the wheel's build
	 * targets glibc 2.17 (docs/install.md); 1 is GRND_NONBLOCK */
	if (syscall(SYS_getrandom, r, sizeof r, 1) != (long)sizeof r) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		unsigned long x = (unsigned long)ts.tv_nsec * 2654435761u ^ (unsigned long)getpid();
		for (size_t i = 0; i < sizeof r; i++, x >>= 5)
			r[i] = (unsigned char)x;
	}
	char part[sizeof r + 1];
	for (size_t i = 0; i < sizeof r; i++)
		part[i] = digits[r[i] % (sizeof digits - 1)];
	part[sizeof r] = 0;
	const char *dot = strrchr(name, '.');
	if (!dot || dot == name)
		dot = name + strlen(name);
	snprintf(out, n, "%.*s.%s%s", (int)(dot - name), name, part, dot);
}

int cg_log_open(const char *path, int mode, char *why, size_t n, char *fresh, size_t nfresh)
{
	struct stat ds;
	const char *slash = strrchr(path, '/');
	const char *name = slash ? slash + 1 : path;

	fresh[0] = 0;
	if (!*name) {
		snprintf(why, n, "it names a directory; name a file");
		return -1;
	}
	int dir = open_directory(path, why, n);
	if (dir < 0)
		return -1;
	if (fstat(dir, &ds) < 0) {
		snprintf(why, n, "its directory: %s", strerror(errno));
		close(dir);
		return -1;
	}
	if ((ds.st_mode & S_IWOTH) && !(ds.st_mode & S_ISVTX)) {
		snprintf(why, n, "%.*s is writable by everyone and not sticky, so anyone could"
			 " replace the file; choose a private directory",
			 slash ? (int)(slash == path ? 1 : slash - path) : 1, slash ? path : ".");
		close(dir);
		return -1;
	}
	int shared = (ds.st_mode & (S_IWOTH | S_IWGRP)) || ds.st_uid != geteuid();
	int created;
	int fd = open_name(dir, name, shared, &created, why, n);
	/* A name others could have taken: a fresh one beside it, counted. */
	for (int i = 0; fd < 0 && shared && i < FRESH_TRIES; i++) {
		char other[256];
		fresh_name(name, other, sizeof other);
		fd = openat(dir, other, LOG_FLAGS | O_CREAT | O_EXCL, 0600);
		created = fd >= 0;
		if (!created && errno != EEXIST)
			break;
		if (created) {
			snprintf(fresh, nfresh, "%.*s%s", (int)(name - path), path, other);
			cg_count(CG_C_LOG_FALLBACK);
		}
	}
	close(dir);
	/* The umask must not decide who may read it: the policy does. */
	if (fd >= 0 && created)
		fchmod(fd, (mode_t)mode);
	return fd;
}
