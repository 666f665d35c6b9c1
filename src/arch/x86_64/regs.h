/* struct pt_regs <-> the kernel's signal context. */
#ifndef KP_X86_REGS_H
#define KP_X86_REGS_H

#include <stddef.h>
#include <stdint.h>
#include <ucontext.h>

#include "kprobes.h"

/* Slot (index in unsigned longs) of a 64-bit GPR in struct pt_regs, given as
 * a Zydis register id; -1 for anything else. */
int regs_offset_of(int zydis_reg);

void regs_from_ucontext(struct pt_regs *regs, const ucontext_t *uc);
void regs_to_ucontext(const struct pt_regs *regs, ucontext_t *uc);

/* Layouts of a hit's saved vector registers (kp_thread.vec_layout): an
 * fxsave image (xmm0-15, 16 bytes each from byte 160); an xsave image, the
 * same legacy area followed by the header, whose XSTATE_BV bit 1 clear
 * means the xmm registers were in their initial state (zero) and the
 * area was not written; or a function entry detour's argument registers
 * x/y/zmm0-7 side by side, 16, 32 or 64 bytes each (the layout is that
 * size). */
#define KP_VEC_FXSAVE 0
#define KP_VEC_XSAVE 1
#define KP_VEC_FX_XMM 160
#define KP_VEC_XSTATE_BV 512
#define KP_VEC_XSTATE_SSE 2
/* A signal frame's fpstate is an xsave image when its software-reserved
 * bytes carry this magic (the kernel's FP_XSTATE_MAGIC1). */
#define KP_VEC_SIG_MAGIC_OFF 464
#define KP_VEC_SIG_MAGIC 0x46505853U

/* Bytes of an xsave image of every enabled component, 0 where the CPU has
 * no xsave (fxsave then): detour.c. */
extern unsigned int kp_xsave_size;


/* At jprobe_return() (rethook.c): the state of the jprobe's entry comes
 * back into uc; returns the address the probed instruction was at. */
struct kp_thread;
uintptr_t arch_jprobe_restore(struct kp_thread *t, ucontext_t *uc);

static inline unsigned long regs_get(const struct pt_regs *regs, int slot)
{
	return ((const unsigned long *)regs)[slot];
}

#endif
