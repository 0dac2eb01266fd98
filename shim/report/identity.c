/* Who is writing a record: host, pid, ctxguard version and the job the
 * process belongs to, as launchers put it in the environment.  Read once
 * per process (again in a fork child: new pid, and the parent may have
 * changed its environment before forking), never on the launch path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report.h"
#include "../once.h"

#ifndef CTXGUARD_VERSION
#error "CTXGUARD_VERSION comes from the Makefile's VERSION"
#endif

/* The job's identity: torchrun/torchelastic, Slurm, and Kubernetes through
 * the downward API (examples/kubernetes sets POD_NAME and POD_NAMESPACE).
 * label: also a Prometheus label; the metrics carry who (host, job, rank),
 * never what varies per process or run size (pid, world_size), which would
 * multiply the time series. */
static const struct {
	const char *key, *env;
	int label;
} job[] = {
	{"rank", "RANK", 1},
	{"local_rank", "LOCAL_RANK", 1},
	{"world_size", "WORLD_SIZE", 0},
	{"torchelastic_run_id", "TORCHELASTIC_RUN_ID", 1},
	{"slurm_job_id", "SLURM_JOB_ID", 1},
	{"slurm_procid", "SLURM_PROCID", 1},
	{"slurm_localid", "SLURM_LOCALID", 1},
	{"pod", "POD_NAME", 1},
	{"namespace", "POD_NAMESPACE", 1},
};
#define NJOB (sizeof job / sizeof job[0])

enum { VALUE = 128 };   /* longer values are cut: an identity, not a payload */
static struct cg_once read_once;
static struct {
	char host[256];
	char rank[VALUE];
	char json[2048];     /* ,"host":...,"pid":...,"version":...[,job keys] */
	char labels[2048];   /* host="..",rank=".." for Prometheus */
} id;

/* A value for JSON or a Prometheus label: both escape \ and " alike; JSON
 * also wants control bytes escaped, which a label cannot hold anyway. */
static void put_value(char *out, size_t n, size_t *o, const char *s)
{
	char esc[VALUE * 6];
	cg_json_escape(esc, sizeof esc, s);
	size_t k = strlen(esc);
	if (*o + k < n) {
		memcpy(out + *o, esc, k + 1);
		*o += k;
	}
}

static void append(char *out, size_t n, size_t *o, const char *fmt, const char *key)
{
	int k = snprintf(out + *o, n - *o, fmt, key);
	if (k > 0 && *o + (size_t)k < n)
		*o += (size_t)k;
}

/* key and its quoted value: fmt writes the key and the opening quote. */
static void put_pair(char *out, size_t n, size_t *o, const char *fmt, const char *key,
		     const char *value)
{
	append(out, n, o, fmt, key);
	put_value(out, n, o, value);
	append(out, n, o, "%s", "\"");
}

static void read_identity(void)
{
	if (gethostname(id.host, sizeof id.host) != 0)
		strcpy(id.host, "-");
	id.host[sizeof id.host - 1] = 0;
	size_t j = 0, l = 0;
	j = (size_t)snprintf(id.json, sizeof id.json, ",\"pid\":%ld,\"version\":\"%s\"",
			     (long)getpid(), CTXGUARD_VERSION);
	put_pair(id.json, sizeof id.json, &j, ",\"%s\":\"", "host", id.host);
	put_pair(id.labels, sizeof id.labels, &l, "%s=\"", "host", id.host);
	for (size_t i = 0; i < NJOB; i++) {
		const char *v = getenv(job[i].env);
		if (!v || !*v)
			continue;
		char cut[VALUE];
		snprintf(cut, sizeof cut, "%s", v);
		put_pair(id.json, sizeof id.json, &j, ",\"%s\":\"", job[i].key, cut);
		if (job[i].label)
			put_pair(id.labels, sizeof id.labels, &l, ",%s=\"", job[i].key, cut);
	}
	/* %r: torchrun's global rank, else Slurm's task rank. */
	const char *r = getenv("RANK");
	if (!r || !*r)
		r = getenv("SLURM_PROCID");
	snprintf(id.rank, sizeof id.rank, "%s", r && *r ? r : "-");
}

static void ensure(void)
{
	if (cg_once_enter(&read_once)) {
		read_identity();
		cg_once_leave(&read_once);
	}
}

void cg_identity_on_fork(void)
{
	cg_once_reset(&read_once);
}

const char *cg_identity_json(void)
{
	ensure();
	return id.json;
}

const char *cg_identity_labels(void)
{
	ensure();
	return id.labels;
}

/* %p pid, %h host, %r rank (or "-"), %% a percent sign; anything else is
 * kept as written.  In host and rank, bytes other than letters, digits,
 * '-', '_' and a '.' not in front become '_'.  False when it does not fit. */
int cg_identity_expand(const char *tpl, char *out, size_t n)
{
	ensure();
	size_t o = 0;
	for (const char *s = tpl; *s; s++) {
		char pid[24], one[2] = {*s, 0};
		const char *put = NULL;
		if (s[0] == '%' && s[1]) {
			switch (s[1]) {
			case 'p':
				snprintf(pid, sizeof pid, "%ld", (long)getpid());
				put = pid;
				break;
			case 'h':
				put = id.host;
				break;
			case 'r':
				put = id.rank;
				break;
			case '%':
				put = "%";
				break;
			}
		}
		/* Host and rank come from outside: never a directory step. */
		int from_env = put && s[1] != 'p' && s[1] != '%';
		if (put)
			s++;
		else
			put = one;
		size_t k = strlen(put);
		if (o + k >= n)
			return 0;
		for (size_t i = 0; i < k; i++) {
			char ch = put[i];
			int safe = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
				   (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' ||
				   (ch == '.' && i > 0);
			out[o++] = from_env && !safe ? '_' : ch;
		}
	}
	out[o] = 0;
	return 1;
}
