/* Register layouts: pt_regs as handlers see it, mcontext as the kernel
 * saves it on a signal. */
#include "arch/x86_64/regs.h"

#include <Zydis/Zydis.h>

#include "os/linux/memory.h"

#define PT(field) ((int)(offsetof(struct pt_regs, field) / sizeof(unsigned long)))

int regs_offset_of(int r)
{
	switch (r) {
	case ZYDIS_REGISTER_RAX: return PT(ax);
	case ZYDIS_REGISTER_RCX: return PT(cx);
	case ZYDIS_REGISTER_RDX: return PT(dx);
	case ZYDIS_REGISTER_RBX: return PT(bx);
	case ZYDIS_REGISTER_RSP: return PT(sp);
	case ZYDIS_REGISTER_RBP: return PT(bp);
	case ZYDIS_REGISTER_RSI: return PT(si);
	case ZYDIS_REGISTER_RDI: return PT(di);
	case ZYDIS_REGISTER_R8: return PT(r8);
	case ZYDIS_REGISTER_R9: return PT(r9);
	case ZYDIS_REGISTER_R10: return PT(r10);
	case ZYDIS_REGISTER_R11: return PT(r11);
	case ZYDIS_REGISTER_R12: return PT(r12);
	case ZYDIS_REGISTER_R13: return PT(r13);
	case ZYDIS_REGISTER_R14: return PT(r14);
	case ZYDIS_REGISTER_R15: return PT(r15);
	default: return -1;
	}
}

void regs_from_ucontext(struct pt_regs *r, const ucontext_t *uc)
{
	const greg_t *g = uc->uc_mcontext.gregs;

	r->r15 = g[REG_R15]; r->r14 = g[REG_R14]; r->r13 = g[REG_R13];
	r->r12 = g[REG_R12]; r->bp = g[REG_RBP]; r->bx = g[REG_RBX];
	r->r11 = g[REG_R11]; r->r10 = g[REG_R10]; r->r9 = g[REG_R9];
	r->r8 = g[REG_R8]; r->ax = g[REG_RAX]; r->cx = g[REG_RCX];
	r->dx = g[REG_RDX]; r->si = g[REG_RSI]; r->di = g[REG_RDI];
	r->orig_ax = (unsigned long)-1;
	r->ip = g[REG_RIP];
	r->cs = g[REG_CSGSFS] & 0xffff;
	r->flags = g[REG_EFL];
	r->sp = g[REG_RSP];
	r->ss = 0x2b;
}

void regs_to_ucontext(const struct pt_regs *r, ucontext_t *uc)
{
	greg_t *g = uc->uc_mcontext.gregs;

	g[REG_R15] = r->r15; g[REG_R14] = r->r14; g[REG_R13] = r->r13;
	g[REG_R12] = r->r12; g[REG_RBP] = r->bp; g[REG_RBX] = r->bx;
	g[REG_R11] = r->r11; g[REG_R10] = r->r10; g[REG_R9] = r->r9;
	g[REG_R8] = r->r8; g[REG_RAX] = r->ax; g[REG_RCX] = r->cx;
	g[REG_RDX] = r->dx; g[REG_RSI] = r->si; g[REG_RDI] = r->di;
	g[REG_RIP] = r->ip;
	/* Handlers may change the status flags, DF and AC; not TF, IF or IOPL. */
	g[REG_EFL] = (g[REG_EFL] & ~0x40cd5UL) | (r->flags & 0x40cd5UL);
	g[REG_RSP] = r->sp;
}

/* The n-th integer argument at a function entry, as the System V ABI
 * passes it: rdi, rsi, rdx, rcx, r8, r9, then the stack above the return
 * address (read without faulting; 0 when unreadable). */
__attribute__((visibility("default"))) unsigned long
regs_get_kernel_argument(struct pt_regs *regs, unsigned int n)
{
	static const size_t arg_regs[] = {
		offsetof(struct pt_regs, di), offsetof(struct pt_regs, si),
		offsetof(struct pt_regs, dx), offsetof(struct pt_regs, cx),
		offsetof(struct pt_regs, r8), offsetof(struct pt_regs, r9),
	};
	unsigned long v = 0;

	if (n < 6)
		return *(unsigned long *)((char *)regs + arg_regs[n]);
	if (kp_mem_read_nofault(regs->sp + 8 * (n - 5), &v, sizeof(v)))
		return 0;
	return v;
}
