/*
 * Can the probe at addr be replaced by a 5-byte jump?  As Kprobes does:
 * the replaced instructions lie in one function, each can run from the
 * detour, and no branch of the function lands inside the region (bytes
 * 1..len-1).  The whole function is decoded and every branch target
 * collected.  The cases of switch tables in GCC's PIC pattern are read
 * from the table.  Any other indirect jump (an indirect tail call, a
 * non-PIC switch table, a computed goto) can only land on a code address
 * the program holds somewhere: either the function's own code computes it
 * (an immediate, a displacement or a RIP-relative address inside the
 * function: then its targets are unknown and the function is refused), or
 * it lies in the object's memory, as initialised data (tables of case or
 * label addresses, function pointers).  So the code addresses found in the
 * object's memory that fall inside the function count as its targets.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <Zydis/Zydis.h>

#include "arch/x86_64/coderefs.h"
#include "core/arch_api.h"
#include "arch/x86_64/optcheck.h"
#include "os/linux/memory.h"

#define MAX_FUNC (256u * 1024)
#define HISTORY 16
#define MAX_CASES 4096

struct decoded {
	uintptr_t pc;
	ZydisDecodedInstruction in;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
};

/* Branch targets of the last function analysed (sorted), so that probing
 * many instructions of one function decodes it once. */
static struct {
	uintptr_t func;
	size_t size;
	uint8_t *code;
	uintptr_t *targets;
	size_t ntargets, cap;
	const char *why;	/* the function as a whole cannot be optimized */
	bool indirect;		/* an indirect jump whose targets are not all known */
	bool own_address;	/* the code computes an address inside the function */
} fcache;

typedef int (*read_fn)(uintptr_t addr, uint8_t *buf, size_t len);

static ZydisDecoder decoder;

static void decoder_init(void)
{
	static bool ready;

	if (!ready) {
		ZydisDecoderInit(&decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
		ready = true;
	}
}

static int add_target(uintptr_t t)
{
	if (fcache.ntargets == fcache.cap) {
		size_t cap = fcache.cap ? fcache.cap * 2 : 64;
		uintptr_t *n = realloc(fcache.targets, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		fcache.targets = n;
		fcache.cap = cap;
	}
	fcache.targets[fcache.ntargets++] = t;
	return 0;
}

static ZydisRegister reg64(ZydisRegister r)
{
	return ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r);
}

static const struct decoded *history_at(const struct decoded *h, int n, int back)
{
	return back < n ? &h[(n - 1 - back) % HISTORY] : NULL;
}

/* Number of cases of a switch whose index register is idx, from the
 * "cmp $N, idx; ja default" that guards it. */
static int switch_cases(const struct decoded *h, int n, ZydisRegister idx)
{
	for (int back = 0; back < HISTORY && back < n; back++) {
		const struct decoded *d = history_at(h, n, back);

		if (d->in.mnemonic == ZYDIS_MNEMONIC_CMP &&
		    d->ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    reg64(d->ops[0].reg.value) == idx &&
		    d->ops[1].type == ZYDIS_OPERAND_TYPE_IMMEDIATE) {
			uint64_t v = d->ops[1].imm.value.u;

			return v < MAX_CASES ? (int)v + 1 : -1;
		}
	}
	return -1;
}

/* GCC's PIC switch: lea T(%rip),%b; movslq (%b,%i,4),%r; add %b,%r; jmp *%r.
 * Adds every case target; -EINVAL when the pattern is not recognised. */
static int recover_jump_table(const struct decoded *h, int n, ZydisRegister jreg)
{
	ZydisRegister base = ZYDIS_REGISTER_NONE, idx = ZYDIS_REGISTER_NONE;
	uintptr_t table = 0;
	int cases, back;

	for (back = 1; back < HISTORY && back < n; back++) {
		const struct decoded *d = history_at(h, n, back);

		if (d->in.mnemonic == ZYDIS_MNEMONIC_MOVSXD && reg64(d->ops[0].reg.value) == jreg &&
		    d->ops[1].type == ZYDIS_OPERAND_TYPE_MEMORY && d->ops[1].mem.scale == 4) {
			base = d->ops[1].mem.base;
			idx = reg64(d->ops[1].mem.index);
			break;
		}
	}
	for (back++; base != ZYDIS_REGISTER_NONE && back < HISTORY && back < n; back++) {
		const struct decoded *d = history_at(h, n, back);

		if (d->in.mnemonic == ZYDIS_MNEMONIC_LEA && d->ops[0].reg.value == base &&
		    d->ops[1].mem.base == ZYDIS_REGISTER_RIP) {
			ZydisCalcAbsoluteAddress(&d->in, &d->ops[1], d->pc, (ZyanU64 *)&table);
			break;
		}
	}
	cases = table ? switch_cases(h, n, idx) : -1;
	if (cases < 0)
		return -EINVAL;
	for (int i = 0; i < cases; i++) {
		int32_t rel;

		if (kp_mem_read_nofault(table + 4 * (uintptr_t)i, &rel, 4) || add_target(table + rel))
			return -EINVAL;
	}
	return 0;
}

/* One instruction of the scan: collect where it can branch to. */
static const char *scan_one(struct decoded *h, int n)
{
	const struct decoded *d = history_at(h, n, 0);
	const ZydisDecodedOperand *op = &d->ops[0];
	uintptr_t target;

	if (d->in.meta.category != ZYDIS_CATEGORY_UNCOND_BR &&
	    d->in.meta.category != ZYDIS_CATEGORY_COND_BR &&
	    d->in.meta.category != ZYDIS_CATEGORY_CALL)
		return NULL;
	if (op->type == ZYDIS_OPERAND_TYPE_IMMEDIATE && op->imm.is_relative) {
		ZydisCalcAbsoluteAddress(&d->in, op, d->pc, (ZyanU64 *)&target);
		return add_target(target) ? "out of memory" : NULL;
	}
	if (d->in.meta.category == ZYDIS_CATEGORY_CALL)
		return NULL;	/* indirect calls return to the next instruction */
	if (op->type == ZYDIS_OPERAND_TYPE_REGISTER &&
	    recover_jump_table(h, n, reg64(op->reg.value)) == 0)
		return NULL;
	/* Any other indirect jump: its targets are addresses the program
	 * holds (see the top of this file), checked once the whole function
	 * is decoded. */
	fcache.indirect = true;
	return NULL;
}

static bool inside_function(uint64_t v, uintptr_t func, size_t size)
{
	return v >= func && v - func < size;
}

/* Does the instruction compute an address inside the function (other than
 * as a direct branch's target)?  Immediates and displacements count, and
 * so do RIP-relative operands, the way position-independent code takes a
 * label's address. */
static bool takes_own_address(const struct decoded *d, uintptr_t func, size_t size)
{
	for (int i = 0; i < d->in.operand_count; i++) {
		const ZydisDecodedOperand *op = &d->ops[i];
		ZyanU64 abs;

		if (op->type == ZYDIS_OPERAND_TYPE_IMMEDIATE && !op->imm.is_relative &&
		    inside_function(op->imm.value.u, func, size))
			return true;
		if (op->type != ZYDIS_OPERAND_TYPE_MEMORY || !op->mem.disp.has_displacement)
			continue;
		if (op->mem.base == ZYDIS_REGISTER_RIP) {
			if (ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&d->in, op, d->pc, &abs)) &&
			    inside_function(abs, func, size))
				return true;
		} else if (inside_function((uint64_t)op->mem.disp.value, func, size)) {
			return true;
		}
	}
	return false;
}

