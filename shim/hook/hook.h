/* Hooks (shim/hook/): the exported entry points, how lookups (dlsym,
 * cuGetProcAddress) are answered, start-up, fork and a context's end. */
#ifndef CTXGUARD_HOOK_H
#define CTXGUARD_HOOK_H

#include "../shim.h"

#pragma GCC visibility push(hidden)

/* The hook that stands for real function p, or NULL: the identity map that
 * dlsym and cuGetProcAddress use. */
void *cg_hook_for_real(const void *p);
void cg_entry_resolve(void *libcuda); /* fills every .real */
/* libcuda's own function for v (NULL where it has none) */
void *cg_variant_real(void *libcuda, const struct cg_variant *v);

/* ---- second copies of the driver (shim/hook/drivers.c) ---- */

/* p, what a lookup of `name` on handle through `api` found: itself, or
 * NULL when it lies in a CUDA driver other than the hooked one and the
 * policy is locked (unlocked, that driver is said once and counted as
 * unhooked). */
void *cg_driver_lookup(void *handle, void *p, const char *api, const char *name);
/* At start-up: says (once) when an object ahead of ctxguard, a preload,
 * defines the driver's entry points, which then bypass the hooks. */
void cg_drivers_check_preloads(void);

/* ---- calls while another thread starts the shim (shim/hook/starting.c) ---- */

/* Waits for that start-up a bounded time; cg_init's answer. */
int cg_starting_wait(const char *what);
/* Publishes start-up's outcome (cg_state) and, when ready, says what
 * passed unchecked while it was under way. */
void cg_started(int state);
/* The hook that stands for real function p, looked up afresh. */
void *cg_starting_hook(const void *real);
void cg_starting_on_fork(void); /* in a forked child */

#pragma GCC visibility pop

#endif
