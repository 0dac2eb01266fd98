/* Open addressing with linear probing; a removed entry keeps its key with a
 * NULL value (a tombstone) so that probes for other keys stay correct. */
#include <stdlib.h>

#include "table.h"

static struct cg_tab *tab_new(size_t cap)
{
	struct cg_tab *tab = calloc(1, sizeof *tab + cap * sizeof(struct cg_slot));
	if (tab)
		tab->mask = cap - 1;
	return tab;
}

/* Writer side: the slot holding key, or the empty slot where it goes. */
static struct cg_slot *probe(struct cg_tab *tab, uintptr_t key)
{
	for (size_t i = cg_table_hash(key) & tab->mask;; i = (i + 1) & tab->mask) {
		uintptr_t k = atomic_load_explicit(&tab->slot[i].key, memory_order_relaxed);
		if (k == key || k == 0)
			return &tab->slot[i];
	}
}

/* Keep the load (tombstones included) under one half: rebuild with only
 * the live entries, doubling when they alone fill a quarter. */
static struct cg_tab *make_room(struct cg_table *t)
{
	struct cg_tab *old = atomic_load_explicit(&t->cur, memory_order_relaxed);
	if (old && (old->used + 1) * 2 <= old->mask + 1)
		return old;
	size_t cap = 64;
	while (cap < (t->live + 1) * 4)
		cap *= 2;
	struct cg_tab *tab = tab_new(cap);
	if (!tab)
		return old && old->used < old->mask ? old : NULL;
	for (size_t i = 0; old && i <= old->mask; i++) {
		void *v = atomic_load_explicit(&old->slot[i].val, memory_order_relaxed);
		if (!v)
			continue;
		uintptr_t key = atomic_load_explicit(&old->slot[i].key, memory_order_relaxed);
		struct cg_slot *s = probe(tab, key);
		atomic_store_explicit(&s->val, v, memory_order_relaxed);
		atomic_store_explicit(&s->key, key, memory_order_relaxed);
		tab->used++;
	}
	atomic_store_explicit(&t->cur, tab, memory_order_release);
	if (old) {
		old->next_retired = t->retired;
		t->retired = old;
	}
	return tab;
}

void *cg_table_put(struct cg_table *t, uintptr_t key, void *val)
{
	pthread_mutex_lock(&t->lock);
	void *prev = NULL;
	struct cg_tab *tab = make_room(t);
	if (tab) {
		struct cg_slot *s = probe(tab, key);
		prev = atomic_load_explicit(&s->val, memory_order_relaxed);
		/* Value before key: a reader that sees the key sees the value. */
		atomic_store_explicit(&s->val, val, memory_order_release);
		if (atomic_load_explicit(&s->key, memory_order_relaxed) == 0) {
			atomic_store_explicit(&s->key, key, memory_order_release);
			tab->used++;
		}
		t->live += (prev == NULL) - (val == NULL);
	}
	pthread_mutex_unlock(&t->lock);
	return prev;
}

void *cg_table_del(struct cg_table *t, uintptr_t key)
{
	/* Absent keys stay absent: no tombstone for them. */
	if (!cg_table_get(t, key))
		return NULL;
	return cg_table_put(t, key, NULL);
}

void cg_table_sweep(struct cg_table *t, int (*drop)(void *val, const void *arg),
		    const void *arg)
{
	pthread_mutex_lock(&t->lock);
	struct cg_tab *tab = atomic_load_explicit(&t->cur, memory_order_relaxed);
	for (size_t i = 0; tab && i <= tab->mask; i++) {
		void *v = atomic_load_explicit(&tab->slot[i].val, memory_order_relaxed);
		if (v && drop(v, arg)) {
			atomic_store_explicit(&tab->slot[i].val, NULL, memory_order_release);
			t->live--;
		}
	}
	pthread_mutex_unlock(&t->lock);
}

size_t cg_table_live(struct cg_table *t)
{
	pthread_mutex_lock(&t->lock);
	size_t n = t->live;
	pthread_mutex_unlock(&t->lock);
	return n;
}

void cg_table_reset(struct cg_table *t)
{
	pthread_mutex_init(&t->lock, NULL);
	struct cg_tab *old = atomic_load_explicit(&t->cur, memory_order_relaxed);
	if (old) {
		old->next_retired = t->retired;
		t->retired = old;
	}
	atomic_store_explicit(&t->cur, NULL, memory_order_release);
	t->live = 0;
}
