/* The x86-64 instruction decoder of libkprobes, Zydis, in the agent.
 *
 * Debian ships no static Zydis, so the decoder is loaded privately: dlopen
 * with RTLD_LOCAL keeps it out of the global scope, so no lookup of the
 * program's ever binds to it, and the functions libkprobes calls are
 * defined here, hidden, forwarding to it. */
#include <dlfcn.h>
#include <stdio.h>

#include <Zydis/Zydis.h>

#include "agent.h"

#ifndef KP_ZYDIS_SONAME
#define KP_ZYDIS_SONAME "libZydis.so.4.0"
#endif

static struct {
	ZyanStatus (*decoder_init)(ZydisDecoder *, ZydisMachineMode, ZydisStackWidth);
	ZyanStatus (*decode_full)(const ZydisDecoder *, const void *, ZyanUSize,
				  ZydisDecodedInstruction *, ZydisDecodedOperand *);
	ZyanStatus (*decode_instruction)(const ZydisDecoder *, ZydisDecoderContext *,
					 const void *, ZyanUSize, ZydisDecodedInstruction *);
	ZyanStatus (*to_request)(const ZydisDecodedInstruction *, const ZydisDecodedOperand *,
				 ZyanU8, ZydisEncoderRequest *);
	ZyanStatus (*encode_absolute)(ZydisEncoderRequest *, void *, ZyanUSize *, ZyanU64);
	ZyanStatus (*calc_absolute)(const ZydisDecodedInstruction *, const ZydisDecodedOperand *,
				    ZyanU64, ZyanU64 *);
	ZydisRegisterClass (*reg_class)(ZydisRegister);
	ZydisRegisterWidth (*reg_width)(ZydisMachineMode, ZydisRegister);
	ZydisRegister (*reg_enclosing)(ZydisMachineMode, ZydisRegister);
} zy;

/* Symbol lookups go through the handle only: never the global scope. */
#define BIND(field, name) (*(void **)&zy.field = dlsym(h, name)) != NULL

int agent_private_load(char *err, size_t errlen)
{
	void *h;

	if (zy.decoder_init)
		return 0;
	h = agent_object_open_private(KP_ZYDIS_SONAME);
	if (!h) {
		snprintf(err, errlen, "cannot load the instruction decoder %s: %s",
			 KP_ZYDIS_SONAME, dlerror());
		return -1;
	}
	if (BIND(decode_full, "ZydisDecoderDecodeFull") &&
	    BIND(decode_instruction, "ZydisDecoderDecodeInstruction") &&
	    BIND(to_request, "ZydisEncoderDecodedInstructionToEncoderRequest") &&
	    BIND(encode_absolute, "ZydisEncoderEncodeInstructionAbsolute") &&
	    BIND(calc_absolute, "ZydisCalcAbsoluteAddress") &&
	    BIND(reg_class, "ZydisRegisterGetClass") &&
	    BIND(reg_width, "ZydisRegisterGetWidth") &&
	    BIND(reg_enclosing, "ZydisRegisterGetLargestEnclosing") &&
	    BIND(decoder_init, "ZydisDecoderInit"))	/* last: it says "loaded" */
		return 0;
	snprintf(err, errlen, "%s lacks a function the agent needs", KP_ZYDIS_SONAME);
	zy.decoder_init = NULL;
	return -1;
}

/* Without the decoder every call fails, so libkprobes refuses the probe
 * rather than guessing at instructions. */
ZyanStatus ZydisDecoderInit(ZydisDecoder *d, ZydisMachineMode mode, ZydisStackWidth width)
{
	return zy.decoder_init ? zy.decoder_init(d, mode, width) : ZYAN_STATUS_FAILED;
}

ZyanStatus ZydisDecoderDecodeFull(const ZydisDecoder *d, const void *buf, ZyanUSize len,
				  ZydisDecodedInstruction *in,
				  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT])
{
	return zy.decode_full ? zy.decode_full(d, buf, len, in, ops) : ZYAN_STATUS_FAILED;
}

ZyanStatus ZydisDecoderDecodeInstruction(const ZydisDecoder *d, ZydisDecoderContext *ctx,
					 const void *buf, ZyanUSize len,
					 ZydisDecodedInstruction *in)
{
	return zy.decode_instruction ? zy.decode_instruction(d, ctx, buf, len, in) :
				       ZYAN_STATUS_FAILED;
}

ZyanStatus ZydisEncoderDecodedInstructionToEncoderRequest(const ZydisDecodedInstruction *in,
							  const ZydisDecodedOperand *ops,
							  ZyanU8 nops, ZydisEncoderRequest *req)
{
	return zy.to_request ? zy.to_request(in, ops, nops, req) : ZYAN_STATUS_FAILED;
}

ZyanStatus ZydisEncoderEncodeInstructionAbsolute(ZydisEncoderRequest *req, void *buf,
						 ZyanUSize *len, ZyanU64 pc)
{
	return zy.encode_absolute ? zy.encode_absolute(req, buf, len, pc) : ZYAN_STATUS_FAILED;
}

ZyanStatus ZydisCalcAbsoluteAddress(const ZydisDecodedInstruction *in,
				    const ZydisDecodedOperand *op, ZyanU64 pc, ZyanU64 *out)
{
	return zy.calc_absolute ? zy.calc_absolute(in, op, pc, out) : ZYAN_STATUS_FAILED;
}

ZydisRegisterClass ZydisRegisterGetClass(ZydisRegister reg)
{
	return zy.reg_class ? zy.reg_class(reg) : ZYDIS_REGCLASS_INVALID;
}

ZydisRegisterWidth ZydisRegisterGetWidth(ZydisMachineMode mode, ZydisRegister reg)
{
	return zy.reg_width ? zy.reg_width(mode, reg) : 0;
}

ZydisRegister ZydisRegisterGetLargestEnclosing(ZydisMachineMode mode, ZydisRegister reg)
{
	return zy.reg_enclosing ? zy.reg_enclosing(mode, reg) : ZYDIS_REGISTER_NONE;
}
