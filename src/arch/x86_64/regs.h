/* struct pt_regs <-> the kernel's signal context. */
#ifndef KP_X86_REGS_H
#define KP_X86_REGS_H

#include <stddef.h>
#include <ucontext.h>

#include "kprobes.h"

/* Slot (index in unsigned longs) of a 64-bit GPR in struct pt_regs, given as
 * a Zydis register id; -1 for anything else. */
int regs_offset_of(int zydis_reg);

void regs_from_ucontext(struct pt_regs *regs, const ucontext_t *uc);
void regs_to_ucontext(const struct pt_regs *regs, ucontext_t *uc);

static inline unsigned long regs_get(const struct pt_regs *regs, int slot)
{
	return ((const unsigned long *)regs)[slot];
}

#endif
