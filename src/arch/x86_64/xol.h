/* Out-of-line slots: executable copies of probed instructions, placed within
 * rel32 reach of the code they stand in for. */
#ifndef KP_X86_XOL_H
#define KP_X86_XOL_H

#include <stdbool.h>
#include <stdint.h>

#include "arch/x86_64/insn.h"

#define XOL_SLOT_SIZE 64
#define XOL_NONE 0xff

struct kp_probepoint;

struct xol_slot {
	struct kp_probepoint *owner;	/* read by the hit path */
	uintptr_t code;			/* runtime address of the slot */
	uint8_t boost_off;		/* entry when no post handler runs */
	uint8_t post_off;		/* entry with post handlers, or XOL_NONE */
	uint8_t fault_sp_off;		/* fault here: undo a pushed return address */
	uint8_t nexits;
	struct slot_exit exits[2];	/* post code's int3s */
	bool must_post;			/* boosted code is not enough (syscall) */
	uint64_t retired_ns;
	struct xol_slot *next_retired;
};

/* Allocates a slot for ai at addr and writes its code.  -ENOMEM, or -EINVAL
 * when the instruction cannot be relocated. */
int xol_build(struct arch_insn *ai, uintptr_t addr, struct kp_probepoint *owner);

/* The slot containing ip, or NULL.  Lock-free, async-signal-safe. */
struct xol_slot *xol_slot_of(uintptr_t ip);

/* Hands the slot back once no thread can be inside it any more. */
void xol_retire(struct xol_slot *s);

/* Whether enough slots are retired for xol_reclaim() to be worth it. */
bool xol_reclaim_due(void);

/* Frees retired slots that no thread can be inside; returns how many. */
int xol_reclaim(void);

/* Ranges of the retired slots of probepoints in [lo, hi) (whose code
 * jumps back there); -1 when there are more than max. */
int xol_retired_into(uintptr_t lo, uintptr_t hi, uintptr_t (*r)[2], int max);


#endif
