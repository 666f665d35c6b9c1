/*
 * Rewriting code that other threads may be running, for probes, jump
 * optimization and static keys alike (the kernel's text_poke_bp()).  A
 * thread may execute the site at any moment, so the rewrite only ever
 * exposes whole instructions: first a breakpoint over byte 0, which makes
 * the rest unreachable; then, cores synchronized, the remaining bytes;
 * then, synchronized again, the new byte 0.  A thread that meets the
 * breakpoint meanwhile traps: at a probe, the probe's own handling runs;
 * at a rewrite that emulates (a static-key site), the trap handler finds
 * it in the in-progress table below and sends the thread on as the new
 * instruction would.
 *
 * Every writer holds the registry or the static-key lock, which fork()
 * takes too (core/fork.c): a child never starts with a rewrite in
 * progress.
 */
#include <errno.h>
#include <sched.h>

#include "arch/arch.h"
#include "asm/kprobes.h"
#include "arch/x86_64/text_poke.h"
#include "os/linux/memory.h"

/* The batch in progress that emulates, and the trap handlers reading it
 * (the writer waits for them before the batch's storage goes). */
static const struct text_poke_batch *in_progress;
static int readers;

static void publish(const struct text_poke_batch *b)
{
	if (b->emulate)
		__atomic_store_n(&in_progress, b, __ATOMIC_SEQ_CST);
}

static void unpublish(const struct text_poke_batch *b)
{
	if (!b->emulate)
		return;
	__atomic_store_n(&in_progress, NULL, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&readers, __ATOMIC_SEQ_CST))
		sched_yield();
}

bool text_poke_trap(uintptr_t bp, uintptr_t *resume)
{
	const struct text_poke_batch *b;
	bool found = false;

	__atomic_add_fetch(&readers, 1, __ATOMIC_SEQ_CST);
	b = __atomic_load_n(&in_progress, __ATOMIC_SEQ_CST);
	for (int i = 0; b && i < b->n && !found; i++) {
		struct text_poke tp;

		b->get(b, i, &tp);
		if (!tp.skip && tp.addr == bp && tp.resume) {
			*resume = tp.resume;
			found = true;
		}
	}
	__atomic_sub_fetch(&readers, 1, __ATOMIC_SEQ_CST);
	return found;
}

/* A trap handler of another thread of the parent may have been between
 * its increment and decrement of readers at the fork: the child's first
 * rewrite that emulates would wait for it for ever.  No writer was in
 * progress (fork takes their locks). */
void arch_after_fork_child(void)
{
	__atomic_store_n(&in_progress, NULL, __ATOMIC_SEQ_CST);
	__atomic_store_n(&readers, 0, __ATOMIC_SEQ_CST);
}

enum step { STEP_BP, STEP_TAIL, STEP_FIRST };

/* Writes one step over the batch; synchronizes the cores when it wrote. */
static int poke_step(const struct text_poke_batch *b, enum step step, const struct kp_gone *gone)
{
	static const uint8_t bp = ARCH_BREAKPOINT_INSN;
	bool wrote = false;
	int err = 0;

	for (int i = 0; i < b->n && (b->keep_going || !err); i++) {
		struct text_poke tp = { 0 };
		bool last;
		int e;

		b->get(b, i, &tp);
		if (tp.skip)
			continue;
		if (kp_gone_bit(gone, i)) {
			err = err ? err : -EFAULT;
			continue;
		}
		switch (step) {
		case STEP_BP:
			if (tp.bp_in_place)
				continue;
			e = kp_mem_write(tp.addr, &bp, 1);
			last = tp.len == 1 && tp.bytes[0] == bp;
			break;
		case STEP_TAIL:
			if (tp.len == 1)
				continue;
			e = kp_mem_write(tp.addr + 1, tp.bytes + 1, tp.len - 1u);
			last = tp.bytes[0] == bp;
			break;
		default:
			if (tp.bytes[0] == bp)
				continue;
			e = kp_mem_write(tp.addr, tp.bytes, 1);
			last = true;
			break;
		}
		wrote = true;
		if (e)
			err = err ? err : e;
		else if (last && b->done)
			b->done(b, i);
	}
	if (wrote)
		kp_sync_cores();
	return err;
}

static int steps(const struct text_poke_batch *b, const struct kp_gone *gone)
{
	int err = 0;

	publish(b);
	for (enum step s = STEP_BP; s <= STEP_FIRST && (b->keep_going || !err); s++) {
		int e = poke_step(b, s, gone);

		err = err ? err : e;
	}
	unpublish(b);
	return err;
}

int text_poke_steps(const struct text_poke_batch *b)
{
	return steps(b, NULL);
}

/* Entry i's object, for kp_objects_gone(): none for an entry skipped. */
static const struct kp_object_id *entry_object(const void *ctx, int i)
{
	const struct text_poke_batch *b = ctx;
	struct text_poke tp = { 0 };

	b->get(b, i, &tp);
	return tp.skip ? NULL : tp.obj;
}

/* dlclose() unmaps an object before its interposer can tell the registry
 * that the object's probes are gone, and the address range may be mapped
 * again at once (a heap arena, another object): so only code of objects
 * still loaded is written.  The rewrite itself does not hold the loader's
 * lock (a program thread may need it meanwhile, through functions the
 * batch rewrites): an object unmapped between the look and the write is
 * the window left, a few microseconds instead of the whole of dlclose(). */
int text_poke_bp(const struct text_poke_batch *b)
{
	struct kp_gone gone;
	int err = kp_objects_gone(&gone, b->n, entry_object, b);

	if (err)
		return err;
	err = steps(b, &gone);
	kp_objects_gone_free(&gone);
	return err;
}
