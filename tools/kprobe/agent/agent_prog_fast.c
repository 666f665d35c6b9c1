/* The handlers of a probe program's fast forms: the aggregations
 * `@x = count()`, `@[src] = count()`, `@x = hist(src)` and the latency
 * pattern's halves `@s[src] = nsecs` and `/@s[src]/ { @h = hist(nsecs -
 * @s[src]); delete(@s[src]); }`, at an entry or a return, without the
 * interpreter.
 *
 * Built for the library's lightest save levels (section 2.3 of the
 * design): the handlers and everything they run (the map code of
 * maps_impl.h, inlined) make no call, no system call, write nothing
 * through %fs (the thread's state is reached through a laundered
 * pointer, its id read from glibc's thread control block), use no vector
 * register, and read %rsi (their pt_regs) only where the form's source is
 * an argument or the return value.  This file is compiled with %rsi and
 * r8-r11 reserved (kprobe.mk), so the compiler never picks them: a form
 * on tid, pid, cpu, probe, func or nsecs then needs nothing saved beyond
 * the light level (an optimized entry jumps straight into its handler, a
 * return probe takes the assembly fast path); one on argN at an entry
 * reads its argument registers and nothing else of its pt_regs, and is
 * registered with KPROBE_FLAG_ARGS_ONLY, which an optimized entry serves
 * as cheaply as the light level; one on retval gets a complete pt_regs,
 * still with no vector state nor errno. */
#include <stdlib.h>
#include <string.h>

#include "agent_hit.h"
#include "agent_prog.h"
#include "lang/lang_int.h"
#include "lang/maps_impl.h"

#define FAST_INLINE static inline __attribute__((always_inline))

/* What a point's hits read, gathered at set-up in one place, so that a
 * hit follows one pointer from its probe instead of a chain (probe,
 * session, program, image, descriptor): the probe's descriptor (a copy of
 * the verified one), where its maps are, the clock, and the slots it can
 * keep. */
struct prog_point {
	struct lang_probe_desc d;
	struct agent_prog *prog;
	void *region;
	unsigned int gen;		/* the session's */
	uint64_t uid;
	uint64_t start_ns, start_tsc, tick_q32;	/* nsecs from the TSC */
	uint64_t id;			/* `probe`: PROBE_ID_DESC | desc */
	uint64_t func;			/* `func`: the point's function */
	/* fast_map when keyless (count, hist, the latency pattern's hist):
	 * its one slot's word and value, fixed for the program's life */
	const uint64_t *kword;
	int64_t *kval;
	/* whether it has shards, and its shard's offset in a thread's
	 * block (lang_image.map_shard_off) */
	bool ksharded;
	size_t koff;
	/* fast_map counted by tid, and by nothing else (map_tid_owned) */
	bool tid_owned;
	/* The latency pattern's map of start times is one of thread values
	 * (lang_image.map_tval_off): tval, and the offset of a thread's
	 * entry in its block of shards */
	bool tval;
	size_t toff;
	/* `@[probe]`, `@[func]`: the slot of the point's own key, or NULL */
	uint8_t *pval;
	/* A filter on an argument at an entry: tested by the handler before
	 * anything else (entry_arg_pred), from the argument's place in
	 * pt_regs */
	bool arg_pred;
	bool pred_neg;
	uint8_t pred_off;
	/* the filter as a range: x passes when (x - lo <= span) != neg */
	uint64_t pred_lo, pred_span;
	struct prog_point *next;	/* the program's list */
} __attribute__((aligned(64)));

/* A thread's state for the fast forms, valid for the session of
 * generation gen in the process agent_hit_pid was when it was filled (a
 * fork child's thread fills it again). */
struct prog_thread {
	unsigned int gen;
	pid_t pid;
	pid_t tid;
	bool library;		/* the library's own thread: not the program's */
	/* The fast handlers' view of shard below, valid while gen and pid
	 * are: the thread's block of shards in the region (NULL: not looked
	 * at yet, NO_SHARD: none), so that a hit checks one word, on the line
	 * it reads already. */
	uint8_t *fblock;
	/* The slot the thread's last keyed form went to (a thread counting
	 * or timing by its own tid hits the same one every time): valid
	 * while the map and the key are the same and the slot's word still
	 * reads w, which a delete, a clear or a new key in the slot changes. */
	unsigned int map;
	uint64_t key;
	uint64_t *word;		/* NULL: none */
	uint64_t w;
	int64_t *val;
	/* 1 + the thread's shard of the keyless aggregations (0: none, the
	 * locked path), taken in the session of generation shard_gen by
	 * the process shard_pid (a fork child takes its own: the region may
	 * be shared with the parent). */
	uint32_t shard;
	unsigned int shard_gen;
	pid_t shard_pid;
};

