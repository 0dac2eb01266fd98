/* Where reports go: stderr, the JSON-lines event log (or syslog), and the
 * ctxguard command's status file; the start-up's announcements. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "report.h"

/* log_fd: the log file; LOG_SYSLOG: records go to syslog; LOG_REOPEN: a
 * fork child opens its own (%p) on first use. */
enum { LOG_NONE = -1, LOG_REOPEN = -2, LOG_SYSLOG = -3 };
static int log_fd = LOG_NONE;
static int status_fd_open;
static char status_path[4096];
/* CTXGUARD_LOG_FILE: a text copy of what ctxguard writes to stderr. */
static int text_fd = -1;

/* A record is one writev, so concurrent threads' lines never interleave
 * while the kernel writes it whole; a signal or a full disk may cut it short,
 * and then the rest follows (the line may interleave, but is not lost).
 * False when the record could not be written entirely. */
static int write_vec(int fd, struct iovec *v, int n)
{
	while (n) {
		ssize_t w = writev(fd, v, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return 0;
		for (; n && (size_t)w >= v->iov_len; v++, n--)
			w -= (ssize_t)v->iov_len;
		if (n) {
			v->iov_base = (char *)v->iov_base + w;
			v->iov_len -= (size_t)w;
		}
	}
	return 1;
}

static void write_all(int fd, const char *s, size_t n)
{
	struct iovec v = {(void *)s, n};
	write_vec(fd, &v, 1);
}

static void write_err(const char *s, size_t n)
{
	write_all(2, s, n);
	if (text_fd >= 0)
		write_all(text_fd, s, n);
}

/* Whatever reaches stderr is escaped as the log escapes it (control
 * bytes, C1 codes, bytes that are not UTF-8): kernel names, paths and
 * policy text come from the program and the user, and a terminal obeys
 * ESC and CSI.  lines: the text's newlines are its own (a report); else it
 * is one message, and only its final newline is kept. */
static void write_text(const char *s, int lines)
{
	char buf[4096];
	/* one write, its newline included, so that threads' lines never mix */
	size_t len = cg_text_escape(buf, sizeof buf - 1, s, lines);
	char *out = len < sizeof buf - 1 ? buf : malloc(len + 2);
	if (!out)
		len = strlen(out = buf);      /* what fitted, cut between escapes */
	else if (out != buf)
		cg_text_escape(out, len + 1, s, lines);
	if (!lines)
		out[len++] = '\n';
	write_err(out, len);
	if (out != buf)
		free(out);
}

void cg_write_stderr(const char *s)
{
	write_text(s, 1);
}

void cg_stderr(const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n <= 0)
		return;
	size_t len = (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1;
	if (buf[len - 1] == '\n')
		buf[len - 1] = 0;
	write_text(buf, 0);
}

/* %p, %h and %r in the path give each process, host and rank its own
 * file; "syslog[:SOCKET]" sends records to syslog instead (those it takes). */
static void open_log(void)
{
	const char *tpl = cg_policy->log_path;
	log_fd = LOG_NONE;
	if (!tpl || !*tpl)
		return;
	if (cg_syslog_named(tpl)) {
		cg_syslog_open(tpl);
		log_fd = LOG_SYSLOG;
		return;
	}
	char path[4096];
	if (!cg_identity_expand(tpl, path, sizeof path)) {
		cg_stderr("ctxguard: log path %s is too long once expanded (logging disabled)\n",
			  tpl);
		return;
	}
	char why[512], fresh[4096];
	log_fd = cg_log_open(path, cg_policy->log_mode, why, sizeof why, fresh, sizeof fresh);
	if (log_fd < 0) {
		cg_stderr("ctxguard: cannot open log %s: %s (logging disabled)\n", path, why);
	} else if (*fresh) {
		cg_stderr("ctxguard: log %s: %s; logging to %s instead\n", path, why, fresh);
		char asked[1024], used[1024];
		cg_json_escape(asked, sizeof asked, path);
		cg_json_escape(used, sizeof used, fresh);
		cg_log_event("log_name_fallback", "\"asked\":\"%s\",\"path\":\"%s\"", asked, used);
	}
}

/* One write per line, so lines of concurrent threads never interleave:
 * {"event":"X" + ,"time":..,"tid":.. + the identity + the rest + \n.
 * action: a crossing's, else CG_ACT_UNSET. */
static void log_record(const char *json, int action)
{
	if (log_fd == LOG_REOPEN)
		open_log();
	if (log_fd == LOG_NONE)
		return;
	/* Every record starts with its event (cg_format_json, cg_log_event):
	 * after {"event":" come the name and its closing quote. */
	const char *q = strncmp(json, "{\"event\":\"", 10) == 0 ? strchr(json + 10, '"') : NULL;
	int prio = q ? cg_syslog_priority(json + 10, (size_t)(q - json - 10), action) : -1;
	if (log_fd == LOG_SYSLOG && prio < 0)
		return;
	size_t head = q ? (size_t)(q + 1 - json) : 1;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char when[96];
	size_t w = strftime(when, sizeof when, ",\"time\":\"%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(when + w, sizeof when - w, ".%06ldZ\",\"tid\":%ld", ts.tv_nsec / 1000, (long)syscall(SYS_gettid));
	const char *who = cg_identity_json();
	struct iovec v[5] = {{(void *)json, head}, {when, strlen(when)},
			     {(void *)who, strlen(who)},
			     {(void *)(json + head), strlen(json + head)}, {"\n", 1}};
	if (log_fd == LOG_SYSLOG)
		cg_syslog_send(prio, v, 4);
	else if (!write_vec(log_fd, v, 5))
		cg_count(CG_C_LOG_LOST);
}

/* fmt's text in buf when it fits in n bytes, else in a buffer of its own
 * length (malloc'ed; NULL when out of memory): a record cut short is no
 * JSON, and records holding kernel names (CUTLASS templates run to
 * kilobytes) or many counters outgrow any fixed size. */
static char *vformat(char *buf, size_t n, const char *fmt, va_list ap)
{
	va_list again;
	va_copy(again, ap);
	int len = vsnprintf(buf, n, fmt, ap);
	char *out = len < 0 ? NULL : (size_t)len < n ? buf : malloc((size_t)len + 1);
	if (out && out != buf)
		vsnprintf(out, (size_t)len + 1, fmt, again);
	va_end(again);
	return out;
}

static char *format(char *buf, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *out = vformat(buf, n, fmt, ap);
	va_end(ap);
	return out;
}

void cg_log_event(const char *event, const char *fmt, ...)
{
	if (log_fd == LOG_NONE)
		return;
	char body[6144], line[8192];
	va_list ap;
	va_start(ap, fmt);
	char *b = vformat(body, sizeof body, fmt, ap);
	va_end(ap);
	char *l = b ? format(line, sizeof line, "{\"event\":\"%s\"%s%s}", event, *b ? "," : "", b) : NULL;
	if (l)
		log_record(l, CG_ACT_UNSET);
	if (l != line)
		free(l);
	if (b != body)
		free(b);
}

void cg_log_crossing(const struct cg_crossing *c, char *buf, size_t n)
{
	size_t len = cg_format_json(buf, n, cg_policy, c);
	char *big = len < n ? buf : malloc(len + 1);
	if (big && big != buf)
		cg_format_json(big, len + 1, cg_policy, c);
	if (big)
		log_record(big, c->action);
	if (big != buf)
		free(big);
}

/* The ctxguard command learns of crossings in any process of the tree
 * through a file it names in CTXGUARD_STATUS: one line per crossing. */
/* "WORD PID\n", or "exit PID LAUNCHES\n" */
static void status_append(const char *path, const char *word, const unsigned long *count)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0)
		return;
	char line[96];
	int n = count ? snprintf(line, sizeof line, "%s %ld %lu\n", word, (long)getpid(), *count)
		      : snprintf(line, sizeof line, "%s %ld\n", word, (long)getpid());
	write_all(fd, line, (size_t)n);
	close(fd);
}

