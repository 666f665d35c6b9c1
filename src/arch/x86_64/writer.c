/* x86-64 code writer: every instruction goes through the Zydis encoder. */
#include "arch/x86_64/writer.h"

#include <string.h>
#include <Zydis/Zydis.h>

void xw_init(struct xw *w, uint8_t *buf, size_t cap, uintptr_t pc0)
{
	w->buf = buf;
	w->len = 0;
	w->cap = cap;
	w->pc0 = pc0;
	w->err = false;
}

void xw_bytes(struct xw *w, const void *p, size_t n)
{
	if (w->err || w->len + n > w->cap) {
		w->err = true;
		return;
	}
	memcpy(w->buf + w->len, p, n);
	w->len += n;
}

static void req_init(ZydisEncoderRequest *r, ZydisMnemonic m)
{
	memset(r, 0, sizeof(*r));
	r->machine_mode = ZYDIS_MACHINE_MODE_LONG_64;
	r->mnemonic = m;
}

static void emit(struct xw *w, ZydisEncoderRequest *r)
{
	uint8_t tmp[ZYDIS_MAX_INSTRUCTION_LENGTH];
	ZyanUSize n = sizeof(tmp);

	if (w->err)
		return;
	if (!ZYAN_SUCCESS(ZydisEncoderEncodeInstructionAbsolute(r, tmp, &n, xw_pc(w)))) {
		w->err = true;
		return;
	}
	xw_bytes(w, tmp, n);
}

static void set_reg(ZydisEncoderOperand *o, ZydisRegister reg)
{
	o->type = ZYDIS_OPERAND_TYPE_REGISTER;
	o->reg.value = reg;
}

static void set_imm(ZydisEncoderOperand *o, uint64_t v)
{
	o->type = ZYDIS_OPERAND_TYPE_IMMEDIATE;
	o->imm.u = v;
}

void xw_int3(struct xw *w)
{
	ZydisEncoderRequest r;

	req_init(&r, ZYDIS_MNEMONIC_INT3);
	emit(w, &r);
}

static bool rel32_reaches(uintptr_t from_end, uintptr_t to)
{
	int64_t d = (int64_t)(to - from_end);

	return d >= INT32_MIN && d <= INT32_MAX;
}

size_t xw_jmp_len(uintptr_t from, uintptr_t to)
{
	return rel32_reaches(from + 5, to) ? 5 : 14;
}

void xw_jmp(struct xw *w, uintptr_t target)
{
	ZydisEncoderRequest r;

	req_init(&r, ZYDIS_MNEMONIC_JMP);
	r.operand_count = 1;
	if (rel32_reaches(xw_pc(w) + 5, target)) {
		r.branch_type = ZYDIS_BRANCH_TYPE_NEAR;
		r.branch_width = ZYDIS_BRANCH_WIDTH_32;
		set_imm(&r.operands[0], target);
		emit(w, &r);
		return;
	}
	/* jmp *0(%rip) followed by the 8-byte target */
	r.operands[0].type = ZYDIS_OPERAND_TYPE_MEMORY;
	r.operands[0].mem.base = ZYDIS_REGISTER_RIP;
	r.operands[0].mem.size = 8;
	r.operands[0].mem.displacement = (int64_t)(xw_pc(w) + 6);
	emit(w, &r);
	xw_bytes(w, &target, 8);
}

static const ZydisMnemonic jcc_mnemonic[16] = {
	ZYDIS_MNEMONIC_JO, ZYDIS_MNEMONIC_JNO, ZYDIS_MNEMONIC_JB, ZYDIS_MNEMONIC_JNB,
	ZYDIS_MNEMONIC_JZ, ZYDIS_MNEMONIC_JNZ, ZYDIS_MNEMONIC_JBE, ZYDIS_MNEMONIC_JNBE,
	ZYDIS_MNEMONIC_JS, ZYDIS_MNEMONIC_JNS, ZYDIS_MNEMONIC_JP, ZYDIS_MNEMONIC_JNP,
	ZYDIS_MNEMONIC_JL, ZYDIS_MNEMONIC_JNL, ZYDIS_MNEMONIC_JLE, ZYDIS_MNEMONIC_JNLE,
};

static void short_branch(struct xw *w, ZydisMnemonic m, ZydisAddressSizeHint ash,
			 uintptr_t target)
{
	ZydisEncoderRequest r;

	req_init(&r, m);
	r.branch_type = ZYDIS_BRANCH_TYPE_SHORT;
	r.branch_width = ZYDIS_BRANCH_WIDTH_8;
	r.address_size_hint = ash;
	r.operand_count = 1;
	set_imm(&r.operands[0], target);
	emit(w, &r);
}

