/* What the OS layer reads of a signal's saved context. */
#ifndef KP_ASM_SIGCONTEXT_H
#define KP_ASM_SIGCONTEXT_H

#include <stdint.h>
#include <ucontext.h>

/* The interrupted thread's instruction pointer. */
static inline uintptr_t arch_ucontext_ip(const ucontext_t *uc)
{
	return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
}

#endif
