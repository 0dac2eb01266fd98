/* A preloaded library in every process is an attack surface: log files
 * that cannot be redirected by a planted symlink or file, and secure
 * execution (a setuid program run by another user) where no CTXGUARD_*
 * variable is honoured.  The setuid cases need root; without it they print
 * "skipped: ..." and pass. */
#include <check.h>
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "../policy/policy.h"
#include "suite.h"
#include "spawn.h"
#include "tmpdir.h"

#define NOBODY "65534"
#define SECRET "SECRET-7f3a-LINE"

static struct run r;

static void setup(void)
{
	tmpdir_make("check_secure");
	ck_assert_int_eq(chmod(tmpdir, 0755), 0);
}

static void make_dir(const char *path, mode_t mode)
{
	ck_assert_int_eq(mkdir(path, 0700), 0);
	ck_assert_int_eq(chmod(path, mode), 0);
}

/* A program that reaches the driver and exits cleanly, so the shim starts
 * and opens its log; "env" adds CTXGUARD_LOG and the like. */
static void run_with_log(const char *log, const char *policy)
{
	char log_env[300], policy_env[300];
	snprintf(log_env, sizeof log_env, "CTXGUARD_LOG=%s", log);
	snprintf(policy_env, sizeof policy_env, "CTXGUARD_POLICY=%s", policy ? policy : "");
	const char *env[] = {log_env, policy_env, NULL};
	const char *argv[] = {"tests/progs/scenario", "dlsym", "data", "launch", "same", NULL};
	spawn(&r, env, argv);
	ck_assert_msg(exited(&r, 0), "status %#x\n%s", r.status, r.err);
}

/* The one fresh name a log fell back to beside name (dir/stem.XXXXXX.ext),
 * its text in a static buffer; NULL when there is none. */
static const char *fallback_text(const char *dir, const char *stem, const char *ext)
{
	char pattern[512];
	glob_t g;
	snprintf(pattern, sizeof pattern, "%s/%s.??????%s", dir, stem, ext);
	if (glob(pattern, 0, NULL, &g) != 0)
		return NULL;
	const char *text = g.gl_pathc == 1 ? slurp(g.gl_pathv[0]) : NULL;
	globfree(&g);
	return text;
}

START_TEST(log_symlink_refused)
{
	write_to(in_tmpdir("target"), "precious\n", 0644);
	ck_assert_int_eq(symlink(in_tmpdir("target"), in_tmpdir("link")), 0);
	run_with_log(in_tmpdir("link"), NULL);
	ck_assert_msg(strstr(r.err, "cannot open log") && strstr(r.err, "symbolic link"),
		      "%s", r.err);
	ck_assert_str_eq(slurp(in_tmpdir("target")), "precious\n");
}
END_TEST

START_TEST(log_world_writable_dir_refused)
{
	make_dir(in_tmpdir("ww"), 0777);
	run_with_log(in_tmpdir("ww/cg.jsonl"), NULL);
	ck_assert_msg(strstr(r.err, "writable by everyone and not sticky"), "%s", r.err);
	ck_assert_int_ne(access(in_tmpdir("ww/cg.jsonl"), F_OK), 0);
}
END_TEST

/* In a sticky world-writable directory (/tmp) a new file is fine, and it
 * gets log_mode whatever the umask. */
