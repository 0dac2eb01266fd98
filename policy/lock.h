/* The lock (policy/lock.c), shared with the loader only: a system policy
 * with "lock = on" is a floor that the user's file and variables may
 * tighten but never loosen. */
#ifndef CTXGUARD_LOCK_H
#define CTXGUARD_LOCK_H

#include <stdarg.h>

#include "settings.h"

struct cg_floor {
	struct cg_policy at;       /* the system policy's locked settings only */
	const char *system;        /* its file, named in every refusal */
};

/* Snapshot sys's settings as the floor.  Returns -1 when out of memory. */
int cg_floor_take(struct cg_floor *f, const struct cg_policy *sys,
		  const char *system);
void cg_floor_free(struct cg_floor *f);

/* After a source (a variable, the user's file: `from` names it) was applied
 * to p: every locked setting it loosened goes back to the floor, with one
 * line in p->refused. */
void cg_lock_enforce(struct cg_policy *p, const struct cg_floor *f,
		     const char *from);

/* Rules p->rules[first..] came from the user's file: an action looser than
 * the floor's mode is refused (the rule then follows the mode). */
void cg_lock_rules(struct cg_policy *p, size_t first, const struct cg_floor *f);

#endif
