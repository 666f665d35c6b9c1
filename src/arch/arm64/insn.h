/*
 * The A64 instruction classifier and simulator: what a probe on one
 * instruction word must do with it.  A64 instructions are all four bytes,
 * so there is no length to find; the questions are whether the word can
 * run out of line unchanged, must be simulated because it reads the PC or
 * branches, or must be refused.  See "The A64 decoder" in docs/design.md.
 *
 * Pure functions of the word (and, for simulation, of the registers and
 * the memory a literal load reads): no state, no allocation, no system
 * call, async-signal-safe.  Builds and is unit-tested on any host.
 */
#ifndef KP_ARCH_ARM64_INSN_H
#define KP_ARCH_ARM64_INSN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pt_regs;

enum a64_insn_kind {
	A64_INSN_XOL,		/* runs out of line unchanged: no PC read, no branch */
	A64_INSN_SIMULATE,	/* reads the PC or branches: a64_insn_simulate() */
	A64_INSN_REJECT,	/* cannot be probed; a64_insn.why says why */
};

/* One decoded instruction word.  The fields after kind are the decoded
 * operands simulation needs; callers treat them as private. */
struct a64_insn {
	uint32_t word;
	enum a64_insn_kind kind;
	const char *why;	/* REJECT: one short reason, a static string */
	uint8_t op;		/* simulation: which instruction form */
	uint8_t rd, rn, rm;	/* register operands (31: xzr/sp as the form says) */
	uint8_t cond, bit, size;
	bool sf, negate, sign;
	int64_t imm;		/* branch offset, literal offset, or immediate */
};

/* Classify word.  Returns 0 for XOL and SIMULATE, -EINVAL for REJECT
 * (out->why set).  Unallocated encodings, exclusives (LDXR/STXR/LDAXP...:
 * a trap between the pair clears the monitor and the loop never ends),
 * SVC/HVC/SMC, BRK/HLT, ERET and system-register writes that change the
 * execution state are refused. */
int a64_insn_decode(uint32_t word, struct a64_insn *out);

/* Carry out a SIMULATE instruction on regs as if it ran at regs->pc:
 * updates the destination register(s), the condition flags it reads, and
 * regs->pc (pc + 4, or the branch target).  Literal loads read memory
 * without faulting; an unreadable literal returns -EFAULT and leaves regs
 * unchanged.  Returns 0 on success. */
int a64_insn_simulate(const struct a64_insn *in, struct pt_regs *regs);

/* Whether the instruction at index idx of the n words at code lies inside
 * an exclusive load/store sequence (after a load-exclusive and before the
 * store-exclusive that ends it, within the window the kernel also scans):
 * a breakpoint there would make the store fail forever. */
bool a64_in_exclusive_sequence(const uint32_t *code, size_t n, size_t idx);

#endif
