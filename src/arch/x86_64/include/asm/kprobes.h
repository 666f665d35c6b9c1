/*
 * What the architecture-neutral core knows of x86-64, as the kernel's
 * <asm/kprobes.h>: the sizes it reasons with and the few register and
 * stack operations it performs, each behind a name.  Each architecture
 * provides this header under src/arch/<arch>/include/asm/; the Makefile
 * puts the built one's directory on the include path.  Core code names no
 * register, no instruction byte and no instruction length of its own.
 */
#ifndef KP_ASM_KPROBES_H
#define KP_ASM_KPROBES_H

#include <stdbool.h>
#include <stdint.h>

#include <kprobes.h>	/* struct pt_regs (include/) */
#include "arch/x86_64/insn.h"	/* struct arch_insn, the instruction holder */

/* The breakpoint instruction (int3) and its length. */
#define ARCH_BREAKPOINT_INSN 0xcc
#define ARCH_BREAKPOINT_LEN 1

/* The longest instruction. */
#define ARCH_MAX_INSN_LEN KP_MAX_INSN

/* The jump an optimized probe writes (jmp rel32).  Every instruction
 * boundary inside an optimized region lies less than this far from its
 * start: a probe at addr can sit inside the region of a jump starting at
 * most ARCH_OPT_JUMP_LEN - 1 bytes before it. */
#define ARCH_OPT_JUMP_LEN 5

/* The longest region one jump replaces, plus one: as the kernel's
 * MAX_OPTIMIZED_LENGTH, the distance within which an optimized probepoint
 * before addr may cover it (a change at addr may let it be optimized). */
#define ARCH_MAX_OPTIMIZED_LENGTH (KP_MAX_INSN + ARCH_OPT_JUMP_LEN)

/* Ranges no thread may be in while one jump is installed, at most (see
 * arch_opt_census_ranges(): the region, the detour, the slots of
 * probepoints inside the region, retired slots, ...). */
#define ARCH_OPT_CENSUS_MAX (2 + KP_MAX_INSN + 4 + 16)

/* A return handler can be given the vector state at the return for
 * kprobes_vector_reg() (kp_call_fpu_image(), noted by kretprobe.c). */
#define ARCH_HAS_RETURN_VECTOR_REGS 1

/* Jump optimization (arch_opt_*, detours) is implemented. */
#define ARCH_HAS_OPTPROBES 1
/* The detours keep every caller-saved register, whatever a handler needs
 * (KP_OPT_SAVE_SCRATCH counts for the return trampoline only). */
#define ARCH_DETOURS_KEEP_SCRATCH 1

/* A static-key site: a 5-byte NOP or a jmp rel32. */
#define ARCH_JUMP_LABEL_LEN 5

/* Watchpoints: four debug registers, whose data breakpoints trap after
 * the access (the handler sees the new value and the next instruction). */
#define ARCH_WATCH_SLOTS 4

/* The opcode a registered kprobe shows (struct kprobe.opcode): the
 * instruction's first byte. */
static inline kprobe_opcode_t arch_insn_opcode(const struct arch_insn *ai)
{
	return ai->bytes[0];
}

/* The probepoint's code was unmapped: its jump, if any, is gone with it. */
static inline void arch_opt_forget_gone(struct arch_insn *ai)
{
	if (ai->opt)
		ai->opt->jumped = false;
}

/* ---- registers ---- */

/* instruction_pointer(), instruction_pointer_set(), user_stack_pointer()
 * and regs_return_value() are the public header's (include/kprobes.h), as
 * the kernel's <asm/ptrace.h> gives them to kprobe handlers. */

/* The n-th integer argument of a function at its entry (SysV: rdi, rsi,
 * rdx, rcx, r8, r9, then the stack above the return address): the public
 * regs_get_kernel_argument() (regs.c). */

/* ---- frames ---- */

/* The frame pointer (rbp), as the kernel's frame_pointer(). */
static inline uintptr_t arch_frame_pointer(const struct pt_regs *regs)
{
	return regs->bp;
}

/* The register of ARCH_DWARF_AUX (asm/dwarf.h): rbx. */
static inline uintptr_t arch_aux_register(const struct pt_regs *regs)
{
	return regs->bx;
}

