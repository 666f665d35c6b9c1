/*
 * Two chains of eight frames for the stack rows of kprobes-bench: each
 * function calls the next, the last one is the probed leaf.  The CFI
 * chain keeps no frame pointer (its .eh_frame says where everything is);
 * the FP chain has frame pointers and no unwind information at all, so
 * the unwinder walks it by rbp.
 */
	.text

	.macro CFI_LINK name, next
	.globl \name
	.type \name, @function
	.p2align 4
\name:
	.cfi_startproc
	sub $8, %rsp
	.cfi_adjust_cfa_offset 8
	call \next
	add $8, %rsp
	.cfi_adjust_cfa_offset -8
	ret
	.cfi_endproc
	.size \name, . - \name
	.endm

	.macro FP_LINK name, next
	.globl \name
	.type \name, @function
	.p2align 4
\name:
	push %rbp
	mov %rsp, %rbp
	call \next
	pop %rbp
	ret
	.size \name, . - \name
	.endm

/* The leaves: room for the optimized probe's jump at the entry. */
	.macro LEAF name
	.globl \name
	.type \name, @function
	.p2align 4
\name:
	mov %rdi, %rax
	add $1, %rax
	add $2, %rax
	ret
	.size \name, . - \name
	.endm

	CFI_LINK bench_cfi_chain, bench_cfi_1
	CFI_LINK bench_cfi_1, bench_cfi_2
	CFI_LINK bench_cfi_2, bench_cfi_3
	CFI_LINK bench_cfi_3, bench_cfi_4
	CFI_LINK bench_cfi_4, bench_cfi_5
	CFI_LINK bench_cfi_5, bench_cfi_6
	CFI_LINK bench_cfi_6, bench_cfi_leaf
	.globl bench_cfi_leaf
	.type bench_cfi_leaf, @function
	.p2align 4
bench_cfi_leaf:
	.cfi_startproc
	mov %rdi, %rax
	add $1, %rax
	add $2, %rax
	ret
	.cfi_endproc
	.size bench_cfi_leaf, . - bench_cfi_leaf

	FP_LINK bench_fp_chain, bench_fp_1
	FP_LINK bench_fp_1, bench_fp_2
	FP_LINK bench_fp_2, bench_fp_3
	FP_LINK bench_fp_3, bench_fp_4
	FP_LINK bench_fp_4, bench_fp_5
	FP_LINK bench_fp_5, bench_fp_6
	FP_LINK bench_fp_6, bench_fp_leaf
	LEAF bench_fp_leaf

	.section .note.GNU-stack, "", @progbits
