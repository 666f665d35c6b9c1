/*
 * Does a function ever return to its caller?  A return probe replaces the
 * return address at the function's entry; on a function that never
 * returns that slot may hold anything else (argc, at the program's entry
 * point) and the instance is never given back.  The whole function is
 * decoded: it can return when it has a ret, a jump that leaves it (a tail
 * call, or a jump to its cold part) or an indirect jump (a tail call or a
 * switch, which cannot be told apart here).  Only a function decoded to
 * its end with none of these is proven not to return; anything that cannot
 * be decoded counts as returning.
 */
#include <stdlib.h>
#include <Zydis/Zydis.h>

#include "arch/arch.h"
#include "os/linux/memory.h"

#define MAX_FUNC (1u << 20)

/* Whether target lies in one of the n ranges [r[i][0], r[i][1]). */
static bool inside(const uintptr_t (*r)[2], int n, uintptr_t target)
{
	for (int i = 0; i < n; i++)
		if (target >= r[i][0] && target < r[i][1])
			return true;
	return false;
}

/* Whether the instruction at pc can take control out of the ranges. */
static bool leaves(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *ops,
		   uintptr_t pc, const uintptr_t (*r)[2], int n)
{
	ZyanU64 target;

	switch (in->meta.category) {
	case ZYDIS_CATEGORY_RET:
		return true;
	case ZYDIS_CATEGORY_UNCOND_BR:
	case ZYDIS_CATEGORY_COND_BR:
		if (ops[0].type != ZYDIS_OPERAND_TYPE_IMMEDIATE || !ops[0].imm.is_relative)
			return true;
		if (!ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(in, &ops[0], pc, &target)))
			return true;
		return !inside(r, n, (uintptr_t)target);
	default:
		/* iret, far returns: leave as well. */
		return in->mnemonic == ZYDIS_MNEMONIC_IRET || in->mnemonic == ZYDIS_MNEMONIC_IRETD ||
		       in->mnemonic == ZYDIS_MNEMONIC_IRETQ;
	}
}

/* Whether control cannot run past the instruction (a range's last). A
 * call there is taken as a call of a function that does not return: a
 * compiler ends a function with a call only then. */
static bool stops(const ZydisDecodedInstruction *in)
{
	switch (in->mnemonic) {
	case ZYDIS_MNEMONIC_JMP:
	case ZYDIS_MNEMONIC_CALL:
	case ZYDIS_MNEMONIC_HLT:
	case ZYDIS_MNEMONIC_UD0:
	case ZYDIS_MNEMONIC_UD1:
	case ZYDIS_MNEMONIC_UD2:
	case ZYDIS_MNEMONIC_INT3:
		return true;
	default:
		return false;
	}
}

/* Range i decoded to its end without a way out of the ranges. */
static bool range_stays(const ZydisDecoder *dec, const uintptr_t (*r)[2], int n, int i)
{
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	ZydisDecodedInstruction in;
	size_t size = r[i][1] - r[i][0], off = 0;
	uint8_t *code;
	bool stays = true;

	if (r[i][1] <= r[i][0] || size > MAX_FUNC)
		return false;
	code = malloc(size);
	if (!code)
		return false;
	if (arch_read_original(r[i][0], code, size)) {
		free(code);
		return false;
	}
	in.mnemonic = ZYDIS_MNEMONIC_INVALID;
	while (off < size && stays) {
		if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(dec, code + off, size - off, &in, ops)) ||
		    leaves(&in, ops, r[i][0] + off, r, n))
			stays = false;
		else
			off += in.length;
	}
	free(code);
	/* Running off the end is leaving too. */
	return stays && stops(&in);
}

bool arch_code_never_returns(const uintptr_t (*ranges)[2], int n)
{
	ZydisDecoder dec;

	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	for (int i = 0; i < n; i++)
		if (!range_stays(&dec, ranges, n, i))
			return false;
	return n > 0;
}
