/* ctxguard [options] -- program [args...]
 *
 * Runs a program with libctxguard.so preloaded, the way compute-sanitizer
 * runs one under its tools, and exits with the program's status — or with
 * --error-exitcode's value when any process of the tree reported a
 * crossing.  Processes report crossings by appending a line to a status
 * file named in CTXGUARD_STATUS. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libgen.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../policy/lock.h"
#include "../../policy/policy.h"

extern char **environ;

/* What a flag does besides setting its variable. */
enum flag_kind {
	F_SETTING,      /* a policy setting: the value checked by the policy's own parser */
	F_INPUT,        /* a file every process reads: made absolute, must be readable */
	F_OUTPUT,       /* a file every process writes: made absolute, must be writable */
	F_SWITCH,       /* no value: sets its variable to `fixed` */
	F_AUDIT,        /* --backstop, and the exit code covers unguarded launches */
	F_LIBRARY,      /* the library to preload */
	F_HELP,
	F_VERSION,
};

/* One row per flag: --name VALUE or --name=VALUE.  Each sets the variable
 * the preloaded library reads in every process of the tree. */
static const struct flag {
	const char *name;
	enum flag_kind kind;
	const char *env;
	const char *fixed;      /* F_SETTING, F_OUTPUT: the policy key; F_SWITCH: the value set */
	const char *arg;        /* the value's form in --help; NULL: takes none */
	const char *help;       /* continuation lines start with \n */
} flags[] = {
	{"mode", F_SETTING, "CTXGUARD_MODE", "mode", "abort|error|warn|off|redirect",
	 "action on a crossing (default abort)"},
	{"scope", F_SETTING, "CTXGUARD_SCOPE", "scope", "experts|all",
	 "check expert kernels only, or every kernel"},
	{"operands", F_SETTING, "CTXGUARD_OPERANDS", "operands", "on|off",
	 "check pointer and tensor-map operands"},
	{"policy", F_INPUT, "CTXGUARD_POLICY", NULL, "FILE",
	 "policy file (default: the system policy, which --version names)"},
	{"log", F_OUTPUT, "CTXGUARD_LOG", "log", "FILE|syslog",
	 "JSON-lines event log, %p pid, %h host, %r rank"},
	{"log-file", F_OUTPUT, "CTXGUARD_LOG_FILE", NULL, "FILE",
	 "a text copy of what ctxguard writes to stderr (%p, %h, %r)"},
	{"metrics", F_OUTPUT, "CTXGUARD_METRICS", "metrics", "FILE",
	 "Prometheus counters written at exit"},
	{"error-exitcode", F_SETTING, "CTXGUARD_EXIT_CODE", "exit_code", "N",
	 "exit with N when a crossing was reported"},
	{"error-code", F_SETTING, "CTXGUARD_ERROR_CODE", "error_code", "CODE",
	 "what a refused launch returns under --mode error: a CUDA error\n"
	 "name or number (default CUDA_ERROR_INVALID_HANDLE)"},
	{"redirect", F_SETTING, "CTXGUARD_REDIRECT", "redirect", "bundled|rehome",
	 "where --mode redirect sends a crossing launch (default bundled)"},
	{"redirect-fallback", F_SETTING, "CTXGUARD_REDIRECT_FALLBACK", "redirect_fallback",
	 "abort|error", "the action when a redirect is impossible (default abort)"},
	{"print-limit", F_SETTING, "CTXGUARD_PRINT_LIMIT", "print_limit", "N",
	 "crossings of each kernel reported in full; later ones are\n"
	 "counted in the summary (default 8)"},
	{"libcuda", F_INPUT, "CTXGUARD_LIBCUDA", NULL, "PATH",
	 "the driver library to wrap (default libcuda.so.1)"},
	{"cupti", F_INPUT, "CTXGUARD_CUPTI", NULL, "PATH", "libcupti for the backstop"},
	{"quiet", F_SWITCH, "CTXGUARD_QUIET", "1", NULL,
	 "no per-process summary line, no closing line"},
	{"shadow", F_SWITCH, "CTXGUARD_SHADOW", "on", NULL,
	 "run the bundled kernel beside each DeepGEMM GEMM and compare\n"
	 "(docs/shadow.md)"},
	{"backstop", F_SWITCH, "CTXGUARD_BACKSTOP", "on", NULL,
	 "also check launches that bypass the hooks, through CUPTI"},
	{"audit", F_AUDIT, "CTXGUARD_BACKSTOP", "on", NULL,
	 "--backstop, and --error-exitcode also fires when a launch\n"
	 "bypassed the hooks, the backstop could not watch, calls\n"
	 "passed unchecked or cuGetProcAddress handed out a launch,\n"
	 "load or lookup entry point ctxguard could not map"},
	{"library", F_LIBRARY, "CTXGUARD_LIBRARY", NULL, "PATH", "libctxguard.so to preload"},
	{"version", F_VERSION, NULL, NULL, NULL,
	 "print the version, the system policy's path and the bundled\n"
	 "kernels (their targets and CUDA release, or none)"},
	{"help", F_HELP, NULL, NULL, NULL, "print this help"},
};

