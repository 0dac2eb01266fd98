/* "re:" patterns: parsed into a tree, compiled to a Thompson NFA, searched
 * with a Pike VM (regex.h has the syntax).  Nothing recurses on the
 * program: the epsilon closure uses an explicit stack, so no pattern can
 * overflow the C stack as glibc's calc_eclosure_iter did; the parser and
 * the code generator recurse on the tree, whose depth the pattern's length
 * bounds. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "regex.h"

#define MAX_COUNT 4096  /* m and n of {m,n} */
#define MAX_DEPTH 128   /* nested groups */
#define MAX_LENGTH 1024 /* bytes: the tree's depth (policy/regex_bound.c: 256) */
#define INF (-1)

enum node_type { N_EMPTY, N_BYTE, N_ANY, N_SET, N_BOL, N_EOL, N_CAT, N_ALT, N_REPEAT };

struct node {
	enum node_type type;
	int a, b; /* children (CAT, ALT; REPEAT: a) */
	int m, n; /* REPEAT: {m,n}, n INF for no bound */
	int arg;  /* BYTE: the byte; SET: the set's index */
};

enum op { I_BYTE, I_ANY, I_SET, I_BOL, I_EOL, I_SPLIT, I_JMP, I_MATCH };

struct insn {
	uint8_t op;
	uint8_t byte;
	int x, y; /* SPLIT: both; JMP: x; SET: x the set's index */
};

struct cg_regex {
	struct insn *insn;
	int ninsn;
	uint8_t (*sets)[32]; /* bracket expressions, one bit per byte */
};

struct parser {
	const char *start, *p;
	struct node *nodes;
	int nnodes, cap;
	uint8_t (*sets)[32];
	int nsets, setcap;
	int depth;
	char *err;
	size_t n;
	int failed;
};

static int fail(struct parser *ps, const char *why)
{
	if (!ps->failed)
		snprintf(ps->err, ps->n, "bad regular expression: %s at byte %d", why,
			 (int)(ps->p - ps->start) + 1);
	ps->failed = 1;
	return -1;
}

static int node(struct parser *ps, enum node_type type, int a, int b)
{
	if (ps->nnodes == ps->cap) {
		int cap = ps->cap ? 2 * ps->cap : 64;
		struct node *more = realloc(ps->nodes, (size_t)cap * sizeof *more);
		if (!more)
			return fail(ps, "out of memory");
		ps->nodes = more;
		ps->cap = cap;
	}
	ps->nodes[ps->nnodes] = (struct node){type, a, b, 0, 0, 0};
	return ps->nnodes++;
}

/* ---- bracket expressions ---- */

static void set_bit(uint8_t *set, unsigned c)
{
	set[c >> 3] |= (uint8_t)(1u << (c & 7));
}

/* Whether byte c is in the class name (len bytes): ASCII's classes,
 * whatever the locale; -1 for no such class. */
static int in_class(const char *name, size_t len, unsigned c)
{
	int upper = c >= 'A' && c <= 'Z', lower = c >= 'a' && c <= 'z',
	    digit = c >= '0' && c <= '9';
	int alpha = upper || lower, graph = c > 0x20 && c < 0x7f;
	static const char *const names[] = {"alpha", "digit", "alnum", "upper", "lower", "space",
					    "blank", "punct", "print", "graph", "cntrl", "xdigit"};
	int has[] = {alpha,
		     digit,
		     alpha || digit,
		     upper,
		     lower,
		     c == ' ' || (c >= '\t' && c <= '\r'),
		     c == ' ' || c == '\t',
		     graph && !alpha && !digit,
		     graph || c == ' ',
		     graph,
		     c < 0x20 || c == 0x7f,
		     digit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strlen(names[i]) == len && memcmp(names[i], name, len) == 0)
			return has[i];
	return -1;
}

