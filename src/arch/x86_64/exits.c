/*
 * Where a function returns: its exit sites (kprobes_exit_sites()).
 *
 * An exit site is the first instruction of a straight run that ends in
 * one of the function's ways out (a ret, or a jump out of the function: a
 * tail call) with nothing in between that control can enter or leave by:
 * no branch target after the site, no branch or call before the exit.  So
 * every return of the function through that exit passes the site exactly
 * once, and no other way reaches the exit.  A probe on each site counts the
 * function's returns without touching its return address.
 *
 * The function is decoded as the jump analysis decodes it (optcheck.c),
 * with every branch target it found: the function's own, those of the rest
 * of its object, and the cases of the switch tables it could read.  It has
 * no exit sites (-EOPNOTSUPP) when a way out is not such a run's end: a
 * conditional branch out of the function, an indirect jump whose targets
 * are not all known, code that does not decode; when code elsewhere jumps
 * into its middle (a return of a call that did not enter the function,
 * another function's sharing its tail, would pass a site); and when the
 * function around a tail call's target branches back into it (a part the
 * compiler moved away that comes back: one return would pass two sites).
 * A branch from elsewhere that lands where the function's own branches do
 * cannot be told from them: such a shared tail goes unseen.
 */
#include <errno.h>
#include <stdlib.h>
#include <Zydis/Zydis.h>

#include "arch/arch.h"
#include "arch/x86_64/coderefs.h"
#include "arch/x86_64/optcheck.h"
#include "core/arch_api.h"

/* Tail calls' targets checked per function, at most; more: refused. */
#define MAX_TAILS 16
/* Code decoded per tail call's target function, at most. */
#define MAX_TARGET_FUNC (256u * 1024)

/* What an instruction does to the run it is in. */
enum flow {
	FLOW_ON,	/* the run goes on */
	FLOW_CUT,	/* the run ends here, no exit (a branch inside, a call, a trap) */
	FLOW_EXIT,	/* the run ends in a way out of the function */
	FLOW_REFUSE,	/* a way out that no run can end in */
};

static bool inside(uintptr_t v, uintptr_t func, size_t size)
{
	return v >= func && v - func < size;
}

static bool is_target(const struct opt_targets *t, uintptr_t pc)
{
	size_t a = 0, b = t->n;

	while (a < b) {
		size_t m = (a + b) / 2;

		if (t->v[m] < pc)
			a = m + 1;
		else
			b = m;
	}
	return a < t->n && t->v[a] == pc;
}

static enum flow flow_of(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *ops,
			 uintptr_t pc, uintptr_t func, size_t size)
{
	ZyanU64 target;

	switch (in->meta.category) {
	case ZYDIS_CATEGORY_RET:
		return FLOW_EXIT;
	case ZYDIS_CATEGORY_CALL:
		return FLOW_CUT;
	case ZYDIS_CATEGORY_UNCOND_BR:
	case ZYDIS_CATEGORY_COND_BR:
		/* An indirect jump here is a switch whose cases the analysis
		 * read (any other made the function refused already). */
		if (ops[0].type != ZYDIS_OPERAND_TYPE_IMMEDIATE || !ops[0].imm.is_relative)
			return in->meta.category == ZYDIS_CATEGORY_UNCOND_BR ? FLOW_CUT : FLOW_REFUSE;
		if (!ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(in, &ops[0], pc, &target)))
			return FLOW_REFUSE;
		if (inside((uintptr_t)target, func, size))
			return FLOW_CUT;
		return in->meta.category == ZYDIS_CATEGORY_UNCOND_BR ? FLOW_EXIT : FLOW_REFUSE;
	default:
		break;
	}
	switch (in->mnemonic) {
	case ZYDIS_MNEMONIC_IRET:
	case ZYDIS_MNEMONIC_IRETD:
	case ZYDIS_MNEMONIC_IRETQ:
		return FLOW_REFUSE;
	case ZYDIS_MNEMONIC_HLT:
	case ZYDIS_MNEMONIC_UD0:
	case ZYDIS_MNEMONIC_UD1:
	case ZYDIS_MNEMONIC_UD2:
	case ZYDIS_MNEMONIC_INT3:
		return FLOW_CUT;
	default:
		return FLOW_ON;
	}
}

/* Branch targets in (lo, hi) from the rest of the object: code_refs_into()
 * reports them one by one, into a flag (under the registry lock). */
static bool entered;

static int note_entry(uintptr_t target)
{
	(void)target;
	entered = true;
	return 0;
}

/* Whether a branch of the object lands inside the function other than at
 * one of the function's own branch targets (what lands on one of those
 * is taken as the function's own: the decoding cannot tell them apart). */
static bool entered_from_outside(uintptr_t func, size_t size, const uintptr_t *own, size_t nown)
{
	uintptr_t lo = func + 1;

	/* between two of its own targets at a time: what lands exactly on
	 * one of them is the function's own (or harmless: a run starts there) */
	for (size_t i = 0; i <= nown; i++) {
		uintptr_t hi = i < nown ? own[i] : func + size;

		entered = false;
		if (hi > lo && code_refs_into(lo, hi, CODE_REF_BRANCH, arch_read_original, note_entry))
			return true;
		if (entered)
			return true;
		lo = (i < nown ? own[i] : func + size) + 1;
	}
	return false;
}

