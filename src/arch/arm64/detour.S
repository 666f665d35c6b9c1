/*
 * The code every detour of a jump-optimized probe calls (arm64; the
 * detours themselves are written by optimize.c).
 *
 * Entered by BL (or BLR) from the detour with a struct pt_regs at sp
 * holding x0, x1 and x30 as the program had them at the probe, x0 = the
 * probepoint, x30 = R, the detour's return address.  It first saves x2,
 * x3, the flags and the probed address (pc), then takes one of two paths:
 *
 *   light  the common case, as on x86-64: the probepoint has one probe
 *          whose handler needs nothing more (pp->fast: it provably reads
 *          no pt_regs and leaves the FP/SIMD registers and errno alone,
 *          clobber.c), or a return probe without an entry handler.  x4-x18
 *          are saved only for a handler that may change them (its needs,
 *          KP_OPT_SAVE_SCRATCH; a return probe's set-up always may).  A
 *          thread with a record, outside any handler and any read-side
 *          section, on a kernel with membarrier, begins a section with
 *          in_handler raised (one store), calls the probe's fast function
 *          fast(p, slot, record) with slot = the program's sp (a return
 *          probe's activation; its x30 is in this frame's regs[30], where
 *          arch_entry_ret_addr() finds it), ends the section and returns.
 *          The section spans the handler: a census that misses a thread
 *          there is followed by a grace period that waits for it.  A
 *          return probe alone on the probepoint (pp->rfast) is set up in
 *          the section without a call, as on x86-64: an instance from the
 *          thread's cache pushed on its list, its stub in the frame's x30
 *          (the C set-up, kp_kretprobe_entry_fast(), for everything else).
 *   general  everything else: the frame is completed as the BRK path
 *          builds it (x19-x29, sp as the probed instruction sees it), and
 *          kp_a64_detour_call(pp, regs) (detour_call.c: the thread record,
 *          the re-entrance rule, the read-side section, errno, the
 *          pre-handlers, each called with what its needs say it may
 *          change saved around it).
 *
 * Both return to R with every register loaded back from the frame but x0,
 * x1 and x30, which the detour loads itself: handlers' changes to x0-x30
 * and the flags take effect, changes to sp and pc do not (as with
 * jump-optimized probes on x86-64 and in Linux).
 *
 * While the general path's handlers run, the thread-local
 * kp_a64_detour_ret holds R (the previous value is kept in the frame and
 * put back, for a detour entered from a signal handler that interrupted
 * another): a census asking whether a thread may return into a detour
 * (optimize.c, a64_ip_bound_for_detour) looks there and at whether the
 * thread is in this code at all.  (That path runs code outside a section:
 * claiming a thread record.)
 *
 * sp stays 16-byte aligned; a signal arriving here is delivered below the
 * frame.  The call frame information describes the frame as a signal
 * frame that stands for the probed code: the return address is the
 * probed address (in the frame's pc), the CFA the program's sp, so that a
 * handler's backtrace goes on into the probed function and its callers.
 * Both paths push a frame record {the program's x29, R} for frame-pointer
 * walks: R maps to the probed address (arch_unwind_map_ip).
 */
#include "arch/arm64/ptregs.inc"
#include "arch/arm64/hitpath.inc"

	/* The light path loads pp->fast and pp->rfast with one LDP. */
	.if PP_RFAST - PP_FAST - 8
	.error "struct kp_probepoint: rfast is not right after fast"
	.endif

	.set F_MARK, 16			/* kp_a64_detour_ret before */
	.set F_SIZE, 32
	.set PT_X18, PT_REGS + 144
	.set PT_X19, PT_REGS + 152	/* the light path keeps the record there */

