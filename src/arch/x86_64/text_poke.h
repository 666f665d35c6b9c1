/* The one way code is rewritten while other threads may run it. */
#ifndef KP_X86_TEXT_POKE_H
#define KP_X86_TEXT_POKE_H

#include <stdbool.h>
#include <stdint.h>

#include "os/linux/loader.h"

/* The longest rewrite: a jmp rel32 (a jump label, an optimized probe),
 * whose opcode is JMP_REL32. */
#define TEXT_POKE_MAX 5
#define JMP_REL32 0xe9

/* One rewrite: the len bytes at addr become bytes[]. */
struct text_poke {
	uintptr_t addr;
	bool skip;			/* nothing to do for this one */
	uint8_t len;			/* 1 .. TEXT_POKE_MAX */
	bool bp_in_place;		/* byte 0 already holds the breakpoint */
	uint8_t bytes[TEXT_POKE_MAX];
	/* Where a thread that meets the transient breakpoint continues (the
	 * new instruction, emulated); 0: the breakpoint is a probe's, which
	 * the probe lookup handles. */
	uintptr_t resume;
	/* The object the code belongs to (NULL: none known): an entry whose
	 * object is no longer loaded is not written (-EFAULT). */
	const struct kp_object_id *obj;
};

/* n rewrites, described on demand (no allocation): get() fills entry i,
 * and must be async-signal-safe when entries have a resume address (the
 * trap handler calls it); done(), if given, is told when entry i has all
 * its new bytes.  On a failed write, keep_going carries on with every
 * entry and step; otherwise the rewrite stops after that step. */
struct text_poke_batch {
	int n;
	void (*get)(const struct text_poke_batch *b, int i, struct text_poke *tp);
	void (*done)(const struct text_poke_batch *b, int i);
	const void *ctx;
	bool keep_going;
	bool emulate;			/* entries have resume addresses */
};

/*
 * As the kernel's text_poke_bp(): the breakpoint on byte 0 of every entry
 * (where it is not there yet), cores synchronized; bytes 1..len-1;
 * synchronized; byte 0; synchronized.  A step with nothing to write costs
 * no synchronization.  While it runs, a batch that emulates is in the
 * table the trap handler consults (text_poke_trap).  0 or the first -errno.
 */
int text_poke_bp(const struct text_poke_batch *b);

/* The same steps without holding the loader's object list still: for
 * code in no object that can be unloaded, or a caller already inside
 * kp_objects_pinned(). */
int text_poke_steps(const struct text_poke_batch *b);

/* Trap handler: whether bp is the breakpoint of a rewrite in progress that
 * emulates; then *resume is where the thread continues. */
bool text_poke_trap(uintptr_t bp, uintptr_t *resume);

#endif
