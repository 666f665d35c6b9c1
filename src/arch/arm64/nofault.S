/*
 * kp_copy_nofault(dst, src, len): copies len bytes and returns 0, or
 * returns -EFAULT when a byte of either side cannot be accessed.
 *
 * Each load or store that may fault has an entry in kp_extable (the
 * table kp_load_nofault's loads use, see unwind.c): the library's
 * SIGSEGV/SIGBUS handler finds the faulting instruction there first and
 * resumes at the entry's `ret` with x0 = -EFAULT, the kernel's
 * exception-table technique for user space.  No system call unless it
 * faults; general registers only, no stack, so a probe handler that calls
 * it needs no FP/SIMD state saved.  An aligned 8-byte read (a
 * dereference) is one load and one store; the rest is copied bytewise,
 * a fault stopping it with the bytes before it already copied.
 */
	.text
	.globl	kp_copy_nofault
	.hidden	kp_copy_nofault
	.type	kp_copy_nofault, %function
	.p2align 4
kp_copy_nofault:
	.cfi_startproc
	mov	x3, x0
	mov	x0, #0
	cmp	x2, #8
	b.ne	2f
	orr	x4, x1, x3
	tst	x4, #7
	b.ne	2f
10:	ldr	x4, [x1]
11:	str	x4, [x3]
	ret
2:	cbz	x2, 3f
12:	ldrb	w4, [x1], #1
13:	strb	w4, [x3], #1
	subs	x2, x2, #1
	b.ne	12b
3:	ret
	/* every fault resumes here, x0 = -EFAULT already */
19:	ret
	.cfi_endproc
	.size	kp_copy_nofault, . - kp_copy_nofault

	.pushsection kp_extable, "a"
	.balign	4
	.long	10b - ., 19b - ., 0
	.long	11b - ., 19b - ., 0
	.long	12b - ., 19b - ., 0
	.long	13b - ., 19b - ., 0
	.popsection

	.section .note.GNU-stack, "", %progbits
