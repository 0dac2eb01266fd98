/* The deployment examples do what docs/operations.md says: the Slurm TaskProlog
 * exports the preload and a rank-aware log path (and what it exports
 * works), and the Kubernetes manifests pass the Kubernetes schemas
 * (kubernetes-validate, offline; .ci/run installs it). */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "suite.h"
#include "spawn.h"

#define PROLOG "examples/slurm/taskprolog.sh"

static struct run r;
static char lib[4096], lib_env[4200];

/* The library this suite preloads. */
static void find_lib(void)
{
	ck_assert_ptr_nonnull(getenv("CTXGUARD_TEST_PRELOAD"));
	snprintf(lib, sizeof lib, "%s", shim_library());
	snprintf(lib_env, sizeof lib_env, "CTXGUARD_SLURM_LIB=%s", lib);
}

static void prolog(const char *const *env)
{
	const char *argv[] = {"/bin/sh", PROLOG, NULL};
	spawn(&r, env, argv);
	ck_assert_msg(exited(&r, 0), "status %#x\n%s%s", r.status, r.out, r.err);
}

START_TEST(prolog_exports_preload_and_rank_aware_log)
{
	find_lib();
	const char *env[] = {"LD_PRELOAD", lib_env, "SLURM_JOB_ID=42", "SLURM_PROCID=3",
			     "SLURM_STEP_GPUS=0,1", "SLURM_JOB_GPUS", "CTXGUARD_SLURM_LOGDIR", NULL};
	prolog(env);
	char want[8400];
	snprintf(want, sizeof want,
		 "export LD_PRELOAD=%s\nexport CTXGUARD_LOG=/var/log/ctxguard/%%h.42.%%r.%%p.jsonl\n",
		 lib);
	ck_assert_str_eq(r.out, want);
}
END_TEST

/* No GPUs, or no library on the node: the task is left as it is. */
START_TEST(prolog_leaves_other_tasks_alone)
{
	find_lib();
	const char *no_gpus[] = {"LD_PRELOAD", lib_env, "SLURM_JOB_ID=42", "SLURM_STEP_GPUS",
				 "SLURM_JOB_GPUS", NULL};
	prolog(no_gpus);
	ck_assert_str_eq(r.out, "");
	const char *no_lib[] = {"LD_PRELOAD", "CTXGUARD_SLURM_LIB=/nonexistent/libctxguard.so",
				"SLURM_JOB_GPUS=0", NULL};
	prolog(no_lib);
	ck_assert_str_eq(r.out, "");
}
END_TEST

/* Already preloaded (here: by the suite itself): not twice.  Then what the
 * prolog exports, applied as Slurm applies it, gives each rank its file. */
START_TEST(prolog_output_applied_logs_per_rank)
{
	find_lib();
	char dir[128], dir_env[160];
	snprintf(dir, sizeof dir, "/tmp/ctxguard-slurm-%d", (int)getpid());
	snprintf(dir_env, sizeof dir_env, "CTXGUARD_SLURM_LOGDIR=%s", dir);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	const char *env[] = {lib_env, dir_env, "SLURM_JOB_ID=42", "SLURM_PROCID=3",
			     "SLURM_JOB_GPUS=0", "SLURM_STEP_GPUS", "RANK", "CTXGUARD_MODE=warn",
			     "CTXGUARD_LOG", NULL};
	prolog(env);
	ck_assert_msg(!strstr(r.out, "LD_PRELOAD"), "preloaded twice:\n%s", r.out);
	char script[8192];
	snprintf(script, sizeof script,
		 "eval \"$(/bin/sh %s)\" && exec %s/tests/progs/scenario direct data launch cross "
		 "expert",
		 PROLOG, build_dir());
	const char *argv[] = {"/bin/sh", "-c", script, NULL};
	spawn(&r, env, argv);
	char host[256], want[512];
	gethostname(host, sizeof host);
	snprintf(want, sizeof want, "%s.42.3.", host);
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[1024] = "";
	while ((e = readdir(d)))
		if (strncmp(e->d_name, want, strlen(want)) == 0)
			snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
	closedir(d);
	char *text = *path ? slurp(path) : NULL;
	if (*path)
		unlink(path);
	rmdir(dir);
	ck_assert_msg(text, "no %s* in %s; stderr:\n%s", want, dir, r.err);
	ck_assert_msg(strstr(text, "{\"event\":\"crossing\"") &&
		      strstr(text, ",\"slurm_job_id\":\"42\",\"slurm_procid\":\"3\""), "%s", text);
}
END_TEST

/* A real validator against the Kubernetes schemas, strict (no unknown
 * fields); a broken copy must fail, so the check is not a no-op. */
START_TEST(kubernetes_manifests_validate)
{
	const char *env[] = {"LD_PRELOAD", NULL};
	const char *which[] = {"/bin/sh", "-c", "command -v kubernetes-validate", NULL};
	spawn(&r, env, which);
	ck_assert_msg(exited(&r, 0), "kubernetes-validate is not installed: "
		      "python3 -m pip install kubernetes-validate (tests/deps.sh, run by make test, tries)");
	const char *good[] = {"/bin/sh", "-c",
			      "kubernetes-validate --strict --quiet examples/kubernetes/*.yaml", NULL};
	spawn(&r, env, good);
	ck_assert_msg(exited(&r, 0), "status %#x\n%s%s", r.status, r.out, r.err);
	char bad[512];
	snprintf(bad, sizeof bad,
		 "f=/tmp/ctxguard-k8s-%d.yaml; sed 's/^      restartPolicy: Never/&\\n"
		 "      restartPolicee: Never/' examples/kubernetes/pod-initcontainer.yaml >$f && "
		 "grep -q restartPolicee $f && kubernetes-validate --strict --quiet $f; s=$?; "
		 "rm -f $f; exit $s",
		 (int)getpid());
	const char *broken[] = {"/bin/sh", "-c", bad, NULL};
	spawn(&r, env, broken);
	ck_assert_msg(exited(&r, 1) && strstr(r.out, "restartPolicee"),
		      "a bad field passed: %#x\n%s%s", r.status, r.out, r.err);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("examples");
	TCase *t = tcase_create("examples");
	tcase_set_timeout(t, 120);
	tcase_add_test(t, prolog_exports_preload_and_rank_aware_log);
	tcase_add_test(t, prolog_leaves_other_tasks_alone);
	tcase_add_test(t, prolog_output_applied_logs_per_rank);
	tcase_add_test(t, kubernetes_manifests_validate);
	suite_add_tcase(s, t);
	return run_suite(s);
}
