/* Loads from addresses that may not be mapped, without a system call. */
#ifndef KP_ASM_UACCESS_H
#define KP_ASM_UACCESS_H

#include <stdint.h>

/* A load that may fault: its address and where it resumes with rax =
 * -EFAULT when it does, as 32-bit offsets from the fields themselves (the
 * kernel's exception table, for user space).  The entries are in the
 * section kp_extable. */
struct kp_extable {
	int32_t insn;
	int32_t resume;
};

/* *out = *(uintptr_t *)addr: 0, or -EFAULT when it is not readable.
 * Async-signal-safe, no system call unless it faults; inline: one load. */
static inline __attribute__((always_inline)) int kp_load_nofault(uintptr_t addr, uintptr_t *out)
{
	long err;
	uintptr_t v;

	__asm__ volatile("xor %k0, %k0\n"
			 "1:\tmov (%2), %1\n"
			 "2:\n"
			 "\t.pushsection kp_extable, \"a\"\n"
			 "\t.balign 4\n"
			 "\t.long 1b - ., 2b - .\n"
			 "\t.popsection"
			 : "=&a"(err), "=&r"(v)
			 : "r"(addr));
	*out = v;
	return (int)err;
}

#endif
