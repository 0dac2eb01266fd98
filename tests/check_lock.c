/* The locked system policy: each locked setting x each way a user may try
 * to loosen it (variable, CTXGUARD_POLICY file, the ctxguard command's
 * flag) x system policy locked or not.  Locked, the system value stays and
 * one line names the setting, the value asked and the system file;
 * unlocked, the precedence is what it always was (the user wins). */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "policy_dump.h"
#include "suite.h"
#include "spawn.h"
#include "tmpdir.h"

static char sys_locked[128], sys_open[128], user_file[128];

#define SYSTEM_SETTINGS \
	"mode = error\n" \
	"scope = all\n" \
	"operands = on\n" \
	"log = /var/log/ctxguard/%p.jsonl\n" \
	"log_mode = 0640\n" \
	"metrics = /var/lib/prometheus/ctxguard-%p.prom\n" \
	"[rule sys]\n" \
	"kernel = sys_*\n"

static void setup(void)
{
	tmpdir_make("check_lock");
	snprintf(sys_locked, sizeof sys_locked, "%s", in_tmpdir("locked.conf"));
	snprintf(sys_open, sizeof sys_open, "%s", in_tmpdir("open.conf"));
	snprintf(user_file, sizeof user_file, "%s", in_tmpdir("user.conf"));
	write_to(sys_locked, "lock = on\n" SYSTEM_SETTINGS, 0);
	write_to(sys_open, SYSTEM_SETTINGS, 0);
}

/* One attempt to loosen a setting, by every way there is for it. */
static const struct loosen {
	const char *setting;
	const char *env;           /* NULL: no variable for it */
	const char *file;          /* the user's policy file */
	const char *flag, *value;  /* the ctxguard command; NULL: no flag */
	const char *asked;         /* the value as the refusal quotes it */
	const char *loose;         /* the dump's line when the user wins */
	const char *floor;         /* the dump's line when the lock holds */
} cases[] = {
	{"mode", "CTXGUARD_MODE=off", "mode = off\n", "--mode", "off", "off",
	 "mode off\n", "mode error\n"},
	{"mode", "CTXGUARD_MODE=warn", "mode = warn\n", "--mode", "warn", "warn",
	 "mode warn\n", "mode error\n"},
	{"scope", "CTXGUARD_SCOPE=experts", "scope = experts\n", "--scope", "experts",
	 "experts", "scope experts\n", "scope all\n"},
	{"operands", "CTXGUARD_OPERANDS=off", "operands = off\n", "--operands", "off",
	 "off", "operands off\n", "operands on\n"},
	{"log", "CTXGUARD_LOG=/tmp/mine.jsonl", "log = /tmp/mine.jsonl\n", "--log",
	 "/tmp/mine.jsonl", "/tmp/mine.jsonl", "log /tmp/mine.jsonl\n",
	 "log /var/log/ctxguard/%p.jsonl\n"},
	{"log", "CTXGUARD_LOG=none", "log = none\n", "--log", "none", "none", "log none\n",
	 "log /var/log/ctxguard/%p.jsonl\n"},
	{"metrics", "CTXGUARD_METRICS=/tmp/mine.prom", "metrics = /tmp/mine.prom\n",
	 "--metrics", "/tmp/mine.prom", "/tmp/mine.prom", "metrics /tmp/mine.prom\n",
	 "metrics /var/lib/prometheus/ctxguard-%p.prom\n"},
	{"metrics", "CTXGUARD_METRICS=none", "metrics = none\n", "--metrics", "none", "none",
	 "metrics none\n", "metrics /var/lib/prometheus/ctxguard-%p.prom\n"},
	{"action", NULL, "[rule mine]\nkernel = *\naction = warn\n", NULL, NULL, "warn",
	 "rule mine warn\n", "rule mine unset\n"},
	{"action", NULL, "[rule mine]\nkernel = *\naction = off\n", NULL, NULL, "off",
	 "rule mine off\n", "rule mine unset\n"},
	{"defaults", NULL, "defaults = off\n[rule mine]\nkernel = x\n", NULL, NULL, "off",
	 "defaults off\n", "defaults on\n"},
	{"log_mode", NULL, "log_mode = 0644\n", NULL, NULL, "0644", "log_mode 0644\n",
	 "log_mode 0640\n"},
	{"lock", NULL, "lock = off\n", NULL, NULL, "off", "lock off\n", "lock on\n"},
};

