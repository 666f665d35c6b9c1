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
 *
 * pt_regs arrives in x1, a handler's second argument: a handler that never
 * reads x1 while it may still hold the pointer (followed through the
 * code, joined at branch targets, ended by a write of x1 or a call), and
 * calls nothing that reads its own x1, never looks at its pt_regs, and
 * an optimized probe's detour may skip building it (detour.S, the light
 * path).  That path keeps x4-x18 only for a handler whose code (or a
 * callee's) names one of them in a register field at all: compiled code
 * writes a scratch register before it reads one.
 */
#include <stdlib.h>

#include "arch/arch.h"
#include "core/arch_api.h"

#define NEEDS_ALL KP_OPT_SAVE_ALL
/* The scratch registers of KP_OPT_SAVE_SCRATCH: x4-x18 (the detour keeps
 * x0-x3 and x30 whatever the handler). */
#define SCRATCH_REGS 0x7fff0u
/* The register pt_regs arrives in. */
#define REGS_ARG 1

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
static inline unsigned int ra(uint32_t w) { return (w >> 10) & 31; }	/* also Rt2 */
static inline unsigned int rm(uint32_t w) { return (w >> 16) & 31; }	/* also Rs */

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

/* ---- which registers an instruction reads and writes ----
 * By the register fields of its class.  A read is over-counted where in
 * doubt (a field that may be an immediate counts), a write only counted
 * where the instruction surely replaces the register. */

/* Data processing (immediate): every form reads Rn but ADR, ADRP and the
 * wide moves; MOVK and BFM keep part of Rd; EXTR reads Rm too. */
static bool dp_imm_reads(uint32_t w, bool d, bool n, bool m)
{
	if ((w & 0x1f000000u) == 0x10000000u)			/* ADR, ADRP */
		return false;
	if ((w & 0x1f800000u) == 0x12800000u)			/* MOVN, MOVZ, MOVK */
		return d && (w & 0x60000000u) == 0x60000000u;
	if ((w & 0x1f800000u) == 0x13000000u)			/* SBFM, BFM, UBFM */
		return n || (d && (w & 0x60000000u) == 0x20000000u);
	if ((w & 0x1f800000u) == 0x13800000u)			/* EXTR */
		return n || m;
	return n;						/* ADD/SUB, logical */
}

/* General-register loads and stores (the SIMD&FP ones read only their
 * address registers: their Rt names a vector register). */
static bool ldst_reads(uint32_t w, bool d, bool n, bool a, bool m)
{
	bool store = !(w & (3u << 22));

	if (w & (1u << 26))					/* SIMD&FP */
		return n || m;
	if ((w & 0x3b000000u) == 0x18000000u)			/* literal */
		return false;
	if ((w & 0x38000000u) == 0x28000000u)			/* pairs: L is bit 22 */
		return n || (!(w & (1u << 22)) && (d || a));
	if ((w & 0x3f000000u) == 0x39000000u)			/* unsigned offset */
		return n || (store && d);
	if ((w & 0x3f000000u) == 0x38000000u) {
		if (!(w & (1u << 21)))				/* imm9 forms */
			return n || (store && d);
		if ((w & 0xc00u) == 0x800u)			/* register offset */
			return n || m || (store && d);
		return n || m;					/* atomics: Rs, Rn */
	}
	return d || n || a || m;		/* exclusives, LDAPUR/STLUR, tags */
}

/* Branches, exception generation, system instructions. */
static bool branch_sys_reads(uint32_t w, bool d, bool n)
{
	if ((w & 0x7c000000u) == 0x14000000u || (w & 0xff000000u) == 0x54000000u)
		return false;					/* B, BL, B.cond */
	if ((w & 0x7c000000u) == 0x34000000u)			/* CBZ/CBNZ, TBZ/TBNZ */
		return d;
	if ((w & 0xffc00000u) == 0xd5000000u)			/* MSR, SYS: Rt */
		return !(w & (1u << 21)) && d;
	if ((w & 0xfe000000u) == 0xd6000000u)			/* BR, BLR, RET (+PAC) */
		return n || d;
	return true;		/* SVC (a system call reads x0-x5) and the rest */
}

/* The general registers w's register fields may name (x0-x30; 31 is sp
 * or the zero register), by its class: fields that hold an immediate
 * there are left out, anything unsure counts. */
static uint32_t regs_named(uint32_t w)
{
	uint32_t d = 1u << rd(w), n = 1u << rn(w), a = 1u << ra(w), m = 1u << rm(w);
	unsigned int c = op0(w);

	if ((c & 0xe) == 8) {					/* data processing, imm */
		if ((w & 0x1f000000u) == 0x10000000u || (w & 0x1f800000u) == 0x12800000u)
			return d;				/* ADR/ADRP, wide moves */
		return (w & 0x1f800000u) == 0x13800000u ? d | n | m : d | n;
	}
	if ((c & 0xe) == 0xa) {					/* branches, system */
		if ((w & 0x7c000000u) == 0x14000000u || (w & 0xff000000u) == 0x54000000u ||
		    (w & 0xff000000u) == 0xd4000000u)
			return 0;			/* B, BL, B.cond, SVC... */
		if ((w & 0xfe000000u) == 0xd6000000u)
			return n | d;				/* BR, BLR, RET */
		return d;			/* CBZ, TBZ, MRS, MSR, SYS, hints */
	}
	if (!is_load_store(w))
		return d | n | a | m;
	if (w & (1u << 26))				/* SIMD&FP: Rt is a vector */
		return n | m;
	if ((w & 0x3b000000u) == 0x18000000u)			/* literal */
		return d;
	if ((w & 0x38000000u) == 0x28000000u)			/* pairs */
		return d | n | a;
	if ((w & 0x3f000000u) == 0x39000000u)			/* unsigned offset */
		return d | n;
	if ((w & 0x3f000000u) == 0x38000000u && !(w & (1u << 21)))	/* imm9 */
		return d | n;
	return d | n | a | m;
}

/* Whether w may read general register r (0-30). */
static bool may_read(uint32_t w, unsigned int r)
{
	unsigned int c = op0(w);
	bool d = rd(w) == r, n = rn(w) == r, a = ra(w) == r, m = rm(w) == r;

	if ((c & 0xe) == 8)
		return dp_imm_reads(w, d, n, m);
	if ((c & 7) == 5)					/* data processing, reg */
		return n || m || a;
	if (is_load_store(w))
		return ldst_reads(w, d, n, a, m);
	if ((c & 0xe) == 0xa)
		return branch_sys_reads(w, d, n);
	return d || n || a || m;		/* SIMD&FP moves from X registers, SVE, ... */
}

/* Whether w surely replaces general register r (0-30). */
static bool surely_writes(uint32_t w, unsigned int r)
{
	unsigned int c = op0(w);

	if (rd(w) != r)
		return is_load_store(w) && !(w & (1u << 26)) &&
		       (w & 0x38400000u) == 0x28400000u && ra(w) == r;	/* LDP: Rt2 */
	if ((c & 0xe) == 8)					/* data processing, imm */
		return true;
	if ((c & 7) == 5)
		return (w & 0x1f000000u) == 0x0a000000u ||	/* logical (shifted) */
		       (w & 0x1f000000u) == 0x0b000000u ||	/* ADD/SUB (shifted, ext) */
		       (w & 0x1f000000u) == 0x1b000000u ||	/* 3-source */
		       (w & 0x1fe00000u) == 0x1a800000u ||	/* conditional select */
		       (w & 0x1fe00000u) == 0x1ac00000u;	/* 1- and 2-source */
	if ((w & 0xfff00000u) == 0xd5300000u)			/* MRS */
		return true;
	if (!is_load_store(w) || (w & (1u << 26)))
		return false;
	if ((w & 0x3b000000u) == 0x18000000u)			/* LDR (literal), not PRFM */
		return (w >> 30) != 3;
	if ((w & 0x38400000u) == 0x28400000u)			/* LDP, LDPSW */
		return true;
	/* single register, unsigned offset, imm9 or register offset: opc 01
	 * and 1x load (size 11 opc 10 is PRFM) */
	if ((w & 0x3f000000u) != 0x39000000u &&
	    !((w & 0x3f000000u) == 0x38000000u && (!(w & (1u << 21)) || (w & 0xc00u) == 0x800u)))
		return false;
	return (w & (3u << 22)) && (w & 0xc0c00000u) != 0xc0800000u;
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

/* Whether the function at fn, n words, may read x1 while it may still
 * hold the pt_regs pointer it arrived with: followed forward, joined at
 * the targets of its branches (again while a back edge adds any); a write
 * of x1 ends it, so does a call (x1 is the callee's to change, and the
 * callee is walked as a handler itself). */
static uint8_t regs_reads(const uint32_t *code, size_t n, uintptr_t fn)
{
	bool *in = calloc(n, sizeof(*in));
	bool again = true;
	uint8_t need = 0;

	if (!in)
		return NEEDS_ALL;
	for (int pass = 0; pass < 8 && again && !need; pass++) {
		bool live = true;	/* at the entry, x1 is pt_regs */

		again = false;
		for (size_t i = 0; i < n && !need; i++) {
			uintptr_t target;
			bool call;

			live |= in[i];
			if (!live)
				continue;
			if (may_read(code[i], REGS_ARG)) {
				need = KP_OPT_SAVE_REGS;
				break;
			}
			target = branch_target(code[i], fn + 4 * i, &call);
			if (target && !call && target >= fn && target < fn + 4 * n) {
				size_t j = (target - fn) / 4;

				if (!in[j]) {
					in[j] = true;
					again |= j <= i;
				}
			}
			if (call || surely_writes(code[i], REGS_ARG) || ends_flow(code[i]))
				live = false;
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
	need = thread_pointer_stores(insns, n, fn) | regs_reads(insns, n, fn);
	for (size_t i = 0; i < n && need != NEEDS_ALL; i++) {
		need |= insn_needs(w, insns[i], fn + 4 * i, fn, fn + size);
		if (regs_named(insns[i]) & SCRATCH_REGS)
			need |= KP_OPT_SAVE_SCRATCH;
	}
	return need;
}
