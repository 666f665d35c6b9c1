/* Architecture-neutral core of libkprobes: probepoints, the registry and the
 * handler dispatch.  No x86 bytes here; the architecture layer implements the
 * arch_* contract in arch/arch.h. */
#ifndef KP_CORE_INTERNAL_H
#define KP_CORE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kprobes.h"
#include "arch/arch.h"

#define KP_EXPORT __attribute__((visibility("default")))

/* kprobe.__state: registered probes carry this mark. */
#define KP_STATE_REGISTERED 0x6b707231u

/* kprobe.__type */
enum kp_type { KP_TYPE_KPROBE = 'k', KP_TYPE_KRETPROBE = 'r', KP_TYPE_JPROBE = 'j' };

/* One probed address: every kprobe registered there hangs on its list
 * (an aggregate probe, as in Kprobes). Freed only together with its slot. */
struct kp_probepoint {
	uintptr_t addr;
	struct kprobe *probes;		/* read lock-free by the hit path */
	/* The only probe, when it is enabled and has a fast function
	 * (kp_probe_fast_fn below): an optimized entry jumps straight into
	 * that. */
	struct kprobe *fast;
	/* fast, when it is a return probe whose entry an optimized entry's
	 * assembly runs (no entry handler, and membarrier for the sections
	 * that relies on): what that reads instead. */
	struct kprobe *rfast;
	struct kp_probepoint *hnext;	/* hash chain, read lock-free */
	struct kp_probepoint *all_next;	/* registry list in registration */
	struct kp_probepoint *all_prev;	/* order, under the mutex */
	struct arch_insn ainsn;		/* decoded instruction and its slot */
	bool armed;			/* breakpoint (or jump) written */
	uint8_t opt_state;		/* enum kp_opt_state, read by the hit path */
	uintptr_t func;			/* the function around addr */
	size_t func_size;
	size_t pad_after;		/* unreachable padding after it */
	struct kp_probepoint *opt_next;	/* optimizer queue */
	bool gone;			/* object unloaded */
	char *symbol;			/* "name+0xOFF" for the list */
	char *object;			/* file name, NULL for the main executable */
	/* Writer-side bookkeeping, under the registry lock, so that adding,
	 * removing and (re)evaluating one of many probes at an address takes
	 * constant time: the list's last probe, how many probes are enabled,
	 * and how many of those forbid a jump (post handler, jprobe). */
	struct kprobe *last;
	unsigned long nenabled;
	unsigned long nunoptimizable;
	bool mark;			/* scratch: de-duplicating a batch */
};

/* Jump optimization states: breakpoint only, waiting for the optimizer,
 * detour built and used by trapping threads, jump installed. */
enum kp_opt_state { OPT_NONE, OPT_QUEUED, OPT_PREPARED, OPT_OPTIMIZED };

/* What an optimized probe's detour must preserve around a probe's
 * handler (its needs, decoded when it is registered). */
#define KP_OPT_SAVE_VECTOR 1	/* vector and x87 registers */
#define KP_OPT_SAVE_ERRNO 2	/* errno */
#define KP_OPT_SAVE_REGS 4	/* a complete struct pt_regs */
/* r8-r11, which the return trampoline saves only for handlers that may
 * write them (the detours always keep every caller-saved register). */
#define KP_OPT_SAVE_R8_R11 8
#define KP_OPT_SAVE_ALL 15

#define container_of(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

/* A registered probe's KP_OPT_SAVE_* needs, kept in its private words:
 * read by the detours' assembly with the probe itself. */
#define kp_probe_needs(p) (*(uint8_t *)&(p)->__reserved[0])
/* What an optimized function entry jumps to when p is the probepoint's
 * only probe, with p, the address of the return address and the thread's
 * record as arguments: the pre-handler of a probe that needs the light
 * level only (it ignores the last two), or the entry of a return probe
 * without an entry handler; NULL when p needs more.  Fixed while p is
 * registered. */
#define kp_probe_fast_fn(p) (*(void **)&(p)->__reserved[1])
int kp_kretprobe_entry_fast(struct kprobe *p, void *ret_slot, struct kp_thread *t);
/* An enabled kprobe whose pre-handler needs the light level only: the
 * fast function of a probepoint's single probe, or run by the return
 * probe after it (kp_kretprobe_entry_fast). */
