/*
 * Shared save/restore code of jump-optimized probes.
 *
 * A detour buffer does "lea -128(%rsp),%rsp; call *common" (so the red
 * zone is never touched), and the call lands here with the detour's return
 * address R at the top of the stack.  The detour keeps, at fixed offsets
 * from R, a flag byte (R+93; bit 0: the handlers may clobber vector state,
 * so save it; bit 1: they call code that may change errno) and the
 * probepoint (R+101).  This code builds a struct pt_regs as the
 * breakpoint path does, calls kp_optimized_callback(pp, regs), restores and
 * returns to the detour, which runs the copied instructions.
 *
 * The general registers are always kept; the flags (arithmetic ones and
 * DF; see PT_RESTORE_FLAGS in ptregs.inc) mid-function, where they may be
 * live.  Of the vector state, at a function
 * entry only the argument registers (x/y/zmm0-7) can be live; mid-function
 * everything may be: the full extended state through xsave (fxsave on CPUs
 * without it).
 */
#include "arch/x86_64/ptregs.inc"
#include "arch/x86_64/hitpath.inc"
	.set R_FLAG, 93
	.set R_PP, 101
	.set AC_FLAG, 0x40000

/* Frame below R: [rsp+PT_SIZE] holds the flags (mid) or padding (entry),
 * [rsp+PT_SIZE+8] = R. */
/* The rest of the frame once the registers and flags are stored: sp and ss,
 * then the detour's flag byte (r12d) and probepoint (rdi); rbx = pt_regs. */
	.macro SAVE_FRAME_TAIL
	lea PT_SIZE + 16 + 128(%rsp), %rcx
	mov %rcx, 152(%rsp)			/* sp before the detour */
	movq $0x2b, 160(%rsp)			/* ss */
	mov PT_SIZE + 8(%rsp), %rax		/* R */
	movzbl R_FLAG(%rax), %r12d
	mov R_PP(%rax), %rdi
	mov %rsp, %rbx
	.endm

	.macro SAVE_GPRS
	pushfq
	lea -PT_SIZE(%rsp), %rsp
	PT_STORE_GPRS
	mov PT_SIZE(%rsp), %rcx
	mov %rcx, 144(%rsp)			/* flags */
	SAVE_FRAME_TAIL
	/* EFLAGS.AC (alignment checking) would make the handlers' unaligned
	 * accesses fault: off while they run (the program's flag is saved). */
	testl $AC_FLAG, 144(%rsp)
	jz 93f
	pushfq
	andl $~AC_FLAG, (%rsp)
	popfq
93:
	.endm

/* Sets AC again if the program had it: before PT_RESTORE_FLAGS, whose
 * arithmetic flags popfq would overwrite. */
	.macro RESTORE_AC
	testl $AC_FLAG, 144(%rsp)
	jz 94f
	pushfq
	orl $AC_FLAG, (%rsp)
	popfq
94:
	.endm

/* The same frame where the status flags are dead (a function entry whose
 * code sets them before reading them): no pushfq (slow, microcoded), the
 * flags the handler sees are read with lahf/seto instead, and nothing
 * restores them.  DF is clear at a call, as the ABI says. */
	.macro SAVE_GPRS_ENTRY
	lea -PT_SIZE - 8(%rsp), %rsp
	PT_STORE_GPRS
	lahf
	seto %cl
	movzbl %ah, %eax
	and $0xd5, %eax				/* SF ZF AF PF CF */
	movzbl %cl, %ecx
	shl $11, %ecx				/* OF */
	or %ecx, %eax
	or $0x202, %eax				/* IF, reserved bit 1 */
	mov %rax, 144(%rsp)
	SAVE_FRAME_TAIL
	.endm