static int cmp_addr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

	return x < y ? -1 : x > y;
}

/* Branch targets from outside the function: the direct branches of the
 * rest of its object, and for an indirect jump the code addresses the
 * object holds (see the top of this file).  Code in no loaded object has
 * neither known. */
static const char *targets_from_outside(uintptr_t func, read_fn read_code)
{
	int err = code_refs_into(func, func + fcache.size, CODE_REF_BRANCH, read_code, add_target);

	if (err && err != -ENOENT)
		return err == -ENOMEM ? "out of memory" : "object code unreadable";
	if (!fcache.indirect)
		return NULL;
	if (fcache.own_address)
		return "indirect jump in a function that computes its own code addresses";
	err = code_refs_into(func, func + fcache.size, CODE_REF_HELD, read_code, add_target);
	return err == -ENOMEM ? "out of memory" : err ? "indirect jump with unknown targets" : NULL;
}

static const char *scan_function(uintptr_t func, size_t size, const uint8_t *code,
				 read_fn read_code)
{
	struct decoded *h = calloc(HISTORY, sizeof(*h));
	const char *why = NULL;
	size_t off = 0;
	int n = 0;

	if (!h)
		return "out of memory";
	while (off < size && !why) {
		struct decoded *d = &h[n % HISTORY];

		if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&decoder, code + off, size - off,
							 &d->in, d->ops))) {
			why = "undecodable bytes in the function";
			break;
		}
		d->pc = func + off;
		n++;
		why = scan_one(h, n);
		fcache.own_address |= takes_own_address(d, func, size);
		off += d->in.length;
	}
	free(h);
	if (!why)
		why = targets_from_outside(func, read_code);
	if (fcache.ntargets)
		qsort(fcache.targets, fcache.ntargets, sizeof(uintptr_t), cmp_addr);
	return why;
}

