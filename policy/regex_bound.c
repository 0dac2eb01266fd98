/* A bound on "re:" patterns, checked before they are compiled.  The policy
 * file is operator input that every process parses at start-up; glibc's
 * regcomp, used until our own matcher (policy/regex.c) replaced it, copied
 * repeated operands ("re:du" and 535 "+" took 1.3 GB).  The matcher bounds
 * its own program (CG_REGEX_MAX_INSNS), which is what keeps memory and
 * time small; this check gives the common excesses their precise reason
 * first: the length, back-references, stacked repetitions, and how many
 * copies the repetitions multiply to ("+" copies its operand once,
 * "{m,n}" n times; counted over the whole pattern, an upper bound for any
 * nesting). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pattern.h"

#define RE_MAX_BYTES 256
#define RE_MAX_COPIES 4096

/* The ']' closing the bracket expression at c, or the string's last byte
 * when there is none (the matcher then rejects it). */
static const char *bracket_end(const char *c)
{
	const char *p = c + 1;
	if (*p == '^')
		p++;
	if (*p == ']')
		p++;
	while (*p && *p != ']') {
		if (p[0] == '[' && p[1] && strchr(":.=", p[1])) {
			char close[3] = {p[1], ']', 0};
			const char *q = strstr(p + 2, close);
			p = q ? q + 2 : p + 1;
		} else {
			p++;
		}
	}
	return *p ? p : p - 1;
}

/* "{m}", "{m,}", "{m,n}" or "{,n}" (glibc reads it as "{0,n}") at c: the
 * copies it makes, its last byte in *end; 0 when it is no interval
 * (the matcher decides what it is).  A count too large for unsigned long
 * saturates, so it can never wrap to "no interval". */
static unsigned long interval(const char *c, const char **end)
{
	char *after = (char *)c + 1;
	unsigned long m = 0, n;
	if (isdigit((unsigned char)c[1]))
		m = strtoul(c + 1, &after, 10);
	else if (c[1] != ',')
		return 0;
	n = m;
	if (*after == ',') {
		if (isdigit((unsigned char)after[1]))
			n = strtoul(after + 1, &after, 10);
		else
			after++;
	}
	if (*after != '}')
		return 0;
	*end = after;
	unsigned long most = n > m ? n : m;
	return most < RE_MAX_COPIES ? most + 1 : RE_MAX_COPIES + 1;
}

int cg_regex_check(const char *re, char *err, size_t n)
{
	size_t len = strlen(re);
	unsigned long copies = 1;
	int after_repetition = 0;

	if (len > RE_MAX_BYTES) {
		snprintf(err, n, "regular expression of %zu bytes, over the bound of %d",
			 len, RE_MAX_BYTES);
		return -1;
	}
	for (const char *c = re; *c; c++) {
		unsigned long factor = 0;
		if (*c == '\\' && isdigit((unsigned char)c[1])) {
			snprintf(err, n, "back-reference \\%c: matching could take"
				 " exponential time", c[1]);
			return -1;
		}
		if (*c == '\\')
			c += c[1] != 0;
		else if (*c == '[')
			c = bracket_end(c);
		else if (*c == '*' || *c == '?')
			factor = 1;
		else if (*c == '+')
			factor = 2;
		else if (*c == '{')
			factor = interval(c, &c);
		if (!factor) {
			after_repetition = 0;
			continue;
		}
		if (after_repetition) {
			snprintf(err, n, "a repetition right after another at byte %zu",
				 (size_t)(c - re) + 1);
			return -1;
		}
		after_repetition = 1;
		if (factor > RE_MAX_COPIES || (copies *= factor) > RE_MAX_COPIES) {
			snprintf(err, n, "its repetitions multiply to more than %d copies",
				 RE_MAX_COPIES);
			return -1;
		}
	}
	return 0;
}
