/*
 * The return-probe trampoline and the jprobe return trap.
 *
 * A return-probed function returns here instead of to its caller.  The
 * trampoline never traps: it saves what a C handler may clobber (the
 * general registers and flags, the return registers xmm/ymm/zmm0-1 and the
 * x87 values st0/st1), builds a struct pt_regs, calls
 * kp_kretprobe_dispatch(regs), which fills regs->ip with the real return
 * address, restores everything and returns there.  One variant per vector
 * width; the library picks the widest the CPU and OS support.
 *
 * Stack at entry: rsp = S, the caller's frame above; everything below S is
 * dead (the callee's frame is gone), so the red zone is free to use.
 * Frame: [S-8] real return address (first the flags), [S-176] pt_regs.
 */
	.macro SAVE_SSE
	movdqu %xmm0, 0(%rsp)
	movdqu %xmm1, 64(%rsp)
	.endm
	.macro RESTORE_SSE
	movdqu 0(%rsp), %xmm0
	movdqu 64(%rsp), %xmm1
	.endm
	.macro SAVE_AVX
	vmovdqu %ymm0, 0(%rsp)
	vmovdqu %ymm1, 64(%rsp)
	.endm
	.macro RESTORE_AVX
	vmovdqu 0(%rsp), %ymm0
	vmovdqu 64(%rsp), %ymm1
	.endm
	.macro SAVE_AVX512
	vmovdqu64 %zmm0, 0(%rsp)
	vmovdqu64 %zmm1, 64(%rsp)
	.endm
	.macro RESTORE_AVX512
	vmovdqu64 0(%rsp), %zmm0
	vmovdqu64 64(%rsp), %zmm1
	.endm

	.macro TRAMPOLINE name, save, restore
	.text
	.globl \name
	.hidden \name
	.type \name, @function
	.p2align 4
	nop			/* unwinders look up return address - 1 */
\name:
	pushfq
	lea -168(%rsp), %rsp
	mov %r15, 0(%rsp)
	mov %r14, 8(%rsp)
	mov %r13, 16(%rsp)
	mov %r12, 24(%rsp)
	mov %rbp, 32(%rsp)
	mov %rbx, 40(%rsp)
	mov %r11, 48(%rsp)
	mov %r10, 56(%rsp)
	mov %r9, 64(%rsp)
	mov %r8, 72(%rsp)
	mov %rax, 80(%rsp)
	mov %rcx, 88(%rsp)
	mov %rdx, 96(%rsp)
	mov %rsi, 104(%rsp)
	mov %rdi, 112(%rsp)
	movq $-1, 120(%rsp)		/* orig_ax */
	movq $0, 128(%rsp)		/* ip: filled by the dispatcher */
	movq $0x33, 136(%rsp)		/* cs */
	mov 168(%rsp), %rax
	mov %rax, 144(%rsp)		/* flags */
	lea 176(%rsp), %rax
	mov %rax, 152(%rsp)		/* sp as the caller sees it */
	movq $0x2b, 160(%rsp)		/* ss */
	mov %rsp, %rbx
	and $-64, %rsp
	sub $192, %rsp
	\save
	/* x87 return values: count the loaded registers from TOP */
	fnstsw %ax
	shr $11, %eax
	and $7, %eax
	neg %eax
	and $7, %eax
	mov %eax, 184(%rsp)
	cmp $1, %eax
	jb 1f
	fstpt 128(%rsp)
	cmp $2, %eax
	jb 1f
	fstpt 144(%rsp)
1:	mov %rbx, %rdi
	cld
	call kp_kretprobe_dispatch
	mov 184(%rsp), %eax
	cmp $2, %eax
	jb 2f
	fldt 144(%rsp)
2:	cmp $1, %eax
	jb 3f
	fldt 128(%rsp)
3:	\restore
	mov %rbx, %rsp
	mov 128(%rsp), %rax
	mov %rax, 168(%rsp)		/* the real return address */
	pushq 144(%rsp)
	popfq
	mov 0(%rsp), %r15
	mov 8(%rsp), %r14
	mov 16(%rsp), %r13
	mov 24(%rsp), %r12
	mov 32(%rsp), %rbp
	mov 40(%rsp), %rbx
	mov 48(%rsp), %r11
	mov 56(%rsp), %r10
	mov 64(%rsp), %r9
	mov 72(%rsp), %r8
	mov 80(%rsp), %rax
	mov 88(%rsp), %rcx
	mov 96(%rsp), %rdx
	mov 104(%rsp), %rsi
	mov 112(%rsp), %rdi
	lea 168(%rsp), %rsp
	ret
	.size \name, . - \name
	.endm

	TRAMPOLINE kp_kretprobe_trampoline_sse, SAVE_SSE, RESTORE_SSE
	TRAMPOLINE kp_kretprobe_trampoline_avx, SAVE_AVX, RESTORE_AVX
	TRAMPOLINE kp_kretprobe_trampoline_avx512, SAVE_AVX512, RESTORE_AVX512

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
