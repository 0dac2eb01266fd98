/* Policy loading: built-in defaults, then the policy file, then the
 * CTXGUARD_* variables (the file's grammar: policy/parser.c; the settings:
 * policy/settings.c; the system policy's lock: policy/lock.c).  Loading never fails and never exits: a problem
 * becomes one line in p->errors and the setting keeps its previous, safe
 * value, because a preloaded library must not take the program down over a
 * typo.  File syntax: see policy/default.conf. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lock.h"
#include "settings.h"

/* make SYSCONFDIR=... compiles in another directory for it. */
#ifndef CG_SYSCONFDIR
#define CG_SYSCONFDIR "/etc"
#endif
#define ETC_POLICY CG_SYSCONFDIR "/ctxguard/policy.conf"
#define BUILTIN_ORIGIN "built-in"
#define FILE_MAX_BYTES (1 << 20)

/* ---- sources ---------------------------------------------------------- */

void cg_policy_init(struct cg_policy *p)
{
	memset(p, 0, sizeof *p);
	p->mode = CG_ACT_ABORT;
	p->scope = CG_SCOPE_EXPERTS;
	p->operands = 1;
	p->error_code = 400;        /* CUDA_ERROR_INVALID_HANDLE */
	p->exit_code = 0;
	p->quiet = 0;
	p->defaults = 1;
	p->redirect = CG_REDIRECT_BUNDLED;
	p->redirect_fallback = CG_ACT_ABORT;
	p->log_mode = 0600;         /* a log may name kernels and files */
	p->print_limit = 8;
}

void cg_policy_free(struct cg_policy *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nrules; i++)
		cg_rule_free(&p->rules[i]);
	free(p->rules);
	free(p->log_path);
	free(p->metrics_path);
	free(p->cupti_path);
	free(p->source);
	for (size_t i = 0; i < p->nerrors; i++)
		free(p->errors[i]);
	for (size_t i = 0; i < p->nrefused; i++)
		free(p->refused[i]);
	memset(p, 0, sizeof *p);
}

static const char *env_get(char *const *envp, const char *name)
{
	size_t n = strlen(name);

	for (; envp && *envp; envp++)
		if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
			return *envp + n + 1;
	return NULL;
}

/* The file's text, or NULL with one error line (none when the file is
 * missing and missing_ok).  label names the file in that line. */
