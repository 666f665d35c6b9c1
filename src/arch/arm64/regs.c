/* Register layouts: pt_regs as handlers see it (Linux's user_pt_regs),
 * mcontext as the kernel saves it on a signal (struct sigcontext: the
 * same registers, then fault_address and the FP/SIMD and other records). */
#include "arch/arm64/regs.h"

#include <string.h>

#include "os/linux/memory.h"

/* The condition flags (NZCV) and PSTATE.BTYPE are what a handler may
 * change; the rest of pstate (mode, masks) is the kernel's. */
#define PSTATE_USER_MASK 0xf0000c00UL

void regs_from_ucontext(struct pt_regs *r, const ucontext_t *uc)
{
	const mcontext_t *m = &uc->uc_mcontext;

	memcpy(r->regs, m->regs, sizeof(r->regs));
	r->sp = m->sp;
	r->pc = m->pc;
	r->pstate = m->pstate;
}

void regs_to_ucontext(const struct pt_regs *r, ucontext_t *uc)
{
	mcontext_t *m = &uc->uc_mcontext;

	memcpy(m->regs, r->regs, sizeof(r->regs));
	m->sp = r->sp;
	m->pc = r->pc;
	m->pstate = (m->pstate & ~PSTATE_USER_MASK) | (r->pstate & PSTATE_USER_MASK);
}

/* Not turned back into a call to memcpy() by the loop optimizer. */
__attribute__((optimize("no-tree-loop-distribute-patterns")))
void a64_copy_bytes(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;

	for (size_t i = 0; i < n; i++)
		d[i] = s[i];
}

/* The n-th integer argument at a function entry, as AAPCS64 passes it:
 * x0..x7, then the stack at sp, 8 bytes each (read without faulting; 0
 * when unreadable). */
__attribute__((visibility("default"))) unsigned long
regs_get_kernel_argument(struct pt_regs *regs, unsigned int n)
{
	unsigned long v = 0;

	if (n < 8)
		return regs->regs[n];
	if (kp_mem_read_nofault(regs->sp + 8 * (n - 8), &v, sizeof(v)))
		return 0;
	return v;
}
