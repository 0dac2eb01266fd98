/* Reporting (shim/report/): counters, stderr, the log (file or syslog),
 * metrics and the exit summary. */
#ifndef CTXGUARD_REPORT_H
#define CTXGUARD_REPORT_H

#include "../shim.h"

#pragma GCC visibility push(hidden)

/* ---- reporting (shim/report/counters.c, sink.c, summary.c) ---- */

/* "exit PID LAUNCHES" in the command's status file, if it named one. */
void cg_status_exit(unsigned long launches);

/* The summary's counters, X(NAME, key, group, one, many, help): key names it
 * in the log and the metrics; group NULL for a count of its own, else the
 * group it is one member of ("crossings", by action); one/many: its words
 * on the summary line (NULL: not there); help: the metric's # HELP (a
 * group's first member says it for the group).  Adding a counter is one line. */
#define CG_COUNTERS(X)                                                                    \
	X(LAUNCHES, "launches", NULL, "launch checked", "launches checked",                \
	  "Kernel launches ctxguard checked")                                               \
	X(CROSS_ABORT, "abort", "crossings", NULL, NULL,                                   \
	  "Launches that crossed CUDA contexts or devices, by the action taken")           \
	X(CROSS_ERROR, "error", "crossings", NULL, NULL, NULL)                            \
	X(CROSS_WARN, "warn", "crossings", NULL, NULL, NULL)                              \
	X(CROSS_OFF, "off", "crossings", NULL, NULL, NULL)                                \
	X(REDIRECT, "redirect", "crossings", NULL, NULL, NULL)                            \
	X(HOOKED_DLSYM, "hooked_by_dlsym", NULL, NULL, NULL,                               \
	  "Driver entry points handed out through dlsym")                                   \
	X(HOOKED_PROCADDR, "hooked_by_getprocaddress", NULL, NULL, NULL,                   \
	  "Driver entry points handed out through cuGetProcAddress")                        \
	X(LOG_LOST, "log_records_lost", NULL, NULL, NULL,                                  \
	  "Log records that could not be written whole")                                    \
	X(UNHOOKED, "unhooked", NULL, NULL, NULL,                                          \
	  "Launches the CUPTI backstop saw bypass the hooks")                                \
	X(LOG_FALLBACK, "log_name_fallbacks", NULL, NULL, NULL,                            \
	  "Logs opened under a fresh name because the planned one was taken")               \
	X(BACKSTOP_YIELDED, "backstop_yielded", NULL, NULL, NULL,                          \
	  "Times the CUPTI backstop stepped aside for the program's own subscriber")

enum cg_counter {
#define X(name, ...) CG_C_##name,
	CG_COUNTERS(X)
#undef X
	CG_NCOUNTERS
};
extern const struct cg_counter_info {
	const char *key, *group, *one, *many, *help;
} cg_counters[CG_NCOUNTERS];
/* The calling thread's block of counters (shim/report/counters.c), and whether
 * other threads share it (past the pool's size); v is NULL until its
 * first count, which cg_bump_first makes. */
enum { CG_NSLOTS = CG_NCOUNTERS + CG_NVARIANTS };
struct cg_counts {
	_Atomic unsigned long *v;
	int shared;
};
extern _Thread_local struct cg_counts cg_counts CG_TLS;
void cg_bump_first(int slot);
/* A count in a block the thread owns: a plain add, no locked instruction. */
static inline void cg_bump_own(_Atomic unsigned long *v, int slot)
{
	atomic_store_explicit(&v[slot], atomic_load_explicit(&v[slot], memory_order_relaxed) + 1,
			      memory_order_relaxed);
}
/* Inline: the launch path counts twice (the variant, the check). */
static inline void cg_bump(int slot)
{
	_Atomic unsigned long *v = cg_counts.v;
	if (CG_UNLIKELY(!v))
		cg_bump_first(slot);
	else if (CG_LIKELY(!cg_counts.shared))
		cg_bump_own(v, slot);
	else
		atomic_fetch_add_explicit(&v[slot], 1, memory_order_relaxed);
}
/* sharded, no shared cache line */
static inline void cg_count(enum cg_counter c) { cg_bump(c); }
static inline void cg_count_variant(int variant) { cg_bump(CG_NCOUNTERS + variant); }
unsigned long cg_counter_total(enum cg_counter c);
unsigned long cg_slot_total(int slot);  /* a counter's or a variant's calls */
void cg_counters_on_fork(void);         /* a fork child counts from zero */
/* What the summary says of the other subsystems, handed in once at
 * start-up (shim/hook/init.c), so that reporting depends on none of them. */
