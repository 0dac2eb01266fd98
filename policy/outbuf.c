/* Bounded text output; see outbuf.h. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "outbuf.h"

void cg_out_init(struct cg_out *o, char *buf, size_t n)
{
	o->buf = n ? buf : NULL;
	o->n = o->buf ? n : 0;
	o->len = 0;
	if (o->n)
		o->buf[0] = '\0';
}

void cg_out_putc(struct cg_out *o, char c)
{
	if (o->len + 1 < o->n) {
		o->buf[o->len] = c;
		o->buf[o->len + 1] = '\0';
	}
	o->len++;
}

void cg_out_write(struct cg_out *o, const char *s, size_t len, int whole)
{
	if (o->len + 1 < o->n) {
		size_t room = o->n - 1 - o->len;
		size_t k = len <= room ? len : whole ? 0 : room;
		memcpy(o->buf + o->len, s, k);
		o->buf[o->len + k] = '\0';
	}
	o->len += len;
}

void cg_out_puts(struct cg_out *o, const char *s)
{
	cg_out_write(o, s, strlen(s), 0);
}

void cg_out_printf(struct cg_out *o, const char *fmt, ...)
{
	size_t room = o->len < o->n ? o->n - o->len : 0;
	va_list ap;

	va_start(ap, fmt);
	int r = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
	va_end(ap);
	if (r > 0)
		o->len += (size_t)r;
}
