/* Unwind information of the detour buffers and out-of-line slots
 * (unwind_detour.c). */
#ifndef KP_X86_UNWIND_DETOUR_H
#define KP_X86_UNWIND_DETOUR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kp_probepoint;

/* What the unwind information of one detour needs: where it is, in which
 * pool of pool_size bytes of units of unit bytes, the probepoint, the
 * detour's code, and its layout. */
struct detour_layout {
	uintptr_t pool, pool_size, unit;
	uintptr_t d;
	uintptr_t addr;			/* the probed address */
	bool entry, cont;
	bool mid_fast;			/* mid-function, with the fast exit at R */
	uint8_t mid_exit_len;		/* its length */
	const uint8_t *code;		/* the detour's bytes as written */
	uint8_t ret_off;		/* R */
	uint8_t ncopied;
	const uint8_t *insn_off, *insn_orig;
	const uint8_t *orig;		/* the region's original bytes */
	uint8_t jmp_off;		/* the jump back (0: none) */
	uint8_t copied_len;
};

/* Describes a detour just written (under the registry lock); a failure
 * leaves it undescribed (unwinders stop there), nothing else. */
void arch_detour_unwind_add(const struct detour_layout *l);
/* The detour d of the pool is freed. */
void arch_detour_unwind_remove(uintptr_t pool, uintptr_t pool_size, uintptr_t unit, uintptr_t d);

/* The frame a thread at the exact ip inside a detour stands for, from the
 * detour's rows: *pc the probed instruction it is at (or about to run),
 * *cfa the program's stack pointer there.  False outside the detours or
 * where the rows give no return address.  Async-signal-safe: no lock, no
 * allocation, memory of the stack read without faulting. */
bool detour_unwind_frame(uintptr_t ip, uintptr_t sp, uintptr_t *pc, uintptr_t *cfa);

/* Out-of-line slots: from each row's offset in the slot, the CFA is rsp +
 * cfa and the return address ra (the address of the original instruction
 * the slot is at, or a call's target once its return address is pushed;
 * 0: unknown, unwinding stops). */
struct unwind_row {
	uint8_t off;
	uint8_t cfa;
	uintptr_t ra;
};

void arch_xol_unwind_add(uintptr_t pool, uintptr_t pool_size, uintptr_t unit, uintptr_t slot,
			 const struct unwind_row *rows, int n);
void arch_xol_unwind_remove(uintptr_t pool, uintptr_t pool_size, uintptr_t unit, uintptr_t slot);

#endif
