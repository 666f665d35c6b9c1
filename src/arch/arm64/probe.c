/* Preparing, arming and retiring BRK probepoints on arm64. */
#include <errno.h>
#include <string.h>

#include "arch/arch.h"
#include "arch/arm64/insn.h"
#include "arch/arm64/optimize.h"
#include "arch/arm64/text_poke.h"
#include "arch/arm64/xol.h"
#include "core/arch_api.h"
#include "os/linux/memory.h"

/* How far before a probe the exclusive-sequence check looks, in words (a
 * load-exclusive/store-exclusive loop is a handful of instructions). */
#define EXCL_WINDOW A64_EXCLUSIVE_WINDOW

/* The original word at addr, given the word seen there: the probed
 * instruction under our BRK, a static-key site's NOP whatever its key
 * makes of it, else the word itself. */
static uint32_t original_word(uintptr_t addr, uint32_t seen)
{
	struct kp_probepoint *pp = kp_probepoint_lookup(addr);

	if (pp && pp->armed)
		return pp->ainsn.insn;
	if (kp_jl_site_covering(addr))
		return A64_NOP;
	return seen;
}

int arch_read_original(uintptr_t addr, uint8_t *buf, size_t len)
{
	for (uintptr_t w = addr & ~(uintptr_t)3; w < addr + len; w += 4) {
		uint32_t word;

		if (kp_mem_read_nofault(w, &word, 4))
			return -EFAULT;
		word = original_word(w, word);
		for (unsigned int k = 0; k < 4; k++)
			if (w + k >= addr && w + k < addr + len)
				buf[w + k - addr] = (uint8_t)(word >> (8 * k));
	}
	return 0;
}

/* n original words from addr: 0 or -EFAULT. */
static int read_original(uintptr_t addr, uint32_t *words, size_t n)
{
	if (kp_mem_read_nofault(addr, words, n * 4))
		return -EFAULT;
	for (size_t i = 0; i < n; i++)
		words[i] = original_word(addr + 4 * i, words[i]);
	return 0;
}

/* Every word is an instruction: a boundary is a multiple of four from a
 * known instruction start, inside the range. */
int arch_check_boundary(uintptr_t start, size_t len, uintptr_t addr)
{
	uint32_t w;

	if (addr < start || addr >= start + len || (addr - start) % 4)
		return -EILSEQ;
	return read_original(addr, &w, 1);
}

/* Whether the probe at addr would sit inside an exclusive load/store
 * sequence: the words before it in its function (or up to EXCL_WINDOW
 * back when the function is not known) are read and checked. */
static bool in_exclusive_sequence(uintptr_t addr, uintptr_t func, size_t size)
{
	uint32_t code[EXCL_WINDOW + 1];
	uintptr_t from = addr - 4 * EXCL_WINDOW;
	size_t n;

	if (size && func <= addr && addr < func + size && func > from)
		from = func;
	if (from > addr)
		from = addr & ~(uintptr_t)3;
	n = (addr - from) / 4;
	/* Nothing readable before addr: only the word itself. */
	while (n && read_original(from, code, n + 1)) {
		from += 4;
		n--;
	}
	if (read_original(from, code, n + 1))
		return false;
	return a64_in_exclusive_sequence(code, n + 1, n);
}

int arch_prepare_probepoint(struct kp_probepoint *pp, uintptr_t func, size_t size)
{
	struct arch_insn *ai = &pp->ainsn;

	if (pp->addr & 3)
		return -EILSEQ;
	if (size && (pp->addr < func || pp->addr >= func + size || (pp->addr - func) % 4))
		return -EILSEQ;
	if (read_original(pp->addr, &ai->insn, 1))
		return -EINVAL;
	if (a64_insn_decode(ai->insn, &ai->dec))
		return -EINVAL;
	if (in_exclusive_sequence(pp->addr, func, size))
		return -EINVAL;
	ai->slot = NULL;
	if (ai->dec.kind == A64_INSN_XOL)
		return xol_build(&ai->slot, ai->insn, pp->addr, pp);
	return 0;
}

void a64_retire_rest(struct kp_probepoint *pp)
{
	if (pp->ainsn.slot)
		xol_retire(pp->ainsn.slot);
	else
		kp_probepoint_free(pp);
}

/* A detour first (its threads come back to addr + 4, not through the
 * slot), then the slot, which frees pp. */
void arch_retire_probepoint(struct kp_probepoint *pp)
{
	if (!a64_opt_retire(pp))
		a64_retire_rest(pp);
	if (a64_detour_reclaim_due())
		a64_detour_reclaim();
	if (xol_reclaim_due())
		xol_reclaim();
}

