/* Bounded text output with snprintf's contract: writes at most n bytes,
 * always NUL-terminated when n > 0, and counts the full length so a
 * caller can size a second try.  Shared by the report and JSON writers. */
#ifndef CTXGUARD_OUTBUF_H
#define CTXGUARD_OUTBUF_H

#include <stddef.h>

struct cg_out {
	char *buf;
	size_t n;
	size_t len;                /* bytes wanted so far, may exceed n */
};

void cg_out_init(struct cg_out *o, char *buf, size_t n);
void cg_out_putc(struct cg_out *o, char c);
void cg_out_puts(struct cg_out *o, const char *s);
/* k bytes of s; whole: all of them or none, so that a short buffer never
 * ends inside a unit (an escape, a UTF-8 sequence) -- once one is left
 * out, len has passed n and nothing after it is written either. */
void cg_out_write(struct cg_out *o, const char *s, size_t k, int whole);
/* s escaped for a terminal, newlines too (cg_text_escape; policy/json.c,
 * where the escapes live): a name or path inside a report. */
void cg_out_text(struct cg_out *o, const char *s);
__attribute__((format(printf, 2, 3)))
void cg_out_printf(struct cg_out *o, const char *fmt, ...);

#endif
