/* A crossing as one JSON object, for the JSON-lines log.  Strings are
 * escaped to valid JSON whatever the bytes: kernel names and paths come
 * from the program and need not be UTF-8. */
#include <inttypes.h>
#include <stdint.h>

#include "outbuf.h"
#include "policy.h"

/* Length of the valid UTF-8 sequence at s, 0 when it is not one. */
static size_t utf8_seq(const unsigned char *s)
{
	unsigned cp, min;
	size_t n;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		n = 2, cp = s[0] & 0x1fu, min = 0x80;
	} else if ((s[0] & 0xf0) == 0xe0) {
		n = 3, cp = s[0] & 0x0fu, min = 0x800;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		n = 4, cp = s[0] & 0x07u, min = 0x10000;
	} else {
		return 0;
	}
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)  /* also stops at the NUL */
			return 0;
		cp = cp << 6 | (s[i] & 0x3fu);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/* How a string is escaped: as the body of a JSON string, or for a
 * terminal (stderr), where quotes and backslashes stay as they are, and
 * newlines are escaped too (a one-line message) or kept (a report). */
enum how { JSON, TEXT, LINES };

/* whole: each escape and UTF-8 sequence goes in whole or not at all, so
 * that cg_json_escape's short buffer, which callers quote inside a record,
 * never ends in half of one ("\u00", a lone backslash that would swallow
 * the closing quote); else byte by byte, as snprintf cuts (cg_format_json's
 * contract).  Control bytes, DEL and the C1 codes (U+0080-U+009F: 0x9b is
 * a terminal's CSI) become \u00XX, bytes that are not UTF-8 U+FFFD, in
 * every form: names and paths come from the program and the user, and
 * must not drive the terminal that reads the report. */
static void escape(struct cg_out *o, const char *str, int whole, enum how how)
{
	static const char shorts[] = {
		['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r',
		['\t'] = 't', ['"'] = '"', ['\\'] = '\\',
	};
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)str;

	while (*s) {
		size_t k = utf8_seq(s);
		/* a C1 code, two bytes in UTF-8: escaped as a control byte */
		unsigned code = k == 2 && s[0] == 0xc2 && s[1] < 0xa0 ? s[1] : *s;
		if (k == 0) {
			cg_out_write(o, "\\ufffd", 6, whole); /* replacement character */
			s++;
		} else if (k > 1 && code >= 0xa0) {
			cg_out_write(o, (const char *)s, k, whole);
			s += k;
		} else if ((*s == '\n' && how == LINES) ||
			   (how != JSON && (*s == '"' || *s == '\\'))) {
			cg_out_write(o, (const char *)s, 1, whole);
			s++;
		} else if (*s < sizeof shorts && shorts[*s]) {
			const char u[2] = {'\\', shorts[*s]};
			cg_out_write(o, u, 2, whole);
			s++;
		} else if (code < 0x20 || code >= 0x7f) {
			const char u[6] = {'\\', 'u', '0', '0', hex[code >> 4], hex[code & 15]};
			cg_out_write(o, u, 6, whole);
			s += k;
		} else {
			cg_out_write(o, (const char *)s, 1, whole);
			s++;
		}
	}
}

static size_t escaped(char *buf, size_t n, const char *s, enum how how)
{
	struct cg_out o;

	cg_out_init(&o, buf, n);
	if (s)
		escape(&o, s, 1, how);
	return o.len;
}

size_t cg_json_escape(char *buf, size_t n, const char *s)
{
	return escaped(buf, n, s, JSON);
}

size_t cg_text_escape(char *buf, size_t n, const char *s, int lines)
{
	return escaped(buf, n, s, lines ? LINES : TEXT);
}

void cg_out_text(struct cg_out *o, const char *s)
{
	escape(o, s, 0, TEXT);
}

static void put_string(struct cg_out *o, const char *key, const char *s)
{
	cg_out_printf(o, ",\"%s\":", key);
	if (!s) {
		cg_out_puts(o, "null");
		return;
	}
	cg_out_putc(o, '"');
	escape(o, s, 0, JSON);
	cg_out_putc(o, '"');
}

static void put_pointer(struct cg_out *o, const char *key, uintptr_t v)
{
	cg_out_printf(o, ",\"%s\":\"0x%" PRIxPTR "\"", key, v);
}

static void put_int(struct cg_out *o, const char *key, long v)
{
	cg_out_printf(o, ",\"%s\":%ld", key, v);
}

size_t cg_format_json(char *buf, size_t n, const struct cg_policy *p,
		      const struct cg_crossing *c)
{
	const char kind[2] = {(char)c->kind, '\0'};
	const char *rule = p && c->rule >= 0 && (size_t)c->rule < p->nrules ?
		p->rules[c->rule].name : NULL;
	struct cg_out o;

	cg_out_init(&o, buf, n);
	cg_out_puts(&o, "{\"event\":\"crossing\"");
	put_string(&o, "kind", kind);
	put_string(&o, "action", cg_action_name(c->action));
	put_string(&o, "api", c->api);
	put_string(&o, "kernel", c->kernel);
	put_string(&o, "demangled", c->demangled);
	put_string(&o, "origin", c->origin);
	put_string(&o, "load_api", c->load_api);
	put_pointer(&o, "function", (uintptr_t)c->function);
	put_pointer(&o, "owner_ctx", (uintptr_t)c->owner_ctx);
	put_int(&o, "owner_dev", c->owner_dev);
	put_string(&o, "owner_pci", c->owner_pci);
	put_string(&o, "owner_uuid", c->owner_uuid);
	put_pointer(&o, "launch_ctx", (uintptr_t)c->launch_ctx);
	put_int(&o, "launch_dev", c->launch_dev);
	put_string(&o, "launch_pci", c->launch_pci);
	put_string(&o, "launch_uuid", c->launch_uuid);
	put_pointer(&o, "stream", (uintptr_t)c->stream);
	put_string(&o, "rule", rule);
	if (c->unhooked)
		put_string(&o, "unhooked_policy_action", cg_action_name(c->asked));
	if (c->kind == CG_KIND_OPERAND) {
		put_int(&o, "noperands", (long)c->noperands);
		cg_out_puts(&o, ",\"operands\":[");
		for (size_t i = 0; i < c->noperands; i++) {
			const struct cg_operand *op = &c->operands[i];
			/* put_* lead with a comma: the object's first key does not */
			cg_out_printf(&o, "%s{\"param\":%d", i ? "," : "", op->param);
			cg_out_printf(&o, ",\"addr\":\"0x%llx\"", op->addr);
			put_int(&o, "addr_dev", op->dev);
			put_string(&o, "addr_uuid", op->uuid);
			put_string(&o, "operand", op->shape ? op->shape : "pointer");
			cg_out_putc(&o, '}');
		}
		cg_out_putc(&o, ']');
	}
	if (c->action == CG_ACT_REDIRECT) {
		put_int(&o, "redirect_dev", c->redirect_dev);
		put_string(&o, "redirect_via", c->redirect_via);
		if (c->host_wait.failed) {
			put_string(&o, "redirect_order_failed", c->host_wait.failed);
			put_int(&o, "redirect_order_error", c->host_wait.error);
			put_string(&o, "redirect_host_wait", c->host_wait.call);
			put_int(&o, "redirect_host_wait_error", c->host_wait.result);
		}
	}
	cg_out_putc(&o, '}');
	return o.len;
}