void xw_jcc_short(struct xw *w, unsigned int cc, uintptr_t target)
{
	short_branch(w, jcc_mnemonic[cc & 15], ZYDIS_ADDRESS_SIZE_HINT_NONE, target);
}

void xw_loop_short(struct xw *w, unsigned int op, bool addr32, uintptr_t target)
{
	static const ZydisMnemonic m[4] = {
		ZYDIS_MNEMONIC_LOOPNE, ZYDIS_MNEMONIC_LOOPE, ZYDIS_MNEMONIC_LOOP, ZYDIS_MNEMONIC_JRCXZ,
	};
	ZydisMnemonic mn = m[op & 3];

	if (addr32 && mn == ZYDIS_MNEMONIC_JRCXZ)
		mn = ZYDIS_MNEMONIC_JECXZ;
	short_branch(w, mn, addr32 ? ZYDIS_ADDRESS_SIZE_HINT_32 : ZYDIS_ADDRESS_SIZE_HINT_64, target);
}

void xw_push_return(struct xw *w, uintptr_t ret)
{
	ZydisEncoderRequest r;

	req_init(&r, ZYDIS_MNEMONIC_PUSH);
	r.operand_count = 1;
	set_reg(&r.operands[0], ZYDIS_REGISTER_RAX);
	emit(w, &r);

	req_init(&r, ZYDIS_MNEMONIC_MOV);
	r.operand_count = 2;
	set_reg(&r.operands[0], ZYDIS_REGISTER_RAX);
	set_imm(&r.operands[1], ret);
	emit(w, &r);

	req_init(&r, ZYDIS_MNEMONIC_XCHG);
	r.operand_count = 2;
	r.operands[0].type = ZYDIS_OPERAND_TYPE_MEMORY;
	r.operands[0].mem.base = ZYDIS_REGISTER_RSP;
	r.operands[0].mem.size = 8;
	set_reg(&r.operands[1], ZYDIS_REGISTER_RAX);
	emit(w, &r);
}

void xw_call_ind_as_jmp(struct xw *w, const uint8_t *bytes, size_t len, uintptr_t orig_next)
{
	ZydisDecoder dec;
	ZydisDecodedInstruction in;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	ZydisEncoderRequest r;
	ZydisEncoderOperand *o;

	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, bytes, len, &in, ops)) ||
	    !ZYAN_SUCCESS(ZydisEncoderDecodedInstructionToEncoderRequest(&in, ops,
			in.operand_count_visible, &r))) {
		w->err = true;
		return;
	}
	r.mnemonic = ZYDIS_MNEMONIC_JMP;
	r.prefixes &= ~(ZydisInstructionAttributes)(ZYDIS_ATTRIB_HAS_NOTRACK | ZYDIS_ATTRIB_HAS_BND);
	o = &r.operands[0];
	if (o->type == ZYDIS_OPERAND_TYPE_MEMORY) {
		if (o->mem.base == ZYDIS_REGISTER_RSP)
			o->mem.displacement += 8;
		else if (o->mem.base == ZYDIS_REGISTER_RIP)
			o->mem.displacement += (int64_t)orig_next;
	}
	emit(w, &r);
}

void xw_lea_rsp(struct xw *w, int32_t disp)
{
	ZydisEncoderRequest r;

	req_init(&r, ZYDIS_MNEMONIC_LEA);
	r.operand_count = 2;
	set_reg(&r.operands[0], ZYDIS_REGISTER_RSP);
	r.operands[1].type = ZYDIS_OPERAND_TYPE_MEMORY;
	r.operands[1].mem.base = ZYDIS_REGISTER_RSP;
	r.operands[1].mem.displacement = disp;
	r.operands[1].mem.size = 8;
	emit(w, &r);
}

void xw_call_indirect(struct xw *w, uintptr_t slot)
{
	ZydisEncoderRequest r;

	req_init(&r, ZYDIS_MNEMONIC_CALL);
	r.operand_count = 1;
	r.operands[0].type = ZYDIS_OPERAND_TYPE_MEMORY;
	r.operands[0].mem.base = ZYDIS_REGISTER_RIP;
	r.operands[0].mem.size = 8;
	r.operands[0].mem.displacement = (int64_t)slot;
	emit(w, &r);
}