/* Arming writes our BRK over the word; disarming puts the word back. */
static bool poke_get(const struct kp_probepoint *pp, bool arm, uintptr_t *addr, uint32_t *insn)
{
	if (pp->armed == arm)
		return false;
	*addr = pp->addr;
	*insn = arm ? ARCH_BREAKPOINT_INSN : pp->ainsn.insn;
	return true;
}

const struct kp_object_id *text_poke_pp_object(const struct text_poke_batch *b, int i)
{
	return &((struct kp_probepoint *const *)b->ctx)[i]->obj;
}

static bool arm_get(const struct text_poke_batch *b, int i, uintptr_t *addr, uint32_t *insn)
{
	return poke_get(((struct kp_probepoint *const *)b->ctx)[i], true, addr, insn);
}

static bool disarm_get(const struct text_poke_batch *b, int i, uintptr_t *addr, uint32_t *insn)
{
	return poke_get(((struct kp_probepoint *const *)b->ctx)[i], false, addr, insn);
}

static void armed_done(const struct text_poke_batch *b, int i)
{
	((struct kp_probepoint *const *)b->ctx)[i]->armed = true;
}

static void disarmed_done(const struct text_poke_batch *b, int i)
{
	((struct kp_probepoint *const *)b->ctx)[i]->armed = false;
}

int arch_arm(struct kp_probepoint **pps, int n)
{
	struct text_poke_batch b = { .n = n, .get = arm_get, .done = armed_done,
				     .object = text_poke_pp_object, .ctx = pps };

	return text_poke_batch(&b);
}

int arch_disarm(struct kp_probepoint **pps, int n)
{
	struct text_poke_batch b = { .n = n, .get = disarm_get, .done = disarmed_done,
				     .object = text_poke_pp_object, .ctx = pps };

	return text_poke_batch(&b);
}

/* ---- never-returning functions ---- */

static bool in_ranges(const uintptr_t (*r)[2], int n, uintptr_t a)
{
	for (int i = 0; i < n; i++)
		if (a >= r[i][0] && a < r[i][1])
			return true;
	return false;
}

static int64_t sext(uint64_t v, int bits)
{
	return (int64_t)(v << (64 - bits)) >> (64 - bits);
}

/* A word that leaves the ranges or may return: RET and BR (every form),
 * or a direct branch whose target is outside; *stops: nothing after it
 * runs (an unconditional branch, BRK, UDF). */
static bool leaves(uint32_t w, uintptr_t pc, const uintptr_t (*r)[2], int n, bool *stops)
{
	uintptr_t target;

	*stops = false;
	if ((w & 0xfe1f0000u) == 0xd61f0000u && ((w >> 21) & 0x7) != 1) {
		/* BR, RET, ERET and their authenticated forms (not BLR) */
		return true;
	}
	if ((w & 0xfc000000u) == 0x14000000u) {		/* B */
		*stops = true;
		target = pc + (uintptr_t)(sext(w & 0x03ffffffu, 26) * 4);
		return !in_ranges(r, n, target);
	}
	if ((w & 0xff000010u) == 0x54000000u ||		/* B.cond */
	    (w & 0x7e000000u) == 0x34000000u) {		/* CBZ, CBNZ */
		target = pc + (uintptr_t)(sext((w >> 5) & 0x7ffffu, 19) * 4);
		return !in_ranges(r, n, target);
	}
	if ((w & 0x7e000000u) == 0x36000000u) {		/* TBZ, TBNZ */
		target = pc + (uintptr_t)(sext((w >> 5) & 0x3fffu, 14) * 4);
		return !in_ranges(r, n, target);
	}
	if ((w & 0xffe0001fu) == 0xd4200000u || (w & 0xffff0000u) == 0)	/* BRK, UDF */
		*stops = true;
	return false;
}

bool arch_code_never_returns(const uintptr_t (*ranges)[2], int n)
{
	for (int i = 0; i < n; i++) {
		bool stops = false;

		if (ranges[i][1] <= ranges[i][0] || (ranges[i][0] | ranges[i][1]) & 3)
			return false;
		for (uintptr_t pc = ranges[i][0]; pc < ranges[i][1]; pc += 4) {
			uint32_t w;

			if (read_original(pc, &w, 1) || leaves(w, pc, ranges, n, &stops))
				return false;
		}
		/* running off the end of a range */
		if (!stops)
			return false;
	}
	return n > 0;
}

extern char __start_kprobes_text[] __attribute__((weak));
extern char __stop_kprobes_text[] __attribute__((weak));

void arch_trap_path_range(uintptr_t *lo, uintptr_t *hi)
{
	*lo = (uintptr_t)__start_kprobes_text;
	*hi = (uintptr_t)__stop_kprobes_text;
}