static char *read_policy_file(struct cg_policy *p, const char *path,
			      const char *label, int missing_ok)
{
	char why[128];
	/* An unreadable system policy is replaced by a locked one (see
	 * lock_strictest), a user's by the built-in one. */
	const char *instead = missing_ok ? "locked at the strictest built-in policy" :
			      "using the built-in policy";
	/* O_NONBLOCK: opening a FIFO named by mistake must not hang the
	 * program; it is then refused as not a regular file. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	char *text = NULL;
	size_t len = 0;

	if (fd < 0) {
		if (!(missing_ok && errno == ENOENT))
			cg_policy_error(p, "%s: %s (%s)", label,
				  strerror_r(errno, why, sizeof why), instead);
		return NULL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		cg_policy_error(p, "%s: not a regular file (%s)", label, instead);
		goto fail;
	}
	text = malloc(FILE_MAX_BYTES + 1);
	if (!text) {
		cg_policy_error(p, "%s: out of memory (%s)", label, instead);
		goto fail;
	}
	for (;;) {
		ssize_t r = read(fd, text + len, FILE_MAX_BYTES + 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			cg_policy_error(p, "%s: %s (%s)", label,
				  strerror_r(errno, why, sizeof why), instead);
			goto fail;
		}
		if (r == 0)
			break;
		len += (size_t)r;
		if (len > FILE_MAX_BYTES) {
			cg_policy_error(p, "%s: larger than %d bytes (%s)", label,
				  FILE_MAX_BYTES, instead);
			goto fail;
		}
	}
	close(fd);
	text[len] = '\0';
	const char *nul = memchr(text, '\0', len);
	if (nul) {
		unsigned line = 1;
		for (const char *c = text; c < nul; c++)
			line += *c == '\n';
		cg_policy_error(p, "%s:%u: NUL byte (rest of the file ignored)",
			  path, line);
	}
	return text;
fail:
	free(text);
	close(fd);
	return NULL;
}

/* Built-in rules go after the file's, so the file's win.  A file rule
 * does not hide a built-in one of the same name: a stale copy of
 * default.conf in /etc must not mask newer built-in patterns. */
static void add_builtin_rules(struct cg_policy *p)
{
	struct cg_policy builtin;

	cg_policy_init(&builtin);
	cg_policy_parse(&builtin, cg_default_conf, BUILTIN_ORIGIN);
	for (size_t i = 0; i < builtin.nerrors; i++) {
		cg_policy_push_error(p, builtin.errors[i]);
		builtin.errors[i] = NULL;
	}
	p->errors_dropped += builtin.errors_dropped;
	for (size_t i = 0; i < builtin.nrules; i++)
		if (cg_rule_append(p, &builtin.rules[i]) < 0)
			cg_policy_error(p, "%s: out of memory (rule ignored)",
				  builtin.rules[i].where);
	cg_policy_free(&builtin);
}

/* Parse the file at path into p: 1 when it was read as a policy; 0 when
 * it is missing (missing_ok); -1 when it exists but could not be read, or
 * is no policy at all, or loading it ran out of memory (an error says
 * which). */
static int load_file(struct cg_policy *p, const char *path, const char *label,
		     int missing_ok)
{
	size_t before = cg_policy_error_count(p);
	char *text = read_policy_file(p, path, label, missing_ok);

	if (!text)      /* only a missing file is said nothing of */
		return cg_policy_error_count(p) == before ? 0 : -1;
	int oom = p->out_of_memory;
	p->out_of_memory = 0;
	int r = cg_policy_parse_text(p, text, path) < 0 || p->out_of_memory ? -1 : 1;
	p->out_of_memory |= oom;
	free(text);
	return r;
}

/* The system policy exists but could not be read: it may have been a
 * locked one, and running unlocked would let any variable loosen what the
 * operator set.  So the strictest built-in settings are locked instead
 * (the errors saying why are kept). */
static void lock_strictest(struct cg_policy *p, const char *etc_path)
{
	char *errors[CG_POLICY_MAX_ERRORS];
	size_t nerrors = p->nerrors, dropped = p->errors_dropped;
	int secure = p->secure;

	memcpy(errors, p->errors, sizeof errors);
	p->nerrors = 0;
	cg_policy_free(p);
	cg_policy_init(p);
	memcpy(p->errors, errors, sizeof errors);
	p->nerrors = nerrors;
	p->errors_dropped = dropped;
	p->secure = secure;
	p->mode = CG_ACT_ABORT;
	p->scope = CG_SCOPE_ALL;
	p->operands = 1;
	p->lock = 1;
	p->source = strdup(etc_path);
	cg_policy_error(p, "%s cannot be read as a policy: locked at the strictest built-in"
		  " policy (mode abort, scope all, operands on); every loosening is"
		  " refused until the operator fixes the file", etc_path);
}

/* A locked system policy stays the floor: the user's file may add rules
 * after the system's and tighten settings, never replace it. */
static void add_user_file_locked(struct cg_policy *p, const char *path,
				 const char *label, const struct cg_floor *f)
{
	if (strcasecmp(path, "none") == 0) {
		cg_policy_refuse(p, "CTXGUARD_POLICY=none", "its settings and"
				 " rules stay in force (a user file may only"
				 " add rules and tighten)");
		return;
	}
	size_t first = p->nrules;
	/* -1 too: a file cut short by memory may have applied a part. */
	if (load_file(p, path, label, 0) != 0) {
		cg_lock_enforce(p, f, label);
		cg_lock_rules(p, first, f);
	}
}

void cg_policy_load_from(struct cg_policy *p, char *const *envp,
			 const char *etc_path)
{
	cg_policy_init(p);
	/* As the dynamic loader ignores LD_PRELOAD there: in a setuid, setgid
	 * or file-capability program the environment is an untrusted user's. */
	int secure = getauxval(AT_SECURE) != 0;
	if (secure)
		envp = NULL;
	p->secure = secure;

	const char *path = env_get(envp, "CTXGUARD_POLICY");
	int user = path && *path, locked = 0;
	char *label = NULL;
	struct cg_floor floor;

	if (user && asprintf(&label, "CTXGUARD_POLICY=%s", path) < 0)
		label = NULL;
	/* The system file first: its lock decides what the user's may do. */
	int system = etc_path ? load_file(p, etc_path, etc_path, 1) : 0;
	if (system < 0)
		lock_strictest(p, etc_path);
	if (system) {
		if (!p->source)
			p->source = strdup(etc_path);
		locked = p->lock;
		if (locked && cg_floor_take(&floor, p, etc_path) < 0)
			cg_policy_error(p, "%s: out of memory (the log setting is not"
				  " locked)", etc_path);
	}
	if (user && locked) {
		add_user_file_locked(p, path, label ? label : path, &floor);
	} else if (user) {
		/* Unlocked, the user's file replaces the system's. */
		cg_policy_free(p);
		cg_policy_init(p);
		p->secure = secure;
		if (strcasecmp(path, "none") != 0 &&
		    load_file(p, path, label ? label : path, 0) > 0)
			p->source = strdup(path);
		if (p->lock) {
			cg_policy_error(p, "%s: lock = on is honoured only in the"
				  " system policy %s (ignored)",
				  label ? label : path, cg_system_policy);
			p->lock = 0;
		}
	}
	free(label);
	if (!p->source)
		p->source = strdup(BUILTIN_ORIGIN);
	if (p->defaults)
		add_builtin_rules(p);

	for (size_t i = 0; i < cg_nsettings; i++) {
		const struct cg_setting *s = &cg_settings[i];
		const char *value = s->env ? env_get(envp, s->env) : NULL;
		char *what = NULL;
		/* An empty variable is an unset one, as shells use it. */
		if (!value || !*value)
			continue;
		if (asprintf(&what, "%s=%s", s->env, cg_policy_show(value).s) < 0) {
			cg_policy_push_error(p, NULL);
			continue;
		}
		cg_setting_apply(p, s, value, what);
		free(what);
		if (locked)
			cg_lock_enforce(p, &floor, s->env);
	}
	if (locked)
		cg_floor_free(&floor);
}

const char cg_system_policy[] = ETC_POLICY;

void cg_policy_load(struct cg_policy *p, char *const *envp)
{
	cg_policy_load_from(p, envp, ETC_POLICY);
}
