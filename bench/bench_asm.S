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

/* 10,000 one-byte instructions, each an instruction boundary of a known
 * function, for register_10k_ms / unregister_10k_ms.  Never called. */
	.globl	bench_nops10k
	.type	bench_nops10k, @function
	.p2align 4
bench_nops10k:
	.rept	10000
	nop
	.endr
	ret
	.size	bench_nops10k, .-bench_nops10k

	.section .note.GNU-stack, "", @progbits