/* The link register holding a return address (none on x86-64: 0). */
static inline uintptr_t arch_link_register(const struct pt_regs *regs)
{
	(void)regs;
	return 0;
}

/* A frame-pointer frame: the CFA is the frame pointer plus this, and the
 * caller's frame pointer is saved at the CFA plus ARCH_FP_SAVED_AT (the
 * return address at arch_return_slot_of_cfa()). */
#define ARCH_FP_CFA_OFFSET 16
#define ARCH_FP_SAVED_AT (-16)

/* ---- return addresses ---- */

/*
 * A return probe keys a function's activation by the stack address of its
 * return address (its "slot"), which is also where the address is hijacked.
 * At a function entry the return address is at the top of the stack; when
 * the function has returned into the trampoline, the slot is the word just
 * below the stack pointer.
 */
static inline uintptr_t arch_return_slot(const struct pt_regs *regs)
{
	return regs->sp;
}

static inline uintptr_t arch_return_slot_at_return(const struct pt_regs *regs)
{
	return regs->sp - sizeof(uintptr_t);
}

/* The return address's slot of the frame whose canonical frame address
 * (DWARF CFA: the stack pointer before the call) is cfa. */
static inline uintptr_t arch_return_slot_of_cfa(uintptr_t cfa)
{
	return cfa - sizeof(uintptr_t);
}

/* The return address of the function entered with regs, whose slot is
 * slot (on x86-64 the top of the stack; regs is not needed, and is NULL
 * on an optimized entry's fast path), and hijacking it: as the kernel's
 * arch_uretprobe_hijack_return_addr() once the original is saved. */
static inline uintptr_t arch_entry_ret_addr(const struct pt_regs *regs, uintptr_t slot)
{
	(void)regs;
	return *(uintptr_t *)slot;
}

static inline void arch_entry_ret_addr_set(struct pt_regs *regs, uintptr_t slot, uintptr_t addr)
{
	(void)regs;
	*(uintptr_t *)slot = addr;
}

/* Where a live frame keeps its return address (true), for the unwinder
 * interposers that put the real one back and the stub again: at its
 * slot. */
static inline bool arch_frame_ret_addr(uintptr_t slot, uintptr_t **where)
{
	*where = (uintptr_t *)slot;
	return true;
}

/* Whether the frame at slot may still return to addr (false: provably
 * not).  The stack may be dead (a frame left by longjmp or an exception)
 * and the hit path's own frames may be reusing it right now: read through
 * a volatile load, without AddressSanitizer, which would report it. */
__attribute__((no_sanitize_address)) static inline bool arch_frame_may_return_to(uintptr_t slot,
										  uintptr_t addr)
{
	return *(volatile uintptr_t *)slot == addr;
}

/* ---- return stubs (retstub.c) ---- */

/* Bytes of a stub before its return point: its entry, which calls the
 * function's copied first instructions (see retstub.c). */
#define ARCH_RET_STUB_ENTRY 9

/*
 * The fast instance set-up of an optimized entry, run with the detour's
 * light level below the return address's slot.  A plain exit has the
 * thread record where R was (slot - 8): no call then (false), and the slot
 * keeps ret.  A continuing exit has R there, and above the light level
 * (slot - 16) the continuation it jumps to, the copied instructions: it is
 * to jump to the stub's entry instead, with the copy's address in the
 * slot, which the stub's call overwrites with the return point ret.
 */
static inline bool arch_ret_stub_call(uintptr_t slot, const void *record, uintptr_t ret)
{
	uintptr_t *s = (uintptr_t *)slot;

	if (s[-1] == (uintptr_t)record)
		return false;
	s[0] = s[-2];
	s[-2] = ret - ARCH_RET_STUB_ENTRY;
	return true;
}

/* Executable pools (os/linux/execmem.c) are placed so that every unit is
 * within a direct branch of the code it serves: rel32 reach (2 GB), less a margin; and below the top of the 47-bit user address space, less a page group. */
#define ARCH_EXEC_REACH 0x7fe00000UL
#define ARCH_USER_VA_END 0x7fffffff0000UL

#endif
