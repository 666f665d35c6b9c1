/*
 * Hand-written functions covering each instruction class the library
 * probes, plus a driver that runs one of them from a full register state
 * and captures the full state afterwards.  tests/test_insn.c probes every
 * instruction boundary of each and compares with an unprobed run.
 *
 * Convention: rdi points at 256 bytes of scratch memory; all other
 * registers and the flags are inputs.
 */
	.macro FUNC name
	.text
	.globl \name
	.type \name, @function
	.p2align 4
\name:
	.endm
	.macro END name
	.size \name, . - \name
	.endm

	.data
	.p2align 5
	.globl insn_data
insn_data:
	.quad 1, 2, 3, 4, 5, 6, 7, 8
insn_fnptr:
	.quad ic_helper_add
insn_fntab:
	.quad ic_helper_add, ic_helper_add
	.size insn_data, . - insn_data

/* struct cpu_state: gpr[16] (rax rbx rcx rdx rsi rdi rbp r8..r15 rsp),
 * flags at 128, xmm0-15 at 136. */
FUNC insn_run_captured
	push %rbp
	mov %rsp, %rbp
	push %rbx
	push %r12
	push %r13
	push %r14
	push %r15
	push %rdx		/* out */
	push %rdi		/* fn */
	sub $8, %rsp
	movdqu 136(%rsi), %xmm0
	movdqu 152(%rsi), %xmm1
	movdqu 168(%rsi), %xmm2
	movdqu 184(%rsi), %xmm3
	movdqu 200(%rsi), %xmm4
	movdqu 216(%rsi), %xmm5
	movdqu 232(%rsi), %xmm6
	movdqu 248(%rsi), %xmm7
	movdqu 264(%rsi), %xmm8
	movdqu 280(%rsi), %xmm9
	movdqu 296(%rsi), %xmm10
	movdqu 312(%rsi), %xmm11
	movdqu 328(%rsi), %xmm12
	movdqu 344(%rsi), %xmm13
	movdqu 360(%rsi), %xmm14
	movdqu 376(%rsi), %xmm15
	pushq 128(%rsi)
	popfq
	mov 0(%rsi), %rax
	mov 8(%rsi), %rbx
	mov 16(%rsi), %rcx
	mov 24(%rsi), %rdx
	mov 40(%rsi), %rdi
	mov 48(%rsi), %rbp
	mov 56(%rsi), %r8
	mov 64(%rsi), %r9
	mov 72(%rsi), %r10
	mov 80(%rsi), %r11
	mov 88(%rsi), %r12
	mov 96(%rsi), %r13
	mov 104(%rsi), %r14
	mov 112(%rsi), %r15
	mov 32(%rsi), %rsi
	call *8(%rsp)
	pushfq
	push %rax
	mov 32(%rsp), %rax	/* out */
	mov %rbx, 8(%rax)
	mov %rcx, 16(%rax)
	mov %rdx, 24(%rax)
	mov %rsi, 32(%rax)
	mov %rdi, 40(%rax)
	mov %rbp, 48(%rax)
	mov %r8, 56(%rax)
	mov %r9, 64(%rax)
	mov %r10, 72(%rax)
	mov %r11, 80(%rax)
	mov %r12, 88(%rax)
	mov %r13, 96(%rax)
	mov %r14, 104(%rax)
	mov %r15, 112(%rax)
	lea 16(%rsp), %rbx
	mov %rbx, 120(%rax)
	movdqu %xmm0, 136(%rax)
	movdqu %xmm1, 152(%rax)
	movdqu %xmm2, 168(%rax)
	movdqu %xmm3, 184(%rax)
	movdqu %xmm4, 200(%rax)
	movdqu %xmm5, 216(%rax)
	movdqu %xmm6, 232(%rax)
	movdqu %xmm7, 248(%rax)
	movdqu %xmm8, 264(%rax)
	movdqu %xmm9, 280(%rax)
	movdqu %xmm10, 296(%rax)
	movdqu %xmm11, 312(%rax)
	movdqu %xmm12, 328(%rax)
	movdqu %xmm13, 344(%rax)
	movdqu %xmm14, 360(%rax)
	movdqu %xmm15, 376(%rax)
	pop %rbx
	mov %rbx, 0(%rax)
	pop %rbx
	mov %rbx, 128(%rax)
	add $24, %rsp
	pop %r15
	pop %r14
	pop %r13
	pop %r12
	pop %rbx
	pop %rbp
	ret
