/* Decoding and classification of probed instructions (Zydis). */
#include "arch/x86_64/insn.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <Zydis/Zydis.h>

#include "arch/x86_64/regs.h"

static ZydisDecoder decoder;
static bool decoder_ready;

static const ZydisDecoder *get_decoder(void)
{
	if (!decoder_ready) {
		ZydisDecoderInit(&decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
		decoder_ready = true;
	}
	return &decoder;
}

int insn_length(const uint8_t *bytes, size_t avail)
{
	ZydisDecodedInstruction in;

	if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(get_decoder(), NULL, bytes, avail, &in)))
		return -EILSEQ;
	return in.length;
}

/* Instructions that cannot run anywhere but at their own address, or that
 * a user process cannot execute at all. */
static const char *refusal(const ZydisDecodedInstruction *in)
{
	switch (in->mnemonic) {
	case ZYDIS_MNEMONIC_INT3:
	case ZYDIS_MNEMONIC_INT:
	case ZYDIS_MNEMONIC_INT1:
	case ZYDIS_MNEMONIC_INTO:
		return "software interrupt";
	case ZYDIS_MNEMONIC_HLT:
		return "hlt";
	case ZYDIS_MNEMONIC_IRET:
	case ZYDIS_MNEMONIC_IRETD:
	case ZYDIS_MNEMONIC_IRETQ:
	case ZYDIS_MNEMONIC_SYSRET:
	case ZYDIS_MNEMONIC_SYSENTER:
	case ZYDIS_MNEMONIC_SYSEXIT:
		return "privileged control transfer";
	case ZYDIS_MNEMONIC_UD0:
	case ZYDIS_MNEMONIC_UD1:
	case ZYDIS_MNEMONIC_UD2:
		return "undefined instruction";
	case ZYDIS_MNEMONIC_XBEGIN:
		return "transaction begin";
	default:
		break;
	}
	if (in->meta.category == ZYDIS_CATEGORY_IO ||
	    in->meta.category == ZYDIS_CATEGORY_IOSTRINGOP)
		return "port I/O";
	if (in->attributes & ZYDIS_ATTRIB_IS_PRIVILEGED)
		return "privileged instruction";
	if (in->meta.branch_type == ZYDIS_BRANCH_TYPE_FAR)
		return "far branch";
	return NULL;
}

static int reg_slot(ZydisRegister r)
{
	return regs_offset_of(ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r));
}

/* The r/m operand of jmp/call r/m64, evaluated later from pt_regs. */
static int analyze_indirect(struct arch_insn *ai, const ZydisDecodedOperand *op,
			    const char **why)
{
	struct ind_operand *o = &ai->ind;

	memset(o, 0, sizeof(*o));
	o->reg = o->base = o->index = -1;
	if (op->type == ZYDIS_OPERAND_TYPE_REGISTER) {
		o->reg = (int8_t)reg_slot(op->reg.value);
		if (o->reg < 0 || op->size != 64)
			goto bad;
		return 0;
	}
	if (op->type != ZYDIS_OPERAND_TYPE_MEMORY || op->size != 64)
		goto bad;
	o->is_mem = true;
	o->disp = op->mem.disp.has_displacement ? op->mem.disp.value : 0;
	o->scale = op->mem.scale;
	if (op->mem.segment == ZYDIS_REGISTER_FS)
		o->seg = 'f';
	else if (op->mem.segment == ZYDIS_REGISTER_GS)
		o->seg = 'g';
	if (op->mem.base == ZYDIS_REGISTER_RIP) {
		o->rip_rel = true;
	} else if (op->mem.base != ZYDIS_REGISTER_NONE) {
		o->base = (int8_t)reg_slot(op->mem.base);
		if (o->base < 0 || ZydisRegisterGetWidth(ZYDIS_MACHINE_MODE_LONG_64, op->mem.base) != 64)
			goto bad;
	}
	if (op->mem.index != ZYDIS_REGISTER_NONE) {
		o->index = (int8_t)reg_slot(op->mem.index);
		if (o->index < 0)
			goto bad;
	}
	return 0;
bad:
	*why = "unsupported indirect branch operand";
	return -EINVAL;
}