enum way { BY_ENV, BY_FILE, BY_FLAG, NWAYS };
static const char *const way_names[] = {"variable", "policy file", "ctxguard flag"};

#define NELEMS(a) (int)(sizeof(a) / sizeof((a)[0]))

/* The policy the way produces, as dump_policy text; NULL when the
 * setting has no such way. */
static char *load_by(const struct loosen *c, enum way way, const char *system)
{
	static char text[16384];
	char user_env[160];
	snprintf(user_env, sizeof user_env, "CTXGUARD_POLICY=%s", user_file);

	if (way == BY_FLAG) {
		if (!c->flag)
			return NULL;
		static struct run r;
		char prog[4096];
		snprintf(prog, sizeof prog, "%s/tests/progs/showpolicy", build_dir());
		const char *argv[] = {"ctxguard", c->flag, c->value, "--", prog, system, NULL};
		spawn(&r, NULL, argv);
		ck_assert_msg(exited(&r, 0), "status %#x\n%s", r.status, r.err);
		/* Bounded: gcc without link-time optimisation warns of truncation. */
		snprintf(text, sizeof text, "%.*s", (int)sizeof text - 1, r.out);
		return text;
	}
	char *env[] = {NULL, NULL};
	if (way == BY_ENV) {
		if (!c->env)
			return NULL;
		env[0] = (char *)c->env;
	} else {
		write_to(user_file, c->file, 0);
		env[0] = user_env;
	}
	struct cg_policy p;
	cg_policy_load_from(&p, env, system);
	FILE *f = fmemopen(text, sizeof text, "w");
	ck_assert_ptr_nonnull(f);
	dump_policy(f, &p);
	fclose(f);
	cg_policy_free(&p);
	return text;
}

START_TEST(loosen_matrix)
{
	const struct loosen *c = &cases[_i / (2 * NWAYS)];
	enum way way = (enum way)(_i / 2 % NWAYS);
	int locked = _i % 2;
	const char *system = locked ? sys_locked : sys_open;
	char *got = load_by(c, way, system);

	if (!got)
		return;     /* no such way for this setting */
	const char *want = locked ? c->floor : c->loose;
	ck_assert_msg(strstr(got, want), "%s by %s, %s: want '%.*s' in\n%s", c->setting,
		      way_names[way], locked ? "locked" : "unlocked", (int)strcspn(want, "\n"),
		      want, got);
	int refusals = count_of(got, "\nrefused ");
	if (!locked) {
		ck_assert_msg(refusals == 0, "unlocked refused something:\n%s", got);
		return;
	}
	ck_assert_msg(refusals == 1, "%s by %s: %d refusals\n%s", c->setting,
		      way_names[way], refusals, got);
	const char *line = strstr(got, "\nrefused ") + 1;
	char one[1024];
	snprintf(one, sizeof one, "%.*s", (int)strcspn(line, "\n"), line);
	char setting[64], asked[160];
	snprintf(setting, sizeof setting, "%s = ", c->setting);
	snprintf(asked, sizeof asked, "= %s ", c->asked);
	ck_assert_msg(strstr(one, setting) && strstr(one, asked) && strstr(one, sys_locked),
		      "the refusal must name %s, %s and %s: %s", c->setting, c->asked,
		      sys_locked, one);
}
END_TEST

/* A tighter value is taken under the lock, by every way, silently. */
START_TEST(tighten_accepted)
{
	static const struct loosen tight[] = {
		{"mode", "CTXGUARD_MODE=abort", "mode = abort\n", "--mode", "abort", NULL,
		 NULL, "mode abort\n"},
		{"log_mode", NULL, "log_mode = 0600\n", NULL, NULL, NULL, NULL,
		 "log_mode 0600\n"},
		{"action", NULL, "[rule mine]\nkernel = *\naction = abort\n", NULL, NULL,
		 NULL, NULL, "rule sys unset\nrule mine abort\n"},
	};
	for (int i = 0; i < NELEMS(tight); i++)
		for (int w = 0; w < NWAYS; w++) {
			char *got = load_by(&tight[i], (enum way)w, sys_locked);
			if (!got)
				continue;
			ck_assert_msg(strstr(got, tight[i].floor) && !strstr(got, "refused"),
				      "%s by %s:\n%s", tight[i].setting, way_names[w], got);
		}
}
END_TEST

