/*
 * The sandbox the fuzzer copies generated code into, its scratch data and
 * private stack, and the harness that runs it from a complete register
 * state (struct fz_state in fuzz.h) and captures the complete state after.
 */
	.macro FUNC name
	.globl \name
	.type \name, @function
\name:
	.endm

/* A 16 KiB function of its own: the library finds its bounds from the
 * symbol, decodes it whole (int3 padding decodes fine) and may optimize
 * probes in it.  Page aligned so that it can be made writable alone. */
	.section .text.fuzz_sandbox, "ax", @progbits
	.p2align 12
FUNC fuzz_sandbox
	.cfi_startproc
	.fill 16384, 1, 0xcc
	.cfi_endproc
	.size fuzz_sandbox, 16384
	.p2align 12

	.data
	.p2align 12
	.globl fuzz_data
fuzz_data:
	.fill 4096, 1, 0
	.size fuzz_data, 4096

	.bss
	.p2align 12
	.globl fuzz_stack
fuzz_stack:
	.skip 16384
	.size fuzz_stack, 16384
	.p2align 3
saved_rsp:	.skip 8
out_ptr:	.skip 8
tmp_rax:	.skip 8
level:		.skip 8

	.section .rodata
	.p2align 2
mxcsr_default:	.long 0x1f80

	.text
/* void fuzz_run(const struct fz_state *in, struct fz_state *out)
 * Runs fuzz_sandbox on the private stack: in->gpr[15] is rsp before the
 * call.  Nothing but the harness itself runs between loading and saving. */
	.p2align 4
FUNC fuzz_run
	.cfi_startproc
	push %rbp
	push %rbx
	push %r12
	push %r13
	push %r14
	push %r15
	mov %rsp, saved_rsp(%rip)
	mov %rsi, out_ptr(%rip)
	mov 136(%rdi), %rax
	mov %rax, level(%rip)
	fxrstor64 144(%rdi)
	cmpq $1, %rax
	jb 1f
	vmovdqu 656(%rdi), %ymm0
	vmovdqu 688(%rdi), %ymm1
	vmovdqu 720(%rdi), %ymm2
	vmovdqu 752(%rdi), %ymm3
	vmovdqu 784(%rdi), %ymm4
	vmovdqu 816(%rdi), %ymm5
	vmovdqu 848(%rdi), %ymm6
	vmovdqu 880(%rdi), %ymm7
	vmovdqu 912(%rdi), %ymm8
	vmovdqu 944(%rdi), %ymm9
	vmovdqu 976(%rdi), %ymm10
	vmovdqu 1008(%rdi), %ymm11
	vmovdqu 1040(%rdi), %ymm12
	vmovdqu 1072(%rdi), %ymm13
	vmovdqu 1104(%rdi), %ymm14
	vmovdqu 1136(%rdi), %ymm15
	cmpq $2, %rax
	jb 1f
	vmovdqu64 1168(%rdi), %zmm0
	vmovdqu64 1232(%rdi), %zmm1
	vmovdqu64 1296(%rdi), %zmm2
	vmovdqu64 1360(%rdi), %zmm3
	vmovdqu64 1424(%rdi), %zmm4
	vmovdqu64 1488(%rdi), %zmm5
	vmovdqu64 1552(%rdi), %zmm6
	vmovdqu64 1616(%rdi), %zmm7
	vmovdqu64 1680(%rdi), %zmm8
	vmovdqu64 1744(%rdi), %zmm9
	vmovdqu64 1808(%rdi), %zmm10
	vmovdqu64 1872(%rdi), %zmm11
	vmovdqu64 1936(%rdi), %zmm12
	vmovdqu64 2000(%rdi), %zmm13
	vmovdqu64 2064(%rdi), %zmm14
	vmovdqu64 2128(%rdi), %zmm15
	vmovdqu64 2192(%rdi), %zmm16
	vmovdqu64 2256(%rdi), %zmm17
	vmovdqu64 2320(%rdi), %zmm18
	vmovdqu64 2384(%rdi), %zmm19
	vmovdqu64 2448(%rdi), %zmm20
	vmovdqu64 2512(%rdi), %zmm21
	vmovdqu64 2576(%rdi), %zmm22
	vmovdqu64 2640(%rdi), %zmm23
	vmovdqu64 2704(%rdi), %zmm24
	vmovdqu64 2768(%rdi), %zmm25
	vmovdqu64 2832(%rdi), %zmm26
	vmovdqu64 2896(%rdi), %zmm27
	vmovdqu64 2960(%rdi), %zmm28
	vmovdqu64 3024(%rdi), %zmm29
	vmovdqu64 3088(%rdi), %zmm30
	vmovdqu64 3152(%rdi), %zmm31
	kmovq 3216(%rdi), %k0
	kmovq 3224(%rdi), %k1
	kmovq 3232(%rdi), %k2
	kmovq 3240(%rdi), %k3
	kmovq 3248(%rdi), %k4
	kmovq 3256(%rdi), %k5
	kmovq 3264(%rdi), %k6
	kmovq 3272(%rdi), %k7
