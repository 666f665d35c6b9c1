/* Assembly helpers for kprobes-bench. */
	.text

/* A bare breakpoint: the kernel reports SIGTRAP with RIP after the int3, so
 * a handler that just returns resumes at the ret. */
	.globl	bench_int3
	.type	bench_int3, @function
	.p2align 4
bench_int3:
	int3
	ret
	.size	bench_int3, .-bench_int3

/* sa_restorer for the raw rt_sigaction of the int3 row. */
	.globl	bench_restorer
	.type	bench_restorer, @function
	.p2align 4
bench_restorer:
	mov	$15, %eax		/* __NR_rt_sigreturn */
	syscall
	hlt
	.size	bench_restorer, .-bench_restorer

/* A function probed mid-way (o_mid): the probe sits on the first add. */
	.globl	bench_mid
	.type	bench_mid, @function
	.p2align 4
bench_mid:
	mov	%rdi, %rax
	.globl	bench_mid_probe
bench_mid_probe:
	add	$1, %rax
	add	$2, %rax
	ret
	.size	bench_mid, .-bench_mid

/* xsave/xrstor of the whole extended state, the cost o_mid must stay
 * within when a handler needs it. */
	.globl	bench_xsave_pair
	.type	bench_xsave_pair, @function
	.p2align 4
bench_xsave_pair:
	mov	%rdi, %rcx
	mov	$-1, %eax
	mov	$-1, %edx
	xsave64	(%rcx)
	xrstor64 (%rcx)
	ret
	.size	bench_xsave_pair, .-bench_xsave_pair

/* 10,000 small functions, 16 bytes apart, each optimizable at its entry,
 * for register_10k_ms / unregister_10k_ms.  Never called. */
	.altmacro
	.macro	BENCH_FN n
	.globl	bench_fn\n
	.type	bench_fn\n, @function
	.p2align 4
bench_fn\n:
	lea	1(%rdi), %rax
	ret
	.size	bench_fn\n, .-bench_fn\n
	.endm
	.globl	bench_fns10k
	.p2align 4
bench_fns10k:
	.set	i, 0
	.rept	10000
	BENCH_FN %i
	.set	i, i + 1
	.endr

	.section .note.GNU-stack, "", @progbits
