/*
 * Rewriting static-key sites on arm64: NOP <-> B target.  Both are one
 * instruction word and both are in the architecture's list of
 * instructions that may be modified concurrently with their execution
 * (B, BL, BRK, NOP, ISB, SVC, HVC, SMC), so a single-copy-atomic store of
 * the new word, the cache maintenance and a core synchronization are the
 * whole rewrite (text_poke.c): no transient breakpoint, nothing for the
 * trap handler to emulate.
 */
#include <errno.h>
#include <string.h>

#include "arch/arch.h"
#include "arch/arm64/text_poke.h"
#include "arch/arm64/xol.h"
#include "os/linux/memory.h"

const uint8_t arch_jump_label_nop[ARCH_JUMP_LABEL_LEN] = { 0x1f, 0x20, 0x03, 0xd5 };

int arch_jump_label_check(const struct arch_jl_patch *p, int n)
{
	for (int i = 0; i < n; i++) {
		uint32_t now, jmp;

		if ((p[i].addr & 3) || !a64_b(p[i].addr, p[i].target, &jmp) ||
		    kp_mem_read_nofault(p[i].addr, &now, 4))
			return -EINVAL;
		if (now != A64_NOP && now != jmp)
			return -EINVAL;
	}
	return 0;
}

static bool site_get(const struct text_poke_batch *b, int i, uintptr_t *addr, uint32_t *insn)
{
	const struct arch_jl_patch *p = &((const struct arch_jl_patch *)b->ctx)[i];

	*addr = p->addr;
	*insn = A64_NOP;
	return !p->jump || a64_b(p->addr, p->target, insn);
}

int arch_jump_label_apply(const struct arch_jl_patch *p, int n)
{
	struct text_poke_batch b = { .n = n, .get = site_get, .ctx = p };

	return text_poke_batch(&b);
}