END insn_run_captured

FUNC ic_helper_add
	lea 1(%rdi), %rax
	ret
END ic_helper_add

FUNC ic_helper_ret8
	mov 8(%rsp), %rax
	add $1, %rax
	ret $8
END ic_helper_ret8

/* RIP-relative operands: loads, stores, lea, with immediates after the
 * displacement, SSE memory operands. */
FUNC ic_riprel
	mov insn_data(%rip), %rax
	add insn_data+8(%rip), %rax
	lea insn_data(%rip), %rbx
	mov %rax, insn_data+16(%rip)
	incq insn_data+24(%rip)
	cmpq $3, insn_data+16(%rip)
	setg %cl
	movdqu insn_data+32(%rip), %xmm1
	paddq insn_data(%rip), %xmm1
	movq $0x1234, insn_data+48(%rip)
	addl $7, insn_data+56(%rip)
	cmpb $2, insn_data+8(%rip)
	cmovg insn_data(%rip), %rdx
	push insn_data+8(%rip)
	pop %r8
	ret
END ic_riprel

/* Every jcc, short and near, plus jmp rel8/rel32. */
	.macro JCC cc, bit
	cmp %rdx, %rsi
	j\cc 1f
	or $\bit, %rax
1:	cmp %rcx, %rsi
	{disp32} j\cc 2f
	or $\bit, %r8
2:
	.endm
FUNC ic_jumps
	xor %eax, %eax
	jmp 1f
	inc %eax
1:	{disp32} jmp 2f
	inc %eax
2:	JCC o, 0x1
	JCC no, 0x2
	JCC b, 0x4
	JCC ae, 0x8
	JCC e, 0x10
	JCC ne, 0x20
	JCC be, 0x40
	JCC a, 0x80
	JCC s, 0x100
	JCC ns, 0x200
	JCC p, 0x400
	JCC np, 0x800
	JCC l, 0x1000
	JCC ge, 0x2000
	JCC le, 0x4000
	JCC g, 0x8000
	ret
END ic_jumps

FUNC ic_loops
	mov %rsi, %rcx
	and $7, %rcx
	xor %eax, %eax
	jrcxz 2f
1:	add %rcx, %rax
	loop 1b
2:	mov $3, %ecx
3:	inc %rax
	cmp $100, %rax
	loopne 3b
	mov $4, %ecx
4:	cmp %rax, %rax
	loope 4b
	jecxz 5f
	inc %rax
5:	mov %rdx, %rcx
	and $1, %ecx
	jecxz 6f
	add $1000, %rax
6:	ret
END ic_loops

/* call rel32, call through a register, rip-relative memory, rsp-based
 * memory without displacement, a table, and call-next/pop. */
FUNC ic_calls
	push %rbx
	call ic_helper_add
	mov %rax, %rbx
	lea ic_helper_add(%rip), %rax
	call *%rax
	add %rax, %rbx
	call *insn_fnptr(%rip)
	add %rax, %rbx
	pushq insn_fnptr(%rip)
	call *(%rsp)
	add $8, %rsp
	add %rax, %rbx
	lea insn_fntab(%rip), %rcx
	mov $1, %edx
	call *(%rcx,%rdx,8)
	add %rax, %rbx
	pushq insn_fnptr(%rip)
	pushq $0
	call *8(%rsp)
	add $16, %rsp
	add %rax, %rbx
	call 1f
1:	pop %rax
	add %rax, %rbx
	push %rdi
	call ic_helper_ret8
	add %rax, %rbx
	mov %rbx, %rax
	pop %rbx
	ret
END ic_calls

/* Indirect jumps: a PIC jump table and a tail jump through memory. */
FUNC ic_indjmp
	mov %rsi, %rcx
	and $3, %rcx
	lea ic_jt(%rip), %rdx
	movslq (%rdx,%rcx,4), %rax
	add %rdx, %rax
	jmp *%rax
1:	mov $10, %eax
	jmp 9f
2:	mov $20, %eax
	jmp 9f
3:	mov $30, %eax
	jmp 9f
4:	mov $40, %eax
	jmp *insn_fnptr(%rip)
