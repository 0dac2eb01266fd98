/* `metrics = PATH`: the summary's counters at exit in the Prometheus text
 * format, for node_exporter's textfile collector.  Written to a temporary
 * file and renamed, so the collector never reads half a file; only over a
 * regular file or a new name. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report.h"

/* ctxguard_launches_total{host="..",rank=".."} 3; a group's members are
 * one metric labelled by action: ctxguard_crossings_total{...,action="warn"}. */
void cg_metrics_write(const unsigned long *t)
{
	const char *tpl = cg_policy->metrics_path;
	char path[4096], tmp[4200];
	if (!tpl || !*tpl)
		return;
	if (!cg_identity_expand(tpl, path, sizeof path)) {
		cg_stderr("ctxguard: metrics path %s is too long once expanded\n", tpl);
		return;
	}
	/* The rename replaces whatever the name holds: as root, a device node
	 * (/dev/null) or a link named by mistake would be gone. */
	struct stat st;
	if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		cg_stderr("ctxguard: metrics %s is not a regular file (left as it is; metrics not"
			  " written): name a regular file or a new one\n", path);
		return;
	}
	snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
	FILE *f = fopen(tmp, "wxe");
	if (!f) {
		cg_stderr("ctxguard: cannot write metrics %s: %s\n", tmp, strerror(errno));
		return;
	}
	const char *labels = cg_identity_labels();
	for (int i = 0; i < CG_NCOUNTERS; i++) {
		const char *g = cg_counters[i].group;
		const char *name = g ? g : cg_counters[i].key;
		if (!g || i == 0 || !cg_counters[i - 1].group || strcmp(cg_counters[i - 1].group, g) != 0)
			fprintf(f, "# HELP ctxguard_%s_total %s.\n# TYPE ctxguard_%s_total counter\n",
				name, cg_counters[i].help, name);
		fprintf(f, "ctxguard_%s_total{%s%s%s%s} %lu\n", name, labels, g ? ",action=\"" : "",
			g ? cg_counters[i].key : "", g ? "\"" : "", t[i]);
	}
	int bad = ferror(f);
	if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
		cg_stderr("ctxguard: cannot write metrics %s: %s\n", path, strerror(errno));
		unlink(tmp);
	}
}
