/*
 * The return-probe trampoline and the jprobe return trap.
 *
 * A return-probed function returns here instead of to its caller.  The
 * trampoline never traps: it saves the general registers in a struct
 * pt_regs, calls kp_kretprobe_dispatch(regs), which fills regs->ip with
 * the real return address, restores and goes there.  When the function
 * was called from its instance's stub (retstub.c), the return predictor's
 * top entry is the real return address: a ret, predicted.  Otherwise the
 * function's ret to here already took (and missed) the predictor's entry
 * for this call, so a ret would be mispredicted as well and leave the
 * predictor one entry off for the callers' returns: a jump.  Vector and x87
 * state (the return values in xmm/ymm/zmm0-1 and st0/st1) is left alone:
 * the dispatcher is compiled for general registers only and saves that
 * state around a handler that may touch it (kp_call_fpu_saved).
 *
 * Stack at entry: rsp = S, the caller's frame above; everything below S is
 * dead (the callee's frame is gone), so the red zone is free to use.
 * Frame: [S-8] real return address, [S-176] pt_regs.
 */
#include "arch/x86_64/ptregs.inc"

	.text
	.globl kp_kretprobe_trampoline
	.hidden kp_kretprobe_trampoline
	.type kp_kretprobe_trampoline, @function
	.p2align 4
kp_kretprobe_trampoline:
	lea -PT_SIZE - 8(%rsp), %rsp
	PT_STORE_GPRS
	movq $0, 128(%rsp)		/* ip: filled by the dispatcher */
	/* The flags without pushfq (slow, microcoded): lahf and seto change
	 * none; DF is clear at a return, as the ABI says. */
	lahf
	seto %al
	LAHF_TO_EFLAGS
	mov %rax, 144(%rsp)
	lea 176(%rsp), %rax
	mov %rax, 152(%rsp)		/* sp as the caller sees it */
	movq $0x2b, 160(%rsp)		/* ss */
	mov %rsp, %rbx
	and $-16, %rsp
	mov %rbx, %rdi
	cld
	call kp_kretprobe_dispatch
	mov %rbx, %rsp
	mov 128(%rsp), %rcx
	mov %rcx, 168(%rsp)		/* the real return address */
	test %al, %al
	jz 1f
	PT_RESTORE_FLAGS		/* flags as the function left them */
	PT_LOAD_GPRS
	lea 168(%rsp), %rsp
	ret
1:	PT_RESTORE_FLAGS
	PT_LOAD_GPRS
	lea 176(%rsp), %rsp
	jmp *-8(%rsp)			/* below rsp: no signal frame writes there */
	.size kp_kretprobe_trampoline, . - kp_kretprobe_trampoline

/*
 * int kp_call_fpu_saved(int (*fn)(void *, void *), void *a, void *b):
 * fn(a, b) with the whole x87/SSE/AVX state saved and restored around it
 * (xsave, or fxsave without it), for handlers that may change it.
 */
	.globl kp_call_fpu_saved
	.hidden kp_call_fpu_saved
	.type kp_call_fpu_saved, @function
	.p2align 4
kp_call_fpu_saved:
	push %rbp
	mov %rsp, %rbp
	push %rbx
	push %r12
	push %r13
	push %r14
	mov %rdi, %r14
	mov %rsi, %r12
	mov %rdx, %r13
	mov kp_xsave_size(%rip), %ecx
	test %ecx, %ecx
	jz 1f
	sub %rcx, %rsp
	and $-64, %rsp
	mov %rsp, %rbx
	xor %eax, %eax
	mov %rax, 512(%rbx)
	mov %rax, 520(%rbx)
	mov %rax, 528(%rbx)
	mov %rax, 536(%rbx)
	mov %rax, 544(%rbx)
	mov %rax, 552(%rbx)
	mov %rax, 560(%rbx)
	mov %rax, 568(%rbx)
	mov $-1, %eax
	mov $-1, %edx
	xsave64 (%rbx)
	mov %r12, %rdi
	mov %r13, %rsi
	call *%r14
	mov %eax, %r12d
	mov $-1, %eax
	mov $-1, %edx
	xrstor64 (%rbx)
	jmp 2f
1:	sub $512, %rsp
	and $-64, %rsp
	mov %rsp, %rbx
	fxsave64 (%rbx)
	mov %r12, %rdi
	mov %r13, %rsi
	call *%r14
	mov %eax, %r12d
	fxrstor64 (%rbx)
2:	mov %r12d, %eax
	lea -32(%rbp), %rsp
	pop %r14
	pop %r13
	pop %r12
	pop %rbx
	pop %rbp
	ret
	.size kp_call_fpu_saved, . - kp_call_fpu_saved

/* jprobe_return(): the trap handler recognizes this int3 and restores the
 * state saved at the jprobe's entry. */
	.text
	.globl jprobe_return
	.type jprobe_return, @function
	.globl kp_jprobe_return_trap
	.hidden kp_jprobe_return_trap
	.p2align 4
jprobe_return:
kp_jprobe_return_trap:
	int3
	ud2
	.size jprobe_return, . - jprobe_return

	.section .note.GNU-stack, "", @progbits
