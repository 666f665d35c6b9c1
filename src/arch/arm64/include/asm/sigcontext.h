/* What the OS layer reads of a signal's saved context (arm64: struct
 * sigcontext with regs[31], sp, pc, pstate). */
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
	return (uintptr_t)uc->uc_mcontext.pc;
}

/* The instruction, stack and frame pointers a signal interrupted, from a
 * ucontext at uc found on a stack being unwound (not trusted: loads that
 * may fault).  False when it cannot be read. */
static inline bool arch_sigframe_regs(uintptr_t uc, uintptr_t *ip, uintptr_t *sp, uintptr_t *fp)
{
	const size_t mc = offsetof(ucontext_t, uc_mcontext);

	return !kp_load_nofault(uc + mc + offsetof(mcontext_t, pc), ip) &&
	       !kp_load_nofault(uc + mc + offsetof(mcontext_t, sp), sp) &&
	       !kp_load_nofault(uc + mc + offsetof(mcontext_t, regs) + 29 * 8, fp);
}

/* No register of ARCH_DWARF_AUX: 0, unknown. */
static inline uintptr_t arch_sigframe_aux(uintptr_t uc)
{
	(void)uc;
	return 0;
}

#endif