static int cmp_addr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

	return x < y ? -1 : x > y;
}

/* The sweep over the decoded function: sites of its runs' exits, and its
 * own direct branch targets inside it (for entered_from_outside). */
struct sweep {
	uintptr_t *sites;
	int max, n;
	uintptr_t tails[MAX_TAILS];	/* where its jumps out of the function go */
	int ntails;
	uintptr_t *own;
	size_t nown, cap;
};

static int own_target(struct sweep *w, const ZydisDecodedInstruction *in,
		      const ZydisDecodedOperand *ops, uintptr_t pc, uintptr_t func, size_t size)
{
	ZyanU64 target;

	if (in->meta.branch_type == ZYDIS_BRANCH_TYPE_NONE ||
	    ops[0].type != ZYDIS_OPERAND_TYPE_IMMEDIATE || !ops[0].imm.is_relative ||
	    !ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(in, &ops[0], pc, &target)) ||
	    !inside((uintptr_t)target, func, size))
		return 0;
	if (w->nown == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 64;
		uintptr_t *v = realloc(w->own, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		w->own = v;
		w->cap = cap;
	}
	w->own[w->nown++] = (uintptr_t)target;
	return 0;
}

static int sweep(struct sweep *w, const struct opt_targets *t, const uint8_t *code,
		 uintptr_t func, size_t size)
{
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	ZydisDecodedInstruction in;
	ZydisDecoder dec;
	uintptr_t leader = func;
	bool new_run = false;

	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	for (size_t off = 0; off < size; off += in.length) {
		uintptr_t pc = func + off;

		if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, code + off, size - off, &in, ops)))
			return -EOPNOTSUPP;
		if (new_run || is_target(t, pc))
			leader = pc;
		new_run = false;
		if (own_target(w, &in, ops, pc, func, size))
			return -ENOMEM;
		switch (flow_of(&in, ops, pc, func, size)) {
		case FLOW_ON:
			continue;
		case FLOW_REFUSE:
			return -EOPNOTSUPP;
		case FLOW_EXIT:
			if (w->n < w->max)
				w->sites[w->n] = leader;
			w->n++;
			if (in.meta.category != ZYDIS_CATEGORY_RET) {
				ZyanU64 to;

				if (w->ntails == MAX_TAILS ||
				    !ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&in, &ops[0], pc, &to)))
					return -EOPNOTSUPP;
				w->tails[w->ntails++] = (uintptr_t)to;
			}
			break;
		case FLOW_CUT:
			break;
		}
		new_run = true;
	}
	return 0;
}

/* Whether the code of the function around a tail call's target (a part
 * of this function the compiler moved away, say) branches back into
 * [func, func+size): a return would then pass the tail call's site and
 * another.  Code in no known function counts as coming back. */
static bool comes_back(uintptr_t target, uintptr_t func, size_t size)
{
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	ZydisDecodedInstruction in;
	ZydisDecoder dec;
	uintptr_t start;
	size_t len;
	uint8_t *code;
	bool back = false;

	if (kp_function_bounds(target, &start, &len) || !len || len > MAX_TARGET_FUNC)
		return true;
	code = malloc(len);
	if (!code || arch_read_original(start, code, len)) {
		free(code);
		return true;
	}
	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	for (size_t off = 0; off < len && !back; off += in.length) {
		ZyanU64 to;

		if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, code + off, len - off, &in, ops))) {
			/* filler that does not decode: stepped over a byte at a time */
			in.length = 1;
			continue;
		}
		back = in.meta.branch_type != ZYDIS_BRANCH_TYPE_NONE &&
		       ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[0].imm.is_relative &&
		       ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&in, &ops[0], start + off, &to)) &&
		       inside((uintptr_t)to, func, size) && in.meta.category != ZYDIS_CATEGORY_CALL;
	}
	free(code);
	return back;
}

int arch_exit_sites(uintptr_t func, size_t size, size_t pad, uintptr_t *sites, int max,
		    bool *tail)
{
	struct sweep w = { .sites = sites, .max = max };
	struct opt_targets t;
	int err;

	*tail = false;
	/* the code and its branch targets, as the jump analysis read them */
	err = arch_opt_function_targets(func, size, pad, arch_read_original, &t);
	if (err)
		return err;
	if (t.why || t.indirect)
		return -EOPNOTSUPP;
	err = sweep(&w, &t, t.code, func, size);
	if (!err) {
		if (w.nown)
			qsort(w.own, w.nown, sizeof(*w.own), cmp_addr);
		if (entered_from_outside(func, size, w.own, w.nown))
			err = -EOPNOTSUPP;
	}
	for (int i = 0; !err && i < w.ntails; i++)
		if (comes_back(w.tails[i], func, size))
			err = -EOPNOTSUPP;
	if (!err)
		err = w.n > max ? -E2BIG : w.n;
	*tail = w.ntails > 0;
	free(w.own);
	return err;
}
