/* Probe specifications in the style of perf probe, shared by the kprobe CLI
 * (which validates them) and its agent (which resolves them):
 *
 *   [OBJECT:]SYMBOL[+OFFSET][%return] [ARG...]
 *   [OBJECT:]0xADDRESS [ARG...]
 *   FILE.c:LINE [ARG...]
 *   tp:PROVIDER:NAME [ARG...]     a static tracepoint (argN: its N-th
 *                                 argument; none given: all, by name)
 *   usdt:[OBJECT:]PROVIDER:NAME [ARG...]   a SystemTap SDT probe (arg0..:
 *                                 its operands; none given: all); the tool
 *                                 turns it into OBJECT:0xADDRESS%sem=0xS
 *
 * OBJECT:0xADDRESS may carry %sem=0xVADDR: a 16-bit semaphore (an SDT
 * probe's) at that link-time address of OBJECT, raised while the probe is
 * armed.
 *
 * ARG is [NAME=]arg1..arg6|retval[:TYPE], TYPE one of u64 s64 x64 u32 s32 u16
 * s16 u8 s8 f64 f32 string; argN:f64 (arg1..arg8) is the N-th floating-point
 * argument, at a function's entry (SYMBOL without +OFFSET or %return) or of
 * a tracepoint; retval:f64 (retval:f32) the floating-point return value, a
 * double (float) in xmm0.
 *
 * ARG may also name a variable of the program (DWARF): [NAME=]EXPR[:TYPE],
 * EXPR a parameter or variable visible at the probe point followed by
 * ->FIELD, .FIELD, [N], or preceded by *; "$params" and "$vars" stand for all
 * of them.  As a separate command-line word it needs NAME= (a bare word is
 * a new probe); in a quoted "PROBE ARG..." it does not.  The tool resolves
 * each EXPR into a fetch plan (dwarf_vars.c), which the agent receives as
 * NAME=@PLAN:TYPE, PLAN a sequence of
 *   rN    push the value of DWARF register N (0..KP_DWARF_PC, kp_arch.h)
 *   vN    push the low 8 bytes of vector register N (0..15: xmm0..xmm15,
 *         DWARF 17..32), as the probed code had it (kprobes_vector_reg())
 *   #K    push the constant K
 *   +K -K add K to the top
 *   *S    replace the top by the S bytes (1, 2, 4, 8) at that address
 *   R     replace the top, the address of the stack slot of a return
 *         address, by the return address there: the real one when the slot
 *         holds a return probe's stub (kretprobe_find_ret_addr())
 *   oC    pop b, pop a, push a OP b: C 0 +, 1 -, 2 *, 3 &, 4 |, 5 ^, 6 <<,
 *         7 >> (logical), 8 >> (arithmetic)
 *   ?K    a case: the top (the key) equal to K: pop it and run the steps
 *         that follow, up to the next case or "!"; else skip them
 *   !     the end of the cases: with none taken the value is unavailable
 *         (optimized out); else the case's value goes on
 * on a stack of at most SPEC_PLAN_DEPTH values, the result on top; or "@-":
 * optimized out at this point.  Cases pick a value by a key computed at
 * the hit (a parameter's value at the function's entry by the return
 * address: the caller's call site); one group of them, each case starting
 * and ending with one value on the stack. */
#ifndef KPROBE_SPEC_H
#define KPROBE_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SPEC_MAX_ARGS 8
#define SPEC_NAME_MAX 32
#define SPEC_TEXT_MAX 512

enum spec_kind {
	SPEC_SYMBOL,	/* SYMBOL[+OFFSET], SYMBOL may be a glob */
	SPEC_ADDRESS,	/* 0xADDRESS: absolute, or an ELF vaddr of OBJECT */
	SPEC_LINE,	/* FILE:LINE */
	SPEC_TRACEPOINT,	/* tp:PROVIDER:NAME, either may be a glob */
	SPEC_USDT,	/* usdt:[OBJECT:]PROVIDER:NAME, resolved by the tool */
};

