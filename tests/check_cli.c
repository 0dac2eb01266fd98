/* The ctxguard command's flags: --opt=value beside --opt value, a flag for
 * every setting (checked by the policy's own parsers), outputs no process
 * could write refused before the program runs, --log-file's text copy,
 * --print-limit, the closing line counting the whole program tree, and
 * `ctxguard report` over the logs. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../policy/policy.h"
#include "suite.h"
#include "spawn.h"

static struct run r;
static char prog[4096];

static void command(const char *const *argv)
{
	const char *env[] = {preload_without_shim(), "CTXGUARD_QUIET", NULL};
	snprintf(prog, sizeof prog, "%s/tests/progs/scenario", build_dir());
	spawn(&r, env, argv);
}

/* A command that runs another program (ctxguard report: python3; the
 * completion: bash): with nothing preloaded, so that a sanitizer build's
 * runtime neither reports the interpreter's own leaks nor loads into it. */
static void unpreloaded(const char *const *argv)
{
	const char *env[] = {"LD_PRELOAD", "CTXGUARD_QUIET", NULL};
	spawn(&r, env, argv);
}

START_TEST(equals_form_is_the_spaced_form)
{
	snprintf(prog, sizeof prog, "%s/tests/progs/scenario", build_dir());
	const char *eq[] = {"ctxguard", "--mode=error", "--error-exitcode=86", "--", prog, "dlsym",
			    "data", "launch", "cross", NULL};
	command(eq);
	ck_assert_msg(exited(&r, 86), "status %#x %s", r.status, r.err);
	ck_assert_msg(strstr(r.out, cg_deepgemm_message), "%s", r.out);
	const char *empty[] = {"ctxguard", "--mode=", "--", "true", NULL};
	command(empty);
	ck_assert_msg(exited(&r, 2) && strstr(r.err, "--mode : expected abort|error"), "%s", r.err);
	const char *novalue[] = {"ctxguard", "--quiet=yes", "--", "true", NULL};
	command(novalue);
	ck_assert_msg(exited(&r, 2) && strstr(r.err, "--quiet takes no value"), "%s", r.err);
}
END_TEST

/* Each flag sets its variable for the whole tree; a bad value is refused
 * with what the policy expects, before anything runs. */
START_TEST(every_setting_has_a_flag)
{
	const char *argv[] = {"ctxguard", "--error-code", "CUDA_ERROR_INVALID_VALUE",
			      "--redirect=rehome", "--redirect-fallback", "error", "--print-limit=3",
			      "--libcuda", "tests/../fake/libcuda.so.1", "--",
			      "/bin/sh", "-c",
			      "echo \"$CTXGUARD_ERROR_CODE $CTXGUARD_REDIRECT "
			      "$CTXGUARD_REDIRECT_FALLBACK $CTXGUARD_PRINT_LIMIT $CTXGUARD_LIBCUDA\"",
			      NULL};
	char lib[4096];
	snprintf(lib, sizeof lib, "%s/fake/libcuda.so.1", build_dir());
	argv[8] = lib;
	command(argv);
	char want[8192];
	char *real = realpath(lib, NULL);
	snprintf(want, sizeof want, "CUDA_ERROR_INVALID_VALUE rehome error 3 %s\n", real);
	free(real);
	ck_assert_msg(exited(&r, 0) && strcmp(r.out, want) == 0, "%s%s", r.out, r.err);

	static const char *const bad[][2] = {
		{"--error-code", "CUDA_ERROR_NO_SUCH_THING"}, {"--redirect", "elsewhere"},
		{"--redirect-fallback", "warn"}, {"--print-limit", "-1"},
		{"--libcuda", "/nonexistent/libcuda.so.1"}, {"--scope", "some"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		const char *b[] = {"ctxguard", bad[i][0], bad[i][1], "--", "/bin/sh", "-c",
				   "echo ran", NULL};
		command(b);
		ck_assert_msg(exited(&r, 2) && strstr(r.err, bad[i][0]) && !strstr(r.out, "ran"),
			      "%s %s: status %#x %s", bad[i][0], bad[i][1], r.status, r.err);
	}
}
END_TEST

/* An unwritable --log once ran the program with logging disabled, exit 0. */
START_TEST(unwritable_outputs_fail_at_once)
{
	static const char *const flags[] = {"--log", "--log-file", "--metrics"};
	for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
		const char *argv[] = {"ctxguard", flags[i], "/nonexistent/dir/out", "--",
				      "/bin/sh", "-c", "echo ran", NULL};
		command(argv);
		ck_assert_msg(exited(&r, 2) && strstr(r.err, "cannot create files in /nonexistent/dir")
			      && !strstr(r.out, "ran"), "%s: status %#x %s", flags[i], r.status, r.err);
	}
	/* a directory only known per process is left to the library */
	const char *perhost[] = {"ctxguard", "--log", "/tmp/%h-ctxguard-check-cli/x", "--",
				 "/bin/sh", "-c", "echo ran", NULL};
	command(perhost);
	ck_assert_msg(exited(&r, 0) && strstr(r.out, "ran"), "%s", r.err);
}
END_TEST

