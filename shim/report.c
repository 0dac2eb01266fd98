/* Counters, the JSON-lines event log, stderr, and the summary at exit. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

#include "shim.h"

/* Counters live in per-thread blocks so the launch path never shares a
 * cache line: a thread owns its block and bumps it with a plain add
 * (relaxed load + store); past the pool's size threads share blocks and
 * need a real atomic add. */
enum { POOL = 256, NSLOTS = CG_NCOUNTERS + CG_NVARIANTS };
static struct block {
	_Atomic unsigned long v[NSLOTS];
} __attribute__((aligned(64))) pool[POOL];
static _Atomic unsigned next_block;
static _Thread_local struct block *mine CG_TLS;
static _Thread_local int shared CG_TLS;

static inline void bump(int slot)
{
	if (CG_UNLIKELY(!mine)) {
		unsigned i = atomic_fetch_add(&next_block, 1);
		shared = i >= POOL;
		mine = &pool[i % POOL];
	}
	if (CG_LIKELY(!shared))
		atomic_store_explicit(&mine->v[slot],
				      atomic_load_explicit(&mine->v[slot], memory_order_relaxed) + 1,
				      memory_order_relaxed);
	else
		atomic_fetch_add_explicit(&mine->v[slot], 1, memory_order_relaxed);
}

void cg_count(enum cg_counter c) { bump(c); }
void cg_count_variant(int variant) { bump(CG_NCOUNTERS + variant); }

static unsigned long total(int slot)
{
	unsigned long n = 0;
	for (int i = 0; i < POOL; i++)
		n += atomic_load_explicit(&pool[i].v[slot], memory_order_relaxed);
	return n;
}

unsigned long cg_counter_total(enum cg_counter c) { return total(c); }

enum { LOG_REOPEN = -2 };
static int log_fd = -1;
static int status_fd_open;
static char status_path[4096];

static void write_all(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t w = write(fd, s, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

void cg_write_stderr(const char *s)
{
	write_all(2, s, strlen(s));
}

void cg_stderr(const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n > 0)
		write_all(2, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* "%p" in the path becomes the pid, so each process of a job has its own. */
static void open_log(void)
{
	const char *tpl = cg_policy->log_path;
	log_fd = -1;
	if (!tpl || !*tpl)
		return;
	char path[4096];
	size_t o = 0;
	for (const char *s = tpl; *s && o < sizeof path - 24; s++) {
		if (s[0] == '%' && s[1] == 'p') {
			o += (size_t)snprintf(path + o, sizeof path - o, "%ld", (long)getpid());
			s++;
		} else {
			path[o++] = *s;
		}
	}
	path[o] = 0;
	char why[512];
	log_fd = cg_log_open(path, cg_policy->log_mode, why, sizeof why);
	if (log_fd < 0)
		cg_stderr("ctxguard: cannot open log %s: %s (logging disabled)\n", path, why);
}

/* One write per line, so lines of concurrent threads never interleave. */
void cg_log_line(const char *json)
{
	if (log_fd == LOG_REOPEN)
		open_log();
	if (log_fd < 0)
		return;
	size_t n = strlen(json);
	struct iovec v[2] = {{(void *)json, n}, {"\n", 1}};
	writev(log_fd, v, 2);
}

void cg_log_event(const char *event, const char *fmt, ...)
{
	if (log_fd == -1)
		return;
	struct timeval tv;
	gettimeofday(&tv, NULL);
	char body[6144], line[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(body, sizeof body, fmt, ap);
	va_end(ap);
	snprintf(line, sizeof line, "{\"event\":\"%s\",\"time\":%ld.%06ld,\"pid\":%ld%s%s}",
		 event, (long)tv.tv_sec, (long)tv.tv_usec, (long)getpid(), *body ? "," : "",
		 body);
	cg_log_line(line);
}

/* The ctxguard command learns of crossings in any process of the tree
 * through a file it names in CTXGUARD_STATUS: one line per crossing. */
void cg_status_crossing(int action)
{
	if (!status_fd_open)
		return;
	int fd = open(status_path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0)
		return;
	char line[64];
	int n = snprintf(line, sizeof line, "%s %ld\n", cg_action_name(action), (long)getpid());
	write_all(fd, line, (size_t)n);
	close(fd);
}

/* After fork the child counts from zero and writes its own log (%p),
 * opened on first use: nothing heavier than close() runs in the handler. */
void cg_report_forked(void)
{
	if (log_fd >= 0)
		close(log_fd);
	log_fd = LOG_REOPEN;
	memset(pool, 0, sizeof pool);
	atomic_store(&next_block, 0);
	mine = NULL;
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

void cg_report_start(void)
{
	open_log();
	const char *s = cg_policy->secure ? NULL : getenv("CTXGUARD_STATUS");
	status_fd_open = s && *s && strlen(s) < sizeof status_path;
	if (status_fd_open)
		strcpy(status_path, s);
	announce("config_error", cg_policy->errors, cg_policy->nerrors);
	announce("lock_refused", cg_policy->refused, cg_policy->nrefused);
	if (cg_policy->secure)
		announce_secure();
	if (cg_policy->errors_dropped)
		cg_stderr("ctxguard: ... and %zu more configuration problems\n",
			  cg_policy->errors_dropped);
	char src[1024];
	cg_json_escape(src, sizeof src, cg_policy->source ? cg_policy->source : "built-in");
	cg_log_event("start", "\"policy\":\"%s\",\"mode\":\"%s\",\"scope\":\"%s\",\"rules\":%zu",
		     src, cg_action_name(cg_policy->mode),
		     cg_policy->scope == CG_SCOPE_ALL ? "all" : "experts", cg_policy->nrules);
}

void cg_report_summary(void)
{
	size_t mods, fns, experts;
	cg_registry_counts(&mods, &fns, &experts);
	unsigned long launches = total(CG_C_LAUNCHES);
	unsigned long a = total(CG_C_CROSS_ABORT), e = total(CG_C_CROSS_ERROR),
		      w = total(CG_C_CROSS_WARN), o = total(CG_C_CROSS_OFF);
	char calls[4096];
	size_t n = 0;
	calls[0] = 0;
	for (int i = 0; i < CG_NVARIANTS && n < sizeof calls - 128; i++) {
		unsigned long c = total(CG_NCOUNTERS + i);
		if (c)
			n += (size_t)snprintf(calls + n, sizeof calls - n, "%s\"%s\":%lu",
					      n ? "," : "", cg_variants[i].symbol, c);
	}
	cg_log_event("summary",
		     "\"modules\":%zu,\"functions\":%zu,\"experts\":%zu,\"launches\":%lu,"
		     "\"crossings\":{\"abort\":%lu,\"error\":%lu,\"warn\":%lu,\"off\":%lu},"
		     "\"hooked_by_dlsym\":%lu,\"hooked_by_getprocaddress\":%lu,"
		     "\"tensor_map_address_word\":%d,\"calls\":{%s}",
		     mods, fns, experts, launches, a, e, w, o, total(CG_C_HOOKED_DLSYM),
		     total(CG_C_HOOKED_PROCADDR), cg_tmap_address_word(), calls);
	if (!cg_policy->quiet)
		cg_stderr("ctxguard: pid %ld: %zu modules, %zu functions tracked (%zu expert), "
			  "%lu launches checked, %lu crossings (abort %lu, error %lu, warn %lu, "
			  "off %lu)\n",
			  (long)getpid(), mods, fns, experts, launches, a + e + w + o, a, e, w, o);
}