#define NFLAGS (sizeof flags / sizeof flags[0])
enum { HELP_COLUMN = 28, HELP_WIDTH = 90 };

/* Generated from the table: docs/usage.md and the man page come from it. */
static void usage(FILE *f)
{
	fputs("usage: ctxguard [options] -- program [args...]\n"
	      "       ctxguard report [--json] LOG...   crossings per kernel, host and rank\n"
	      "Each option is also --option=value; its variable, set for every process\n"
	      "of the program's tree, is in parentheses.\n", f);
	for (size_t i = 0; i < NFLAGS; i++) {
		const struct flag *o = &flags[i];
		int n = fprintf(f, "  --%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
		if (n >= HELP_COLUMN - 1) {
			fputc('\n', f);
			n = 0;
		}
		fprintf(f, "%*s", HELP_COLUMN - n, "");
		n = HELP_COLUMN;
		for (const char *h = o->help; *h; h++, n++) {
			fputc(*h, f);
			if (*h == '\n')
				n = fprintf(f, "%*s", HELP_COLUMN, "") - 1;
		}
		/* the variable after the text, or below it past 90 columns */
		if (o->env && o->kind != F_AUDIT)
			fprintf(f, n + (int)strlen(o->env) + 3 > HELP_WIDTH ? "\n%*s(%s)" : "%.*s (%s)",
				HELP_COLUMN, "", o->env);
		fputc('\n', f);
	}
}

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "ctxguard: ");
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(ctxguard --help lists the options)\n");
	exit(2);
}

/* The first of rel[] (paths relative to the command's directory) that
 * exists, resolved; NULL if none. */
static const char *find_near_self(const char *const *rel, size_t n_rel)
{
	static char path[PATH_MAX], resolved[PATH_MAX];
	char self[PATH_MAX - 64];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0)
		return NULL;
	self[n] = 0;
	char *slash = strrchr(self, '/');
	if (!slash)
		return NULL;
	*slash = 0;
	for (size_t i = 0; i < n_rel; i++) {
		snprintf(path, sizeof path, "%s%s", self, rel[i]);
		if (access(path, R_OK) == 0)
			return realpath(path, resolved);
	}
	return NULL;
}

/* Next to the command in a build tree, ../lib when installed. */
static const char *find_library(void)
{
	static const char *const rel[] = {"/libctxguard.so", "/../lib/libctxguard.so"};
	const char *env = getenv("CTXGUARD_LIBRARY");
	return env && *env ? env : find_near_self(rel, sizeof rel / sizeof rel[0]);
}

/* `ctxguard report ...`: python/ctxguard/report.py, beside the command in
 * the wheel (ctxguard/bin/../report.py), in share/ctxguard when installed
 * by make, else in the source tree the command was built from.  argv[0] is
 * "report"; argv[argc] NULL. */
static int run_report(int argc, char **argv)
{
	static const char *const rel[] = {"/../report.py", "/../share/ctxguard/report.py"};
	const char *script = find_near_self(rel, sizeof rel / sizeof rel[0]);
	if (!script && access(CG_REPORT_SCRIPT, R_OK) == 0)
		script = CG_REPORT_SCRIPT;
	if (!script)
		die("%s", "report: cannot find report.py beside the command");
	char **all = malloc(((size_t)argc + 2) * sizeof *all);
	if (!all)
		die("%s", "out of memory");
	all[0] = "python3";
	all[1] = (char *)script;
	memcpy(all + 2, argv + 1, (size_t)argc * sizeof *argv);
	execvp(all[0], all);
	die("report: cannot run python3: %s", strerror(errno));
	return 127;
}