static __thread struct prog_thread prog_tls TLS;

/* Through a plain pointer: the handler analysis takes a store through %fs
 * for one to errno. */
FAST_INLINE struct prog_thread *prog_self(void)
{
	struct prog_thread *t = &prog_tls;

	__asm__("" : "+r"(t));
	return t;
}

/* The calling thread for a hit in the session of generation gen, or NULL
 * when the hit is not the program's (agent code, the library's optimizer
 * thread, a fork child of a session that does not follow). */
FAST_INLINE struct prog_thread *prog_thread(unsigned int gen)
{
	struct prog_thread *t = prog_self();

	if (self()->agent_depth > 0 || __atomic_load_n(&agent_hit_quiet, __ATOMIC_RELAXED))
		return NULL;
	if (__builtin_expect(t->gen != gen || t->pid != agent_hit_pid, 0)) {
		/* before gen: a hit in a signal handler from here on sees
		 * no shard kept, whatever it sees of the rest */
		t->fblock = NULL;
		__asm__ volatile("" ::: "memory");
		t->gen = gen;
		t->pid = agent_hit_pid;
		t->tid = *(volatile const pid_t *)((const char *)__builtin_thread_pointer() +
						   agent_tid_offset);
		t->library = kprobes_library_thread(t->tid);
		t->word = NULL;
	}
	return t->library ? NULL : t;
}

/* The thread's shard (1 + index, 0: none) in the session of generation
 * gen, taken from region at its first use.  A signal handler that hits a
 * probe while the thread takes one takes its own and the thread keeps
 * that: the shard is published (gen and pid) only once it is stored. */
FAST_INLINE uint32_t thread_shard(struct prog_thread *t, const struct lang_image *img,
				   unsigned int gen, void *region)
{
	if (__builtin_expect(t->shard_gen == gen && t->shard_pid == agent_hit_pid, 1))
		return t->shard;
	t->shard = mapi_take_shard(region);
	if (t->shard)
		mapi_tval_adopt(img, region, t->shard, (uint64_t)t->tid);
	__asm__ volatile("" ::: "memory");
	t->shard_pid = agent_hit_pid;
	t->shard_gen = gen;
	return t->shard;
}

uint32_t agent_prog_thread_shard(const struct agent_prog *p)
{
	return thread_shard(prog_self(), &p->img, p->gen, p->region);
}

#define NO_SHARD ((uint8_t *)1)

/* The fast handlers' block of shards of the thread, taken at its first
 * keyless update in the session (prog_thread() resets it).  A signal
 * handler's hit between the take and the store takes its own: the thread
 * then keeps one of the two, and neither is written by another thread. */
static __attribute__((noinline)) uint8_t *fast_take_shard(const struct prog_point *pt)
{
	const struct lang_image *img = &pt->prog->img;
	struct prog_thread *t = prog_self();
	uint32_t shard = thread_shard(t, img, pt->gen, pt->region);

	t->fblock = shard ? (uint8_t *)pt->region + img->shards_off +
				    (size_t)(shard - 1) * img->shard_block :
			    NO_SHARD;
	return t->fblock;
}

/* The thread's shard of the point's keyless map (keyless_val's, which
 * made it live), or NULL when the map has none or the thread none: the
 * locked path. */
FAST_INLINE int64_t *keyless_shard(struct prog_thread *t, const struct prog_point *pt)
{
	uint8_t *block = t->fblock;

	if (__builtin_expect(!pt->ksharded, 0))
		return NULL;
	if (__builtin_expect(!block, 0))
		block = fast_take_shard(pt);
	return __builtin_expect(block != NO_SHARD, 1) ? (int64_t *)(block + pt->koff) : NULL;
}

/* Adds v to the word at byte off of a keyless map's value: in the
 * thread's shard, else with a locked add. */
FAST_INLINE void keyless_add(struct prog_thread *t, const struct prog_point *pt, size_t off,
			     int64_t v)
{
	int64_t *sv = keyless_shard(t, pt);

	if (__builtin_expect(sv != NULL, 1))
		mapi_owner_add((int64_t *)((uint8_t *)sv + off), v);
	else
		__atomic_fetch_add((int64_t *)((uint8_t *)pt->kval + off), v, __ATOMIC_RELAXED);
}

/* One sample into bucket idx of the point's keyless hist, the latency
 * pattern's: a thread with a shard adds it a sample late
 * (mapi_hist_add_late), so that the bucket of the time just read is not
 * the address of the hit's add. */
