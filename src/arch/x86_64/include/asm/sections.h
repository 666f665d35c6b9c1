/*
 * The read-side section counters of a thread record (os/linux/threads.h),
 * changed by single instructions: a signal handler that runs its own
 * section anywhere in between sees them consistent, and no atomic
 * read-modify-write is needed because only the owning thread writes them.
 * On x86-64 a memory-destination add or sub is one instruction, and a
 * plain store is a release.  Macros over lvalues (unsigned int, and the
 * 64-bit pair nest/in_handler through nest's address), so that the
 * compiler addresses the fields directly.
 */
#ifndef KP_ASM_SECTIONS_H
#define KP_ASM_SECTIONS_H

#include <stdint.h>

/* ++v and --v in one instruction: not atomic against other threads, only
 * against this thread's signal handlers (the kernel's local_inc). */
#define arch_local_inc(v) __asm__ volatile("addl $1, %0" : "+m"(v) : : "memory", "cc")
#define arch_local_dec(v) __asm__ volatile("subl $1, %0" : "+m"(v) : : "memory", "cc")

/* ++nest */
#define arch_section_nest_inc(nest) __asm__ volatile("addl $1, %0" : "+m"(nest) : : "memory")

/* --nest, and ++gen when that ended the outermost section. */
#define arch_section_nest_dec(nest, gen)					\
	__asm__ volatile("subl $1, %0\n\t"					\
			 "jnz 1f\n\t"						\
			 "addl $1, %1\n"					\
			 "1:"							\
			 : "+m"(nest), "+m"(gen) : : "memory", "cc")

/* nest and the counter right above it (in_handler) raised together by one
 * 64-bit instruction, as the detours' assembly does: both, the value to
 * add (1 in each half). */
#define arch_section_pair_add(nest, both)					\
	__asm__ volatile("addq %1, (%0)" : : "r"(&(nest)), "r"(both) : "memory", "cc")

/* ... and dropped together; ++gen when nest reached 0. */
#define arch_section_pair_sub(nest, gen, both)					\
	__asm__ volatile("subq %2, (%1)\n\t"					\
			 "jnz 1f\n\t"						\
			 "addl $1, %0\n"					\
			 "1:"							\
			 : "+m"(gen) : "r"(&(nest)), "r"(both) : "memory", "cc")

#endif
