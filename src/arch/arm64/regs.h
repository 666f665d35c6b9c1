/* struct pt_regs <-> the kernel's signal context (arm64). */
#ifndef KP_ARM64_REGS_H
#define KP_ARM64_REGS_H

#include <ucontext.h>

#include "kprobes.h"

void regs_from_ucontext(struct pt_regs *regs, const ucontext_t *uc);
void regs_to_ucontext(const struct pt_regs *regs, ucontext_t *uc);

#endif