FAST_INLINE void keyless_hist_late(struct prog_thread *t, const struct prog_point *pt,
				   unsigned idx)
{
	int64_t *sv = keyless_shard(t, pt);

	if (__builtin_expect(sv != NULL, 1))
		mapi_hist_add_late(sv, idx);
	else
		__atomic_fetch_add(&pt->kval[idx], 1, __ATOMIC_RELAXED);
}

/* nsecs at the time stamp cycles (a kp_cycles() reading). */
FAST_INLINE uint64_t point_nsecs_at(const struct prog_point *pt, uint64_t cycles)
{
	return pt->start_ns + (uint64_t)(((unsigned __int128)(cycles - pt->start_tsc) *
					  pt->tick_q32) >> 32);
}

FAST_INLINE uint64_t point_nsecs(const struct prog_point *pt)
{
	return point_nsecs_at(pt, kp_cycles());
}

/* A source's value; with_regs false for the handlers that must not look
 * at their pt_regs (the source is then none of argN and retval). */
FAST_INLINE uint64_t fast_src_value(const struct prog_point *pt, const struct prog_thread *t,
				    const struct pt_regs *regs, bool with_regs, int src,
				    unsigned int arg)
{
	/* (first: a handler with pt_regs is there for an argument) */
	if (with_regs && src == LANG_SRC_ARG) {
		if (arg == 0)
			return KP_ARG_REG(regs, 0);
		if (arg == 1)
			return KP_ARG_REG(regs, 1);
		if (arg == 2)
			return KP_ARG_REG(regs, 2);
		if (arg == 3)
			return KP_ARG_REG(regs, 3);
		if (arg == 4)
			return KP_ARG_REG(regs, 4);
		return KP_ARG_REG(regs, 5);
	}
	if (src == LANG_SRC_TID)
		return (uint64_t)t->tid;
	if (src == LANG_SRC_PID)
		return (uint64_t)t->pid;
	if (src == LANG_SRC_CPU) {
		return kp_cpu_id();
	}
	if (src == LANG_SRC_UID)
		return pt->uid;
	if (src == LANG_SRC_NSECS)
		return point_nsecs(pt);
	if (src == LANG_SRC_PROBE)
		return pt->id;
	if (src == LANG_SRC_FUNC)
		return pt->func;
	if (with_regs && src == LANG_SRC_RETVAL)
		return regs_return_value(regs);
	return 0;	/* LANG_SRC_NONE */
}

/* The slow halves of the lookups below, out of line so that a hit that
 * finds its slot kept stays short (fewer registers to save), and each
 * taking one argument: a call's second argument would arrive in %rsi,
 * which the handler analysis takes for a read of pt_regs. */
struct slow_lookup {
	struct prog_thread *t;
	struct prog_point *pt;
	unsigned int m;
	bool create;
	uint64_t key;
};

static __attribute__((noinline)) int64_t *keyless_slow(const struct prog_point *pt)
{
	return (int64_t *)mapi_lookup_keyless(&pt->prog->img, pt->region, pt->d.fast_map, 1);
}

/* The thread's slot cache missed, or its slot changed: revive the slot
 * the thread itself deleted, or look the key up and keep its slot. */
static __attribute__((noinline)) int64_t *thread_slot_slow(const struct slow_lookup *r)
{
	const struct lang_image *img = &r->pt->prog->img;
	struct prog_thread *t = r->t;
	uint64_t key = r->key, w;
	uint8_t *val;

	if (t->word && t->map == r->m && t->key == key) {
		w = __atomic_load_n(t->word, __ATOMIC_ACQUIRE);
		if (r->create && w == lang_map_word_deleted(t->w) &&
		    mapi_revive(img, r->pt->region, r->m, (uint8_t *)t->val, w, &key)) {
			t->w = __atomic_load_n(t->word, __ATOMIC_ACQUIRE);
			if (!lang_map_word_live(t->w))
				t->word = NULL;
			return t->val;
		}
	}
	val = mapi_lookup_hashed(img, r->pt->region, r->m, &key, mapi_key8_hash(key), r->create);
	if (!val)
		return NULL;
	t->map = r->m;
	t->key = key;
	t->word = (uint64_t *)(val - 16);
	t->w = __atomic_load_n(t->word, __ATOMIC_ACQUIRE);
	t->val = (int64_t *)val;
	if (!lang_map_word_live(t->w))
		t->word = NULL;	/* deleted already: look it up next time */
	return t->val;
}

static __attribute__((noinline)) int64_t *point_slot_slow(const struct slow_lookup *r)
{
	struct prog_point *pt = r->pt;
	uint64_t key = r->key;
	uint8_t *val;

	val = mapi_lookup_hashed(&pt->prog->img, pt->region, r->m, &key, mapi_key8_hash(key), 1);
	if (val)
		__atomic_store_n(&pt->pval, val, __ATOMIC_RELEASE);
	return (int64_t *)val;
}