/* Runs the pre-handlers: rbx = pt_regs, rdi = probepoint, r12d = flags.
 * The common case, a thread outside any handler on a system with
 * membarrier and handlers that leave errno alone, is done here; it does
 * what kp_optimized_callback does, which takes every other case.  The
 * read-side section is marked as kp_read_enter/kp_read_exit do, each step
 * a single instruction so that a signal handler may run its own anywhere
 * in between.  r14 and r15 are the program's, saved in pt_regs. */
	.macro CALL_CALLBACK
	and $-16, %rsp
	cld
	test $KP_SAVE_ERRNO, %r12d
	jnz 85f
	cmpl $0, kp_membarrier_ok(%rip)
	je 85f
	mov kp_self_tls@gottpoff(%rip), %rax
	mov %fs:(%rax), %r14
	test %r14, %r14
	jz 85f
	cmpl $0, KPT_IN_HANDLER(%r14)
	jne 85f
	addl $1, KPT_NEST(%r14)			/* section begins */
	movl $1, KPT_IN_HANDLER(%r14)
	mov PP_ADDR(%rdi), %rax
	inc %rax
	mov %rax, PT_IP(%rbx)			/* as after an int3 */
	mov PP_PROBES(%rdi), %r15
81:	test %r15, %r15
	jz 83f
	testl $KP_FLAG_DISABLED, KP_FLAGS(%r15)
	jnz 82f
	mov KP_PRE_HANDLER(%r15), %rax
	test %rax, %rax
	jz 82f
	mov %r15, %rdi
	mov %rbx, %rsi
	call *%rax
	test %eax, %eax
	jnz 83f
82:	mov KP_NEXT(%r15), %r15
	jmp 81b
83:	movl $0, KPT_IN_HANDLER(%r14)
	subl $1, KPT_NEST(%r14)			/* section ends */
	jnz 86f
	addl $1, KPT_GEN(%r14)
	jmp 86f
85:	mov %rbx, %rsi
	mov %r12d, %edx
	call kp_optimized_callback
86:
	.endm

	.macro RESTORE_GPRS
	mov %rbx, %rsp
	RESTORE_AC
	PT_RESTORE_FLAGS
	PT_LOAD_GPRS
	lea PT_SIZE + 8(%rsp), %rsp
	ret
	.endm

	.macro FUNC name
	.text
	.globl \name
	.hidden \name
	.type \name, @function
	.p2align 4
\name:
	.endm

/* Function entries: vector argument registers, by register width. */
/* flags=1: the code after the probe may read the status flags (hand-written
 * code entered with live flags, or a caller that looks at them after the
 * return): they are put back as they were read, without pushfq/popfq (DF is
 * clear at a call, as the ABI says). */
	.macro ENTRY_COMMON name, size, save, restore, flags
FUNC \name
	SAVE_GPRS_ENTRY
	test $1, %r12d
	jz 1f
	and $-64, %rsp
	sub $\size, %rsp
	mov %rsp, %r13
	\save
1:	CALL_CALLBACK
	test $1, %r12d
	jz 2f
	\restore