START_TEST(log_sticky_new_file)
{
	struct stat st;
	make_dir(in_tmpdir("st"), 01777);
	run_with_log(in_tmpdir("st/cg.jsonl"), NULL);
	ck_assert_msg(!strstr(r.err, "cannot open log"), "%s", r.err);
	ck_assert_int_eq(stat(in_tmpdir("st/cg.jsonl"), &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	ck_assert_msg(strstr(slurp(in_tmpdir("st/cg.jsonl")), "\"event\":\"start\""), "no start record");

	write_to(in_tmpdir("group.conf"), "log_mode = 0640\n", 0644);
	mode_t old = umask(077);
	run_with_log(in_tmpdir("st/group.jsonl"), in_tmpdir("group.conf"));
	umask(old);
	ck_assert_int_eq(stat(in_tmpdir("st/group.jsonl"), &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0640);
}
END_TEST

/* A second link to a file of ours could be anyone's file. */
START_TEST(log_sticky_linked_refused)
{
	make_dir(in_tmpdir("st"), 01777);
	write_to(in_tmpdir("st/mine.jsonl"), "", 0600);
	ck_assert_int_eq(link(in_tmpdir("st/mine.jsonl"), in_tmpdir("st/other")), 0);
	run_with_log(in_tmpdir("st/mine.jsonl"), NULL);
	ck_assert_msg(strstr(r.err, "other links") && strstr(r.err, "instead"), "%s", r.err);
	ck_assert_str_eq(slurp(in_tmpdir("st/mine.jsonl")), "");
	ck_assert_ptr_nonnull(fallback_text(in_tmpdir("st"), "mine", ".jsonl"));
}
END_TEST

/* Where others may write, a name taken by a symlink, a directory or a FIFO
 * (planted for the next pids) turned logging off: a fresh name is used
 * instead, said on stderr and counted in the summary. */
START_TEST(log_planted_name_falls_back)
{
	const char *dir = in_tmpdir("st"), *log = in_tmpdir("st/cg.jsonl");
	make_dir(dir, 01733);
	write_to(in_tmpdir("target"), "precious\n", 0644);
	if (_i == 0)
		ck_assert_int_eq(symlink(in_tmpdir("target"), log), 0);
	else if (_i == 1)
		ck_assert_int_eq(mkdir(log, 0777), 0);
	else
		ck_assert_int_eq(mkfifo(log, 0666), 0);
	run_with_log(log, NULL);
	static const char *const what[] = {"symbolic link", "not a regular file",
					   "not a regular file"};
	ck_assert_msg(strstr(r.err, what[_i]) && strstr(r.err, "instead") &&
		      !strstr(r.err, "logging disabled"), "%s", r.err);
	const char *text = fallback_text(dir, "cg", ".jsonl");
	ck_assert_msg(text && strstr(text, "\"event\":\"start\"") &&
		      strstr(text, "\"event\":\"log_name_fallback\"") &&
		      strstr(text, "\"log_name_fallbacks\":1"), "%s", text ? text : "no fallback file");
	ck_assert_str_eq(slurp(in_tmpdir("target")), "precious\n");
}
END_TEST

/* A FIFO at the name, with a reader that never reads: opening it and
 * writing records blocked the launch for good.  Only a regular file is a
 * log, in any directory. */
START_TEST(log_fifo_refused)
{
	const char *log = in_tmpdir("cg.jsonl");
	ck_assert_int_eq(mkfifo(log, 0600), 0);
	int rd = open(log, O_RDONLY | O_NONBLOCK);
	int wr = open(log, O_WRONLY | O_NONBLOCK);
	ck_assert(rd >= 0 && wr >= 0);
	char fill[4096] = {0};
	while (write(wr, fill, sizeof fill) > 0)
		;
	run_with_log(log, NULL);
	close(wr);
	close(rd);
	ck_assert_msg(strstr(r.err, "cannot open log") && strstr(r.err, "not a regular file"),
		      "%s", r.err);
}
END_TEST

/* A symbolic link among the directories: root's log was created in the
 * link's target. */
START_TEST(log_directory_symlink_refused)
{
	make_dir(in_tmpdir("real"), 0755);
	ck_assert_int_eq(symlink(in_tmpdir("real"), in_tmpdir("link")), 0);
	run_with_log(in_tmpdir("link/cg.jsonl"), NULL);
	ck_assert_msg(strstr(r.err, "cannot open log") &&
		      strstr(r.err, "link is a symbolic link, which a log never follows"),
		      "%s", r.err);
	ck_assert_int_ne(access(in_tmpdir("real/cg.jsonl"), F_OK), 0);
}
END_TEST

static int have_root(const char *what)
{
	if (geteuid() == 0)
		return 1;
	printf("skipped: %s needs root (CI runs as root)\n", what);
	return 0;
}

START_TEST(log_sticky_foreign_refused)
{
	if (!have_root("a file of another user in a sticky directory"))
		return;
	make_dir(in_tmpdir("st"), 01777);
	write_to(in_tmpdir("st/theirs.jsonl"), "theirs\n", 0666);
	ck_assert_int_eq(chown(in_tmpdir("st/theirs.jsonl"), 65534, 65534), 0);
	run_with_log(in_tmpdir("st/theirs.jsonl"), NULL);
	ck_assert_msg(strstr(r.err, "belongs to another user") && strstr(r.err, "instead"), "%s",
		      r.err);
	ck_assert_str_eq(slurp(in_tmpdir("st/theirs.jsonl")), "theirs\n");
	ck_assert_ptr_nonnull(fallback_text(in_tmpdir("st"), "theirs", ".jsonl"));
}
END_TEST

/* Copies build/<from> to tmpdir/bin/<name>; setuid root when setuid. */
static const char *install_copy(const char *from, const char *name, int setuid)
{
	static char dst[4][300];
	static int slot;
	char *d = dst[slot++ % 4], cmd[1024];
	mkdir(in_tmpdir("bin"), 0755);
	snprintf(d, 300, "%s/bin/%s", tmpdir, name);
	snprintf(cmd, sizeof cmd, "cp '%s/%s' '%s'", build_dir(), from, d);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(chown(d, 0, 0), 0);
	ck_assert_int_eq(chmod(d, setuid ? 04755 : 0755), 0);
	return d;
}

/* Root, setpriv and a file system that honours setuid, or a skip line. */
static const char *setpriv_or_skip(void)
{
	static const char *const paths[] = {"/usr/bin/setpriv", "/bin/setpriv"};
	struct statvfs vfs;
	if (!have_root("a setuid program run by another user"))
		return NULL;
	if (statvfs(tmpdir, &vfs) == 0 && (vfs.f_flag & ST_NOSUID)) {
		printf("skipped: %s is mounted nosuid\n", tmpdir);
		return NULL;
	}
	for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
		if (access(paths[i], X_OK) == 0)
			return paths[i];
	printf("skipped: no setpriv (util-linux) to run a program as another user\n");
	return NULL;
}

/* Hostile values for every variable; the secret file is root's, and a
 * policy read from it would quote its lines in error messages. */
static void hostile_env(const char **env, char bufs[][300])
{
	write_to(in_tmpdir("secret.conf"), "mode = off\n" SECRET "\n", 0600);
	write_to(in_tmpdir("status"), "", 0644);
	snprintf(bufs[0], 300, "CTXGUARD_POLICY=%s", in_tmpdir("secret.conf"));
	snprintf(bufs[1], 300, "CTXGUARD_LOG=%s", in_tmpdir("hostile.log"));
	snprintf(bufs[2], 300, "CTXGUARD_STATUS=%s", in_tmpdir("status"));
	const char *fixed[] = {"CTXGUARD_MODE=off", "CTXGUARD_SCOPE=all", "CTXGUARD_OPERANDS=off",
			       "CTXGUARD_LIBCUDA=/nonexistent/libcuda.so.1", "CTXGUARD_QUIET=1",
			       /* the backstop's library, when a system policy turns it on */
			       "CTXGUARD_CUPTI=/nonexistent/planted/libcupti.so",
			       "CUDA_HOME=/nonexistent/planted",
			       /* LeakSanitizer cannot trace a setuid process. */
			       "ASAN_OPTIONS=detect_leaks=0", "LD_PRELOAD", NULL};
	int n = 0;
	for (int i = 0; i < 3; i++)
		env[n++] = bufs[i];
	for (int i = 0; fixed[i]; i++)
		env[n++] = fixed[i];
	env[n] = NULL;
}

static void assert_nothing_honoured(void)
{
	ck_assert_msg(!strstr(r.out, SECRET) && !strstr(r.err, SECRET), "secret quoted:\n%s%s",
		      r.out, r.err);
	ck_assert_msg(access(in_tmpdir("hostile.log"), F_OK) != 0, "CTXGUARD_LOG was opened");
	ck_assert_str_eq(slurp(in_tmpdir("status")), "");
}

/* The policy a setuid program loads: the system file's, nothing else. */
START_TEST(secure_policy_setuid)
{
	const char *setpriv = setpriv_or_skip();
	if (!setpriv)
		return;
	const char *prog = install_copy("tests/progs/showpolicy", "showpolicy", 1);
	write_to(in_tmpdir("system.conf"), "mode = warn\nlog = none\n", 0644);
	const char *env[16];
	char bufs[3][300];
	hostile_env(env, bufs);
	const char *argv[] = {setpriv, "--reuid=" NOBODY, "--regid=" NOBODY, "--clear-groups",
			      prog, in_tmpdir("system.conf"), NULL};
	spawn(&r, env, argv);
	ck_assert_msg(exited(&r, 0), "status %#x\n%s", r.status, r.err);
	ck_assert_msg(strstr(r.out, "secure on\n"), "AT_SECURE not set:\n%s", r.out);
	ck_assert_msg(strstr(r.out, "mode warn\nscope experts\noperands on\nlog none\n") &&
		      !strstr(r.out, "\nerror ") && !strstr(r.out, "\nrefused "),
		      "%s", r.out);
	assert_nothing_honoured();
}
END_TEST

/* tests/progs/secure installed setuid, with the shim copied from the build
 * directory's shim_from, run as nobody in the hostile environment. */
static void run_secure_prog(const char *setpriv, const char *shim_from)
{
	const char *prog = install_copy("tests/progs/secure", "secure", 1);
	const char *shim = install_copy(shim_from, "libctxguard.so", 0);
	const char *cuda = install_copy("fake/libcuda.so.1", "libcuda.so.1", 0);
	const char *env[16];
	char bufs[3][300];
	hostile_env(env, bufs);
	const char *argv[] = {setpriv, "--reuid=" NOBODY, "--regid=" NOBODY, "--clear-groups",
			      prog, cuda, shim, NULL};
	spawn(&r, env, argv);
}

/* The shim in a setuid CUDA program: the crossing is stopped as the
 * built-in policy says, whatever the variables ask. */
START_TEST(secure_shim_setuid)
{
	const char *setpriv = setpriv_or_skip();
	if (!setpriv)
		return;
	/* The suite's copy: no system policy of this machine's applies. */
	run_secure_prog(setpriv, "tests/suite/libctxguard.so");
	ck_assert_msg(strstr(r.out, "at_secure 1\n"), "AT_SECURE not set:\n%s%s", r.out, r.err);
	/* scope all not honoured: the plain kernel's crossing went by */
	ck_assert_msg(strstr(r.out, "plain: "), "%s\n%s", r.out, r.err);
	/* mode off, operands off, the policy file, the driver name: none */
	ck_assert_msg(killed_by(&r, SIGABRT) && strstr(r.err, cg_deepgemm_message),
		      "status %#x\n%s\n%s", r.status, r.out, r.err);
	ck_assert_msg(strstr(r.err, "secure execution") && strstr(r.err, "CTXGUARD_* variable"),
		      "%s", r.err);
	assert_nothing_honoured();
}
END_TEST

/* The same program with the suite's library copy whose system policy
 * (BUILD/tests/etc, tests/locked.mk) turns the backstop on: the caller's
 * CTXGUARD_CUPTI and CUDA_HOME do not choose the library it loads. */
START_TEST(secure_backstop_ignores_cupti_variables)
{
	const char *setpriv = setpriv_or_skip();
	if (!setpriv)
		return;
	char etc[4096], cmd[4200];
	snprintf(etc, sizeof etc, "%s/tests/etc/ctxguard", build_dir());
	snprintf(cmd, sizeof cmd, "mkdir -p '%s'", etc);
	ck_assert_int_eq(system(cmd), 0);
	strcat(etc, "/policy.conf");
	write_to(etc, "backstop = on\n", 0644);
	run_secure_prog(setpriv, "tests/locked/libctxguard.so");
	unlink(etc);
	ck_assert_msg(strstr(r.out, "at_secure 1\n"), "AT_SECURE not set:\n%s%s", r.out, r.err);
	ck_assert_msg(strstr(r.err, "backstop"), "the backstop did not start:\n%s", r.err);
	ck_assert_msg(!strstr(r.err, "/nonexistent/planted"), "a caller's CUPTI path was used:\n%s",
		      r.err);
	assert_nothing_honoured();
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("secure");
	TCase *tc = tcase_create("log_file");
	tcase_add_checked_fixture(tc, setup, tmpdir_remove);
	tcase_add_test(tc, log_symlink_refused);
	tcase_add_test(tc, log_world_writable_dir_refused);
	tcase_add_test(tc, log_sticky_new_file);
	tcase_add_test(tc, log_sticky_linked_refused);
	tcase_add_test(tc, log_sticky_foreign_refused);
	tcase_add_loop_test(tc, log_planted_name_falls_back, 0, 3);
	tcase_add_test(tc, log_fifo_refused);
	tcase_add_test(tc, log_directory_symlink_refused);
	suite_add_tcase(s, tc);
	tc = tcase_create("setuid");
	tcase_add_checked_fixture(tc, setup, tmpdir_remove);
	tcase_add_test(tc, secure_policy_setuid);
	tcase_add_test(tc, secure_shim_setuid);
	tcase_add_test(tc, secure_backstop_ignores_cupti_variables);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(suite());
}
