/*
 * The structure offsets and constants the assembly reads, generated at
 * build time as the kernel's asm-offsets: this file is compiled to
 * assembly only (never linked), each DEFINE leaves a "->NAME value" marker
 * in it, and the Makefile turns the markers into .set lines in
 * asm-offsets.inc, which trampoline.S and detour.S include.
 */
#include "core/asm-offsets-core.h"

#define DEFINE(sym, val) __asm__ volatile("\n.ascii \"->" #sym " %c0\"" : : "i"((long)(val)))
#define OFFSET(sym, type, member) DEFINE(sym, offsetof(type, member))
#define BLANK() __asm__ volatile("\n.ascii \"->\"")

/* The trampoline's frame is a struct pt_regs; sp stays 16-byte aligned. */
_Static_assert(sizeof(struct pt_regs) % 16 == 0, "struct pt_regs: a multiple of 16 bytes");

void kp_asm_offsets(void);
void kp_asm_offsets(void)
{
	/* struct pt_regs (include/kprobes.h) */
	DEFINE(PT_SIZE, sizeof(struct pt_regs));
	OFFSET(PT_REGS, struct pt_regs, regs);
	OFFSET(PT_X29, struct pt_regs, regs[29]);
	OFFSET(PT_X30, struct pt_regs, regs[30]);
	OFFSET(PT_SP, struct pt_regs, sp);
	OFFSET(PT_PC, struct pt_regs, pc);
	OFFSET(PT_PSTATE, struct pt_regs, pstate);
	BLANK();

	KP_CORE_ASM_OFFSETS();
}
