/*
 * The structure offsets and constants the assembly reads, generated at
 * build time as the kernel's asm-offsets: this file is compiled to
 * assembly only (never linked), each DEFINE leaves a "->NAME value" marker
 * in it, and the Makefile turns the markers into .set lines in
 * $(B)/gen/asm-offsets.inc, which hitpath.inc and ptregs.inc include.
 * What the assembly reads therefore always matches the C definitions.
 */
#include <stddef.h>

#include "core/asm-offsets-core.h"
#include "arch/x86_64/regs.h"

#define DEFINE(sym, val) __asm__ volatile("\n.ascii \"->" #sym " %c0\"" : : "i"((long)(val)))
#define OFFSET(sym, type, member) DEFINE(sym, offsetof(type, member))
#define BLANK() __asm__ volatile("\n.ascii \"->\"")

void kp_asm_offsets(void);
void kp_asm_offsets(void)
{
	/* struct pt_regs (include/kprobes.h) */
	DEFINE(PT_SIZE, sizeof(struct pt_regs));
	OFFSET(PT_R15, struct pt_regs, r15);
	OFFSET(PT_R14, struct pt_regs, r14);
	OFFSET(PT_R13, struct pt_regs, r13);
	OFFSET(PT_R12, struct pt_regs, r12);
	OFFSET(PT_RBP, struct pt_regs, bp);
	OFFSET(PT_RBX, struct pt_regs, bx);
	OFFSET(PT_R11, struct pt_regs, r11);
	OFFSET(PT_R10, struct pt_regs, r10);
	OFFSET(PT_R9, struct pt_regs, r9);
	OFFSET(PT_R8, struct pt_regs, r8);
	OFFSET(PT_RAX, struct pt_regs, ax);
	OFFSET(PT_RCX, struct pt_regs, cx);
	OFFSET(PT_RDX, struct pt_regs, dx);
	OFFSET(PT_RSI, struct pt_regs, si);
	OFFSET(PT_RDI, struct pt_regs, di);
	OFFSET(PT_ORIG_RAX, struct pt_regs, orig_ax);
	OFFSET(PT_IP, struct pt_regs, ip);
	OFFSET(PT_CS, struct pt_regs, cs);
	OFFSET(PT_FLAGS, struct pt_regs, flags);
	OFFSET(PT_SP, struct pt_regs, sp);
	OFFSET(PT_SS, struct pt_regs, ss);
	BLANK();

	KP_CORE_ASM_OFFSETS();
	BLANK();

	/* struct kp_thread (os/linux/threads.h): the vector registers' note */
	OFFSET(KPT_VEC_REGS, struct kp_thread, vec_regs);
	OFFSET(KPT_VEC_AREA, struct kp_thread, vec_area);
	OFFSET(KPT_VEC_LAYOUT, struct kp_thread, vec_layout);
	DEFINE(KP_VEC_FXSAVE, KP_VEC_FXSAVE);
	DEFINE(KP_VEC_XSAVE, KP_VEC_XSAVE);
	BLANK();

	/* struct kp_probepoint (core/internal.h) */
	OFFSET(PP_AFAST, struct kp_probepoint, afast);
	BLANK();

	/* struct kprobe and its private words (core/internal.h) */
	OFFSET(KP_PRE_HANDLER, struct kprobe, pre_handler);
	OFFSET(KP_POST_HANDLER, struct kprobe, post_handler);
	OFFSET(KP_NEXT, struct kprobe, __next);
	BLANK();
}
