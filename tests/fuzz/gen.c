/*
 * Random instruction sequences for the differential fuzzer.
 *
 * Every instruction is built as a ZydisEncoderRequest from a table of
 * mnemonics and operand shapes, encoded, decoded again and checked: it
 * may write only registers the sequence owns, touch memory only in the
 * scratch data (through the reserved base register or RIP-relative) or in
 * the live part of the private stack, and must exist on this CPU.
 * Branches only go forward, to an instruction at the same stack depth in
 * the same call frame, so every sequence terminates and returns with a
 * balanced stack whatever the branches decide.
 */
#include <cpuid.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#define Z(m) ZYDIS_MNEMONIC_##m
#define REG(r) ZYDIS_REGISTER_##r

static const ZydisRegister gpr[4][16] = {
	{ REG(AL), REG(BL), REG(CL), REG(DL), REG(SIL), REG(DIL), REG(BPL), REG(R8B),
	  REG(R9B), REG(R10B), REG(R11B), REG(R12B), REG(R13B), REG(R14B), REG(R15B), REG(SPL) },
	{ REG(AX), REG(BX), REG(CX), REG(DX), REG(SI), REG(DI), REG(BP), REG(R8W),
	  REG(R9W), REG(R10W), REG(R11W), REG(R12W), REG(R13W), REG(R14W), REG(R15W), REG(SP) },
	{ REG(EAX), REG(EBX), REG(ECX), REG(EDX), REG(ESI), REG(EDI), REG(EBP), REG(R8D),
	  REG(R9D), REG(R10D), REG(R11D), REG(R12D), REG(R13D), REG(R14D), REG(R15D), REG(ESP) },
	{ REG(RAX), REG(RBX), REG(RCX), REG(RDX), REG(RSI), REG(RDI), REG(RBP), REG(R8),
	  REG(R9), REG(R10), REG(R11), REG(R12), REG(R13), REG(R14), REG(R15), REG(RSP) },
};

uint64_t fz_rand(uint64_t *s)
{
	/* xorshift64*: small, and the same stream everywhere. */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dULL;
}

static unsigned int rnd(uint64_t *s, unsigned int n)
{
	return n ? (unsigned int)(fz_rand(s) % n) : 0;
}

/* ---- CPU features ---- */

enum feat {
	F_BASE, F_SSSE3, F_SSE41, F_SSE42, F_POPCNT, F_LZCNT, F_MOVBE, F_AES, F_PCLMUL,
	F_SHA, F_BMI1, F_BMI2, F_ADX, F_AVX, F_AVX2, F_FMA, F_F16C, F_AVX512, F_CD,
	F_VBMI, F_IFMA, F_VNNI, F_BITALG, F_VPOPCNT, F_GFNI, F_VAES, F_NFEAT
};

static bool has[F_NFEAT];
static int cpu_level;

static void detect(void)
{
	unsigned int a, b, c, d, b7 = 0, c7 = 0, xcr0 = 0;

	__cpuid(1, a, b, c, d);
	if (c & (1u << 27))
		__asm__("xgetbv" : "=a"(xcr0) : "c"(0) : "edx");
	if (__get_cpuid_max(0, NULL) >= 7)
		__cpuid_count(7, 0, a, b7, c7, d);
	has[F_BASE] = true;
	has[F_SSSE3] = c & (1u << 9);
	has[F_SSE41] = c & (1u << 19);
	has[F_SSE42] = c & (1u << 20);
	has[F_MOVBE] = c & (1u << 22);
	has[F_POPCNT] = c & (1u << 23);
	has[F_AES] = c & (1u << 25);
	has[F_PCLMUL] = c & (1u << 1);
	has[F_AVX] = (c & (1u << 28)) && (xcr0 & 6) == 6;
	has[F_FMA] = has[F_AVX] && (c & (1u << 12));
	has[F_F16C] = has[F_AVX] && (c & (1u << 29));
	has[F_BMI1] = b7 & (1u << 3);
	has[F_AVX2] = has[F_AVX] && (b7 & (1u << 5));
	has[F_BMI2] = b7 & (1u << 8);
	has[F_ADX] = b7 & (1u << 19);
	has[F_SHA] = b7 & (1u << 29);
	/* F, DQ, BW, VL together, and the OS saving opmask and zmm state. */
	has[F_AVX512] = has[F_AVX2] && (xcr0 & 0xe6) == 0xe6 &&
			(b7 & 0xd0030000u) == 0xd0030000u;
	has[F_CD] = has[F_AVX512] && (b7 & (1u << 28));
	has[F_IFMA] = has[F_AVX512] && (b7 & (1u << 21));
	has[F_VBMI] = has[F_AVX512] && (c7 & (1u << 1));
	has[F_GFNI] = (c7 & (1u << 8)) && has[F_SSE41];
	has[F_VAES] = has[F_AVX512] && (c7 & (1u << 9));
	has[F_VNNI] = has[F_AVX512] && (c7 & (1u << 11));
	has[F_BITALG] = has[F_AVX512] && (c7 & (1u << 12));
	has[F_VPOPCNT] = has[F_AVX512] && (c7 & (1u << 14));
	__cpuid(0x80000000, a, b, c, d);
	if (a >= 0x80000001) {
		__cpuid(0x80000001, a, b, c, d);
		has[F_LZCNT] = c & (1u << 5);
	}
	cpu_level = has[F_AVX512] ? FZ_AVX512 : has[F_AVX2] ? FZ_AVX : FZ_SSE;
}

int fz_level_detect(void)
{
	if (!has[F_BASE])
		detect();
	return cpu_level;
}

/* ---- the instruction table ---- */

/* Operand shapes, one letter per operand, alternatives separated by '|':
 *  g GPR of width W     G GPR or memory, W      m memory, W
 *  S GPR/mem narrower than W (movzx)            D r/m32
 *  i immediate          b imm8                  c the cl register
 *  L address expression (lea: no access)
 *  x xmm                X xmm or memory          v vector of width V
 *  V vector or memory of width V                M vector memory
 *  h half-width vector or memory                y ymm
 *  k opmask             s x87 st(i)              f x87 memory
 */
enum { W8 = 1, W16 = 2, W32 = 4, W64 = 8, WALL = 15, W3264 = 12, W163264 = 14 };
enum { V128 = 1, V256 = 2, V512 = 4 };
enum { LOCK = 1, ALIGN = 2, KMASK = 4, EVEX = 8, NOFLAGCHK = 16 };

struct entry {
	ZydisMnemonic m;
	const char *shapes;
	uint8_t feat, wmask, vmask, flags;
};

