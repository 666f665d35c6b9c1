/*
 * kprobes/nofault_inline.h - caught loads inlined into a handler, for tools
 * built into the same object as libkprobes.
 *
 * kprobes_read_nofault() and kprobes_read_chain_nofault() are calls.  A
 * tool whose handlers follow pointers at every hit and cannot afford a
 * call per value (the kprobe agent's fetch plans) may inline the load:
 * one instruction with an entry in the library's exception table (the
 * section kp_extable), which the library's SIGSEGV/SIGBUS handler looks up
 * first and resumes after with -EFAULT.  The library searches the table of
 * its own object only: this works only in code linked into the same
 * executable or shared object as libkprobes.a (the agent links it whole).
 * The state kprobes_nofault_inline_ok() reads is hidden in the library, so
 * a program linked with libkprobes.so fails to link instead of failing at
 * its first fault.
 *
 * Versioned: KPROBES_NOFAULT_INLINE_VERSION changes whenever the table's
 * format or that state does.  See docs/api.md section 10.13.
 */
#ifndef KPROBES_NOFAULT_INLINE_H
#define KPROBES_NOFAULT_INLINE_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KPROBES_NOFAULT_INLINE_VERSION 1

/* The library's state behind kprobes_nofault_inline_ok(), not for direct
 * use: whether it owns the fault signals, how deep the thread is in program
 * handlers that block them, and the thread's own mask (1: blocks neither
 * SIGSEGV nor SIGBUS; 0: not read yet). */
extern bool kp_nofault_loads_ok;
extern __thread int kp_fault_masked_depth __attribute__((tls_model("initial-exec")));
extern __thread int kp_thread_mask_state __attribute__((tls_model("initial-exec")));

/* Whether an inline caught load may be used on this thread now: the fault
 * would reach the library.  False also before the thread's first
 * kprobes_read_nofault() or kprobes_read_chain_nofault() (which read its
 * mask once, a system call): use those then.  No call, no system call. */
static inline __attribute__((always_inline)) bool kprobes_nofault_inline_ok(void)
{
	return __atomic_load_n(&kp_nofault_loads_ok, __ATOMIC_ACQUIRE) &&
	       !kp_fault_masked_depth && kp_thread_mask_state == 1;
}

#if defined(__x86_64__)

/* One load into v (mod "k": its 32-bit half, which zero-extends), and
 * its table entry: the address of the load and of where it resumes, as
 * 32-bit offsets from the entry's fields; the library's fix-up sets rax
 * (err) to -EFAULT. */
#define KPROBES_LOAD_CAUGHT(insn, mod, err, v, addr)					\
	__asm__ volatile("xor %k0, %k0\n"						\
			 "1:\t" insn " (%2), %" mod "1\n"				\
			 "2:\n"							\
			 "\t.pushsection kp_extable, \"a\"\n"				\
			 "\t.balign 4\n"						\
			 "\t.long 1b - ., 2b - .\n"					\
			 "\t.popsection"						\
			 : "=&a"(err), "=&r"(v)					\
			 : "r"(addr))

/* *out = the size (1, 2, 4 or 8) bytes at addr, zero-extended: 0, or
 * -EFAULT when they cannot be read (or size is none of those).  Only where
 * kprobes_nofault_inline_ok().  if-chains, no jump table: a handler that
 * inlines it stays one the library's handler analysis can follow. */
static inline __attribute__((always_inline)) int
kprobes_load_nofault_inline(unsigned long addr, unsigned int size, uint64_t *out)
{
	long err = -14;	/* -EFAULT */
	uint64_t v = 0;

	if (size == 8)
		KPROBES_LOAD_CAUGHT("mov", "", err, v, addr);
	else if (size == 4)
		KPROBES_LOAD_CAUGHT("movl", "k", err, v, addr);
	else if (size == 2)
		KPROBES_LOAD_CAUGHT("movzwl", "k", err, v, addr);
	else if (size == 1)
		KPROBES_LOAD_CAUGHT("movzbl", "k", err, v, addr);
	if (!err)
		*out = v;
	return (int)err;
}

#elif defined(__aarch64__)

/* One load into v (reg "w": its 32-bit half, which zero-extends), and
 * its table entry: the address of the load, of where it resumes, and the
 * register the library's fix-up sets to -EFAULT (x16, err). */
#define KPROBES_LOAD_CAUGHT(insn, reg, err, v, addr)					\
	__asm__ volatile("mov %0, #0\n"						\
			 "1:\t" insn " %" reg "1, [%2]\n"				\
			 "2:\n"							\
			 "\t.pushsection kp_extable, \"a\"\n"				\
			 "\t.balign 4\n"						\
			 "\t.long 1b - ., 2b - ., 16\n"				\
			 "\t.popsection"						\
			 : "=&r"(err), "=&r"(v)					\
			 : "r"(addr))

/* As on x86-64. */
static inline __attribute__((always_inline)) int
kprobes_load_nofault_inline(unsigned long addr, unsigned int size, uint64_t *out)
{
	register long err __asm__("x16") = -14;	/* -EFAULT */
	uint64_t v = 0;

	if (size == 8)
		KPROBES_LOAD_CAUGHT("ldr", "x", err, v, addr);
	else if (size == 4)
		KPROBES_LOAD_CAUGHT("ldr", "w", err, v, addr);
	else if (size == 2)
		KPROBES_LOAD_CAUGHT("ldrh", "w", err, v, addr);
	else if (size == 1)
		KPROBES_LOAD_CAUGHT("ldrb", "w", err, v, addr);
	if (!err)
		*out = v;
	return (int)err;
}

#else
#error "libkprobes supports x86-64 and arm64 only"
#endif

#ifdef __cplusplus
}
#endif

#endif /* KPROBES_NOFAULT_INLINE_H */
