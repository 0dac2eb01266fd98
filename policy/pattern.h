/* Compiled rule patterns (policy/match.c), shared with the parser only. */
#ifndef CTXGUARD_PATTERN_H
#define CTXGUARD_PATTERN_H

#include <stddef.h>

#include "regex.h"

enum cg_pattern_kind { CG_PAT_GLOB, CG_PAT_REGEX, CG_PAT_HASH };

/* What a pattern line may hold: kernel and module lines take globs and
 * "re:" regexes, image lines only exact "fnv1a64:" hashes. */
enum cg_pattern_field { CG_FIELD_NAME, CG_FIELD_IMAGE };

struct cg_pattern {
	struct cg_pattern *next;
	enum cg_pattern_kind kind;
	char *text;                /* glob, regex (without "re:") or hash */
	struct cg_regex *re;       /* CG_PAT_REGEX only */
};

/* Compile text and append it to *list.  On a bad pattern, writes why into
 * err (n bytes) and returns -1; the list is left unchanged. */
int cg_pattern_add(struct cg_pattern **list, enum cg_pattern_field field,
		   const char *text, char *err, size_t n);

void cg_pattern_free(struct cg_pattern *list);

/* 0 when the regex (without "re:") is within the bounds on its length,
 * back-references and repetitions (policy/regex_bound.c); else -1 and why
 * in err.  The matcher bounds its program too (regex.h). */
int cg_regex_check(const char *re, char *err, size_t n);

#endif
