/*
 * The A64 classifier: one ordered table of mask/value pairs, first match
 * wins, each row either a verdict (run out of line, refuse with a reason)
 * or a small decoder for an instruction that must be simulated.  Modelled
 * on what Linux's arch/arm64/kernel/probes/decode-insn.c singles out, with
 * the refusals of user space (section "The A64 decoder" of docs/design.md).
 *
 * Everything the table does not name runs out of line: an instruction that
 * neither reads the PC nor branches nor traps behaves the same at any
 * address, which keeps the table small and correct for extensions newer
 * than it.  The groups where a newer encoding could read the PC (branches,
 * literal loads) refuse what they do not know instead.
 */
#include "arch/arm64/insn.h"

#include <errno.h>
#include <stddef.h>

#if defined(__aarch64__)
#include "kprobes.h"	/* struct pt_regs */
#endif

/* A row's verdict when it has no decoder. */
typedef int (*a64_decode_fn)(uint32_t w, struct a64_insn *out);

struct a64_row {
	uint32_t mask, value;
	enum a64_insn_kind kind;
	const char *why;	/* REJECT */
	a64_decode_fn decode;	/* SIMULATE, or a row that looks deeper */
};

/* Bits lo..lo+n-1 of w. */
static inline uint32_t bits(uint32_t w, unsigned int lo, unsigned int n)
{
	return (w >> lo) & ((1u << n) - 1);
}

/* The n-bit field v, sign-extended. */
static inline int64_t sext(uint64_t v, unsigned int n)
{
	uint64_t m = 1ull << (n - 1);

	v &= (m << 1) - 1;
	return (int64_t)((v ^ m) - m);
}

static int set_reject(struct a64_insn *out, const char *why)
{
	out->kind = A64_INSN_REJECT;
	out->why = why;
	return -EINVAL;
}

static int set_simulate(struct a64_insn *out, enum a64_op op)
{
	out->kind = A64_INSN_SIMULATE;
	out->op = op;
	return 0;
}

/* ---- decoders of the simulated forms ---- */

/* ADR, ADRP: op(31) immlo(30:29) 10000 immhi(23:5) Rd. */
static int decode_adr(uint32_t w, struct a64_insn *out)
{
	int64_t imm = sext(bits(w, 5, 19) << 2 | bits(w, 29, 2), 21);

	out->rd = bits(w, 0, 5);
	if (bits(w, 31, 1)) {
		out->imm = imm * 4096;
		return set_simulate(out, A64_OP_ADRP);
	}
	out->imm = imm;
	return set_simulate(out, A64_OP_ADR);
}

/* B, BL: op(31) 00101 imm26. */
static int decode_b(uint32_t w, struct a64_insn *out)
{
	out->imm = sext(bits(w, 0, 26), 26) * 4;
	return set_simulate(out, bits(w, 31, 1) ? A64_OP_BL : A64_OP_B);
}

/* B.cond, BC.cond: 0101010 0 imm19 o0 cond (BC only hints at the branch
 * being consistent, which simulation does not care about). */
static int decode_bcond(uint32_t w, struct a64_insn *out)
{
	out->imm = sext(bits(w, 5, 19), 19) * 4;
	out->cond = bits(w, 0, 4);
	return set_simulate(out, A64_OP_BCOND);
}

/* CBZ, CBNZ: sf 011010 op imm19 Rt. */
static int decode_cbz(uint32_t w, struct a64_insn *out)
{
	out->sf = bits(w, 31, 1);
	out->negate = bits(w, 24, 1);
	out->imm = sext(bits(w, 5, 19), 19) * 4;
	out->rd = bits(w, 0, 5);
	return set_simulate(out, A64_OP_CBZ);
}

/* TBZ, TBNZ: b5 011011 op b40 imm14 Rt. */
static int decode_tbz(uint32_t w, struct a64_insn *out)
{
	out->bit = bits(w, 31, 1) << 5 | bits(w, 19, 5);
	out->negate = bits(w, 24, 1);
	out->imm = sext(bits(w, 5, 14), 14) * 4;
	out->rd = bits(w, 0, 5);
	return set_simulate(out, A64_OP_TBZ);
}