static void status_line(const char *word)
{
	if (status_fd_open)
		status_append(status_path, word, NULL);
}

/* Every process says it ended, with its launches checked, for the
 * command's closing line; one that never started ctxguard (no CUDA) too,
 * reading the variable itself, as start-up would have. */
void cg_status_exit(unsigned long launches)
{
	if (status_fd_open) {
		status_append(status_path, "exit", &launches);
		return;
	}
	const char *s = secure_getenv("CTXGUARD_STATUS");
	if (s && *s)
		status_append(s, "exit", &launches);
}

void cg_status_crossing(int action)
{
	status_line(cg_action_name(action));
}

/* The command counts the processes that said each word: a word said again
 * (another unmapped entry point, another kernel) adds no line. */
static pthread_mutex_t words_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *words_said[8];

void cg_status_word(const char *word)
{
	pthread_mutex_lock(&words_lock);
	size_t i = 0;
	while (i < sizeof words_said / sizeof words_said[0] && words_said[i] &&
	       strcmp(words_said[i], word) != 0)
		i++;
	int first = i < sizeof words_said / sizeof words_said[0] && !words_said[i];
	if (first)
		words_said[i] = word;
	pthread_mutex_unlock(&words_lock);
	if (first)
		status_line(word);
}

/* The child's words are its own.  Whatever the state: a start-up in the
 * parent's other thread may have held the lock at the fork (the backstop
 * saying "unwatched"), and the child starts anew. */