struct cg_summary_parts {
	void (*counts)(size_t *mods, size_t *fns, size_t *experts);
	int (*tmap_address_word)(void);
	/* "; ..." for the summary line, and its JSON fields */
	void (*backstop)(char *line, size_t nline, char *json, size_t njson);
	void (*shadow)(char *line, size_t nline, char *json, size_t njson);
};
void cg_summary_start(const struct cg_summary_parts *parts); /* once, at init */
void cg_summary_on_fork(void);           /* a fork child writes its own */
/* The log opened, the policy's problems announced (shim/report/sink.c). */
void cg_report_start(void);
void cg_sink_on_fork(void);              /* a fork child opens its own log */
/* "1 crossing", "2 crossings" */
static inline const char *cg_plural(unsigned long n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}
/* One JSON object {"event":"...",...} per line of the log, time, host,
 * pid, tid and job added after the event; under `log = syslog` only the
 * events shim/report/syslog.c lists go there. */
void cg_log_event(const char *event, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* A crossing's record (cg_format_json), at its action's syslog priority:
 * in buf when it fits in n bytes, else in one of its length, never cut
 * short. */
void cg_log_crossing(const struct cg_crossing *c, char *buf, size_t n);
void cg_stderr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cg_write_stderr(const char *s);
void cg_status_crossing(int action);         /* for the ctxguard command */
/* A status line of its own ("unhooked", "unwatched", "unchecked",
 * "unmapped"): each word once per process, however often it is said. */
void cg_status_word(const char *word);
void cg_status_on_fork(void);                 /* in a forked child */
void cg_report_summary(void);

/* ---- who writes (shim/report/identity.c) ---- */

/* ,"pid":..,"version":..,"host":.. and the job's keys present in the
 * environment (RANK, SLURM_JOB_ID, POD_NAME...), read once per process. */
const char *cg_identity_json(void);
const char *cg_identity_labels(void);        /* the same as Prometheus labels */
/* A path with %p (pid), %h (host), %r (rank or "-") filled in. */
int cg_identity_expand(const char *tpl, char *out, size_t n);
void cg_identity_on_fork(void);               /* re-read on next use */

/* ---- syslog (shim/report/syslog.c) ---- */

/* "syslog" or "syslog:SOCKET" (default /dev/log): whether path names it. */
int cg_syslog_named(const char *path);
void cg_syslog_open(const char *path);
/* The priority of a record of event (len bytes) and action (a crossing's,
 * else CG_ACT_UNSET), -1 when syslog does not take it. */
int cg_syslog_priority(const char *event, size_t len, int action);
void cg_syslog_send(int prio, const struct iovec *v, int n);

/* ---- metrics (shim/report/metrics.c) ---- */

/* The counters in Prometheus text format, written to a temporary file and
 * renamed over the policy's metrics path. */
void cg_metrics_write(const unsigned long *totals);
/* Opens a log file for appending, refusing symlinks in the path and
 * anything but a regular file (shim/report/logfile.c); a new file gets mode.  -1
 * with the reason in why.  Where others may write, a name taken by
 * something else gives a fresh name beside it: then that path is in fresh
 * and why says what was at the name (counted: log_name_fallbacks). */
int cg_log_open(const char *path, int mode, char *why, size_t n, char *fresh, size_t nfresh);

#pragma GCC visibility pop

#endif
