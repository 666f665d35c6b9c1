/*
 * Which handlers can change the FP/SIMD registers (or FPCR, FPSR) or errno
 * (arm64)?  A handler that provably cannot, decoded with everything it
 * calls directly, is called without the 32 vector registers saved around
 * it: by a jump-optimized probe's detour and by the return trampoline.
 *
 * The A64 encoding says it by instruction class: scalar FP and Advanced
 * SIMD data processing, SIMD&FP loads and stores (the V bit), SVE and SME
 * all name vector state; MRS and MSR of FPCR and FPSR read or write it.
 * errno lives in thread-local storage: a store whose base register holds
 * the thread pointer (TPIDR_EL0, or it plus a constant: how glibc's errno
 * stores and local-exec accesses are written) counts for it, as does a
 * system call.  Undecodable words, indirect branches (BR, BLR, which is
 * how a call through the PLT ends) and anything the walk cannot follow
 * count as "may do everything".
 * Every handler is taken to read its pt_regs: the detours and the
 * trampoline always build the whole struct on arm64.
 */
#include <stdlib.h>

#include "arch/arch.h"
#include "core/arch_api.h"

#define NEEDS_ALL KP_OPT_SAVE_ALL
/* Not analysed on arm64 (pt_regs is always complete, and there are no
 * r8-r11 to spare). */
#define NEEDS_ALWAYS (KP_OPT_SAVE_REGS | KP_OPT_SAVE_R8_R11)

/* A system register's number in an MRS/MSR: op0:op1:CRn:CRm:op2. */
#define SYSREG(op0, op1, crn, crm, op2) \
	((uint32_t)(op0) << 14 | (uint32_t)(op1) << 11 | (uint32_t)(crn) << 7 | \
	 (uint32_t)(crm) << 3 | (uint32_t)(op2))
#define SYSREG_FPCR SYSREG(3, 3, 4, 4, 0)
#define SYSREG_FPSR SYSREG(3, 3, 4, 4, 1)
#define SYSREG_NZCV SYSREG(3, 3, 4, 2, 0)
#define SYSREG_TPIDR_EL0 SYSREG(3, 3, 13, 0, 2)

static inline unsigned int rd(uint32_t w) { return w & 31; }
static inline unsigned int rn(uint32_t w) { return (w >> 5) & 31; }

/* The A64 top-level class, bits 28:25. */
static inline unsigned int op0(uint32_t w) { return (w >> 25) & 15; }

static bool is_load_store(uint32_t w) { return (op0(w) & 5) == 4; }

/* Names FP/SIMD, SVE or SME state. */
static bool touches_vector(uint32_t w)
{
	unsigned int c = op0(w);

	if ((c & 7) == 7)			/* scalar FP, Advanced SIMD */
		return true;
	if (is_load_store(w) && (w & (1u << 26)))	/* SIMD&FP loads, stores */
		return true;
	if (c == 2)				/* SVE */
		return true;
	return c == 0 && (w >> 31);		/* SME */
}

/* Neither allocated nor anything the walk understands. */
static bool unallocated(uint32_t w)
{
	unsigned int c = op0(w);

	return (c == 0 && !(w >> 31)) || c == 1 || c == 3;
}

/* A load/store that writes memory through its base register Rn: stores,
 * store pairs, exclusives and atomics.  (Literal loads have no Rn.) */
static bool writes_through_rn(uint32_t w)
{
	if ((w & 0x3f000000u) == 0x08000000u)		/* exclusives, LSE CAS */
		return true;
	if ((w & 0x3f000000u) == 0x19000000u)		/* STLUR (LDAPUR: opc) */
		return !(w & (3u << 22));
	if ((w & 0x38000000u) == 0x28000000u)		/* pairs: L is bit 22 */
		return !(w & (1u << 22));
	if ((w & 0x38000000u) != 0x38000000u)
		return false;
	/* single register: an atomic (bit 24 clear, bit 21 set, bits 11:10
	 * clear) writes; otherwise opc 00 is a store */
	if (!(w & (1u << 24)) && (w & (1u << 21)) && !(w & 0xc00u))
		return true;
	return !(w & (3u << 22));
}