void cg_status_on_fork(void)
{
	pthread_mutex_init(&words_lock, NULL);
	memset(words_said, 0, sizeof words_said);
}

/* After fork the child writes its own log (%p), opened on first use:
 * nothing heavier than close() runs in the handler. */
void cg_sink_on_fork(void)
{
	if (log_fd >= 0)
		close(log_fd);
	if (log_fd != LOG_NONE)
		log_fd = LOG_REOPEN;
}

/* Each line on stderr and as one log event. */
static void announce(const char *event, char *const *lines, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		cg_stderr("%s\n", lines[i]);
		char esc[1024];
		cg_json_escape(esc, sizeof esc, lines[i]);
		cg_log_event(event, "\"message\":\"%s\"", esc);
	}
}

/* Secure execution: logged once; said on stderr too when somebody set a
 * CTXGUARD_* variable, so they learn why it had no effect. */
static void announce_secure(void)
{
	static const char note[] = "ctxguard: secure execution (setuid, setgid or file"
				   " capabilities): every CTXGUARD_* variable is ignored;"
				   " only the system policy applies";
	extern char **environ;
	for (char **e = environ; e && *e; e++)
		if (strncmp(*e, "CTXGUARD_", 9) == 0) {
			cg_stderr("%s\n", note);
			break;
		}
	cg_log_event("secure_execution", "\"message\":\"%s\"", note);
}

/* Opened like the log (never through a planted link), appended to by
 * every process of the tree. */
static void open_text_copy(void)
{
	const char *tpl = cg_user_env("CTXGUARD_LOG_FILE");
	char path[4096], why[512], fresh[4096];
	if (!tpl || !*tpl)
		return;
	if (!cg_identity_expand(tpl, path, sizeof path)) {
		cg_stderr("ctxguard: log file %s is too long once expanded\n", tpl);
		return;
	}
	text_fd = cg_log_open(path, cg_policy->log_mode, why, sizeof why, fresh, sizeof fresh);
	if (text_fd < 0)
		cg_stderr("ctxguard: cannot open log file %s: %s\n", path, why);
	else if (*fresh)
		cg_stderr("ctxguard: log file %s: %s; writing to %s instead\n", path, why, fresh);
}

void cg_report_start(void)
{
	open_text_copy();
	open_log();
	const char *s = cg_user_env("CTXGUARD_STATUS");
	status_fd_open = s && *s && strlen(s) < sizeof status_path;
	if (status_fd_open)
		strcpy(status_path, s);
	announce("config_error", cg_policy->errors, cg_policy->nerrors);
	announce("lock_refused", cg_policy->refused, cg_policy->nrefused);
	if (cg_policy->secure)
		announce_secure();
	if (cg_policy->errors_dropped)
		cg_stderr("ctxguard: ... and %zu more configuration %s\n", cg_policy->errors_dropped,
			  cg_plural(cg_policy->errors_dropped, "problem", "problems"));
	char src[1024];
	cg_json_escape(src, sizeof src, cg_policy->source ? cg_policy->source : "built-in");
	cg_log_event("start", "\"policy\":\"%s\",\"mode\":\"%s\",\"scope\":\"%s\",\"rules\":%zu",
		     src, cg_action_name(cg_policy->mode),
		     cg_policy->scope == CG_SCOPE_ALL ? "all" : "experts", cg_policy->nrules);
}