/* f64: a tracepoint's float or double argument.  The narrower integers
 * keep the register's low bits, sign-extended for the s types. */
enum arg_type {
	ARG_X64, ARG_U64, ARG_S64, ARG_STRING, ARG_F64,
	ARG_S32, ARG_U32, ARG_S16, ARG_U16, ARG_S8, ARG_U8,
	ARG_F32,	/* a float's bits in the low 32 bits */
};

/* Where an argument's value comes from: 0..5 for arg1..arg6, the integer
 * arguments (rdi, rsi, rdx, rcx, r8, r9); with f64, 0..7 for arg1..arg8,
 * the floating-point arguments (xmm0..xmm7), which the SysV ABI numbers
 * apart from the integer ones. */
#define ARG_SRC_RETVAL 8
#define ARG_SRC_PLAN 9		/* ops[]: a fetch plan */
#define ARG_SRC_VAR 10		/* expr[]: a DWARF expression, not resolved yet */
#define ARG_SRC_UNAVAIL 11	/* optimized out at this probe point */
#define SPEC_MAX_INT_ARG 6
#define SPEC_MAX_FP_ARG 8

#define SPEC_EXPR_MAX 64
#define SPEC_MAX_OPS 24
#define SPEC_PLAN_DEPTH 4
#define SPEC_MAX_VREG 15

/* One step of a fetch plan, run on the hit path (agent_hit.c). */
enum fetch_kind {
	FETCH_REG = 1,		/* value = DWARF register reg */
	FETCH_CONST,		/* value = k */
	FETCH_ADD,		/* value += k */
	FETCH_LOAD,		/* value = the size bytes at value (fault-safe) */
	FETCH_BINOP,		/* k: enum fetch_binop */
	FETCH_VREG,		/* value = the low 8 bytes of vector register reg */
	FETCH_CASE,		/* key == k: pop it, run this case; else skip it */
	FETCH_JOIN,		/* the end of the cases (no case taken: unavailable) */
	FETCH_RET_ADDR,		/* value = the return address in the slot at value */
};

enum fetch_binop {
	BINOP_ADD, BINOP_SUB, BINOP_MUL, BINOP_AND, BINOP_OR, BINOP_XOR, BINOP_SHL, BINOP_SHR,
	BINOP_SAR, BINOP_COUNT
};

struct fetch_op {
	uint8_t kind;		/* enum fetch_kind */
	uint8_t size;		/* FETCH_LOAD: 1, 2, 4 or 8 */
	uint8_t reg;		/* FETCH_REG: 0..KP_DWARF_PC; FETCH_VREG: 0..15 */
	int64_t k;
};

/* A plan of the shape nearly every variable compiles to, a register and
 * then pointer hops (rN [+K] *S [+K] *S ... [+K]), compiled by
 * spec_plan_compile() for the hit path: value = register; per hop, value =
 * the size[i] bytes at value + add[i]; value += last.  One load per hop,
 * nothing interpreted. */
#define SPEC_MAX_HOPS 6

struct fetch_chain {
	uint8_t ok;		/* the plan has this shape, offsets within 32 bits */
	uint8_t reg;		/* DWARF register 0..KP_DWARF_PC */
	uint8_t nhops;
	uint8_t size[SPEC_MAX_HOPS];	/* 1, 2, 4 or 8 */
	int32_t add[SPEC_MAX_HOPS];
	int32_t last;
};

/* The names of an enum's values, for printing (the tool's own, from
 * DWARF: never sent, never parsed). */
struct spec_enum {
	int n;
	const int64_t *values;
	const char *const *names;
};

struct spec_arg {
	char name[SPEC_NAME_MAX];
	uint8_t src;		/* argN - 1, ARG_SRC_RETVAL, ARG_SRC_PLAN... */
	uint8_t type;		/* enum arg_type */
	uint8_t typed;		/* the user gave :TYPE */
	uint8_t nops;		/* ARG_SRC_PLAN */
	struct fetch_op ops[SPEC_MAX_OPS];
	struct fetch_chain chain;	/* ARG_SRC_PLAN: ops[] compiled, when it can be */
	/* The tool's own note, not sent: an enum's names to print the
	 * value by (a variable of an enum type, no :TYPE given). */
	const struct spec_enum *enums;
	char expr[SPEC_EXPR_MAX];	/* ARG_SRC_VAR */
};