/* The cached analysis still describes the code around addr? */
static bool fcache_valid(uintptr_t func, size_t size, uintptr_t addr, read_fn read_code)
{
	uint8_t now[32];
	size_t len = func + size - addr < sizeof(now) ? func + size - addr : sizeof(now);

	return fcache.code && fcache.func == func && fcache.size == size &&
	       read_code(addr, now, len) == 0 && !memcmp(now, fcache.code + (addr - func), len);
}

static int analyse_function(uintptr_t func, size_t size, size_t pad, uintptr_t addr,
			    read_fn read_code)
{
	uint8_t *code;

	if (fcache_valid(func, size, addr, read_code))
		return 0;
	free(fcache.code);
	fcache.code = NULL;
	fcache.ntargets = 0;
	fcache.indirect = fcache.own_address = false;
	code = malloc(size);
	if (!code)
		return -ENOMEM;
	if (read_code(func, code, size)) {
		free(code);
		return -EFAULT;
	}
	fcache.code = code;
	fcache.func = func;
	fcache.size = size;
	/* The padding after the function is kept for choose_region but not
	 * decoded: alignment filler need not be whole instructions. */
	fcache.why = scan_function(func, size - pad, code, read_code);
	return 0;
}

static bool target_inside(uintptr_t lo, uintptr_t hi)
{
	size_t a = 0, b = fcache.ntargets;

	while (a < b) {
		size_t m = (a + b) / 2;

		if (fcache.targets[m] <= lo)
			a = m + 1;
		else
			b = m;
	}
	return a < fcache.ntargets && fcache.targets[a] < hi;
}

static bool ends_flow(const ZydisDecodedInstruction *in)
{
	return in->meta.category == ZYDIS_CATEGORY_RET ||
	       in->meta.category == ZYDIS_CATEGORY_UNCOND_BR;
}

/* Are the len bytes at addr alignment filler: int3s, or NOP instructions
 * (GCC pads with multi-byte NOPs such as 66 2e 0f 1f 84 00 00 00 00 00)
 * starting at addr?  Read as the program has them. */
static bool is_padding(uintptr_t addr, size_t len, read_fn read_code)
{
	uint8_t buf[2 * KP_MAX_INSN];
	size_t have = sizeof(buf), p = 0;

	if (read_code(addr, buf, have)) {
		have = len;
		if (read_code(addr, buf, have))
			return false;
	}
	while (p < len) {
		ZydisDecodedInstruction in;

		if (buf[p] == 0xcc || buf[p] == 0x90) {
			p++;
			continue;
		}
		if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&decoder, NULL, buf + p, have - p, &in)) ||
		    in.mnemonic != ZYDIS_MNEMONIC_NOP)
			return false;
		p += in.length;
	}
	return true;
}

/* Copied instructions run from the detour: plain ones, conditional jumps
 * (re-targeted), a ret/jmp that ends the region, or a call that completes
 * it (completes: the region reaches 5 bytes with it). */
static const char *copyable(const uint8_t *p, size_t left, uintptr_t pc, bool last,
			    bool completes)
{
	struct arch_insn ai;
	const char *why;

	if (insn_analyze(&ai, pc, p, left, &why))
		return why ? why : "unprobeable instruction in the region";
	if (ai.klass == IC_PLAIN || ai.klass == IC_JCC)
		return NULL;
	/* An indirect jump ends the flow as ret does: copied as it is (a
	 * RIP-relative operand re-targeted), it goes where it would have. */
	if (last && (ai.klass == IC_RET || ai.klass == IC_JMP_REL || ai.klass == IC_JMP_IND))
		return NULL;
	/* A call that completes the region is emulated (push the original
	 * return address, jump): the callee returns to the original code at
	 * the region's end, outside the jump, and no thread waits in the
	 * detour for it.  A call through memory is not: a fault in its
	 * operand would come after the push.  A call inside the region would
	 * return into the middle of the jump. */
	if (completes && (ai.klass == IC_CALL_REL || (ai.klass == IC_CALL_IND && !ai.ind.is_mem)))
		return NULL;
	return ai.klass == IC_SYSCALL ? "system call in the region" :
	       ai.klass == IC_CALL_REL || ai.klass == IC_CALL_IND ? "call in the region" :
	       "branch in the region";
}

