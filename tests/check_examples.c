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
			     "SLURM_STEP_GPUS=0,1", "SLURM_JOB_GPUS", "CTXGUARD_SLURM_LOGDIR",
			     "CTXGUARD_LOG", NULL};
	prolog(env);
	char want[8400];
	snprintf(want, sizeof want,
		 "export LD_PRELOAD=%s\nexport CTXGUARD_LOG=/var/log/ctxguard/%%h.42.%%r.%%p.jsonl\n",
		 lib);
	ck_assert_str_eq(r.out, want);
}
END_TEST

/* No GPUs: the task is left as it is.  No library on the node: left as
 * it is too, but said, in the task's output and slurmd's log. */
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
	ck_assert_msg(strncmp(r.out, "print ctxguard: warning: /nonexistent/libctxguard.so is not "
				     "installed on ", 62) == 0 && !strstr(r.out, "export"),
		      "%s", r.out);
	ck_assert_msg(strstr(r.err, "this task runs without ctxguard"), "%s", r.err);
}
END_TEST

/* As the ctxguard command: after a preloaded sanitizer runtime, ahead of
 * any other library.  A user's CTXGUARD_LOG stays, unless the system policy
 * is locked. */
START_TEST(prolog_keeps_preload_order_and_user_log)
{
	find_lib();
	char system[128], system_env[160];
	snprintf(system, sizeof system, "/tmp/ctxguard-slurm-%d.conf", (int)getpid());
	snprintf(system_env, sizeof system_env, "CTXGUARD_SLURM_POLICY=%s", system);
	const char *env[] = {"LD_PRELOAD=/opt/hook.so /usr/lib/libasan.so.8", lib_env, system_env,
			     "SLURM_JOB_ID=42", "SLURM_JOB_GPUS=0",
			     "CTXGUARD_LOG=/home/u/mine.jsonl", "CTXGUARD_SLURM_LOGDIR", NULL};
	prolog(env);
	char want[8400];
	snprintf(want, sizeof want, "export LD_PRELOAD=/usr/lib/libasan.so.8:%s:/opt/hook.so\n",
		 lib);
	ck_assert_str_eq(r.out, want);
	FILE *f = fopen(system, "w");
	ck_assert_ptr_nonnull(f);
	fputs("mode = abort\n  Lock = on\n", f);
	fclose(f);
	prolog(env);
	unlink(system);
	ck_assert_msg(strstr(r.out, "export CTXGUARD_LOG=/var/log/ctxguard/%h.42.%r.%p.jsonl\n"),
		      "%s", r.out);
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
 * fields), each manifest at the oldest version it claims (a kind the
 * version lacks is only a warning to the validator: none allowed); the
 * MutatingAdmissionPolicy is unknown one version earlier, so the claim is
 * the truth.  A broken copy must fail, so the check is not a no-op. */
START_TEST(kubernetes_manifests_validate)
{
	const char *env[] = {"LD_PRELOAD", NULL};
	const char *which[] = {"/bin/sh", "-c", "command -v kubernetes-validate", NULL};
	spawn(&r, env, which);
	ck_assert_msg(exited(&r, 0), "kubernetes-validate is not installed: "
		      "python3 -m pip install kubernetes-validate (tests/deps.sh, run by make test, tries)");
	static const char *const claims[][2] = {
		{"1.36.0", "examples/kubernetes/node-install.yaml"},
		{"1.25.0", "examples/kubernetes/node-preload.yaml"},
		{"1.25.0", "examples/kubernetes/pod-initcontainer.yaml"},
	};
	for (size_t i = 0; i < sizeof claims / sizeof claims[0]; i++) {
		char cmd[512];
		snprintf(cmd, sizeof cmd, "kubernetes-validate --strict --quiet -k %s %s 2>&1",
			 claims[i][0], claims[i][1]);
		const char *good[] = {"/bin/sh", "-c", cmd, NULL};
		spawn(&r, env, good);
		ck_assert_msg(exited(&r, 0) && !strstr(r.out, "WARN"), "%s at %s: status %#x\n%s%s",
			      claims[i][1], claims[i][0], r.status, r.out, r.err);
	}
	const char *older[] = {"/bin/sh", "-c",
			       "kubernetes-validate --strict --quiet -k 1.35.0 "
			       "examples/kubernetes/node-install.yaml 2>&1", NULL};
	spawn(&r, env, older);
	ck_assert_msg(strstr(r.out, "Couldn't find schema for kind MutatingAdmissionPolicy"),
		      "1.35 knows MutatingAdmissionPolicy v1: %s", r.out);
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
	tcase_add_test(t, prolog_keeps_preload_order_and_user_log);
	tcase_add_test(t, prolog_output_applied_logs_per_rank);
	tcase_add_test(t, kubernetes_manifests_validate);
	suite_add_tcase(s, t);
	return run_suite(s);
}