/* x4-x18: str or ldr for x18 */
	.macro X4_X18 pair, single
	PT_PAIRS \pair, 4,5, 6,7, 8,9, 10,11, 12,13, 14,15, 16,17
	\single x18, [sp, #PT_X18]
	.endm

	.macro DETOUR_COMMON name
	.globl \name
	.hidden \name
	.type \name, %function
	.p2align 4
\name:
	.cfi_startproc
	.cfi_signal_frame
	.cfi_def_cfa sp, PT_SIZE
	.cfi_undefined x30
	hint #34			/* BTI C: entered by BLR */
	PT_PAIRS stp, 2,3
	ldr x2, [x0, #PP_ADDR]
	str x2, [sp, #PT_PC]
	.cfi_offset x30, PT_PC - PT_SIZE
	mrs x2, nzcv
	str x2, [sp, #PT_PSTATE]

	/* ---- the light path: x0-x3 until the handler's needs are known ---- */
	adrp x2, kp_membarrier_ok
	ldr w2, [x2, #:lo12:kp_membarrier_ok]
	cbz w2, 70f
	THREAD_RECORD 2, 3
	cbz x2, 70f
	ldr x3, [x2, #KPT_NEST]			/* nest and in_handler */
	cbnz x3, 70f
	SECTION_BEGIN x2, 3
	/* Read inside the section: a probe taken off the probepoint is
	 * freed only after a grace period. */
	ldp x3, x1, [x0, #PP_FAST]		/* fast, and rfast */
	cbnz x1, 80f
74:	cbz x3, 71f
	ldrb w1, [x3, #KP_NEEDS]
	tbz w1, #KP_SAVE_SCRATCH_BIT, 72f
	X4_X18 stp, str
72:	stp x2, x3, [sp, #PT_X19]		/* the record, the probe */
	mov x0, x3
	ldr x3, [x0, #KP_FAST_FN]
	add x1, sp, #PT_SIZE			/* the slot: the program's sp */
	stp x29, x30, [sp, #-16]!
	.cfi_adjust_cfa_offset 16
	.cfi_offset x29, -(PT_SIZE + 16)
	mov x29, sp
	blr x3					/* fast(p, slot, record) */
	ldp x29, x30, [sp], #16
	.cfi_adjust_cfa_offset -16
	.cfi_same_value x29
	ldp x2, x3, [sp, #PT_X19]
	/* (the probe's needs are fixed while it is registered, and it is
	 * while the section lasts) */
	ldrb w1, [x3, #KP_NEEDS]
	tbz w1, #KP_SAVE_SCRATCH_BIT, 73f
	X4_X18 ldp, ldr
73:	SECTION_END x2, 0, 1
	ldr x2, [sp, #PT_PSTATE]
	msr nzcv, x2
	PT_PAIRS ldp, 2,3
	ret

	/* A return probe's entry, all of it here (rfast: one return probe
	 * without an entry handler, alone on the probepoint; a pair's
	 * kprobe runs through its C set-up).  x2 = the record, x1 = the
	 * probe.  The common case: the thread is in no cache window, has no
	 * frame at or below this one (one left by a longjmp, another return
	 * probe's on this function), and its cache of the probe's pool,
	 * which is on, holds an instance that is already the thread's.  The
	 * instance is taken off the cache, pushed on the thread's list of
	 * live frames, and its stub becomes the return address in the
	 * frame's x30, as kp_kretprobe_entry_fast() does.  The section
	 * (in_handler raised) keeps the thread's own signal handlers off
	 * the cache, and a thread that empties caches waits for it.
	 * Anything else goes back, with x4 and x5 as they were, to the C
	 * set-up. */
80:	mov x3, x1
	PT_PAIRS stp, 4,5
	ldr x4, [x0, #PP_PROBES]
	cmp x4, x3
	b.ne 89f
	ldr w4, [x2, #KPT_RI_BUSY]
	cbnz w4, 89f
	add x5, sp, #PT_SIZE			/* the slot: the program's sp */
	ldr x4, [x2, #KPT_RI_TOP]
	cbz x4, 81f
	ldr x4, [x4, #RI_SLOT]
	cmp x4, x5
	b.ls 89f
81:	ldr x1, [x3, #KRP_POOL]
	ldrb w4, [x1, #POOL_CACHE_STATE]
	cmp w4, #POOL_CACHE_ON
	b.ne 89f
	ldrb w4, [x3, #KP_RI_SLOT]
	RI_CACHE_SLOT x4, x2, x4
	ldr x3, [x4]				/* its newest instance */
	cbz x3, 89f
	ldr x5, [x3, #RI_POOL]
	cmp x5, x1
	b.ne 89f
	/* Already the thread's (pub.task too, and pub.rp is the pool's):
	 * not so in a fork child, or for a record taken over from a thread
	 * that exited, which the C set-up sets right. */
	ldr w5, [x3, #RI_OWNER]
	ldr w1, [x2, #KPT_TID]
	cmp w5, w1
	b.ne 89f
	ldr x1, [x3, #RI_NEXT]
	str x1, [x4]				/* off the cache */
	/* not called from its stub, no longer cached, not a second
	 * instance of its frame (the newest is above): one store */
	str wzr, [x3, #RI_CALLED]
	add x5, sp, #PT_SIZE
	str x5, [x3, #RI_SLOT]
	ldr x1, [sp, #PT_X30]
	str x1, [x3, #RI_RET]
	ldr x1, [x2, #KPT_RI_TOP]
	str x1, [x3, #RI_NEXT]
	str x3, [x2, #KPT_RI_TOP]
	ldr x1, [x3, #RI_STUB]
	str x1, [sp, #PT_X30]			/* the function returns to the stub */
	PT_PAIRS ldp, 4,5
	SECTION_END x2, 0, 1
	ldr x2, [sp, #PT_PSTATE]
	msr nzcv, x2
	PT_PAIRS ldp, 2,3
	ret
89:	PT_PAIRS ldp, 4,5
	ldr x3, [x0, #PP_FAST]
	b 74b

	/* No fast probe (any more): the section ends, the general path
	 * takes the hit. */
71:	SECTION_END x2, 1, 3

	/* ---- the general path ---- */
70:	X4_X18 stp, str
	str x19, [sp, #PT_X19]
	PT_PAIRS stp, 20,21, 22,23, 24,25, 26,27, 28,29
	add x9, sp, #PT_SIZE
	str x9, [sp, #PT_SP]
	mov x19, sp
	.cfi_def_cfa x19, PT_SIZE
	.cfi_offset x29, PT_X29 - PT_SIZE
	.cfi_offset x19, PT_X19 - PT_SIZE
	.cfi_offset x20, PT_REGS + 160 - PT_SIZE
	sub sp, sp, #F_SIZE
	/* a frame record {the program's x29, R} for frame-pointer walks:
	 * R maps to the probed address (arch_unwind_map_ip) */
	stp x29, x30, [sp]
	mov x29, sp
	/* x20 = &kp_a64_detour_ret (initial-exec TLS) */
	mrs x9, tpidr_el0
	adrp x20, :gottprel:kp_a64_detour_ret
	ldr x20, [x20, #:gottprel_lo12:kp_a64_detour_ret]
	add x20, x20, x9
	ldr x9, [x20]
	str x9, [sp, #F_MARK]
	str x30, [x20]
	mov x1, x19
	bl kp_a64_detour_call
	ldr x9, [sp, #F_MARK]
	str x9, [x20]
	ldr x30, [sp, #8]
	mov sp, x19
	.cfi_def_cfa sp, PT_SIZE
	.cfi_undefined x30
	ldr x9, [sp, #PT_PSTATE]
	msr nzcv, x9
	PT_PAIRS ldp, 2,3, 4,5, 6,7, 8,9, 10,11, 12,13, 14,15, 16,17, 18,19, 20,21, \
		22,23, 24,25, 26,27, 28,29
	ret
	.cfi_endproc
	.size \name, . - \name
	.endm


/* Two entries, for the middle of a function and its first instruction
 * (optimize.c tells them apart), one code: neither saves more than the
 * general registers.  Both are one range for the census
 * (kp_a64_detour_common .. _end). */
	.text
	.globl kp_a64_detour_common_end
	.hidden kp_a64_detour_common_end
	DETOUR_COMMON kp_a64_detour_common
	DETOUR_COMMON kp_a64_detour_entry
kp_a64_detour_common_end:

	.section .note.GNU-stack, "", %progbits
