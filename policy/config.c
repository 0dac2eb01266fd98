/* Policy loading: built-in defaults, then the policy file, then the
 * CTXGUARD_* variables.  Loading never fails and never exits: a problem
 * becomes one line in p->errors and the setting keeps its previous, safe
 * value, because a preloaded library must not take the program down over a
 * typo.  File syntax: see policy/default.conf. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lock.h"
#include "pattern.h"
#include "policy.h"

/* make SYSCONFDIR=... compiles in another directory for it. */
#ifndef CG_SYSCONFDIR
#define CG_SYSCONFDIR "/etc"
#endif
#define ETC_POLICY CG_SYSCONFDIR "/ctxguard/policy.conf"
#define BUILTIN_ORIGIN "built-in"
#define LINE_MAX_BYTES 4096
#define FILE_MAX_BYTES (1 << 20)
#define SHOW_MAX 80                 /* longest value quoted in an error */

/* ---- error lines ---------------------------------------------------- */

static void push_error(struct cg_policy *p, char *line)
{
	if (!line)
		p->out_of_memory = 1;
	if (!line || p->nerrors >= CG_POLICY_MAX_ERRORS) {
		free(line);
		p->errors_dropped++;
		return;
	}
	p->errors[p->nerrors++] = line;
}

char *cg_policy_vline(const char *fmt, va_list ap)
{
	char *body = NULL, *line = NULL;

	if (vasprintf(&body, fmt, ap) < 0)
		return NULL;
	if (asprintf(&line, "ctxguard: %s", body) < 0)
		line = NULL;
	free(body);
	return line;
}

__attribute__((format(printf, 2, 3)))
static void add_error(struct cg_policy *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	char *line = cg_policy_vline(fmt, ap);
	va_end(ap);
	push_error(p, line);
}

/* A value as quoted in an error line: bounded, control bytes made
 * visible, so a broken file cannot garble the terminal. */
struct shown {
	char s[SHOW_MAX + 4];
};

static struct shown show(const char *v)
{
	struct shown out;
	size_t i = 0;

