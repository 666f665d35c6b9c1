/*
 * The code every detour of a jump-optimized probe calls (arm64; the
 * detours themselves are written by optimize.c).
 *
 * Entered by BLR from the detour with a struct pt_regs at sp holding x0,
 * x1 and x30 as the program had them at the probe, x0 = the probepoint,
 * x30 = R, the detour's return address.  It completes the frame as the
 * BRK path builds it (x2-x29, sp as the probed instruction sees it, pc =
 * the probed address, NZCV in pstate), saves the FP/SIMD registers
 * (q0-q31, FPCR, FPSR: handlers are ordinary C and may use any of them,
 * and mid-function every vector register may be live; at a function
 * entry q0-q7, FPCR and FPSR: kp_a64_detour_entry), calls
 * kp_a64_detour_call(pp, regs) (optimize.c: the thread record, the
 * re-entrance rule, the read-side section, errno, the pre-handlers), and
 * returns to R with every register loaded back from
 * the frame but x0, x1 and x30, which the detour loads itself: handlers'
 * changes to x0-x30 and the flags take effect, changes to sp and pc do
 * not (as with jump-optimized probes on x86-64 and in Linux).
 *
 * While the handlers run, the thread-local kp_a64_detour_ret holds R (the
 * previous value is kept in the frame and put back, for a detour entered
 * from a signal handler that interrupted another): a census asking
 * whether a thread may return into a detour (optimize.c,
 * a64_ip_bound_for_detour) looks there and at whether the thread is in
 * this code at all.
 *
 * sp stays 16-byte aligned; a signal arriving here is delivered below the
 * frame.  The call frame information describes the frame as a signal
 * frame that stands for the probed code: the return address is the
 * probed address (in the frame's pc), the CFA the program's sp, so that a
 * handler's backtrace goes on into the probed function and its callers.
 */
#include "asm-offsets.inc"

	.set F_MARK, 16			/* kp_a64_detour_ret before */
	.set F_SIZE, 32

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
	stp x2, x3, [sp, #PT_REGS + 16]
	stp x4, x5, [sp, #PT_REGS + 32]
	stp x6, x7, [sp, #PT_REGS + 48]
	stp x8, x9, [sp, #PT_REGS + 64]
	stp x10, x11, [sp, #PT_REGS + 80]
	stp x12, x13, [sp, #PT_REGS + 96]
	stp x14, x15, [sp, #PT_REGS + 112]
	stp x16, x17, [sp, #PT_REGS + 128]
	stp x18, x19, [sp, #PT_REGS + 144]
	stp x20, x21, [sp, #PT_REGS + 160]
	stp x22, x23, [sp, #PT_REGS + 176]
	stp x24, x25, [sp, #PT_REGS + 192]
	stp x26, x27, [sp, #PT_REGS + 208]
	stp x28, x29, [sp, #PT_REGS + 224]
	add x9, sp, #PT_SIZE
	ldr x10, [x0, #PP_ADDR]
	str x9, [sp, #PT_SP]
	str x10, [sp, #PT_PC]
	mrs x9, nzcv
	str x9, [sp, #PT_PSTATE]
	mov x19, sp
	.cfi_def_cfa x19, PT_SIZE
	.cfi_offset x30, PT_PC - PT_SIZE
	.cfi_offset x29, PT_X29 - PT_SIZE
	.cfi_offset x19, PT_REGS + 152 - PT_SIZE
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
	ldp x2, x3, [sp, #PT_REGS + 16]
	ldp x4, x5, [sp, #PT_REGS + 32]
	ldp x6, x7, [sp, #PT_REGS + 48]
	ldp x8, x9, [sp, #PT_REGS + 64]
	ldp x10, x11, [sp, #PT_REGS + 80]
	ldp x12, x13, [sp, #PT_REGS + 96]
	ldp x14, x15, [sp, #PT_REGS + 112]
	ldp x16, x17, [sp, #PT_REGS + 128]
	ldp x18, x19, [sp, #PT_REGS + 144]
	ldp x20, x21, [sp, #PT_REGS + 160]
	ldp x22, x23, [sp, #PT_REGS + 176]
	ldp x24, x25, [sp, #PT_REGS + 192]
	ldp x26, x27, [sp, #PT_REGS + 208]
	ldp x28, x29, [sp, #PT_REGS + 224]
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
