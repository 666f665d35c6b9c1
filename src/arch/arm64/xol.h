/* Out-of-line slots on arm64: executable copies of probed instructions
 * that run unchanged away from their address, placed within reach of a B
 * back where memory allows. */
#ifndef KP_ARM64_XOL_H
#define KP_ARM64_XOL_H

#include <stdbool.h>
#include <stdint.h>

/*
 * A slot is four words:
 *
 *   +0   the instruction       entry without post handlers
 *   +4   B addr+4, or BRK #XOL_EXIT when addr+4 is out of a B's reach
 *   +8   the instruction       entry with post handlers
 *   +12  BRK #XOL_POST         the trap handler runs the post handlers and
 *                              resumes at addr+4
 */
#define XOL_SLOT_SIZE 16
#define XOL_BOOST_OFF 0
#define XOL_POST_OFF 8

/* The BRK immediates of the slots' exits (the probe's own is
 * A64_BRK_PROBE_IMM, asm/kprobes.h). */
#define A64_BRK_XOL_EXIT_IMM 0x6b71
#define A64_BRK_XOL_POST_IMM 0x6b72

struct kp_probepoint;

struct xol_slot {
	struct kp_probepoint *owner;	/* read by the hit path */
	uintptr_t code;			/* runtime address of the slot */
	uint64_t retired_ns;
	struct xol_slot *next_retired;
};

/* Allocates a slot for the instruction word insn probed at addr and writes
 * its code: 0, -ENOMEM. */
int xol_build(struct xol_slot **out, uint32_t insn, uintptr_t addr, struct kp_probepoint *owner);

/* The slot containing ip, or NULL.  Lock-free, async-signal-safe. */
struct xol_slot *xol_slot_of(uintptr_t ip);

/* Hands the slot back once no thread can be inside it any more (it frees
 * its probepoint then). */
void xol_retire(struct xol_slot *s);

/* Whether enough slots are retired for xol_reclaim() to be worth it. */
bool xol_reclaim_due(void);

/* Frees retired slots that no thread can be inside; returns how many. */
int xol_reclaim(void);

/* A64 encodings the slots, stubs and static keys write. */
#define A64_NOP 0xd503201fu
/* What makes a64_b()'s B a BL. */
#define A64_BL_BIT 0x80000000u

/* B from pc to target; false when out of reach (+-128 MB). */
static inline bool a64_b(uintptr_t pc, uintptr_t target, uint32_t *insn)
{
	int64_t off = (int64_t)(target - pc);

	if (off & 3 || off < -(1LL << 27) || off >= (1LL << 27))
		return false;
	*insn = 0x14000000u | ((uint32_t)(off >> 2) & 0x03ffffffu);
	return true;
}

#endif