/* The value of a keyless fast_map: its slot's value, once the slot is
 * live (a clear() empties it; the lookup makes it live again). */
FAST_INLINE int64_t *keyless_val(const struct prog_point *pt)
{
	if (__builtin_expect(__atomic_load_n(pt->kword, __ATOMIC_ACQUIRE) == ST_LIVE, 1))
		return pt->kval;
	return keyless_slow(pt);
}

/* The value of 8-byte key in map m through the thread's slot cache.  A
 * slot this thread saw deleted, and nobody has taken since, is given back
 * to the key in place (the latency pattern deletes and re-creates the
 * same key on every call).  The fast forms' keyed maps have one 8-byte
 * key (verified): a slot's word is 16 bytes before its value. */
FAST_INLINE int64_t *thread_slot(struct prog_thread *t, struct prog_point *pt, unsigned m,
				 uint64_t key, bool create)
{
	struct slow_lookup r = { t, pt, m, create, key };

	if (__builtin_expect(t->word && t->map == m && t->key == key, 1)) {
		uint64_t w = __atomic_load_n(t->word, __ATOMIC_ACQUIRE);

		if (__builtin_expect(w == t->w, 1))
			return t->val;
		/* the slot this thread deleted (the latency pattern's return
		 * half): back to the key in place, its count never given up */
		if (create && w == lang_map_word_deleted(t->w) &&
		    mapi_revive_counted(&pt->prog->img, m, (uint8_t *)t->val, w)) {
			t->w = __atomic_load_n(t->word, __ATOMIC_ACQUIRE);
			if (__builtin_expect(lang_map_word_live(t->w), 1))
				return t->val;
			t->word = NULL;
		}
	}
	return thread_slot_slow(&r);
}

/* The value of the point's own key (`probe` or `func`: the same at every
 * hit of the point), created if need be: the slot is kept per point and
 * checked at each hit (live, the key still in it, the word unchanged
 * across the check), so a count by probe hashes once per point. */
FAST_INLINE int64_t *point_slot(struct prog_point *pt, unsigned m, uint64_t key)
{
	uint8_t *val = __atomic_load_n(&pt->pval, __ATOMIC_ACQUIRE);
	struct slow_lookup r = { NULL, pt, m, true, key };

	if (__builtin_expect(val != NULL, 1)) {
		const uint64_t *word = (const uint64_t *)(val - 16);
		uint64_t w = __atomic_load_n(word, __ATOMIC_ACQUIRE);

		if (__builtin_expect(lang_map_word_live(w) && load8(val - 8) == key &&
				     __atomic_load_n(word, __ATOMIC_ACQUIRE) == w, 1))
			return (int64_t *)val;
	}
	return point_slot_slow(&r);
}

/* The thread's own entry in the point's map of thread values, or NULL
 * when the map is not one or the thread has no shard (its key then has a
 * slot of the map). */
FAST_INLINE struct lang_tval *thread_tval(struct prog_thread *t, const struct prog_point *pt)
{
	uint8_t *block = t->fblock;

	if (!pt->tval)
		return NULL;
	if (__builtin_expect(!block, 0))
		block = fast_take_shard(pt);
	return block != NO_SHARD ? (struct lang_tval *)(block + pt->toff) : NULL;
}

/* The latency pattern's return half on a thread's own entry: as below,
 * with plain loads and stores. */
FAST_INLINE void delta_hist_tval(struct prog_thread *t, struct prog_point *pt,
				 struct lang_tval *e, uint64_t now)
{
	int64_t start = mapi_tval_read(e);

	if (!start)
		return;	/* the filter is false */
	if (keyless_val(pt))
		keyless_hist_late(t, pt, mapi_hist_index((int64_t)(point_nsecs_at(pt, now) -
								   (uint64_t)start)));
	mapi_tval_delete(e);
}

/* The latency pattern's return half: the start value, if any, becomes a
 * hist sample of now - start, and the entry is deleted (the slot the
 * thread's cache holds: its word goes from live to deleted, as
 * lang_map_delete_val does it). */
