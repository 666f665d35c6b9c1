/*
 * Which handlers can change vector or x87 registers, r8-r11 or errno, and
 * which can look at their struct pt_regs?  A handler that provably cannot
 * (decoded, with everything it calls directly) lets an optimized probe
 * skip saving that state — the difference between a few nanoseconds and a
 * hundred.  Anything not decodable, indirect calls, or calls leaving known
 * functions count as "may do everything"; errno lives in thread-local
 * storage, so any store through %fs counts for it; the pt_regs pointer
 * arrives in %rsi, so any read of %rsi counts for it, wherever it is (a
 * callee reading its own second argument included).
 */
#include <Zydis/Zydis.h>

#include "arch/arch.h"
#include "core/arch_api.h"

#define NEEDS_ALL KP_OPT_SAVE_ALL

static bool writes_tls(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *ops)
{
	for (int i = 0; i < in->operand_count; i++)
		if (ops[i].type == ZYDIS_OPERAND_TYPE_MEMORY &&
		    (ops[i].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) &&
		    (ops[i].mem.segment == ZYDIS_REGISTER_FS || ops[i].mem.segment == ZYDIS_REGISTER_GS))
			return true;
	return false;
}

static bool is_rsi(ZydisRegister r)
{
	return r != ZYDIS_REGISTER_NONE &&
	       ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r) == ZYDIS_REGISTER_RSI;
}

/* Whether the instruction reads %rsi, explicitly or not, as a value or in
 * an address. */
static bool reads_rsi(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *ops)
{
	for (int i = 0; i < in->operand_count; i++) {
		if (ops[i].type == ZYDIS_OPERAND_TYPE_MEMORY &&
		    (is_rsi(ops[i].mem.base) || is_rsi(ops[i].mem.index)))
			return true;
		if (ops[i].type == ZYDIS_OPERAND_TYPE_REGISTER && is_rsi(ops[i].reg.value) &&
		    (ops[i].actions & ZYDIS_OPERAND_ACTION_MASK_READ))
			return true;
	}
	return false;
}

static bool is_r8_r11(ZydisRegister r)
{
	ZydisRegister big = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r);

	return big >= ZYDIS_REGISTER_R8 && big <= ZYDIS_REGISTER_R11;
}

/* Whether the instruction writes r8, r9, r10 or r11 (any part of one),
 * explicitly or not (syscall: r11). */
static bool writes_r8_r11(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *ops)
{
	if (in->mnemonic == ZYDIS_MNEMONIC_SYSCALL)
		return true;
	for (int i = 0; i < in->operand_count; i++)
		if (ops[i].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    (ops[i].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) && is_r8_r11(ops[i].reg.value))
			return true;
	return false;
}

static bool touches_vector(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *ops)
{
	if (in->attributes & (ZYDIS_ATTRIB_FPU_STATE_CW | ZYDIS_ATTRIB_XMM_STATE_CW))
		return true;
	for (int i = 0; i < in->operand_count; i++) {
		ZydisRegisterClass c;

		if (ops[i].type != ZYDIS_OPERAND_TYPE_REGISTER ||
		    !(ops[i].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE))
			continue;
		c = ZydisRegisterGetClass(ops[i].reg.value);
		if (c == ZYDIS_REGCLASS_XMM || c == ZYDIS_REGCLASS_YMM || c == ZYDIS_REGCLASS_ZMM ||
		    c == ZYDIS_REGCLASS_X87 || c == ZYDIS_REGCLASS_MMX || c == ZYDIS_REGCLASS_MASK ||
		    c == ZYDIS_REGCLASS_TMM)
			return true;
	}
	return in->meta.category == ZYDIS_CATEGORY_X87_ALU || in->meta.isa_ext == ZYDIS_ISA_EXT_X87;
}

/* What one instruction of the function [lo, hi) may change. */
static uint8_t insn_needs(struct kp_code_walk *w, const ZydisDecodedInstruction *in,
			  const ZydisDecodedOperand *ops, uintptr_t pc, uintptr_t lo, uintptr_t hi)
{
	uint8_t need = 0;
	uintptr_t target;

	if (touches_vector(in, ops))
		need |= KP_OPT_SAVE_VECTOR;
	if (writes_tls(in, ops) || in->mnemonic == ZYDIS_MNEMONIC_SYSCALL)
		need |= KP_OPT_SAVE_ERRNO;
	if (writes_r8_r11(in, ops))
		need |= KP_OPT_SAVE_SCRATCH;
	/* The kernel reads %rsi as an argument. */
	if (reads_rsi(in, ops) || in->mnemonic == ZYDIS_MNEMONIC_SYSCALL)
		need |= KP_OPT_SAVE_REGS;
	if (in->meta.category != ZYDIS_CATEGORY_CALL && in->meta.category != ZYDIS_CATEGORY_UNCOND_BR &&
	    in->meta.category != ZYDIS_CATEGORY_COND_BR)
		return need;
	if (ops[0].type != ZYDIS_OPERAND_TYPE_IMMEDIATE || !ops[0].imm.is_relative)
		return NEEDS_ALL;	/* indirect: unknown code */
	ZydisCalcAbsoluteAddress(in, &ops[0], pc, (ZyanU64 *)&target);
	if (target >= lo && target < hi)
		return need;	/* inside this function: decoded anyway */
	return need | kp_code_walk_call(w, target);
}

uint8_t arch_code_scan(struct kp_code_walk *w, const void *code, size_t size, uintptr_t fn)
{
	ZydisDecoder dec;
	ZydisDecodedInstruction in;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	uint8_t need = 0;

	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	for (size_t off = 0; off < size && need != NEEDS_ALL;) {
		if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, (const uint8_t *)code + off, size - off,
							 &in, ops)))
			return NEEDS_ALL;
		need |= insn_needs(w, &in, ops, fn + off, fn, fn + size);
		off += in.length;
	}
	return need;
}