/* The user's file adds rules after the system's and before the built-in
 * ones; its other settings (not locked) apply. */
START_TEST(user_file_adds)
{
	static const struct loosen add = {"rules", NULL,
		"quiet = on\nexit_code = 7\n[rule mine]\nkernel = mine_*\n", NULL, NULL, NULL,
		NULL, NULL};
	char *got = load_by(&add, BY_FILE, sys_locked);
	ck_assert_msg(strstr(got, "rule sys unset\nrule mine unset\nrule deepgemm unset\n") &&
		      !strstr(got, "refused") && strstr(got, "source "),
		      "%s", got);
	char *env[] = {"CTXGUARD_POLICY=none", "CTXGUARD_QUIET=1", NULL};
	struct cg_policy p;
	cg_policy_load_from(&p, env, sys_locked);
	ck_assert_int_eq(p.quiet, 1);
	ck_assert_int_eq(p.mode, CG_ACT_ERROR);
	ck_assert_uint_eq(p.nrefused, 1);
	ck_assert_msg(strstr(p.refused[0], "CTXGUARD_POLICY=none refused") &&
		      strstr(p.refused[0], sys_locked), "%s", p.refused[0]);
	cg_policy_free(&p);
}
END_TEST

/* Unlocked, CTXGUARD_POLICY=none drops the system file as before; a user
 * file cannot lock itself. */
START_TEST(unlocked_as_before)
{
	char *none[] = {"CTXGUARD_POLICY=none", NULL};
	struct cg_policy p;
	cg_policy_load_from(&p, none, sys_open);
	ck_assert_int_eq(p.mode, CG_ACT_ABORT);
	ck_assert_ptr_null(p.log_path);
	ck_assert_str_eq(p.source, "built-in");
	ck_assert_uint_eq(p.nrefused + p.nerrors, 0);
	cg_policy_free(&p);

	static const struct loosen self = {"lock", NULL, "lock = on\nmode = warn\n", NULL,
					   NULL, NULL, NULL, NULL};
	char *got = load_by(&self, BY_FILE, sys_open);
	ck_assert_msg(strstr(got, "lock off\n") && strstr(got, "mode warn\n") &&
		      strstr(got, "lock = on is honoured only in the system policy"),
		      "%s", got);
}
END_TEST

/* The order of actions is off < warn < error < abort. */
START_TEST(action_order)
{
	static const char *const order[] = {"off", "warn", "error", "abort"};
	for (int s = 0; s < NELEMS(order); s++)
		for (int u = 0; u < NELEMS(order); u++) {
			char sys[256], env[64];
			snprintf(sys, sizeof sys, "lock = on\nmode = %s\n", order[s]);
			write_to(sys_locked, sys, 0);
			snprintf(env, sizeof env, "CTXGUARD_MODE=%s", order[u]);
			char *envp[] = {env, NULL};
			struct cg_policy p;
			cg_policy_load_from(&p, envp, sys_locked);
			ck_assert_str_eq(cg_action_name(p.mode), order[u < s ? s : u]);
			ck_assert_uint_eq(p.nrefused, u < s);
			cg_policy_free(&p);
		}
}
END_TEST

/* Past the list's room, refusals are counted, not dropped unsaid. */
START_TEST(many_refusals_counted)
{
	char text[4096] = "", user_env[160];
	for (int i = 0; i < CG_POLICY_MAX_ERRORS + 4; i++)
		snprintf(text + strlen(text), sizeof text - strlen(text),
			 "[rule r%d]\nkernel = k%d\naction = off\n", i, i);
	write_to(user_file, text, 0);
	snprintf(user_env, sizeof user_env, "CTXGUARD_POLICY=%s", user_file);
	char *env[] = {user_env, NULL};
	struct cg_policy p;
	cg_policy_load_from(&p, env, sys_locked);
	ck_assert_uint_eq(p.nrefused, CG_POLICY_MAX_ERRORS);
	ck_assert_uint_eq(p.errors_dropped, 4);
	cg_policy_free(&p);
}
END_TEST