/* compute-sanitizer's closing line, also when nothing used CUDA.  Under
 * warn the crossing launch reaches the fake driver, which fails it (3). */
START_TEST(closing_line_counts_the_tree)
{
	const char *none[] = {"ctxguard", "--", "/bin/sh", "-c", "/bin/true; /bin/true", NULL};
	command(none);
	ck_assert_msg(exited(&r, 0), "%s", r.err);
	ck_assert_msg(strstr(r.err, "ctxguard: 2 processes, 0 launches checked, 0 crossings\n"),
		      "%s", r.err);
	const char *warn[] = {"ctxguard", "--mode", "warn", "--", prog, "dlsym", "data", "launch",
			      "cross", NULL};
	command(warn);
	ck_assert_msg(exited(&r, 3), "%s", r.err); /* the fake driver fails the launch */
	ck_assert_msg(strstr(r.err, "ctxguard: 1 process, 1 launch checked, 1 crossing\n"), "%s",
		      r.err);
	const char *quiet[] = {"ctxguard", "--quiet", "--", "/bin/true", NULL};
	command(quiet);
	ck_assert_msg(exited(&r, 0) && !strstr(r.err, "process"), "%s", r.err);
}
END_TEST

/* --log-file: what ctxguard said on stderr, the command's lines included. */
START_TEST(log_file_copies_stderr)
{
	char path[128];
	snprintf(path, sizeof path, "/tmp/ctxguard-check-cli-%d.txt", (int)getpid());
	unlink(path);
	const char *argv[] = {"ctxguard", "--mode", "warn", "--log-file", path, "--", prog, "dlsym",
			      "data", "launch", "cross", NULL};
	command(argv);
	ck_assert_msg(exited(&r, 3), "%s", r.err);
	char *text = slurp(path);
	unlink(path);
	ck_assert_msg(text && strstr(text, cg_deepgemm_message) &&
		      strstr(text, "ctxguard: 1 crossing reported") &&
		      strstr(text, "ctxguard: 1 process, 1 launch checked, 1 crossing\n"),
		      "%s", text ? text : "(no file)");
	ck_assert_msg(strstr(r.err, cg_deepgemm_message), "%s", r.err);
}
END_TEST

/* --print-limit 0: crossings counted, none printed or logged in full. */
START_TEST(print_limit_zero_prints_none)
{
	const char *argv[] = {"ctxguard", "--mode", "warn", "--print-limit", "0", "--", prog,
			      "dlsym", "data", "launch", "cross", NULL};
	command(argv);
	ck_assert_msg(exited(&r, 3), "%s", r.err);
	ck_assert_msg(!strstr(r.err, cg_deepgemm_message) && strstr(r.err, "1 crossing"), "%s",
		      r.err);
}
END_TEST

/* A configuration problem is a record too (tests/log_schema.py checks it
 * against docs/log-schema.json, as every record the suite reads). */
START_TEST(config_error_is_logged)
{
	char path[128], log[160];
	snprintf(path, sizeof path, "/tmp/ctxguard-check-cli-%d.jsonl", (int)getpid());
	snprintf(log, sizeof log, "CTXGUARD_LOG=%s", path);
	unlink(path);
	const char *env[] = {log, "CTXGUARD_SCOPE=some", NULL};
	const char *argv[] = {"tests/progs/scenario", "dlsym", "data", "launch", "same", NULL};
	spawn(&r, env, argv);
	ck_assert_msg(exited(&r, 0), "%s", r.err);
	char *text = slurp(path);
	unlink(path);
	ck_assert_msg(text && strstr(text, "{\"event\":\"config_error\"") &&
		      strstr(text, "CTXGUARD_SCOPE=some"), "%s", text ? text : "(no log)");
}
END_TEST

