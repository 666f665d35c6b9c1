/*
 * int kp_load_nofault(uintptr_t addr, uintptr_t *out): one 8-byte load
 * that never kills the thread.  A fault on the load is recognized by the
 * library's fault handler (arch_unwind_fixup, unwind.c), which resumes at
 * the fixup: -EFAULT.  No system call when the memory is readable, which
 * is the case the unwinder's checks make the common one.
 */
	.text
	.globl kp_load_nofault
	.hidden kp_load_nofault
	.globl kp_load_nofault_insn
	.hidden kp_load_nofault_insn
	.globl kp_load_nofault_fixup
	.hidden kp_load_nofault_fixup
	.type kp_load_nofault, @function
	.p2align 4
kp_load_nofault:
	.cfi_startproc
kp_load_nofault_insn:
	mov (%rdi), %rax
	mov %rax, (%rsi)
	xor %eax, %eax
	ret
kp_load_nofault_fixup:
	mov $-14, %eax			/* -EFAULT */
	ret
	.cfi_endproc
	.size kp_load_nofault, . - kp_load_nofault

	.section .note.GNU-stack, "", @progbits
