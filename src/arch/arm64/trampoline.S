/*
 * The return-probe trampoline, the FP/SIMD-saving call and the jprobe
 * return trap (arm64).
 *
 * A return-probed function returns (RET, to its instance's stub, which
 * branches here) instead of to its caller; sp is then what it was at the
 * function's entry, the instance's slot.  The trampoline never traps.  It
 * keeps x0-x7, x29, x30 and the flags in a struct pt_regs below sp, and:
 *
 *  - the fast path, as on x86-64: the thread's newest instance is this
 *    frame's and its only one (dup), its handler needs neither FP/SIMD
 *    state nor errno, the thread is in no section, handler or cache window
 *    of its own, and its cache of the pool has room.  It begins a
 *    read-side section with in_handler raised (which keeps the thread's
 *    own signal handlers off the cache, as in detour.S), takes the
 *    instance off the thread's list onto its cache, and calls the handler:
 *    with x8-x18 kept only for one that may change them
 *    (KP_OPT_SAVE_SCRATCH), and with the complete struct pt_regs for one
 *    that reads it (KP_OPT_SAVE_REGS), whose changes then take effect.
 *    The section ends, and the registers come back.
 *
 *  - every other case completes the struct (x0-x30, sp as the caller sees
 *    it, pc 0 for the dispatcher to fill with the real return address,
 *    NZCV) and calls kp_kretprobe_dispatch(regs).
 *
 * Either way it returns to the real return address with x30 holding it,
 * as the function's own RET to its caller would have left it: by RET,
 * which Branch Target Identification does not check.  The handler's
 * change to pc is not taken.  FP/SIMD registers (the return value of a
 * float function) are left alone: the code here and the dispatcher are
 * general registers only, and a handler that may touch them is called
 * through kp_call_fpu_saved.
 *
 * The frame: the struct pt_regs at sp, the instance across the handler
 * call at T_RI, the caller's sp at T_FRAME.  The call frame information
 * says where the real return address is once it is known (pc in the
 * frame; 0 before, which ends a walk), so an unwinder started in a
 * return handler (backtrace(), kprobes_stack) goes on to the caller; the
 * handlers also get a frame record {x29, x30}, x30 being the stub's
 * return point, which kretprobe_find_ret_addr() maps to the real return
 * address.
 */
#include "arch/arm64/ptregs.inc"
#include "arch/arm64/hitpath.inc"

	.set T_RI, PT_SIZE
	.set T_FRAME, PT_SIZE + 16
	.set PT_X18, PT_REGS + 144

