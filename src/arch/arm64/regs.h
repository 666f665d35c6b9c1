/* struct pt_regs <-> the kernel's signal context (arm64). */
#ifndef KP_ARM64_REGS_H
#define KP_ARM64_REGS_H

#include <ucontext.h>

#include "kprobes.h"

void regs_from_ucontext(struct pt_regs *regs, const ucontext_t *uc);
void regs_to_ucontext(const struct pt_regs *regs, ucontext_t *uc);

/* Copies n bytes with no call to memcpy(), on which a probe may sit: for
 * the trap path (a struct copy or memcpy() of a few hundred bytes is a
 * call on AArch64). */
void a64_copy_bytes(void *dst, const void *src, size_t n);

/* The V registers (kprobes_vector_reg()): 32 of 16 bytes. */
#define A64_VEC_NREGS 32
#define A64_VEC_BYTES 16
/* Layouts of a hit's saved vector registers (kp_thread.vec_layout):
 * v0..v31 side by side, 16 bytes each, as the signal frame's FP/SIMD
 * record has them. */
#define KP_VEC_FPSIMD 0

/* v0 of the FP/SIMD record of a signal frame's context, or NULL when it
 * has none. */
const void *a64_sigframe_vregs(const ucontext_t *uc);

#endif
