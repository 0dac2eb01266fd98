/* Inside the policy loader (policy/settings.c, parser.c, loader.c, lock.c):
 * the settings table, error lines, and the parser's entry for the loader. */
#ifndef CTXGUARD_SETTINGS_H
#define CTXGUARD_SETTINGS_H

#include <stdarg.h>
#include <stddef.h>

#include "policy.h"

/* ---- error lines (policy/settings.c) ---- */

/* line (malloc'ed; NULL: out of memory) appended to p->errors, or counted
 * as dropped past CG_POLICY_MAX_ERRORS. */
void cg_policy_push_error(struct cg_policy *p, char *line);
/* "ctxguard: " and the formatted text, malloc'ed; NULL when out of memory. */
char *cg_policy_vline(const char *fmt, va_list ap);
void cg_policy_error(struct cg_policy *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* A value as quoted in an error line: bounded, control bytes made
 * visible, so a broken file cannot garble the terminal. */
enum { CG_SHOW_MAX = 80 }; /* longest value quoted */
struct cg_shown {
	char s[CG_SHOW_MAX + 4];
};
struct cg_shown cg_policy_show(const char *v);

/* ---- settings (policy/settings.c) ---- */

enum value_kind {
	V_ACTION,
	V_SCOPE,
	V_BOOL,
	V_ERROR_CODE,
	V_EXIT_CODE,
	V_PATH,
	V_REDIRECT,
	V_FALLBACK,
	V_FILE_MODE,
	V_COUNT
};

struct cg_setting {
	const char *key;
	const char *env; /* NULL: the file only */
	enum value_kind kind;
	size_t field; /* int, or char * for V_PATH */
};
/* What a value of kind must be, for an error line. */
const char *cg_setting_expected(enum value_kind kind);
extern const struct cg_setting cg_settings[];
extern const size_t cg_nsettings;
const struct cg_setting *cg_setting_find(const char *key);
/* Apply one value.  `what` names it in an error line: "file:3: mode = x"
 * or "CTXGUARD_MODE=x". */
void cg_setting_apply(struct cg_policy *p, const struct cg_setting *s, const char *value,
		      const char *what);
/* The text of setting `key` in p as the file would write it. */
void cg_setting_show(const struct cg_policy *p, const char *key, char *buf, size_t n);

/* ---- the file's grammar (policy/parser.c) ---- */

/* -1: text is no policy (one error line, nothing applied); else the
 * number of error lines parsing text (from origin) added to p. */
int cg_policy_parse_text(struct cg_policy *p, const char *text, const char *origin);
size_t cg_policy_error_count(const struct cg_policy *p);
void cg_rule_free(struct cg_rule *r);
/* r moved into p (r zeroed); -1 when out of memory. */
int cg_rule_append(struct cg_policy *p, struct cg_rule *r);

#endif
