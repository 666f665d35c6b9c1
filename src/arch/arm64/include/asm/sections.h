/*
 * The read-side section counters of a thread record (os/linux/threads.h).
 * Only the owning thread writes them, so no atomic read-modify-write is
 * needed; but its own signal handlers may run a section anywhere in
 * between.  A64 has no memory-destination add: each change is a load, an
 * add and a store, which is still safe against the thread's handlers
 * because a handler's own sections are balanced (the counter is back to
 * the value it found when the handler returns).  The one value that is
 * not balanced, gen, is only incremented when nest reaches 0, and an
 * increment lost to a handler that also ended a section in between still
 * leaves gen different from any value a grace period can have seen inside
 * the section.  Ending a section stores nest with release semantics
 * (stlr), so the section's reads are done before another thread sees it
 * over; other threads read the 32- and 64-bit words with single-copy
 * atomic loads.  Macros over lvalues, as on x86-64.
 */
#ifndef KP_ASM_SECTIONS_H
#define KP_ASM_SECTIONS_H

#include <stdint.h>

#define arch_local_inc(v)							\
	do {									\
		unsigned int kp__n;						\
		__asm__ volatile("ldr %w0, [%1]\n\tadd %w0, %w0, #1\n\tstr %w0, [%1]" \
				 : "=&r"(kp__n) : "r"(&(v)) : "memory");	\
	} while (0)
#define arch_local_dec(v)							\
	do {									\
		unsigned int kp__n;						\
		__asm__ volatile("ldr %w0, [%1]\n\tsub %w0, %w0, #1\n\tstr %w0, [%1]" \
				 : "=&r"(kp__n) : "r"(&(v)) : "memory");	\
	} while (0)

/* ++nest */
#define arch_section_nest_inc(nest) arch_local_inc(nest)

/* --nest (a release), and ++gen when that ended the outermost section. */
#define arch_section_nest_dec(nest, gen)					\
	do {									\
		unsigned int kp__n;						\
		__asm__ volatile("ldr %w0, [%1]\n\t"				\
				 "sub %w0, %w0, #1\n\t"			\
				 "stlr %w0, [%1]\n\t"				\
				 "cbnz %w0, 1f\n\t"				\
				 "ldr %w0, [%2]\n\t"				\
				 "add %w0, %w0, #1\n\t"			\
				 "str %w0, [%2]\n"				\
				 "1:"						\
				 : "=&r"(kp__n)					\
				 : "r"(&(nest)), "r"(&(gen))			\
				 : "memory");					\
	} while (0)

/* nest and the counter right above it (in_handler) raised together by one
 * 64-bit store: both, the value to add (1 in each half). */
#define arch_section_pair_add(nest, both)					\
	do {									\
		uint64_t kp__v;							\
		__asm__ volatile("ldr %0, [%1]\n\t"				\
				 "add %0, %0, %2\n\t"				\
				 "str %0, [%1]"				\
				 : "=&r"(kp__v)					\
				 : "r"(&(nest)), "r"((uint64_t)(both))		\
				 : "memory");					\
	} while (0)

/* ... and dropped together (a release); ++gen when nest reached 0. */
#define arch_section_pair_sub(nest, gen, both)					\
	do {									\
		uint64_t kp__v;							\
		__asm__ volatile("ldr %0, [%1]\n\t"				\
				 "sub %0, %0, %3\n\t"				\
				 "stlr %0, [%1]\n\t"				\
				 "cbnz %w0, 1f\n\t"				\
				 "ldr %w0, [%2]\n\t"				\
				 "add %w0, %w0, #1\n\t"			\
				 "str %w0, [%2]\n"				\
				 "1:"						\
				 : "=&r"(kp__v)					\
				 : "r"(&(nest)), "r"(&(gen)), "r"((uint64_t)(both)) \
				 : "memory");					\
	} while (0)

#endif