static void setenv_checked(const char *name, const char *value)
{
	if (setenv(name, value, 1) != 0)
		die("cannot set %s", name);
}

/* path as every process of the tree sees it, also one that changed its
 * directory first: absolute.  The caller frees it. */
static char *absolute(const char *path)
{
	char cwd[PATH_MAX];
	if (path[0] == '/' || !getcwd(cwd, sizeof cwd))
		return strdup(path);
	char *abs = malloc(strlen(cwd) + strlen(path) + 2);
	if (abs)
		sprintf(abs, "%s/%s", cwd, path);
	return abs;
}

/* "none" and syslog[:SOCKET] name no file. */
static int names_file(const char *path)
{
	return strcmp(path, "none") && strcmp(path, "syslog") && strncmp(path, "syslog:", 7);
}

/* An output no process could write is refused here, once, rather than each
 * process running with it disabled.  A directory that holds %p, %h or %r
 * is only known per process: the library reports it there. */
static void check_output(const char *name, const char *path)
{
	if (!strchr(path, '%') && access(path, F_OK) == 0) {
		if (access(path, W_OK) != 0)
			die("--%s %s: cannot write the file: %s", name, path, strerror(errno));
		return;
	}
	char *copy = strdup(path);
	if (!copy)
		die("%s", "out of memory");
	const char *dir = dirname(copy);
	if (!strchr(dir, '%') && access(dir, W_OK | X_OK) != 0)
		die("--%s %s: cannot create files in %s: %s", name, path, dir, strerror(errno));
	free(copy);
}

/* The outputs the flags asked for that the policy kept (a locked system
 * policy keeps its own log): each checked before the program runs. */
static void check_outputs(const struct cg_policy *policy)
{
	for (size_t i = 0; i < NFLAGS; i++) {
		const struct flag *o = &flags[i];
		const char *val = o->kind == F_OUTPUT ? getenv(o->env) : NULL;
		char kept[PATH_MAX + 8];
		if (!val || !names_file(val))
			continue;
		if (o->fixed) {
			cg_setting_show(policy, o->fixed, kept, sizeof kept);
			if (strcmp(kept, val) != 0)
				continue;
		}
		check_output(o->name, val);
	}
}

/* Sets the flag's variable from its value, or exits 2 saying why not. */
static void apply(const struct flag *o, const char *val)
{
	const char *expected;
	char *abs;
	switch (o->kind) {
	case F_SETTING:
		if ((expected = cg_setting_refuses(o->fixed, val)))
			die("--%s %s: expected %s", o->name, val, expected);
		setenv_checked(o->env, val);
		break;
	case F_INPUT:
		abs = access(val, R_OK) == 0 ? realpath(val, NULL) : NULL;
		if (!abs)
			die("--%s %s: cannot read the file", o->name, val);
		setenv_checked(o->env, abs);
		free(abs);
		break;
	case F_OUTPUT:
		abs = names_file(val) ? absolute(val) : strdup(val);
		if (!abs)
			die("%s", "out of memory");
		setenv_checked(o->env, abs);
		free(abs);
		break;
	case F_SWITCH:
	case F_AUDIT:
		setenv_checked(o->env, o->fixed);
		break;
	default:
		break;
	}
}

/* What a process says once on the status file when something went past
 * the checks (cg_status_word), and the closing line for it: a launch that
 * bypassed the hooks, a backstop that could not watch, calls that passed
 * unchecked, entry points handed out that the hooks could not stand for.
 * Under --audit any of them sets the exit code; audit_text, when set, is
 * the line then. */
static const struct past_checks {
	const char *word, *text, *audit_text;
} past_checks[] = {
	{"unhooked", "launched kernels that bypassed the hooks (unhooked; see each summary)", NULL},
	{"unwatched", "ran without the backstop: launches past the hooks went unseen",
	 "ran without the backstop: the audit is incomplete"},
	{"unchecked",
	 "let calls pass unchecked, while ctxguard started or as deprecated launches it could "
	 "not read (see each process's stderr)",
	 NULL},
	{"unmapped",
	 "got entry points from cuGetProcAddress that ctxguard could not hook (unmapped; see "
	 "each process's stderr)",
	 NULL},
};

