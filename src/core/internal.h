/* Architecture-neutral core of libkprobes: probepoints, the registry and the
 * handler dispatch.  No instruction bytes or registers here: the
 * architecture implements the arch_* contract in arch/arch.h, and uses of
 * the core only what core/arch_api.h declares. */
#ifndef KP_CORE_INTERNAL_H
#define KP_CORE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kprobes.h"
#include "core/arch_api.h"

/* kprobe.__state: registered probes carry this mark. */
#define KP_STATE_REGISTERED 0x6b707231u

/* kprobe.__type */
enum kp_type { KP_TYPE_KPROBE = 'k', KP_TYPE_KRETPROBE = 'r', KP_TYPE_JPROBE = 'j' };

/* An enabled kprobe whose pre-handler needs the light level only: the
 * fast function of a probepoint's single probe, or run by the return
 * probe after it (kp_kretprobe_entry_fast). */
static inline bool kp_probe_light_entry(struct kprobe *p)
{
	return p->__type == KP_TYPE_KPROBE && !(p->flags & KPROBE_FLAG_DISABLED) &&
	       !p->post_handler && kp_probe_fast_fn(p) &&
	       kp_probe_fast_fn(p) == (void *)p->pre_handler;
}

/* probeset.c: the registered probes, by pointer (under the registry lock). */
bool kp_probeset_has(const struct kprobe *p);
int kp_probeset_add(struct kprobe *p);
void kp_probeset_remove(const struct kprobe *p);

/* optimizer.c (under kp_registry_lock) */
void kp_optimizer_reevaluate(struct kp_probepoint *pp);
void kp_optimizer_analyse_ahead(struct kp_probepoint **pps, int n);
void kp_optimizer_reevaluate_near(uintptr_t addr);
void kp_optimizer_unoptimize(struct kp_probepoint *pp);
void kp_optimizer_forget_gone(struct kp_probepoint *pp);
void kp_objects_unloaded(void);
void kp_objects_unloaded_locked(void);
void kp_optimizer_forget_batch(struct kp_probepoint **pps, int n);
void kp_optimizer_after_fork_child(void);
/* Every lock of libkprobes held across fork() (src/core/fork.c). */
void kp_fork_init(void);
void kp_blacklist_lock(void);
void kp_blacklist_unlock(void);
/* One optimizer pass now: how many probes wait for a retry. */
int kp_optimizer_flush(void);
/* Until a just-started optimizer thread has unblocked the census signal,
 * a census counts it as inside every region: waits for that, at most
 * 200 ms.  Not under kp_registry_lock. */
void kp_optimizer_wait_ready(void);
/* The thread id of the process's optimizer thread (0: none yet); its
 * libc calls are the library's, not the program's. */
extern pid_t kp_optimizer_tid;
void kp_optimizer_region_conflicts(uintptr_t addr);
/* Ends the optimizer thread (the next request starts a new one): for an
 * agent leaving a process it was injected into.  Takes kp_registry_lock. */
void kp_optimizer_stop(void);

/* registry.c */
/* Whether offset from the function symbol at sym_addr (st_size sym_size)
 * stays in its code and, for a symbol of size 0, lands on an instruction
 * reached by decoding from it: 0, -EINVAL, -EILSEQ.  Takes the registry
 * lock (for the agent's globs). */
int kp_check_symbol_offset(uintptr_t sym_addr, size_t sym_size, unsigned long offset);
extern pthread_mutex_t kp_registry_lock;
/* Bytes after a function's end that belong to no function (alignment
 * padding), at most a jump's worth; under the registry lock. */
size_t kp_padding_after(uintptr_t end);
/* The registration calls of every probe type: all of ps (type) or none;
 * removal; KPROBE_FLAG_DISABLED on or off.  Take the registry lock. */
int kp_register_batch(struct kprobe **ps, int n, enum kp_type type);
void kp_unregister_batch(struct kprobe **ps, int n);
int kp_set_disabled(struct kprobe *p, bool disabled);
/* Arms every probe again after the enabled knob came back on. */
int kp_rearm_all(void);
extern struct kp_probepoint *kp_all_probepoints;	/* oldest first */
bool kp_probepoint_enabled(const struct kp_probepoint *pp);

/* placement.c: why a probe of this type cannot be placed at addr (in the
 * function fn when have_fn), or NULL; under the registry lock. */
struct ksym;
const char *kp_placement_refusal(uintptr_t addr, enum kp_type type, const struct ksym *fn,
				 bool have_fn);
/* The same for a kprobe or return probe at addr, taking the lock: what the
 * agent tells a user about a probe refused with -EINVAL. */
const char *kp_probe_refusal(uintptr_t addr, bool is_return);

/* knobs.c */
void kp_knobs_init(void);
/* Boosting (no second trap without post handlers) on or off: off only to
 * measure the single-stepped path (kprobes-bench). */
void kp_set_boost(bool on);

/* blacklist.c */
bool kp_blacklisted(uintptr_t addr);
void kp_blacklist_init(void);

/* init.c */
int kp_init(void);

#endif