static const struct entry table[] = {
	/* integer */
	{ Z(ADD), "G,g|g,G|G,i", F_BASE, WALL, 0, LOCK },
	{ Z(OR), "G,g|g,G|G,i", F_BASE, WALL, 0, LOCK },
	{ Z(ADC), "G,g|g,G|G,i", F_BASE, WALL, 0, LOCK },
	{ Z(SBB), "G,g|g,G|G,i", F_BASE, WALL, 0, LOCK },
	{ Z(AND), "G,g|g,G|G,i", F_BASE, WALL, 0, LOCK },
	{ Z(SUB), "G,g|g,G|G,i", F_BASE, WALL, 0, LOCK },
	{ Z(XOR), "G,g|g,G|G,i", F_BASE, WALL, 0, LOCK },
	{ Z(CMP), "G,g|g,G|G,i", F_BASE, WALL, 0, 0 },
	{ Z(TEST), "G,g|G,i", F_BASE, WALL, 0, 0 },
	{ Z(MOV), "G,g|g,G|G,i|g,i", F_BASE, WALL, 0, 0 },
	{ Z(INC), "G", F_BASE, WALL, 0, LOCK },
	{ Z(DEC), "G", F_BASE, WALL, 0, LOCK },
	{ Z(NEG), "G", F_BASE, WALL, 0, LOCK },
	{ Z(NOT), "G", F_BASE, WALL, 0, LOCK },
	{ Z(MUL), "G", F_BASE, WALL, 0, 0 },
	{ Z(IMUL), "G|g,G|g,G,i|g,G,b", F_BASE, WALL, 0, 0 },
	{ Z(SHL), "G,b|G,c", F_BASE, WALL, 0, 0 },
	{ Z(SHR), "G,b|G,c", F_BASE, WALL, 0, 0 },
	{ Z(SAR), "G,b|G,c", F_BASE, WALL, 0, 0 },
	{ Z(ROL), "G,b|G,c", F_BASE, WALL, 0, 0 },
	{ Z(ROR), "G,b|G,c", F_BASE, WALL, 0, 0 },
	{ Z(RCL), "G,b|G,c", F_BASE, WALL, 0, 0 },
	{ Z(RCR), "G,b|G,c", F_BASE, WALL, 0, 0 },
	{ Z(SHLD), "G,g,b|G,g,c", F_BASE, W163264, 0, 0 },
	{ Z(SHRD), "G,g,b|G,g,c", F_BASE, W163264, 0, 0 },
	{ Z(BT), "G,b|g,g", F_BASE, W163264, 0, 0 },
	{ Z(BTS), "G,b|g,g", F_BASE, W163264, 0, LOCK },
	{ Z(BTR), "G,b|g,g", F_BASE, W163264, 0, LOCK },
	{ Z(BTC), "G,b|g,g", F_BASE, W163264, 0, LOCK },
	{ Z(BSF), "g,G", F_BASE, W163264, 0, 0 },
	{ Z(BSR), "g,G", F_BASE, W163264, 0, 0 },
	{ Z(POPCNT), "g,G", F_POPCNT, W163264, 0, 0 },
	{ Z(LZCNT), "g,G", F_LZCNT, W163264, 0, 0 },
	{ Z(TZCNT), "g,G", F_BMI1, W163264, 0, 0 },
	{ Z(MOVZX), "g,S", F_BASE, W163264, 0, 0 },
	{ Z(MOVSX), "g,S", F_BASE, W163264, 0, 0 },
	{ Z(MOVSXD), "g,D", F_BASE, W64, 0, 0 },
	{ Z(LEA), "g,L", F_BASE, W163264, 0, 0 },
	{ Z(XCHG), "G,g", F_BASE, WALL, 0, 0 },
	{ Z(XADD), "G,g", F_BASE, WALL, 0, LOCK },
	{ Z(CMPXCHG), "G,g", F_BASE, WALL, 0, LOCK },
	{ Z(CMPXCHG8B), "m", F_BASE, W64, 0, LOCK },
	{ Z(CMPXCHG16B), "m", F_BASE, W64, 0, LOCK | ALIGN },
	{ Z(BSWAP), "g", F_BASE, W3264, 0, 0 },
	{ Z(MOVBE), "g,m|m,g", F_MOVBE, W163264, 0, 0 },
	{ Z(CBW), "", F_BASE, 0, 0, 0 }, { Z(CWDE), "", F_BASE, 0, 0, 0 },
	{ Z(CDQE), "", F_BASE, 0, 0, 0 }, { Z(CWD), "", F_BASE, 0, 0, 0 },
	{ Z(CDQ), "", F_BASE, 0, 0, 0 }, { Z(CQO), "", F_BASE, 0, 0, 0 },
	{ Z(LAHF), "", F_BASE, 0, 0, 0 }, { Z(SAHF), "", F_BASE, 0, 0, 0 },
	{ Z(CLC), "", F_BASE, 0, 0, 0 }, { Z(STC), "", F_BASE, 0, 0, 0 },
	{ Z(CMC), "", F_BASE, 0, 0, 0 }, { Z(CLD), "", F_BASE, 0, 0, 0 },
	{ Z(STD), "", F_BASE, 0, 0, 0 },
	{ Z(NOP), "|G", F_BASE, W163264, 0, 0 }, { Z(PAUSE), "", F_BASE, 0, 0, 0 },
	{ Z(ENDBR64), "", F_BASE, 0, 0, 0 },
	{ Z(LFENCE), "", F_BASE, 0, 0, 0 }, { Z(MFENCE), "", F_BASE, 0, 0, 0 },
	{ Z(SFENCE), "", F_BASE, 0, 0, 0 },
	{ Z(PREFETCHT0), "m", F_BASE, W8, 0, 0 }, { Z(CLFLUSH), "m", F_BASE, W8, 0, 0 },
	{ Z(ANDN), "g,g,G", F_BMI1, W3264, 0, 0 }, { Z(BEXTR), "g,G,g", F_BMI1, W3264, 0, 0 },
	{ Z(BLSI), "g,G", F_BMI1, W3264, 0, 0 }, { Z(BLSMSK), "g,G", F_BMI1, W3264, 0, 0 },
	{ Z(BLSR), "g,G", F_BMI1, W3264, 0, 0 }, { Z(BZHI), "g,G,g", F_BMI2, W3264, 0, 0 },
	{ Z(PDEP), "g,g,G", F_BMI2, W3264, 0, 0 }, { Z(PEXT), "g,g,G", F_BMI2, W3264, 0, 0 },
	{ Z(MULX), "g,g,G", F_BMI2, W3264, 0, 0 }, { Z(RORX), "g,G,b", F_BMI2, W3264, 0, 0 },
	{ Z(SARX), "g,G,g", F_BMI2, W3264, 0, 0 }, { Z(SHLX), "g,G,g", F_BMI2, W3264, 0, 0 },
	{ Z(SHRX), "g,G,g", F_BMI2, W3264, 0, 0 },
	{ Z(ADCX), "g,G", F_ADX, W3264, 0, 0 }, { Z(ADOX), "g,G", F_ADX, W3264, 0, 0 },
	{ Z(CRC32), "g,G", F_SSE42, WALL, 0, 0 },
	/* conditional moves and sets */
	{ Z(CMOVO), "g,G", F_BASE, W163264, 0, 0 }, { Z(CMOVNO), "g,G", F_BASE, W163264, 0, 0 },
	{ Z(CMOVB), "g,G", F_BASE, W163264, 0, 0 }, { Z(CMOVNB), "g,G", F_BASE, W163264, 0, 0 },
	{ Z(CMOVZ), "g,G", F_BASE, W163264, 0, 0 }, { Z(CMOVNZ), "g,G", F_BASE, W163264, 0, 0 },
	{ Z(CMOVBE), "g,G", F_BASE, W163264, 0, 0 }, { Z(CMOVNBE), "g,G", F_BASE, W163264, 0, 0 },
	{ Z(CMOVS), "g,G", F_BASE, W163264, 0, 0 }, { Z(CMOVNS), "g,G", F_BASE, W163264, 0, 0 },
	{ Z(CMOVP), "g,G", F_BASE, W163264, 0, 0 }, { Z(CMOVNP), "g,G", F_BASE, W163264, 0, 0 },
	{ Z(CMOVL), "g,G", F_BASE, W163264, 0, 0 }, { Z(CMOVNL), "g,G", F_BASE, W163264, 0, 0 },
	{ Z(CMOVLE), "g,G", F_BASE, W163264, 0, 0 }, { Z(CMOVNLE), "g,G", F_BASE, W163264, 0, 0 },
	{ Z(SETO), "G", F_BASE, W8, 0, 0 }, { Z(SETNO), "G", F_BASE, W8, 0, 0 },
	{ Z(SETB), "G", F_BASE, W8, 0, 0 }, { Z(SETNB), "G", F_BASE, W8, 0, 0 },
	{ Z(SETZ), "G", F_BASE, W8, 0, 0 }, { Z(SETNZ), "G", F_BASE, W8, 0, 0 },
	{ Z(SETBE), "G", F_BASE, W8, 0, 0 }, { Z(SETNBE), "G", F_BASE, W8, 0, 0 },
	{ Z(SETS), "G", F_BASE, W8, 0, 0 }, { Z(SETNS), "G", F_BASE, W8, 0, 0 },
	{ Z(SETP), "G", F_BASE, W8, 0, 0 }, { Z(SETNP), "G", F_BASE, W8, 0, 0 },
	{ Z(SETL), "G", F_BASE, W8, 0, 0 }, { Z(SETNL), "G", F_BASE, W8, 0, 0 },
	{ Z(SETLE), "G", F_BASE, W8, 0, 0 }, { Z(SETNLE), "G", F_BASE, W8, 0, 0 },
	/* x87 */
	{ Z(FLD1), "", F_BASE, 0, 0, 0 }, { Z(FLDZ), "", F_BASE, 0, 0, 0 },
	{ Z(FLDPI), "", F_BASE, 0, 0, 0 }, { Z(FLDL2E), "", F_BASE, 0, 0, 0 },
	{ Z(FLDLN2), "", F_BASE, 0, 0, 0 }, { Z(FCHS), "", F_BASE, 0, 0, 0 },
	{ Z(FABS), "", F_BASE, 0, 0, 0 }, { Z(FSQRT), "", F_BASE, 0, 0, 0 },
	{ Z(FXAM), "", F_BASE, 0, 0, 0 }, { Z(FRNDINT), "", F_BASE, 0, 0, 0 },
	{ Z(FPREM), "", F_BASE, 0, 0, 0 },
	{ Z(FADDP), "s,s", F_BASE, 0, 0, 0 }, { Z(FMULP), "s,s", F_BASE, 0, 0, 0 },
	{ Z(FSUBP), "s,s", F_BASE, 0, 0, 0 }, { Z(FDIVP), "s,s", F_BASE, 0, 0, 0 },
	{ Z(FXCH), "s,s", F_BASE, 0, 0, 0 }, { Z(FLD), "s|f", F_BASE, 0, 0, 0 },
	{ Z(FSTP), "s|f", F_BASE, 0, 0, 0 }, { Z(FST), "s|f", F_BASE, 0, 0, 0 },
	{ Z(FILD), "f", F_BASE, 0, 0, 0 }, { Z(FISTP), "f", F_BASE, 0, 0, 0 },
	{ Z(FADD), "s,s|f", F_BASE, 0, 0, 0 }, { Z(FMUL), "s,s|f", F_BASE, 0, 0, 0 },
	{ Z(FCOMI), "s,s", F_BASE, 0, 0, 0 }, { Z(FUCOMI), "s,s", F_BASE, 0, 0, 0 },
	{ Z(FCMOVB), "s,s", F_BASE, 0, 0, 0 }, { Z(FCMOVE), "s,s", F_BASE, 0, 0, 0 },
	{ Z(FNSTCW), "m", F_BASE, W16, 0, 0 }, { Z(FNSTSW), "m|g", F_BASE, W16, 0, 0 },
	/* SSE */
	{ Z(MOVDQU), "x,X|M,x", F_BASE, 0, V128, 0 }, { Z(MOVUPS), "x,X|M,x", F_BASE, 0, V128, 0 },
	{ Z(MOVUPD), "x,X|M,x", F_BASE, 0, V128, 0 },
	{ Z(MOVDQA), "x,X|M,x", F_BASE, 0, V128, ALIGN }, { Z(MOVAPS), "x,X|M,x", F_BASE, 0, V128, ALIGN },
	{ Z(MOVAPD), "x,X|M,x", F_BASE, 0, V128, ALIGN },
	{ Z(MOVQ), "x,G|G,x|x,X", F_BASE, W64, V128, 0 }, { Z(MOVD), "x,G|G,x", F_BASE, W32, V128, 0 },
	{ Z(PADDB), "x,X", F_BASE, 0, V128, ALIGN }, { Z(PADDW), "x,X", F_BASE, 0, V128, ALIGN },
	{ Z(PADDD), "x,X", F_BASE, 0, V128, ALIGN }, { Z(PADDQ), "x,X", F_BASE, 0, V128, ALIGN },
	{ Z(PSUBB), "x,X", F_BASE, 0, V128, ALIGN }, { Z(PSUBW), "x,X", F_BASE, 0, V128, ALIGN },
	{ Z(PSUBD), "x,X", F_BASE, 0, V128, ALIGN }, { Z(PSUBQ), "x,X", F_BASE, 0, V128, ALIGN },
	{ Z(PMULLW), "x,X", F_BASE, 0, V128, ALIGN }, { Z(PMULUDQ), "x,X", F_BASE, 0, V128, ALIGN },
	{ Z(PAND), "x,X", F_BASE, 0, V128, ALIGN }, { Z(PANDN), "x,X", F_BASE, 0, V128, ALIGN },
	{ Z(POR), "x,X", F_BASE, 0, V128, ALIGN }, { Z(PXOR), "x,X", F_BASE, 0, V128, ALIGN },
	{ Z(PCMPEQB), "x,X", F_BASE, 0, V128, ALIGN }, { Z(PCMPEQD), "x,X", F_BASE, 0, V128, ALIGN },
	{ Z(PCMPGTW), "x,X", F_BASE, 0, V128, ALIGN }, { Z(PCMPGTD), "x,X", F_BASE, 0, V128, ALIGN },
	{ Z(PUNPCKLBW), "x,X", F_BASE, 0, V128, ALIGN }, { Z(PUNPCKHDQ), "x,X", F_BASE, 0, V128, ALIGN },
	{ Z(PACKSSWB), "x,X", F_BASE, 0, V128, ALIGN }, { Z(PMAXUB), "x,X", F_BASE, 0, V128, ALIGN },
	{ Z(PMINSW), "x,X", F_BASE, 0, V128, ALIGN }, { Z(PAVGB), "x,X", F_BASE, 0, V128, ALIGN },
	{ Z(PSADBW), "x,X", F_BASE, 0, V128, ALIGN },
	{ Z(PSLLW), "x,b|x,X", F_BASE, 0, V128, ALIGN }, { Z(PSLLD), "x,b|x,X", F_BASE, 0, V128, ALIGN },
	{ Z(PSLLQ), "x,b|x,X", F_BASE, 0, V128, ALIGN }, { Z(PSRLW), "x,b|x,X", F_BASE, 0, V128, ALIGN },
	{ Z(PSRLD), "x,b|x,X", F_BASE, 0, V128, ALIGN }, { Z(PSRLQ), "x,b|x,X", F_BASE, 0, V128, ALIGN },
	{ Z(PSRAW), "x,b|x,X", F_BASE, 0, V128, ALIGN }, { Z(PSRAD), "x,b|x,X", F_BASE, 0, V128, ALIGN },
	{ Z(PSLLDQ), "x,b", F_BASE, 0, V128, 0 }, { Z(PSRLDQ), "x,b", F_BASE, 0, V128, 0 },
	{ Z(PSHUFD), "x,X,b", F_BASE, 0, V128, ALIGN }, { Z(PSHUFHW), "x,X,b", F_BASE, 0, V128, ALIGN },
	{ Z(PSHUFLW), "x,X,b", F_BASE, 0, V128, ALIGN }, { Z(SHUFPS), "x,X,b", F_BASE, 0, V128, ALIGN },
	{ Z(ADDPS), "x,X", F_BASE, 0, V128, ALIGN }, { Z(SUBPS), "x,X", F_BASE, 0, V128, ALIGN },
	{ Z(MULPS), "x,X", F_BASE, 0, V128, ALIGN }, { Z(DIVPS), "x,X", F_BASE, 0, V128, ALIGN },
	{ Z(MINPS), "x,X", F_BASE, 0, V128, ALIGN }, { Z(MAXPS), "x,X", F_BASE, 0, V128, ALIGN },
	{ Z(SQRTPS), "x,X", F_BASE, 0, V128, ALIGN }, { Z(ANDPS), "x,X", F_BASE, 0, V128, ALIGN },
	{ Z(ORPS), "x,X", F_BASE, 0, V128, ALIGN }, { Z(XORPS), "x,X", F_BASE, 0, V128, ALIGN },
	{ Z(ADDPD), "x,X", F_BASE, 0, V128, ALIGN }, { Z(MULPD), "x,X", F_BASE, 0, V128, ALIGN },
	{ Z(ADDSS), "x,X", F_BASE, 0, V128, 0 }, { Z(MULSS), "x,X", F_BASE, 0, V128, 0 },
	{ Z(DIVSD), "x,X", F_BASE, 0, V128, 0 }, { Z(SQRTSD), "x,X", F_BASE, 0, V128, 0 },
	{ Z(CVTSI2SD), "x,G", F_BASE, W3264, V128, 0 }, { Z(CVTSI2SS), "x,G", F_BASE, W3264, V128, 0 },
	{ Z(CVTTSD2SI), "g,X", F_BASE, W3264, V128, 0 }, { Z(CVTSD2SI), "g,X", F_BASE, W3264, V128, 0 },
	{ Z(CVTTSS2SI), "g,X", F_BASE, W3264, V128, 0 },
	{ Z(CVTPS2PD), "x,X", F_BASE, 0, V128, 0 }, { Z(CVTDQ2PS), "x,X", F_BASE, 0, V128, ALIGN },
	{ Z(CVTPS2DQ), "x,X", F_BASE, 0, V128, ALIGN },
	{ Z(UCOMISD), "x,X", F_BASE, 0, V128, 0 }, { Z(COMISS), "x,X", F_BASE, 0, V128, 0 },
	{ Z(PMOVMSKB), "g,x", F_BASE, W3264, V128, 0 }, { Z(MOVMSKPS), "g,x", F_BASE, W3264, V128, 0 },
	{ Z(PEXTRW), "g,x,b", F_BASE, W3264, V128, 0 }, { Z(PINSRW), "x,G,b", F_BASE, W32, V128, 0 },
	{ Z(PSHUFB), "x,X", F_SSSE3, 0, V128, ALIGN }, { Z(PALIGNR), "x,X,b", F_SSSE3, 0, V128, ALIGN },
	{ Z(PEXTRB), "G,x,b", F_SSE41, W32, V128, 0 }, { Z(PEXTRD), "G,x,b", F_SSE41, W32, V128, 0 },
	{ Z(PEXTRQ), "G,x,b", F_SSE41, W64, V128, 0 }, { Z(PINSRB), "x,G,b", F_SSE41, W32, V128, 0 },
	{ Z(PINSRD), "x,G,b", F_SSE41, W32, V128, 0 }, { Z(PINSRQ), "x,G,b", F_SSE41, W64, V128, 0 },
	{ Z(PTEST), "x,X", F_SSE41, 0, V128, ALIGN }, { Z(PMULLD), "x,X", F_SSE41, 0, V128, ALIGN },
	{ Z(PMINSD), "x,X", F_SSE41, 0, V128, ALIGN }, { Z(PBLENDW), "x,X,b", F_SSE41, 0, V128, ALIGN },
	{ Z(BLENDPS), "x,X,b", F_SSE41, 0, V128, ALIGN }, { Z(ROUNDPS), "x,X,b", F_SSE41, 0, V128, ALIGN },
	{ Z(ROUNDSD), "x,X,b", F_SSE41, 0, V128, 0 }, { Z(PCMPGTQ), "x,X", F_SSE42, 0, V128, ALIGN },
	{ Z(PCMPISTRI), "x,X,b", F_SSE42, 0, V128, ALIGN },
	{ Z(AESENC), "x,X", F_AES, 0, V128, ALIGN }, { Z(AESDEC), "x,X", F_AES, 0, V128, ALIGN },
	{ Z(PCLMULQDQ), "x,X,b", F_PCLMUL, 0, V128, ALIGN },
	{ Z(SHA1RNDS4), "x,X,b", F_SHA, 0, V128, ALIGN }, { Z(SHA256RNDS2), "x,X", F_SHA, 0, V128, ALIGN },
	/* AVX, AVX2, FMA, F16C (VEX; EVEX with xmm16-31 where AVX-512 VL has them) */
	{ Z(VPADDD), "v,v,V", F_AVX, 0, V128 | V256, EVEX }, { Z(VPADDQ), "v,v,V", F_AVX, 0, V128 | V256, EVEX },
	{ Z(VPSUBB), "v,v,V", F_AVX, 0, V128 | V256, EVEX }, { Z(VPXOR), "v,v,V", F_AVX, 0, V128 | V256, 0 },
	{ Z(VPAND), "v,v,V", F_AVX, 0, V128 | V256, 0 }, { Z(VPOR), "v,v,V", F_AVX, 0, V128 | V256, 0 },
	{ Z(VPCMPEQB), "v,v,V", F_AVX, 0, V128 | V256, 0 }, { Z(VPMULLD), "v,v,V", F_AVX, 0, V128 | V256, EVEX },
	{ Z(VPSHUFB), "v,v,V", F_AVX, 0, V128 | V256, EVEX }, { Z(VPUNPCKLBW), "v,v,V", F_AVX, 0, V128 | V256, EVEX },
	{ Z(VADDPS), "v,v,V", F_AVX, 0, V128 | V256, EVEX }, { Z(VMULPD), "v,v,V", F_AVX, 0, V128 | V256, EVEX },
	{ Z(VSUBPS), "v,v,V", F_AVX, 0, V128 | V256, EVEX }, { Z(VMAXPS), "v,v,V", F_AVX, 0, V128 | V256, EVEX },
	{ Z(VANDPS), "v,v,V", F_AVX, 0, V128 | V256, EVEX }, { Z(VXORPS), "v,v,V", F_AVX, 0, V128 | V256, EVEX },
	{ Z(VPSHUFD), "v,V,b", F_AVX, 0, V128 | V256, EVEX }, { Z(VPERMQ), "v,V,b", F_AVX2, 0, V256, EVEX },
	{ Z(VPERMPD), "v,V,b", F_AVX2, 0, V256, EVEX }, { Z(VPERM2I128), "v,v,V,b", F_AVX2, 0, V256, 0 },
	{ Z(VINSERTI128), "v,v,h,b", F_AVX2, 0, V256, 0 }, { Z(VEXTRACTI128), "h,v,b", F_AVX2, 0, V256, 0 },
	{ Z(VBROADCASTSS), "v,X", F_AVX, 0, V128 | V256, EVEX }, { Z(VPBROADCASTD), "v,X", F_AVX2, 0, V128 | V256, EVEX },
	{ Z(VMOVDQU), "v,V|M,v", F_AVX, 0, V128 | V256, 0 }, { Z(VMOVUPS), "v,V|M,v", F_AVX, 0, V128 | V256, EVEX },
	{ Z(VMOVDQA), "v,V|M,v", F_AVX, 0, V128 | V256, ALIGN },
	{ Z(VFMADD132PS), "v,v,V", F_FMA, 0, V128 | V256, EVEX }, { Z(VFMADD231PS), "v,v,V", F_FMA, 0, V128 | V256, EVEX },
	{ Z(VFMADD213PD), "v,v,V", F_FMA, 0, V128 | V256, EVEX }, { Z(VFMADD231SD), "x,x,X", F_FMA, 0, V128, EVEX },
	{ Z(VZEROUPPER), "", F_AVX, 0, 0, 0 }, { Z(VZEROALL), "", F_AVX, 0, 0, 0 },
	{ Z(VPBLENDVB), "v,v,V,v", F_AVX, 0, V128 | V256, 0 }, { Z(VCVTPS2PH), "h,v,b", F_F16C, 0, V256, 0 },
	{ Z(VCVTPH2PS), "v,h", F_F16C, 0, V256, 0 }, { Z(VPTEST), "v,V", F_AVX, 0, V128 | V256, 0 },
	{ Z(VPMOVMSKB), "g,v", F_AVX, W3264, V128 | V256, 0 }, { Z(VMOVQ), "x,G|G,x", F_AVX, W64, V128, EVEX },
	{ Z(VMOVD), "x,G|G,x", F_AVX, W32, V128, EVEX }, { Z(VPEXTRQ), "G,x,b", F_AVX, W64, V128, EVEX },
	{ Z(VPINSRQ), "x,x,G,b", F_AVX, W64, V128, EVEX }, { Z(VPSLLVD), "v,v,V", F_AVX2, 0, V128 | V256, EVEX },
	{ Z(VPSRAVD), "v,v,V", F_AVX2, 0, V128 | V256, EVEX }, { Z(VPMASKMOVD), "v,v,M|M,v,v", F_AVX2, 0, V128 | V256, 0 },
	{ Z(VBROADCASTI128), "v,M", F_AVX2, 0, V256, 0 },
	/* AVX-512 */
	{ Z(VPADDD), "v,v,V", F_AVX512, 0, V512, KMASK | EVEX }, { Z(VPADDW), "v,v,V", F_AVX512, 0, V128 | V256 | V512, KMASK | EVEX },
	{ Z(VPSUBD), "v,v,V", F_AVX512, 0, V512, KMASK | EVEX }, { Z(VPMULLQ), "v,v,V", F_AVX512, 0, V128 | V256 | V512, KMASK | EVEX },
	{ Z(VPANDD), "v,v,V", F_AVX512, 0, V128 | V256 | V512, KMASK | EVEX }, { Z(VPORD), "v,v,V", F_AVX512, 0, V128 | V256 | V512, KMASK | EVEX },
	{ Z(VPXORD), "v,v,V", F_AVX512, 0, V128 | V256 | V512, KMASK | EVEX },
	{ Z(VPTERNLOGD), "v,v,V,b", F_AVX512, 0, V128 | V256 | V512, KMASK | EVEX },
	{ Z(VPERMD), "v,v,V", F_AVX512, 0, V256 | V512, KMASK | EVEX }, { Z(VPERMI2D), "v,v,V", F_AVX512, 0, V128 | V256 | V512, KMASK | EVEX },
	{ Z(VPERMT2D), "v,v,V", F_AVX512, 0, V128 | V256 | V512, KMASK | EVEX },
	{ Z(VPCOMPRESSD), "V,v", F_AVX512, 0, V128 | V256 | V512, KMASK | EVEX },
	{ Z(VPEXPANDD), "v,V", F_AVX512, 0, V128 | V256 | V512, KMASK | EVEX },
	{ Z(VPBROADCASTD), "v,X|v,g", F_AVX512, W32, V512, KMASK | EVEX },
	{ Z(VMOVDQU32), "v,V|M,v", F_AVX512, 0, V128 | V256 | V512, KMASK | EVEX },
	{ Z(VMOVDQU64), "v,V|M,v", F_AVX512, 0, V128 | V256 | V512, KMASK | EVEX },
	{ Z(VMOVDQA64), "v,V|M,v", F_AVX512, 0, V128 | V256 | V512, KMASK | EVEX | ALIGN },
	{ Z(VADDPS), "v,v,V", F_AVX512, 0, V512, KMASK | EVEX }, { Z(VMULPD), "v,v,V", F_AVX512, 0, V512, KMASK | EVEX },
	{ Z(VFMADD231PS), "v,v,V", F_AVX512, 0, V512, KMASK | EVEX },
	{ Z(VPCMPD), "k,v,V,b", F_AVX512, 0, V128 | V256 | V512, KMASK | EVEX },
	{ Z(VPCMPUB), "k,v,V,b", F_AVX512, 0, V128 | V256 | V512, KMASK | EVEX },
	{ Z(VPCMPEQD), "k,v,V", F_AVX512, 0, V128 | V256 | V512, KMASK | EVEX },
	{ Z(VPMOVDB), "h,v", F_AVX512, 0, V512, KMASK | EVEX }, { Z(VPMINUB), "v,v,V", F_AVX512, 0, V512, KMASK | EVEX },
	{ Z(KANDW), "k,k,k", F_AVX512, 0, 0, 0 }, { Z(KORW), "k,k,k", F_AVX512, 0, 0, 0 },
	{ Z(KXORW), "k,k,k", F_AVX512, 0, 0, 0 }, { Z(KNOTW), "k,k", F_AVX512, 0, 0, 0 },
	{ Z(KMOVW), "k,k|k,g|g,k|k,m|m,k", F_AVX512, W32, 0, 0 },
	{ Z(KMOVQ), "k,k|k,g|g,k|k,m|m,k", F_AVX512, W64, 0, 0 },
	{ Z(KSHIFTLW), "k,k,b", F_AVX512, 0, 0, 0 }, { Z(KORTESTW), "k,k", F_AVX512, 0, 0, 0 },
	{ Z(VPOPCNTD), "v,V", F_VPOPCNT, 0, V128 | V256 | V512, KMASK | EVEX },
	{ Z(VPCONFLICTD), "v,V", F_CD, 0, V128 | V256 | V512, KMASK | EVEX },
	{ Z(VPMADD52LUQ), "v,v,V", F_IFMA, 0, V128 | V256 | V512, KMASK | EVEX },
	{ Z(VPERMB), "v,v,V", F_VBMI, 0, V128 | V256 | V512, KMASK | EVEX },
	{ Z(VPDPBUSD), "v,v,V", F_VNNI, 0, V128 | V256 | V512, KMASK | EVEX },
	{ Z(VPSHUFBITQMB), "k,v,V", F_BITALG, 0, V128 | V256 | V512, KMASK | EVEX },
	{ Z(VGF2P8MULB), "v,v,V", F_GFNI, 0, V128 | V256 | V512, EVEX },
	{ Z(VAESENC), "v,v,V", F_VAES, 0, V256 | V512, EVEX },
};

