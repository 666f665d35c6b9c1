/*
 * What an architecture may use of the core: the whole backend contract in
 * one header, the other half of arch/arch.h (what the core asks of the
 * architecture).  Files under src/arch/ include this, never
 * core/internal.h.  Everything here is either the probepoint the
 * architecture decodes, arms and optimizes, or a call it makes on the hit
 * path (async-signal-safe, lock-free) or under the registry lock, as
 * marked.
 */
#ifndef KP_CORE_ARCH_API_H
#define KP_CORE_ARCH_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kprobes.h"
#include "arch/arch.h"
#include "os/linux/loader.h"

struct kp_thread;
struct static_key;
struct wprobe;

#define KP_EXPORT __attribute__((visibility("default")))

#define container_of(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

/* ---- probepoints ---- */

/* One probed address: every kprobe registered there hangs on its list
 * (an aggregate probe, as in Kprobes). Freed only together with its slot.
 * The architecture owns ainsn and sets armed when its breakpoint is
 * written or removed (arch_arm, arch_disarm); it reads addr, func,
 * func_size, pad_after, opt_state and, on the hit path, probes, fast and
 * rfast; the rest is the core's. */
struct kp_probepoint {
	uintptr_t addr;
	struct kprobe *probes;		/* read lock-free by the hit path */
	/* The only probe, when it is enabled and has a fast function
	 * (kp_probe_fast_fn below): an optimized entry jumps straight into
	 * that. */
	struct kprobe *fast;
	/* fast, when it is a return probe whose entry an optimized entry's
	 * assembly runs (no entry handler, and membarrier for the sections
	 * that relies on): what that reads instead.  Also in a pair (a
	 * light kprobe first, in probes): the assembly runs that first. */
	struct kprobe *rfast;
	/* The only probe, when it is an enabled kprobe whose pre-handler
	 * reads nothing of its pt_regs but the argument registers
	 * (KP_OPT_ARGS): an optimized entry jumps into it with a pt_regs in
	 * which only the caller-saved registers are the program's (the
	 * light level it pushed, laid out as in struct pt_regs). */
	struct kprobe *afast;
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
	/* In a loaded object when registered, so able to go with it; code
	 * in anonymous memory (a JIT's) never is, and no object unloading
	 * elsewhere may take its probes for gone. */
	bool in_object;
	/* That object, which a rewrite checks is still loaded (dlclose()
	 * unmaps before the registry hears of it). */
	struct kp_object_id obj;
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
/* The caller-saved registers a hit path keeps only for handlers that may
 * write them, those it does not use itself: x86-64's return trampoline
 * r8-r11 (its detours keep every caller-saved register:
 * ARCH_DETOURS_KEEP_SCRATCH), arm64's detours x4-x18 (x0-x3 and x30
 * they keep anyway). */
#define KP_OPT_SAVE_SCRATCH 8
#define KP_OPT_SAVE_ALL 15
/* Not a save: with KP_OPT_SAVE_REGS, the handler reads only the argument
 * registers of its pt_regs (di si dx cx r8 r9) and writes none of it
 * (KPROBE_FLAG_ARGS_ONLY), so at a function entry a pt_regs whose
 * caller-saved registers alone are the program's does. */
#define KP_OPT_ARGS 16

/* KP_OPT_SAVE_* of the handler at fn (remembered for the library's own
 * code: code_needs.c). */
uint8_t kp_code_needs(uintptr_t fn);
/* A walk of a handler's code (code_needs.c); from arch_code_scan, the
 * needs of a function the scanned code calls or branches to directly. */
struct kp_code_walk;
uint8_t kp_code_walk_call(struct kp_code_walk *w, uintptr_t fn);

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
/* A return probe's slot in the threads' instance caches (kretprobe.c),
 * kept in the probe for the entry's fast path. */
#define kp_probe_ri_slot(p) (*(uint8_t *)&(p)->__reserved[2])
/* The probe before p on its probepoint's list (NULL: p is first); kept by
 * the writers only, the hit path walks __next. */
#define kp_probe_prev(p) (*(struct kprobe **)&(p)->__reserved[3])

/* The registry lock for the trap path, taken only if it is free (false:
 * it is not, and nothing was taken); the trap path never waits for it. */
bool kp_registry_trylock(void);
void kp_registry_unlock(void);

/* Under the registry lock, or lock-free on the hit path (the hash chains
 * are read with acquire loads): the probepoint at addr, or NULL. */
struct kp_probepoint *kp_probepoint_lookup(uintptr_t addr);
/* Frees pp (called by the architecture once its slot is unused). */
void kp_probepoint_free(struct kp_probepoint *pp);

/* Start and size of the function containing addr (symbols, .eh_frame);
 * under the registry lock.  0 or -ENOENT. */
int kp_function_bounds(uintptr_t addr, uintptr_t *start, size_t *size);

/* ---- the hit path ---- */

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
/* The same for a hit whose code saved the general registers only: each
 * handler called with what its needs say it may change saved around it. */
int kp_run_pre_handlers_saving(struct kp_probepoint *pp, struct pt_regs *regs);
void kp_run_post_handlers(struct kp_probepoint *pp, struct pt_regs *regs);
int kp_run_fault_handlers(struct kp_probepoint *pp, struct pt_regs *regs, int trapnr);
void kp_count_missed(struct kp_probepoint *pp);
bool kp_probepoint_has_post(const struct kp_probepoint *pp);

/* Entered from the detours and the return trampoline (assembly), with the
 * registers saved: an optimized probe's handlers (optcall.c), a return
 * probe's entry without pt_regs and its return (kretprobe.c). */
void kp_optimized_callback(struct kp_probepoint *pp, struct pt_regs *regs,
			   const void *vec_area, unsigned int vec_layout);
int kp_kretprobe_entry_fast(struct kprobe *p, void *ret_slot, struct kp_thread *t);
bool kp_kretprobe_dispatch(struct pt_regs *regs);

/* The knobs (knobs.c), read with relaxed loads. */
extern bool kp_knob_enabled;
extern bool kp_knob_optimize;
extern bool kp_knob_boost;

/* ---- static keys (core/jump_label.c) ---- */

/* One site: addr is a NOP or a JMP to target, per its key. */
struct kp_jl_site {
	uintptr_t addr;
	uintptr_t target;
	struct static_key *key;
	bool branch;		/* a JMP when the key is false */
};

/* Async-signal-safe: the site starting at / covering addr, or NULL;
 * whether any site's bytes meet [lo, hi); whether a site jumps under its
 * key's current value. */
const struct kp_jl_site *kp_jl_site_at(uintptr_t addr);
const struct kp_jl_site *kp_jl_site_covering(uintptr_t addr);
bool kp_jl_sites_meet(uintptr_t lo, uintptr_t hi);
bool kp_jl_site_jumps(const struct kp_jl_site *s);
/* Whether [lo, hi) overlaps a site or (targets) has a site's jump target
 * inside (lo, hi).  Refreshes the tables first; true when that fails. */
bool kp_jl_busy(uintptr_t lo, uintptr_t hi, bool targets);

/* ---- watchpoints (core/wprobe.c) ---- */

/* A watchpoint trap's cookie (the event's sig_data): a fixed tag in the
 * top 24 bits, a generation, and the slot in the low byte. */
#define KP_WCOOKIE_MAGIC 0x6b70770000000000ULL
#define KP_WCOOKIE_TAG_MASK 0xffffff0000000000ULL
#define KP_WCOOKIE_GEN_MASK 0xffffffffu

static inline bool kp_wprobe_cookie_ours(uint64_t cookie)
{
	return (cookie & KP_WCOOKIE_TAG_MASK) == KP_WCOOKIE_MAGIC;
}

/* The hit path, inside a read-side section: the watchpoint a trap's cookie
 * names, or NULL for one gone since. */
struct wprobe *kp_wprobe_of_cookie(uint64_t cookie);

#endif
