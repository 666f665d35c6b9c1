/* x86-64 instruction analysis for probing: what one probed instruction is,
 * how it runs out of line, and where its slot is. */
#ifndef KP_X86_INSN_H
#define KP_X86_INSN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KP_MAX_INSN 15

/* How an instruction behaves when moved out of line. */
enum insn_class {
	IC_PLAIN,	/* falls through; RIP-relative operand re-targeted */
	IC_SYSCALL,	/* syscall: falls through, rcx must be fixed up */
	IC_JMP_REL,	/* jmp rel8/rel32 */
	IC_JCC,		/* jcc rel8/rel32 */
	IC_LOOP,	/* loop, loope, loopne, jrcxz, jecxz (rel8) */
	IC_CALL_REL,	/* call rel32 */
	IC_RET,		/* ret, ret imm16 */
	IC_JMP_IND,	/* jmp r/m64 */
	IC_CALL_IND,	/* call r/m64 */
};

/* A register or memory operand of an indirect branch, evaluated on the hit
 * path from pt_regs (offsets into struct pt_regs, -1 = none). */
struct ind_operand {
	bool is_mem;
	int8_t reg;		/* register operand */
	int8_t base, index;	/* memory operand */
	uint8_t scale;
	uint8_t seg;		/* 0, or 'f'/'g' for fs/gs */
	bool rip_rel;		/* base is rip: disp relative to the next insn */
	int64_t disp;
};

/* Exit of a slot's post code: the int3 at slot offset `off` resumes at
 * `resume` (or the indirect operand's target if `ind`). */
struct slot_exit {
	uint8_t off;
	bool ind;
	uintptr_t resume;
};

struct xol_slot;

struct arch_insn {
	uint8_t bytes[KP_MAX_INSN];	/* original instruction */
	uint8_t len;
	uint8_t klass;			/* enum insn_class */
	uint8_t cc;			/* IC_JCC: condition code 0..15 */
	uint8_t loop_op;		/* IC_LOOP: 0xe0..0xe3 */
	bool addr32;			/* 0x67 prefix (jecxz) */
	uint16_t ret_imm;		/* IC_RET: bytes popped after the return address */
	uintptr_t target;		/* relative branches: absolute target */
	struct ind_operand ind;		/* IC_JMP_IND, IC_CALL_IND, (IC_RET: none) */
	struct xol_slot *slot;		/* out-of-line code */
	struct arch_opt *opt;		/* jump optimization, once analysed */
};

#define OPT_MAX_COPIED 5

/* Jump optimization of one probepoint: the replaced region, its detour. */
struct arch_opt {
	bool ok;			/* the region can take a jump */
	const char *why;		/* else: why not */
	bool entry;			/* at a function entry: ABI-live state only */
	bool flags_dead;		/* the code after the probe sets every status
					 * flag before it reads one */
	uint8_t region_len;		/* bytes the jmp replaces */
	uint8_t copied_len;		/* of which instructions to copy */
	uint8_t ncopied;
	uint8_t orig[KP_MAX_INSN + 5];	/* original bytes of the region */
	uintptr_t detour;		/* detour unit, 0 until built */
	bool jumped;			/* bytes 1..4 hold the jump's rel32 */
	uint8_t copied_off;		/* copied instructions start in the detour */
	uint8_t insn_off[OPT_MAX_COPIED];	/* each copied instruction ... */
	uint8_t insn_orig[OPT_MAX_COPIED];	/* ... in the detour and in the region */
};

/* Decodes the instruction at addr from bytes (original bytes, armed
 * breakpoints already removed) and classifies it.  -EINVAL when it cannot
 * be probed, with *why set to a short reason. */
int insn_analyze(struct arch_insn *ai, uintptr_t addr, const uint8_t *bytes,
		 size_t avail, const char **why);

/* Length of the instruction at bytes, or a negative errno. */
int insn_length(const uint8_t *bytes, size_t avail);

/* Offset of the disp32 of a RIP-relative operand, or -1 when there is none. */
int insn_riprel_disp_offset(const struct arch_insn *ai);

/* Whether `cc` holds for these flags (jcc condition encoding). */
static inline bool insn_cond_true(unsigned int cc, unsigned long fl)
{
	bool cf = fl & 0x1, pf = fl & 0x4, zf = fl & 0x40, sf = fl & 0x80, of = fl & 0x800;
	bool r;

	switch (cc >> 1) {
	case 0: r = of; break;
	case 1: r = cf; break;
	case 2: r = zf; break;
	case 3: r = cf || zf; break;
	case 4: r = sf; break;
	case 5: r = pf; break;
	case 6: r = sf != of; break;
	default: r = zf || sf != of; break;
	}
	return (cc & 1) ? !r : r;
}

#endif
