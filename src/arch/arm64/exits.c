/*
 * Where a function returns: its exit sites (kprobes_exit_sites()), arm64.
 *
 * A probe here replaces one instruction word, so no run of instructions
 * is needed: each way out is its own site, a RET (of any form: RETAA and
 * RETAB too) where the state is exactly the return's, or a B out of the
 * function (a tail call), hit before it branches.  Every path to a way
 * out passes its word, once.  The function has no sites (-EOPNOTSUPP)
 * when a way out cannot be one: a conditional branch out of the function
 * (B.cond, CBZ, TBZ), an indirect branch (BR, BRAA...: a switch or a
 * tail call, not told apart), ERET.  Unlike x86-64's analysis this one
 * does not look for code elsewhere branching into the function's middle
 * (a tail shared with another function would count that one's returns);
 * compiled code branches into a function only from its own cold part,
 * which it reached by a branch out, and is refused for that.
 */
#include <errno.h>
#include <stdlib.h>

#include "arch/arch.h"
#include "arch/arm64/insn.h"

#define MAX_FUNC (256u * 1024)

/* The class "unconditional branch (register)": BR, BLR, RET, ERET, DRPS
 * and their pointer-authenticating forms; opc in bits 24-21. */
#define UBR_REG_MASK	0xfe000000u
#define UBR_REG_BITS	0xd6000000u
#define UBR_OPC(w)	(((w) >> 21) & 0xfu)

enum flow { FLOW_ON, FLOW_EXIT, FLOW_TAIL, FLOW_REFUSE };

static bool inside(uintptr_t v, uintptr_t func, size_t size)
{
	return v >= func && v - func < size;
}

static enum flow flow_of(uint32_t w, uintptr_t pc, uintptr_t func, size_t size)
{
	struct a64_insn in;

	if ((w & UBR_REG_MASK) == UBR_REG_BITS) {
		switch (UBR_OPC(w)) {
		case 1:		/* BLR */
		case 9:		/* BLRAA, BLRAB */
			return FLOW_ON;
		case 2:		/* RET, RETAA, RETAB */
			return FLOW_EXIT;
		default:	/* BR, BRAA..., ERET, DRPS */
			return FLOW_REFUSE;
		}
	}
	/* a word that does not decode (refused: exclusives, BRK, data) does
	 * not branch */
	if (a64_insn_decode(w, &in) || in.kind != A64_INSN_SIMULATE)
		return FLOW_ON;
	switch (in.op) {
	case A64_OP_B:
		return inside(pc + (uintptr_t)in.imm, func, size) ? FLOW_ON : FLOW_TAIL;
	case A64_OP_BCOND:
	case A64_OP_CBZ:
	case A64_OP_TBZ:
		return inside(pc + (uintptr_t)in.imm, func, size) ? FLOW_ON : FLOW_REFUSE;
	default:
		return FLOW_ON;
	}
}

int arch_exit_sites(uintptr_t func, size_t size, size_t pad, uintptr_t *sites, int max,
		    bool *tail)
{
	uint32_t *code;
	int n = 0, err = 0;

	(void)pad;
	*tail = false;
	if ((func & 3) || !size || size > MAX_FUNC)
		return -EOPNOTSUPP;
	size &= ~(size_t)3;
	code = malloc(size);
	if (!code)
		return -ENOMEM;
	if (arch_read_original(func, (uint8_t *)code, size)) {
		free(code);
		return -EFAULT;
	}
	for (size_t i = 0; i < size / 4 && !err; i++) {
		uintptr_t pc = func + 4 * i;

		switch (flow_of(code[i], pc, func, size)) {
		case FLOW_ON:
			continue;
		case FLOW_REFUSE:
			err = -EOPNOTSUPP;
			continue;
		case FLOW_TAIL:
			*tail = true;
			break;
		case FLOW_EXIT:
			break;
		}
		if (n < max)
			sites[n] = pc;
		n++;
	}
	free(code);
	if (err)
		return err;
	return n > max ? -E2BIG : n;
}