/*
 * Literal loads: opc(31:30) 011 V 00 imm19 Rt.  The general-register forms
 * are simulated; the SIMD&FP forms (LDR St/Dt/Qt) load a vector register,
 * which struct pt_regs does not hold and the signal frame's copy of which
 * the hit path does not rewrite, so they are refused.
 */
static int decode_literal(uint32_t w, struct a64_insn *out)
{
	unsigned int opc = bits(w, 30, 2);

	if (bits(w, 26, 1))
		return set_reject(out, opc == 3 ? "unallocated literal load" :
				  "SIMD&FP literal load: the vector register is not in pt_regs");
	out->imm = sext(bits(w, 5, 19), 19) * 4;
	out->rd = bits(w, 0, 5);
	if (opc == 3)
		return set_simulate(out, A64_OP_PRFM_LIT);
	out->size = opc == 1 ? 8 : 4;
	out->sign = opc == 2;
	return set_simulate(out, A64_OP_LDR_LIT);
}

/* BR, BLR, RET: 1101011 0 0 opc(22:21) 11111 000000 Rn 00000. */
static int decode_br(uint32_t w, struct a64_insn *out)
{
	static const enum a64_op ops[] = { A64_OP_BR, A64_OP_BLR, A64_OP_RET };

	out->rn = bits(w, 5, 5);
	return set_simulate(out, ops[bits(w, 21, 2)]);
}

/*
 * The load/store exclusive group: size(31:30) 001000 o2(23) L(22) o1(21)
 * Rs o0(15) Rt2 Rn Rt.  o2 = 0 is exclusive (LDXR, STXR, LDAXR, STLXR, and
 * with o1 = 1 and size 1x LDXP, STXP, LDAXP, STLXP) except CASP (o1 = 1,
 * size 0x); o2 = 1 is LDAR/STLR/LDLAR/STLLR and CAS: ordinary accesses.
 */
static bool is_exclusive(uint32_t w)
{
	if ((w & 0x3f000000) != 0x08000000 || bits(w, 23, 1))
		return false;
	return !bits(w, 21, 1) || bits(w, 31, 1);
}

static int decode_ldst_excl(uint32_t w, struct a64_insn *out)
{
	if (is_exclusive(w))
		return set_reject(out, "exclusive load/store: a trap between the pair "
				  "clears the monitor and the store never succeeds");
	out->kind = A64_INSN_XOL;
	return 0;
}

/*
 * MSR (register): 1101010100 0 1 o0 op1 CRn CRm op2 Rt.  EL0 may write only
 * op1 = 3 registers; among them CRn = 4, CRm = 2 are PSTATE fields (DAIF,
 * SVCR, DIT, SSBS, TCO), which change how the code after them executes —
 * all but NZCV (op2 = 0), which the hit path carries through like any flag
 * write.  NZCV, FPCR, FPSR, TPIDR_EL0 and the rest run out of line.
 */
static int decode_msr_reg(uint32_t w, struct a64_insn *out)
{
	unsigned int op1 = bits(w, 16, 3), crn = bits(w, 12, 4);
	unsigned int crm = bits(w, 8, 4), op2 = bits(w, 5, 3);

	if (op1 != 3)
		return set_reject(out, "MSR to a system register EL0 cannot write");
	if (crn == 4 && crm == 2 && op2 != 0)
		return set_reject(out, "MSR to a PSTATE field changes the execution state");
	out->kind = A64_INSN_XOL;
	return 0;
}

/*
 * The table, first match wins.  Masks and values are checked against the
 * assembler's encodings by tests/test_a64_insn.c.
 */
#define XOL(m, v)		{ m, v, A64_INSN_XOL, NULL, NULL }
#define REJECT(m, v, why)	{ m, v, A64_INSN_REJECT, why, NULL }
#define DECODE(m, v, fn)	{ m, v, A64_INSN_SIMULATE, NULL, fn }

