/* Rule patterns and rule lookup: shell globs (fnmatch), "re:" extended
 * regexes (our own linear-time matcher, policy/regex.c), and exact
 * "fnv1a64:" image hashes.  Patterns are compiled once at load; matching
 * only reads them, and fnmatch and cg_regex_search are reentrant, so
 * lookups may run on any number of threads. */
#include <ctype.h>
#include <fnmatch.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pattern.h"
#include "policy.h"

#define HASH_PREFIX "fnv1a64:"
#define HASH_DIGITS 16

void cg_fnv1a64_hex(const void *data, size_t len, char out[25])
{
	const unsigned char *b = data;
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < len; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	snprintf(out, 25, HASH_PREFIX "%016llx", (unsigned long long)h);
}

static int valid_hash(const char *s)
{
	if (strncasecmp(s, HASH_PREFIX, strlen(HASH_PREFIX)) != 0)
		return 0;
	s += strlen(HASH_PREFIX);
	for (int i = 0; i < HASH_DIGITS; i++)
		if (!isxdigit((unsigned char)s[i]))
			return 0;
	return s[HASH_DIGITS] == '\0';
}

static int compile(struct cg_pattern *pat, enum cg_pattern_field field,
		   const char *text, char *err, size_t n)
{
	if (field == CG_FIELD_IMAGE) {
		if (!valid_hash(text)) {
			snprintf(err, n, "expected " HASH_PREFIX
				 "<%d hex digits>", HASH_DIGITS);
			return -1;
		}
		pat->kind = CG_PAT_HASH;
		pat->text = strdup(text);
		return 0;
	}
	if (strncmp(text, "re:", 3) == 0) {
		const char *re = text + 3;
		if (!*re) {
			snprintf(err, n, "empty regular expression");
			return -1;
		}
		if (cg_regex_check(re, err, n) < 0 || !(pat->re = cg_regex_compile(re, err, n)))
			return -1;
		pat->kind = CG_PAT_REGEX;
		pat->text = strdup(re);
		if (!pat->text)
			cg_regex_free(pat->re);
		return 0;
	}
	pat->kind = CG_PAT_GLOB;
	pat->text = strdup(text);
	return 0;
}

int cg_pattern_add(struct cg_pattern **list, enum cg_pattern_field field,
		   const char *text, char *err, size_t n)
{
	if (!text || !*text) {
		snprintf(err, n, "empty pattern");
		return -1;
	}
	struct cg_pattern *pat = calloc(1, sizeof *pat);
	if (!pat) {
		snprintf(err, n, "out of memory");
		return -1;
	}
	if (compile(pat, field, text, err, n) < 0) {
		free(pat);
		return -1;
	}
	if (!pat->text) {
		free(pat);
		snprintf(err, n, "out of memory");
		return -1;
	}
	while (*list)
		list = &(*list)->next;
	*list = pat;
	return 0;
}

static int pattern_match(const struct cg_pattern *pat, const char *s)
{
	switch (pat->kind) {
	case CG_PAT_GLOB:
		/* No FNM_PATHNAME/FNM_PERIOD: a "*" also matches "/" and
		 * a leading ".", so one module glob spans a whole path. */
		return fnmatch(pat->text, s, 0) == 0;
	case CG_PAT_REGEX:
		return cg_regex_search(pat->re, s);
	case CG_PAT_HASH:
		return strcasecmp(pat->text, s) == 0;
	}
	return 0;
}

/* 1 when any pattern of list matches s (NULL s never matches). */
static int any_matches(const struct cg_pattern *list, const char *s)
{
	if (!s)
		return 0;
	for (; list; list = list->next)
		if (pattern_match(list, s))
			return 1;
	return 0;
}

void cg_pattern_free(struct cg_pattern *list)
{
	while (list) {
		struct cg_pattern *next = list->next;
		if (list->kind == CG_PAT_REGEX)
			cg_regex_free(list->re);
		free(list->text);
		free(list);
		list = next;
	}
}

int cg_policy_match(const struct cg_policy *p, const char *mangled,
		    const char *demangled, const char *origin_path,
		    const char *image_hash)
{
	if (!p)
		return -1;
	for (size_t i = 0; i < p->nrules; i++) {
		const struct cg_rule *r = &p->rules[i];
		if (any_matches(r->kernels, mangled) ||
		    any_matches(r->kernels, demangled) ||
		    any_matches(r->modules, origin_path) ||
		    any_matches(r->images, image_hash))
			return (int)i;
	}
	return -1;
}

int cg_policy_uses_images(const struct cg_policy *p)
{
	for (size_t i = 0; p && i < p->nrules; i++)
		if (p->rules[i].images)
			return 1;
	return 0;
}

int cg_policy_redirects(const struct cg_policy *p)
{
	if (p && p->mode == CG_ACT_REDIRECT)
		return 1;
	for (size_t i = 0; p && i < p->nrules; i++)
		if (p->rules[i].action == CG_ACT_REDIRECT)
			return 1;
	return 0;
}

int cg_policy_action(const struct cg_policy *p, int rule)
{
	if (!p)
		return CG_ACT_OFF;
	if (rule < 0 || (size_t)rule >= p->nrules)
		return p->scope == CG_SCOPE_ALL ? p->mode : CG_ACT_OFF;
	int a = p->rules[rule].action;
	return a == CG_ACT_UNSET ? p->mode : a;
}