/* Registers derived from the thread pointer (bit per register, x31 never:
 * that is sp or xzr). */
typedef uint32_t regset;

/* MRS Xt, TPIDR_EL0, and ADD/SUB (immediate) from such a register: the
 * destination holds the thread pointer, or it plus a link-time offset, as
 * a thread-local variable is written by name (local-exec: the offset
 * added, initial-exec: the offset as a store's index register).  A
 * register add makes a pointer, as taking a variable's address does: a
 * store through it is not counted, as x86-64 counts only stores through
 * %fs, which is how errno is written.  Any other write of a register ends
 * what it held; one this does not recognise leaves it (which can only
 * count a store too many). */
static regset taint_step(uint32_t w, regset t)
{
	unsigned int c = op0(w), d = rd(w);

	if ((w & 0xffd00000u) == 0xd5100000u && (w & (1u << 21)))		/* MRS */
		return ((w >> 5) & 0xffff) == SYSREG_TPIDR_EL0 ? t | 1u << d : t & ~(1u << d);
	if ((w & 0xbf000000u) == 0x91000000u && (t >> rn(w) & 1))	/* ADD/SUB imm */
		return d == 31 ? t : t | 1u << d;
	if ((c & 0xe) == 8 || (c & 7) == 5) {			/* data processing */
		if ((w & 0x1fe00000u) == 0x1a400000u)		/* CCMP, CCMN: no Rd */
			return t;
		return t & ~(1u << d);
	}
	if (!is_load_store(w) || (w & (1u << 26)))
		return t;
	if ((w & 0x38000000u) == 0x28000000u && (w & (1u << 22)))	/* LDP */
		return t & ~(1u << d) & ~(1u << ((w >> 10) & 31));
	if ((w & 0x3b000000u) == 0x18000000u)			/* LDR literal */
		return t & ~(1u << d);
	/* single register, not atomic: opc 01, 1x load (size 11 opc 10: PRFM) */
	if ((w & 0x38000000u) == 0x38000000u && (w & (3u << 22)) &&
	    ((w & (1u << 24)) || !(w & (1u << 21)) || (w & 0xc00u) == 0x800u) &&
	    (w & 0xc0c00000u) != 0xc0800000u)
		return t & ~(1u << d);
	return t;
}

/* MRS / MSR: what a system register access needs. */
static uint8_t sysreg_needs(uint32_t w)
{
	uint32_t reg = (w >> 5) & 0xffff;
	bool read = w & (1u << 21);

	if (reg == SYSREG_FPCR || reg == SYSREG_FPSR)
		return KP_OPT_SAVE_VECTOR;
	if (read || reg == SYSREG_NZCV)
		return 0;
	return NEEDS_ALL;		/* a write of anything else */
}

static int32_t sext(uint32_t v, int bits)
{
	return (int32_t)(v << (32 - bits)) >> (32 - bits);
}

/* The target of a direct branch at pc, or 0 for anything else; *call is
 * set for BL. */
static uintptr_t branch_target(uint32_t w, uintptr_t pc, bool *call)
{
	*call = (w & 0xfc000000u) == 0x94000000u;
	if ((w & 0x7c000000u) == 0x14000000u)			/* B, BL */
		return pc + (intptr_t)sext(w & 0x3ffffff, 26) * 4;
	if ((w & 0xff000000u) == 0x54000000u ||			/* B.cond, BC.cond */
	    (w & 0x7e000000u) == 0x34000000u)			/* CBZ, CBNZ */
		return pc + (intptr_t)sext((w >> 5) & 0x7ffff, 19) * 4;
	if ((w & 0x7e000000u) == 0x36000000u)			/* TBZ, TBNZ */
		return pc + (intptr_t)sext((w >> 5) & 0x3fff, 14) * 4;
	return 0;
}

