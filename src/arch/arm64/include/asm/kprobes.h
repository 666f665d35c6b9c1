/*
 * What the architecture-neutral core knows of arm64 (A64), as the kernel's
 * <asm/kprobes.h>: the sizes it reasons with and the few register and
 * return-address operations it performs, each behind a name.  See
 * "The arm64 backend" in docs/design.md.
 */
#ifndef KP_ASM_KPROBES_H
#define KP_ASM_KPROBES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kprobes.h>		/* struct pt_regs (include/) */
#include "arch/arm64/insn.h"	/* struct a64_insn */

/* The breakpoint: BRK #imm16 with the library's own immediate, so that a
 * trap on the program's own BRK (or a debugger's, which uses #0) is told
 * apart by the word at the trapping pc.  BRK #0x6b70 ("kp"). */
#define A64_BRK(imm) (0xd4200000u | ((uint32_t)(imm) << 5))
#define A64_BRK_PROBE_IMM 0x6b70
#define ARCH_BREAKPOINT_INSN A64_BRK(A64_BRK_PROBE_IMM)
/* The pc a probe's handlers see is the probed instruction's own (the trap
 * reports the BRK's address, and the core's "one breakpoint back" is 0). */
#define ARCH_BREAKPOINT_LEN 0

/* Every instruction is one word. */
#define ARCH_MAX_INSN_LEN 4

/* Jump optimization: the probed word is replaced by a B to the
 * probepoint's detour, allocated within the B's +-128 MB (optimize.c,
 * detour.S; "The arm64 backend" in docs/design.md).  A region is that one
 * word; nothing has to be outside it while the B goes in (no census
 * range), but threads must be out of a detour before it is reused. */
#define ARCH_OPT_JUMP_LEN 4
#define ARCH_MAX_OPTIMIZED_LENGTH 4
#define ARCH_OPT_CENSUS_MAX 1
#define ARCH_HAS_OPTPROBES 1
/* The detours' light path keeps x4-x18 only for a handler that may write
 * them (KP_OPT_SAVE_SCRATCH in its needs: detour.S). */
#define ARCH_DETOURS_KEEP_SCRATCH 0

/* A static-key site: NOP or B. */
#define ARCH_JUMP_LABEL_LEN 4

/* Watchpoints: perf breakpoints on the watchpoint registers (four).  An
 * arm64 watchpoint traps before the access, and again at every return to
 * it: the trap handler steps the access itself in a slot of its own and
 * runs the handlers after it, as on x86-64 (arch/arm64/watch.c). */
#define ARCH_WATCH_SLOTS 4

/* A return handler can be given the V registers at the return for
 * kprobes_vector_reg() (kp_call_fpu_image(), noted by kretprobe.c). */
#define ARCH_HAS_RETURN_VECTOR_REGS 1

struct xol_slot;
struct a64_opt;

/* The instruction holder of a probepoint. */
struct arch_insn {
	uint32_t insn;			/* the original word */
	struct a64_insn dec;		/* what a64_insn_decode() made of it */
	struct xol_slot *slot;		/* out-of-line copy; NULL: simulated */
	struct a64_opt *opt;		/* jump optimization (optimize.c) */
};

/* The opcode a registered kprobe shows (struct kprobe.opcode): the word. */
static inline kprobe_opcode_t arch_insn_opcode(const struct arch_insn *ai)
{
	return ai->insn;
}

/* The probepoint's code was unmapped: its B went with it (optimize.c). */
void arch_opt_forget_gone(struct arch_insn *ai);

/* ---- frames ---- */

/* The frame pointer (x29). */
static inline uintptr_t arch_frame_pointer(const struct pt_regs *regs)
{
	return regs->regs[29];
}

/* No register of ARCH_DWARF_AUX (asm/dwarf.h): 0, unknown. */
static inline uintptr_t arch_aux_register(const struct pt_regs *regs)
{
	(void)regs;
	return 0;
}

/* The link register (x30): the return address at a function's first
 * instructions and in leaves, which the stack unwinder uses where the CFI
 * says it is still there. */
