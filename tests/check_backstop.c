/* The CUPTI backstop on the fake driver and the fake CUPTI: launches past
 * the hooks are checked and counted, hooked ones are not checked twice,
 * and ctxguard gives CUPTI up to a profiler.  Each case runs
 * tests/progs/unhooked in a child process under the shim. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../policy/policy.h"
#include "suite.h"
#include "spawn.h"

#define EXPERT "_ZN9deep_gemm19sm90_bf16_gemm_implILj0EEEvPijjj14CUtensorMap_stS2_S2_"
static const char *const unhooked_apis[] = {"launch", "launch_ptsz", "launchex", "coop",
					    "multidev", "legacy"};
static const char *const api_names[] = {"cuLaunchKernel", "cuLaunchKernel_ptsz",
					"cuLaunchKernelEx", "cuLaunchCooperativeKernel",
					"cuLaunchCooperativeKernelMultiDevice", "cuLaunchGridAsync"};
#define N(a) ((int)(sizeof a / sizeof a[0]))

static struct run r;
static char cupti[4096];

static const char *fake_cupti(void)
{
	snprintf(cupti, sizeof cupti, "CTXGUARD_CUPTI=%s/fake/cupti/libcupti.so", build_dir());
	return cupti;
}

/* unhooked LAUNCH CASE WHEN under the shim, with the backstop on unless
 * backstop is NULL. */
static void prog(const char *mode, const char *backstop, const char *launch, const char *scase,
		 const char *when, const char *extra_env)
{
	char m[64], b[64];
	snprintf(m, sizeof m, "CTXGUARD_MODE=%s", mode);
	snprintf(b, sizeof b, "CTXGUARD_BACKSTOP%s%s", backstop ? "=" : "",
		 backstop ? backstop : "");
	const char *env[] = {m, b, fake_cupti(), extra_env ? extra_env : "CTXGUARD_LOG", NULL};
	const char *argv[] = {"tests/progs/unhooked", launch, scase, when, NULL};
	spawn(&r, env, argv);
}

#define SHOW "status %#x\nstdout:\n%s\nstderr:\n%s", r.status, r.out, r.err
#define SHOW2(a, b) "%s: %s\nstatus %#x\nstdout:\n%s\nstderr:\n%s", (a), (b), r.status, r.out, r.err

START_TEST(unhooked_launch_is_checked_and_counted)
{
	prog("warn", "on", unhooked_apis[_i], "cross", "none", NULL);
	ck_assert_msg(strstr(r.err, "seen by the CUPTI backstop"), SHOW);
	ck_assert_msg(strstr(r.err, "allowed (warn)"), SHOW);
	ck_assert_msg(count_of(r.err, "cross-context launch") == 1, SHOW);
	char want[512];
	snprintf(want, sizeof want, "backstop: unhooked 1 (%s of %s)", api_names[_i], EXPERT);
	ck_assert_msg(strstr(r.err, want), "no \"%s\" in:\n%s", want, r.err);
	/* warn lets it through: the driver itself refuses a foreign function. */
	ck_assert_msg(strstr(r.out, "launch: 400"), SHOW);
}
END_TEST

START_TEST(unhooked_same_context_is_counted_not_reported)
{
	prog("abort", "on", unhooked_apis[_i], "same", "none", NULL);
	ck_assert_msg(exited(&r, 0), SHOW);
	ck_assert_msg(strstr(r.err, " 0 crossings"), SHOW);
	ck_assert_msg(strstr(r.err, "backstop: unhooked 1"), SHOW);
	ck_assert_msg(strstr(r.err, "reached the driver without passing ctxguard's hooks"), SHOW);
}
END_TEST

/* One run and what it must show: the exit (a status, or -SIGABRT), how
 * many crossing reports (-1: any), strings stderr must and must not hold,
 * one stdout must hold. */