struct probe_spec {
	enum spec_kind kind;
	char object[256];	/* empty: every object, main executable first */
	char symbol[256];	/* SPEC_SYMBOL: name or glob; SPEC_LINE: file;
				 * SPEC_TRACEPOINT: "provider:name" */
	unsigned long offset;	/* SPEC_SYMBOL: +OFFSET */
	uintptr_t address;	/* SPEC_ADDRESS */
	uintptr_t semaphore;	/* SPEC_ADDRESS: %sem=, 0: none */
	unsigned int line;	/* SPEC_LINE */
	bool is_return;		/* %return */
	int nargs;
	struct spec_arg args[SPEC_MAX_ARGS];
	char text[SPEC_TEXT_MAX];	/* canonical text, as the agent receives it */
	/* The tool's own note, not sent: this probe is an inlined copy of
	 * that function (at OBJECT:0xADDRESS, which names its caller). */
	char inlined_of[SPEC_NAME_MAX * 2];
	/* The tool's own note, not sent: the name to show this probe by
	 * instead of the agent's ("usdt:PROVIDER:NAME"). */
	char label[120];
	/* kprobe run: this spec is the first of the N specs of one probe of
	 * the program, the sites of a usdt probe or the functions a C++ name
	 * matches (the config says so in a "sites N" line before it); 0 for
	 * every other spec. */
	uint16_t sites;
};

/* Compiles a's plan (ops[]) into a->chain when it has the chain's shape
 * (a->chain.ok); parsing a plan does it. */
void spec_plan_compile(struct spec_arg *a);

/* Whether a's plan picks its value among cases (spec.h): a plan that ran
 * and failed then means no case applied (optimized out), not a fault. */
bool spec_plan_has_cases(const struct spec_arg *a);

/* Whether a command-line token is an ARG rather than the start of a probe. */
bool spec_token_is_arg(const char *tok);

/* Parses the probe location token (no args) into s.  On error returns
 * -EINVAL and writes a one-line reason to err. */
int spec_parse_location(const char *tok, struct probe_spec *s, char *err, size_t errlen);

/* Parses one ARG token and appends it to s. */
int spec_add_arg(struct probe_spec *s, const char *tok, char *err, size_t errlen);

/* Parses a whole probe given as one string: "LOCATION ARG ARG ...". */
int spec_parse(const char *text, struct probe_spec *s, char *err, size_t errlen);

/* Fills s->text with the canonical form that spec_parse() reads back;
 * -ENAMETOOLONG when it does not fit (SPEC_TEXT_MAX - 1 characters). */
int spec_format(struct probe_spec *s);
/* The error for a probe whose text does not fit; returns -EINVAL. */
int spec_too_long(const struct probe_spec *s, char *err, size_t errlen);

/* Whether the spec has ARGs naming program variables (ARG_SRC_VAR). */
bool spec_has_vars(const struct probe_spec *s);

/* Whether the symbol part is a glob (matches a set of functions). */
bool spec_is_glob(const struct probe_spec *s);

const char *spec_type_name(enum arg_type t);

/* An integer type's value from the 64 bits read for it: truncated to the
 * type's width, sign-extended if signed (other types: unchanged). */
uint64_t spec_int_value(enum arg_type t, uint64_t raw);
/* Whether the integer type is signed (s64, s32, s16, s8). */
bool spec_type_is_signed(enum arg_type t);
/* Whether values of the type print as decimal integers. */
bool spec_type_is_decimal(enum arg_type t);
/* Whether the type is floating point (f64, f32: read from a vector
 * register when it is an argument or the return value). */
static inline bool spec_type_is_float(uint8_t t)
{
	return t == ARG_F64 || t == ARG_F32;
}

#endif