#define NTABLE (sizeof(table) / sizeof(table[0]))

/* ---- generation context ---- */

struct gctx {
	struct fz_case *c;
	uint64_t rng;
	int depth, frame, nframes, nest, group;
	int nprot;
	int16_t prot[32];	/* live return addresses, flags: offsets from rsp0 */
	bool owned[16];		/* registers the sequence may write */
	bool indirect_ok;	/* jmp *reg: the function cannot be optimized */
	ZydisDecoder dec;
};

static struct fz_insn *emit(struct gctx *g)
{
	struct fz_insn *in = &g->c->ins[g->c->n++];

	memset(in, 0, sizeof(*in));
	in->req.machine_mode = ZYDIS_MACHINE_MODE_LONG_64;
	in->depth = (int16_t)g->depth;
	in->frame = (int16_t)g->frame;
	in->group = g->group;
	in->target = -1;
	return in;
}

static int pick_owned(struct gctx *g)
{
	int r;

	do
		r = (int)rnd(&g->rng, 15);
	while (!g->owned[r]);
	return r;
}

/* Any register for reading, owned ones for writing: the check after
 * encoding throws out instructions that write the reserved ones. */
static int pick_reg(struct gctx *g)
{
	return rnd(&g->rng, 4) ? pick_owned(g) : (int)rnd(&g->rng, 15);
}