static const struct a64_row a64_table[] = {
	/* Exception generation: SVC, HVC, SMC, BRK, HLT, DCPS1-3. */
	REJECT(0xffe0001f, 0xd4000001, "SVC: a thread in the system call would "
	       "sit in the out-of-line slot"),
	REJECT(0xffe0001e, 0xd4000002, "HVC/SMC: not for EL0"),
	REJECT(0xffe0001f, 0xd4200000, "BRK: another debugger's breakpoint"),
	REJECT(0xffe0001f, 0xd4400000, "HLT: a halting-debug breakpoint"),
	REJECT(0xff000000, 0xd4000000, "exception-generating or unallocated encoding"),
	/*
	 * Hints run out of line, the unallocated ones being NOPs by
	 * definition.  PACIASP/AUTIASP (and PACIBSP/AUTIBSP) sign or check
	 * X30 with SP as the modifier, and SP is the same in the slot as at
	 * the probe; BTI is a NOP when it is not the target of an indirect
	 * branch, which the slot never is (entered by the signal return);
	 * XPACLRI, PACIA1716 and the rest read only registers.
	 */
	XOL(0xfffff01f, 0xd503201f),
	/* CFINV, XAFLAG, AXFLAG: in the PSTATE group, but they only rewrite
	 * NZCV, which the hit path carries through. */
	XOL(0xffffff9f, 0xd500401f),
	/* MSR (immediate): PSTATE fields (DAIFSet, SPSel, PAN, UAO, DIT,
	 * SSBS, TCO, SMSTART/SMSTOP). */
	REJECT(0xfff8f01f, 0xd500401f, "MSR to a PSTATE field changes the execution state"),
	{ 0xfff00000, 0xd5100000, A64_INSN_XOL, NULL, decode_msr_reg },
	/* Barriers, CLREX, SYS/SYSL (DC, IC, ...), MRS: read no PC. */
	XOL(0xff000000, 0xd5000000),
	/* Branch (register).  ERET and DRPS leave EL0's world. */
	REJECT(0xffff0000, 0xd69f0000, "ERET: exception return"),
	REJECT(0xffff0000, 0xd6bf0000, "DRPS: debug state"),
	DECODE(0xfffffc1f, 0xd61f0000, decode_br),	/* BR */
	DECODE(0xfffffc1f, 0xd63f0000, decode_br),	/* BLR */
	DECODE(0xfffffc1f, 0xd65f0000, decode_br),	/* RET */
	/*
	 * BRAA, BRAAZ, BLRAA, BLRAAZ, RETAA and their B-key forms authenticate
	 * the target with a key only the CPU holds: simulating them from C
	 * would branch to an unchecked pointer, and out of line they branch
	 * away from the slot.  Compilers emit "autiasp; ret" for
	 * -mbranch-protection=pac-ret on armv8.0 targets, so these appear in
	 * code built for armv8.3-a and later only.
	 */
	REJECT(0xfffffbff, 0xd61f0bff, "BRAAZ/BRABZ: pointer-authenticated branch"),
	REJECT(0xfffffbff, 0xd63f0bff, "BLRAAZ/BLRABZ: pointer-authenticated branch"),
	REJECT(0xfffffbff, 0xd65f0bff, "RETAA/RETAB: pointer-authenticated return"),
	REJECT(0xfffff800, 0xd71f0800, "BRAA/BRAB: pointer-authenticated branch"),
	REJECT(0xfffff800, 0xd73f0800, "BLRAA/BLRAB: pointer-authenticated branch"),
	REJECT(0xfe000000, 0xd6000000, "unallocated branch (register)"),
	/* Immediate branches. */
	DECODE(0x7c000000, 0x14000000, decode_b),	/* B, BL */
	DECODE(0xff000000, 0x54000000, decode_bcond),	/* B.cond, BC.cond */
	DECODE(0x7e000000, 0x34000000, decode_cbz),	/* CBZ, CBNZ */
	DECODE(0x7e000000, 0x36000000, decode_tbz),	/* TBZ, TBNZ */
	/* Anything else in the branch/system group may branch: refuse. */
	REJECT(0x1c000000, 0x14000000, "unallocated encoding in the branch group"),
	/* Loads and stores. */
	DECODE(0x3b000000, 0x18000000, decode_literal),
	REJECT(0x3b200c00, 0x19000400, "memory copy/set (CPY*, SET*): the prologue, "
	       "main and epilogue must run consecutively"),
	{ 0x3f000000, 0x08000000, A64_INSN_XOL, NULL, decode_ldst_excl },
	/* Data processing (immediate): PC-relative addressing. */
	DECODE(0x1f000000, 0x10000000, decode_adr),
	/* op0 = 0000: UDF and reserved (bit 31 clear), SME (bit 31 set). */
	REJECT(0x9e000000, 0x00000000, "UDF or reserved encoding"),
	REJECT(0x1e000000, 0x02000000, "unallocated encoding"),
	REJECT(0x1e000000, 0x06000000, "unallocated encoding"),
};

