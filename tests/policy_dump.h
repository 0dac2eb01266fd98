/* The effective policy as text, one setting or rule a line, so that the
 * ways of loading it (in process, through the ctxguard command, in a setuid
 * program) can be compared alike. */
#ifndef CTXGUARD_TESTS_POLICY_DUMP_H
#define CTXGUARD_TESTS_POLICY_DUMP_H

#include <stdio.h>

#include "../policy/policy.h"

static inline void dump_policy(FILE *f, const struct cg_policy *p)
{
	fprintf(f, "mode %s\nscope %s\noperands %s\nlog %s\nmetrics %s\nlog_mode %04o\n"
		"defaults %s\nlock %s\nsecure %s\nsource %s\n",
		cg_action_name(p->mode), p->scope == CG_SCOPE_ALL ? "all" : "experts",
		p->operands ? "on" : "off", p->log_path ? p->log_path : "none",
		p->metrics_path ? p->metrics_path : "none",
		(unsigned)p->log_mode, p->defaults ? "on" : "off", p->lock ? "on" : "off",
		p->secure ? "on" : "off", p->source ? p->source : "?");
	fprintf(f, "shadow %s\n", p->shadow ? "on" : "off");
	for (size_t i = 0; i < p->nrules; i++)
		fprintf(f, "rule %s %s\n", p->rules[i].name, cg_action_name(p->rules[i].action));
	for (size_t i = 0; i < p->nrefused; i++)
		fprintf(f, "refused %s\n", p->refused[i]);
	for (size_t i = 0; i < p->nerrors; i++)
		fprintf(f, "error %s\n", p->errors[i]);
}

#endif
