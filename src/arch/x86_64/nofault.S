/*
 * kp_copy_nofault(dst, src, len): copies len bytes and returns 0, or
 * returns -EFAULT when a byte of either side cannot be accessed.
 *
 * Each load or store that may fault has an entry in kp_extable (the
 * table kp_load_nofault's loads use, see unwind.h): the library's
 * SIGSEGV/SIGBUS handler finds the faulting instruction there first and
 * resumes at the entry's `ret` with rax = -EFAULT, the kernel's
 * exception-table technique for user space.  No system call unless it
 * faults; no vector register, no stack beyond the return address, so a
 * probe handler that calls it still needs no vector state saved.
 *
 * The common reads of 8, 4, 2 and 1 bytes (a dereference) are one load
 * and one store; the rest is a `rep movsb`, which a fault stops with the
 * bytes before it already copied.
 */
	.text
	.globl	kp_copy_nofault
	.hidden	kp_copy_nofault
	.type	kp_copy_nofault, @function
	.p2align 4
kp_copy_nofault:
	.cfi_startproc
	xor	%eax, %eax
	cmp	$8, %rdx
	jne	1f
10:	mov	(%rsi), %rcx
11:	mov	%rcx, (%rdi)
	ret
1:	cmp	$4, %rdx
	jne	2f
12:	mov	(%rsi), %ecx
13:	mov	%ecx, (%rdi)
	ret
2:	cmp	$1, %rdx
	jne	3f
14:	movzbl	(%rsi), %ecx
15:	mov	%cl, (%rdi)
	ret
3:	cmp	$2, %rdx
	jne	4f
16:	movzwl	(%rsi), %ecx
17:	mov	%cx, (%rdi)
	ret
4:	mov	%rdx, %rcx
18:	rep movsb
	ret
	/* every fault resumes here, rax = -EFAULT already */
19:	ret
	.cfi_endproc
	.size	kp_copy_nofault, . - kp_copy_nofault

	.pushsection kp_extable, "a"
	.balign	4
	.long	10b - ., 19b - .
	.long	11b - ., 19b - .
	.long	12b - ., 19b - .
	.long	13b - ., 19b - .
	.long	14b - ., 19b - .
	.long	15b - ., 19b - .
	.long	16b - ., 19b - .
	.long	17b - ., 19b - .
	.long	18b - ., 19b - .
	.popsection

	.section .note.GNU-stack, "", @progbits