/* An rsp-relative operand inside the live stack, away from return
 * addresses and saved flags: offset from rsp0 (the entry rsp). */
static bool stack_offset(struct gctx *g, int size, bool align, int *off)
{
	for (int tries = 0; tries < 8; tries++) {
		int o;
		bool ok = true;

		if (align) {
			/* rsp0 is 56 mod 64 (buffer page aligned, 8192 - 8). */
			o = 8 + 64 * ((int)rnd(&g->rng, 5) - 2);
		} else if (rnd(&g->rng, 2)) {
			o = -FZ_RED + (int)rnd(&g->rng, (unsigned int)(FZ_RED - size + 1));
		} else {
			o = 8 + (int)rnd(&g->rng, (unsigned int)(FZ_ABOVE - size + 1));
		}
		if (o < -FZ_RED || o + size > 8 + FZ_ABOVE || (o < 8 && o + size > 0))
			continue;
		/* Pushed values live at -depth..0 and may be overwritten, but
		 * not return addresses or saved flags. */
		for (int i = 0; i < g->nprot; i++)
			if (o < g->prot[i] + 8 && o + size > g->prot[i])
				ok = false;
		if (ok) {
			*off = o;
			return true;
		}
	}
	return false;
}

/* A memory operand of `size` bytes in the scratch data or the stack. */
static void mem_operand(struct gctx *g, struct fz_insn *in, int idx, int size, bool align)
{
	ZydisEncoderOperand *op = &in->req.operands[idx];
	struct fz_case *c = g->c;
	unsigned int r = rnd(&g->rng, 10);
	int stk;

	op->type = ZYDIS_OPERAND_TYPE_MEMORY;
	op->mem.size = (ZyanU16)size;
	op->mem.base = ZYDIS_REGISTER_NONE;
	op->mem.index = ZYDIS_REGISTER_NONE;
	if (r >= 8 && stack_offset(g, size, align, &stk)) {
		op->mem.base = REG(RSP);
		op->mem.displacement = stk + g->depth;
		return;
	}
	if (r >= 5) {
		in->kind = FK_RIPDATA;
		in->memop = (uint8_t)idx;
		in->data_off = (int)rnd(&g->rng, FZ_DATA_SIZE - 128);
		if (align)
			in->data_off &= ~63;
		op->mem.base = REG(RIP);
		return;
	}
	op->mem.base = gpr[3][c->base_reg];
	op->mem.displacement = (int)rnd(&g->rng, FZ_DATA_SIZE - 128 - 512) - FZ_DATA_HALF;
	if (align) {
		op->mem.displacement &= ~63;
	} else if (rnd(&g->rng, 3) == 0) {
		op->mem.index = gpr[3][c->index_reg];
		op->mem.scale = (ZyanU8)(1u << rnd(&g->rng, 4));
	}
}

