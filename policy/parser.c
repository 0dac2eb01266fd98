/* The policy file's grammar: sections, rules and settings, line by line
 * (policy/default.conf shows it).  A problem is one error line, never a
 * failure: the setting or rule keeps its previous, safe value. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pattern.h"
#include "settings.h"

#define LINE_MAX_BYTES 4096

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

void cg_rule_free(struct cg_rule *r)
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

int cg_rule_append(struct cg_policy *p, struct cg_rule *r)
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
		cg_policy_push_error(ps->p, NULL);
		return;
	}
	cg_policy_error(ps->p, "%s:%u: %s", ps->origin, ps->line, body);
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
		cg_policy_error(ps->p, "%s: [rule %s] has no kernel, module or image"
			  " line (rule ignored)", r->where, r->name);
	/* A rule whose every pattern was bad matches nothing; its lines are
	 * already reported. */
	if (!r->kernels && !r->modules && !r->images) {
		cg_rule_free(r);
		return;
	}
	if (cg_rule_append(ps->p, r) < 0) {
		cg_policy_error(ps->p, "%s: out of memory (rule ignored)", r->where);
		cg_rule_free(r);
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
		cg_rule_free(r);
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
			   " ignored)", cg_policy_show(s).s);
		return;
	}
	if (close[1]) {
		line_error(ps, "unexpected text after ']': '%s' (section"
			   " ignored)", cg_policy_show(close + 1).s);
		return;
	}
	*close = '\0';
	char *inner = trim(s + 1);
	if (strncasecmp(inner, "rule", 4) != 0 ||
	    (inner[4] && !isspace((unsigned char)inner[4]))) {
		line_error(ps, "unknown section [%s], expected [rule NAME]"
			   " (section ignored)", cg_policy_show(inner).s);
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
			   cg_policy_show(name).s);
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
			   cg_policy_show(value).s, *field ? "the earlier one" : fallback);
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
				   rule_keys[key], cg_policy_show(value).s, why);
		return;
	case RK_ACTION: {
		int a = cg_action_parse(value);
		if (a < 0)
			line_error(ps, "action = %s: expected %s (using %s)",
				   cg_policy_show(value).s, cg_setting_expected(V_ACTION),
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
			   " '%s' (line ignored)", cg_policy_show(s).s);
		return;
	}
	*eq = '\0';
	char *key = trim(s), *value = trim(eq + 1);
	if (!*key) {
		line_error(ps, "no key before '=' (line ignored)");
		return;
	}
	const struct cg_setting *setting = cg_setting_find(key);
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
				   " ignored)", cg_policy_show(key).s, ps->rule.name);
		return;
	}
	if (setting) {
		char *what = NULL;
		if (asprintf(&what, "%s:%u: %s = %s", ps->origin, ps->line,
			     setting->key, cg_policy_show(value).s) < 0) {
			cg_policy_push_error(ps->p, NULL);
			return;
		}
		cg_setting_apply(ps->p, setting, value, what);
		free(what);
	} else if (rk >= 0) {
		line_error(ps, "'%s' outside a [rule] section (line ignored)",
			   rule_keys[rk]);
	} else {
		line_error(ps, "unknown key '%s' (line ignored)",
			   cg_policy_show(key).s);
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

size_t cg_policy_error_count(const struct cg_policy *p)
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
		return cg_setting_find(key) || find_rule_key(key) >= 0;
	}
	return 1;
}

/* -1: text is no policy (one error line, nothing applied); else the
 * number of errors it added. */
int cg_policy_parse_text(struct cg_policy *p, const char *text, const char *origin)
{
	struct parser ps = { .p = p, .origin = origin ? origin : "policy",
			     .section = SEC_GLOBAL };
	char buf[LINE_MAX_BYTES + 1];
	size_t before = cg_policy_error_count(p);

	if (!policy_shaped(text, &ps.line)) {
		cg_policy_error(p, "%s:%u: not a policy file: expected a setting or a [rule NAME]"
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
	return (int)(cg_policy_error_count(p) - before);
}

int cg_policy_parse(struct cg_policy *p, const char *text, const char *origin)
{
	size_t before = cg_policy_error_count(p);

	cg_policy_parse_text(p, text, origin);
	return (int)(cg_policy_error_count(p) - before);
}
