/*
 * Return probes.  The entry is an ordinary kprobe whose pre-handler takes
 * an instance from the kretprobe's preallocated pool, remembers the real
 * return address and replaces it with the instance's return stub, which
 * jumps to the trampoline (and tells unwinders the real address); that
 * calls kp_kretprobe_dispatch().  Instances hang on a per-thread LIFO, as
 * uretprobes does; instances of frames that were left without returning
 * (longjmp, exceptions, thread exit) are reclaimed.
 *
 * A thread keeps the free instances of a pool it returns in its record's
 * cache, a bounded stack (the newest first, up to the pool's cache_max),
 * and takes them back at its next entries, with no atomic instruction:
 * see "per-thread caches" below.  A recursion as deep as cache_max thus
 * never touches the shared pool once warm.  maxactive still counts
 * exactly: a pool that runs out takes the cached instances back from every
 * thread, and stops caching.
 */
/* On the hit path of optimized probes, which save vector state only for
 * handlers that need it: this code must not touch it. */
#include "asm/hitpath.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"
#include "core/kretprobe.h"
#include "os/linux/memory.h"
#include "os/linux/sys.h"
#include "os/linux/threads.h"


/* A frame whose slot lies this far below a new entry's stack is on another
 * stack (coroutine, signal stack), not a frame that was left. */
#define STALE_WINDOW (256UL << 20)

static struct kp_rp_pool *orphans;

static unsigned int next_cache_slot;

/* Instance pools allocated and not yet freed (kp_get_stats). */
unsigned long kp_rp_pools_alive;

/* Links src/os/linux/unwind.o (the unwinder interposers) into every program
 * that uses return probes, also from the static library. */
extern char kp_unwind_interposers;
__attribute__((used)) static char *const kp_need_unwind = &kp_unwind_interposers;

static struct kp_ri *ri_at(struct kp_rp_pool *pool, uint32_t idx)
{
	return (struct kp_ri *)(pool->mem + (size_t)idx * pool->stride);
}

/* Lock-free pop/push; the tag defeats ABA when a thread is interrupted by
 * a signal whose handler uses the same pool. */
static struct kp_ri *pool_get(struct kp_rp_pool *pool)
{
	uint64_t h = __atomic_load_n(&pool->free_head, __ATOMIC_ACQUIRE), nh;
	struct kp_ri *ri;

