/* A concurrent map from non-zero machine words to pointers.
 *
 * Readers never lock and never wait: they probe an open-addressing table
 * published through one atomic pointer.  Writers (module loads, unloads:
 * rare) serialise on the table's own mutex and grow by publishing a new
 * table; replaced tables and removed values are kept, not freed, because a
 * reader may still be looking at them (no reclamation scheme is worth its
 * cost for data that changes this rarely). */
#ifndef CTXGUARD_TABLE_H
#define CTXGUARD_TABLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct cg_slot {
	_Atomic uintptr_t key;
	_Atomic(void *) val;
};

struct cg_tab {
	size_t mask;
	size_t used;               /* keys present, tombstones included */
	struct cg_tab *next_retired;
	struct cg_slot slot[];
};

struct cg_table {
	_Atomic(struct cg_tab *) cur;
	pthread_mutex_t lock;
	struct cg_tab *retired;    /* replaced tables, kept reachable */
	size_t live;
};

#define CG_TABLE_INIT {NULL, PTHREAD_MUTEX_INITIALIZER, NULL, 0}

static inline size_t cg_table_hash(uintptr_t k)
{
	uint64_t x = k;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return (size_t)x;
}

/* The launch path's read, inline: a few loads, no call. */
static inline void *cg_table_get(struct cg_table *t, uintptr_t key)
{
	struct cg_tab *tab = atomic_load_explicit(&t->cur, memory_order_acquire);
	if (!tab)
		return NULL;
	for (size_t i = cg_table_hash(key) & tab->mask;; i = (i + 1) & tab->mask) {
		uintptr_t k = atomic_load_explicit(&tab->slot[i].key, memory_order_acquire);
		if (k == key)
			return atomic_load_explicit(&tab->slot[i].val, memory_order_acquire);
		if (k == 0)
			return NULL;
	}
}

/* Insert or replace; returns the previous value (NULL if none). */
void *cg_table_put(struct cg_table *t, uintptr_t key, void *val);
void *cg_table_del(struct cg_table *t, uintptr_t key);
/* Under the writer lock: remove every entry for which drop() says so. */
void cg_table_sweep(struct cg_table *t, int (*drop)(void *val, const void *arg),
		    const void *arg);
size_t cg_table_live(struct cg_table *t);
/* Forget everything (after fork: the child is single-threaded). */
void cg_table_reset(struct cg_table *t);

#endif