static const struct outcome {
	const char *what, *mode, *backstop, *launch, *scase, *when, *env;
	int exit, reports;
	const char *err[2], *not_err[2], *out;
} outcomes[] = {
	{"hooked launches are not checked twice", "warn", "on", "hooked", "cross", "none", NULL,
	 3, 1, {"backstop: unhooked 0"}, {"seen by the CUPTI backstop"}, NULL},
	{"a hooked launch in its own context is clean", "abort", "on", "hooked", "same", "none",
	 NULL, 0, 0, {" 0 crossings", "backstop: unhooked 0"}, {NULL}, NULL},
	{"error still refuses a hooked launch", "error", "on", "hooked", "cross", "none", NULL, 3,
	 1, {"refused (error"}, {"seen by the CUPTI backstop"}, NULL},
	{"off counts an unhooked launch without a report", "off", "on", "launch", "cross", "none",
	 NULL, 3, 0, {"backstop: unhooked 1"}, {NULL}, NULL},
	{"unhooked launches from 8 threads at once are all counted", "abort", "on", "threads",
	 "same", "none", NULL, 0, 0, {"backstop: unhooked 400 (cuLaunchKernel of " EXPERT ", "},
	 {NULL}, NULL},
	{"an unhooked graph launch is counted", "abort", "on", "graph", "same", "none", NULL, 0, 0,
	 {"backstop: unhooked 1 (cuGraphLaunch of <graph>)"}, {NULL}, NULL},
	{"without the backstop the launch goes unseen", "abort", NULL, "launch", "cross", "none",
	 NULL, 3, 0, {" 0 crossings"}, {"backstop"}, NULL},
	{"CUPTI absent: one line, then without", "abort", "on", "launch", "cross", "none",
	 "CTXGUARD_CUPTI=/nonexistent/libcupti.so", 3, 0,
	 {"ctxguard: backstop off: cannot load CTXGUARD_CUPTI=/nonexistent/libcupti.so",
	  "backstop off: unhooked 0"}, {NULL}, NULL},
	{"a subscriber already there: one line, then without", "abort", "on", "launch", "cross",
	 "before", NULL, 3, 0, {"ctxguard: backstop off: another tool", "backstop off: unhooked 0"},
	 {NULL}, "subscribe: 0\nlaunch: 400\nprofiler callbacks: 1\n"},
	/* A profile that starts later gets CUPTI: ctxguard steps aside. */
	{"a later profiler gets CUPTI", "abort", "on", "launch", "cross", "after", NULL, 3, 0,
	 {"ctxguard: backstop off: a profiler took CUPTI's callbacks", "backstop off: unhooked 0"},
	 {NULL}, "subscribe: 0\nlaunch: 400\nprofiler callbacks: 1\n"},
	{"a later profiler calling ctxguard's export gets CUPTI", "abort", "on", "launch", "cross",
	 "after_global", NULL, 3, 0,
	 {"ctxguard: backstop off: a profiler took CUPTI's callbacks", "backstop off: unhooked 0"},
	 {NULL}, "subscribe: 0\nlaunch: 400\nprofiler callbacks: 1\n"},
};

START_TEST(each_outcome)
{
	const struct outcome *o = &outcomes[_i];
	prog(o->mode, o->backstop, o->launch, o->scase, o->when, o->env);
	ck_assert_msg(o->exit < 0 ? killed_by(&r, -o->exit) : exited(&r, o->exit),
		      SHOW2(o->what, "exit"));
	if (o->reports >= 0)
		ck_assert_msg(count_of(r.err, "cross-context launch") == o->reports,
			      SHOW2(o->what, "crossing reports"));
	for (int i = 0; i < 2; i++) {
		ck_assert_msg(!o->err[i] || count_of(r.err, o->err[i]) == 1,
			      SHOW2(o->what, o->err[i]));
		ck_assert_msg(!o->not_err[i] || !strstr(r.err, o->not_err[i]),
			      SHOW2(o->what, o->not_err[i]));
	}
	ck_assert_msg(!o->out || strstr(r.out, o->out), SHOW2(o->what, o->out));
}
END_TEST

START_TEST(abort_stops_an_unhooked_launch)
{
	prog("abort", "on", "launch", "cross", "none", NULL);
	ck_assert_msg(killed_by(&r, SIGABRT), SHOW);
	ck_assert_msg(strcmp(first_line(r.err), "ctxguard: backstop: cuLaunchKernel of " EXPERT
				     " reached the driver without passing ctxguard's hooks; checked "
				     "at the API's entry and counted as unhooked (find the route: "
				     "ctxguard hooks dlsym, cuGetProcAddress and the exported "
				     "symbols)") == 0,
		      SHOW);
	ck_assert_msg(strstr(r.err, cg_deepgemm_message), SHOW);
	ck_assert_msg(strstr(r.err, "stopped (abort)"), SHOW);
	ck_assert_msg(!strstr(r.out, "launch:"), "the launch ran: " SHOW);
}
END_TEST

