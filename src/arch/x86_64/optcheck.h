/* Safety analysis for jump optimization. */
#ifndef KP_X86_OPTCHECK_H
#define KP_X86_OPTCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arch/x86_64/insn.h"

/* Fills o->ok/why/region for a probe at addr in the function
 * [func, func+size), followed by pad_after bytes of padding before the next
 * function.  read_code reads original bytes (probes removed).  0 or -errno
 * (the verdict is in o). */
int arch_opt_analyse(struct arch_opt *o, uintptr_t addr, uintptr_t func, size_t size,
		     size_t pad_after, int (*read_code)(uintptr_t, uint8_t *, size_t));

/* The branch targets the jump analysis found for the function [func,
 * func+size) (pad bytes of padding after it): from the function itself and
 * from the rest of its object, sorted, with the cases of the switch tables
 * it could read.  Valid until the next analysis, under the registry lock. */
struct opt_targets {
	const uint8_t *code;	/* the function's original bytes */
	const uintptr_t *v;
	size_t n;
	bool indirect;		/* an indirect jump whose targets are not all known */
	const char *why;	/* the function could not be analysed, or NULL */
};

/* 0, or -errno (-ENOMEM, -EFAULT); the verdict is in t. */
int arch_opt_function_targets(uintptr_t func, size_t size, size_t pad_after,
			      int (*read_code)(uintptr_t, uint8_t *, size_t),
			      struct opt_targets *t);

#endif
