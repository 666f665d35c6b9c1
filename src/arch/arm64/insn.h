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

#if defined(__aarch64__)
struct pt_regs;
#else
/* Built on another host (the unit tests): arm64's registers, as
 * include/kprobes.h declares them on arm64.  Nothing on such a host may
 * include both headers. */
struct pt_regs {
	unsigned long regs[31];
	unsigned long sp, pc, pstate;
};
#endif

enum a64_insn_kind {
	A64_INSN_XOL,		/* runs out of line unchanged: no PC read, no branch */
	A64_INSN_SIMULATE,	/* reads the PC or branches: a64_insn_simulate() */
	A64_INSN_REJECT,	/* cannot be probed; a64_insn.why says why */
};

/* The simulated forms (struct a64_insn.op). */
enum a64_op {
	A64_OP_NONE,
	A64_OP_ADR,		/* rd = pc + imm */
	A64_OP_ADRP,		/* rd = (pc & ~0xfff) + imm (imm in bytes) */
	A64_OP_B,		/* pc += imm */
	A64_OP_BL,		/* x30 = pc + 4, pc += imm */
	A64_OP_BCOND,		/* B.cond, BC.cond: cond */
	A64_OP_CBZ,		/* CBZ (CBNZ: negate), rd tested, sf: 64 bits */
	A64_OP_TBZ,		/* TBZ (TBNZ: negate), bit of rd */
	A64_OP_LDR_LIT,		/* rd = size bytes at pc + imm, sign: LDRSW */
	A64_OP_PRFM_LIT,	/* a prefetch hint: nothing but pc += 4 */
	A64_OP_BR,		/* pc = rn */
	A64_OP_BLR,		/* x30 = pc + 4, pc = rn (read first) */
	A64_OP_RET,		/* pc = rn */
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

/* How a literal load reads: copies len bytes from src, returns 0, or
 * non-zero (and may have copied part) when src is not readable. */
typedef long (*a64_read_fn)(void *dst, const void *src, size_t len);

/* a64_insn_simulate() with its literal read done by read: the unit tests'
 * way of making a literal unreadable.  a64_insn_simulate() reads through
 * kp_copy_nofault() (asm/uaccess.h: a copy whose fault the library's
 * SIGSEGV handler turns into a return value, no system call). */
int a64_insn_simulate_read(const struct a64_insn *in, struct pt_regs *regs,
			   a64_read_fn read);
long kp_copy_nofault(void *dst, const void *src, size_t len);

/* Whether condition cond (0..15, A64's encoding) holds for the NZCV flags
 * in pstate bits 31..28.  AL and NV always hold. */
bool a64_condition_holds(unsigned int cond, uint64_t pstate);

/* Whether the instruction at index idx of the n words at code lies inside
 * an exclusive load/store sequence (after a load-exclusive and before the
 * store-exclusive that ends it, within the window the kernel also scans):
 * a breakpoint there would make the store fail forever. */
bool a64_in_exclusive_sequence(const uint32_t *code, size_t n, size_t idx);

/* How far back a64_in_exclusive_sequence() looks, in instructions: Arm
 * recommends at most 128 bytes between a load- and a store-exclusive, and
 * the kernel scans as far. */
#define A64_EXCLUSIVE_WINDOW 32

#endif