	for (; v[i] && i < SHOW_MAX; i++) {
		unsigned char c = (unsigned char)v[i];
		out.s[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	strcpy(out.s + i, v[i] ? "..." : "");
	return out;
}

/* ---- settings --------------------------------------------------------- */

enum value_kind { V_ACTION, V_SCOPE, V_BOOL, V_ERROR_CODE, V_EXIT_CODE,
		  V_PATH, V_REDIRECT, V_FALLBACK, V_FILE_MODE, V_COUNT };

static int parse_mode(const char *s)
{
	return cg_action_parse(s);
}

static int parse_scope(const char *s)
{
	if (strcasecmp(s, "experts") == 0)
		return CG_SCOPE_EXPERTS;
	if (strcasecmp(s, "all") == 0)
		return CG_SCOPE_ALL;
	return -1;
}

static int parse_redirect(const char *s)
{
	if (strcasecmp(s, "bundled") == 0)
		return CG_REDIRECT_BUNDLED;
	if (strcasecmp(s, "rehome") == 0)
		return CG_REDIRECT_REHOME;
	return -1;
}

/* What a redirect that cannot be done falls back to: stopping, never
 * letting the crossing run. */
static int parse_fallback(const char *s)
{
	int a = cg_action_parse(s);
	return a == CG_ACT_ABORT || a == CG_ACT_ERROR ? a : -1;
}

static int parse_bool(const char *s)
{
	static const char *const words[][2] = {
		{"off", "on"}, {"0", "1"}, {"no", "yes"}, {"false", "true"},
	};
	for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
		for (int v = 0; v < 2; v++)
			if (strcasecmp(s, words[i][v]) == 0)
				return v;
	return -1;
}

/* Digits only, in base, at most max; else -1. */
static int parse_number(const char *s, int base, long max)
{
	char *end;

	if (!isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	long v = strtol(s, &end, base);
	return errno || *end || v > max ? -1 : (int)v;
}

static int parse_exit_code(const char *s)
{
	return parse_number(s, 10, 255);
}

static int parse_count(const char *s)
{
	return parse_number(s, 10, 1000000);
}

/* Permission bits in octal, as chmod takes them. */
static int parse_file_mode(const char *s)
{
	return parse_number(s, 8, 0777);
}

static void show_file_mode(int v, char *buf, size_t n)
{
	snprintf(buf, n, "%04o", (unsigned)v);
}

static void show_action(int v, char *buf, size_t n)
{
	snprintf(buf, n, "%s", cg_action_name(v));
}

static void show_scope(int v, char *buf, size_t n)
{
	snprintf(buf, n, "%s", v == CG_SCOPE_ALL ? "all" : "experts");
}

static void show_bool(int v, char *buf, size_t n)
{
	snprintf(buf, n, "%s", v ? "on" : "off");
}

static void show_error_code(int v, char *buf, size_t n)
{
	const char *name = cg_cuda_error_name(v);
	if (name)
		snprintf(buf, n, "%s", name);
	else
		snprintf(buf, n, "%d", v);
}

static void show_redirect(int v, char *buf, size_t n)
{
	snprintf(buf, n, "%s", v == CG_REDIRECT_REHOME ? "rehome" : "bundled");
}

static void show_int(int v, char *buf, size_t n)
{
	snprintf(buf, n, "%d", v);
}

static const struct {
	const char *expected;
	int (*parse)(const char *s);       /* -1: not a valid value */
	void (*show)(int v, char *buf, size_t n);
} kinds[] = {
	[V_ACTION] = {"abort|error|warn|off|redirect", parse_mode, show_action},
	[V_SCOPE] = {"experts|all", parse_scope, show_scope},
	[V_BOOL] = {"on|off", parse_bool, show_bool},
	[V_ERROR_CODE] = {"a CUDA error name such as CUDA_ERROR_INVALID_HANDLE"
			  " or a number 1-999", cg_cuda_error_parse,
			  show_error_code},
	[V_EXIT_CODE] = {"a number 0-255", parse_exit_code, show_int},
	[V_PATH] = {"a file path or none", NULL, NULL},
	[V_REDIRECT] = {"bundled|rehome", parse_redirect, show_redirect},
	[V_FALLBACK] = {"abort|error", parse_fallback, show_action},
	[V_FILE_MODE] = {"octal permission bits 0-0777", parse_file_mode,
			 show_file_mode},
	[V_COUNT] = {"a number 0-1000000", parse_count, show_int},
};

static const struct setting {
	const char *key;
	const char *env;            /* NULL: the file only */
	enum value_kind kind;
	size_t field;               /* int, or char * for V_PATH */
} settings[] = {
	{"mode", "CTXGUARD_MODE", V_ACTION, offsetof(struct cg_policy, mode)},
	{"scope", "CTXGUARD_SCOPE", V_SCOPE, offsetof(struct cg_policy, scope)},
	{"operands", "CTXGUARD_OPERANDS", V_BOOL,
	 offsetof(struct cg_policy, operands)},
	{"error_code", "CTXGUARD_ERROR_CODE", V_ERROR_CODE,
	 offsetof(struct cg_policy, error_code)},
	{"exit_code", "CTXGUARD_EXIT_CODE", V_EXIT_CODE,
	 offsetof(struct cg_policy, exit_code)},
	{"quiet", "CTXGUARD_QUIET", V_BOOL, offsetof(struct cg_policy, quiet)},
	{"backstop", "CTXGUARD_BACKSTOP", V_BOOL,
	 offsetof(struct cg_policy, backstop)},
	{"shadow", "CTXGUARD_SHADOW", V_BOOL, offsetof(struct cg_policy, shadow)},
	{"log", "CTXGUARD_LOG", V_PATH, offsetof(struct cg_policy, log_path)},
	{"redirect", "CTXGUARD_REDIRECT", V_REDIRECT, offsetof(struct cg_policy, redirect)},
	{"redirect_fallback", "CTXGUARD_REDIRECT_FALLBACK", V_FALLBACK,
	 offsetof(struct cg_policy, redirect_fallback)},
	{"metrics", "CTXGUARD_METRICS", V_PATH, offsetof(struct cg_policy, metrics_path)},
	/* File only (CTXGUARD_CUPTI is the variable, refused under a lock):
	 * a locked backstop loads this file and no other. */
	{"cupti", NULL, V_PATH, offsetof(struct cg_policy, cupti_path)},
	{"print_limit", "CTXGUARD_PRINT_LIMIT", V_COUNT, offsetof(struct cg_policy, print_limit)},
	/* File only: the built-in rules are dropped only by a file that
	 * brings rules of its own. */
	{"defaults", NULL, V_BOOL, offsetof(struct cg_policy, defaults)},
	{"log_mode", NULL, V_FILE_MODE, offsetof(struct cg_policy, log_mode)},
	/* Honoured in the system policy only (policy/lock.c). */
	{"lock", NULL, V_BOOL, offsetof(struct cg_policy, lock)},
};

#define NSETTINGS (sizeof settings / sizeof settings[0])

static const struct setting *find_setting(const char *key)
{
	for (size_t i = 0; i < NSETTINGS; i++)
		if (strcasecmp(key, settings[i].key) == 0)
			return &settings[i];
	return NULL;
}

const char *cg_setting_refuses(const char *key, const char *value)
{
	const struct setting *s = find_setting(key);

	if (!s)
		return "a setting the policy knows";
	if (s->kind == V_PATH)
		return *value ? NULL : kinds[V_PATH].expected;
	return kinds[s->kind].parse(value) < 0 ? kinds[s->kind].expected : NULL;
}

void cg_setting_show(const struct cg_policy *p, const char *key, char *buf,
		     size_t n)
{
	const struct setting *s = find_setting(key);

	if (!s)
		snprintf(buf, n, "?");
	else if (s->kind == V_PATH) {
		const char *v = *(char *const *)((const char *)p + s->field);
		snprintf(buf, n, "%s", v ? show(v).s : "none");
	} else
		kinds[s->kind].show(*(const int *)((const char *)p + s->field),
				    buf, n);
}

/* Apply one value.  `what` names it in an error line: "file:3: mode = x"
 * or "CTXGUARD_MODE=x". */
static void apply_setting(struct cg_policy *p, const struct setting *s,
			  const char *value, const char *what)
{
	char current[96];

	if (s->kind == V_PATH) {
		char **field = (char **)((char *)p + s->field);
		if (strcasecmp(value, "none") == 0) {
			free(*field);
			*field = NULL;
			return;
		}
		char *copy = *value ? strdup(value) : NULL;
		if (!copy) {
			add_error(p, "%s: expected %s (using %s)", what,
				  kinds[V_PATH].expected,
				  *field ? show(*field).s : "none");
			return;
		}
		free(*field);
		*field = copy;
		return;
	}
	int *field = (int *)((char *)p + s->field);
	int v = kinds[s->kind].parse(value);
	if (v < 0) {
		kinds[s->kind].show(*field, current, sizeof current);
		add_error(p, "%s: expected %s (using %s)", what,
			  kinds[s->kind].expected, current);
		return;
	}
	*field = v;
}

/* ---- rules ------------------------------------------------------------ */

enum rule_key { RK_KERNEL, RK_MODULE, RK_IMAGE, RK_ACTION, RK_MESSAGE,
		RK_FIX, RK_COUNT };

static const char *const rule_keys[RK_COUNT] = {
	[RK_KERNEL] = "kernel", [RK_MODULE] = "module", [RK_IMAGE] = "image",
	[RK_ACTION] = "action", [RK_MESSAGE] = "message", [RK_FIX] = "fix",
};

static int find_rule_key(const char *key)
{
	for (int k = 0; k < RK_COUNT; k++)
		if (strcasecmp(key, rule_keys[k]) == 0)
			return k;
	return -1;
}

static void rule_free(struct cg_rule *r)
{
	free(r->name);
	free(r->where);
	cg_pattern_free(r->kernels);
	cg_pattern_free(r->modules);
	cg_pattern_free(r->images);
	free(r->message);
	free(r->fix);
	memset(r, 0, sizeof *r);
}

static int append_rule(struct cg_policy *p, struct cg_rule *r)
{
	if ((p->nrules & (p->nrules - 1)) == 0) {  /* 0 or a power of 2 */
		size_t cap = p->nrules ? 2 * p->nrules : 4;
		struct cg_rule *grown = realloc(p->rules, cap * sizeof *grown);
		if (!grown)
			return -1;
		p->rules = grown;
	}
	p->rules[p->nrules++] = *r;
	memset(r, 0, sizeof *r);
	return 0;
}

/* ---- the parser ------------------------------------------------------- */

enum section { SEC_GLOBAL, SEC_RULE, SEC_SKIP };

struct parser {
	struct cg_policy *p;
	const char *origin;
	unsigned line;
	enum section section;
	struct cg_rule rule;        /* the [rule] being read */
	int pattern_lines;          /* its kernel/module/image lines */
};

__attribute__((format(printf, 2, 3)))
static void line_error(struct parser *ps, const char *fmt, ...)
{
	char *body = NULL;
	va_list ap;

	va_start(ap, fmt);
	int r = vasprintf(&body, fmt, ap);
	va_end(ap);
	if (r < 0) {
		push_error(ps->p, NULL);
		return;
	}
	add_error(ps->p, "%s:%u: %s", ps->origin, ps->line, body);
	free(body);
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *end = s + strlen(s);
	while (end > s && isspace((unsigned char)end[-1]))
		*--end = '\0';
	return s;
}

/* "#" starts a comment at the start of a line or after white space, so
 * that values may still hold a "#" of their own. */
static void strip_comment(char *s)
{
	for (char *c = s; *c; c++)
		if (*c == '#' && (c == s || isspace((unsigned char)c[-1]))) {
			*c = '\0';
			return;
		}
}

static void finish_rule(struct parser *ps)
{
	struct cg_rule *r = &ps->rule;

	if (ps->section != SEC_RULE)
		return;
	ps->section = SEC_SKIP;
	if (!ps->pattern_lines)
		add_error(ps->p, "%s: [rule %s] has no kernel, module or image"
			  " line (rule ignored)", r->where, r->name);
	/* A rule whose every pattern was bad matches nothing; its lines are
	 * already reported. */
	if (!r->kernels && !r->modules && !r->images) {
		rule_free(r);
		return;
	}
	if (append_rule(ps->p, r) < 0) {
		add_error(ps->p, "%s: out of memory (rule ignored)", r->where);
		rule_free(r);
	}
}

static int valid_rule_name(const char *s)
{
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("_-.", *s))
			return 0;
	return 1;
}

static void start_rule(struct parser *ps, const char *name)
{
	struct cg_rule *r = &ps->rule;

	memset(r, 0, sizeof *r);
	r->action = CG_ACT_UNSET;
	r->name = strdup(name);
	if (asprintf(&r->where, "%s:%u", ps->origin, ps->line) < 0)
		r->where = NULL;
	if (!r->name || !r->where) {
		line_error(ps, "out of memory (section ignored)");
		rule_free(r);
		return;
	}
	ps->pattern_lines = 0;
	ps->section = SEC_RULE;
}

static void section_header(struct parser *ps, char *s)
{
	finish_rule(ps);
	ps->section = SEC_SKIP;

	char *close = strchr(s, ']');
	if (!close) {
		line_error(ps, "unterminated section header '%s' (section"
			   " ignored)", show(s).s);
		return;
	}
	if (close[1]) {
		line_error(ps, "unexpected text after ']': '%s' (section"
			   " ignored)", show(close + 1).s);
		return;
	}
	*close = '\0';
	char *inner = trim(s + 1);
	if (strncasecmp(inner, "rule", 4) != 0 ||
	    (inner[4] && !isspace((unsigned char)inner[4]))) {
		line_error(ps, "unknown section [%s], expected [rule NAME]"
			   " (section ignored)", show(inner).s);
		return;
	}
	char *name = trim(inner + 4);
	if (!*name) {
		line_error(ps, "[rule] without a name (section ignored)");
		return;
	}
	if (!valid_rule_name(name)) {
		line_error(ps, "rule name '%s' may hold only letters, digits,"
			   " '_', '-' and '.' (section ignored)",
			   show(name).s);
		return;
	}
	start_rule(ps, name);
}

static void set_text(struct parser *ps, char **field, const char *key,
		     const char *value, const char *fallback)
{
	char *copy = *value ? strdup(value) : NULL;

	if (!copy) {
		line_error(ps, "%s = %s: expected some text (using %s)", key,
			   show(value).s, *field ? "the earlier one" : fallback);
		return;
	}
	free(*field);
	*field = copy;
}

static void rule_line(struct parser *ps, int key, const char *value)
{
	struct cg_rule *r = &ps->rule;
	struct cg_pattern **lists[] = {
		[RK_KERNEL] = &r->kernels, [RK_MODULE] = &r->modules,
		[RK_IMAGE] = &r->images,
	};
	char why[192];

	switch (key) {
	case RK_KERNEL:
	case RK_MODULE:
	case RK_IMAGE:
		ps->pattern_lines++;
		if (cg_pattern_add(lists[key], key == RK_IMAGE ?
				   CG_FIELD_IMAGE : CG_FIELD_NAME,
				   value, why, sizeof why) < 0)
			line_error(ps, "%s = %s: %s (pattern ignored)",
				   rule_keys[key], show(value).s, why);
		return;
	case RK_ACTION: {
		int a = cg_action_parse(value);
		if (a < 0)
			line_error(ps, "action = %s: expected %s (using %s)",
				   show(value).s, kinds[V_ACTION].expected,
				   r->action == CG_ACT_UNSET ? "the global mode" :
				   cg_action_name(r->action));
		else
			r->action = a;
		return;
	}
	case RK_MESSAGE:
		set_text(ps, &r->message, "message", value,
			 "the generic message");
		return;
	case RK_FIX:
		set_text(ps, &r->fix, "fix", value, "the generic advice");
		return;
	}
}

static void key_value(struct parser *ps, char *s)
{
	char *eq = strchr(s, '=');

	if (!eq) {
		line_error(ps, "expected 'key = value' or '[rule NAME]', got"
			   " '%s' (line ignored)", show(s).s);
		return;
	}
	*eq = '\0';
	char *key = trim(s), *value = trim(eq + 1);
	if (!*key) {
		line_error(ps, "no key before '=' (line ignored)");
		return;
	}
	const struct setting *setting = find_setting(key);
	int rk = find_rule_key(key);

	if (ps->section == SEC_RULE) {
		if (rk >= 0)
			rule_line(ps, rk, value);
		else if (setting)
			line_error(ps, "'%s' is a global setting and belongs"
				   " before the first [rule] (line ignored)",
				   setting->key);
		else
			line_error(ps, "unknown key '%s' in [rule %s] (line"
				   " ignored)", show(key).s, ps->rule.name);
		return;
	}
	if (setting) {
		char *what = NULL;
		if (asprintf(&what, "%s:%u: %s = %s", ps->origin, ps->line,
			     setting->key, show(value).s) < 0) {
			push_error(ps->p, NULL);
			return;
		}
		apply_setting(ps->p, setting, value, what);
		free(what);
	} else if (rk >= 0) {
		line_error(ps, "'%s' outside a [rule] section (line ignored)",
			   rule_keys[rk]);
	} else {
		line_error(ps, "unknown key '%s' (line ignored)",
			   show(key).s);
	}
}

static void parse_line(struct parser *ps, char *s)
{
	strip_comment(s);
	s = trim(s);
	if (!*s)
		return;
	if (*s == '[')
		section_header(ps, s);
	else if (ps->section != SEC_SKIP)
		key_value(ps, s);
}

static size_t error_count(const struct cg_policy *p)
{
	return p->nerrors + p->errors_dropped;
}

/* Whether text reads as a policy at all: its first line that is not blank
 * or a comment is a setting or a [rule] header.  Otherwise (a secret file
 * named by mistake or malice: /etc/shadow) none of its lines may be quoted
 * in an error; *line is that first line's number. */
static int policy_shaped(const char *text, unsigned *line)
{
	char buf[LINE_MAX_BYTES + 1];

	for (*line = 1; text && *text; ++*line) {
		size_t len = strcspn(text, "\n");
		if (len > LINE_MAX_BYTES)
			return 0;
		memcpy(buf, text, len);
		buf[len] = '\0';
		text += len + (text[len] == '\n');
		strip_comment(buf);
		char *s = trim(buf);
		if (!*s)
			continue;
		if (*s == '[')
			return strncasecmp(s + 1, "rule", 4) == 0 &&
			       (!s[5] || s[5] == ']' || isspace((unsigned char)s[5]));
		char *eq = strchr(s, '=');
		if (!eq)
			return 0;
		*eq = '\0';
		char *key = trim(s);
		return find_setting(key) || find_rule_key(key) >= 0;
	}
	return 1;
}

/* -1: text is no policy (one error line, nothing applied); else the
 * number of errors it added. */
static int parse_text(struct cg_policy *p, const char *text, const char *origin)
{
	struct parser ps = { .p = p, .origin = origin ? origin : "policy",
			     .section = SEC_GLOBAL };
	char buf[LINE_MAX_BYTES + 1];
	size_t before = error_count(p);

	if (!policy_shaped(text, &ps.line)) {
		add_error(p, "%s:%u: not a policy file: expected a setting or a [rule NAME]"
			  " header first (file ignored; none of its lines is quoted)",
			  ps.origin, ps.line);
		return -1;
	}
	ps.line = 0;
	while (text && *text) {
		const char *nl = strchr(text, '\n');
		size_t len = nl ? (size_t)(nl - text) : strlen(text);
		ps.line++;
		if (len > LINE_MAX_BYTES) {
			line_error(&ps, "line longer than %d bytes (line"
				   " ignored)", LINE_MAX_BYTES);
			/* A lost header must not leave its lines to the
			 * previous rule. */
			size_t lead = strspn(text, " \t");
			if (text[lead] == '[') {
				finish_rule(&ps);
				ps.section = SEC_SKIP;
			}
		} else {
			memcpy(buf, text, len);
			buf[len] = '\0';
			parse_line(&ps, buf);
		}
		text += len + (nl != NULL);
	}
	finish_rule(&ps);
	return (int)(error_count(p) - before);
}

int cg_policy_parse(struct cg_policy *p, const char *text, const char *origin)
{
	size_t before = error_count(p);

	parse_text(p, text, origin);
	return (int)(error_count(p) - before);
}

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
		rule_free(&p->rules[i]);
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
			add_error(p, "%s: %s (%s)", label,
				  strerror_r(errno, why, sizeof why), instead);
		return NULL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		add_error(p, "%s: not a regular file (%s)", label, instead);
		goto fail;
	}
	text = malloc(FILE_MAX_BYTES + 1);
	if (!text) {
		add_error(p, "%s: out of memory (%s)", label, instead);
		goto fail;
	}
	for (;;) {
		ssize_t r = read(fd, text + len, FILE_MAX_BYTES + 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			add_error(p, "%s: %s (%s)", label,
				  strerror_r(errno, why, sizeof why), instead);
			goto fail;
		}
		if (r == 0)
			break;
		len += (size_t)r;
		if (len > FILE_MAX_BYTES) {
			add_error(p, "%s: larger than %d bytes (%s)", label,
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
		add_error(p, "%s:%u: NUL byte (rest of the file ignored)",
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
		push_error(p, builtin.errors[i]);
		builtin.errors[i] = NULL;
	}
	p->errors_dropped += builtin.errors_dropped;
	for (size_t i = 0; i < builtin.nrules; i++)
		if (append_rule(p, &builtin.rules[i]) < 0)
			add_error(p, "%s: out of memory (rule ignored)",
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
	size_t before = error_count(p);
	char *text = read_policy_file(p, path, label, missing_ok);

	if (!text)      /* only a missing file is said nothing of */
		return error_count(p) == before ? 0 : -1;
	int oom = p->out_of_memory;
	p->out_of_memory = 0;
	int r = parse_text(p, text, path) < 0 || p->out_of_memory ? -1 : 1;
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
	add_error(p, "%s cannot be read as a policy: locked at the strictest built-in"
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
			add_error(p, "%s: out of memory (the log setting is not"
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
			add_error(p, "%s: lock = on is honoured only in the"
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

	for (size_t i = 0; i < NSETTINGS; i++) {
		const struct setting *s = &settings[i];
		const char *value = s->env ? env_get(envp, s->env) : NULL;
		char *what = NULL;
		/* An empty variable is an unset one, as shells use it. */
		if (!value || !*value)
			continue;
		if (asprintf(&what, "%s=%s", s->env, show(value).s) < 0) {
			push_error(p, NULL);
			continue;
		}
		apply_setting(p, s, value, what);
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