/* After '[': the bracket expression, as the index of its set. */
static int bracket(struct parser *ps)
{
	if (ps->nsets == ps->setcap) {
		int cap = ps->setcap ? 2 * ps->setcap : 8;
		uint8_t(*more)[32] = realloc(ps->sets, (size_t)cap * sizeof *more);
		if (!more)
			return fail(ps, "out of memory");
		ps->sets = more;
		ps->setcap = cap;
	}
	uint8_t *set = ps->sets[ps->nsets];
	memset(set, 0, 32);
	const char *open = ps->p - 1;
	int negate = *ps->p == '^';
	ps->p += negate;
	for (int first = 1;; first = 0) {
		const unsigned char *c = (const unsigned char *)ps->p;
		if (!*c) {
			ps->p = open;
			return fail(ps, "unmatched [");
		}
		if (*c == ']' && !first) {
			ps->p++;
			break;
		}
		if (c[0] == '[' && (c[1] == '.' || c[1] == '=')) {
			ps->p++;
			return fail(ps, "collating elements and equivalence classes ([. .] [= =])"
					" are not supported");
		}
		if (c[0] == '[' && c[1] == ':') {
			const char *name = ps->p + 2, *close = strstr(name, ":]");
			if (!close || in_class(name, (size_t)(close - name), 'a') < 0) {
				ps->p++;
				return fail(ps, "unknown character class");
			}
			for (unsigned b = 0; b < 256; b++)
				if (in_class(name, (size_t)(close - name), b) == 1)
					set_bit(set, b);
			ps->p = close + 2;
			continue;
		}
		unsigned lo = c[0], hi = lo;
		ps->p++;
		if (c[1] == '-' && c[2] && c[2] != ']') {
			hi = c[2];
			if (c[2] == '[' && (c[3] == '.' || c[3] == '=' || c[3] == ':')) {
				ps->p++;
				return fail(ps, "a range must end in a plain byte");
			}
			if (hi < lo)
				return fail(ps, "a range that ends before it starts");
			ps->p += 2;
		}
		for (unsigned b = lo; b <= hi; b++)
			set_bit(set, b);
	}
	if (negate)
		for (int i = 0; i < 32; i++)
			set[i] = (uint8_t)~set[i];
	return ps->nsets++;
}

/* ---- the parser: alt := cat ('|' cat)*, cat := (atom quantifier?)* ---- */

static int alternation(struct parser *ps);

static int atom(struct parser *ps)
{
	char c = *ps->p++;
	switch (c) {
	case '(': {
		if (++ps->depth > MAX_DEPTH)
			return fail(ps, "groups nested too deep");
		const char *open = ps->p - 1;
		int inner = alternation(ps);
		if (inner < 0)
			return -1;
		if (*ps->p != ')') {
			ps->p = open;
			return fail(ps, "unmatched (");
		}
		ps->p++;
		ps->depth--;
		return inner;
	}
	case '.':
		return node(ps, N_ANY, 0, 0);
	case '^':
		return node(ps, N_BOL, 0, 0);
	case '$':
		return node(ps, N_EOL, 0, 0);
	case '[': {
		int set = bracket(ps);
		if (set < 0)
			return -1;
		int i = node(ps, N_SET, 0, 0);
		if (i >= 0)
			ps->nodes[i].arg = set;
		return i;
	}
	case '\\':
		c = *ps->p++;
		if (!c) {
			ps->p--;
			return fail(ps, "a trailing backslash");
		}
		if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
			ps->p--;
			return fail(ps, "back-references and GNU escapes (\\1, \\w, \\b, \\<...)"
					" are not supported; write a bracket expression");
		}
		break;
	case '*':
	case '+':
	case '?':
	case '{':
		ps->p--;
		return fail(ps, "a repetition with nothing to repeat");
	default:
		break;
	}
	int i = node(ps, N_BYTE, 0, 0);
	if (i >= 0)
		ps->nodes[i].arg = (unsigned char)c;
	return i;
}

static int count(struct parser *ps)
{
	int v = 0;
	while (*ps->p >= '0' && *ps->p <= '9') {
		if (v <= MAX_COUNT)
			v = v * 10 + (*ps->p - '0');
		ps->p++;
	}
	return v;
}

/* The quantifier at ps->p, if any, into *m and *n: 1, or 0 for none. */
static int quantifier(struct parser *ps, int *m, int *n)
{
	const char *at = ps->p;
	switch (*ps->p) {
	case '*':
		*m = 0, *n = INF;
		break;
	case '+':
		*m = 1, *n = INF;
		break;
	case '?':
		*m = 0, *n = 1;
		break;
	case '{': {
		ps->p++;
		int digits = *ps->p >= '0' && *ps->p <= '9';
		*m = count(ps);
		*n = *m;
		if (*ps->p == ',') {
			ps->p++;
			*n = *ps->p >= '0' && *ps->p <= '9' ? count(ps) : INF;
		} else if (!digits) {
			*n = -2;
		}
		if (*ps->p != '}' || *n == -2) {
			ps->p = at;
			return fail(ps, "a '{' that starts no interval {m}, {m,}, {m,n} or {,n}"
					" (write \\{ for the brace)");
		}
		if (*m > MAX_COUNT || *n > MAX_COUNT) {
			ps->p = at;
			return fail(ps, "a repetition count over 4096");
		}
		if (*n != INF && *n < *m) {
			ps->p = at;
			return fail(ps, "an interval {m,n} with n below m");
		}
		break;
	}
	default:
		return 0;
	}
	ps->p++;
	return 1;
}