1:	mov 120(%rdi), %rsp
	pushq 128(%rdi)
	popfq
	mov 0(%rdi), %rax
	mov 8(%rdi), %rbx
	mov 16(%rdi), %rcx
	mov 24(%rdi), %rdx
	mov 32(%rdi), %rsi
	mov 48(%rdi), %rbp
	mov 56(%rdi), %r8
	mov 64(%rdi), %r9
	mov 72(%rdi), %r10
	mov 80(%rdi), %r11
	mov 88(%rdi), %r12
	mov 96(%rdi), %r13
	mov 104(%rdi), %r14
	mov 112(%rdi), %r15
	mov 40(%rdi), %rdi
	call fuzz_sandbox
	.globl fuzz_run_done
fuzz_run_done:
	pushfq
	mov %rax, tmp_rax(%rip)
	mov out_ptr(%rip), %rax
	popq 128(%rax)
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
	mov %rsp, 120(%rax)
	mov tmp_rax(%rip), %rbx
	mov %rbx, 0(%rax)
	cld
	fxsave64 144(%rax)
	cmpq $1, level(%rip)
	jb 2f
	vmovdqu %ymm0, 656(%rax)
	vmovdqu %ymm1, 688(%rax)
	vmovdqu %ymm2, 720(%rax)
	vmovdqu %ymm3, 752(%rax)
	vmovdqu %ymm4, 784(%rax)
	vmovdqu %ymm5, 816(%rax)
	vmovdqu %ymm6, 848(%rax)
	vmovdqu %ymm7, 880(%rax)
	vmovdqu %ymm8, 912(%rax)
	vmovdqu %ymm9, 944(%rax)
	vmovdqu %ymm10, 976(%rax)
	vmovdqu %ymm11, 1008(%rax)
	vmovdqu %ymm12, 1040(%rax)
	vmovdqu %ymm13, 1072(%rax)
	vmovdqu %ymm14, 1104(%rax)
	vmovdqu %ymm15, 1136(%rax)
	cmpq $2, level(%rip)
	jb 2f
	vmovdqu64 %zmm0, 1168(%rax)
	vmovdqu64 %zmm1, 1232(%rax)
	vmovdqu64 %zmm2, 1296(%rax)
	vmovdqu64 %zmm3, 1360(%rax)
	vmovdqu64 %zmm4, 1424(%rax)
	vmovdqu64 %zmm5, 1488(%rax)
	vmovdqu64 %zmm6, 1552(%rax)
	vmovdqu64 %zmm7, 1616(%rax)
	vmovdqu64 %zmm8, 1680(%rax)
	vmovdqu64 %zmm9, 1744(%rax)
	vmovdqu64 %zmm10, 1808(%rax)
	vmovdqu64 %zmm11, 1872(%rax)
	vmovdqu64 %zmm12, 1936(%rax)
	vmovdqu64 %zmm13, 2000(%rax)
	vmovdqu64 %zmm14, 2064(%rax)
	vmovdqu64 %zmm15, 2128(%rax)
	vmovdqu64 %zmm16, 2192(%rax)
	vmovdqu64 %zmm17, 2256(%rax)
	vmovdqu64 %zmm18, 2320(%rax)
	vmovdqu64 %zmm19, 2384(%rax)
	vmovdqu64 %zmm20, 2448(%rax)
	vmovdqu64 %zmm21, 2512(%rax)
	vmovdqu64 %zmm22, 2576(%rax)
	vmovdqu64 %zmm23, 2640(%rax)
	vmovdqu64 %zmm24, 2704(%rax)
	vmovdqu64 %zmm25, 2768(%rax)
	vmovdqu64 %zmm26, 2832(%rax)
	vmovdqu64 %zmm27, 2896(%rax)
	vmovdqu64 %zmm28, 2960(%rax)
	vmovdqu64 %zmm29, 3024(%rax)
	vmovdqu64 %zmm30, 3088(%rax)
	vmovdqu64 %zmm31, 3152(%rax)
	kmovq %k0, 3216(%rax)
	kmovq %k1, 3224(%rax)
	kmovq %k2, 3232(%rax)
	kmovq %k3, 3240(%rax)
	kmovq %k4, 3248(%rax)
	kmovq %k5, 3256(%rax)
	kmovq %k6, 3264(%rax)
	kmovq %k7, 3272(%rax)
2:	mov saved_rsp(%rip), %rsp
	fninit
	ldmxcsr mxcsr_default(%rip)
	cmpq $1, level(%rip)
	jb 3f
	vzeroupper
3:	pop %r15
	pop %r14
	pop %r13
	pop %r12
	pop %rbx
	pop %rbp
	ret
	.cfi_endproc
	.size fuzz_run, . - fuzz_run

/* void fuzz_clobber_vectors(uint64_t level): what a careless handler does
 * to the caller-saved vector state; the library must undo it.  Called from
 * handlers, so the handler analysis sees these writes. */
	.p2align 4