/* ---- a system policy that cannot be read ----------------------------- */

/* What a shadow file looks like: no line of it may be quoted anywhere. */
#define SECRET "root:$6$s3cr3tSalt$hashhashhash:19000:0:99999:7:::\n" \
	"daemon:*:19000:0:99999:7:::\nmode = off\n"

/* The policy loaded with the variables that would loosen every setting:
 * each must be refused by the strictest lock. */
static void assert_strictest(const char *system)
{
	char *env[] = {"CTXGUARD_MODE=off", "CTXGUARD_SCOPE=experts", "CTXGUARD_OPERANDS=off",
		       "CTXGUARD_POLICY=none", NULL};
	struct cg_policy p;
	cg_policy_load_from(&p, env, system);
	char text[16384];
	FILE *f = fmemopen(text, sizeof text, "w");
	dump_policy(f, &p);
	fclose(f);
	cg_policy_free(&p);
	ck_assert_msg(strstr(text, "mode abort\nscope all\noperands on\n") &&
		      strstr(text, "lock on\n") &&
		      strstr(text, "cannot be read as a policy: locked at the strictest") &&
		      count_of(text, "\nrefused ") == 4 && !strstr(text, "s3cr3t") &&
		      !strstr(text, "daemon"), "%s", text);
}

START_TEST(system_unreadable_strictest)
{
	write_to(sys_locked, "mode = warn\n", 0);
	char *oom_env[] = {"CTXGUARD_MODE=off", NULL};
	/* out of memory (prlimit --as): in a child, the address space capped
	 * just above what it uses, so that reading the file fails (first,
	 * before a freed buffer leaves room for it in the heap).  A
	 * sanitizer's shadow memory does not run under such a cap. */
	if (!*preload_before_shim()) {
		pid_t child = fork();
		if (child == 0) {
			unsigned long pages = 0;
			FILE *statm = fopen("/proc/self/statm", "r");
			if (!statm || fscanf(statm, "%lu", &pages) != 1)
				_exit(2);
			fclose(statm);
			struct rlimit as;
			as.rlim_cur = as.rlim_max = pages * 4096 + (256 << 10);
			if (setrlimit(RLIMIT_AS, &as) != 0)
				_exit(2);
			struct cg_policy q;
			cg_policy_load_from(&q, oom_env, sys_locked);
			_exit(q.lock && q.mode == CG_ACT_ABORT && q.scope == CG_SCOPE_ALL ? 0 : 1);
		}
		int status;
		ck_assert_int_eq(waitpid(child, &status, 0), child);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x", status);
	}
	/* a directory, a file of another kind, a binary */
	assert_strictest(tmpdir);
	write_to(sys_locked, SECRET, 0);
	assert_strictest(sys_locked);
	write_to(sys_locked, "\x7f" "ELF\x02\x01\x01\n\x01\x02", 0);
	assert_strictest(sys_locked);
	/* out of file descriptors */
	write_to(sys_locked, "mode = warn\n", 0);
	int fds[65536], n = 0;
	while (n < (int)(sizeof fds / sizeof fds[0]) && (fds[n] = dup(0)) >= 0)
		n++;
	ck_assert_int_lt(n, (int)(sizeof fds / sizeof fds[0]));
	char *env[] = {"CTXGUARD_MODE=off", NULL};
	struct cg_policy p;
	cg_policy_load_from(&p, env, sys_locked);
	while (n--)
		close(fds[n]);
	ck_assert_msg(p.lock && p.mode == CG_ACT_ABORT && p.scope == CG_SCOPE_ALL &&
		      p.nrefused == 1 && strstr(p.errors[0], "Too many open files"),
		      "lock %d mode %d errors %zu: %s", p.lock, p.mode, p.nerrors,
		      p.nerrors ? p.errors[0] : "");
	cg_policy_free(&p);
	/* a missing system policy is no problem: the built-in one, unlocked */
	cg_policy_load_from(&p, env, in_tmpdir("missing.conf"));
	ck_assert_msg(!p.lock && p.mode == CG_ACT_OFF && !p.nerrors, "%d", p.lock);
	cg_policy_free(&p);
}
END_TEST

