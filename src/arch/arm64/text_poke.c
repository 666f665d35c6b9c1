/*
 * Rewriting code that other threads may be running, for probes and static
 * keys alike.  Every rewrite on arm64 is one aligned instruction word (a
 * BRK over the probed instruction and back, a NOP and a B at a static-key
 * site), so the x86-64 protocol's breakpoint-first steps are not needed:
 * a thread fetches either the old or the new word, never a mix.
 *
 * The word goes through /proc/self/mem (the code pages stay read-only
 * and execute-only for the program): the kernel writes it with one 32-bit
 * store (its memcpy moves 4 to 7 bytes with word loads and stores, and
 * the word is aligned) and, because the mapping is executable, cleans and
 * invalidates the caches for it (flush_ptrace_access); the first write to
 * a page of a file mapping replaces the page by a private copy, atomically
 * for other threads, as uprobes does.  __builtin___clear_cache() repeats
 * the maintenance from user space (DC CVAU, DSB ISH, IC IVAU, DSB ISH, ISB
 * for the writing thread: needed where the write went through a writable
 * alias the kernel did not know was code).  Then membarrier
 * (MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE) makes every other running
 * thread of the process take a context synchronization event before it
 * returns: no thread still executes the old word from its pipeline.
 *
 * Every writer holds the registry or the static-key lock, which fork()
 * takes too (core/fork.c): a child never starts with a rewrite in
 * progress.
 */
#include "arch/arm64/text_poke.h"

#include <errno.h>

#include "arch/arch.h"
#include "os/linux/memory.h"

/* Nothing to forget in a fork child: a rewrite here is one word, with no
 * table of rewrites in progress for trap handlers to read (x86-64 has
 * one, and resets it). */
void arch_after_fork_child(void)
{
}

static int write_words(uintptr_t addr, const uint32_t *insns, int n)
{
	int err;

	if (addr & 3)
		return -EINVAL;
	err = kp_mem_write(addr, insns, (size_t)n * 4);
	__builtin___clear_cache((char *)addr, (char *)(addr + (size_t)n * 4));
	return err;
}

int text_write_fresh(uintptr_t addr, const uint32_t *insns, int n)
{
	return write_words(addr, insns, n);
}

int text_refresh_word(uintptr_t addr)
{
	uint32_t insn = *(volatile uint32_t *)addr;
	int err = write_words(addr, &insn, 1);

	kp_sync_cores();
	return err;
}

/* Entry i's object, for kp_objects_gone(). */
static const struct kp_object_id *entry_object(const void *ctx, int i)
{
	const struct text_poke_batch *b = ctx;

	return b->object ? b->object(b, i) : NULL;
}

static int poke_words(const struct text_poke_batch *b, const struct kp_gone *gone)
{
	bool wrote = false;
	int err = 0;

	for (int i = 0; i < b->n; i++) {
		uintptr_t addr;
		uint32_t insn;
		int e;

		if (!b->get(b, i, &addr, &insn))
			continue;
		if (kp_gone_bit(gone, i)) {
			err = err ? err : -EFAULT;
			continue;
		}
		e = write_words(addr, &insn, 1);
		wrote = true;
		if (e && !err)
			err = e;
	}
	if (wrote)
		kp_sync_cores();
	for (int i = 0; b->done && i < b->n; i++) {
		uintptr_t addr;
		uint32_t insn;

		if (b->get(b, i, &addr, &insn) && !kp_gone_bit(gone, i) &&
		    *(volatile uint32_t *)addr == insn)
			b->done(b, i);
	}
	return err;
}

/* dlclose() unmaps an object before its interposer can tell the registry
 * that the object's probes are gone, and the range may be mapped again at
 * once: only code of objects still loaded is written (and read back).  The
 * look holds the loader's list still; the writes do not hold its lock. */
int text_poke_batch(const struct text_poke_batch *b)
{
	struct kp_gone gone;
	int err = kp_objects_gone(&gone, b->n, entry_object, b);

	if (err)
		return err;
	err = poke_words(b, &gone);
	kp_objects_gone_free(&gone);
	return err;
}

static bool one_get(const struct text_poke_batch *b, int i, uintptr_t *addr, uint32_t *insn)
{
	const uintptr_t *w = b->ctx;

	(void)i;
	*addr = w[0];
	*insn = (uint32_t)w[1];
	return true;
}

int text_poke_word(uintptr_t addr, uint32_t insn)
{
	const uintptr_t w[2] = { addr, insn };
	struct text_poke_batch b = { .n = 1, .get = one_get, .ctx = w };

	return text_poke_batch(&b);
}