/* lea's address expression: never accessed, so any registers. */
static void lea_operand(struct gctx *g, ZydisEncoderOperand *op)
{
	op->type = ZYDIS_OPERAND_TYPE_MEMORY;
	op->mem.base = rnd(&g->rng, 6) ? gpr[3][rnd(&g->rng, 16)] : ZYDIS_REGISTER_NONE;
	op->mem.index = ZYDIS_REGISTER_NONE;
	if (rnd(&g->rng, 2)) {
		int r;

		do
			r = (int)rnd(&g->rng, 16);
		while (r == R_RSP);
		op->mem.index = gpr[3][r];
		op->mem.scale = (ZyanU8)(1u << rnd(&g->rng, 4));
	}
	op->mem.displacement = (int32_t)fz_rand(&g->rng) >> rnd(&g->rng, 32);
	op->mem.size = 0;
}

static ZydisRegister vreg(struct gctx *g, int width, bool evex)
{
	int n = (evex && has[F_AVX512]) ? 32 : 16;
	int r = (int)rnd(&g->rng, (unsigned int)n);

	if (width == 512)
		return (ZydisRegister)(REG(ZMM0) + r);
	if (width == 256)
		return (ZydisRegister)(REG(YMM0) + r);
	return (ZydisRegister)(REG(XMM0) + r);
}

static uint64_t imm_value(struct gctx *g, int w)
{
	switch (rnd(&g->rng, 4)) {
	case 0:
		return rnd(&g->rng, 64);
	case 1:
		return (uint64_t)-(int64_t)rnd(&g->rng, 64);
	default:
		return w == 64 && rnd(&g->rng, 2) ? fz_rand(&g->rng) :
		       (uint64_t)(int64_t)(int32_t)fz_rand(&g->rng);
	}
}

/* Fills the request from one shape alternative with widths w (GPR) and
 * vw (vector); false when the shape needs something unavailable. */
static bool build(struct gctx *g, struct fz_insn *in, const struct entry *e, const char *shape,
		  int wi, int vw)
{
	ZydisEncoderRequest *q = &in->req;
	int w = 8 << wi, n = 0;
	bool evex = (e->flags & EVEX) && (vw == 512 || has[F_AVX512]) && e->feat != F_AVX512 ?
		    rnd(&g->rng, 4) == 0 : (e->flags & EVEX) != 0 && e->feat >= F_AVX512;

	q->mnemonic = e->m;
	for (const char *s = shape; *s && *s != '|'; s++) {
		ZydisEncoderOperand *op;

		if (*s == ',')
			continue;
		op = &q->operands[n];
		switch (*s) {
		case 'g':
		case 'G':
		case 'S':
		case 'D': {
			int ww = *s == 'S' ? 8 << rnd(&g->rng, 2) : *s == 'D' ? 32 : w;

			if ((*s != 'g' && rnd(&g->rng, 3) == 0) || (*s == 'S' && ww >= w)) {
				if (*s == 'S' && ww >= w)
					ww = 8;
				mem_operand(g, in, n, ww / 8, e->flags & ALIGN);
				break;
			}
			op->type = ZYDIS_OPERAND_TYPE_REGISTER;
			op->reg.value = gpr[__builtin_ctz((unsigned int)ww) - 3][pick_reg(g)];
			break;
		}
		case 'm':
			mem_operand(g, in, n, e->m == Z(CMPXCHG16B) ? 16 : e->m == Z(CMPXCHG8B) ? 8 : w / 8,
				    e->flags & ALIGN || e->m == Z(CMPXCHG16B));
			break;
		case 'M':
			mem_operand(g, in, n, vw / 8, true);
			break;
		case 'f': {
			static const int fsz[] = { 4, 8, 10, 2 };

			mem_operand(g, in, n, fsz[rnd(&g->rng, e->m == Z(FILD) || e->m == Z(FISTP) ? 4 : 3)], false);
			break;
		}
		case 'L':
			lea_operand(g, op);
			break;
		case 'i':
			op->type = ZYDIS_OPERAND_TYPE_IMMEDIATE;
			op->imm.u = imm_value(g, w);
			break;
		case 'b':
			op->type = ZYDIS_OPERAND_TYPE_IMMEDIATE;
			op->imm.u = rnd(&g->rng, 256);
			break;
		case 'c':
			op->type = ZYDIS_OPERAND_TYPE_REGISTER;
			op->reg.value = REG(CL);
			break;
		case 'x':
		case 'X':
		case 'v':
		case 'V':
		case 'h':
		case 'y': {
			int vv = *s == 'x' || *s == 'X' ? 128 : *s == 'y' ? 256 : *s == 'h' ? vw / 2 : vw;

			if (vv < 128)
				vv = 128;
			if ((*s == 'X' || *s == 'V' || *s == 'h') && rnd(&g->rng, 3) == 0) {
				int sz = *s == 'X' ? (int)(16u >> rnd(&g->rng, 3)) : vv / 8;

				mem_operand(g, in, n, sz, (e->flags & ALIGN) || sz >= 16);
				break;
			}
			op->type = ZYDIS_OPERAND_TYPE_REGISTER;
			op->reg.value = vreg(g, vv, evex);
			break;
		}
		case 'k':
			op->type = ZYDIS_OPERAND_TYPE_REGISTER;
			op->reg.value = (ZydisRegister)(REG(K0) + rnd(&g->rng, 8));
			break;
		case 's':
			op->type = ZYDIS_OPERAND_TYPE_REGISTER;
			op->reg.value = (ZydisRegister)(REG(ST0) + (n == 0 && rnd(&g->rng, 2) ? 0 : rnd(&g->rng, 8)));
			break;
		default:
			return false;
		}
		n++;
	}
	q->operand_count = (ZyanU8)n;
	/* AVX-512 write masks: the mask is the operand after the destination. */
	if ((e->flags & KMASK) && n >= 2 && rnd(&g->rng, 2)) {
		memmove(&q->operands[2], &q->operands[1], sizeof(q->operands[0]) * (size_t)(n - 1));
		q->operands[1].type = ZYDIS_OPERAND_TYPE_REGISTER;
		q->operands[1].reg.value = (ZydisRegister)(REG(K1) + rnd(&g->rng, 7));
		q->operand_count++;
		q->evex.zeroing_mask = q->operands[0].type == ZYDIS_OPERAND_TYPE_REGISTER &&
				       rnd(&g->rng, 2);
	}
	if ((e->flags & LOCK) && q->operands[0].type == ZYDIS_OPERAND_TYPE_MEMORY && rnd(&g->rng, 2))
		q->prefixes = ZYDIS_ATTRIB_HAS_LOCK;
	return true;
}

static const char *pick_shape(struct gctx *g, const char *shapes)
{
	int n = 1, k;

	for (const char *s = shapes; *s; s++)
		n += *s == '|';
	k = (int)rnd(&g->rng, (unsigned int)n);
	while (k--)
		shapes = strchr(shapes, '|') + 1;
	return shapes;
}

static int encode_req(ZydisEncoderRequest *q, uintptr_t addr, uint8_t *out)
{
	ZyanUSize len = 15;

	if (!ZYAN_SUCCESS(ZydisEncoderEncodeInstructionAbsolute(q, out, &len, addr)))
		return -1;
	return (int)len;
}

/* Encodes in with provisional addresses (lengths do not depend on them). */
static int encode_at(const struct fz_case *c, const struct fz_insn *in, uintptr_t addr,
		     uintptr_t target, uint8_t *out)
{
	ZydisEncoderRequest q = in->req;

	switch (in->kind) {
	case FK_RAW:
		memcpy(out, in->raw, in->rawlen);
		return in->rawlen;
	case FK_RIPDATA:
		q.operands[in->memop].mem.displacement = (ZyanI64)(uintptr_t)(fuzz_data + in->data_off);
		break;
	case FK_BRANCH:
		q.operands[0].imm.u = target;
		break;
	case FK_LEA:
		q.operands[1].mem.displacement = (ZyanI64)target;
		break;
	}
	(void)c;
	return encode_req(&q, addr, out);
}

/* The encoded instruction may only write owned registers (rsp only when
 * allowed), and touch memory only through its explicit operands. */
