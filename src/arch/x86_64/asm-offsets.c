/*
 * The structure offsets and constants the assembly reads, generated at
 * build time as the kernel's asm-offsets: this file is compiled to
 * assembly only (never linked), each DEFINE leaves a "->NAME value" marker
 * in it, and the Makefile turns the markers into .set lines in
 * $(B)/gen/asm-offsets.inc, which hitpath.inc and ptregs.inc include.
 * What the assembly reads therefore always matches the C definitions.
 */
#include <stddef.h>

#include "core/arch_api.h"
#include "core/kretprobe.h"
#include "os/linux/threads.h"
#include "arch/x86_64/regs.h"

#define DEFINE(sym, val) __asm__ volatile("\n.ascii \"->" #sym " %c0\"" : : "i"((long)(val)))
#define OFFSET(sym, type, member) DEFINE(sym, offsetof(type, member))
#define BLANK() __asm__ volatile("\n.ascii \"->\"")

/* SECTION_CLOSE drops in_handler and nest by one 64-bit subtraction. */
_Static_assert(offsetof(struct kp_thread, in_handler) ==
		       offsetof(struct kp_thread, nest) + sizeof(unsigned int),
	       "in_handler must sit right above nest");

/* The assembly takes a struct kretprobe's kprobe for the kretprobe. */
_Static_assert(offsetof(struct kretprobe, kp) == 0, "kretprobe.kp must come first");

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

	/* struct kp_thread (os/linux/threads.h) */
	OFFSET(KPT_TID, struct kp_thread, tid);
	OFFSET(KPT_GEN, struct kp_thread, gen);
	OFFSET(KPT_NEST, struct kp_thread, nest);
	OFFSET(KPT_IN_HANDLER, struct kp_thread, in_handler);
	OFFSET(KPT_RI_TOP, struct kp_thread, ri_top);
	OFFSET(KPT_RI_BUSY, struct kp_thread, ri_cache_busy);
	OFFSET(KPT_RI_CACHE, struct kp_thread, ri_cache);
	OFFSET(KPT_VEC_REGS, struct kp_thread, vec_regs);
	OFFSET(KPT_VEC_AREA, struct kp_thread, vec_area);
	OFFSET(KPT_VEC_LAYOUT, struct kp_thread, vec_layout);
	DEFINE(KP_VEC_FXSAVE, KP_VEC_FXSAVE);
	DEFINE(KP_VEC_XSAVE, KP_VEC_XSAVE);
	BLANK();

	/* struct kp_probepoint (core/internal.h) */
	OFFSET(PP_ADDR, struct kp_probepoint, addr);
	OFFSET(PP_PROBES, struct kp_probepoint, probes);
	OFFSET(PP_FAST, struct kp_probepoint, fast);
	OFFSET(PP_AFAST, struct kp_probepoint, afast);
	OFFSET(PP_RFAST, struct kp_probepoint, rfast);
	BLANK();

	/* struct kprobe and its private words (core/internal.h) */
	OFFSET(KP_PRE_HANDLER, struct kprobe, pre_handler);
	OFFSET(KP_POST_HANDLER, struct kprobe, post_handler);
	OFFSET(KP_FLAGS, struct kprobe, flags);
	OFFSET(KP_NEXT, struct kprobe, __next);
	OFFSET(KP_NEEDS, struct kprobe, __reserved[0]);		/* kp_probe_needs() */
	OFFSET(KP_FAST_FN, struct kprobe, __reserved[1]);	/* kp_probe_fast_fn() */
	OFFSET(KP_RI_SLOT, struct kprobe, __reserved[2]);	/* kp_probe_ri_slot() */
	DEFINE(KP_FLAG_DISABLED, KPROBE_FLAG_DISABLED);
	DEFINE(KP_SAVE_VECTOR, KP_OPT_SAVE_VECTOR);
	DEFINE(KP_SAVE_ERRNO, KP_OPT_SAVE_ERRNO);
	DEFINE(KP_SAVE_REGS, KP_OPT_SAVE_REGS);
	DEFINE(KP_SAVE_SCRATCH, KP_OPT_SAVE_SCRATCH);
	BLANK();

	/* struct kretprobe (include/kprobes.h) */
	OFFSET(KRP_HANDLER, struct kretprobe, handler);
	OFFSET(KRP_POOL, struct kretprobe, __pool);
	BLANK();

	/* struct kp_ri and its struct kretprobe_instance (core/kretprobe.h) */
	OFFSET(RI_NEXT, struct kp_ri, next);
	OFFSET(RI_POOL, struct kp_ri, pool);
	OFFSET(RI_SLOT, struct kp_ri, slot);
	OFFSET(RI_OWNER, struct kp_ri, owner);
	OFFSET(RI_STUB, struct kp_ri, stub);
	OFFSET(RI_CALLED, struct kp_ri, called);
	OFFSET(RI_CACHED, struct kp_ri, cached);
	OFFSET(RI_DUP, struct kp_ri, dup);
	OFFSET(RI_CACHE_N, struct kp_ri, cache_n);
	OFFSET(RI_STUB_ENTRY, struct kp_ri, stub_entry);
	OFFSET(RI_PUB, struct kp_ri, pub);
	DEFINE(RI_RP, offsetof(struct kp_ri, pub) + offsetof(struct kretprobe_instance, rp));
	DEFINE(RI_RET, offsetof(struct kp_ri, pub) + offsetof(struct kretprobe_instance, ret_addr));
	DEFINE(RI_TASK, offsetof(struct kp_ri, pub) + offsetof(struct kretprobe_instance, task));
	BLANK();

	/* struct kp_rp_pool (core/kretprobe.h) */
	OFFSET(POOL_RP, struct kp_rp_pool, rp);
	OFFSET(POOL_LIVE, struct kp_rp_pool, live);
	OFFSET(POOL_NEEDS, struct kp_rp_pool, needs);
	OFFSET(POOL_CACHE_STATE, struct kp_rp_pool, cache_state);
	OFFSET(POOL_CACHE_SLOT, struct kp_rp_pool, cache_slot);
	OFFSET(POOL_CACHE_MAX, struct kp_rp_pool, cache_max);
	DEFINE(POOL_CACHE_ON, CACHE_ON);
	DEFINE(RET_STUB_ENTRY, ARCH_RET_STUB_ENTRY);
}