#define NPAST (sizeof past_checks / sizeof past_checks[0])

static pid_t child;

/* The command's own lines: stderr, and --log-file's copy beside the
 * library's lines there. */
static FILE *text_copy;

static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("ctxguard: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (text_copy) {
		va_start(ap, fmt);
		fputs("ctxguard: ", text_copy);
		vfprintf(text_copy, fmt, ap);
		va_end(ap);
	}
}

static void forward(int sig)
{
	if (child > 0)
		kill(child, sig);
}

/* The row of --name or --name=value (*val then points past the '='). */
static const struct flag *find_flag(const char *a, const char **val)
{
	*val = NULL;
	if (strcmp(a, "-h") == 0)
		a = "--help";
	if (strncmp(a, "--", 2) != 0)
		return NULL;
	size_t n = strcspn(a + 2, "=");
	for (size_t i = 0; i < NFLAGS; i++)
		if (strlen(flags[i].name) == n && strncmp(a + 2, flags[i].name, n) == 0) {
			if (a[2 + n] == '=')
				*val = a + 3 + n;
			return &flags[i];
		}
	return NULL;
}

/* A sanitizer runtime, which must stay first in LD_PRELOAD. */
static int sanitizer_runtime(const char *entry, size_t n)
{
	static const char *const names[] = {"libasan", "libtsan", "libubsan", "liblsan",
					    "libhwasan", "libmsan", "libclang_rt."};
	const char *base = entry;
	for (size_t i = 0; i < n; i++)
		if (entry[i] == '/')
			base = entry + i + 1;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strncmp(base, names[i], strlen(names[i])) == 0)
			return 1;
	return 0;
}

/* LD_PRELOAD with lib ahead of every other entry but the sanitizer
 * runtimes that lead it: a library preloaded before ctxguard that defines
 * the driver's entry points would take the program's calls past the hooks
 * (the library says so at start-up, docs/security.md).  An entry equal to
 * lib is dropped.  malloc'ed; NULL when out of memory. */
static char *preload_first(const char *old, const char *lib)
{
	size_t n = old ? strlen(old) : 0, k = 0;
	char *out = malloc(n + strlen(lib) + 3);
	if (!out)
		return NULL;
	const char *p = old ? old : "";
	int placed = 0;
	while (1) {
		/* The loader splits on ':' and white space. */
		size_t len = strcspn(p, ": \t");
		if (len && !(len == strlen(lib) && strncmp(p, lib, len) == 0)) {
			if (!placed && !sanitizer_runtime(p, len)) {
				k += (size_t)sprintf(out + k, "%s%s", k ? ":" : "", lib);
				placed = 1;
			}
			k += (size_t)sprintf(out + k, "%s%.*s", k ? ":" : "", (int)len, p);
		}
		if (!p[len])
			break;
		p += len + 1;
	}
	if (!placed)
		sprintf(out + k, "%s%s", k ? ":" : "", lib);
	return out;
}

