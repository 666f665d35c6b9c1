/*
 * Installing and removing the jump of an optimized probe, through
 * text_poke_bp(): the int3 is already at byte 0; bytes 1..4 (the rel32),
 * cores synchronized, byte 0 (0xe9), synchronized.  Threads that hit the
 * int3 meanwhile are routed through the detour by the trap handler.
 * Removal puts the int3 back first, then the original bytes under it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "arch/arch.h"
#include "arch/x86_64/detour.h"
#include "arch/x86_64/optcheck.h"
#include "arch/x86_64/text_poke.h"
#include "arch/x86_64/xol.h"
#include "core/arch_api.h"
#include "os/linux/memory.h"

#define INT3 0xcc

int arch_opt_analyse_pp(struct kp_probepoint *pp)
{
	if (!pp->ainsn.opt) {
		pp->ainsn.opt = calloc(1, sizeof(*pp->ainsn.opt));
		if (!pp->ainsn.opt)
			return -ENOMEM;
		int err = arch_opt_analyse(pp->ainsn.opt, pp->addr, pp->func, pp->func_size,
					   pp->pad_after, arch_read_original);
		if (err) {
			free(pp->ainsn.opt);
			pp->ainsn.opt = NULL;
			return err;
		}
	}
	return pp->ainsn.opt->ok ? 0 : -EINVAL;
}

const char *arch_opt_why(const struct kp_probepoint *pp)
{
	return pp->ainsn.opt ? pp->ainsn.opt->why : NULL;
}

uint8_t arch_opt_region_len(const struct kp_probepoint *pp)
{
	return pp->ainsn.opt && pp->ainsn.opt->ok ? pp->ainsn.opt->region_len : 1;
}

/* Where threads must not be while the jump goes in: inside the region
 * (past byte 0), and in the slot, whose code jumps back into the region. */
int arch_opt_census_ranges(const struct kp_probepoint *pp, uintptr_t (*r)[2])
{
	uintptr_t lo = pp->addr + 1, hi = pp->addr + pp->ainsn.opt->region_len;
	int n = 0, m;

	r[n][0] = lo;
	r[n][1] = hi;
	n++;
	r[n][0] = pp->ainsn.slot->code;
	r[n][1] = pp->ainsn.slot->code + XOL_SLOT_SIZE;
	n++;
	/* The slots of disabled or unregistered probepoints inside the
	 * region: a thread still in one jumps back into the region. */
	for (uintptr_t a = lo; a < hi; a++) {
		const struct kp_probepoint *o = kp_probepoint_lookup(a);

		if (o && o->ainsn.slot) {
			r[n][0] = o->ainsn.slot->code;
			r[n][1] = o->ainsn.slot->code + XOL_SLOT_SIZE;
			n++;
		}
	}
	/* Retired slots from pp->addr on: an earlier probepoint at this very
	 * address left one whose copy of the first instruction jumps back to
	 * pp->addr + its length, inside the region. */
	m = xol_retired_into(pp->addr, hi, r + n, ARCH_OPT_CENSUS_MAX - n);
	if (m < 0) {
		/* Too many to list: no thread may be anywhere. */
		r[0][0] = 0;
		r[0][1] = UINTPTR_MAX;
		return 1;
	}
	return n + m;
}

/* The jump of an optimized probepoint over its breakpoint (install), or
 * the breakpoint and the original bytes back under it (remove). */
static void jump_poke(const struct kp_probepoint *pp, bool install, struct text_poke *tp)
{
	const struct arch_opt *o = pp->ainsn.opt;

	tp->addr = pp->addr;
	tp->skip = false;
	tp->len = ARCH_OPT_JUMP_LEN;
	tp->resume = 0;
	tp->obj = &pp->obj;
	if (install) {
		int32_t rel = (int32_t)(o->detour - (pp->addr + ARCH_OPT_JUMP_LEN));

		tp->bp_in_place = true;
		tp->bytes[0] = JMP_REL32;
		memcpy(tp->bytes + 1, &rel, 4);
	} else {
		tp->bp_in_place = false;
		tp->bytes[0] = INT3;
		memcpy(tp->bytes + 1, o->orig + 1, ARCH_OPT_JUMP_LEN - 1);
	}
}

static void jump_install_poke(const struct text_poke_batch *b, int i, struct text_poke *tp)
{
	jump_poke(((struct kp_probepoint *const *)b->ctx)[i], true, tp);
}

static void jump_remove_poke(const struct text_poke_batch *b, int i, struct text_poke *tp)
{
	jump_poke(((struct kp_probepoint *const *)b->ctx)[i], false, tp);
}

/* Removing never stops half-way: every jump that can be removed must be. */
static int remove_jumps(struct kp_probepoint **pps, int n)
{
	struct text_poke_batch b = { .n = n, .get = jump_remove_poke, .ctx = pps,
				     .keep_going = true };

	return text_poke_bp(&b);
}

int arch_optimize(struct kp_probepoint **pps, int n)
{
	struct text_poke_batch b = { .n = n, .get = jump_install_poke, .ctx = pps };
	int err = text_poke_bp(&b);

	if (err) {
		/* All or none: no probepoint of the batch may stay with the
		 * jump's displacement over its code (or a jump the caller does
		 * not know about), breakpoint byte first as in unoptimizing. */
		remove_jumps(pps, n);
		return err;
	}
	for (int i = 0; i < n; i++)
		pps[i]->ainsn.opt->jumped = true;
	return 0;
}

/* Never stops half-way: the caller treats the whole batch as unoptimized
 * whatever happens, so every jump that can be removed must be. */
int arch_unoptimize(struct kp_probepoint **pps, int n)
{
	int err = remove_jumps(pps, n);

	for (int i = 0; i < n; i++)
		pps[i]->ainsn.opt->jumped = false;
	return err;
}

/* Would a probe at addr (in [func, func+size), pad bytes of padding after)
 * be optimized?  NULL, or the reason why not.  Registers nothing. */
const char *arch_opt_check(uintptr_t addr, uintptr_t func, size_t size, size_t pad)
{
	struct arch_opt o;
	struct arch_insn ai;
	uint8_t buf[KP_MAX_INSN];
	size_t avail = size && func + size - addr < sizeof(buf) ? func + size - addr : sizeof(buf);
	const char *why;

	memset(&o, 0, sizeof(o));
	if (arch_read_original(addr, buf, avail))
		return "unreadable code";
	if (insn_analyze(&ai, addr, buf, avail, &why))
		return why ? why : "unprobeable instruction";
	if (arch_opt_analyse(&o, addr, func, size, pad, arch_read_original))
		return "out of memory";
	return o.ok ? NULL : o.why;
}
