/* The summary at exit (or before an abort): one log record, the metrics
 * file, and one stderr line. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "report.h"

/* The summary was written (a fork child writes its own). */
static _Atomic int summarised;
static const struct cg_summary_parts *parts;

void cg_summary_start(const struct cg_summary_parts *summary_parts)
{
	parts = summary_parts;
}

void cg_summary_on_fork(void)
{
	atomic_store(&summarised, 0);
}

/* The counters as JSON members, a group as one object where its first
 * member stands: "launches":3,"crossings":{"abort":0,...},... */
static size_t counters_json(char *buf, size_t n, const unsigned long *t)
{
	size_t o = 0;
	for (int i = 0; i < CG_NCOUNTERS && o < n; i++) {
		const char *g = cg_counters[i].group;
		int first = g && (i == 0 || !cg_counters[i - 1].group ||
				  strcmp(cg_counters[i - 1].group, g) != 0);
		int last = g && (i + 1 == CG_NCOUNTERS || !cg_counters[i + 1].group ||
				 strcmp(cg_counters[i + 1].group, g) != 0);
		o += (size_t)snprintf(buf + o, n - o, "%s%s%s%s\"%s\":%lu%s", i ? "," : "",
				      first ? "\"" : "", first ? g : "", first ? "\":{" : "",
				      cg_counters[i].key, t[i], last ? "}" : "");
	}
	return o < n ? o : n - 1;
}

/* The stderr line's counts: the counters with words, then each group
 * summed with its members: "3 launches checked, 1 crossing (abort 0, ...)". */
static void counters_line(char *buf, size_t n, const unsigned long *t)
{
	size_t o = 0;
	buf[0] = 0;
	for (int i = 0; i < CG_NCOUNTERS && o < n; i++) {
		const char *g = cg_counters[i].group;
		if (!g) {
			if (cg_counters[i].one)
				o += (size_t)snprintf(
					buf + o, n - o, ", %lu %s", t[i],
					cg_plural(t[i], cg_counters[i].one, cg_counters[i].many));
			continue;
		}
		if (i && cg_counters[i - 1].group && strcmp(cg_counters[i - 1].group, g) == 0)
			continue;
		unsigned long sum = 0;
		int k = i;
		for (; k < CG_NCOUNTERS && cg_counters[k].group &&
		       strcmp(cg_counters[k].group, g) == 0;
		     k++)
			sum += t[k];
		/* the group's name is its plural; the singular drops the s */
		o += (size_t)snprintf(buf + o, n - o, ", %lu %.*s (", sum,
				      (int)(strlen(g) - (sum == 1)), g);
		for (int m = i; m < k && o < n; m++)
			o += (size_t)snprintf(buf + o, n - o, "%s%s %lu", m > i ? ", " : "",
					      cg_counters[m].key, t[m]);
		if (o < n)
			o += (size_t)snprintf(buf + o, n - o, ")");
	}
}

/* A process with nothing loaded, launched or refused says nothing at exit:
 * under `ctxguard -- python ...` every helper the job spawns (a compiler,
 * `which nvcc`) would otherwise print a line of zeros.  Its log still ends
 * with a summary record. */
void cg_report_summary(void)
{
	/* Once: before an abort, which skips the destructors, else at exit. */
	if (atomic_exchange(&summarised, 1))
		return;
	size_t mods, fns, experts;
	parts->counts(&mods, &fns, &experts);
	unsigned long t[CG_NCOUNTERS], any = mods + fns;
	for (int i = 0; i < CG_NCOUNTERS; i++) {
		t[i] = cg_slot_total(i);
		/* what the line counts; entry points handed out are no use */
		if (cg_counters[i].one || cg_counters[i].group)
			any += t[i];
	}
	char backstop[2048], backstop_json[2048];
	parts->backstop(backstop, sizeof backstop, backstop_json, sizeof backstop_json);
	char shadow[128], shadow_json[128];
	parts->shadow(shadow, sizeof shadow, shadow_json, sizeof shadow_json);
	char calls[4096], counts[1024];
	size_t n = 0;
	calls[0] = 0;
	for (int i = 0; i < CG_NVARIANTS && n < sizeof calls - 128; i++) {
		unsigned long c = cg_slot_total(CG_NCOUNTERS + i);
		if (c)
			n += (size_t)snprintf(calls + n, sizeof calls - n, "%s\"%s\":%lu",
					      n ? "," : "", cg_variants[i].symbol, c);
	}
	counters_json(counts, sizeof counts, t);
	cg_log_event("summary",
		     "\"modules\":%zu,\"functions\":%zu,\"experts\":%zu,%s,"
		     "\"tensor_map_address_word\":%d,\"calls\":{%s}%s%s",
		     mods, fns, experts, counts, parts->tmap_address_word(), calls, shadow_json,
		     backstop_json);
	unsigned long lost = t[CG_C_LOG_LOST];
	if (lost)
		cg_stderr("ctxguard: pid %ld: %lu log record%s could not be written to %s\n",
			  (long)getpid(), lost, lost == 1 ? "" : "s", cg_policy->log_path);
	cg_status_exit(t[CG_C_LAUNCHES]);
	if (!any)
		return;
	cg_metrics_write(t);
	if (cg_policy->quiet)
		return;
	counters_line(counts, sizeof counts, t);
	cg_stderr("ctxguard: pid %ld: %zu %s, %zu %s tracked (%zu %s)%s%s%s\n", (long)getpid(),
		  mods, cg_plural(mods, "module", "modules"), fns,
		  cg_plural(fns, "function", "functions"), experts,
		  cg_plural(experts, "expert", "experts"), counts, shadow, backstop);
}