/* A user's file that is no policy: the line number and the error, never a
 * line of it. */
START_TEST(secret_file_not_quoted)
{
	char user_env[160];
	write_to(user_file, SECRET, 0);
	snprintf(user_env, sizeof user_env, "CTXGUARD_POLICY=%s", user_file);
	char *env[] = {user_env, NULL};
	for (int locked = 0; locked < 2; locked++) {
		struct cg_policy p;
		cg_policy_load_from(&p, env, locked ? sys_locked : sys_open);
		ck_assert_uint_eq(p.nerrors, 1);
		ck_assert_msg(strstr(p.errors[0], ":1: not a policy file") &&
			      !strstr(p.errors[0], "s3cr3t") && !strstr(p.errors[0], "root"),
			      "%s", p.errors[0]);
		/* nothing of it applied: its "mode = off" least of all */
		ck_assert_int_eq(p.mode, locked ? CG_ACT_ERROR : CG_ACT_ABORT);
		cg_policy_free(&p);
	}
}
END_TEST

/* ---- the shim under a locked policy ---------------------------------- */

/* The suite's copy of the library reads its system policy from
 * BUILD/tests/etc/ctxguard/policy.conf (tests/locked.mk). */
static void write_system(const char *text)
{
	char path[4096], cmd[4200];
	snprintf(path, sizeof path, "%s/tests/etc/ctxguard", build_dir());
	snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path);
	ck_assert_int_eq(system(cmd), 0);
	strcat(path, "/policy.conf");
	write_to(path, text, 0);
}

static const char *locked_library(void)
{
	static char path[4096];
	snprintf(path, sizeof path, "%s/tests/locked/libctxguard.so", build_dir());
	return path;
}

/* LD_PRELOAD with the locked copy in the shim's place. */
static const char *locked_preload(void)
{
	static char env[8192];
	const char *pre = preload_without_shim();
	snprintf(env, sizeof env, "%s%s%s", pre, pre[strlen(pre) - 1] == '=' ? "" : ":",
		 locked_library());
	return env;
}

static void clear_system(void)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/tests/etc/ctxguard/policy.conf", build_dir());
	unlink(path);
}

/* A crossing under the system policy `system` and env: stopped. */
static void crossing_aborts(struct run *r, const char *system, const char *const *env)
{
	const char *argv[] = {"tests/progs/scenario", "dlsym", "data", "launch", "cross", NULL};

	write_system(system);
	spawn(r, env, argv);
	clear_system();
	ck_assert_msg(killed_by(r, SIGABRT) && strstr(r->err, cg_deepgemm_message),
		      "status %#x\n%s%s", r->status, r->out, r->err);
}

/* Every variable that could switch a crossing's stop off. */
START_TEST(shim_locked)
{
	static struct run r;
	char system_conf[512], log_env[300];
	snprintf(system_conf, sizeof system_conf, "lock = on\nlog = %s\n",
		 in_tmpdir("system.jsonl"));
	snprintf(log_env, sizeof log_env, "CTXGUARD_LOG=%s", in_tmpdir("user.jsonl"));
	const char *env[] = {locked_preload(), "CTXGUARD_MODE=off", "CTXGUARD_OPERANDS=off",
			     "CTXGUARD_POLICY=none", "CTXGUARD_LIBCUDA=/nonexistent/libcuda.so.1",
			     "CTXGUARD_CUPTI=/nonexistent/libcupti.so", log_env, NULL};
	crossing_aborts(&r, system_conf, env);
	static const char *const refused[] = {
		"CTXGUARD_POLICY=none refused", "mode = off (CTXGUARD_MODE) refused",
		"operands = off (CTXGUARD_OPERANDS) refused", "(CTXGUARD_LOG) refused",
		"CTXGUARD_LIBCUDA=/nonexistent/libcuda.so.1 refused",
		"CTXGUARD_CUPTI=/nonexistent/libcupti.so refused"};
	for (int i = 0; i < NELEMS(refused); i++)
		ck_assert_msg(count_of(r.err, refused[i]) == 1, "want '%s' once:\n%s",
			      refused[i], r.err);
	ck_assert_int_eq(count_of(r.err, " refused: "), NELEMS(refused));
	ck_assert_int_eq(count_of(r.err, "/tests/etc/ctxguard/policy.conf is locked"),
			 NELEMS(refused));
	const char *log = slurp(in_tmpdir("system.jsonl"));
	ck_assert_msg(log && count_of(log, "\"event\":\"lock_refused\"") == NELEMS(refused) &&
		      strstr(log, "\"event\":\"crossing\""), "%s", log ? log : "no log");
	ck_assert_msg(access(in_tmpdir("user.jsonl"), F_OK) != 0, "CTXGUARD_LOG was opened");
}
END_TEST