9:	ret
	.section .rodata
	.p2align 2
ic_jt:	.long 1b - ic_jt, 2b - ic_jt, 3b - ic_jt, 4b - ic_jt
	.text
END ic_indjmp

/* Stack, red zone, push/pop of flags, enter/leave. */
FUNC ic_stack
	push %rbp
	mov %rsp, %rbp
	push %rdi
	push %rsi
	pushfq
	pop %rax
	and $0x8d5, %rax
	mov %rdi, -16(%rsp)
	mov %rsi, -128(%rsp)
	mov %rdx, -120(%rsp)
	mov -16(%rsp), %rcx
	add -128(%rsp), %rcx
	add -120(%rsp), %rcx
	pop %rsi
	pop %rdi
	pushq $7
	popq %rdx
	enter $16, $0
	mov %rdi, -8(%rbp)
	mov -8(%rbp), %r8
	leave
	sub $32, %rsp
	mov %rax, (%rsp)
	mov (%rsp), %r9
	add $32, %rsp
	pop %rbp
	ret
END ic_stack

/* Flag producers and consumers. */
FUNC ic_flags
	adc %rsi, %rax
	sbb %rdx, %rbx
	setc %cl
	cmovo %rdi, %r8
	lahf
	rcl $1, %r9
	cmc
	adc $0, %r10
	stc
	rcr $1, %r11
	clc
	std
	lea 8(%rdi), %r12
	cld
	pushfq
	popfq
	bt $3, %rsi
	setc %dl
	ret
END ic_flags

FUNC ic_vector
	movdqu (%rdi), %xmm2
	paddd %xmm0, %xmm2
	mulps %xmm1, %xmm3
	pshufd $0x1b, %xmm2, %xmm4
	movdqu %xmm4, 16(%rdi)
	cvtsi2sd %rsi, %xmm5
	sqrtsd %xmm5, %xmm6
	xorps %xmm7, %xmm7
	pcmpeqb %xmm8, %xmm9
	pmovmskb %xmm9, %eax
	ret
END ic_vector

FUNC ic_avx
	vmovdqu (%rdi), %ymm2
	vpaddd %ymm0, %ymm2, %ymm3
	vmovdqu %ymm3, 32(%rdi)
	vpermq $0x1b, %ymm3, %ymm4
	vmovdqu %ymm4, 64(%rdi)
	vfmadd231ps %xmm1, %xmm2, %xmm5
	vzeroupper
	ret
END ic_avx

FUNC ic_x87
	fildq 8(%rdi)
	fildq 16(%rdi)
	fmulp
	fld1
	faddp
	fistpq 24(%rdi)
	fldpi
	fstpl 32(%rdi)
	ret
END ic_x87

FUNC ic_syscall
	mov $39, %eax
	syscall
	mov %rcx, (%rdi)
	mov %r11, 8(%rdi)
	ret
END ic_syscall

FUNC ic_string
	push %rdi
	mov %rdi, %rsi
	lea 64(%rdi), %rdi
	mov $16, %ecx
	rep movsb
	mov $0x41, %al
	mov $8, %ecx
	rep stosb
	std
	lea 127(%rdi), %rsi
	lea 200(%rdi), %rdi
	mov $4, %ecx
	rep movsb
	cld
	pop %rdi
	mov $32, %ecx
	mov $0x41, %al
	repne scasb
	ret
END ic_string

FUNC ic_lock
	mov $1, %eax
	lock xadd %eax, (%rdi)
	mov $5, %ecx
	mov (%rdi), %eax
	lock cmpxchg %ecx, (%rdi)
	xchg %rdx, 8(%rdi)
	lock incq 16(%rdi)
	lock btsq $3, 24(%rdi)
	ret
END ic_lock

FUNC ic_misc
	endbr64
	bswap %rsi
	popcnt %rdi, %rax
	bts $5, %rdx
	imul %rsi, %rdx
	mov %rdi, %rax
	cqo
	mov $7, %ecx
	idiv %rcx
	movsbl %sil, %r8d
	movzwl %si, %r9d
	xchg %ax, %ax
	nopw 0(%rax,%rax,1)
	.byte 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0
	push %rbx
	xor %eax, %eax
	cpuid
	pop %rbx
	ret
END ic_misc

	.section .note.GNU-stack, "", @progbits