/* CUPTI cannot make a call fail: a refusal becomes abort, and says so. */
START_TEST(error_becomes_abort_on_an_unhooked_launch)
{
	prog("error", "on", unhooked_apis[_i], "cross", "none", NULL);
	ck_assert_msg(killed_by(&r, SIGABRT), SHOW);
	ck_assert_msg(strstr(r.err, "stopped (abort)"), SHOW);
	ck_assert_msg(strstr(r.err, "so the policy's refusal became abort"), SHOW);
	ck_assert_msg(!strstr(r.out, "launch:"), "the launch ran: " SHOW);
}
END_TEST

START_TEST(policy_file_turns_it_on)
{
	char path[] = "/tmp/ctxguard-backstop-XXXXXX";
	int fd = mkstemp(path);
	ck_assert(fd >= 0);
	ck_assert(write(fd, "backstop = on\n", 14) == 14);
	close(fd);
	char env[128];
	snprintf(env, sizeof env, "CTXGUARD_POLICY=%s", path);
	prog("abort", NULL, "launch", "same", "none", env);
	unlink(path);
	ck_assert_msg(strstr(r.err, "backstop: unhooked 1"), SHOW);
}
END_TEST

START_TEST(log_names_the_unhooked_launch)
{
	char path[] = "/tmp/ctxguard-backstop-log-XXXXXX";
	int fd = mkstemp(path);
	ck_assert(fd >= 0);
	close(fd);
	char env[128];
	snprintf(env, sizeof env, "CTXGUARD_LOG=%s", path);
	prog("warn", "on", "launchex", "cross", "none", env);
	const char *log = slurp(path);
	unlink(path);
	ck_assert_msg(log && strstr(log, "\"event\":\"unhooked\",") &&
			      strstr(log, "\"api\":\"cuLaunchKernelEx\",\"kernel\":\"" EXPERT "\""),
		      "log:\n%s", log ? log : "(none)");
	ck_assert_msg(strstr(log, "\"unhooked_policy_action\":\"warn\""), "log:\n%s", log);
	ck_assert_msg(strstr(log, "\"backstop\":{\"on\":true,\"off_reason\":null,\"unhooked\":1,"),
		      "log:\n%s", log);
}
END_TEST

/* A deprecated launch past the hooks passes what cuParamSetv wrote through
 * them: the backstop checks those operands as the hooks do. */
START_TEST(unhooked_deprecated_launch_checks_its_parameters)
{
	prog("warn", "on", "legacy_params", "same", "none", NULL);
	ck_assert_msg(strstr(r.err, "seen by the CUPTI backstop") &&
			      strstr(r.err, "ctxguard: operand: parameter 0 = ") &&
			      strstr(r.err, " on device 1 (pointer)"),
		      SHOW);
	ck_assert_msg(count_of(r.err, "cross-context launch") == 1, SHOW);
}
END_TEST

/* The ctxguard command: --audit makes --error-exitcode fire on unhooked
 * launches and on a backstop that could not watch. */
static void command(const char *opt, const char *scase, const char *cupti_env)
{
	const char *env[] = {preload_without_shim(), cupti_env ? cupti_env : fake_cupti(), NULL};
	char prog_path[4096];
	snprintf(prog_path, sizeof prog_path, "%s/tests/progs/unhooked", build_dir());
	const char *argv[] = {"ctxguard", opt, "--error-exitcode", "9", "--", prog_path,
			      "launch", scase, NULL};
	spawn(&r, env, argv);
}

START_TEST(audit_fails_on_unhooked)
{
	command("--audit", "same", NULL);
	ck_assert_msg(exited(&r, 9), SHOW);
	ck_assert_msg(strstr(r.err, "ctxguard: 1 process launched kernels that bypassed the hooks"),
		      SHOW);
	command("--backstop", "same", NULL);
	ck_assert_msg(exited(&r, 0), SHOW);
	ck_assert_msg(strstr(r.err, "backstop: unhooked 1"), SHOW);
}
END_TEST