static bool acceptable(struct gctx *g, const uint8_t *b, int len, bool stack_ok)
{
	ZydisDecodedInstruction di;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];

	if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&g->dec, b, (ZyanUSize)len, &di, ops)))
		return false;
	for (int i = 0; i < di.operand_count; i++) {
		const ZydisDecodedOperand *op = &ops[i];

		if (op->type == ZYDIS_OPERAND_TYPE_MEMORY && op->visibility != ZYDIS_OPERAND_VISIBILITY_EXPLICIT &&
		    !stack_ok)
			return false;
		if (op->type != ZYDIS_OPERAND_TYPE_REGISTER || !(op->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE))
			continue;
		ZydisRegister r = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, op->reg.value);
		ZydisRegisterClass rc = ZydisRegisterGetClass(r);

		if (rc == ZYDIS_REGCLASS_GPR64) {
			int k;

			for (k = 0; k < 16 && gpr[3][k] != r; k++)
				;
			if (k == R_RSP ? !stack_ok : !g->owned[k])
				return false;
		} else if (rc != ZYDIS_REGCLASS_XMM && rc != ZYDIS_REGCLASS_YMM && rc != ZYDIS_REGCLASS_ZMM &&
			   rc != ZYDIS_REGCLASS_MASK && rc != ZYDIS_REGCLASS_X87 && rc != ZYDIS_REGCLASS_FLAGS &&
			   r != REG(X87STATUS) && r != REG(MXCSR)) {
			return false;	/* segment, control, rip, ... */
		}
	}
	return true;
}

static bool feat_ok(const struct entry *e, int level)
{
	if (!has[e->feat])
		return false;
	if (e->feat >= F_AVX512 && level < FZ_AVX512)
		return false;
	if (e->feat >= F_AVX && e->feat < F_AVX512 && level < FZ_AVX)
		return false;
	return true;
}

/* One instruction from the table. */
static bool gen_table(struct gctx *g)
{
	struct fz_case *c = g->c;
	uint8_t buf[15];

	for (int tries = 0; tries < 40; tries++) {
		const struct entry *e = &table[rnd(&g->rng, NTABLE)];
		struct fz_insn *in;
		int wi, vw, len;

		if (!feat_ok(e, c->level))
			continue;
		do
			wi = (int)rnd(&g->rng, 4);
		while (e->wmask && !(e->wmask & (1 << wi)));
		do
			vw = 128 << rnd(&g->rng, 3);
		while (e->vmask && !(e->vmask & (vw / 128)));
		in = emit(g);
		if (!build(g, in, e, pick_shape(g, e->shapes), wi, vw) ||
		    (len = encode_at(c, in, (uintptr_t)fuzz_sandbox, 0, buf)) < 0 ||
		    !acceptable(g, buf, len, false)) {
			c->n--;
			continue;
		}
		return true;
	}
	return false;
}

static void set_reg(ZydisEncoderOperand *op, ZydisRegister r)
{
	op->type = ZYDIS_OPERAND_TYPE_REGISTER;
	op->reg.value = r;
}

static void set_imm(ZydisEncoderOperand *op, uint64_t v)
{
	op->type = ZYDIS_OPERAND_TYPE_IMMEDIATE;
	op->imm.u = v;
}

static struct fz_insn *emit_simple(struct gctx *g, ZydisMnemonic m, int nops)
{
	struct fz_insn *in = emit(g);

	in->req.mnemonic = m;
	in->req.operand_count = (ZyanU8)nops;
	return in;
}

static struct fz_insn *emit_raw(struct gctx *g, const uint8_t *b, int len)
{
	struct fz_insn *in = emit(g);

	in->kind = FK_RAW;
	memcpy(in->raw, b, (size_t)len);
	in->rawlen = (uint8_t)len;
	return in;
}

static const ZydisMnemonic jcc[16] = {
	Z(JO), Z(JNO), Z(JB), Z(JNB), Z(JZ), Z(JNZ), Z(JBE), Z(JNBE),
	Z(JS), Z(JNS), Z(JP), Z(JNP), Z(JL), Z(JNL), Z(JLE), Z(JNLE),
};

static struct fz_insn *emit_branch(struct gctx *g, ZydisMnemonic m, bool rel8)
{
	struct fz_insn *in = emit_simple(g, m, 1);

	in->kind = FK_BRANCH;
	in->rel8 = rel8;
	in->req.branch_type = rel8 ? ZYDIS_BRANCH_TYPE_SHORT : ZYDIS_BRANCH_TYPE_NEAR;
	in->req.branch_width = rel8 ? ZYDIS_BRANCH_WIDTH_8 : ZYDIS_BRANCH_WIDTH_32;
	set_imm(&in->req.operands[0], 0);
	return in;
}

static void gen_block(struct gctx *g, int budget);

/* A forward branch to a random place chosen once the layout is known. */
static void gen_branch(struct gctx *g)
{
	unsigned int r = rnd(&g->rng, 10);

	if (r < 6)
		emit_branch(g, jcc[rnd(&g->rng, 16)], rnd(&g->rng, 2));
	else if (r < 7)
		emit_branch(g, Z(JMP), rnd(&g->rng, 2));
	else if (r < 9)
		emit_branch(g, (ZydisMnemonic[]){ Z(LOOP), Z(LOOPE), Z(LOOPNE) }[rnd(&g->rng, 3)], true);
	else
		emit_branch(g, rnd(&g->rng, 2) ? Z(JRCXZ) : Z(JECXZ), true);
}

/* lea target(%rip), r; jmp *r — the target chosen like a branch's. */
static void gen_indirect_jmp(struct gctx *g)
{
	int r = pick_owned(g);
	struct fz_insn *lea = emit_simple(g, Z(LEA), 2), *j;

	lea->kind = FK_LEA;
	set_reg(&lea->req.operands[0], gpr[3][r]);
	lea->req.operands[1].type = ZYDIS_OPERAND_TYPE_MEMORY;
	lea->req.operands[1].mem.base = REG(RIP);
	lea->req.operands[1].mem.size = 8;
	j = emit_simple(g, Z(JMP), 1);
	j->notarget = true;
	j->req.branch_type = ZYDIS_BRANCH_TYPE_NEAR;
	set_reg(&j->req.operands[0], gpr[3][r]);
}

static void protect(struct gctx *g, int off)
{
	if (g->nprot < 32)
		g->prot[g->nprot++] = (int16_t)off;
}

/* call F; jmp over; F: body; ret [$8]; over: — directly, through a
 * register or through memory. */
static void gen_call(struct gctx *g, int budget)
{
	int grp = g->group, saved_frame = g->frame, saved_nprot = g->nprot, extra = 0;
	unsigned int how = rnd(&g->rng, 4);
	struct fz_insn *call, *over, *lea = NULL, *ret;

	if (rnd(&g->rng, 4) == 0) {
		struct fz_insn *p = emit_simple(g, Z(PUSH), 1);

		set_imm(&p->req.operands[0], imm_value(g, 32));
		g->depth += 8;
		extra = 8;
	}
	if (how == 0) {
		call = emit_simple(g, Z(CALL), 1);
		call->kind = FK_BRANCH;
		call->req.branch_type = ZYDIS_BRANCH_TYPE_NEAR;
		call->req.branch_width = ZYDIS_BRANCH_WIDTH_32;
		set_imm(&call->req.operands[0], 0);
	} else {
		int r = pick_owned(g);

		lea = emit_simple(g, Z(LEA), 2);
		lea->kind = FK_LEA;
		lea->fixed = true;
		set_reg(&lea->req.operands[0], gpr[3][r]);
		lea->req.operands[1].type = ZYDIS_OPERAND_TYPE_MEMORY;
		lea->req.operands[1].mem.base = REG(RIP);
		lea->req.operands[1].mem.size = 8;
		if (how == 3) {
			struct fz_insn *st = emit_simple(g, Z(MOV), 2);

			st->notarget = true;
			st->kind = FK_RIPDATA;
			st->memop = 0;
			st->data_off = (int)rnd(&g->rng, FZ_DATA_SIZE / 8) * 8;
			st->req.operands[0].type = ZYDIS_OPERAND_TYPE_MEMORY;
			st->req.operands[0].mem.base = REG(RIP);
			st->req.operands[0].mem.size = 8;
			set_reg(&st->req.operands[1], gpr[3][r]);
			call = emit_simple(g, Z(CALL), 1);
			call->kind = FK_RIPDATA;
			call->memop = 0;
			call->data_off = st->data_off;
			call->req.operands[0] = st->req.operands[0];
		} else {
			call = emit_simple(g, Z(CALL), 1);
			set_reg(&call->req.operands[0], gpr[3][r]);
		}
		call->req.branch_type = ZYDIS_BRANCH_TYPE_NEAR;
		call->notarget = true;
	}
	call->fixed = true;
	over = emit_branch(g, Z(JMP), rnd(&g->rng, 2) && budget < 8);
	over->fixed = true;
	/* The body: a frame of its own, one return address deeper. */
	g->depth += 8;
	protect(g, -g->depth);
	g->frame = ++g->nframes;
	g->nest++;
	g->group++;
	int body = g->c->n;
	gen_block(g, budget);
	g->group = grp;
	g->nest--;
	if (g->c->n < FZ_MAX_INSN - 8) {
		ret = emit_simple(g, Z(RET), extra ? 1 : 0);
		if (extra)
			set_imm(&ret->req.operands[0], 8);
		ret->group = grp;
	}
	if (body == g->c->n - 1 || g->c->ins[body].frame != g->frame)
		body = g->c->n - 1;
	g->c->ins[body].notarget = true;
	(lea ? lea : call)->target = body;
	g->depth -= 8 + extra;
	g->frame = saved_frame;
	g->nprot = saved_nprot;
	over->target = g->c->n;	/* the next instruction, or the final ret */
}

/* call 1f; 1: pop r — the return address as data. */
static void gen_call_pop(struct gctx *g)
{
	struct fz_insn *call = emit_branch(g, Z(CALL), false), *pop;

	call->fixed = true;
	call->target = g->c->n;
	g->depth += 8;
	pop = emit_simple(g, Z(POP), 1);
	pop->notarget = true;
	set_reg(&pop->req.operands[0], gpr[3][pick_owned(g)]);
	g->depth -= 8;
}

/* push ...; body; pop ... in every width and kind, or an rsp adjustment
 * around the body. */