int a64_insn_decode(uint32_t word, struct a64_insn *out)
{
	*out = (struct a64_insn){ .word = word, .kind = A64_INSN_XOL };
	for (size_t i = 0; i < sizeof(a64_table) / sizeof(a64_table[0]); i++) {
		const struct a64_row *row = &a64_table[i];

		if ((word & row->mask) != row->value)
			continue;
		if (row->decode)
			return row->decode(word, out);
		if (row->kind == A64_INSN_REJECT)
			return set_reject(out, row->why);
		return 0;
	}
	/* Data processing, loads and stores, SIMD&FP, SVE, SME: no PC read. */
	return 0;
}

/* ---- simulation ---- */

/* Register n of a form where 31 is the zero register. */
static uint64_t read_xzr(const struct pt_regs *regs, unsigned int n)
{
	return n == 31 ? 0 : regs->regs[n];
}

static void write_xzr(struct pt_regs *regs, unsigned int n, uint64_t v)
{
	if (n != 31)
		regs->regs[n] = v;
}

/* NZCV in pstate bits 31..28, as Linux's PSR_N_BIT.. PSR_V_BIT. */
bool a64_condition_holds(unsigned int cond, uint64_t pstate)
{
	bool n = pstate >> 31 & 1, z = pstate >> 30 & 1;
	bool c = pstate >> 29 & 1, v = pstate >> 28 & 1;
	bool r;

	switch (cond >> 1) {
	case 0: r = z; break;			/* EQ / NE */
	case 1: r = c; break;			/* CS / CC */
	case 2: r = n; break;			/* MI / PL */
	case 3: r = v; break;			/* VS / VC */
	case 4: r = c && !z; break;		/* HI / LS */
	case 5: r = n == v; break;		/* GE / LT */
	case 6: r = n == v && !z; break;	/* GT / LE */
	default: return true;			/* AL, and NV which is AL too */
	}
	return (cond & 1) ? !r : r;
}

/*
 * Where a branch to register value v goes.  Linux enables top-byte-ignore
 * for user addresses (TCR_EL1.TBI0), and for instruction addresses too
 * (TBID0 clear): a branch to a tagged pointer of the lower half lands on
 * the address with its top byte cleared (the Arm ARM's BranchAddr()).
 * Upper-half addresses (bit 55 set) are kernel ones, TBI1 is off, and the
 * branch faults at v as it is.
 */
static uint64_t branch_addr(uint64_t v)
{
	return (v >> 55 & 1) ? v : v & 0x00ffffffffffffffull;
}

static void branch_if(struct pt_regs *regs, bool taken, int64_t offset)
{
	regs->pc = taken ? regs->pc + (uint64_t)offset : regs->pc + 4;
}

static int simulate_ldr_literal(const struct a64_insn *in, struct pt_regs *regs,
				a64_read_fn read)
{
	uint64_t addr = regs->pc + (uint64_t)in->imm;
	uint64_t v = 0;
	uint32_t w;

	if (in->size == 4) {
		if (read(&w, (const void *)(uintptr_t)addr, 4))
			return -EFAULT;
		v = in->sign ? (uint64_t)(int64_t)(int32_t)w : w;
	} else if (read(&v, (const void *)(uintptr_t)addr, 8)) {
		return -EFAULT;
	}
	write_xzr(regs, in->rd, v);
	regs->pc += 4;
	return 0;
}

