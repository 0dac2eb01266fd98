/* The matcher of "re:" rule patterns: a Thompson NFA run as a Pike VM, so
 * that compiling takes memory and time bounded by the program's size and a
 * search takes time linear in the name (glibc's regcomp took 8 GB, or
 * overflowed its stack, on patterns a few dozen bytes long).
 *
 * Syntax: the POSIX extended (ERE) subset that names need, on bytes.
 *   c        a byte stands for itself (any byte but the specials below)
 *   \c       c literally, for any c but a letter or digit (\. \+ \( \\ \{)
 *   .        any byte
 *   [set]    a bracket expression: bytes, ranges a-z, classes [:alpha:]
 *            [:digit:] [:alnum:] [:upper:] [:lower:] [:space:] [:blank:]
 *            [:punct:] [:print:] [:graph:] [:cntrl:] [:xdigit:] (ASCII,
 *            whatever the locale), [^set] its complement; a ']' first and
 *            a '-' first or last stand for themselves, '\' is literal
 *   ^ $      the start and the end of the name, anywhere in the pattern
 *   (re)     a group, which may be empty
 *   a|b      either; an alternative may be empty
 *   re* re+ re?  re{m} re{m,} re{m,n} re{,n} (as {0,n}); m, n <= 4096
 * Refused, with the reason: back-references (\1), GNU escapes (\w \b \<
 * ...), collating elements and equivalence classes ([.x.] [=x=]), a
 * repetition with nothing before it or right after another (a**), an
 * unmatched '(' or ')', a '{' that starts no interval, and a pattern that
 * compiles to more than CG_REGEX_MAX_INSNS instructions. */
#ifndef CTXGUARD_REGEX_H
#define CTXGUARD_REGEX_H

#include <stddef.h>

/* Instructions a pattern may compile to: the per-byte cost of a search,
 * and (12 bytes each) the program's size. */
#define CG_REGEX_MAX_INSNS 4096

struct cg_regex;

/* The compiled pattern, or NULL with the reason in err (n bytes). */
struct cg_regex *cg_regex_compile(const char *pattern, char *err, size_t n);
/* 1 when re matches anywhere in s, else 0 (also when out of memory). */
int cg_regex_search(const struct cg_regex *re, const char *s);
void cg_regex_free(struct cg_regex *re);

#endif