/* The shim with a system policy it cannot read: locked at the strictest,
 * said on stderr and in the (user's) log, every loosening refused; and no
 * line of a user's secret file quoted on stderr or in the log. */
START_TEST(shim_unreadable_system)
{
	static struct run r;
	char log_env[300], user_env[300];
	snprintf(log_env, sizeof log_env, "CTXGUARD_LOG=%s", in_tmpdir("user.jsonl"));
	write_to(user_file, SECRET, 0);
	snprintf(user_env, sizeof user_env, "CTXGUARD_POLICY=%s", user_file);
	const char *env[] = {locked_preload(), "CTXGUARD_MODE=off", "CTXGUARD_METRICS=none",
			     user_env, log_env, NULL};
	crossing_aborts(&r, SECRET, env);
	ck_assert_msg(strstr(r.err, "locked at the strictest built-in policy") &&
		      strstr(r.err, "mode = off (CTXGUARD_MODE) refused") &&
		      strstr(r.err, ":1: not a policy file") && !strstr(r.err, "s3cr3t"),
		      "%s", r.err);
	const char *log = slurp(in_tmpdir("user.jsonl"));
	ck_assert_msg(log && strstr(log, "locked at the strictest") &&
		      strstr(log, "\"event\":\"lock_refused\"") && !strstr(log, "s3cr3t"),
		      "%s", log ? log : "no log");
}
END_TEST

/* The system's metrics file stays, whatever the variable asks. */
START_TEST(shim_locked_metrics)
{
	static struct run r;
	char system_conf[512], metrics_env[300];
	snprintf(system_conf, sizeof system_conf, "lock = on\nmode = warn\nmetrics = %s\n",
		 in_tmpdir("system.prom"));
	snprintf(metrics_env, sizeof metrics_env, "CTXGUARD_METRICS=%s", in_tmpdir("user.prom"));
	const char *argv[] = {"tests/progs/scenario", "dlsym", "data", "launch", "cross", NULL};
	const char *none[] = {locked_preload(), "CTXGUARD_METRICS=none", NULL};
	const char *other[] = {locked_preload(), metrics_env, NULL};
	const char *const *envs[] = {none, other};

	write_system(system_conf);
	for (int i = 0; i < 2; i++) {
		unlink(in_tmpdir("system.prom"));
		spawn(&r, envs[i], argv);
		ck_assert_msg(count_of(r.err, "(CTXGUARD_METRICS) refused") == 1 &&
			      access(in_tmpdir("system.prom"), F_OK) == 0 &&
			      access(in_tmpdir("user.prom"), F_OK) != 0,
			      "status %#x\n%s", r.status, r.err);
	}
	clear_system();
}
END_TEST

/* A second copy of the driver, by another path or in a namespace of its
 * own: locked, the lookup or the load is refused; unlocked, said and let
 * through. */
