/*
 * Rewriting static-key sites: a 5-byte NOP <-> a 5-byte JMP rel32.
 *
 * The same protocol as installing an optimized probe's jump (the kernel's
 * text_poke_bp): int3 on byte 0, synchronize every core, bytes 1..4,
 * synchronize, byte 0, synchronize.  Both forms are one instruction, so no
 * thread can be inside bytes 1..4 and no census is needed; a thread that
 * meets the int3 meanwhile is sent to the target or past the site by the
 * trap handler, per the key's (already updated) value.
 */
#include <errno.h>
#include <string.h>

#include "arch/arch.h"
#include "os/linux/memory.h"

#define INT3 0xcc
#define JMP_REL32 0xe9

const uint8_t arch_jump_label_nop[5] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };

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

/* One step of the protocol over every site that changes. */
static int write_step(const struct arch_jl_patch *p, int n, int step)
{
	int err = 0;

	for (int i = 0; i < n && !err; i++) {
		uint8_t want[5];

		site_bytes(&p[i], p[i].jump, want);
		if (step == 0)
			err = kp_mem_write(p[i].addr, (const uint8_t[]){ INT3 }, 1);
		else if (step == 1)
			err = kp_mem_write(p[i].addr + 1, want + 1, 4);
		else
			err = kp_mem_write(p[i].addr, want, 1);
	}
	kp_sync_cores();
	return err;
}

int arch_jump_label_apply(const struct arch_jl_patch *p, int n)
{
	int err = 0;

	for (int step = 0; step < 3 && !err; step++)
		err = write_step(p, n, step);
	return err;
}