static int concatenation(struct parser *ps)
{
	int seq = -1;
	while (*ps->p && *ps->p != '|' && *ps->p != ')') {
		int anchor = *ps->p == '^' || *ps->p == '$';
		int a = atom(ps);
		if (a < 0)
			return -1;
		int m, n, q = quantifier(ps, &m, &n);
		if (q < 0)
			return -1;
		if (q) {
			if (anchor) {
				ps->p--;
				return fail(ps, "a repetition of an anchor");
			}
			int r = node(ps, N_REPEAT, a, 0);
			if (r < 0)
				return -1;
			ps->nodes[r].m = m;
			ps->nodes[r].n = n;
			a = r;
			int again = quantifier(ps, &m, &n);
			if (again) {
				if (again > 0)
					ps->p--;
				return fail(ps, "a repetition right after another");
			}
		}
		seq = seq < 0 ? a : node(ps, N_CAT, seq, a);
		if (seq < 0)
			return -1;
	}
	return seq < 0 ? node(ps, N_EMPTY, 0, 0) : seq;
}

static int alternation(struct parser *ps)
{
	int left = concatenation(ps);
	while (left >= 0 && *ps->p == '|') {
		ps->p++;
		int right = concatenation(ps);
		left = right < 0 ? -1 : node(ps, N_ALT, left, right);
	}
	return left;
}

/* ---- code generation ---- */

/* Instructions node i compiles to, saturated just past the bound. */
static long size(const struct node *nodes, int i)
{
	const struct node *nd = &nodes[i];
	long s, e;
	switch (nd->type) {
	case N_EMPTY:
		return 0;
	case N_CAT:
		s = size(nodes, nd->a) + size(nodes, nd->b);
		break;
	case N_ALT:
		s = 2 + size(nodes, nd->a) + size(nodes, nd->b);
		break;
	case N_REPEAT:
		e = size(nodes, nd->a);
		/* e{m} then: e* (split, e, jmp), or the last copy of e+ looping
		 * back (one split), or n-m times e? (split, e) */
		if (nd->n == INF)
			s = nd->m ? (long)nd->m * e + 1 : e + 2;
		else
			s = (long)nd->m * e + (long)(nd->n - nd->m) * (e + 1);
		break;
	default:
		return 1;
	}
	return s > CG_REGEX_MAX_INSNS ? CG_REGEX_MAX_INSNS + 1 : s;
}

static void emit(const struct node *nodes, int i, struct insn *code, int *pc)
{
	const struct node *nd = &nodes[i];
	struct insn *in;
	int at;
	switch (nd->type) {
	case N_EMPTY:
		return;
	case N_BYTE:
		code[(*pc)++] = (struct insn){I_BYTE, (uint8_t)nd->arg, 0, 0};
		return;
	case N_ANY:
		code[(*pc)++] = (struct insn){I_ANY, 0, 0, 0};
		return;
	case N_SET:
		code[(*pc)++] = (struct insn){I_SET, 0, nd->arg, 0};
		return;
	case N_BOL:
	case N_EOL:
		code[(*pc)++] = (struct insn){nd->type == N_BOL ? I_BOL : I_EOL, 0, 0, 0};
		return;
	case N_CAT:
		emit(nodes, nd->a, code, pc);
		emit(nodes, nd->b, code, pc);
		return;
	case N_ALT:
		at = (*pc)++;
		emit(nodes, nd->a, code, pc);
		in = &code[(*pc)++];
		code[at] = (struct insn){I_SPLIT, 0, at + 1, *pc};
		emit(nodes, nd->b, code, pc);
		*in = (struct insn){I_JMP, 0, *pc, 0};
		return;
	case N_REPEAT:
		for (int k = 0; k < nd->m - (nd->n == INF && nd->m > 0); k++)
			emit(nodes, nd->a, code, pc);
		if (nd->n == INF && nd->m > 0) { /* e+ */
			at = *pc;
			emit(nodes, nd->a, code, pc);
			code[*pc] = (struct insn){I_SPLIT, 0, at, *pc + 1};
			(*pc)++;
		} else if (nd->n == INF) { /* e* */
			at = (*pc)++;
			emit(nodes, nd->a, code, pc);
			code[*pc] = (struct insn){I_JMP, 0, at, 0};
			(*pc)++;
			code[at] = (struct insn){I_SPLIT, 0, at + 1, *pc};
		} else { /* e? n-m times */
			for (int k = nd->m; k < nd->n; k++) {
				at = (*pc)++;
				emit(nodes, nd->a, code, pc);
				code[at] = (struct insn){I_SPLIT, 0, at + 1, *pc};
			}
		}
		return;
	}
}

