/* The words a crossing is reported in: the first line (a rule's message,
 * the DeepGEMM one for the built-in rule), then "ctxguard: " lines that
 * say what happened, where, and what to do about it. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "outbuf.h"
#include "policy.h"

/* Byte for byte what transformers raises (integrations/deepgemm.py), so
 * that people searching for it land on the same explanation. */
const char cg_deepgemm_message[] =
	"DeepGEMM experts selected on a model spanning multiple CUDA devices"
	" in one process; its kernels are bound to a single CUDA context and"
	" corrupt across devices. Use `experts_implementation='grouped_mm'`,"
	" or run one device per process (TP/EP).";

static const char generic_message[] =
	"ctxguard: kernel launch crosses CUDA contexts: the kernel or one of"
	" its operands belongs to another device's context, where the launch"
	" fails or silently corrupts memory.";

static const char *const generic_fix[] = {
	/* kind 'a': the function belongs to another context */
	"get the function in the launching context (load its module, or call"
	" cuModuleGetFunction / cuKernelGetFunction, with that context"
	" current), or launch it on the owner's device",
	/* kind 'b': an operand lives on another device */
	"launch the kernel on the device that holds the operand, or copy the"
	" operand to the launch device first",
};

static const struct cg_rule *rule_at(const struct cg_policy *p, int rule)
{
	if (!p || rule < 0 || (size_t)rule >= p->nrules)
		return NULL;
	return &p->rules[rule];
}

const char *cg_crossing_message(const struct cg_policy *p, int rule)
{
	const struct cg_rule *r = rule_at(p, rule);
	return r && r->message ? r->message : generic_message;
}

static void put_device(struct cg_out *o, int dev)
{
	if (dev < 0)
		cg_out_puts(o, "unknown device");
	else
		cg_out_printf(o, "device %d", dev);
}

static void put_context(struct cg_out *o, const void *ctx, int dev)
{
	cg_out_printf(o, "context 0x%" PRIxPTR " on ", (uintptr_t)ctx);
	put_device(o, dev);
}

static void put_verdict(struct cg_out *o, const struct cg_policy *p,
			const struct cg_crossing *c)
{
	cg_out_puts(o, "ctxguard: cross-context launch ");
	switch (c->action) {
	case CG_ACT_ABORT:
		cg_out_puts(o, "stopped (abort)");
		break;
	case CG_ACT_ERROR: {
		int code = p ? p->error_code : 400;
		const char *name = cg_cuda_error_name(code);
		cg_out_printf(o, "refused (error: returns %d%s%s)", code,
			      name ? " " : "", name ? name : "");
		break;
	}
	default:
		cg_out_printf(o, "allowed (%s)", cg_action_name(c->action));
		break;
	}
	if (c->kind != CG_KIND_OPERAND)
		cg_out_puts(o, ": the function belongs to another context\n");
	else if (c->noperands > 1)
		cg_out_printf(o, ": %zu operands live on another device\n", c->noperands);
	else
		cg_out_puts(o, ": an operand lives on another device\n");
	if (c->unhooked)
		cg_out_printf(o, "ctxguard: seen by the CUPTI backstop: this launch bypassed"
			      " ctxguard's hooks, and CUPTI cannot refuse a call%s\n",
			      c->asked != c->action ? ", so the policy's refusal became abort"
			      : "");
}

size_t cg_format_report(char *buf, size_t n, const struct cg_policy *p,
			const struct cg_crossing *c)
{
	const struct cg_rule *r = rule_at(p, c->rule);
	const char *kernel = c->kernel ? c->kernel : "<unknown>";
	struct cg_out o;

	cg_out_init(&o, buf, n);
	cg_out_puts(&o, cg_crossing_message(p, c->rule));
	cg_out_putc(&o, '\n');
	put_verdict(&o, p, c);

	/* Names and paths come from the program: escaped, so that none can
	 * end the line or drive the terminal. */
	cg_out_puts(&o, "ctxguard: kernel ");
	cg_out_text(&o, kernel);
	if (c->demangled && strcmp(c->demangled, kernel) != 0) {
		cg_out_puts(&o, " [");
		cg_out_text(&o, c->demangled);
		cg_out_putc(&o, ']');
	}

	cg_out_puts(&o, "\nctxguard: owner: ");
	put_context(&o, c->owner_ctx, c->owner_dev);
	if (c->load_api || c->origin) {
		cg_out_printf(&o, " (%s%s", c->load_api ? c->load_api : "loaded",
			      c->origin ? " from " : "");
		cg_out_text(&o, c->origin ? c->origin : "");
		cg_out_putc(&o, ')');
	}

	cg_out_puts(&o, "\nctxguard: launch: ");
	put_context(&o, c->launch_ctx, c->launch_dev);
	cg_out_printf(&o, " via %s, stream 0x%" PRIxPTR "\n",
		      c->api ? c->api : "an unknown call",
		      (uintptr_t)c->stream);

	for (size_t i = 0; c->kind == CG_KIND_OPERAND && i < c->noperands; i++) {
		const struct cg_operand *op = &c->operands[i];
		cg_out_printf(&o, "ctxguard: operand: parameter %d = 0x%llx on ",
			      op->param, op->addr);
		put_device(&o, op->dev);
		cg_out_printf(&o, " (%s)\n", op->shape ? op->shape : "pointer");
	}

	if (r)
		cg_out_printf(&o, "ctxguard: rule: %s (%s)\n", r->name,
			      r->where);
	else
		cg_out_puts(&o, "ctxguard: rule: none (scope all)\n");
	cg_out_printf(&o, "ctxguard: process: pid %ld tid %ld\n", c->pid,
		      c->tid);

	cg_out_printf(&o, "ctxguard: fix: %s",
		      r && r->fix ? r->fix : generic_fix[c->kind == CG_KIND_OPERAND]);
	if (c->action == CG_ACT_ABORT || c->action == CG_ACT_ERROR)
		cg_out_puts(&o, "; CTXGUARD_MODE=warn only reports such"
			    " launches");
	cg_out_putc(&o, '\n');
	return o.len;
}