/* Picks the instructions the jump replaces, from the function's bytes. */
static const char *choose_region(struct arch_opt *o, uintptr_t addr, uintptr_t func,
				 size_t size, const uint8_t *code, size_t avail_after,
				 read_fn read_code)
{
	size_t off = addr - func, covered = 0;
	ZydisDecodedInstruction in;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];

	const char *why;

	o->ncopied = 0;
	while (covered < 5) {
		const uint8_t *p = code + off + covered;
		size_t left = size - off - covered;

		if (left == 0)
			return "function too short for a jump";
		if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&decoder, p, left, &in, ops)))
			return "undecodable instruction in the region";
		if (o->ncopied == OPT_MAX_COPIED)
			return "too many instructions in the region";
		why = copyable(p, left, func + off + covered, ends_flow(&in), covered + in.length >= 5);
		if (why)
			return why;
		o->insn_orig[o->ncopied++] = (uint8_t)covered;
		covered += in.length;
		if (ends_flow(&in) && covered < 5) {
			/* ret/jmp: the rest of the jump may cover padding no
			 * code reaches, as long as no function starts there. */
			if (avail_after < 5 - covered ||
			    !is_padding(func + off + covered, 5 - covered, read_code))
				return "function too short for a jump";
			o->copied_len = (uint8_t)covered;
			o->region_len = 5;
			return NULL;
		}
	}
	o->copied_len = o->region_len = (uint8_t)covered;
	return NULL;
}

#define STATUS_FLAGS (ZYDIS_CPUFLAG_CF | ZYDIS_CPUFLAG_PF | ZYDIS_CPUFLAG_AF | \
		      ZYDIS_CPUFLAG_ZF | ZYDIS_CPUFLAG_SF | ZYDIS_CPUFLAG_OF)

/* Whether the status flags are dead at the start of code: straight-line code from there
 * writes (or leaves undefined) all six before any instruction reads one.
 * Anything that leaves the straight line first counts as a read. */
static bool status_flags_dead(const uint8_t *code, size_t avail)
{
	ZydisAccessedFlagsMask written = 0;
	size_t off = 0;

	for (int n = 0; n < 32 && off < avail; n++) {
		ZydisDecodedInstruction in;
		ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
		const ZydisAccessedFlags *f;

		if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&decoder, code + off, avail - off, &in, ops)))
			return false;
		/* Leaving the straight line, or saving RFLAGS whole (syscall
		 * copies it to r11, int to the signal frame): a read. */
		if (in.meta.branch_type != ZYDIS_BRANCH_TYPE_NONE ||
		    in.meta.category == ZYDIS_CATEGORY_SYSCALL ||
		    in.meta.category == ZYDIS_CATEGORY_INTERRUPT ||
		    in.meta.category == ZYDIS_CATEGORY_RET ||
		    in.meta.category == ZYDIS_CATEGORY_CALL ||
		    in.meta.category == ZYDIS_CATEGORY_FLAGOP)
			return false;
		f = in.cpu_flags;
		if (f && (f->tested & STATUS_FLAGS & ~written))
			return false;
		if (f)
			written |= f->modified | f->set_0 | f->set_1 | f->undefined;
		if ((written & STATUS_FLAGS) == STATUS_FLAGS)
			return true;
		off += in.length;
	}
	return false;
}

/* The function [func, func+size) analysed (or its cached analysis, whose
 * code is checked again around addr): 0 or -errno, and *why, the reason
 * the function as a whole cannot be optimized, or NULL. */
static int function_analysed(uintptr_t func, size_t size, size_t pad_after, uintptr_t addr,
			     read_fn read_code, const char **why)
{
	int err;

	decoder_init();
	*why = NULL;
	if (!size || size > MAX_FUNC) {
		*why = size ? "function too large" : "function bounds unknown";
		return 0;
	}
	err = analyse_function(func, size + pad_after, pad_after, addr, read_code);
	if (!err)
		*why = fcache.why;
	return err;
}

int arch_opt_function_targets(uintptr_t func, size_t size, size_t pad_after, read_fn read_code,
			      struct opt_targets *t)
{
	int err;

	memset(t, 0, sizeof(*t));
	err = function_analysed(func, size, pad_after, func, read_code, &t->why);
	if (err || t->why)
		return err;
	t->code = fcache.code;
	t->v = fcache.targets;
	t->n = fcache.ntargets;
	t->indirect = fcache.indirect;
	return 0;
}

int arch_opt_analyse(struct arch_opt *o, uintptr_t addr, uintptr_t func, size_t size,
		     size_t pad_after, read_fn read_code)
{
	const char *why;
	int err;

	o->ok = false;
	err = function_analysed(func, size, pad_after, addr, read_code, &why);
	if (err || why) {
		o->why = why;
		return err;
	}
	why = choose_region(o, addr, func, size, fcache.code, pad_after, read_code);
	if (!why && target_inside(addr, addr + o->region_len))
		why = "a branch targets the region";
	/* Static-key sites change between a NOP and a jump: never copied, and
	 * their targets count as branch targets whatever the keys are now. */
	if (!why && kp_jl_busy(addr, addr + o->region_len, true))
		why = "a static-key site or its target in the region";
	if (!why)
		memcpy(o->orig, fcache.code + (addr - func), o->region_len);
	o->why = why;
	o->ok = !why;
	o->entry = addr == func;
	o->flags_dead = status_flags_dead(fcache.code + (addr - func), size - (addr - func));
	return 0;
}
