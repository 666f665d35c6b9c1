/*
 * A function that returns with every caller-saved register and the
 * arithmetic flags set to known values, and a caller of it that sets the
 * callee-saved ones and stores what it sees after the call into
 * kr_regs_out[16] (flags rax rdx rcx rsi rdi r8-r11 rbx rbp r12-r15): the
 * view of a caller that relies on what its callee leaves in registers, as
 * one compiled with GCC's interprocedural register allocation does.  For
 * the return-probe tests (test_kretprobe.c, test_optimize.c).
 */
	.text
	.globl kr_asm_regs
	.type kr_asm_regs, @function
	.p2align 4, 0xcc
kr_asm_regs:
	movabs $0x1111111111111101, %rax
	movabs $0x2222222222222202, %rdx
	movabs $0x3333333333333303, %rcx
	movabs $0x4444444444444404, %rsi
	movabs $0x5555555555555505, %rdi
	movabs $0x6666666666666606, %r8
	movabs $0x7777777777777707, %r9
	movabs $0x0888888888888808, %r10
	movabs $0x0999999999999909, %r11
	pushq $0x8d7			/* CF PF AF ZF SF OF */
	popfq
	ret
	.size kr_asm_regs, . - kr_asm_regs

	.globl kr_asm_regs_caller, kr_asm_regs_ret
	.type kr_asm_regs_caller, @function
	.p2align 4, 0xcc
kr_asm_regs_caller:
	push %rbx
	push %rbp
	push %r12
	push %r13
	push %r14
	push %r15
	sub $8, %rsp
	movabs $0x0aaaaaaaaaaaaa0a, %rbx
	movabs $0x0bbbbbbbbbbbbb0b, %rbp
	movabs $0x0ccccccccccccc0c, %r12
	movabs $0x0ddddddddddddd0d, %r13
	movabs $0x0eeeeeeeeeeeee0e, %r14
	movabs $0x0fffffffffffff0f, %r15
	pushq $0x202
	popfq
	call kr_asm_regs
kr_asm_regs_ret:
	pushfq
	popq kr_regs_out+0(%rip)
	mov %rax, kr_regs_out+8(%rip)
	mov %rdx, kr_regs_out+16(%rip)
	mov %rcx, kr_regs_out+24(%rip)
	mov %rsi, kr_regs_out+32(%rip)
	mov %rdi, kr_regs_out+40(%rip)
	mov %r8, kr_regs_out+48(%rip)
	mov %r9, kr_regs_out+56(%rip)
	mov %r10, kr_regs_out+64(%rip)
	mov %r11, kr_regs_out+72(%rip)
	mov %rbx, kr_regs_out+80(%rip)
	mov %rbp, kr_regs_out+88(%rip)
	mov %r12, kr_regs_out+96(%rip)
	mov %r13, kr_regs_out+104(%rip)
	mov %r14, kr_regs_out+112(%rip)
	mov %r15, kr_regs_out+120(%rip)
	add $8, %rsp
	pop %r15
	pop %r14
	pop %r13
	pop %r12
	pop %rbp
	pop %rbx
	ret
	.size kr_asm_regs_caller, . - kr_asm_regs_caller

/* What kr_asm_regs_caller stores: the flags as kr_asm_regs sets them
 * (compare under the mask 0x8d5), then the registers in that order. */
	.section .rodata
	.p2align 4
	.globl kr_regs_want
	.type kr_regs_want, @object
kr_regs_want:
	.quad 0x8d5, 0x1111111111111101, 0x2222222222222202, 0x3333333333333303
	.quad 0x4444444444444404, 0x5555555555555505, 0x6666666666666606
	.quad 0x7777777777777707, 0x0888888888888808, 0x0999999999999909
	.quad 0x0aaaaaaaaaaaaa0a, 0x0bbbbbbbbbbbbb0b, 0x0ccccccccccccc0c
	.quad 0x0ddddddddddddd0d, 0x0eeeeeeeeeeeee0e, 0x0fffffffffffff0f
	.size kr_regs_want, 128

	.bss
	.p2align 4
	.globl kr_regs_out
	.type kr_regs_out, @object
kr_regs_out:
	.zero 128
	.size kr_regs_out, 128

	.section .note.GNU-stack, "", @progbits
