/*
 * The structure offsets and constants the assembly reads, generated at
 * build time as the kernel's asm-offsets: this file is compiled to
 * assembly only (never linked), each DEFINE leaves a "->NAME value" marker
 * in it, and the Makefile turns the markers into .set lines in
 * asm-offsets.inc, which trampoline.S and detour.S include.
 */
#include <stddef.h>

#include "core/arch_api.h"
#include "os/linux/threads.h"

#define DEFINE(sym, val) __asm__ volatile("\n.ascii \"->" #sym " %c0\"" : : "i"((long)(val)))
#define OFFSET(sym, type, member) DEFINE(sym, offsetof(type, member))

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
	/* struct kp_probepoint (core/arch_api.h), for the detours */
	OFFSET(PP_ADDR, struct kp_probepoint, addr);
	OFFSET(PP_FAST, struct kp_probepoint, fast);
	/* struct kprobe (include/kprobes.h) */
	OFFSET(KP_NEEDS, struct kprobe, __reserved[0]);	/* kp_probe_needs() */
	OFFSET(KP_FAST_FN, struct kprobe, __reserved[1]);	/* kp_probe_fast_fn() */
	DEFINE(KP_SAVE_SCRATCH_BIT, __builtin_ctz(KP_OPT_SAVE_SCRATCH));
	/* struct kp_thread (os/linux/threads.h): a read-side section */
	OFFSET(KPT_GEN, struct kp_thread, gen);
	OFFSET(KPT_NEST, struct kp_thread, nest);
	OFFSET(KPT_IN_HANDLER, struct kp_thread, in_handler);
}