/* RET, RETAA, RETAB. */
static bool is_return(uint32_t w)
{
	return (w & 0xfffffc1fu) == 0xd65f0000u || w == 0xd65f0bffu || w == 0xd65f0fffu;
}

/* What one instruction of the function [lo, hi) may change (stores
 * through the thread pointer aside: thread_pointer_stores). */
static uint8_t insn_needs(struct kp_code_walk *w, uint32_t insn, uintptr_t pc, uintptr_t lo,
			  uintptr_t hi)
{
	uintptr_t target;
	bool call;

	if (unallocated(insn))
		return NEEDS_ALL;
	if (touches_vector(insn))
		return KP_OPT_SAVE_VECTOR;
	if (is_load_store(insn))
		return 0;
	if ((insn & 0xffd00000u) == 0xd5100000u)
		return sysreg_needs(insn);
	if ((insn & 0xffe0001fu) == 0xd4000001u)		/* SVC */
		return KP_OPT_SAVE_ERRNO;
	if ((insn & 0xff000000u) == 0xd4000000u)		/* BRK, HLT, HVC, SMC */
		return NEEDS_ALL;
	if ((insn & 0xfe000000u) == 0xd6000000u)		/* BR, BLR, RET, ERET */
		return is_return(insn) ? 0 : NEEDS_ALL;
	target = branch_target(insn, pc, &call);
	if (!target || (!call && target >= lo && target < hi))
		return 0;
	return kp_code_walk_call(w, target);
}

/* A store whose address register (base, or a register offset's index)
 * is one of t. */
static bool stores_through(uint32_t w, regset t)
{
	bool reg_offset = (w & 0x38200c00u) == 0x38200800u && !(w & (1u << 24));

	if (!is_load_store(w) || !writes_through_rn(w))
		return false;
	return (t >> rn(w) & 1) || (reg_offset && (t >> ((w >> 16) & 31) & 1));
}

/* Unconditional B, BR, RET: the next instruction is reached only by a
 * branch. */
static bool ends_flow(uint32_t w)
{
	return (w & 0xfc000000u) == 0x14000000u || ((w & 0xfe000000u) == 0xd6000000u &&
						     !(w & (1u << 21)));
}

/* Whether the function at fn, n words, stores through the thread pointer:
 * the registers holding it are followed forward through the code, joined
 * at the targets of its branches (again while a back edge adds any). */
static uint8_t thread_pointer_stores(const uint32_t *code, size_t n, uintptr_t fn)
{
	regset *in = calloc(n, sizeof(*in));
	bool again = true;
	uint8_t need = 0;

	if (!in)
		return NEEDS_ALL;
	for (int pass = 0; pass < 8 && again && !need; pass++) {
		regset t = 0;

		again = false;
		for (size_t i = 0; i < n && !need; i++) {
			uintptr_t target;
			bool call;

			t |= in[i];
			if (stores_through(code[i], t))
				need = KP_OPT_SAVE_ERRNO;
			t = taint_step(code[i], t);
			target = branch_target(code[i], fn + 4 * i, &call);
			if (target && !call && target >= fn && target < fn + 4 * n) {
				size_t j = (target - fn) / 4;

				if ((in[j] | t) != in[j]) {
					in[j] |= t;
					again |= j <= i;
				}
			}
			if (ends_flow(code[i]))
				t = 0;
		}
	}
	free(in);
	return again && !need ? NEEDS_ALL : need;
}

uint8_t arch_code_scan(struct kp_code_walk *w, const void *code, size_t size, uintptr_t fn)
{
	const uint32_t *insns = code;
	size_t n = size / 4;
	uint8_t need;

	if (fn & 3)
		return NEEDS_ALL;
	need = thread_pointer_stores(insns, n, fn);
	for (size_t i = 0; i < n && need != NEEDS_ALL; i++)
		need |= insn_needs(w, insns[i], fn + 4 * i, fn, fn + size);
	return need | NEEDS_ALWAYS;
}
