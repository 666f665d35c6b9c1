/* Jump optimization on arm64 (optimize.c, detour.S): what the trap path,
 * the unwinder and the slot allocator ask of it. */
#ifndef KP_ARM64_OPTIMIZE_H
#define KP_ARM64_OPTIMIZE_H

#include <stdbool.h>
#include <stdint.h>

struct kp_probepoint;
struct pt_regs;

/* Called by detour.S with the registers saved in regs: the probepoint's
 * pre-handlers under the trap path's rules. */
void kp_a64_detour_call(struct kp_probepoint *pp, struct pt_regs *regs);

/* Async-signal-safe.  The probepoint whose detour's copy of the probed
 * instruction holds ip, or NULL. */
struct kp_probepoint *a64_detour_copy_owner(uintptr_t ip);
/* ip anywhere in a detour becomes the probed address. */
bool a64_detour_map_ip(uintptr_t *ip);
/* The word at pc is an optimized probe's B to its detour. */
bool a64_detour_jump_at(uintptr_t pc);
/* The census's question (upcall ip_bound_for_detour): is the thread on
 * its way into or back to a detour from outside it? */
bool a64_ip_bound_for_detour(uintptr_t ip);
/* R of the detour whose handlers the thread runs (0: none), kept by
 * detour.S. */
extern __thread uintptr_t kp_a64_detour_ret __attribute__((tls_model("initial-exec")));

/* Under the registry lock.  Takes over pp's retirement when it has a
 * detour (true): the detour is freed once no thread can be in it, then
 * a64_retire_rest(pp) runs; false: nothing to wait for. */
bool a64_opt_retire(struct kp_probepoint *pp);
/* Frees the retired detours no thread is in; returns how many. */
int a64_detour_reclaim(void);
bool a64_detour_reclaim_due(void);
unsigned long a64_detours_in_use(void);

/* probe.c: the probepoint's slot retired (or pp freed without one). */
void a64_retire_rest(struct kp_probepoint *pp);

#endif