	do {
		if (!(uint32_t)h)
			return NULL;
		ri = ri_at(pool, (uint32_t)h - 1);
		nh = (((h >> 32) + 1) << 32) | __atomic_load_n(&ri->next_free, __ATOMIC_RELAXED);
	} while (!__atomic_compare_exchange_n(&pool->free_head, &h, nh, true,
					      __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
	return ri;
}

static void pool_put(struct kp_ri *ri)
{
	struct kp_rp_pool *pool = ri->pool;
	uint64_t h = __atomic_load_n(&pool->free_head, __ATOMIC_ACQUIRE), nh;

	do {
		__atomic_store_n(&ri->next_free, (uint32_t)h, __ATOMIC_RELAXED);
		nh = (((h >> 32) + 1) << 32) | (ri->idx + 1);
	} while (!__atomic_compare_exchange_n(&pool->free_head, &h, nh, true,
					      __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
	/* Last touch of the pool: an unregistered pool is freed once every
	 * instance reads as unowned. */
	__atomic_store_n(&ri->owner, 0, __ATOMIC_RELEASE);
}

/* ---- per-thread caches ----
 *
 * The owning thread uses its cache with plain instructions between
 * busy_enter() and busy_exit(), a window of a few instructions with no
 * wait in it; its own signal handlers (busy_enter() returns non-zero for
 * them) leave the cache alone.  Another thread first turns the pool's
 * caching off and issues a membarrier: from then on every owner sees it
 * off, and one inside a window is waited for (or skipped, by the hit
 * path, after a while).  Then the cached instances are taken with atomic
 * instructions, a cache's whole list at once; an owner that finds the
 * caching off takes its own list the same way.
 *
 * A cache is a list linked through the instances' next (free instances
 * are on no thread's list of frames); each knows how many are below it
 * (cache_n), so that a push needs only the newest one.
 */

/* Whether the thread was already in its window (a signal handler that
 * interrupted it): a handler that runs between the load and the add has
 * left its own window by then, so the value read is still right.  (A
 * non-locked xadd would say the same in one instruction, at several times
 * the cost.) */
static inline unsigned int busy_enter(struct kp_thread *t)
{
	unsigned int old = __atomic_load_n(&t->ri_cache_busy, __ATOMIC_RELAXED);

	arch_local_inc(t->ri_cache_busy);
	return old;
}

static inline void busy_exit(struct kp_thread *t)
{
	arch_local_dec(t->ri_cache_busy);
}

static bool cache_on(const struct kp_rp_pool *pool)
{
	return __atomic_load_n(&pool->cache_state, __ATOMIC_RELAXED) == CACHE_ON;
}

/* Puts the instances of a cache list, taken whole from its slot, back
 * into their pool. */
static void cache_list_free(struct kp_ri *ri)
{
	while (ri) {
		struct kp_ri *next = ri->next;

		__atomic_store_n(&ri->cached, false, __ATOMIC_RELEASE);
		pool_put(ri);
		ri = next;
	}
}

/* The newest of thread t's cached instances of pool, or NULL; slot: the
 * pool's.  While the pool's caching is on, plain instructions: no other
 * thread touches the cache (see above).  When it is off, what a drainer
 * had to leave there (its owner stayed in a section too long) is free,
 * and this is its way out: the whole list is taken with one atomic
 * instruction, as a drainer would, the newest kept and the rest put back. */
static inline struct kp_ri *cache_take(struct kp_thread *t, struct kp_rp_pool *pool,
				       unsigned int cache_slot)
{
	void **slot = &t->ri_cache[cache_slot];
	struct kp_ri *ri = NULL, *rest = NULL;

	if (!busy_enter(t)) {
		ri = __atomic_load_n(slot, __ATOMIC_RELAXED);
		if (!ri || ri->pool != pool) {
			ri = NULL;
		} else if (cache_on(pool)) {
			__atomic_store_n(slot, ri->next, __ATOMIC_RELAXED);
		} else if (__atomic_compare_exchange_n(slot, (void **)&ri, NULL, false,
						       __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			rest = ri->next;
		} else {
			ri = NULL;
		}
		if (ri) {
			/* owner first: a reaper that still sees it cached
			 * then fails to take it from the dead owner */
			__atomic_store_n(&ri->owner, t->tid, __ATOMIC_RELAXED);
			__atomic_store_n(&ri->cached, false, __ATOMIC_RELEASE);
		}
	}
	busy_exit(t);
	cache_list_free(rest);
	return ri;
}

/* An instance for thread t: its cached one, or one from the pool. */
static struct kp_ri *ri_get(struct kp_thread *t, struct kp_rp_pool *pool)
{
	struct kp_ri *ri = cache_take(t, pool, pool->cache_slot);

	return ri ? ri : pool_get(pool);
}

/* Thread t is done with ri: onto its cache of ri's pool if the slot holds
 * no other pool's and the cache is not full. */
static inline __attribute__((always_inline)) void ri_put(struct kp_thread *t, struct kp_ri *ri)
{
	struct kp_rp_pool *pool = ri->pool;
	void **slot = &t->ri_cache[pool->cache_slot];
	struct kp_ri *head;
	bool kept = false;

	if (!busy_enter(t) && cache_on(pool)) {
		head = __atomic_load_n(slot, __ATOMIC_RELAXED);
		if (!head || (head->pool == pool && head->cache_n < pool->cache_max)) {
			ri->next = head;
			ri->cache_n = head ? head->cache_n + 1 : 1;
			__atomic_store_n(&ri->cached, true, __ATOMIC_RELAXED);
			__atomic_store_n(slot, ri, __ATOMIC_RELEASE);
			kept = true;
		}
	}
	busy_exit(t);
	if (!kept)
		pool_put(ri);
}

static bool is_of_pool(const struct kp_rp_pool *pool, const void *ri)
{
	return (const char *)ri >= pool->mem &&
	       (const char *)ri < pool->mem + (size_t)pool->n * pool->stride;
}

#define BUSY_SPINS 200

/* Is the owner of record r inside a moment in which it may use its cache:
 * its window (ri_cache_busy), or a read-side section seen in snap, in
 * which the assembly fast paths (src/arch) use the cache (they raise
 * in_handler with the section, which keeps the thread's own signal
 * handlers off it, instead of the window). */
static bool owner_inside(const struct kp_thread *r, uint64_t snap)
{
	return __atomic_load_n(&r->ri_cache_busy, __ATOMIC_ACQUIRE) ||
	       !kp_thread_section_ended(r, snap);
}

/* Waits for the owner of record r to leave every moment that began before
 * the caller's membarrier in which it may use its cache; false if it does
 * not within BUSY_SPINS yields (and !patient).  A thread's own record is
 * free unless it interrupted its own window (its section is the caller's). */
static bool owner_outside(const struct kp_thread *r, const struct kp_thread *me, bool patient)
{
	uint64_t snap = kp_thread_section(r);

	if (r == me)
		return !__atomic_load_n(&r->ri_cache_busy, __ATOMIC_ACQUIRE);
	for (int spins = 0; owner_inside(r, snap); spins++) {
		if (kp_thread_record_dead(r))
			return true;
		if (!patient && spins >= BUSY_SPINS)
			return false;
		sched_yield();
	}
	return true;
}

/* Puts the instances cached in every thread record back into the pool. */
static void drain_caches(struct kp_rp_pool *pool, struct kp_thread *me, bool patient)
{
	unsigned int n;
	struct kp_thread *r = kp_thread_records(&n);

	for (unsigned int i = 0; i < n; i++) {
		void **slot = &r[i].ri_cache[pool->cache_slot];
		struct kp_ri *ri = __atomic_load_n(slot, __ATOMIC_ACQUIRE);

		if (!ri || !is_of_pool(pool, ri) || !owner_outside(&r[i], me, patient))
			continue;
		/* The owner changed it meanwhile, or takes it now (the
		 * pool's caching is off: with an atomic instruction). */
		while ((ri = __atomic_load_n(slot, __ATOMIC_ACQUIRE)) && is_of_pool(pool, ri)) {
			if (__atomic_compare_exchange_n(slot, (void **)&ri, NULL, false,
							__ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
				cache_list_free(ri);
				break;
			}
		}
	}
}

static bool tid_is_dead(pid_t tid)
{
	return kp_syscall(SYS_tgkill, kp_getpid(), tid, 0) == -ESRCH;
}

/* Turns the pool's caching off for good and puts every cached instance
 * back into the pool.  The thread that claims the pool (its id in drainer,
 * by one compare-and-swap) drains; others wait for it.  Not for the
 * drainer itself, interrupted by a signal handler that gets here: that
 * would wait for ever.  Nor for a drainer that no longer exists (a fork
 * child of a process that was draining): the next thread takes over. The
 * hit path (patient false) gives up on a thread that stays in its window
 * or section (a handler that runs long): that thread takes its instance
 * back itself at its next entry, and an unregistration does in any case. */
static void pool_uncache(struct kp_rp_pool *pool, struct kp_thread *me, bool patient)
{
	pid_t tid = me ? me->tid : -1;

	for (;;) {
		pid_t d = __atomic_load_n(&pool->drainer, __ATOMIC_ACQUIRE);

		/* Off already: a patient caller (an unregistration) still
		 * takes back what an impatient drainer had to leave. */
		if (__atomic_load_n(&pool->cache_state, __ATOMIC_ACQUIRE) == CACHE_OFF) {
			if (patient && kp_membarrier_all())
				drain_caches(pool, me, true);
			return;
		}
		if (d == tid)
			return;
		if ((d == 0 || (d > 0 && tid_is_dead(d))) &&
		    __atomic_compare_exchange_n(&pool->drainer, &d, tid, false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			__atomic_store_n(&pool->cache_state, CACHE_DRAINING, __ATOMIC_SEQ_CST);
			/* Without the barrier no cache can be read safely:
			 * its instances stay there (caching is on only with
			 * membarrier). */
			if (kp_membarrier_all())
				drain_caches(pool, me, patient);
			__atomic_store_n(&pool->cache_state, CACHE_OFF, __ATOMIC_RELEASE);
			return;
		}
		sched_yield();
	}
}

/* Instances held by threads that exited inside a probed function. */
static int pool_reap_dead(struct kp_rp_pool *pool)
{
	int freed = 0;

	for (int i = 0; i < pool->n; i++) {
		struct kp_ri *ri = ri_at(pool, (uint32_t)i);
		pid_t owner = __atomic_load_n(&ri->owner, __ATOMIC_ACQUIRE);

		if (owner > 0 && !__atomic_load_n(&ri->cached, __ATOMIC_ACQUIRE) &&
		    tid_is_dead(owner) &&
		    __atomic_compare_exchange_n(&ri->owner, &owner, -1, false,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			pool_put(ri);
			freed++;
		}
	}
	return freed;
}

/* Is sp on the thread's signal alternate stack while slot is not? */
static bool on_other_stack(uintptr_t slot, uintptr_t sp)
{
	stack_t ss;

	if (kp_syscall(SYS_sigaltstack, 0, &ss, 0) || !(ss.ss_flags & SS_ONSTACK))
		return false;
	return !(slot >= (uintptr_t)ss.ss_sp && slot < (uintptr_t)ss.ss_sp + ss.ss_size);
}

/* Whether the frame of instance ri, at or below the slot of the function
 * entered at regs, is still live: at the same slot, it is this very
 * activation (another return probe on the function came first) when the
 * return address is still ri's stub; below it, only a frame on another
 * stack (a signal handler on sigaltstack) whose return address may still
 * be the stub can be. */
static bool frame_live(const struct kp_ri *ri, uintptr_t slot, const struct pt_regs *regs)
{
	if (ri->slot == slot)
		return arch_entry_ret_addr(regs, slot) == ri->stub;
	return arch_frame_may_return_to(ri->slot, ri->stub) && on_other_stack(ri->slot, slot);
}

/* Drops this thread's instances of frames at or below the new entry's slot
 * that were left without a return (longjmp, exceptions). */
static void drop_stale(struct kp_thread *t, uintptr_t slot, const struct pt_regs *regs)
{
	struct kp_ri *ri;

	while ((ri = t->ri_top) && ri->slot <= slot && slot - ri->slot < STALE_WINDOW) {
		if (frame_live(ri, slot, regs))
			break;
		t->ri_top = ri->next;
		ri_put(t, ri);
	}
}

/* A new instance for the activation at slot entered with regs (NULL on the
 * optimized entry's fast path, which has no entry handler to give them
 * to and whose return address is in memory); NULL when none was
 * installed. */
static struct kp_ri *rp_enter(struct kretprobe *rp, struct kp_thread *t, uintptr_t slot,
			      struct pt_regs *regs)
{
	struct kp_rp_pool *pool = rp->__pool;
	uintptr_t ret = arch_entry_ret_addr(regs, slot);
	struct kp_ri *ri;

	drop_stale(t, slot, regs);
	ri = ri_get(t, pool);
	if (!ri) {
		pool_reap_dead(pool);
		pool_uncache(pool, t, false);
		ri = pool_get(pool);
	}
	if (!ri) {
		__atomic_fetch_add(&rp->nmissed, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	/* Another return probe on this function got here first. */
	if (t->ri_top && ((struct kp_ri *)t->ri_top)->slot == slot &&
	    ret == ((struct kp_ri *)t->ri_top)->stub)
		ret = (uintptr_t)((struct kp_ri *)t->ri_top)->pub.ret_addr;
	ri->owner = t->tid;
	ri->slot = slot;
	ri->pub.rp = rp;
	ri->pub.task = t->tid;
	ri->pub.ret_addr = (kprobe_opcode_t *)ret;
	ri->called = false;
	if (rp->entry_handler && rp->entry_handler(&ri->pub, regs)) {
		ri_put(t, ri);
		return NULL;
	}
	arch_entry_ret_addr_set(regs, slot, ri->stub);
	ri->dup = t->ri_top && ((struct kp_ri *)t->ri_top)->slot == slot;
	ri->next = t->ri_top;
	t->ri_top = ri;
	return ri;
}

static int kretprobe_entry(struct kprobe *p, struct pt_regs *regs)
{
	rp_enter(container_of(p, struct kretprobe, kp), kp_thread_current(), arch_return_slot(regs),
		 regs);
	return 0;
}

/* kp_kretprobe_entry_fast() beyond its common case. */
static __attribute__((noinline)) int entry_fast_slow(struct kretprobe *rp, struct kp_thread *t,
						     uintptr_t slot)
{
	struct kp_ri *ri = rp_enter(rp, t, slot, NULL);

	if (ri && arch_ret_stub_call(slot, t, ri->stub))
		ri->called = true;
	return 0;
}

/* Jumped to by an optimized entry, inside its read-side section, for a
 * return probe without an entry handler: no struct pt_regs is built, and
 * where the detour allows, the function is called from the instance's
 * stub so that its return stays predicted. */
/* The probepoint's first probe, when this return probe follows a light
 * kprobe (the registry's pair, pp_update_fast): its pre-handler runs
 * first, as the handler loop would run it; non-zero stops the hit there.
 * Checked again here: the list may have changed since the detour read
 * the fast probe (a probe added meanwhile misses this hit, as with any
 * fast probe; an emptied list runs none). */
static __attribute__((noinline)) bool run_entry_probe(struct kprobe *first)
{
	/* NULL: an unregistration emptied the list since the detour read it. */
	if (!first || !kp_probe_light_entry(first))
		return false;
	return first->pre_handler(first, NULL) != 0;
}

int kp_kretprobe_entry_fast(struct kprobe *p, void *ret_slot, struct kp_thread *t)
{
	struct kretprobe *rp = container_of(p, struct kretprobe, kp);
	uintptr_t slot = (uintptr_t)ret_slot;
	struct kp_ri *top = t->ri_top, *ri;
	struct kprobe *first = __atomic_load_n(
		&((struct kp_probepoint *)p->__pp)->probes, __ATOMIC_ACQUIRE);

	if (__builtin_expect(first != p, 0) && run_entry_probe(first))
		return 0;

	/* The common case, kept short: no frame of this thread's at or below
	 * this one (left by a longjmp, or another return probe's on this
	 * function), and an instance in the thread's cache. */
	if (__builtin_expect(top && top->slot <= slot, 0) ||
	    !(ri = cache_take(t, rp->__pool, kp_probe_ri_slot(p))))
		return entry_fast_slow(rp, t, slot);
	ri->slot = slot;
	ri->pub.rp = rp;
	ri->pub.task = t->tid;
	ri->pub.ret_addr = (kprobe_opcode_t *)arch_entry_ret_addr(NULL, slot);
	ri->dup = false;	/* top is above */
	ri->next = top;
	t->ri_top = ri;
	ri->called = arch_ret_stub_call(slot, t, ri->stub);
	if (!ri->called)
		arch_entry_ret_addr_set(NULL, slot, ri->stub);
	return 0;
}

static void fatal_no_instance(void)
{
	static const char msg[] = "libkprobes: return trampoline without instance\n";

	kp_syscall(SYS_write, 2, msg, sizeof(msg) - 1);
	abort();
}

#ifdef ARCH_HAS_RETURN_VECTOR_REGS
struct noted_call {
	struct kp_thread *t;
	int (*fn)(void *, void *);
	void *a;
};

/* Runs with the vector state saved: the note for kprobes_vector_reg() set
 * before the handler, cleared after (no other hit can change it
 * meanwhile: the thread is in a handler, any probe it hits is missed). */
static int call_noted(void *arg, void *regs, const void *image)
{
	struct noted_call *c = arg;
	int rc;

	c->t->vec_area = image;
	c->t->vec_layout = arch_fpu_image_layout();
	__atomic_store_n(&c->t->vec_regs, regs, __ATOMIC_RELAXED);
	rc = c->fn(c->a, regs);
	__atomic_store_n(&c->t->vec_regs, NULL, __ATOMIC_RELAXED);
	return rc;
}
#endif

/* A handler that may change vector state, called with it saved; one that
 * asked for kprobes_vector_reg() also finds it there (the registers at
 * the return: a floating-point return value). */
static void call_fpu_saved(struct kp_thread *t, struct kp_ri *ri, struct kretprobe *rp,
			   struct pt_regs *regs)
{
	int (*fn)(void *, void *) = (int (*)(void *, void *))rp->handler;

#ifdef ARCH_HAS_RETURN_VECTOR_REGS
	if (rp->kp.flags & KPROBE_FLAG_VECTOR_REGS) {
		struct noted_call c = { .t = t, .fn = fn, .a = &ri->pub };

		kp_call_fpu_image(call_noted, &c, regs);
		return;
	}
#endif
	(void)t;
	kp_call_fpu_saved(fn, &ri->pub, regs);
}

/* The trampoline keeps only the general registers: the return value in
 * vector or x87 registers and errno are saved here, for a handler that may
 * change them. */
static void run_return_handler(struct kp_thread *t, struct kp_ri *ri, struct kretprobe *rp,
			       struct pt_regs *regs)
{
	int saved_errno = 0;

	if (ri->pool->needs & KP_OPT_SAVE_ERRNO)
		saved_errno = errno;
	t->in_handler++;
	if (ri->pool->needs & KP_OPT_SAVE_VECTOR)
		call_fpu_saved(t, ri, rp, regs);
	else
		rp->handler(&ri->pub, regs);
	t->in_handler--;
	if (ri->pool->needs & KP_OPT_SAVE_ERRNO)
		errno = saved_errno;
}

/* Every case of kp_kretprobe_dispatch(): frames left below this one,
 * several instances at this frame, a handler that needs more saved, one
 * inside a handler. */
static __attribute__((noinline)) bool dispatch_slow(struct pt_regs *regs)
{
	struct kp_thread *t = kp_thread_current();
	uintptr_t slot = arch_return_slot_at_return(regs);
	struct kp_ri *ri;
	bool called;

	while ((ri = t->ri_top) && ri->slot < slot) {
		t->ri_top = ri->next;
		ri_put(t, ri);
	}
	if (!ri || ri->slot != slot)
		fatal_no_instance();
	called = ri->called;
	instruction_pointer_set(regs, (unsigned long)ri->pub.ret_addr);
	kp_read_enter(t);
	while ((ri = t->ri_top) && ri->slot == slot) {
		t->ri_top = ri->next;
		if (__atomic_load_n(&ri->pool->live, __ATOMIC_ACQUIRE) && !t->in_handler) {
			struct kretprobe *rp = ri->pool->rp;

			if (rp->handler && !(rp->kp.flags & KPROBE_FLAG_DISABLED))
				run_return_handler(t, ri, rp, regs);
		} else if (t->in_handler && __atomic_load_n(&ri->pool->live, __ATOMIC_ACQUIRE)) {
			__atomic_fetch_add(&ri->pool->rp->nmissed, 1, __ATOMIC_RELAXED);
		}
		instruction_pointer_set(regs, (unsigned long)ri->pub.ret_addr);
		ri_put(t, ri);
	}
	kp_read_exit(t);
	return called;
}

/* Called by the trampoline with the registers at the return.  Returns
 * whether the function was called from the stub it returned to: the
 * return predictor then expects the real return address, and the
 * trampoline returns there by a ret. */
bool kp_kretprobe_dispatch(struct pt_regs *regs)
{
	struct kp_thread *t = kp_self_tls;
	uintptr_t slot = arch_return_slot_at_return(regs);
	struct kp_ri *ri = t ? t->ri_top : NULL;
	struct kretprobe *rp;
	bool called;

	/* The common case, kept short: the newest instance is this frame's
	 * only one, and its handler needs only the general registers (the
	 * trampoline always builds the whole struct pt_regs). */
	if (__builtin_expect(!ri || ri->slot != slot || ri->dup ||
			     t->in_handler ||
			     (ri->pool->needs & (KP_OPT_SAVE_VECTOR | KP_OPT_SAVE_ERRNO)), 0))
		return dispatch_slow(regs);
	t->ri_top = ri->next;
	called = ri->called;
	instruction_pointer_set(regs, (unsigned long)ri->pub.ret_addr);
	kp_handler_section_enter(t);
	rp = ri->pool->rp;	/* valid while live */
	if (__atomic_load_n(&ri->pool->live, __ATOMIC_ACQUIRE) && rp->handler &&
	    !(rp->kp.flags & KPROBE_FLAG_DISABLED)) {
		rp->handler(&ri->pub, regs);
		instruction_pointer_set(regs, (unsigned long)ri->pub.ret_addr);	/* its change is ignored */
	}
	ri_put(t, ri);
	kp_handler_section_exit(t);
	return called;
}

static int ncpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (int)n : 1;
}

static uintptr_t ret_addr_location(int i, void *arg)
{
	return (uintptr_t)&ri_at(arg, (uint32_t)i)->pub.ret_addr;
}

/* A fork child's only thread is the forking one, under a new thread id:
 * the instances it holds (frames it will return through) become its own
 * again, or a reap in the child would take them as a dead thread's. */
static void after_fork_child(void)
{
	struct kp_thread *t = kp_lib_code_begin();
	pid_t tid = kp_gettid();

	for (struct kp_ri *ri = t ? t->ri_top : NULL; ri; ri = ri->next) {
		ri->owner = tid;
		ri->pub.task = tid;
	}
	kp_lib_code_end(t);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void atfork_register(void)
{
	pthread_atfork(NULL, NULL, after_fork_child);
}

/* Bytes of one pool's instances at most: beyond, -ENOMEM without trying. */
#define POOL_MAX_BYTES ((size_t)1 << 30)

/* maxactive and data_size within their limits, so that nothing below can
 * wrap: the instance stride, the pool's size, the 32-bit instance indexes. */
static int check_sizes(const struct kretprobe *rp)
{
	if (rp->maxactive > KRETPROBE_MAXACTIVE_MAX || rp->data_size > KRETPROBE_MAX_DATA_SIZE)
		return -EINVAL;
	return 0;
}

/* Free instances one thread's cache keeps at most: enough for a recursion
 * of that depth to stay on the fast paths, a small share of the pool so
 * that a few threads do not hold all of it (then the pool runs out, takes
 * the caches back and stops caching). */
#define CACHE_MAX 64

static uint32_t cache_max_of(int n)
{
	int m = n / 8;

	return m < 1 ? 1 : m > CACHE_MAX ? CACHE_MAX : (uint32_t)m;
}

static int pool_create(struct kretprobe *rp)
{
	int n = rp->maxactive > 0 ? rp->maxactive : (2 * ncpus() > 10 ? 2 * ncpus() : 10);
	size_t stride = (sizeof(struct kp_ri) + rp->data_size + 15) & ~(size_t)15;
	struct kp_rp_pool *pool;

	if ((size_t)n > POOL_MAX_BYTES / stride)
		return -ENOMEM;
	pool = calloc(1, sizeof(*pool));
	if (!pool)
		return -ENOMEM;
	pthread_once(&atfork_once, atfork_register);
	pool->mem = calloc((size_t)n, stride);
	if (!pool->mem) {
		free(pool);
		return -ENOMEM;
	}
	pool->rp = rp;
	pool->needs = rp->handler ? kp_code_needs((uintptr_t)rp->handler) : 0;
	/* kprobes_vector_reg() in the handler: the state saved around it
	 * (out of the trampoline's fast path, which keeps none). */
	if (rp->kp.flags & KPROBE_FLAG_VECTOR_REGS)
		pool->needs |= KP_OPT_SAVE_VECTOR;
	/* Others take cached instances back only after a membarrier. */
	pool->cache_state = kp_membarrier_ok ? CACHE_ON : CACHE_OFF;
	pool->cache_slot = (uint8_t)(__atomic_fetch_add(&next_cache_slot, 1, __ATOMIC_RELAXED) %
				     KP_RI_CACHE);
	kp_probe_ri_slot(&rp->kp) = pool->cache_slot;
	pool->cache_max = cache_max_of(n);
	pool->stride = stride;
	pool->n = n;
	pthread_mutex_lock(&kp_registry_lock);
	/* one check of the text-writing descriptor for all the stubs */
	kp_mem_batch_begin();
	pool->stubs = arch_ret_stubs_create(n, ret_addr_location, pool);
	kp_mem_batch_end();
	pthread_mutex_unlock(&kp_registry_lock);
	if (!pool->stubs) {
		free(pool->mem);
		free(pool);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++) {
		struct kp_ri *ri = ri_at(pool, (uint32_t)i);

		ri->pool = pool;
		ri->pub.rp = rp;	/* for good: the entry's fast path relies on it */
		ri->idx = (uint32_t)i;
		ri->stub = arch_ret_stub(pool->stubs, i);
		ri->stub_entry = ri->stub - ARCH_RET_STUB_ENTRY;
		ri->next_free = i + 1 < n ? (uint32_t)(i + 2) : 0;
	}
	pool->free_head = 1;
	pool->live = true;
	rp->__pool = pool;
	__atomic_fetch_add(&kp_rp_pools_alive, 1, __ATOMIC_RELAXED);
	return 0;
}

static void pool_free(struct kp_rp_pool *pool)
{
	__atomic_fetch_sub(&kp_rp_pools_alive, 1, __ATOMIC_RELAXED);
	arch_ret_stubs_destroy(pool->stubs);
	free(pool->mem);
	free(pool);
}

/* No instance of an unregistered pool is held by a frame any more. */
static bool pool_idle(struct kp_rp_pool *pool)
{
	for (int i = 0; i < pool->n; i++)
		if (__atomic_load_n(&ri_at(pool, (uint32_t)i)->owner, __ATOMIC_ACQUIRE))
			return false;
	return true;
}

/* Frees unregistered pools once no frame can return through them. */
static void orphans_collect(void)
{
	struct kp_rp_pool **link = &orphans;

	while (*link) {
		struct kp_rp_pool *pool = *link;

		pool_reap_dead(pool);
		if (pool_idle(pool)) {
			*link = pool->next_orphan;
			pool_free(pool);
		} else {
			link = &pool->next_orphan;
		}
	}
}

static void pool_orphan(struct kretprobe *rp)
{
	struct kp_rp_pool *pool = rp->__pool;

	rp->__pool = NULL;
	if (!pool)
		return;
	pool_uncache(pool, kp_thread_current(), true);
	pool->next_orphan = orphans;
	orphans = pool;
}

int kp_register_batch(struct kprobe **ps, int n, enum kp_type type);
void kp_unregister_batch(struct kprobe **ps, int n);

KP_EXPORT int register_kretprobes(struct kretprobe **rps, int num)
{
	struct kprobe **kps;
	int err = 0, i;

	if (num <= 0 || !rps)
		return num == 0 ? 0 : -EINVAL;
	kps = calloc((size_t)num, sizeof(*kps));
	if (!kps)
		return -ENOMEM;
	for (i = 0; i < num && !err; i++) {
		if (!rps[i] || (rps[i]->kp.symbol_name && rps[i]->kp.offset) || rps[i]->__pool)
			err = -EINVAL;
		else
			err = check_sizes(rps[i]);
		if (!err)
			err = pool_create(rps[i]);
		if (err)
			break;
		rps[i]->kp.pre_handler = kretprobe_entry;
		rps[i]->kp.post_handler = NULL;
		rps[i]->nmissed = 0;
		kps[i] = &rps[i]->kp;
	}
	if (!err)
		err = kp_register_batch(kps, num, KP_TYPE_KRETPROBE);
	if (err) {
		/* A probe that joined an armed address was live until the
		 * batch failed: a frame may hold one of its instances, so its
		 * pool is freed only once idle, as after unregistering. */
		pthread_mutex_lock(&kp_registry_lock);
		for (int j = 0; j < i && j < num; j++)
			if (rps[j] && rps[j]->__pool && kps[j])
				__atomic_store_n(&((struct kp_rp_pool *)rps[j]->__pool)->live, false,
						 __ATOMIC_RELEASE);
		/* No return handler runs for them after we return. */
		kp_synchronize();
		for (int j = 0; j < i && j < num; j++)
			if (rps[j] && rps[j]->__pool && kps[j])
				pool_orphan(rps[j]);
		orphans_collect();
		pthread_mutex_unlock(&kp_registry_lock);
	}
	free(kps);
	return err;
}

KP_EXPORT int register_kretprobe(struct kretprobe *rp)
{
	return register_kretprobes(&rp, 1);
}

KP_EXPORT void unregister_kretprobes(struct kretprobe **rps, int num)
{
	struct kprobe **kps;

	if (num <= 0 || !rps)
		return;
	kps = calloc((size_t)num, sizeof(*kps));
	if (!kps)
		return;
	for (int i = 0; i < num; i++) {
		kps[i] = rps[i] ? &rps[i]->kp : NULL;
		if (rps[i] && rps[i]->__pool)
			__atomic_store_n(&((struct kp_rp_pool *)rps[i]->__pool)->live, false,
					 __ATOMIC_RELEASE);
	}
	/* The grace period inside also covers the trampoline's handler calls. */
	kp_unregister_batch(kps, num);
	pthread_mutex_lock(&kp_registry_lock);
	for (int i = 0; i < num; i++)
		if (rps[i])
			pool_orphan(rps[i]);
	orphans_collect();
	pthread_mutex_unlock(&kp_registry_lock);
	free(kps);
}

KP_EXPORT void unregister_kretprobe(struct kretprobe *rp)
{
	unregister_kretprobes(&rp, 1);
}

KP_EXPORT int disable_kretprobe(struct kretprobe *rp)
{
	return rp ? disable_kprobe(&rp->kp) : -EINVAL;
}

KP_EXPORT int enable_kretprobe(struct kretprobe *rp)
{
	return rp ? enable_kprobe(&rp->kp) : -EINVAL;
}

KP_EXPORT unsigned long kretprobe_find_ret_addr(unsigned long addr, unsigned long slot)
{
	/* A thread without a record has no instances: the unwinder calls
	 * this from handlers, which must not reach a record's creation. */
	struct kp_thread *t = kp_thread_existing();

	for (struct kp_ri *ri = t ? t->ri_top : NULL; ri; ri = ri->next)
		if (ri->slot == slot && ri->stub == addr)
			return (unsigned long)ri->pub.ret_addr;
	return addr;
}

/* Puts the real return addresses back into the stack slots of this
 * thread's live return-probed frames (for unwinders); `release` also gives
 * the instances up, otherwise hijack_again() re-installs them. */
void kp_kretprobe_unhijack(bool release)
{
	struct kp_thread *t = kp_thread_current();
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0), *at;
	struct kp_ri *ri;

	if (!t)
		return;
	for (ri = t->ri_top; ri; ri = ri->next)
		if (ri->slot >= sp && arch_frame_ret_addr(ri->slot, &at) && *at == ri->stub)
			*at = (uintptr_t)ri->pub.ret_addr;
	while (release && (ri = t->ri_top)) {
		t->ri_top = ri->next;
		ri_put(t, ri);
	}
}

void kp_kretprobe_rehijack(void)
{
	struct kp_thread *t = kp_thread_current();
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0), *at;

	for (struct kp_ri *ri = t ? t->ri_top : NULL; ri; ri = ri->next)
		if (ri->slot >= sp && arch_frame_ret_addr(ri->slot, &at) &&
		    *at == (uintptr_t)ri->pub.ret_addr)
			*at = ri->stub;
}

void kp_kretprobe_after_catch(uintptr_t cfa)
{
	struct kp_thread *t = kp_thread_current();
	struct kp_ri *ri;
	uintptr_t *at;

	if (!t || !cfa)
		return;
	while ((ri = t->ri_top) && ri->slot < arch_return_slot_of_cfa(cfa)) {
		t->ri_top = ri->next;
		ri_put(t, ri);
	}
	for (ri = t->ri_top; ri; ri = ri->next)
		if (arch_frame_ret_addr(ri->slot, &at) && *at == (uintptr_t)ri->pub.ret_addr)
			*at = ri->stub;
}
