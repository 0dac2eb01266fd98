/* A once that a fork child can undo: the first caller runs the work, the
 * others wait for it to end (a few driver queries or getenv calls, never
 * on the launch path).  Lock-free, no allocation: safe in a fork child and
 * while the shim starts. */
#ifndef CTXGUARD_ONCE_H
#define CTXGUARD_ONCE_H

#include <sched.h>
#include <stdatomic.h>

enum { CG_ONCE_UNDONE, CG_ONCE_RUNNING, CG_ONCE_DONE };
struct cg_once {
	_Atomic int state;
};

/* 1: the caller runs the work, then calls cg_once_leave; 0: it is done. */
static inline int cg_once_enter(struct cg_once *o)
{
	if (__builtin_expect(atomic_load_explicit(&o->state, memory_order_acquire) == CG_ONCE_DONE,
			     1))
		return 0;
	int undone = CG_ONCE_UNDONE;
	if (atomic_compare_exchange_strong(&o->state, &undone, CG_ONCE_RUNNING))
		return 1;
	while (atomic_load_explicit(&o->state, memory_order_acquire) != CG_ONCE_DONE)
		sched_yield();
	return 0;
}

static inline void cg_once_leave(struct cg_once *o)
{
	atomic_store_explicit(&o->state, CG_ONCE_DONE, memory_order_release);
}

/* The work runs again at the next cg_once_enter. */
static inline void cg_once_reset(struct cg_once *o)
{
	atomic_store(&o->state, CG_ONCE_UNDONE);
}

/* In a fork child: a run the parent had under way is undone (its runner
 * did not come along); 1 when it was. */
static inline int cg_once_on_fork(struct cg_once *o)
{
	int running = CG_ONCE_RUNNING;
	return atomic_compare_exchange_strong(&o->state, &running, CG_ONCE_UNDONE);
}

#endif