static int simulate_one(const struct a64_insn *in, struct pt_regs *regs,
			a64_read_fn read)
{
	uint64_t pc = regs->pc, v;

	switch (in->op) {
	case A64_OP_ADR:
		write_xzr(regs, in->rd, pc + (uint64_t)in->imm);
		break;
	case A64_OP_ADRP:
		write_xzr(regs, in->rd, (pc & ~0xfffull) + (uint64_t)in->imm);
		break;
	case A64_OP_BL:
		regs->regs[30] = pc + 4;
		/* fall through */
	case A64_OP_B:
		branch_if(regs, true, in->imm);
		return 0;
	case A64_OP_BCOND:
		branch_if(regs, a64_condition_holds(in->cond, regs->pstate), in->imm);
		return 0;
	case A64_OP_CBZ:
		v = read_xzr(regs, in->rd);
		if (!in->sf)
			v = (uint32_t)v;
		branch_if(regs, (v == 0) != in->negate, in->imm);
		return 0;
	case A64_OP_TBZ:
		v = read_xzr(regs, in->rd) >> in->bit & 1;
		branch_if(regs, (v == 0) != in->negate, in->imm);
		return 0;
	case A64_OP_LDR_LIT:
		return simulate_ldr_literal(in, regs, read);
	case A64_OP_PRFM_LIT:
		break;	/* a hint: never faults, changes nothing */
	case A64_OP_BLR:
		v = read_xzr(regs, in->rn);	/* before X30 changes: BLR X30 */
		regs->regs[30] = pc + 4;
		regs->pc = branch_addr(v);
		return 0;
	case A64_OP_BR:
	case A64_OP_RET:
		regs->pc = branch_addr(read_xzr(regs, in->rn));
		return 0;
	default:
		return -EINVAL;
	}
	regs->pc = pc + 4;
	return 0;
}

/* PSTATE.BTYPE (bits 11:10): what the landing pad of an indirect branch
 * is checked against. */
#define PSTATE_BTYPE (3ull << 10)

/*
 * After the simulated instruction, BTYPE is zero, as after any instruction
 * but an indirect branch: a stale value from the branch that reached the
 * probe must not reach the next one.  The simulated BR and BLR leave it
 * zero too, so the target's landing pad is not checked: setting it would
 * need to know whether the probed page is guarded, and a wrong guess would
 * raise a SIGILL the unprobed program never sees.
 */
int a64_insn_simulate_read(const struct a64_insn *in, struct pt_regs *regs,
			   a64_read_fn read)
{
	int ret;

	if (in->kind != A64_INSN_SIMULATE)
		return -EINVAL;
	ret = simulate_one(in, regs, read);
	if (ret == 0)
		regs->pstate &= ~PSTATE_BTYPE;
	return ret;
}

int a64_insn_simulate(const struct a64_insn *in, struct pt_regs *regs)
{
	return a64_insn_simulate_read(in, regs, kp_copy_nofault);
}

/* ---- exclusive sequences ---- */

/* The load and the store of an exclusive pair (o2 = 0; L tells which). */
static bool is_load_exclusive(uint32_t w)
{
	return is_exclusive(w) && bits(w, 22, 1);
}

static bool is_store_exclusive(uint32_t w)
{
	return is_exclusive(w) && !bits(w, 22, 1);
}

bool a64_in_exclusive_sequence(const uint32_t *code, size_t n, size_t idx)
{
	size_t stop = idx > A64_EXCLUSIVE_WINDOW ? idx - A64_EXCLUSIVE_WINDOW : 0;

	if (idx >= n)
		return false;
	/* Back from the instruction before idx: the nearer of a store
	 * (the sequence ended) and a load (idx is inside it) decides. */
	for (size_t i = idx; i > stop; i--) {
		if (is_store_exclusive(code[i - 1]))
			return false;
		if (is_load_exclusive(code[i - 1]))
			return true;
	}
	return false;
}