2:	mov %rbx, %rsp
	.if \flags
	PT_RESTORE_FLAGS
	.endif
	PT_LOAD_GPRS
	lea PT_SIZE + 8(%rsp), %rsp
	ret
	.size \name, . - \name
	.endm

	.macro SSE_SAVE
	movdqu %xmm0, 0(%r13)
	movdqu %xmm1, 16(%r13)
	movdqu %xmm2, 32(%r13)
	movdqu %xmm3, 48(%r13)
	movdqu %xmm4, 64(%r13)
	movdqu %xmm5, 80(%r13)
	movdqu %xmm6, 96(%r13)
	movdqu %xmm7, 112(%r13)
	.endm
	.macro SSE_RESTORE
	movdqu 0(%r13), %xmm0
	movdqu 16(%r13), %xmm1
	movdqu 32(%r13), %xmm2
	movdqu 48(%r13), %xmm3
	movdqu 64(%r13), %xmm4
	movdqu 80(%r13), %xmm5
	movdqu 96(%r13), %xmm6
	movdqu 112(%r13), %xmm7
	.endm
	.macro AVX_SAVE
	vmovdqu %ymm0, 0(%r13)
	vmovdqu %ymm1, 32(%r13)
	vmovdqu %ymm2, 64(%r13)
	vmovdqu %ymm3, 96(%r13)
	vmovdqu %ymm4, 128(%r13)
	vmovdqu %ymm5, 160(%r13)
	vmovdqu %ymm6, 192(%r13)
	vmovdqu %ymm7, 224(%r13)
	.endm
	.macro AVX_RESTORE
	vmovdqu 0(%r13), %ymm0
	vmovdqu 32(%r13), %ymm1
	vmovdqu 64(%r13), %ymm2
	vmovdqu 96(%r13), %ymm3
	vmovdqu 128(%r13), %ymm4
	vmovdqu 160(%r13), %ymm5
	vmovdqu 192(%r13), %ymm6
	vmovdqu 224(%r13), %ymm7
	.endm
	.macro AVX512_SAVE
	vmovdqu64 %zmm0, 0(%r13)
	vmovdqu64 %zmm1, 64(%r13)
	vmovdqu64 %zmm2, 128(%r13)
	vmovdqu64 %zmm3, 192(%r13)
	vmovdqu64 %zmm4, 256(%r13)
	vmovdqu64 %zmm5, 320(%r13)
	vmovdqu64 %zmm6, 384(%r13)
	vmovdqu64 %zmm7, 448(%r13)
	.endm
	.macro AVX512_RESTORE
	vmovdqu64 0(%r13), %zmm0
	vmovdqu64 64(%r13), %zmm1
	vmovdqu64 128(%r13), %zmm2
	vmovdqu64 192(%r13), %zmm3
	vmovdqu64 256(%r13), %zmm4
	vmovdqu64 320(%r13), %zmm5
	vmovdqu64 384(%r13), %zmm6
	vmovdqu64 448(%r13), %zmm7
	.endm

	ENTRY_COMMON kp_opt_entry_sse, 128, SSE_SAVE, SSE_RESTORE, 0
	ENTRY_COMMON kp_opt_entry_avx, 256, AVX_SAVE, AVX_RESTORE, 0
	ENTRY_COMMON kp_opt_entry_avx512, 512, AVX512_SAVE, AVX512_RESTORE, 0
	ENTRY_COMMON kp_opt_entry_sse_flags, 128, SSE_SAVE, SSE_RESTORE, 1
	ENTRY_COMMON kp_opt_entry_avx_flags, 256, AVX_SAVE, AVX_RESTORE, 1
	ENTRY_COMMON kp_opt_entry_avx512_flags, 512, AVX512_SAVE, AVX512_RESTORE, 1

/* Mid-function: flags always, the whole extended state when handlers may
 * touch it. */
FUNC kp_opt_mid_xsave
	SAVE_GPRS
	test $1, %r12d
	jz 1f
	mov kp_xsave_size(%rip), %ecx
	sub %rcx, %rsp
	and $-64, %rsp
	mov %rsp, %r13
	xor %eax, %eax
	mov %rax, 512(%r13)
	mov %rax, 520(%r13)
	mov %rax, 528(%r13)
	mov %rax, 536(%r13)
	mov %rax, 544(%r13)
	mov %rax, 552(%r13)
	mov %rax, 560(%r13)
	mov %rax, 568(%r13)
	mov $-1, %eax
	mov $-1, %edx
	xsave64 (%r13)
1:	CALL_CALLBACK
	test $1, %r12d
	jz 2f
	mov $-1, %eax
	mov $-1, %edx
	xrstor64 (%r13)
2:	RESTORE_GPRS
	.size kp_opt_mid_xsave, . - kp_opt_mid_xsave

FUNC kp_opt_mid_fxsave
	SAVE_GPRS
	test $1, %r12d
	jz 1f
	sub $512, %rsp
	and $-64, %rsp
	mov %rsp, %r13
	fxsave64 (%r13)
1:	CALL_CALLBACK
	test $1, %r12d
	jz 2f
	fxrstor64 (%r13)
2:	RESTORE_GPRS
	.size kp_opt_mid_fxsave, . - kp_opt_mid_fxsave

	.section .note.GNU-stack, "", @progbits