static inline uintptr_t arch_link_register(const struct pt_regs *regs)
{
	return regs->regs[30];
}

/* An AAPCS64 frame record: x29 points at {caller's x29, x30}, the frame
 * record sits at the bottom of the frame, whose CFA is not derivable from
 * x29 in general; the frame-pointer unwinder takes CFA = x29 + 16 and the
 * saved x29 at CFA - 16, the return address at arch_return_slot_of_cfa()
 * — which is right for the common prologue stp x29, x30, [sp, #-N]!;
 * mov x29, sp only when the record is at the top of the frame. */
#define ARCH_FP_CFA_OFFSET 16
#define ARCH_FP_SAVED_AT (-16)

/* ---- return addresses ----
 *
 * A return probe keys an activation by its "slot".  On arm64 the return
 * address arrives in the link register (x30), not on the stack, so the
 * slot is the stack pointer at the entry: the frame's DWARF CFA, which is
 * also the stack pointer after the function has returned.  The return
 * address is hijacked in regs->regs[30] at the entry; where the function
 * keeps it afterwards (its frame record, or still x30 in a leaf) is not
 * known, so nothing reads a return address in memory
 * (arch_frame_ret_addr() says so).
 */
static inline uintptr_t arch_return_slot(const struct pt_regs *regs)
{
	return regs->sp;
}

static inline uintptr_t arch_return_slot_at_return(const struct pt_regs *regs)
{
	return regs->sp;
}

static inline uintptr_t arch_return_slot_of_cfa(uintptr_t cfa)
{
	return cfa;
}

/* The return address of the function entered at regs (slot: its
 * activation), and hijacking it, as the kernel's
 * arch_uretprobe_hijack_return_addr() on arm64 does with regs->regs[30].
 * regs is NULL on an optimized entry's fast path (detour.S), whose frame
 * is a struct pt_regs ending at the slot, x30 saved in it and loaded back
 * from it when the detour returns. */
static inline uintptr_t *arch_fast_entry_x30(uintptr_t slot)
{
	return (uintptr_t *)(slot - sizeof(struct pt_regs) + offsetof(struct pt_regs, regs[30]));
}

static inline uintptr_t arch_entry_ret_addr(const struct pt_regs *regs, uintptr_t slot)
{
	return regs ? regs->regs[30] : *arch_fast_entry_x30(slot);
}

static inline void arch_entry_ret_addr_set(struct pt_regs *regs, uintptr_t slot, uintptr_t addr)
{
	if (regs)
		regs->regs[30] = addr;
	else
		*arch_fast_entry_x30(slot) = addr;
}

/* A live frame's return address, kept in memory at a place the core can
 * name: not on arm64 (false). */
static inline bool arch_frame_ret_addr(uintptr_t slot, uintptr_t **where)
{
	(void)slot;
	*where = NULL;
	return false;
}

/* Whether the frame at slot may still return to addr (false: provably
 * not): unknown on arm64, so it may. */
static inline bool arch_frame_may_return_to(uintptr_t slot, uintptr_t addr)
{
	(void)slot;
	(void)addr;
	return true;
}

/* ---- return stubs (retstub.c) ---- */

/* Bytes of a stub before its return point: one word, never run, so that
 * an unwinder looking up "return address - 1" finds the stub's FDE. */
#define ARCH_RET_STUB_ENTRY 4

/* The optimized entry's fast instance set-up: arm64 never calls the
 * function from its stub.  The stub becomes its return address instead,
 * in the x30 that the detour loads back from its frame. */
static inline bool arch_ret_stub_call(uintptr_t slot, const void *record, uintptr_t ret)
{
	(void)slot;
	(void)record;
	(void)ret;
	return false;
}

/* Executable pools (os/linux/execmem.c) are placed so that every unit is
 * within a direct branch of the code it serves: B reach (128 MB), less a margin; and below 48-bit user addresses, less a page group. */
#define ARCH_EXEC_REACH 0x7e00000UL
#define ARCH_USER_VA_END ((1UL << 48) - 0x10000)

#endif