static void gen_push_region(struct gctx *g, int budget)
{
	int grp = g->group, size = 8, saved_nprot = g->nprot, saved_frame = g->frame;
	unsigned int kind = rnd(&g->rng, 6);
	struct fz_insn *in;

	if (kind == 5) {
		int n = 8 * (1 + (int)rnd(&g->rng, 16));
		bool lea = rnd(&g->rng, 2);

		in = emit_simple(g, lea ? Z(LEA) : Z(SUB), 2);
		set_reg(&in->req.operands[0], REG(RSP));
		if (lea) {
			in->req.operands[1].type = ZYDIS_OPERAND_TYPE_MEMORY;
			in->req.operands[1].mem.base = REG(RSP);
			in->req.operands[1].mem.displacement = -n;
			in->req.operands[1].mem.size = 8;
		} else {
			set_imm(&in->req.operands[1], (uint64_t)n);
		}
		size = n;
	} else if (kind == 4) {
		emit_simple(g, Z(PUSHFQ), 0);
	} else {
		in = emit_simple(g, Z(PUSH), 1);
		if (kind == 0)
			set_imm(&in->req.operands[0], imm_value(g, 32));
		else if (kind == 1) {
			mem_operand(g, in, 0, 8, false);
		} else if (kind == 2) {
			set_reg(&in->req.operands[0], gpr[1][rnd(&g->rng, 15)]);
			size = 2;
		} else {
			set_reg(&in->req.operands[0], gpr[3][rnd(&g->rng, 15)]);
		}
	}
	g->depth += size;
	if (kind == 4) {
		/* Saved flags: no branch may enter or leave the region, or
		 * popfq could load other data (with TF or AC set). */
		protect(g, -g->depth);
		g->frame = ++g->nframes;
	}
	g->group++;
	gen_block(g, budget);
	g->group = grp;
	if (kind == 5) {
		bool lea = rnd(&g->rng, 2);

		in = emit_simple(g, lea ? Z(LEA) : Z(ADD), 2);
		set_reg(&in->req.operands[0], REG(RSP));
		if (lea) {
			in->req.operands[1].type = ZYDIS_OPERAND_TYPE_MEMORY;
			in->req.operands[1].mem.base = REG(RSP);
			in->req.operands[1].mem.displacement = size;
			in->req.operands[1].mem.size = 8;
		} else {
			set_imm(&in->req.operands[1], (uint64_t)size);
		}
	} else if (kind == 4) {
		emit_simple(g, Z(POPFQ), 0);
		g->frame = saved_frame;
	} else {
		in = emit_simple(g, Z(POP), 1);
		if (size == 2)
			set_reg(&in->req.operands[0], gpr[1][pick_owned(g)]);
		else if (rnd(&g->rng, 4) == 0)
			mem_operand(g, in, 0, 8, false);
		else
			set_reg(&in->req.operands[0], gpr[3][pick_owned(g)]);
		/* pop to an rsp-relative operand computes the address after
		 * the increment: keep it simple, data or register only. */
		if (in->req.operands[0].type == ZYDIS_OPERAND_TYPE_MEMORY &&
		    in->req.operands[0].mem.base == REG(RSP))
			set_reg(&in->req.operands[0], gpr[3][pick_owned(g)]);
	}
	g->depth -= size;
	g->nprot = saved_nprot;
}

/* getppid through syscall: the same answer in every child. */
static void gen_syscall(struct gctx *g)
{
	struct fz_insn *in;

	if (!g->owned[R_RAX] || !g->owned[R_RCX] || !g->owned[R_R11])
		return;
	in = emit_simple(g, Z(MOV), 2);
	set_reg(&in->req.operands[0], REG(EAX));
	set_imm(&in->req.operands[1], rnd(&g->rng, 2) ? 110 : 102);
	in = emit_raw(g, (const uint8_t[]){ 0x0f, 0x05 }, 2);
	in->notarget = true;
}

/* String instructions with rsi/rdi/rcx set up inside the scratch data. */
static void gen_string(struct gctx *g)
{
	static const uint8_t ops[] = { 0xa4, 0xaa, 0xac, 0xa6, 0xae };
	static const uint8_t sz[] = { 0, 0x66, 0, 0x48 };
	uint8_t b[4];
	int n = 0, op = ops[rnd(&g->rng, 5)], w = (int)rnd(&g->rng, 4);
	unsigned int rep = rnd(&g->rng, 3);
	struct fz_insn *in;

	if (!g->owned[R_RSI] || !g->owned[R_RDI] || !g->owned[R_RCX])
		return;
	for (int r = R_RSI; r <= R_RDI; r++) {
		in = emit_simple(g, Z(LEA), 2);
		set_reg(&in->req.operands[0], gpr[3][r]);
		in->req.operands[1].type = ZYDIS_OPERAND_TYPE_MEMORY;
		in->req.operands[1].mem.base = gpr[3][g->c->base_reg];
		in->req.operands[1].mem.displacement = (int)rnd(&g->rng, 2048) - 1024;
		in->req.operands[1].mem.size = 8;
		in->notarget = r != R_RSI;
	}
	in = emit_simple(g, Z(MOV), 2);
	in->notarget = true;
	set_reg(&in->req.operands[0], REG(ECX));
	set_imm(&in->req.operands[1], rnd(&g->rng, 40));
	if (rep)
		b[n++] = (op == 0xa6 || op == 0xae) && rep == 2 ? 0xf2 : 0xf3;
	if (sz[w])
		b[n++] = sz[w];
	b[n++] = (uint8_t)(op + (w > 0));
	in = emit_raw(g, b, n);
	in->notarget = true;
}

/* Forms the library must refuse, in code no path reaches: jmp over them. */
static void gen_refused(struct gctx *g)
{
	static const struct { uint8_t len, b[7]; } forms[] = {
		{ 1, { 0xcc } },			/* int3 */
		{ 2, { 0xcd, 0x80 } },			/* int $0x80 */
		{ 1, { 0xf1 } },			/* int1 */
		{ 1, { 0xf4 } },			/* hlt */
		{ 2, { 0x0f, 0x0b } },			/* ud2 */
		{ 1, { 0xec } },			/* in %dx, %al */
		{ 1, { 0xee } },			/* out %al, %dx */
		{ 1, { 0x6c } },			/* insb */
		{ 2, { 0x48, 0xcf } },			/* iretq */
		{ 1, { 0xfa } },			/* cli */
		{ 2, { 0x0f, 0x30 } },			/* wrmsr */
		{ 3, { 0x0f, 0x20, 0xc0 } },		/* mov %cr0, %rax */
		{ 6, { 0xc7, 0xf8, 0, 0, 0, 0 } },	/* xbegin */
		{ 2, { 0xff, 0xd4 } },			/* call *%rsp */
		{ 3, { 0x67, 0xe2, 0x00 } },		/* loopl */
		{ 2, { 0xff, 0x28 } },			/* ljmp *(%rax) */
		{ 2, { 0xff, 0x18 } },			/* lcall *(%rax) */
		{ 2, { 0x0f, 0x07 } },			/* sysret */
		{ 2, { 0x0f, 0x34 } },			/* sysenter */
	};
	struct fz_insn *over = emit_branch(g, Z(JMP), rnd(&g->rng, 2));
	int n = 1 + (int)rnd(&g->rng, 2);

	over->fixed = true;
	for (int i = 0; i < n; i++) {
		int k = (int)rnd(&g->rng, sizeof(forms) / sizeof(forms[0]));
		struct fz_insn *in = emit_raw(g, forms[k].b, forms[k].len);

		in->dead = in->notarget = true;
	}
	over->target = g->c->n;
}

/* Items until the budget is spent; nested constructs take a share. */
static void gen_block(struct gctx *g, int budget)
{
	while (budget > 0 && g->c->n < FZ_MAX_INSN - 64) {
		unsigned int r = rnd(&g->rng, 100);

		g->group++;
		if (r < 62) {
			gen_table(g);
			budget--;
		} else if (r < 74) {
			gen_branch(g);
			budget--;
		} else if (r < 80 && g->nest < 3) {
			int share = 1 + (int)rnd(&g->rng, (unsigned int)budget / 2 + 1);

			gen_push_region(g, share);
			budget -= share + 1;
		} else if (r < 84 && g->nest < 2) {
			int share = 1 + (int)rnd(&g->rng, (unsigned int)budget / 2 + 1);

			gen_call(g, share);
			budget -= share + 2;
		} else if (r < 86) {
			gen_call_pop(g);
			budget--;
		} else if (r < 89) {
			gen_string(g);
			budget--;
		} else if (r < 91) {
			gen_syscall(g);
			budget--;
		} else if (r < 94) {
			gen_refused(g);
			budget--;
		} else if (r < 96 && g->indirect_ok) {
			gen_indirect_jmp(g);
			budget--;
		}
	}
}

/* ---- layout ---- */

static const uint8_t preamble[FZ_PREAMBLE] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };

/* Where the live instruction t (or the next live one) starts. */
static int live_target(const struct fz_case *c, int t)
{
	while (t >= 0 && t < c->n && !c->live[t])
		t++;
	return t < c->n ? t : c->n - 1;
}

/* Offsets of the live instructions with provisional encodings. */
static int provisional(struct fz_case *c, uint32_t *off, uint8_t *len)
{
	uint32_t at = FZ_PREAMBLE;
	uint8_t buf[15];

	for (int i = 0; i < c->n; i++) {
		uintptr_t addr = (uintptr_t)fuzz_sandbox + at;
		int l;

		off[i] = at;
		len[i] = 0;
		if (!c->live[i])
			continue;
		l = encode_at(c, &c->ins[i], addr, addr, buf);
		if (l < 0) {
			if (getenv("FZ_DEBUG"))
				fprintf(stderr, "insn %d: mnemonic %s kind %d does not encode\n", i,
					ZydisMnemonicGetString(c->ins[i].req.mnemonic), c->ins[i].kind);
			return -1;
		}
		len[i] = (uint8_t)l;
		at += (uint32_t)l;
		if (at > FZ_SANDBOX_SIZE - 16)
			return -1;
	}
	return (int)at;
}