/* ctxguard report over the logs of two ranks' fake-driver runs. */
START_TEST(report_summarises_logs)
{
	char logs[2][128], rank[2][16];
	static const char *const mode[] = {"warn", "error"};
	for (int i = 0; i < 2; i++) {
		snprintf(logs[i], sizeof logs[i], "/tmp/ctxguard-check-cli-%d.r%d.jsonl", (int)getpid(), i);
		snprintf(rank[i], sizeof rank[i], "RANK=%d", i);
		unlink(logs[i]);
		const char *env[] = {preload_without_shim(), rank[i], NULL};
		const char *argv[] = {"ctxguard", "--mode", mode[i], "--log", logs[i], "--", prog,
				      "dlsym", "data", "launch", "cross", NULL};
		snprintf(prog, sizeof prog, "%s/tests/progs/scenario", build_dir());
		spawn(&r, env, argv);
		ck_assert_msg(exited(&r, 3), "status %#x %s", r.status, r.err);
	}
	const char *json[] = {"ctxguard", "report", "--json", logs[0], logs[1], NULL};
	unpreloaded(json);
	ck_assert_msg(exited(&r, 0), "status %#x %s", r.status, r.err);
	static const char *const want[] = {
		"\"files\": 2,", "\"processes\": 2,", "\"crossings_logged\": 2,",
		"\"kernel\": \"void deep_gemm::sm90_bf16_gemm_impl<0u>(", "\"host\": \"",
		"\"rank\": \"0\",", "\"rank\": \"1\",", "\"warn\": 1,", "\"error\": 1,",
		"\"first\": \"20", "\"last\": \"20",
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
		ck_assert_msg(strstr(r.out, want[i]), "no %s in\n%s", want[i], r.out);
	const char *text[] = {"ctxguard", "report", logs[0], logs[1], "/nonexistent.jsonl", NULL};
	unpreloaded(text);
	for (int i = 0; i < 2; i++) {
		slurp(logs[i]); /* the records, for the schema check */
		unlink(logs[i]);
	}
	/* an unreadable file is said, and the exit status says it too */
	ck_assert_msg(exited(&r, 1), "status %#x %s", r.status, r.err);
	ck_assert_msg(strstr(r.out, "ctxguard report: 2 files, 6 records, 2 processes started, "
				    "2 crossings logged") && strstr(r.out, "By kernel:") &&
		      strstr(r.out, "By host:") && strstr(r.out, "By rank:") &&
		      strstr(r.out, "unreadable: /nonexistent.jsonl"), "%s", r.out);
}
END_TEST

/* share/ctxguard.bash completes from the command's own --help. */
START_TEST(bash_completion_reads_the_help)
{
	static const char *const cases[][2] = {
		{"--print-l", "--print-limit"}, {"--mode wa", "warn"},
		{"--redirect-fallback = er", "error"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char script[8192];
		snprintf(script, sizeof script,
			 ". share/ctxguard.bash; COMP_WORDS=(%s/ctxguard %s); "
			 "COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _ctxguard; echo \"${COMPREPLY[*]}\"",
			 build_dir(), cases[i][0]);
		const char *argv[] = {"/bin/bash", "-c", script, NULL};
		unpreloaded(argv);
		char want[64];
		snprintf(want, sizeof want, "%s\n", cases[i][1]);
		ck_assert_msg(exited(&r, 0) && strcmp(r.out, want) == 0, "%s: '%s' %s", cases[i][0],
			      r.out, r.err);
	}
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("cli");
	TCase *t = tcase_create("flags");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, equals_form_is_the_spaced_form);
	tcase_add_test(t, every_setting_has_a_flag);
	tcase_add_test(t, unwritable_outputs_fail_at_once);
	tcase_add_test(t, closing_line_counts_the_tree);
	tcase_add_test(t, log_file_copies_stderr);
	tcase_add_test(t, print_limit_zero_prints_none);
	tcase_add_test(t, bash_completion_reads_the_help);
	tcase_add_test(t, config_error_is_logged);
	tcase_add_test(t, report_summarises_logs);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return run_suite(suite());
}
