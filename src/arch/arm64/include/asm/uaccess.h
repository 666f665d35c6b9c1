/* Loads from addresses that may not be mapped, without a system call. */
#ifndef KP_ASM_UACCESS_H
#define KP_ASM_UACCESS_H

#include <stddef.h>
#include <stdint.h>

/* A load that may fault: its address and where it resumes when it does,
 * as 32-bit offsets from the fields themselves (the kernel's exception
 * table, for user space), and the register the fix-up sets to -EFAULT
 * (the loads here keep their error in x16, which the compiler is told;
 * kp_copy_nofault() returns it in x0).  The entries are in the section
 * kp_extable. */
struct kp_extable {
	int32_t insn;
	int32_t resume;
	int32_t err_reg;	/* register number the fix-up sets to -EFAULT */
};

/* *out = *(uintptr_t *)addr: 0, or -EFAULT when it is not readable.
 * Async-signal-safe, no system call unless it faults. */
static inline __attribute__((always_inline)) int kp_load_nofault(uintptr_t addr, uintptr_t *out)
{
	register long err __asm__("x16");
	uintptr_t v;

	__asm__ volatile("mov %0, #0\n"
			 "1:\tldr %1, [%2]\n"
			 "2:\n"
			 "\t.pushsection kp_extable, \"a\"\n"
			 "\t.balign 4\n"
			 "\t.long 1b - ., 2b - ., 16\n"
			 "\t.popsection"
			 : "=&r"(err), "=&r"(v)
			 : "r"(addr));
	*out = v;
	return (int)err;
}

/* *out = the size (1, 2, 4 or 8) bytes at addr, zero-extended: 0, or
 * -EFAULT when they are not readable (or size is none of those).  Relies on
 * the fault signal reaching the library's handler, as kp_load_nofault():
 * see kp_load_nofault_usable() (os/linux/memory.h). */
static inline __attribute__((always_inline)) int kp_load_nofault_sized(uintptr_t addr,
									unsigned int size,
									uint64_t *out)
{
	register long err __asm__("x16") = -14;	/* -EFAULT */
	uintptr_t v = 0;

	if (size == 8) {
		uintptr_t w;

		if (kp_load_nofault(addr, &w))
			return -14;
		*out = w;
		return 0;
	} else if (size == 4) {
		__asm__ volatile("mov %0, #0\n1:\tldr %w1, [%2]\n2:\n"
				 "\t.pushsection kp_extable, \"a\"\n\t.balign 4\n"
				 "\t.long 1b - ., 2b - ., 16\n\t.popsection"
				 : "=&r"(err), "=&r"(v) : "r"(addr));
	} else if (size == 2) {
		__asm__ volatile("mov %0, #0\n1:\tldrh %w1, [%2]\n2:\n"
				 "\t.pushsection kp_extable, \"a\"\n\t.balign 4\n"
				 "\t.long 1b - ., 2b - ., 16\n\t.popsection"
				 : "=&r"(err), "=&r"(v) : "r"(addr));
	} else if (size == 1) {
		__asm__ volatile("mov %0, #0\n1:\tldrb %w1, [%2]\n2:\n"
				 "\t.pushsection kp_extable, \"a\"\n\t.balign 4\n"
				 "\t.long 1b - ., 2b - ., 16\n\t.popsection"
				 : "=&r"(err), "=&r"(v) : "r"(addr));
	}
	if (!err)
		*out = v;
	return (int)err;
}

/* memcpy(dst, src, len) that returns 0, or -EFAULT when a byte of either
 * side faults (dst may then hold part of the copy); nofault.S.  Like
 * kp_load_nofault(), only where kp_load_nofault_usable() (os/linux/memory.h). */
long kp_copy_nofault(void *dst, const void *src, size_t len);

#endif