int fz_layout(struct fz_case *c)
{
	uint32_t off[FZ_MAX_INSN];
	uint8_t len[FZ_MAX_INSN];
	int end = provisional(c, off, len);

	if (end < 0)
		return -1;
	memcpy(c->code, preamble, FZ_PREAMBLE);
	c->nb = 0;
	for (int i = 0; i < c->n; i++) {
		struct fz_insn *in = &c->ins[i];
		uintptr_t addr = (uintptr_t)fuzz_sandbox + off[i], target = 0;
		int l;

		if (!c->live[i])
			continue;
		if (in->kind == FK_BRANCH || in->kind == FK_LEA)
			target = (uintptr_t)fuzz_sandbox + off[live_target(c, in->target)];
		l = encode_at(c, in, addr, target, in->bytes);
		if (l != len[i]) {
			if (getenv("FZ_DEBUG"))
				fprintf(stderr, "insn %d: %s len %d then %d\n", i,
					ZydisMnemonicGetString(in->req.mnemonic), len[i], l);
			return -1;	/* rel8 out of reach */
		}
		in->len = (uint8_t)l;
		in->off = off[i];
		memcpy(c->code + off[i], in->bytes, (size_t)l);
		c->boff[c->nb] = off[i];
		c->bins[c->nb++] = i;
	}
	c->code_len = (uint32_t)end;
	return 0;
}

/* Random forward targets at the same depth in the same frame; branches
 * placed by construction keep theirs (rel8 ones widened when too far). */
static void resolve(struct gctx *g)
{
	struct fz_case *c = g->c;
	uint32_t off[FZ_MAX_INSN];
	uint8_t len[FZ_MAX_INSN];
	int cand[FZ_MAX_INSN];

	for (int pass = 0; pass < 8; pass++) {
		bool widened = false;

		if (provisional(c, off, len) < 0)
			return;
		for (int i = 0; i < c->n; i++) {
			struct fz_insn *in = &c->ins[i];

			if (in->kind == FK_BRANCH && in->fixed && in->rel8 &&
			    off[in->target] - (off[i] + len[i]) > 127 && in->req.mnemonic == Z(JMP)) {
				in->rel8 = false;
				in->req.branch_type = ZYDIS_BRANCH_TYPE_NEAR;
				in->req.branch_width = ZYDIS_BRANCH_WIDTH_32;
				widened = true;
			}
		}
		if (!widened)
			break;
	}
	for (int i = 0; i < c->n; i++) {
		struct fz_insn *in = &c->ins[i];
		int from = in->kind == FK_LEA ? i + 1 : i, nc = 0;

		if ((in->kind != FK_BRANCH && in->kind != FK_LEA) || in->fixed)
			continue;
		for (int j = from + 1; j < c->n; j++) {
			const struct fz_insn *t = &c->ins[j];

			if (t->dead || t->notarget || t->depth != c->ins[from].depth ||
			    t->frame != c->ins[from].frame)
				continue;
			if (in->rel8 && off[j] - (off[i] + len[i]) > 127)
				break;
			cand[nc++] = j;
		}
		if (!nc)
			in->target = from + 1;
		else if (rnd(&g->rng, 10) < 7)
			in->target = cand[rnd(&g->rng, nc < 4 ? (unsigned int)nc : 4)];
		else
			in->target = cand[rnd(&g->rng, (unsigned int)nc)];
	}
}

void fz_gen_case(struct fz_case *c, uint64_t seed, int level, int len)
{
	struct gctx g;

	fz_level_detect();
	memset(c, 0, sizeof(*c));
	memset(&g, 0, sizeof(g));
	ZydisDecoderInit(&g.dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	g.c = c;
	g.rng = seed * 0x9e3779b97f4a7c15ULL + 0x1234567;
	fz_rand(&g.rng);
	c->seed = fz_rand(&g.rng);
	c->level = level;
	c->base_reg = (int)rnd(&g.rng, 15);
	do
		c->index_reg = (int)rnd(&g.rng, 15);
	while (c->index_reg == c->base_reg);
	for (int r = 0; r < 15; r++)
		g.owned[r] = r != c->base_reg && r != c->index_reg;
	g.indirect_ok = rnd(&g.rng, 5) == 0;
	gen_block(&g, len);
	g.group++;
	emit_simple(&g, Z(RET), 0);
	for (int i = 0; i < c->n; i++)
		c->live[i] = true;
	resolve(&g);
}

/* "mnemonic operand,operand": the form statistics are kept by. */
void fz_form_name(const uint8_t *bytes, size_t len, char *out, size_t outsz)
{
	static ZydisDecoder dec;
	static bool ready;
	ZydisDecodedInstruction di;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	size_t n = 0;

	if (!ready) {
		ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
		ready = true;
	}
	if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, bytes, len, &di, ops))) {
		snprintf(out, outsz, "(bad)");
		return;
	}
	if (di.attributes & ZYDIS_ATTRIB_HAS_LOCK)
		n += (size_t)snprintf(out + n, outsz - n, "lock ");
	if (di.attributes & (ZYDIS_ATTRIB_HAS_REP | ZYDIS_ATTRIB_HAS_REPE | ZYDIS_ATTRIB_HAS_REPNE))
		n += (size_t)snprintf(out + n, outsz - n, "rep ");
	n += (size_t)snprintf(out + n, outsz - n, "%s", ZydisMnemonicGetString(di.mnemonic));
	for (int i = 0, k = 0; i < di.operand_count_visible && n < outsz - 16; i++) {
		const ZydisDecodedOperand *op = &ops[i];
		char t[24];

		switch (op->type) {
		case ZYDIS_OPERAND_TYPE_REGISTER: {
			ZydisRegisterClass rc = ZydisRegisterGetClass(op->reg.value);

			snprintf(t, sizeof(t), "%s",
				 rc == ZYDIS_REGCLASS_GPR8 ? "r8" : rc == ZYDIS_REGCLASS_GPR16 ? "r16" :
				 rc == ZYDIS_REGCLASS_GPR32 ? "r32" : rc == ZYDIS_REGCLASS_GPR64 ? "r64" :
				 rc == ZYDIS_REGCLASS_XMM ? "xmm" : rc == ZYDIS_REGCLASS_YMM ? "ymm" :
				 rc == ZYDIS_REGCLASS_ZMM ? "zmm" : rc == ZYDIS_REGCLASS_MASK ? "k" :
				 rc == ZYDIS_REGCLASS_X87 ? "st" : ZydisRegisterGetString(op->reg.value));
			break;
		}
		case ZYDIS_OPERAND_TYPE_MEMORY:
			snprintf(t, sizeof(t), "%s%u", op->mem.base == REG(RIP) ? "mrip" :
				 op->mem.base == REG(RSP) ? "mstk" : "m", op->size);
			break;
		case ZYDIS_OPERAND_TYPE_IMMEDIATE:
			snprintf(t, sizeof(t), "%s%u", op->imm.is_relative ? "rel" : "i",
				 di.raw.imm[k].size);
			k++;
			break;
		default:
			snprintf(t, sizeof(t), "?");
		}
		n += (size_t)snprintf(out + n, outsz - n, "%s%s", i ? "," : " ", t);
	}
}

/* The initial state of a case, from its seed alone. */
void fz_make_state(const struct fz_case *c, struct fz_state *st, uint8_t *data, uint8_t *stack)
{
	uint64_t s = c->seed | 1;
	uint8_t *fx = st->fx;

	memset(st, 0, sizeof(*st));
	for (int i = 0; i < 15; i++)
		st->gpr[i] = fz_rand(&s) >> rnd(&s, 64);
	st->gpr[c->base_reg] = (uint64_t)(uintptr_t)(fuzz_data + FZ_DATA_HALF);
	st->gpr[c->index_reg] = rnd(&s, 64);
	st->gpr[R_RSP] = (uint64_t)(uintptr_t)(fuzz_stack + FZ_STACK_TOP);
	st->flags = 0x202 | (fz_rand(&s) & 0x8d5);
	st->level = (uint64_t)c->level;
	/* x87: default control word, random stack top, tags and values;
	 * mxcsr: exceptions masked, random rounding, sometimes FZ/DAZ. */
	fx[0] = 0x7f;
	fx[1] = 0x03;
	fx[3] = (uint8_t)(rnd(&s, 8) << 3);
	fx[4] = (uint8_t)fz_rand(&s);
	uint32_t mxcsr = 0x1f80 | (uint32_t)rnd(&s, 4) << 13 | (rnd(&s, 8) ? 0 : 0x8040);
	memcpy(fx + 24, &mxcsr, 4);
	uint32_t mask = 0xffff;
	memcpy(fx + 28, &mask, 4);
	for (int i = 0; i < 8; i++)
		for (int j = 0; j < 10; j++)
			fx[32 + 16 * i + j] = (uint8_t)fz_rand(&s);
	for (int i = 0; i < 256; i++)
		fx[160 + i] = (uint8_t)fz_rand(&s);
	for (int i = 0; i < 16; i++) {
		memcpy(st->ymm[i], fx + 160 + 16 * i, 16);
		for (int j = 16; j < 32; j++)
			st->ymm[i][j] = (uint8_t)fz_rand(&s);
	}
	for (int i = 0; i < 32; i++) {
		if (i < 16)
			memcpy(st->zmm[i], st->ymm[i], 32);
		for (int j = i < 16 ? 32 : 0; j < 64; j++)
			st->zmm[i][j] = (uint8_t)fz_rand(&s);
	}
	for (int i = 0; i < 8; i++)
		st->k[i] = fz_rand(&s);
	for (int i = 0; i < FZ_DATA_SIZE; i++)
		data[i] = (uint8_t)fz_rand(&s);
	for (int i = 0; i < FZ_STACK_SIZE; i++)
		stack[i] = (uint8_t)fz_rand(&s);
}
