/* ctxguard [options] -- program [args...]
 *
 * Runs a program with libctxguard.so preloaded, the way compute-sanitizer
 * runs one under its tools, and exits with the program's status — or with
 * --error-exitcode's value when any process of the tree reported a
 * crossing.  Processes report crossings by appending a line to a status
 * file named in CTXGUARD_STATUS. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../policy/policy.h"

extern char **environ;

static const char usage[] =
	"usage: ctxguard [options] -- program [args...]\n"
	"  --mode abort|error|warn|off|redirect  action on a crossing (CTXGUARD_MODE; default abort)\n"
	"  --scope experts|all          check expert kernels only, or every kernel (CTXGUARD_SCOPE)\n"
	"  --operands on|off            check pointer and tensor-map operands (CTXGUARD_OPERANDS)\n"
	"  --policy FILE                policy file (CTXGUARD_POLICY; default: the system policy,\n"
	"                               which --version names)\n"
	"  --log FILE|syslog            JSON-lines event log, %p pid, %h host, %r rank (CTXGUARD_LOG)\n"
	"  --metrics FILE               Prometheus counters written at exit (CTXGUARD_METRICS)\n"
	"  --error-exitcode N           exit with N when a crossing was reported (CTXGUARD_EXIT_CODE)\n"
	"  --quiet                      no per-process summary line (CTXGUARD_QUIET=1)\n"
	"  --backstop                   also check launches that bypass the hooks, through CUPTI\n"
	"                               (CTXGUARD_BACKSTOP=on; CTXGUARD_CUPTI: libcupti's path)\n"
	"  --audit                      --backstop, and --error-exitcode also fires when a launch\n"
	"                               bypassed the hooks, the backstop could not watch, calls\n"
	"                               passed unchecked or cuGetProcAddress handed out a launch,\n"
	"                               load or lookup entry point ctxguard could not map\n"
	"  --shadow                     run the bundled kernel beside each DeepGEMM GEMM and compare\n"
	"                               (CTXGUARD_SHADOW=on; docs/shadow.md)\n"
	"  --library PATH               libctxguard.so to preload (CTXGUARD_LIBRARY)\n"
	"  --version                    print the version and the system policy's path\n";

static void die(const char *fmt, const char *arg)
{
	fprintf(stderr, "ctxguard: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n%s", usage);
	exit(2);
}

/* Next to the command in a build tree, ../lib when installed. */
static const char *find_library(void)
{
	static char path[PATH_MAX], resolved[PATH_MAX];
	const char *env = getenv("CTXGUARD_LIBRARY");
	if (env && *env)
		return env;
	char self[PATH_MAX - 32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0)
		return NULL;
	self[n] = 0;
	char *slash = strrchr(self, '/');
	if (!slash)
		return NULL;
	*slash = 0;
	const char *rel[] = {"/libctxguard.so", "/../lib/libctxguard.so"};
	for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
		snprintf(path, sizeof path, "%s%s", self, rel[i]);
		if (access(path, R_OK) == 0)
			return realpath(path, resolved);
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

static void setenv_checked(const char *name, const char *value)
{
	if (setenv(name, value, 1) != 0)
		die("cannot set %s", name);
}

static pid_t child;

static void forward(int sig)
{
	if (child > 0)
		kill(child, sig);
}

int main(int argc, char **argv)
{
	int i = 1, audit = 0;
	const char *library = NULL;
	for (; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (a[0] != '-')
			break;
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			fputs(usage, stdout);
			return 0;
		}
		if (strcmp(a, "--version") == 0) {
			printf("ctxguard " CTXGUARD_VERSION " (system policy %s)\n", cg_system_policy);
			return 0;
		}
		if (strcmp(a, "--quiet") == 0) {
			setenv_checked("CTXGUARD_QUIET", "1");
			continue;
		}
		if (strcmp(a, "--shadow") == 0) {
			setenv_checked("CTXGUARD_SHADOW", "on");
			continue;
		}
		if (strcmp(a, "--backstop") == 0 || strcmp(a, "--audit") == 0) {
			setenv_checked("CTXGUARD_BACKSTOP", "on");
			audit |= a[2] == 'a';
			continue;
		}
		if (i + 1 >= argc)
			die("%s needs a value", a);
		const char *val = argv[++i];
		if (strcmp(a, "--mode") == 0) {
			if (cg_action_parse(val) < 0)
				die("--mode %s: expected abort, error, warn, off or redirect", val);
			setenv_checked("CTXGUARD_MODE", val);
		} else if (strcmp(a, "--scope") == 0) {
			if (strcmp(val, "experts") && strcmp(val, "all"))
				die("--scope %s: expected experts or all", val);
			setenv_checked("CTXGUARD_SCOPE", val);
		} else if (strcmp(a, "--operands") == 0) {
			if (strcmp(val, "on") && strcmp(val, "off"))
				die("--operands %s: expected on or off", val);
			setenv_checked("CTXGUARD_OPERANDS", val);
		} else if (strcmp(a, "--policy") == 0) {
			/* Absolute: every process of the tree reads it, also
			 * one that changed its directory first. */
			char *abs = access(val, R_OK) == 0 ? realpath(val, NULL) : NULL;
			if (!abs)
				die("--policy %s: cannot read the file", val);
			setenv_checked("CTXGUARD_POLICY", abs);
			free(abs);
		} else if (strcmp(a, "--log") == 0) {
			setenv_checked("CTXGUARD_LOG", val);
		} else if (strcmp(a, "--metrics") == 0) {
			setenv_checked("CTXGUARD_METRICS", val);
		} else if (strcmp(a, "--error-exitcode") == 0) {
			/* Digits only, as the policy reads CTXGUARD_EXIT_CODE:
			 * "+3" or " 3" would pass strtol here and then be
			 * refused there, leaving the program's own status. */
			char *end;
			long n = strtol(val, &end, 10);
			if (!isdigit((unsigned char)val[0]) || *end || n < 0 || n > 255)
				die("--error-exitcode %s: expected 0..255", val);
			setenv_checked("CTXGUARD_EXIT_CODE", val);
		} else if (strcmp(a, "--library") == 0) {
			library = val;
		} else {
			die("unknown option %s", a);
		}
	}
	if (i >= argc)
		die("%s", "no program given");

	/* The policy as the preloaded library will see it: one source of
	 * truth for the exit code, and its errors shown once, here. */
	struct cg_policy policy;
	cg_policy_load(&policy, environ);
	int exit_code = policy.exit_code;
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

	unsigned long counts[CG_ACT_REDIRECT + 1] = {0}, unhooked = 0, unwatched = 0, unchecked = 0,
		      unmapped = 0;
	FILE *f = fopen(status, "r");
	char line[128];
	while (f && fgets(line, sizeof line, f)) {
		char word[16];
		if (sscanf(line, "%15s", word) != 1)
			continue;
		if (cg_action_parse(word) >= 0)
			counts[cg_action_parse(word)]++;
		unhooked += strcmp(word, "unhooked") == 0;
		unwatched += strcmp(word, "unwatched") == 0;
		unchecked += strcmp(word, "unchecked") == 0;
		unmapped += strcmp(word, "unmapped") == 0;
	}
	if (f)
		fclose(f);
	unlink(status);
	unsigned long crossings = counts[CG_ACT_WARN] + counts[CG_ACT_ERROR] +
				  counts[CG_ACT_ABORT] + counts[CG_ACT_REDIRECT];
	if (crossings)
		fprintf(stderr, "ctxguard: %lu crossing%s reported (abort %lu, error %lu, warn %lu, "
			"redirect %lu)\n", crossings, crossings == 1 ? "" : "s",
			counts[CG_ACT_ABORT], counts[CG_ACT_ERROR], counts[CG_ACT_WARN],
			counts[CG_ACT_REDIRECT]);
	/* Each process says each of these once: a launch that bypassed the
	 * hooks, a backstop that could not watch, calls that passed unchecked,
	 * entry points handed out that the hooks could not stand for. */
	if (unhooked)
		fprintf(stderr, "ctxguard: %lu process%s launched kernels that bypassed the hooks "
			"(unhooked; see each summary)\n", unhooked, unhooked == 1 ? "" : "es");
	if (unwatched)
		fprintf(stderr, "ctxguard: %lu process%s ran without the backstop: %s\n", unwatched,
			unwatched == 1 ? "" : "es",
			audit ? "the audit is incomplete" : "launches past the hooks went unseen");
	if (unchecked)
		fprintf(stderr, "ctxguard: %lu process%s let calls pass unchecked, while ctxguard "
			"started or as deprecated launches it could not read (see each process's "
			"stderr)\n", unchecked, unchecked == 1 ? "" : "es");
	if (unmapped)
		fprintf(stderr, "ctxguard: %lu process%s got entry points from cuGetProcAddress that "
			"ctxguard could not hook (unmapped; see each process's stderr)\n", unmapped,
			unmapped == 1 ? "" : "es");
	if ((crossings || (audit && (unhooked || unwatched || unchecked || unmapped))) && exit_code)
		return exit_code;
	if (WIFSIGNALED(ws))
		return 128 + WTERMSIG(ws);
	return WEXITSTATUS(ws);
}
