/* x86-64 details of return probes. */
#ifndef KP_X86_RETHOOK_H
#define KP_X86_RETHOOK_H

#include "kprobes.h"

/* At a function entry the return address is at the top of the stack. */
static inline uintptr_t arch_return_slot(const struct pt_regs *regs)
{
	return regs->sp;
}

#endif