START_TEST(audit_fails_without_cupti)
{
	command("--audit", "same", "CTXGUARD_CUPTI=/nonexistent/libcupti.so");
	ck_assert_msg(exited(&r, 9), SHOW);
	ck_assert_msg(strstr(r.err, "ran without the backstop: the audit is incomplete"), SHOW);
}
END_TEST

/* A libcupti that takes the subscription and never calls back (a stub)
 * fails the self-check: the backstop says it is off, and an audit fails. */
START_TEST(stub_cupti_fails_the_self_check)
{
	setenv("CG_FAKE_CUPTI_STUB", "1", 1);
	prog("warn", "on", "hooked", "same", "none", NULL);
	ck_assert_msg(exited(&r, 0) && strstr(r.err, "never called back, for any of the") &&
		      strstr(r.err, "backstop off: unhooked 0"), SHOW);
	command("--audit", "same", NULL);
	ck_assert_msg(exited(&r, 9), SHOW);
	ck_assert_msg(strstr(r.err, "ran without the backstop: the audit is incomplete"), SHOW);
	/* a working one passes it, silently */
	unsetenv("CG_FAKE_CUPTI_STUB");
	prog("warn", "on", "hooked", "same", "none", NULL);
	ck_assert_msg(exited(&r, 0) && !strstr(r.err, "backstop off"), SHOW);
}
END_TEST

/* A library preloaded ahead of ctxguard that defines cuLaunchKernel takes
 * the program's launches past the hooks: said at start-up, and the
 * backstop sees the launch.  The ctxguard command puts the library first
 * (after a sanitizer runtime), so the hooks see it again. */
START_TEST(preload_ahead_is_said_and_the_command_goes_first)
{
	char bypass[4200], preload[12800], prog_path[4096];
	snprintf(bypass, sizeof bypass, "%s/tests/libs/libbypass.so", build_dir());
	const char *san = preload_before_shim();
	snprintf(preload, sizeof preload, "LD_PRELOAD=%s%s%s:%s", san, *san ? ":" : "", bypass,
		 shim_library());
	const char *env[] = {preload, "CTXGUARD_BACKSTOP=on", fake_cupti(), NULL};
	const char *argv[] = {"tests/progs/scenario", "direct", "data", "launch", "cross", NULL};
	spawn(&r, env, argv);
	ck_assert_msg(killed_by(&r, SIGABRT) &&
		      strstr(r.err, "libbypass.so, ahead of ctxguard in the preload order, defines "
				    "cuLaunchKernel") &&
		      strstr(r.err, "seen by the CUPTI backstop"), SHOW);

	snprintf(preload, sizeof preload, "LD_PRELOAD=%s%s%s", san, *san ? ":" : "", bypass);
	snprintf(prog_path, sizeof prog_path, "%s/tests/progs/scenario", build_dir());
	const char *cmd_env[] = {preload, NULL};
	const char *cmd[] = {"ctxguard", "--", prog_path, "direct", "data", "launch", "cross", NULL};
	spawn(&r, cmd_env, cmd);
	ck_assert_msg(exited(&r, 128 + SIGABRT) && strstr(r.err, cg_deepgemm_message) &&
		      !strstr(r.err, "ahead of ctxguard"), SHOW);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("backstop");
	TCase *t = tcase_create("backstop");
	tcase_set_timeout(t, 60);
	tcase_add_loop_test(t, unhooked_launch_is_checked_and_counted, 0, N(unhooked_apis));
	tcase_add_loop_test(t, unhooked_same_context_is_counted_not_reported, 0, N(unhooked_apis));
	tcase_add_loop_test(t, each_outcome, 0, N(outcomes));
	tcase_add_test(t, abort_stops_an_unhooked_launch);
	tcase_add_loop_test(t, error_becomes_abort_on_an_unhooked_launch, 0, N(unhooked_apis));
	tcase_add_test(t, policy_file_turns_it_on);
	tcase_add_test(t, log_names_the_unhooked_launch);
	tcase_add_test(t, unhooked_deprecated_launch_checks_its_parameters);
	tcase_add_test(t, audit_fails_on_unhooked);
	tcase_add_test(t, audit_fails_without_cupti);
	tcase_add_test(t, stub_cupti_fails_the_self_check);
	tcase_add_test(t, preload_ahead_is_said_and_the_command_goes_first);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return run_suite(suite());
}