FAST_INLINE void delta_hist(struct prog_thread *t, struct prog_point *pt, uint64_t key,
			    uint64_t now)
{
	int64_t *val = thread_slot(t, pt, pt->d.fast_map2, key, false), start, *hist;
	uint64_t w;

	start = val ? __atomic_load_n(val, __ATOMIC_RELAXED) : 0;
	if (!start)
		return;	/* the filter is false */
	hist = keyless_val(pt);
	if (hist)
		keyless_hist_late(t, pt, mapi_hist_index((int64_t)(point_nsecs_at(pt, now) -
								   (uint64_t)start)));
	/* t->word is val's slot's word, as it read live; NULL when the slot
	 * was no longer live once found (deleted or cleared meanwhile:
	 * nothing left to delete) */
	w = t->w;
	if (t->word)
		__atomic_compare_exchange_n(t->word, &w, lang_map_word_deleted(w), false,
					    __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

/* A hit's point, thread and the form's source value; false when the hit
 * is not the program's, the program has exited or the filter is false. */
FAST_INLINE bool fast_hit(struct agent_probe *ap, const struct pt_regs *regs, bool with_regs,
			  struct prog_point **ptp, struct prog_thread **tp, uint64_t *x)
{
	struct prog_point *pt = ap->prog_point;
	const struct region_hdr *rh = pt->region;
	/* In a handler with pt_regs, a filter on anything but the thread's
	 * ids is tested first: a false one ends the hit before the thread's
	 * state is looked at (which only decides whether the hit counts at
	 * all).  The handlers without pt_regs keep their order. */
	bool pred_first = with_regs && pt->d.pred && pt->d.pred_src != LANG_SRC_TID &&
			  pt->d.pred_src != LANG_SRC_PID;
	struct prog_thread *t;

	if (pred_first && !lang_fast_pred(&pt->d, fast_src_value(pt, NULL, regs, with_regs,
								  pt->d.pred_src, pt->d.pred_arg)))
		return false;
	t = prog_thread(pt->gen);
	if (!t || __atomic_load_n(&rh->exited, __ATOMIC_RELAXED))
		return false;
	if (pt->d.pred && !pred_first &&
	    !lang_fast_pred(&pt->d, fast_src_value(pt, t, regs, with_regs, pt->d.pred_src,
						   pt->d.pred_arg)))
		return false;
	*x = fast_src_value(pt, t, regs, with_regs, pt->d.fast_src, pt->d.fast_arg);
	*ptp = pt;
	*tp = t;
	return true;
}

/* One function per form, and per form one handler for an entry and one
 * for a return, each with and without pt_regs: every handler holds only
 * the code its form runs, which keeps the library's analysis of it (at
 * each probe's registration) short. */

/* @x = count() */
FAST_INLINE void form_count_keyless(struct agent_probe *ap, const struct pt_regs *regs,
				    bool with_regs)
{
	struct prog_point *pt;
	struct prog_thread *t;
	int64_t *val;
	uint64_t x;

	if (!fast_hit(ap, regs, with_regs, &pt, &t, &x))
		return;
	val = keyless_val(pt);
	if (val)
		keyless_add(t, pt, 0, 1);
}

/* @[probe] = count(), @[func] = count(): the point's own key */
FAST_INLINE void form_count_point(struct agent_probe *ap, const struct pt_regs *regs,
				  bool with_regs)
{
	struct prog_point *pt;
	struct prog_thread *t;
	int64_t *val;
	uint64_t x;

	if (!fast_hit(ap, regs, with_regs, &pt, &t, &x))
		return;
	val = point_slot(pt, pt->d.fast_map, x);
	if (val)
		__atomic_fetch_add(val, 1, __ATOMIC_RELAXED);
}

/* @[src] = count() for any other source: through the thread's cache */
FAST_INLINE void form_count_key(struct agent_probe *ap, const struct pt_regs *regs,
				bool with_regs)
{
	struct prog_point *pt;
	struct prog_thread *t;
	struct lang_tval *e;
	int64_t *val;
	uint64_t x;

	if (!fast_hit(ap, regs, with_regs, &pt, &t, &x))
		return;
	if ((e = thread_tval(t, pt)) != NULL) {
		mapi_tval_count(e, x);
		return;
	}
	val = thread_slot(t, pt, pt->d.fast_map, x, true);
	if (!val)
		return;
	/* A thread's own tid is a key no other thread counts (a tid is
	 * reused only after its thread is gone) when every writer of the map
	 * keys by it: the owner's add, one instruction its signal handlers
	 * can not split.  Any other key may be shared. */
	if (pt->tid_owned)
		mapi_owner_add(val, 1);
	else
		__atomic_fetch_add(val, 1, __ATOMIC_RELAXED);
}

/* @x = hist(src) */
FAST_INLINE void form_hist(struct agent_probe *ap, const struct pt_regs *regs, bool with_regs)
{
	struct prog_point *pt;
	struct prog_thread *t;
	int64_t *val;
	uint64_t x;

	if (!fast_hit(ap, regs, with_regs, &pt, &t, &x))
		return;
	val = keyless_val(pt);
	if (val)
		keyless_add(t, pt, 8 * (size_t)mapi_hist_index((int64_t)x), 1);
}

/* @s[src] = nsecs.  The latency pattern's halves read the clock before
 * anything else: the read is slow to complete but nothing waits on it
 * until the end, so the slot lookups run meanwhile (read after them, it
 * cost the pattern some 5 ns a call); a hit the form then drops has read
 * it for nothing. */
FAST_INLINE void form_store(struct agent_probe *ap, const struct pt_regs *regs, bool with_regs)
{
	uint64_t now = kp_cycles();
	struct prog_point *pt;
	struct prog_thread *t;
	struct lang_tval *e;
	int64_t *val;
	uint64_t x;

	if (!fast_hit(ap, regs, with_regs, &pt, &t, &x))
		return;
	if ((e = thread_tval(t, pt)) != NULL) {
		mapi_tval_store(e, x, (int64_t)point_nsecs_at(pt, now));
		return;
	}
	val = thread_slot(t, pt, pt->d.fast_map, x, true);
	if (val)
		__atomic_store_n(val, (int64_t)point_nsecs_at(pt, now), __ATOMIC_RELAXED);
}

/* /@s[src]/ { @h = hist(nsecs - @s[src]); delete(@s[src]); }, the clock
 * read first as in form_store */
FAST_INLINE void form_delta(struct agent_probe *ap, const struct pt_regs *regs, bool with_regs)
{
	uint64_t now = kp_cycles();
	struct prog_point *pt;
	struct prog_thread *t;
	struct lang_tval *e;
	uint64_t x;

	if (!fast_hit(ap, regs, with_regs, &pt, &t, &x))
		return;
	if ((e = thread_tval(t, pt)) != NULL)
		delta_hist_tval(t, pt, e, now);
	else
		delta_hist(t, pt, x, now);
}

#define container_of(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

/* Whether an entry's filter on an argument lets the hit through (true
 * when there is none): a false one ends the hit after three loads, with
 * nothing saved, before the rest of the handler (out of line) sets up a
 * frame. */
FAST_INLINE bool entry_arg_pred(const struct kprobe *kp, const struct pt_regs *regs)
{
	const struct prog_point *pt = container_of(kp, struct agent_probe, u.kp)->prog_point;

	uint64_t x;

	if (!pt->arg_pred)
		return true;
	x = *(const uint64_t *)((const char *)regs + pt->pred_off);
	return (x - pt->pred_lo <= pt->pred_span) != pt->pred_neg;
}

/* The five handlers of a form (the last: a return taken at an exit site,
 * agent_exit_handler()). */
#define FORM_HANDLERS(form)                                                                   \
	static int form##_entry(struct kprobe *kp, struct pt_regs *regs)                      \
	{                                                                                      \
		(void)regs;                                                                    \
		form_##form(container_of(kp, struct agent_probe, u.kp), NULL, false);         \
		return 0;                                                                      \
	}                                                                                      \
	static int form##_return(struct kretprobe_instance *ri, struct pt_regs *regs)         \
	{                                                                                      \
		(void)regs;                                                                    \
		form_##form(container_of(ri->rp, struct agent_probe, u.rp), NULL, false);     \
		return 0;                                                                      \
	}                                                                                      \
	static __attribute__((noinline)) int form##_entry_regs_rest(struct kprobe *kp,       \
								     struct pt_regs *regs)     \
	{                                                                                      \
		form_##form(container_of(kp, struct agent_probe, u.kp), regs, true);          \
		return 0;                                                                      \
	}                                                                                      \
	static int form##_entry_regs(struct kprobe *kp, struct pt_regs *regs)                 \
	{                                                                                      \
		if (!entry_arg_pred(kp, regs))                                                 \
			return 0;                                                              \
		return form##_entry_regs_rest(kp, regs);                                       \
	}                                                                                      \
	static int form##_return_regs(struct kretprobe_instance *ri, struct pt_regs *regs)    \
	{                                                                                      \
		form_##form(container_of(ri->rp, struct agent_probe, u.rp), regs, true);      \
		return 0;                                                                      \
	}                                                                                      \
	static int form##_exit(struct kprobe *kp, struct pt_regs *regs)                       \
	{                                                                                      \
		(void)regs;                                                                    \
		form_##form(container_of(kp, struct agent_exit, kp)->ap, NULL, false);        \
		return 0;                                                                      \
	}

FORM_HANDLERS(count_keyless)
FORM_HANDLERS(count_point)
FORM_HANDLERS(count_key)
FORM_HANDLERS(hist)
FORM_HANDLERS(store)
FORM_HANDLERS(delta)

struct form_handlers {
	int (*entry)(struct kprobe *, struct pt_regs *);
	int (*ret)(struct kretprobe_instance *, struct pt_regs *);
	int (*entry_regs)(struct kprobe *, struct pt_regs *);
	int (*ret_regs)(struct kretprobe_instance *, struct pt_regs *);
	int (*exit)(struct kprobe *, struct pt_regs *);
};

#define FORM(form)                                                                            \
	{ form##_entry, form##_return, form##_entry_regs, form##_return_regs, form##_exit }
static const struct form_handlers forms[] = {
	FORM(count_keyless), FORM(count_point), FORM(count_key),
	FORM(hist), FORM(store), FORM(delta),
};
enum { F_COUNT_KEYLESS, F_COUNT_POINT, F_COUNT_KEY, F_HIST, F_STORE, F_DELTA };

/* Whether a source (src, argument arg) can be read here, and whether
 * from pt_regs. */
static bool fast_source(const struct lang_probe_desc *d, unsigned int src, unsigned int arg,
			bool *regs)
{
	*regs = false;
	switch (src) {
	case LANG_SRC_NONE:
	case LANG_SRC_TID:
	case LANG_SRC_PID:
	case LANG_SRC_CPU:
	case LANG_SRC_UID:
	case LANG_SRC_NSECS:
	case LANG_SRC_PROBE:
	case LANG_SRC_FUNC:
		return true;
	case LANG_SRC_ARG:
		*regs = true;
		return d->kind == LANG_P_UPROBE && arg < 6;
	case LANG_SRC_RETVAL:
		*regs = true;
		return d->kind == LANG_P_URETPROBE;
	default:
		return false;
	}
}

/* The form of probe descriptor d, or -1 when it has none these handlers
 * run. */
static int form_of(const struct agent_prog *p, const struct lang_probe_desc *d)
{
	bool point = d->fast_src == LANG_SRC_PROBE || d->fast_src == LANG_SRC_FUNC;

	/* nsecs only from the TSC: the clock's system call would cost every
	 * hit the library's full save */
	if (!p->tick_q32 && (d->fast_src == LANG_SRC_NSECS || d->fast == LANG_FAST_STORE_KEY ||
			     d->fast == LANG_FAST_DELTA_HIST ||
			     (d->pred && d->pred_src == LANG_SRC_NSECS)))
		return -1;
	/* the second source of the latency forms is nsecs */
	if ((d->fast == LANG_FAST_STORE_KEY || d->fast == LANG_FAST_DELTA_HIST) &&
	    d->fast_src2 != LANG_SRC_NSECS)
		return -1;
	if (d->fast == LANG_FAST_COUNT_KEYLESS)
		return F_COUNT_KEYLESS;
	if (d->fast == LANG_FAST_COUNT_KEY)
		return point ? F_COUNT_POINT : F_COUNT_KEY;
	if (d->fast == LANG_FAST_HIST)
		return F_HIST;
	if (d->fast == LANG_FAST_STORE_KEY)
		return F_STORE;
	if (d->fast == LANG_FAST_DELTA_HIST)
		return F_DELTA;
	return -1;
}

/* lang_fast_pred()'s /x CMP imm/ as a range [lo, lo + span] of x (modulo
 * 2^64, so that a signed range works too), negated or not: one
 * subtraction and one compare at a hit.  An empty range is the negation
 * of the full one. */
static void pred_as_range(struct prog_point *pt, uint8_t cmp, int64_t imm)
{
	uint64_t u = (uint64_t)imm, lo, hi;
	bool empty = false;

	pt->pred_neg = false;
	switch (cmp) {
	case LANG_OP_EQ: lo = hi = u; break;
	case LANG_OP_NE: lo = hi = u; pt->pred_neg = true; break;
	case LANG_OP_LT: lo = (uint64_t)INT64_MIN; hi = u - 1; empty = imm == INT64_MIN; break;
	case LANG_OP_LE: lo = (uint64_t)INT64_MIN; hi = u; break;
	case LANG_OP_GT: lo = u + 1; hi = (uint64_t)INT64_MAX; empty = imm == INT64_MAX; break;
	case LANG_OP_GE: lo = u; hi = (uint64_t)INT64_MAX; break;
	case LANG_OP_LTU: lo = 0; hi = u - 1; empty = u == 0; break;
	case LANG_OP_LEU: lo = 0; hi = u; break;
	case LANG_OP_GTU: lo = u + 1; hi = UINT64_MAX; empty = u == UINT64_MAX; break;
	default: lo = u; hi = UINT64_MAX; break;	/* LANG_OP_GEU, as lang_fast_pred */
	}
	if (empty) {
		lo = 0;
		hi = UINT64_MAX;
		pt->pred_neg = true;
	}
	pt->pred_lo = lo;
	pt->pred_span = hi - lo;
}

/* The point's state, on the program's list. */
static struct prog_point *new_point(struct agent_prog *p, const struct agent_probe *ap)
{
	const struct lang_probe_desc *d = &p->img.probes[ap->prog_probe];
	struct prog_point *pt = aligned_alloc(64, sizeof(*pt));
	const struct lang_image *img = &p->img;

	if (!pt)
		return NULL;
	memset(pt, 0, sizeof(*pt));
	pt->d = *d;
	pt->prog = p;
	pt->region = p->region;
	pt->gen = ap->session->gen;
	pt->uid = p->uid;
	pt->start_ns = p->start_ns;
	pt->start_tsc = p->start_tsc;
	pt->tick_q32 = p->tick_q32;
	pt->id = PROBE_ID_DESC | ap->desc;
	pt->func = (uint64_t)(uintptr_t)(ap->is_return ? ap->u.rp.kp.addr : ap->u.kp.addr);
	if (d->fast == LANG_FAST_COUNT_KEYLESS || d->fast == LANG_FAST_HIST ||
	    d->fast == LANG_FAST_DELTA_HIST) {
		uint8_t *slot = mapi_slot(img, mapi_map(img, p->region, d->fast_map), d->fast_map, 0);

		pt->kword = (const uint64_t *)slot;
		pt->kval = (int64_t *)mapi_val(img, d->fast_map, slot);
		if (img->map_shard_off[d->fast_map]) {
			pt->ksharded = true;
			pt->koff = img->map_shard_off[d->fast_map] - img->shards_off;
		}
	}
	if (!ap->is_return && d->pred && d->pred_src == LANG_SRC_ARG && d->pred_arg < 6) {
		static const uint8_t arg_off[6] = { KP_ARG_REG_OFFSETS };

		pt->arg_pred = true;
		pt->pred_off = arg_off[d->pred_arg];
		pred_as_range(pt, d->fast_cmp, d->fast_imm);
	}
	pt->tid_owned = d->fast == LANG_FAST_COUNT_KEY && d->fast_src == LANG_SRC_TID &&
			img->map_tid_owned[d->fast_map];
	if (d->fast == LANG_FAST_STORE_KEY || d->fast == LANG_FAST_DELTA_HIST ||
	    d->fast == LANG_FAST_COUNT_KEY) {
		size_t off = img->map_tval_off[d->fast == LANG_FAST_DELTA_HIST ? d->fast_map2 :
										 d->fast_map];

		pt->tval = off != 0;
		pt->toff = off ? off - img->shards_off : 0;
	}
	pt->next = p->points;
	p->points = pt;
	return pt;
}

void agent_prog_free_points(struct agent_prog *p)
{
	while (p->points) {
		struct prog_point *pt = p->points;

		p->points = pt->next;
		free(pt);
	}
}

bool agent_prog_set_fast_handlers(struct agent_probe *ap)
{
	struct agent_prog *p = ap->session->prog;
	const struct lang_probe_desc *d = &p->img.probes[ap->prog_probe];
	const struct form_handlers *f;
	int form = form_of(p, d);
	bool regs, pred_regs = false;

	/* without the thread's id from its control block the generic
	 * handlers ask the kernel */
	if (!agent_hit_light_ok() || form < 0 || !fast_source(d, d->fast_src, d->fast_arg, &regs) ||
	    (d->pred && !fast_source(d, d->pred_src, d->pred_arg, &pred_regs)))
		return false;
	/* the point's function: known once the probe is registered; func
	 * is its address, as the generic handlers give it */
	ap->prog_point = new_point(p, ap);
	if (!ap->prog_point)
		return false;
	regs |= pred_regs;
	f = &forms[form];
	if (ap->is_return) {
		ap->u.rp.handler = regs ? f->ret_regs : f->ret;
		ap->u.rp.entry_handler = NULL;
		ap->u.rp.data_size = 0;
	} else {
		ap->u.kp.pre_handler = regs ? f->entry_regs : f->entry;
		/* An entry's sources read from pt_regs are arguments only
		 * (fast_source): the library's args level is enough. */
		if (regs)
			ap->u.kp.flags |= KPROBE_FLAG_ARGS_ONLY;
	}
	return true;
}

kprobe_pre_handler_t agent_prog_exit_handler(const struct agent_probe *ap)
{
	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++)
		if (ap->u.rp.handler == forms[i].ret)
			return forms[i].exit;
	return NULL;
}
