/* What the OS layer reads of a signal's saved context. */
#ifndef KP_ASM_SIGCONTEXT_H
#define KP_ASM_SIGCONTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <ucontext.h>

#include "asm/uaccess.h"

/* The interrupted thread's instruction pointer. */
static inline uintptr_t arch_ucontext_ip(const ucontext_t *uc)
{
	return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
}

/* The instruction, stack and frame pointers a signal interrupted, from a
 * ucontext at uc found on a stack being unwound (not trusted: loads that
 * may fault).  False when it cannot be read. */
static inline bool arch_sigframe_regs(uintptr_t uc, uintptr_t *ip, uintptr_t *sp, uintptr_t *fp)
{
	const size_t gregs = offsetof(ucontext_t, uc_mcontext.gregs);

	return !kp_load_nofault(uc + gregs + REG_RIP * sizeof(greg_t), ip) &&
	       !kp_load_nofault(uc + gregs + REG_RSP * sizeof(greg_t), sp) &&
	       !kp_load_nofault(uc + gregs + REG_RBP * sizeof(greg_t), fp);
}

/* The register of ARCH_DWARF_AUX a signal interrupted (rbx), or 0 when
 * it cannot be read. */
static inline uintptr_t arch_sigframe_aux(uintptr_t uc)
{
	const size_t gregs = offsetof(ucontext_t, uc_mcontext.gregs);
	uintptr_t v;

	return kp_load_nofault(uc + gregs + REG_RBX * sizeof(greg_t), &v) ? 0 : v;
}

#endif
