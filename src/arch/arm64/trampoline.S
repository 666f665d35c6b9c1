/*
 * The return-probe trampoline, the FP/SIMD-saving call and the jprobe
 * return trap (arm64).
 *
 * A return-probed function returns (RET, to its instance's stub, which
 * branches here) instead of to its caller; sp is then what it was at the
 * function's entry.  The trampoline never traps.  It builds a struct
 * pt_regs below sp (x0-x30, sp as the caller sees it, pc 0 for the
 * dispatcher to fill with the real return address, NZCV), calls
 * kp_kretprobe_dispatch(regs), takes the registers back with the
 * handlers' changes (not sp), and returns to regs->pc with x30 holding it,
 * as the function's own RET to its caller would have left it.  The
 * return goes by RET, which Branch Target Identification does not check.
 * FP/SIMD registers (the return value of a float function) are left
 * alone: the dispatcher is compiled for the general registers only, and a
 * handler that may touch them is called through kp_call_fpu_saved.
 *
 * The call frame information says where the real return address is once
 * the dispatcher has filled it (pc in the frame), so an unwinder started
 * in a return handler (backtrace(), kprobes_stack) goes on to the caller.
 */
#include "arch/arm64/ptregs.inc"

	.text
	.globl kp_kretprobe_trampoline
	.hidden kp_kretprobe_trampoline
	.type kp_kretprobe_trampoline, %function
	.p2align 4
kp_kretprobe_trampoline:
	.cfi_startproc
	.cfi_def_cfa sp, 0
	sub sp, sp, #PT_SIZE
	.cfi_def_cfa_offset PT_SIZE
	PT_ALL_PAIRS stp
	.cfi_offset x29, PT_X29 - PT_SIZE
	str x30, [sp, #PT_X30]
	add x9, sp, #PT_SIZE
	str x9, [sp, #PT_SP]
	str xzr, [sp, #PT_PC]
	.cfi_offset x30, PT_PC - PT_SIZE
	mrs x9, nzcv
	str x9, [sp, #PT_PSTATE]
	/* a frame record for frame-pointer walks from the handlers: {x29,
	 * x30}, x30 being the stub's return point, which
	 * kretprobe_find_ret_addr() maps to the real return address */
	add x29, sp, #PT_X29
	mov x0, sp
	bl kp_kretprobe_dispatch
	ldr x9, [sp, #PT_PSTATE]
	msr nzcv, x9
	PT_ALL_PAIRS ldp
	ldr x30, [sp, #PT_PC]
	add sp, sp, #PT_SIZE
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
