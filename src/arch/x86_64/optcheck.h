/* Safety analysis for jump optimization. */
#ifndef KP_X86_OPTCHECK_H
#define KP_X86_OPTCHECK_H

#include <stddef.h>
#include <stdint.h>

#include "arch/x86_64/insn.h"

/* Fills o->ok/why/region for a probe at addr in the function
 * [func, func+size), followed by pad_after bytes of padding before the next
 * function.  read_code reads original bytes (probes removed).  0 or -errno
 * (the verdict is in o). */
int arch_opt_analyse(struct arch_opt *o, uintptr_t addr, uintptr_t func, size_t size,
		     size_t pad_after, int (*read_code)(uintptr_t, uint8_t *, size_t));

#endif
