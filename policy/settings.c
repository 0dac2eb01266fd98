/* The policy's settings: each one's key, variable, kind of value, how a
 * value is read and shown; and the error lines every part of the loader
 * writes (policy/parser.c, policy/loader.c, policy/lock.c). */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "settings.h"

void cg_policy_push_error(struct cg_policy *p, char *line)
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

void cg_policy_error(struct cg_policy *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	char *line = cg_policy_vline(fmt, ap);
	va_end(ap);
	cg_policy_push_error(p, line);
}

struct cg_shown cg_policy_show(const char *v)
{
	struct cg_shown out;
	size_t i = 0;

	for (; v[i] && i < CG_SHOW_MAX; i++) {
		unsigned char c = (unsigned char)v[i];
		out.s[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	strcpy(out.s + i, v[i] ? "..." : "");
	return out;
}

/* ---- settings --------------------------------------------------------- */

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
	[V_ACTION] = {"abort|error|warn|off|redirect", cg_action_parse, show_action},
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

const char *cg_setting_expected(enum value_kind kind)
{
	return kinds[kind].expected;
}

const struct cg_setting cg_settings[] = {
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

const size_t cg_nsettings = sizeof cg_settings / sizeof cg_settings[0];

const struct cg_setting *cg_setting_find(const char *key)
{
	for (size_t i = 0; i < cg_nsettings; i++)
		if (strcasecmp(key, cg_settings[i].key) == 0)
			return &cg_settings[i];
	return NULL;
}

const char *cg_setting_refuses(const char *key, const char *value)
{
	const struct cg_setting *s = cg_setting_find(key);

	if (!s)
		return "a setting the policy knows";
	if (s->kind == V_PATH)
		return *value ? NULL : kinds[V_PATH].expected;
	return kinds[s->kind].parse(value) < 0 ? kinds[s->kind].expected : NULL;
}

void cg_setting_show(const struct cg_policy *p, const char *key, char *buf,
		     size_t n)
{
	const struct cg_setting *s = cg_setting_find(key);

	if (!s)
		snprintf(buf, n, "?");
	else if (s->kind == V_PATH) {
		const char *v = *(char *const *)((const char *)p + s->field);
		snprintf(buf, n, "%s", v ? cg_policy_show(v).s : "none");
	} else
		kinds[s->kind].show(*(const int *)((const char *)p + s->field),
				    buf, n);
}

/* Apply one value.  `what` names it in an error line: "file:3: mode = x"
 * or "CTXGUARD_MODE=x". */
void cg_setting_apply(struct cg_policy *p, const struct cg_setting *s,
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
			cg_policy_error(p, "%s: expected %s (using %s)", what,
				  kinds[V_PATH].expected,
				  *field ? cg_policy_show(*field).s : "none");
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
		cg_policy_error(p, "%s: expected %s (using %s)", what,
			  kinds[s->kind].expected, current);
		return;
	}
	*field = v;
}
