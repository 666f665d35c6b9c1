/* Architecture-neutral core of libkprobes: probepoints, the registry and the
 * handler dispatch.  No x86 bytes here; the architecture layer implements the
 * arch_* contract in arch/arch.h. */
#ifndef KP_CORE_INTERNAL_H
#define KP_CORE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
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
	struct kp_probepoint *hnext;	/* hash chain, read lock-free */
	struct kp_probepoint *all_next;	/* registry list in registration */
	struct kp_probepoint *all_prev;	/* order, under the mutex */
	struct arch_insn ainsn;		/* decoded instruction and its slot */
	bool armed;			/* breakpoint written */
	bool gone;			/* object unloaded */
	char *symbol;			/* "name+0xOFF" for the list */
	char *object;			/* file name, NULL for the main executable */
};

/* registry.c */
extern pthread_mutex_t kp_registry_lock;
extern struct kp_probepoint *kp_all_probepoints;	/* oldest first */
struct kp_probepoint *kp_probepoint_lookup(uintptr_t addr);
bool kp_probepoint_enabled(const struct kp_probepoint *pp);
/* Frees pp (called by the architecture once its slot is unused). */
void kp_probepoint_free(struct kp_probepoint *pp);

/* dispatch.c: called by the architecture's trap code on the hit path. */
int kp_run_pre_handlers(struct kp_probepoint *pp, struct pt_regs *regs);
void kp_run_post_handlers(struct kp_probepoint *pp, struct pt_regs *regs);
int kp_run_fault_handlers(struct kp_probepoint *pp, struct pt_regs *regs, int trapnr);
void kp_count_missed(struct kp_probepoint *pp);
bool kp_probepoint_has_post(const struct kp_probepoint *pp);

/* knobs.c */
extern bool kp_knob_enabled;
extern bool kp_knob_optimize;
void kp_knobs_init(void);

/* blacklist.c */
bool kp_blacklisted(uintptr_t addr);
void kp_blacklist_init(void);

/* init.c */
int kp_init(void);

#endif