struct cg_regex *cg_regex_compile(const char *pattern, char *err, size_t n)
{
	struct parser ps = {.start = pattern, .p = pattern, .err = err, .n = n};
	struct cg_regex *re = NULL;
	if (strlen(pattern) > MAX_LENGTH) {
		snprintf(err, n, "regular expression over %d bytes", MAX_LENGTH);
		return NULL;
	}
	int root = alternation(&ps);
	if (root >= 0 && *ps.p == ')')
		root = fail(&ps, "unmatched )");
	long len = root >= 0 ? size(ps.nodes, root) + 1 : 0;
	if (root >= 0 && len > CG_REGEX_MAX_INSNS) {
		snprintf(err, n,
			 "regular expression compiles to more than %d instructions,"
			 " a bound that keeps matching fast; repeat less",
			 CG_REGEX_MAX_INSNS);
		root = -1;
	}
	if (root >= 0) {
		re = calloc(1, sizeof *re);
		struct insn *code = re ? malloc((size_t)len * sizeof *code) : NULL;
		if (!code) {
			free(re);
			re = NULL;
			snprintf(err, n, "out of memory");
		} else {
			int pc = 0;
			emit(ps.nodes, root, code, &pc);
			code[pc++] = (struct insn){I_MATCH, 0, 0, 0};
			re->insn = code;
			re->ninsn = pc;
			re->sets = ps.sets;
			ps.sets = NULL;
		}
	}
	free(ps.nodes);
	free(ps.sets);
	return re;
}

void cg_regex_free(struct cg_regex *re)
{
	if (!re)
		return;
	free(re->insn);
	free(re->sets);
	free(re);
}

/* ---- the Pike VM ---- */

struct list {
	int *pc;
	int n;
};

/* pc and everything reachable from it without reading a byte, at position
 * at of s, into l (mark[pc] == stamp: already there).  1 when that reaches
 * MATCH. */
static int add(const struct cg_regex *re, struct list *l, unsigned *mark, unsigned stamp,
	       int *stack, int pc, const char *s, size_t at)
{
	int top = 0;
	if (mark[pc] == stamp)
		return 0;
	mark[pc] = stamp;
	stack[top++] = pc;
	while (top) {
		const struct insn *in = &re->insn[stack[--top]];
		int next[2], nnext = 0;
		switch (in->op) {
		case I_MATCH:
			return 1;
		case I_JMP:
			next[nnext++] = in->x;
			break;
		case I_SPLIT:
			next[nnext++] = in->x;
			next[nnext++] = in->y;
			break;
		case I_BOL:
			if (at == 0)
				next[nnext++] = (int)(in - re->insn) + 1;
			break;
		case I_EOL:
			if (!s[at])
				next[nnext++] = (int)(in - re->insn) + 1;
			break;
		default:
			l->pc[l->n++] = (int)(in - re->insn);
			break;
		}
		for (int k = 0; k < nnext; k++)
			if (mark[next[k]] != stamp) {
				mark[next[k]] = stamp;
				stack[top++] = next[k];
			}
	}
	return 0;
}

int cg_regex_search(const struct cg_regex *re, const char *s)
{
	enum { ON_STACK = 256 };
	int small[4 * ON_STACK];
	int n = re->ninsn;
	int *work = n <= ON_STACK ? small : malloc(4 * (size_t)n * sizeof *work);
	if (!work)
		return 0;
	unsigned *mark = (unsigned *)work;
	memset(mark, 0, (size_t)n * sizeof *mark);
	struct list cur = {work + n, 0}, next = {work + 2 * n, 0};
	int *stack = work + 3 * n;
	unsigned stamp = 1;
	int found = 0;
	for (size_t at = 0;; at++) {
		/* a match may start at any byte: the start joins every step */
		found = add(re, &cur, mark, stamp, stack, 0, s, at);
		unsigned char c = (unsigned char)s[at];
		if (found || !c)
			break;
		next.n = 0;
		stamp++;
		for (int k = 0; k < cur.n && !found; k++) {
			const struct insn *in = &re->insn[cur.pc[k]];
			int takes = in->op == I_ANY || (in->op == I_BYTE && in->byte == c) ||
				    (in->op == I_SET && (re->sets[in->x][c >> 3] >> (c & 7) & 1));
			if (takes)
				found = add(re, &next, mark, stamp, stack, cur.pc[k] + 1, s,
					    at + 1);
		}
		struct list t = cur;
		cur = next;
		next = t;
		if (found)
			break;
	}
	if (work != small)
		free(work);
	return found;
}
