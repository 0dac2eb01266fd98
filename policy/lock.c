/* The locked system policy.  An operator's policy file with "lock = on" is
 * the floor for every process: what the user's CTXGUARD_POLICY file, the
 * CTXGUARD_* variables and the ctxguard command's flags (which set those
 * variables) ask is taken only when it is at least as strict.  Each
 * refusal is one line naming the setting, the value asked and the system
 * file, printed and logged at start-up like a configuration error. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lock.h"

/* How strict each action is.  error and redirect both keep the launch from
 * running as asked, so they rank alike; a new action is one line here. */
static const int action_rank[] = {
	[CG_ACT_OFF] = 0,
	[CG_ACT_WARN] = 1,
	[CG_ACT_ERROR] = 2,
	[CG_ACT_ABORT] = 3,
	[CG_ACT_REDIRECT] = 2,
};

#define NRANKS (int)(sizeof action_rank / sizeof action_rank[0])

static int rank_of_action(int a)
{
	return a >= 0 && a < NRANKS ? action_rank[a] : -1;
}

/* What tighter means, per locked setting. */
enum order {
	O_ACTION,                  /* by action_rank */
	O_NUMBER,                  /* larger is tighter: experts < all, off < on */
	O_BITS,                    /* a subset of the floor's permission bits */
	O_PATH,                    /* once the floor names one, it stays */
};

static const struct locked {
	const char *key;
	size_t field;              /* int, or char * for O_PATH */
	enum order order;
} locked[] = {
	{"mode", offsetof(struct cg_policy, mode), O_ACTION},
	{"scope", offsetof(struct cg_policy, scope), O_NUMBER},
	{"operands", offsetof(struct cg_policy, operands), O_NUMBER},
	/* Dropping the built-in rules would stop checking DeepGEMM. */
	{"defaults", offsetof(struct cg_policy, defaults), O_NUMBER},
	{"log", offsetof(struct cg_policy, log_path), O_PATH},
	/* The operator's telemetry: dropped or sent elsewhere, crossings
	 * would never reach the collector. */
	{"metrics", offsetof(struct cg_policy, metrics_path), O_PATH},
	{"log_mode", offsetof(struct cg_policy, log_mode), O_BITS},
	{"lock", offsetof(struct cg_policy, lock), O_NUMBER},
	{"redirect_fallback", offsetof(struct cg_policy, redirect_fallback), O_ACTION},
	{"backstop", offsetof(struct cg_policy, backstop), O_NUMBER},
	/* A floor's shadow keeps proving the redirect's decode. */
	{"shadow", offsetof(struct cg_policy, shadow), O_NUMBER},
	/* A user's file naming a stub would leave the backstop blind. */
	{"cupti", offsetof(struct cg_policy, cupti_path), O_PATH},
};

#define NLOCKED (sizeof locked / sizeof locked[0])

static int int_at(const struct cg_policy *p, size_t field)
{
	return *(const int *)((const char *)p + field);
}

static char **path_at(struct cg_policy *p, size_t field)
{
	return (char **)((char *)p + field);
}

static int looser(const struct locked *l, const struct cg_policy *p,
		  const struct cg_policy *floor)
{
	if (l->order == O_PATH) {
		const char *want = *path_at((struct cg_policy *)floor, l->field);
		const char *got = *path_at((struct cg_policy *)p, l->field);
		return want && (!got || strcmp(want, got) != 0);
	}
	int v = int_at(p, l->field), f = int_at(floor, l->field);
	switch (l->order) {
	case O_ACTION:
		return rank_of_action(v) < rank_of_action(f);
	case O_NUMBER:
		return v < f;
	case O_BITS:
		return (v & ~f) != 0;
	case O_PATH:
		break;
	}
	return 0;
}

/* Copy the floor's value into p; 0, or -1 when a path cannot be copied (the
 * setting is then left unset rather than loose). */
static int restore(const struct locked *l, struct cg_policy *p,
		   const struct cg_policy *floor)
{
	if (l->order != O_PATH) {
		*(int *)((char *)p + l->field) = int_at(floor, l->field);
		return 0;
	}
	char **dst = path_at(p, l->field);
	const char *src = *path_at((struct cg_policy *)floor, l->field);
	free(*dst);
	*dst = src ? strdup(src) : NULL;
	return src && !*dst ? -1 : 0;
}

__attribute__((format(printf, 2, 3)))
static void refuse(struct cg_policy *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	char *line = cg_policy_vline(fmt, ap);
	va_end(ap);
	if (line && p->nrefused < CG_POLICY_MAX_ERRORS) {
		p->refused[p->nrefused++] = line;
		return;
	}
	/* Counted with the problems beyond the list, never dropped unsaid. */
	free(line);
	p->errors_dropped++;
}

/* Only the locked settings are copied (paths duplicated): nothing else of
 * sys, whose strings the later sources may free, is reachable from f. */
int cg_floor_take(struct cg_floor *f, const struct cg_policy *sys,
		  const char *system)
{
	memset(f, 0, sizeof *f);
	f->system = system;
	int rc = 0;
	for (size_t i = 0; i < NLOCKED; i++)
		if (restore(&locked[i], &f->at, sys) < 0)
			rc = -1;
	return rc;
}

void cg_floor_free(struct cg_floor *f)
{
	for (size_t i = 0; i < NLOCKED; i++)
		if (locked[i].order == O_PATH) {
			char **path = path_at(&f->at, locked[i].field);
			free(*path);
			*path = NULL;
		}
}

void cg_lock_enforce(struct cg_policy *p, const struct cg_floor *f,
		     const char *from)
{
	char asked[96], kept[96];

	for (size_t i = 0; i < NLOCKED; i++) {
		const struct locked *l = &locked[i];
		if (!looser(l, p, &f->at))
			continue;
		cg_setting_show(p, l->key, asked, sizeof asked);
		cg_setting_show(&f->at, l->key, kept, sizeof kept);
		if (restore(l, p, &f->at) < 0)
			snprintf(kept, sizeof kept, "unset (out of memory)");
		refuse(p, "%s = %s (%s) refused: %s is locked; %s stays %s, %s",
		       l->key, asked, from, f->system, l->key, kept,
		       l->order == O_PATH ? "as the system policy sets it" :
		       "only a tighter value may be set");
	}
}

void cg_lock_rules(struct cg_policy *p, size_t first, const struct cg_floor *f)
{
	int floor_rank = rank_of_action(f->at.mode);

	for (size_t i = first; i < p->nrules; i++) {
		struct cg_rule *r = &p->rules[i];
		if (r->action == CG_ACT_UNSET ||
		    rank_of_action(r->action) >= floor_rank)
			continue;
		refuse(p, "[rule %s] action = %s (%s) refused: %s is locked;"
		       " the rule follows mode %s", r->name,
		       cg_action_name(r->action), r->where, f->system,
		       cg_action_name(f->at.mode));
		r->action = CG_ACT_UNSET;
	}
}

void cg_policy_refuse(struct cg_policy *p, const char *asked,
		      const char *instead)
{
	refuse(p, "%s refused: %s is locked; %s", asked,
	       p->source ? p->source : "the system policy", instead);
}