FUNC fuzz_clobber_vectors
	.cfi_startproc
	pcmpeqd %xmm0, %xmm0
	pcmpeqd %xmm1, %xmm1
	pcmpeqd %xmm2, %xmm2
	pcmpeqd %xmm3, %xmm3
	pcmpeqd %xmm4, %xmm4
	pcmpeqd %xmm5, %xmm5
	pcmpeqd %xmm6, %xmm6
	pcmpeqd %xmm7, %xmm7
	pcmpeqd %xmm8, %xmm8
	pcmpeqd %xmm9, %xmm9
	pcmpeqd %xmm10, %xmm10
	pcmpeqd %xmm11, %xmm11
	pcmpeqd %xmm12, %xmm12
	pcmpeqd %xmm13, %xmm13
	pcmpeqd %xmm14, %xmm14
	pcmpeqd %xmm15, %xmm15
	cmpq $1, %rdi
	jb 4f
	vpcmpeqd %ymm0, %ymm0, %ymm0
	vpcmpeqd %ymm1, %ymm1, %ymm1
	vpcmpeqd %ymm2, %ymm2, %ymm2
	vpcmpeqd %ymm3, %ymm3, %ymm3
	vpcmpeqd %ymm4, %ymm4, %ymm4
	vpcmpeqd %ymm5, %ymm5, %ymm5
	vpcmpeqd %ymm6, %ymm6, %ymm6
	vpcmpeqd %ymm7, %ymm7, %ymm7
	vpcmpeqd %ymm8, %ymm8, %ymm8
	vpcmpeqd %ymm9, %ymm9, %ymm9
	vpcmpeqd %ymm10, %ymm10, %ymm10
	vpcmpeqd %ymm11, %ymm11, %ymm11
	vpcmpeqd %ymm12, %ymm12, %ymm12
	vpcmpeqd %ymm13, %ymm13, %ymm13
	vpcmpeqd %ymm14, %ymm14, %ymm14
	vpcmpeqd %ymm15, %ymm15, %ymm15
	cmpq $2, %rdi
	jb 4f
	vpternlogd $0xff, %zmm0, %zmm0, %zmm0
	vpternlogd $0xff, %zmm1, %zmm1, %zmm1
	vpternlogd $0xff, %zmm2, %zmm2, %zmm2
	vpternlogd $0xff, %zmm3, %zmm3, %zmm3
	vpternlogd $0xff, %zmm4, %zmm4, %zmm4
	vpternlogd $0xff, %zmm5, %zmm5, %zmm5
	vpternlogd $0xff, %zmm6, %zmm6, %zmm6
	vpternlogd $0xff, %zmm7, %zmm7, %zmm7
	vpternlogd $0xff, %zmm8, %zmm8, %zmm8
	vpternlogd $0xff, %zmm9, %zmm9, %zmm9
	vpternlogd $0xff, %zmm10, %zmm10, %zmm10
	vpternlogd $0xff, %zmm11, %zmm11, %zmm11
	vpternlogd $0xff, %zmm12, %zmm12, %zmm12
	vpternlogd $0xff, %zmm13, %zmm13, %zmm13
	vpternlogd $0xff, %zmm14, %zmm14, %zmm14
	vpternlogd $0xff, %zmm15, %zmm15, %zmm15
	vpternlogd $0xff, %zmm16, %zmm16, %zmm16
	vpternlogd $0xff, %zmm17, %zmm17, %zmm17
	vpternlogd $0xff, %zmm18, %zmm18, %zmm18
	vpternlogd $0xff, %zmm19, %zmm19, %zmm19
	vpternlogd $0xff, %zmm20, %zmm20, %zmm20
	vpternlogd $0xff, %zmm21, %zmm21, %zmm21
	vpternlogd $0xff, %zmm22, %zmm22, %zmm22
	vpternlogd $0xff, %zmm23, %zmm23, %zmm23
	vpternlogd $0xff, %zmm24, %zmm24, %zmm24
	vpternlogd $0xff, %zmm25, %zmm25, %zmm25
	vpternlogd $0xff, %zmm26, %zmm26, %zmm26
	vpternlogd $0xff, %zmm27, %zmm27, %zmm27
	vpternlogd $0xff, %zmm28, %zmm28, %zmm28
	vpternlogd $0xff, %zmm29, %zmm29, %zmm29
	vpternlogd $0xff, %zmm30, %zmm30, %zmm30
	vpternlogd $0xff, %zmm31, %zmm31, %zmm31
	kxnorq %k1, %k1, %k1
	kxnorq %k2, %k2, %k2
	kxnorq %k3, %k3, %k3
	kxnorq %k4, %k4, %k4
	kxnorq %k5, %k5, %k5
	kxnorq %k6, %k6, %k6
	kxnorq %k7, %k7, %k7
	vzeroupper
4:	ret
	.cfi_endproc
	.size fuzz_clobber_vectors, . - fuzz_clobber_vectors

	.section .note.GNU-stack, "", @progbits