START_TEST(shim_second_driver)
{
	static struct run r;
	char cmd[8400], copy[300];
	snprintf(copy, sizeof copy, "%s", in_tmpdir("libcuda.so.1"));
	snprintf(cmd, sizeof cmd, "cp '%s/fake/libcuda.so.1' '%s'", build_dir(), copy);
	ck_assert_int_eq(system(cmd), 0);
	const char *env[] = {locked_preload(), NULL};
	const char *by_copy[] = {"tests/progs/drivers", "copy", copy, NULL};
	const char *by_ns[] = {"tests/progs/drivers", "dlmopen", "libcuda.so.1", NULL};
	for (int locked = 0; locked < 2; locked++) {
		write_system(locked ? "lock = on\n" : "mode = abort\n");
		spawn(&r, env, by_copy);
		ck_assert_msg(exited(&r, 0) && strstr(r.out, locked ? "lookup: refused" : "lookup: found") &&
			      strstr(r.err, locked ? "cuLaunchKernel refused: " : "dlsym cuLaunchKernel: ") &&
			      strstr(r.err, "is a second CUDA driver"),
			      "locked %d: status %#x\n%s%s", locked, r.status, r.out, r.err);
		/* A sanitized driver in a namespace of its own brings a second
		 * sanitizer runtime, which refuses to start. */
		if (*preload_before_shim())
			continue;
		spawn(&r, env, by_ns);
		ck_assert_msg(exited(&r, 0) && strstr(r.out, locked ? "dlmopen: refused" : "dlmopen: loaded") &&
			      strstr(r.err, "is a second CUDA driver"),
			      "locked %d: status %#x\n%s%s", locked, r.status, r.out, r.err);
	}
	clear_system();
}
END_TEST

/* A locked backstop loads CUPTI only from the policy's `cupti` or the
 * toolkit: a library on LD_LIBRARY_PATH or in LD_PRELOAD is not taken. */
START_TEST(shim_locked_cupti_path)
{
	static struct run r;
	char cupti[4200], path_env[8400], preload_env[16384], system_conf[4400];
	snprintf(cupti, sizeof cupti, "%s/fake/cupti/libcupti.so", build_dir());
	snprintf(path_env, sizeof path_env, "LD_LIBRARY_PATH=%s/fake/cupti:%s/fake", build_dir(),
		 build_dir());
	const char *pre = locked_preload();
	/* After a sanitizer runtime, which must come first. */
	const char *san = preload_before_shim();
	snprintf(preload_env, sizeof preload_env, "LD_PRELOAD=%s%s%s:%s", san, *san ? ":" : "", cupti,
		 locked_library());
	const char *argv[] = {"tests/progs/unhooked", "launch", "same", "none", NULL};
	const char *by_path[] = {pre, path_env, NULL};
	const char *by_preload[] = {preload_env, NULL};
	const char *const *envs[] = {by_path, by_preload};

	write_system("lock = on\nbackstop = on\n");
	for (int i = 0; i < 2; i++) {
		spawn(&r, envs[i], argv);
		ck_assert_msg(strstr(r.err, "ctxguard: backstop off: ") && !strstr(r.err, "unhooked 1"),
			      "%s: status %#x\n%s", i ? "LD_PRELOAD" : "LD_LIBRARY_PATH", r.status, r.err);
	}
	/* the file the system policy names is loaded, and watches */
	snprintf(system_conf, sizeof system_conf, "lock = on\nbackstop = on\ncupti = %s\n", cupti);
	write_system(system_conf);
	spawn(&r, envs[0], argv);
	clear_system();
	ck_assert_msg(strstr(r.err, "backstop: unhooked 1") && !strstr(r.err, "backstop off"),
		      "status %#x\n%s", r.status, r.err);
}
END_TEST

/* The program's own cuptiSubscribe makes a locked backstop step aside:
 * said, logged, counted, and the audit fails. */
START_TEST(shim_locked_backstop_yields)
{
	static struct run r;
	char cupti[4200], cupti_env[4300], system_conf[4400], lib_env[4200], prog[4096];
	snprintf(cupti, sizeof cupti, "%s/fake/cupti/libcupti.so", build_dir());
	snprintf(cupti_env, sizeof cupti_env, "CTXGUARD_CUPTI=%s", cupti);
	snprintf(system_conf, sizeof system_conf, "lock = on\nbackstop = on\ncupti = %s\nlog = %s\n",
		 cupti, in_tmpdir("system.jsonl"));
	snprintf(lib_env, sizeof lib_env, "CTXGUARD_LIBRARY=%s", locked_library());
	snprintf(prog, sizeof prog, "%s/tests/progs/unhooked", build_dir());
	const char *env[] = {preload_without_shim(), lib_env, cupti_env, NULL};
	const char *argv[] = {"ctxguard", "--audit", "--error-exitcode", "9", "--", prog, "launch",
			      "same", "after", NULL};

	write_system(system_conf);
	spawn(&r, env, argv);
	clear_system();
	ck_assert_msg(exited(&r, 9) && strstr(r.err, "a profiler took CUPTI's callbacks") &&
		      strstr(r.err, "ran without the backstop"), "status %#x\n%s", r.status, r.err);
	const char *log = slurp(in_tmpdir("system.jsonl"));
	ck_assert_msg(log && strstr(log, "\"backstop_yielded\":1") &&
		      strstr(log, "\"state\":\"off\""), "%s", log ? log : "no log");
}
END_TEST