/* x8-x18: str or ldr for x18 */
	.macro X8_X18 pair, single
	PT_PAIRS \pair, 8,9, 10,11, 12,13, 14,15, 16,17
	\single x18, [sp, #PT_X18]
	.endm

/* x19-x28, and sp as the caller sees it: the rest of a struct pt_regs */
	.macro T_FILL_REST
	PT_PAIRS stp, 19,20, 21,22, 23,24, 25,26, 27,28
	add x9, sp, #T_FRAME
	str x9, [sp, #PT_SP]
	.endm

/* The rest of the fast path, x3 = the instance, x4 = its pool, inside the
 * section: the handler, if the probe is still there and enabled; the
 * real return address into x30 (read while the instance is still this
 * thread's); the section's end (the record looked up again: nothing is
 * kept across the handler), the registers of \level back (0: x0-x7; 1:
 * x0-x18; 2: x0-x29, with the handler's changes) and out. */
	.macro T_HANDLER_AND_OUT level
	str x3, [sp, #T_RI]
	ldrb w0, [x4, #POOL_LIVE]
	cbz w0, 1f
	ldr x5, [x4, #POOL_RP]
	ldr x6, [x5, #KRP_HANDLER]
	cbz x6, 1f
	ldr w0, [x5, #KP_FLAGS]
	tbnz w0, #KP_DISABLED_BIT, 1f
	add x0, x3, #RI_PUB
	mov x1, sp
	add x29, sp, #PT_X29
	blr x6
1:	ldr x3, [sp, #T_RI]
	ldr x30, [x3, #RI_RET]
	THREAD_RECORD 2, 3
	SECTION_END x2, 0, 1
	ldr x0, [sp, #PT_PSTATE]
	msr nzcv, x0
	.cfi_remember_state
	.if \level == 2
	PT_ALL_PAIRS ldp
	.else
	.if \level == 1
	X8_X18 ldp, ldr
	.endif
	PT_PAIRS ldp, 0,1, 2,3, 4,5, 6,7
	ldr x29, [sp, #PT_X29]
	.endif
	add sp, sp, #T_FRAME
	.cfi_def_cfa_offset 0
	.cfi_restore x29
	.cfi_register x30, x30
	ret
	.cfi_restore_state
	.endm

	.text
	.globl kp_kretprobe_trampoline
	.hidden kp_kretprobe_trampoline
	.type kp_kretprobe_trampoline, %function
	.p2align 4
kp_kretprobe_trampoline:
	.cfi_startproc
	.cfi_def_cfa sp, 0
	sub sp, sp, #T_FRAME
	.cfi_def_cfa_offset T_FRAME
	PT_PAIRS stp, 0,1, 2,3, 4,5, 6,7
	stp x29, x30, [sp, #PT_X29]
	.cfi_offset x29, PT_X29 - T_FRAME
	str xzr, [sp, #PT_PC]
	.cfi_offset x30, PT_PC - T_FRAME
	mrs x2, nzcv
	str x2, [sp, #PT_PSTATE]

	/* ---- the fast path ---- */
	THREAD_RECORD 2, 3
	cbz x2, 69f
	ldr x3, [x2, #KPT_RI_TOP]		/* the instance */
	cbz x3, 69f
	ldr x0, [x3, #RI_SLOT]
	add x1, sp, #T_FRAME			/* the slot: the caller's sp */
	cmp x0, x1
	b.ne 69f
	/* its frame's only instance (set at the entry) */
	ldrb w0, [x3, #RI_DUP]
	cbnz w0, 69f
	ldr x0, [x2, #KPT_NEST]			/* nest and in_handler */
	cbnz x0, 69f
	ldr w0, [x2, #KPT_RI_BUSY]
	cbnz w0, 69f
	ldr x4, [x3, #RI_POOL]
	ldrb w0, [x4, #POOL_NEEDS]
	tst w0, #KP_NEEDS_ALL_ONLY
	b.ne 69f
	/* The section begins before the cache is looked at: a thread that
	 * turns the pool's caching off then waits for it to end. */
	SECTION_BEGIN x2, 0
	ldrb w0, [x4, #POOL_CACHE_STATE]
	cmp w0, #POOL_CACHE_ON
	b.ne 68f
	/* Room in the thread's cache (on only with membarrier, which the
	 * section relies on): its slot empty, or its stack this pool's and
	 * shorter than cache_max.  The instance goes onto it already: until
	 * the section ends only this thread's fast paths could take it, and
	 * in_handler keeps them off. */
	ldrb w0, [x4, #POOL_CACHE_SLOT]
	RI_CACHE_SLOT x5, x2, x0
	ldr x1, [x5]				/* the cache's top */
	mov w0, #1
	cbz x1, 62f
	ldr x6, [x1, #RI_POOL]
	cmp x6, x4
	b.ne 68f
	ldr w0, [x1, #RI_CACHE_N]
	ldr w6, [x4, #POOL_CACHE_MAX]
	cmp w0, w6
	b.hs 68f
	add w0, w0, #1
62:	str w0, [x3, #RI_CACHE_N]
	ldr x6, [x3, #RI_NEXT]
	str x6, [x2, #KPT_RI_TOP]		/* the frame returns for real */
	str x1, [x3, #RI_NEXT]
	ldr x6, [x3, #RI_RET]
	str x6, [sp, #PT_PC]			/* for unwinders from here on */
	mov w0, #1
	strb w0, [x3, #RI_CACHED]
	stlr x3, [x5]
	ldrb w0, [x4, #POOL_NEEDS]
	tbnz w0, #KP_SAVE_REGS_BIT, 65f
	tbnz w0, #KP_SAVE_SCRATCH_BIT, 64f
	T_HANDLER_AND_OUT 0
64:	X8_X18 stp, str
	T_HANDLER_AND_OUT 1
65:	X8_X18 stp, str
	T_FILL_REST
	T_HANDLER_AND_OUT 2

	/* ---- everything else: the dispatcher ---- */
68:	SECTION_END x2, 0, 1
69:	X8_X18 stp, str
	T_FILL_REST
	add x29, sp, #PT_X29
	mov x0, sp
	bl kp_kretprobe_dispatch
	ldr x9, [sp, #PT_PSTATE]
	msr nzcv, x9
	PT_ALL_PAIRS ldp
	ldr x30, [sp, #PT_PC]
	add sp, sp, #T_FRAME
	.cfi_def_cfa_offset 0
	.cfi_restore x29
	.cfi_register x30, x30
	ret
	.cfi_endproc
	.size kp_kretprobe_trampoline, . - kp_kretprobe_trampoline

/*
 * int kp_call_fpu_saved(int (*fn)(void *, void *), void *a, void *b):
 * fn(a, b) with the FP/SIMD registers (q0-q31, FPCR, FPSR) saved around
 * it, for handlers that may change them.  fn also gets the saved q0-q31
 * (16 bytes each, in order) as a third argument, which
 * kp_call_fpu_image(fn, a, b), the same code, declares (vecregs.c).
 */
	.globl kp_call_fpu_saved, kp_call_fpu_image
	.hidden kp_call_fpu_saved, kp_call_fpu_image
	.type kp_call_fpu_saved, %function
	.type kp_call_fpu_image, %function
	.p2align 4
kp_call_fpu_saved:
kp_call_fpu_image:
	.cfi_startproc
	stp x29, x30, [sp, #-16]!
	.cfi_def_cfa_offset 16
	.cfi_offset x29, -16
	.cfi_offset x30, -8
	mov x29, sp
	.cfi_def_cfa_register x29	/* sp moves below: the CFA is x29 + 16 */
	sub sp, sp, #528
	stp q0, q1, [sp, #0]
	stp q2, q3, [sp, #32]
	stp q4, q5, [sp, #64]
	stp q6, q7, [sp, #96]
	stp q8, q9, [sp, #128]
	stp q10, q11, [sp, #160]
	stp q12, q13, [sp, #192]
	stp q14, q15, [sp, #224]
	stp q16, q17, [sp, #256]
	stp q18, q19, [sp, #288]
	stp q20, q21, [sp, #320]
	stp q22, q23, [sp, #352]
	stp q24, q25, [sp, #384]
	stp q26, q27, [sp, #416]
	stp q28, q29, [sp, #448]
	stp q30, q31, [sp, #480]
	mrs x9, fpcr
	mrs x10, fpsr
	add x11, sp, #512
	stp x9, x10, [x11]
	mov x9, x0
	mov x0, x1
	mov x1, x2
	mov x2, sp
	blr x9
	add x11, sp, #512
	ldp x9, x10, [x11]
	msr fpcr, x9
	msr fpsr, x10
	ldp q0, q1, [sp, #0]
	ldp q2, q3, [sp, #32]
	ldp q4, q5, [sp, #64]
	ldp q6, q7, [sp, #96]
	ldp q8, q9, [sp, #128]
	ldp q10, q11, [sp, #160]
	ldp q12, q13, [sp, #192]
	ldp q14, q15, [sp, #224]
	ldp q16, q17, [sp, #256]
	ldp q18, q19, [sp, #288]
	ldp q20, q21, [sp, #320]
	ldp q22, q23, [sp, #352]
	ldp q24, q25, [sp, #384]
	ldp q26, q27, [sp, #416]
	ldp q28, q29, [sp, #448]
	ldp q30, q31, [sp, #480]
	mov sp, x29
	.cfi_def_cfa_register sp
	ldp x29, x30, [sp], #16
	.cfi_def_cfa_offset 0
	.cfi_restore x29
	.cfi_restore x30
	ret
	.cfi_endproc
	.size kp_call_fpu_saved, . - kp_call_fpu_saved
	.size kp_call_fpu_image, . - kp_call_fpu_image

/* jprobe_return(): the trap handler recognizes this BRK (its own
 * immediate) and restores the state saved at the jprobe's entry. */
	.globl jprobe_return
	.type jprobe_return, %function
	.globl kp_jprobe_return_trap
	.hidden kp_jprobe_return_trap
	.p2align 4
jprobe_return:
kp_jprobe_return_trap:
	brk #0x6b74
	udf #0
	.size jprobe_return, . - jprobe_return

	.section .note.GNU-stack, "", %progbits
