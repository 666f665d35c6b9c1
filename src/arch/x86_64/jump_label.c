/*
 * Rewriting static-key sites: a 5-byte NOP <-> a 5-byte JMP rel32.
 *
 * Through text_poke_bp(), as every code rewrite: int3 on byte 0, cores
 * synchronized, bytes 1..4, synchronized, byte 0, synchronized.  Both
 * forms are one instruction, so no thread can be inside bytes 1..4 and no
 * census is needed; a thread that meets the int3 meanwhile is sent on as
 * the new form would (the trap handler finds the rewrite in progress), or,
 * once it is over, by the key's value.
 */
#include <errno.h>
#include <string.h>

#include "arch/arch.h"
#include "arch/x86_64/text_poke.h"
#include "os/linux/memory.h"

#define INT3 0xcc

const uint8_t arch_jump_label_nop[ARCH_JUMP_LABEL_LEN] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };

static void site_bytes(const struct arch_jl_patch *p, bool jump, uint8_t out[5])
{
	int32_t rel = (int32_t)(p->target - (p->addr + 5));

	if (!jump) {
		memcpy(out, arch_jump_label_nop, 5);
		return;
	}
	out[0] = JMP_REL32;
	memcpy(out + 1, &rel, 4);
}

int arch_jump_label_check(const struct arch_jl_patch *p, int n)
{
	for (int i = 0; i < n; i++) {
		uint8_t now[5], nop[5], jmp[5];
		intptr_t rel = (intptr_t)(p[i].target - (p[i].addr + 5));

		if (rel != (int32_t)rel || kp_mem_read_nofault(p[i].addr, now, 5))
			return -EINVAL;
		site_bytes(&p[i], false, nop);
		site_bytes(&p[i], true, jmp);
		/* A site caught mid-rewrite by a fork shows its int3. */
		if (memcmp(now, nop, 5) && memcmp(now, jmp, 5) &&
		    !(now[0] == INT3 && (!memcmp(now + 1, nop + 1, 4) || !memcmp(now + 1, jmp + 1, 4))))
			return -EINVAL;
	}
	return 0;
}

/* Site i of the batch in its new form; a thread meeting the int3 goes on
 * as that form would take it.  Async-signal-safe (the trap handler). */
static void site_poke(const struct text_poke_batch *b, int i, struct text_poke *tp)
{
	const struct arch_jl_patch *p = &((const struct arch_jl_patch *)b->ctx)[i];

	tp->addr = p->addr;
	tp->skip = false;
	tp->len = 5;
	tp->bp_in_place = false;
	site_bytes(p, p->jump, tp->bytes);
	tp->resume = p->jump ? p->target : p->addr + 5;
}

int arch_jump_label_apply(const struct arch_jl_patch *p, int n)
{
	struct text_poke_batch b = { .n = n, .get = site_poke, .ctx = p, .emulate = true };

	return text_poke_bp(&b);
}