int main(int argc, char **argv)
{
	int i = 1, audit = 0;
	const char *library = NULL;
	if (argc > 1 && strcmp(argv[1], "report") == 0)
		return run_report(argc - 1, argv + 1);
	for (; i < argc; i++) {
		const char *a = argv[i], *val;
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (a[0] != '-')
			break;
		const struct flag *o = find_flag(a, &val);
		if (!o)
			die("unknown option %s", a);
		if (!o->arg && val)
			die("--%s takes no value", o->name);
		if (o->arg && !val) {
			if (i + 1 >= argc)
				die("--%s needs a value (%s)", o->name, o->arg);
			val = argv[++i];
		}
		switch (o->kind) {
		case F_HELP:
			usage(stdout);
			return 0;
		case F_VERSION:
			printf("ctxguard " CTXGUARD_VERSION " (system policy %s)\nkernels: %s\n",
			       cg_system_policy, CG_KERNELS);
			return 0;
		case F_LIBRARY:
			library = val;
			break;
		case F_AUDIT:
			audit = 1;
			/* fall through */
		default:
			apply(o, val);
		}
	}
	if (i >= argc)
		die("%s", "no program given");

	/* The policy as the preloaded library will see it: one source of
	 * truth for the exit code, and its errors shown once, here. */
	struct cg_policy policy;
	cg_policy_load(&policy, environ);
	int exit_code = policy.exit_code, quiet = policy.quiet;
	check_outputs(&policy);
	cg_policy_free(&policy);

	if (!library)
		library = find_library();
	/* LD_PRELOAD takes it as written, in every process of the tree: a
	 * relative path would not preload in one that changed its directory,
	 * which would then run unchecked. */
	char *abs = library && access(library, R_OK) == 0 ? realpath(library, NULL) : NULL;
	if (!abs)
		die("cannot find libctxguard.so (%s); use --library", library ? library : "not found");
	char *preload = preload_first(getenv("LD_PRELOAD"), abs);
	if (!preload)
		die("%s", "out of memory");
	setenv_checked("LD_PRELOAD", preload);
	free(preload);
	free(abs);

	char status[] = "/tmp/ctxguard.status.XXXXXX";
	int sfd = mkstemp(status);
	if (sfd < 0)
		die("cannot create a status file in /tmp: %s", strerror(errno));
	close(sfd);
	setenv_checked("CTXGUARD_STATUS", status);

	child = fork();
	if (child < 0)
		die("fork: %s", strerror(errno));
	if (child == 0) {
		execvp(argv[i], argv + i);
		fprintf(stderr, "ctxguard: cannot run %s: %s\n", argv[i], strerror(errno));
		_exit(127);
	}
	/* The terminal's signals reach the whole process group; the rest are
	 * passed on so the program can clean up. */
	signal(SIGINT, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	signal(SIGTERM, forward);
	signal(SIGHUP, forward);
	int ws;
	while (waitpid(child, &ws, 0) < 0 && errno == EINTR)
		;

	unsigned long counts[CG_ACT_REDIRECT + 1] = {0}, past[NPAST] = {0}, processes = 0,
		      launches = 0;
	FILE *f = fopen(status, "r");
	char line[128];
	while (f && fgets(line, sizeof line, f)) {
		char word[16];
		long pid;
		unsigned long n = 0;
		if (sscanf(line, "%15s %ld %lu", word, &pid, &n) < 1)
			continue;
		/* "exit PID LAUNCHES" as a process ends; an aborting one says
		 * "abort" instead */
		processes += strcmp(word, "exit") == 0 || strcmp(word, "abort") == 0;
		launches += strcmp(word, "exit") == 0 ? n : 0;
		if (cg_action_parse(word) >= 0)
			counts[cg_action_parse(word)]++;
		for (size_t k = 0; k < NPAST; k++)
			past[k] += strcmp(word, past_checks[k].word) == 0;
	}
	if (f)
		fclose(f);
	unlink(status);
	const char *copy = getenv("CTXGUARD_LOG_FILE");
	if (copy && *copy && !strchr(copy, '%'))
		text_copy = fopen(copy, "a");
	unsigned long crossings = counts[CG_ACT_WARN] + counts[CG_ACT_ERROR] +
				  counts[CG_ACT_ABORT] + counts[CG_ACT_REDIRECT];
	if (crossings)
		say("%lu crossing%s reported (abort %lu, error %lu, warn %lu, "
			"redirect %lu)\n", crossings, crossings == 1 ? "" : "s",
			counts[CG_ACT_ABORT], counts[CG_ACT_ERROR], counts[CG_ACT_WARN],
			counts[CG_ACT_REDIRECT]);
	int any_past = 0;
	for (size_t k = 0; k < NPAST; k++) {
		const struct past_checks *w = &past_checks[k];
		if (!past[k])
			continue;
		any_past = 1;
		say("%lu process%s %s\n", past[k], past[k] == 1 ? "" : "es",
		    audit && w->audit_text ? w->audit_text : w->text);
	}
	/* compute-sanitizer's closing line: the guard was there, also when no
	 * process used CUDA (processes that ended by exit or abort). */
	if (!quiet)
		say("%lu process%s, %lu launch%s checked, %lu crossing%s\n", processes,
		    processes == 1 ? "" : "es", launches, launches == 1 ? "" : "es", crossings,
		    crossings == 1 ? "" : "s");
	if (text_copy)
		fclose(text_copy);
	if ((crossings || (audit && any_past)) && exit_code)
		return exit_code;
	if (WIFSIGNALED(ws))
		return 128 + WTERMSIG(ws);
	return WEXITSTATUS(ws);
}
