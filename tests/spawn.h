/* Run a program of the suite under the shim and capture what it did. */
#ifndef CTXGUARD_TESTS_SPAWN_H
#define CTXGUARD_TESTS_SPAWN_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct run {
	int status;           /* as from waitpid */
	char out[65536];
	char err[65536];
};

static inline const char *build_dir(void)
{
	const char *b = getenv("CTXGUARD_TEST_BUILD");
	return b ? b : "build";
}

/* The child's stdout and stderr into r until both close, then its status. */
static inline void collect(struct run *r, int out_fd, int err_fd, pid_t pid)
{
	size_t no = 0, ne = 0;
	struct pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
	int open_fds = 2;
	while (open_fds) {
		if (poll(fds, 2, -1) < 0 && errno == EINTR)
			continue;
		for (int i = 0; i < 2; i++) {
			if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP)))
				continue;
			char *buf = i ? r->err : r->out;
			size_t *n = i ? &ne : &no;
			size_t cap = (i ? sizeof r->err : sizeof r->out) - 1;
			char sink[4096];
			ssize_t got = *n < cap ? read(fds[i].fd, buf + *n, cap - *n)
					       : read(fds[i].fd, sink, sizeof sink);
			if (got <= 0) {
				close(fds[i].fd);
				fds[i].fd = -1;
				open_fds--;
			} else if (*n < cap) {
				*n += (size_t)got;
			}
		}
	}
	r->out[no] = 0;
	r->err[ne] = 0;
	while (waitpid(pid, &r->status, 0) < 0 && errno == EINTR)
		;
}

/* A child with its stdout and stderr piped: returns 0 in the child (the
 * shim's reports not quieted), its pid in the parent after collect(). */
static inline pid_t fork_collected(struct run *r)
{
	int po[2], pe[2];
	memset(r, 0, sizeof *r);
	if (pipe(po) || pipe(pe))
		abort();
	pid_t pid = fork();
	if (pid == 0) {
		dup2(po[1], 1);
		dup2(pe[1], 2);
		close(po[0]);
		close(pe[0]);
		unsetenv("CTXGUARD_QUIET");
		return 0;
	}
	close(po[1]);
	close(pe[1]);
	collect(r, po[0], pe[0], pid);
	return pid;
}

/* argv[0] relative to the build directory ("tests/progs/scenario"), or
 * "ctxguard": the suite's copy of the command (tests/locked.mk); env
 * entries "NAME=value" are added, "NAME" alone removed.
 * The shim is preloaded unless an env entry sets LD_PRELOAD itself. */
static inline void spawn(struct run *r, const char *const *env, const char *const *argv)
{
	if (fork_collected(r) == 0) {
		const char *pre = getenv("CTXGUARD_TEST_PRELOAD");
		if (pre)
			setenv("LD_PRELOAD", pre, 1);
		for (size_t i = 0; env && env[i]; i++) {
			const char *eq = strchr(env[i], '=');
			if (!eq) {
				unsetenv(env[i]);
				continue;
			}
			char name[256];
			snprintf(name, sizeof name, "%.*s", (int)(eq - env[i]), env[i]);
			setenv(name, eq + 1, 1);
		}
		char path[4096];
		if (strcmp(argv[0], "ctxguard") == 0)
			snprintf(path, sizeof path, "%s/tests/suite/ctxguard", build_dir());
		else if (argv[0][0] == '/')
			snprintf(path, sizeof path, "%s", argv[0]);
		else
			snprintf(path, sizeof path, "%s/%s", build_dir(), argv[0]);
		execv(path, (char *const *)argv);
		_exit(127);
	}
}

/* fn() in a forked child of this test, which then exits 0; its output in
 * r.  Returns the child's pid. */
static inline pid_t spawn_fn(struct run *r, void (*fn)(void))
{
	pid_t pid = fork_collected(r);
	if (pid == 0) {
		fn();
		exit(0);
	}
	return pid;
}

/* The library the suite runs against (run.sh: the build's, or an installed
 * wheel's under CTXGUARD_TEST_LIBRARY): the last entry of its preload. */
static inline const char *shim_library(void)
{
	const char *pre = getenv("CTXGUARD_TEST_PRELOAD");
	const char *colon = pre ? strrchr(pre, ':') : NULL;
	return colon ? colon + 1 : pre ? pre : "";
}

/* "LD_PRELOAD=" plus whatever the suite preloads before the shim (a
 * sanitizer runtime), for programs that preload the shim themselves. */
static inline const char *preload_without_shim(void)
{
	static char env[4096];
	const char *pre = getenv("CTXGUARD_TEST_PRELOAD");
	const char *colon = pre ? strrchr(pre, ':') : NULL;
	snprintf(env, sizeof env, "LD_PRELOAD=%.*s", colon ? (int)(colon - pre) : 0, pre ? pre : "");
	return env;
}

/* What the suite preloads before the shim: a sanitizer runtime, or "". */
static inline const char *preload_before_shim(void)
{
	return preload_without_shim() + strlen("LD_PRELOAD=");
}

static inline int exited(const struct run *r, int code)
{
	return WIFEXITED(r->status) && WEXITSTATUS(r->status) == code;
}

static inline int killed_by(const struct run *r, int sig)
{
	return WIFSIGNALED(r->status) && WTERMSIG(r->status) == sig;
}

/* The first line of s, without its newline, in a static buffer. */
static inline const char *first_line(const char *s)
{
	static char line[4096];
	size_t n = strcspn(s, "\n");
	snprintf(line, sizeof line, "%.*s", (int)n, s);
	return line;
}

/* Under tests/run.sh every log record a test reads is kept, in the file
 * CTXGUARD_TEST_RECORDS names, for the schema check (tests/log_schema.py). */
static inline void keep_records(const char *text)
{
	const char *keep = getenv("CTXGUARD_TEST_RECORDS");
	int fd = keep ? open(keep, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600) : -1;
	if (fd < 0)
		return;
	for (const char *l = text, *nl; (nl = strchr(l, '\n')); l = nl + 1)
		if (strncmp(l, "{\"event\":\"", 10) == 0 && write(fd, l, (size_t)(nl + 1 - l)) < 0)
			break;
	close(fd);
}

static inline char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	static char buf[1 << 20];
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = 0;
	fclose(f);
	keep_records(buf);
	return buf;
}

static inline int count_of(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

#endif