/* The same variables with the system policy unlocked: honoured as ever. */
START_TEST(shim_unlocked)
{
	static struct run r;
	char system_conf[512], log_env[300];
	snprintf(system_conf, sizeof system_conf, "log = %s\n", in_tmpdir("system.jsonl"));
	snprintf(log_env, sizeof log_env, "CTXGUARD_LOG=%s", in_tmpdir("user.jsonl"));
	const char *env[] = {locked_preload(), "CTXGUARD_MODE=off", "CTXGUARD_OPERANDS=off",
			     log_env, NULL};
	const char *argv[] = {"tests/progs/scenario", "dlsym", "data", "launch", "cross", NULL};

	write_system(system_conf);
	spawn(&r, env, argv);
	clear_system();
	/* mode off: the launch went to the driver, which refused it */
	ck_assert_msg(exited(&r, 3) && !strstr(r.err, "refused"), "status %#x\n%s%s", r.status,
		      r.out, r.err);
	ck_assert_msg(access(in_tmpdir("user.jsonl"), F_OK) == 0, "CTXGUARD_LOG not honoured");
	ck_assert_msg(access(in_tmpdir("system.jsonl"), F_OK) != 0, "the system's log was used");
}
END_TEST

/* The ctxguard command's flags are variables to the library. */
START_TEST(shim_locked_command)
{
	static struct run r;
	char system_conf[512], lib_env[4200], prog[4096];
	snprintf(system_conf, sizeof system_conf, "lock = on\nlog = %s\n",
		 in_tmpdir("system.jsonl"));
	snprintf(lib_env, sizeof lib_env, "CTXGUARD_LIBRARY=%s", locked_library());
	snprintf(prog, sizeof prog, "%s/tests/progs/scenario", build_dir());
	const char *env[] = {preload_without_shim(), lib_env, NULL};
	const char *argv[] = {"ctxguard", "--mode", "off", "--log", in_tmpdir("cli.jsonl"),
			      "--", prog, "dlsym", "data", "launch", "cross", NULL};

	write_system(system_conf);
	spawn(&r, env, argv);
	clear_system();
	ck_assert_msg(exited(&r, 128 + SIGABRT) && strstr(r.err, cg_deepgemm_message) &&
		      strstr(r.err, "mode = off (CTXGUARD_MODE) refused") &&
		      strstr(r.err, "(CTXGUARD_LOG) refused"),
		      "status %#x\n%s%s", r.status, r.out, r.err);
	ck_assert_msg(access(in_tmpdir("cli.jsonl"), F_OK) != 0, "--log was honoured");
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("lock");
	TCase *tc = tcase_create("lock");
	tcase_add_checked_fixture(tc, setup, tmpdir_remove);
	tcase_add_loop_test(tc, loosen_matrix, 0, NELEMS(cases) * NWAYS * 2);
	tcase_add_test(tc, tighten_accepted);
	tcase_add_test(tc, user_file_adds);
	tcase_add_test(tc, unlocked_as_before);
	tcase_add_test(tc, action_order);
	tcase_add_test(tc, many_refusals_counted);
	tcase_add_test(tc, system_unreadable_strictest);
	tcase_add_test(tc, secret_file_not_quoted);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	tc = tcase_create("shim");
	tcase_add_checked_fixture(tc, setup, tmpdir_remove);
	tcase_add_test(tc, shim_locked);
	tcase_add_test(tc, shim_unlocked);
	tcase_add_test(tc, shim_unreadable_system);
	tcase_add_test(tc, shim_locked_metrics);
	tcase_add_test(tc, shim_second_driver);
	tcase_add_test(tc, shim_locked_cupti_path);
	tcase_add_test(tc, shim_locked_backstop_yields);
	tcase_add_test(tc, shim_locked_command);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(suite());
}
