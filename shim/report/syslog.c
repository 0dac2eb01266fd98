/* `log = syslog`: one datagram per crossing, and per record that says the
 * process ran partly unchecked, to the local syslog socket, where journald
 * or rsyslog picks it up, so an operator collects nothing from the nodes'
 * disks.  Written here rather than with syslog(3), whose
 * one process-wide connection belongs to the program; "syslog:SOCKET"
 * names another socket (a container's mounted /dev/log, a test's). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "report.h"

static int fd = -1;
static struct sockaddr_un addr;

int cg_syslog_named(const char *path)
{
	return strncmp(path, "syslog", 6) == 0 && (path[6] == 0 || path[6] == ':');
}

/* Once per process: the socket is not connected, so a fork child sends
 * through the one it inherited. */
void cg_syslog_open(const char *path)
{
	if (fd >= 0)
		return;
	const char *sock = path[6] == ':' && path[7] ? path + 7 : "/dev/log";
	addr.sun_family = AF_UNIX;
	if (strlen(sock) >= sizeof addr.sun_path) {
		cg_stderr("ctxguard: syslog socket %s: name too long (not logging)\n", sock);
		return;
	}
	strcpy(addr.sun_path, sock);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		cg_stderr("ctxguard: no socket for syslog: %s (not logging)\n", strerror(errno));
}

/* Which records syslog takes, and at what priority: the one place that
 * decides.  A crossing at its action's.  A record saying that the process
 * ran partly unchecked (unchecked and unhooked fail `ctxguard --audit`, so
 * does unmapped where launches lose their checks: shim/hook/procaddr.c) at
 * warning, or err where the policy's mode stops crossings: an operator who
 * enforces through syslog sees the gaps too.  Each of those is said a few
 * times at most (unchecked once per start-up and once per
 * function whose deprecated launch could not be read, unhooked for the
 * first four launches, unmapped once per entry point).  Every other
 * record (start, summary, backstop...) stays out. */
enum by { ACTION, MODE };
static const struct {
	const char *event;
	enum by by;
} to_syslog[] = {
	{"crossing", ACTION},
	{"unchecked", MODE},
	{"unhooked", MODE},
	{"unmapped", MODE},
};

int cg_syslog_priority(const char *event, size_t len, int action)
{
	static const int by_action[] = {
		[CG_ACT_OFF] = -1, [CG_ACT_WARN] = LOG_WARNING, [CG_ACT_ERROR] = LOG_ERR,
		[CG_ACT_ABORT] = LOG_ERR, [CG_ACT_REDIRECT] = LOG_NOTICE,
	};
	for (size_t i = 0; i < sizeof to_syslog / sizeof to_syslog[0]; i++) {
		if (strlen(to_syslog[i].event) != len || memcmp(event, to_syslog[i].event, len) != 0)
			continue;
		int mode = cg_policy->mode;
		if (to_syslog[i].by == MODE)
			return mode == CG_ACT_ERROR || mode == CG_ACT_ABORT ? LOG_ERR : LOG_WARNING;
		return action >= 0 ? by_action[action] : -1;
	}
	return -1;
}

/* "<prio>Mmm dd hh:mm:ss ctxguard[pid]: " and the record, as syslog(3)
 * sends it; a syslog daemon that is away or behind (its queue full) loses
 * the line, never the launch, and the line is counted as a lost record. */
void cg_syslog_send(int prio, const struct iovec *v, int n)
{
	if (fd < 0)
		return;
	char head[96];
	time_t now = time(NULL);
	struct tm tm;
	localtime_r(&now, &tm);
	size_t k = (size_t)snprintf(head, sizeof head, "<%d>", LOG_USER | prio);
	k += strftime(head + k, sizeof head - k, "%b %e %H:%M:%S ", &tm);
	snprintf(head + k, sizeof head - k, "ctxguard[%ld]: ", (long)getpid());
	struct iovec all[8] = {{head, strlen(head)}};
	int m = 1;
	for (int i = 0; i < n && m < 8; i++)
		all[m++] = v[i];
	struct msghdr msg = {.msg_name = &addr, .msg_namelen = sizeof addr, .msg_iov = all,
			     .msg_iovlen = (size_t)m};
	if (sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		cg_count(CG_C_LOG_LOST);
}
