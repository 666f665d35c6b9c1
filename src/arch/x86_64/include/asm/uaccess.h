/* Loads from addresses that may not be mapped, without a system call. */
#ifndef KP_ASM_UACCESS_H
#define KP_ASM_UACCESS_H

#include <stddef.h>
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


/* One sized load with its kp_extable entry: zero-extends into v. */
#define KP_LOAD_NOFAULT_AS(insn, err, v, addr)					\
	__asm__ volatile("xor %k0, %k0\n"						\
			 "1:\t" insn " (%2), %k1\n"					\
			 "2:\n"							\
			 "\t.pushsection kp_extable, \"a\"\n"				\
			 "\t.balign 4\n"						\
			 "\t.long 1b - ., 2b - .\n"					\
			 "\t.popsection"						\
			 : "=&a"(err), "=&r"(v)					\
			 : "r"(addr))

/* *out = the size (1, 2, 4 or 8) bytes at addr, zero-extended: 0, or
 * -EFAULT when they are not readable (or size is none of those).  Like
 * kp_load_nofault(), it relies on the fault signal reaching the library's
 * handler: see kp_load_nofault_usable() (os/linux/memory.h).  if-chains,
 * no jump table: handlers that inline it stay analysable. */
static inline __attribute__((always_inline)) int kp_load_nofault_sized(uintptr_t addr,
									unsigned int size,
									uint64_t *out)
{
	long err = -14;	/* -EFAULT */
	uintptr_t v = 0;

	if (size == 8) {
		err = kp_load_nofault(addr, &v);
	} else if (size == 4) {
		KP_LOAD_NOFAULT_AS("movl", err, v, addr);
	} else if (size == 2) {
		KP_LOAD_NOFAULT_AS("movzwl", err, v, addr);
	} else if (size == 1) {
		KP_LOAD_NOFAULT_AS("movzbl", err, v, addr);
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