static int classify_branch(struct arch_insn *ai, uintptr_t addr,
			   const ZydisDecodedInstruction *in,
			   const ZydisDecodedOperand *ops, const char **why)
{
	const ZydisDecodedOperand *op = &ops[0];
	/* Zydis marks RIP-relative memory operands "relative" too: only a
	 * relative immediate makes a relative branch. */
	bool rel = op->type == ZYDIS_OPERAND_TYPE_IMMEDIATE && op->imm.is_relative;

	if (rel)
		ZydisCalcAbsoluteAddress(in, op, addr, (ZyanU64 *)&ai->target);
	switch (in->mnemonic) {
	case ZYDIS_MNEMONIC_JMP:
		ai->klass = rel ? IC_JMP_REL : IC_JMP_IND;
		return rel ? 0 : analyze_indirect(ai, op, why);
	case ZYDIS_MNEMONIC_CALL:
		ai->klass = rel ? IC_CALL_REL : IC_CALL_IND;
		if (rel)
			return 0;
		if (op->type == ZYDIS_OPERAND_TYPE_REGISTER && op->reg.value == ZYDIS_REGISTER_RSP) {
			*why = "call through rsp";
			return -EINVAL;
		}
		return analyze_indirect(ai, op, why);
	case ZYDIS_MNEMONIC_RET:
		ai->klass = IC_RET;
		if (op->type == ZYDIS_OPERAND_TYPE_IMMEDIATE && op->visibility == ZYDIS_OPERAND_VISIBILITY_EXPLICIT)
			ai->ret_imm = (uint16_t)op->imm.value.u;
		return 0;
	case ZYDIS_MNEMONIC_LOOP:
	case ZYDIS_MNEMONIC_LOOPE:
	case ZYDIS_MNEMONIC_LOOPNE:
	case ZYDIS_MNEMONIC_JRCXZ:
	case ZYDIS_MNEMONIC_JECXZ:
		ai->klass = IC_LOOP;
		ai->loop_op = in->opcode;
		ai->addr32 = in->attributes & ZYDIS_ATTRIB_HAS_ADDRESSSIZE;
		if (ai->addr32 && ai->loop_op != 0xe3) {
			*why = "loop with 32-bit address size";
			return -EINVAL;
		}
		return 0;
	default:
		ai->klass = IC_JCC;
		ai->cc = in->opcode & 0xf;
		return 0;
	}
}

static bool is_branch(const ZydisDecodedInstruction *in)
{
	return in->meta.category == ZYDIS_CATEGORY_UNCOND_BR ||
	       in->meta.category == ZYDIS_CATEGORY_COND_BR ||
	       in->meta.category == ZYDIS_CATEGORY_CALL ||
	       in->meta.category == ZYDIS_CATEGORY_RET;
}

int insn_analyze(struct arch_insn *ai, uintptr_t addr, const uint8_t *bytes,
		 size_t avail, const char **why)
{
	ZydisDecodedInstruction in;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	const char *no;

	*why = NULL;
	if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(get_decoder(), bytes, avail, &in, ops))) {
		*why = "undecodable";
		return -EILSEQ;
	}
	memset(ai, 0, sizeof(*ai));
	memcpy(ai->bytes, bytes, in.length);
	ai->len = in.length;
	no = refusal(&in);
	if (no) {
		*why = no;
		return -EINVAL;
	}
	if (in.mnemonic == ZYDIS_MNEMONIC_SYSCALL) {
		ai->klass = IC_SYSCALL;
		return 0;
	}
	if (is_branch(&in))
		return classify_branch(ai, addr, &in, ops, why);
	/* RIP-relative memory operands are relocated; a relative immediate
	 * outside the branches above is something we do not know. */
	for (int i = 0; i < in.operand_count; i++)
		if (ops[i].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[i].imm.is_relative) {
			*why = "relative immediate";
			return -EINVAL;
		}
	ai->klass = IC_PLAIN;
	return 0;
}

/* Offset and size of a RIP-relative displacement in the instruction, or
 * -1 when it has none. */
int insn_riprel_disp_offset(const struct arch_insn *ai)
{
	ZydisDecodedInstruction in;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];

	if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(get_decoder(), ai->bytes, ai->len, &in, ops)))
		return -1;
	for (int i = 0; i < in.operand_count; i++)
		if (ops[i].type == ZYDIS_OPERAND_TYPE_MEMORY && ops[i].mem.base == ZYDIS_REGISTER_RIP)
			return in.raw.disp.size == 32 ? in.raw.disp.offset : -1;
	return -1;
}
