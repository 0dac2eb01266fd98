/* The counters: per-thread blocks the launch path bumps without sharing a
 * cache line, and their totals. */
#include <string.h>

#include "report.h"

/* Counters live in per-thread blocks so the launch path never shares a
 * cache line: a thread owns its block and bumps it with a plain add
 * (cg_bump, shim.h); past the pool's size threads share blocks and need a
 * real atomic add. */
enum { POOL = 256, NSLOTS = CG_NSLOTS };
static struct block {
	_Atomic unsigned long v[NSLOTS];
} __attribute__((aligned(64))) pool[POOL];
static _Atomic unsigned next_block;
_Thread_local struct cg_counts cg_counts CG_TLS;

void cg_bump_first(int slot)
{
	unsigned i = atomic_fetch_add(&next_block, 1);
	cg_counts.shared = i >= POOL;
	cg_counts.v = pool[i % POOL].v;
	cg_bump(slot);
}

unsigned long cg_slot_total(int slot)
{
	unsigned long n = 0;
	for (int i = 0; i < POOL; i++)
		n += atomic_load_explicit(&pool[i].v[slot], memory_order_relaxed);
	return n;
}

unsigned long cg_counter_total(enum cg_counter c)
{
	return cg_slot_total(c);
}

const struct cg_counter_info cg_counters[CG_NCOUNTERS] = {
#define X(name, key, group, one, many, help) [CG_C_##name] = {key, group, one, many, help},
	CG_COUNTERS(X)
#undef X
};

/* A fork child counts from zero. */
void cg_counters_on_fork(void)
{
	memset(pool, 0, sizeof pool);
	atomic_store(&next_block, 0);
	cg_counts.v = NULL;
}
