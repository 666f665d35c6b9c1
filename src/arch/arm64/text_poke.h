/* The one way code is rewritten while other threads may run it (arm64). */
#ifndef KP_ARM64_TEXT_POKE_H
#define KP_ARM64_TEXT_POKE_H

#include <stdbool.h>
#include <stdint.h>

#include "os/linux/loader.h"

/* n rewrites of one instruction word each, described on demand (no
 * allocation): get() gives entry i's address and new word, or false when
 * there is nothing to do for it; done(), if given, is told once entry i
 * is written and every thread synchronized. */
struct text_poke_batch {
	int n;
	bool (*get)(const struct text_poke_batch *b, int i, uintptr_t *addr, uint32_t *insn);
	void (*done)(const struct text_poke_batch *b, int i);
	/* The object entry i's code belongs to, if given and known: an entry
	 * whose object is no longer loaded is not written (-EFAULT). */
	const struct kp_object_id *(*object)(const struct text_poke_batch *b, int i);
	const void *ctx;
};

/* object() for batches whose ctx is an array of probepoints. */
const struct kp_object_id *text_poke_pp_object(const struct text_poke_batch *b, int i);

/*
 * Each word is written by one single-copy-atomic 32-bit store, its cache
 * lines cleaned to the point of unification and the instruction cache
 * invalidated (DC CVAU, DSB ISH, IC IVAU, DSB ISH, ISB); then, once for the
 * batch, every thread of the process is made to take a context
 * synchronization event (membarrier SYNC_CORE), after which none runs the
 * old word.  See "Text patching on arm64" in docs/design.md.  0 or the
 * first -errno (the entries after a failed one are still written).
 */
int text_poke_batch(const struct text_poke_batch *b);

/* The same for one word. */
int text_poke_word(uintptr_t addr, uint32_t insn);

/* The word at addr written again as it is, under the registry lock, from
 * the trap path: every copy of the code a thread may run becomes current.
 * The object is loaded (a thread runs it), so none is looked up. */
int text_refresh_word(uintptr_t addr);

/* Writes code into memory no thread runs yet (a new slot or stub): the
 * words, and the cache maintenance for them; no synchronization (the
 * publication that makes other threads run it comes after). */
int text_write_fresh(uintptr_t addr, const uint32_t *insns, int n);

#endif