static inline bool kp_probe_light_entry(struct kprobe *p)
{
	return p->__type == KP_TYPE_KPROBE && !(p->flags & KPROBE_FLAG_DISABLED) &&
	       !p->post_handler && kp_probe_fast_fn(p) &&
	       kp_probe_fast_fn(p) == (void *)p->pre_handler;
}
/* A return probe's slot in the threads' instance caches (kretprobe.c),
 * kept in the probe for the entry's fast path. */
#define kp_probe_ri_slot(p) (*(uint8_t *)&(p)->__reserved[2])
/* The probe before p on its probepoint's list (NULL: p is first); kept by
 * the writers only, the hit path walks __next. */
#define kp_probe_prev(p) (*(struct kprobe **)&(p)->__reserved[3])

/* probeset.c: the registered probes, by pointer (under the registry lock). */
bool kp_probeset_has(const struct kprobe *p);
int kp_probeset_add(struct kprobe *p);
void kp_probeset_remove(const struct kprobe *p);

/* optimizer.c (under kp_registry_lock) */
void kp_optimizer_reevaluate(struct kp_probepoint *pp);
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
void kp_optimizer_flush(void);
/* The thread id of the process's optimizer thread (0: none yet); its
 * libc calls are the library's, not the program's. */
extern pid_t kp_optimizer_tid;
void kp_optimizer_region_conflicts(uintptr_t addr);
/* Ends the optimizer thread (the next request starts a new one): for an
 * agent leaving a process it was injected into.  Takes kp_registry_lock. */
void kp_optimizer_stop(void);

/* Start and size of the function containing addr (symbols, .eh_frame). */
int kp_function_bounds(uintptr_t addr, uintptr_t *start, size_t *size);

/* registry.c */
/* Whether offset from the function symbol at sym_addr (st_size sym_size)
 * stays in its code and, for a symbol of size 0, lands on an instruction
 * reached by decoding from it: 0, -EINVAL, -EILSEQ.  Takes the registry
 * lock (for the agent's globs). */
int kp_check_symbol_offset(uintptr_t sym_addr, size_t sym_size, unsigned long offset);
extern pthread_mutex_t kp_registry_lock;
extern struct kp_probepoint *kp_all_probepoints;	/* oldest first */
struct kp_probepoint *kp_probepoint_lookup(uintptr_t addr);
bool kp_probepoint_enabled(const struct kp_probepoint *pp);
/* Frees pp (called by the architecture once its slot is unused). */
void kp_probepoint_free(struct kp_probepoint *pp);

static inline bool kp_probe_enabled(const struct kprobe *p)
{
	return !(__atomic_load_n(&p->flags, __ATOMIC_RELAXED) & KPROBE_FLAG_DISABLED);
}

/* The pre-handlers of an aggregate, in order; 1 when one changed the path. */
static inline int kp_pre_handlers_inline(struct kp_probepoint *pp, struct pt_regs *regs)
{
	for (struct kprobe *p = __atomic_load_n(&pp->probes, __ATOMIC_ACQUIRE); p;
	     p = __atomic_load_n(&p->__next, __ATOMIC_ACQUIRE))
		if (kp_probe_enabled(p) && p->pre_handler && p->pre_handler(p, regs))
			return 1;
	return 0;
}

/* dispatch.c: called by the architecture's trap code on the hit path. */
int kp_run_pre_handlers(struct kp_probepoint *pp, struct pt_regs *regs);
void kp_run_post_handlers(struct kp_probepoint *pp, struct pt_regs *regs);
int kp_run_fault_handlers(struct kp_probepoint *pp, struct pt_regs *regs, int trapnr);
void kp_count_missed(struct kp_probepoint *pp);
bool kp_probepoint_has_post(const struct kp_probepoint *pp);

/* placement.c: why a probe of this type cannot be placed at addr (in the
 * function fn when have_fn), or NULL; under the registry lock. */
struct ksym;
const char *kp_placement_refusal(uintptr_t addr, enum kp_type type, const struct ksym *fn,
				 bool have_fn);
/* The same for a kprobe or return probe at addr, taking the lock: what the
 * agent tells a user about a probe refused with -EINVAL. */
const char *kp_probe_refusal(uintptr_t addr, bool is_return);

/* knobs.c */
extern bool kp_knob_enabled;
extern bool kp_knob_optimize;
extern bool kp_knob_boost;
void kp_knobs_init(void);

/* blacklist.c */
bool kp_blacklisted(uintptr_t addr);
void kp_blacklist_init(void);

/* init.c */
int kp_init(void);

#endif
