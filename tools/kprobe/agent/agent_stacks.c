/* Stacks on the hit path: capturing a hit's stack with the library's
 * unwinder, and counting hits per distinct stack in the session's table
 * (stack_table.h).  Async-signal-safe: no lock, no allocation, no system
 * call; atomic operations only.
 *
 * A count session gives each ring (each thread that has one) a memo of
 * its last stack for kprobes_stack_memo(), which follows it instead of
 * unwinding the frames the new stack shares with it, and with it the
 * partial sums of that stack's hash and the entry it was counted in: a
 * stack that shares the last one's outer frames is hashed from the first
 * frame that differs, and the same stack again is counted without a
 * search.  An entry's hits by the thread that made it are counted with
 * plain instructions (stack_table.h). */
#include <sys/mman.h>

#include "agent.h"
#include "stack_table.h"

/* A ring's memory of its last stack, before the library's memo. */
struct stack_thread {
	int32_t n;		/* frames of the memo's last stack; -1: not known */
	uint32_t desc;		/* where it was hit */
	uint32_t entry;		/* its entry + 1; 0: none */
	uint32_t ready;		/* the memo is prepared */
	uint64_t sums[];	/* sums[d]: the mixes of its frames at distance <= d
				 * from the outermost (kps_stack_mix) */
};

static size_t thread_stride(unsigned int depth)
{
	size_t head = (sizeof(struct stack_thread) + 8 * (size_t)depth + 63) & ~(size_t)63;

	return head + ((KPROBES_STACK_MEMO_SIZE(depth) + 63) & ~(size_t)63);
}

static struct stack_thread *thread_at(const struct agent_session *s, int ring)
{
	return (struct stack_thread *)(s->stack_threads + (size_t)ring * thread_stride(s->cfg.stack_depth));
}

static struct kprobes_stack_memo *memo_of(struct stack_thread *st, unsigned int depth)
{
	size_t head = (sizeof(struct stack_thread) + 8 * (size_t)depth + 63) & ~(size_t)63;

	return (struct kprobes_stack_memo *)((char *)st + head);
}

void agent_stacks_start(struct agent_session *s)
{
	size_t bytes;
	void *p;

	if (s->cfg.action != ACT_COUNT || !s->cfg.stack_depth)
		return;
	/* a division: not on the hit path */
	s->stack_entries = kps_stack_max_entries(s->cfg.stack_depth);
	if (!s->nrings)
		return;
	/* untouched pages cost nothing: a ring's is touched when its thread
	 * first counts a stack */
	bytes = (size_t)s->nrings * thread_stride(s->cfg.stack_depth);
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		 -1, 0);
	if (p == MAP_FAILED)
		return;		/* counted without memos */
	s->stack_threads = p;
	s->stack_threads_bytes = bytes;
}

bool agent_stacks_wanted(const struct agent_session *s)
{
	return s->cfg.stack_depth || s->cfg.action == ACT_RUN;
}

void agent_stacks_free(struct agent_session *s)
{
	if (s->stack_threads)
		munmap(s->stack_threads, s->stack_threads_bytes);
	s->stack_threads = NULL;
}

static struct kps_stack_entry *entry_at(const struct agent_session *s, uint32_t id)
{
	return (struct kps_stack_entry *)(s->map.ring_data + kps_stack_entries_off() +
					  (size_t)id * kps_stack_stride(s->cfg.stack_depth));
}

/* One branch for the whole stack (its depth varies from hit to hit, an
 * early exit per frame would be mispredicted). */
static bool same_stack(const struct kps_stack_entry *e, uint32_t desc, const uint64_t *ips,
		       unsigned int n)
{
	uint64_t diff = 0;

	if (e->desc != desc || e->depth != n)
		return false;
	for (unsigned int i = 0; i < n; i++)
		diff |= e->ips[i] ^ ips[i];
	return !diff;
}

/* One more hit of e by the thread of ring: a plain increment of the
 * owner's count when that thread owns e (no other thread writes it, and
 * none of the thread's hits runs its handlers while another's run), else
 * an atomic add to the others'. */
static inline void entry_add(struct kps_stack_entry *e, int ring)
{
	if (ring >= 0 && e->owner == (uint32_t)ring + 1)
		__atomic_store_n(&e->own, __atomic_load_n(&e->own, __ATOMIC_RELAXED) + 1,
				 __ATOMIC_RELEASE);
	else
		__atomic_fetch_add(&e->count, 1, __ATOMIC_RELEASE);
}

/* A new entry holding the stack (not yet in the index), owned by the
 * thread of ring, or NULL when the table has none left. */
static struct kps_stack_entry *new_entry(struct agent_session *s, int ring, uint64_t hash,
					 uint32_t desc, const uint64_t *ips, int n, uint32_t *id)
{
	uint64_t *next = (uint64_t *)(void *)s->map.ring_data;
	uint64_t i = __atomic_fetch_add(next, 1, __ATOMIC_RELAXED);
	struct kps_stack_entry *e;

	if (i >= s->stack_entries)
		return NULL;
	*id = (uint32_t)i;
	e = entry_at(s, *id);
	e->hash = hash;
	e->desc = desc;
	e->depth = (uint32_t)n;
	e->owner = ring >= 0 ? (uint32_t)ring + 1 : 0;
	for (int k = 0; k < n; k++)
		e->ips[k] = ips[k];
	return e;
}

/* Counts the stack, whose hash is hash, in its entry (found, or made and
 * published) for the thread of ring; the entry's number + 1, or 0 when
 * the table has no room. */
static uint32_t count_hashed(struct agent_session *s, int ring, uint64_t hash, uint32_t desc,
			     const uint64_t *ips, int n)
{
	uint64_t *index = (uint64_t *)(void *)(s->map.ring_data + KPS_STACK_INDEX_OFF);
	uint64_t tag = hash & ~0xffffffffull;
	uint32_t slot = (uint32_t)hash & (KPS_STACK_SLOTS - 1), id = 0;
	struct kps_stack_entry *mine = NULL;

	for (int k = 0; k < KPS_STACK_PROBES; k++, slot = (slot + 1) & (KPS_STACK_SLOTS - 1)) {
		uint64_t v = __atomic_load_n(&index[slot], __ATOMIC_ACQUIRE);
		struct kps_stack_entry *e;

		if (!v) {
			if (!mine)
				mine = new_entry(s, ring, hash, desc, ips, n, &id);
			if (!mine)
				return 0;
			v = tag | (id + 1ull);
			/* the entry is complete before the index names it */
			if (__atomic_compare_exchange_n(&index[slot], &(uint64_t){ 0 }, v, false,
							__ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
				entry_add(mine, ring);
				return id + 1;
			}
			v = __atomic_load_n(&index[slot], __ATOMIC_ACQUIRE);
		}
		if ((v & ~0xffffffffull) != tag ||
		    (uint32_t)v > s->stack_entries)
			continue;
		e = entry_at(s, (uint32_t)v - 1);
		if (same_stack(e, desc, ips, (unsigned int)n)) {
			entry_add(e, ring);
			return (uint32_t)v;
		}
	}
	return 0;
}

bool agent_stack_count(struct agent_session *s, int ring, uint32_t desc, const uint64_t *ips,
		       int n)
{
	if (n < 0 || (unsigned int)n > s->cfg.stack_depth)
		return false;
	return count_hashed(s, ring, kps_stack_hash(desc, ips, (unsigned int)n), desc, ips, n) != 0;
}

/* With the ring's memo: kept outermost frames are the last stack's, so
 * are their sums; the same stack at the same place is the same entry,
 * counted without the index: when the memo kept every frame, or (the
 * memo keeps nothing of a stack of one frame, and may keep less than it
 * could) when the frames are the entry's. */
static bool count_with_memo(struct agent_session *s, int ring, struct stack_thread *st,
			    uint32_t desc, const struct pt_regs *regs, uint64_t at)
{
	unsigned int depth = s->cfg.stack_depth;
	struct kprobes_stack_memo *memo = memo_of(st, depth);
	uint64_t ips[KPS_STACK_MAX], sum;
	int kept = -1, n;

	if (!st->ready) {
		if (kprobes_stack_memo_init(memo, KPROBES_STACK_MEMO_SIZE(depth)) != (int)depth)
			return agent_stack_count(s, ring, desc, ips, 0);
		st->n = -1;
		st->ready = 1;
	}
	/* a memo keeps nothing of a stack of one frame, and costs its
	 * bookkeeping on every hit: the stack from the registers alone */
	if (depth == 1) {
		n = regs ? kprobes_stack(regs, (unsigned long *)ips, 1) : 0;
		kept = 0;
	} else {
		n = regs ? kprobes_stack_memo(memo, regs, (unsigned long *)ips, (int)depth, &kept) :
			   0;
	}
	if (n <= 0) {
		/* nothing remembered: the memo's last stack is still its own */
		return agent_stack_count(s, ring, desc, ips, 0);
	}
	if (at)
		ips[0] = at;
	if (kept >= 0 && n == st->n && desc == st->desc && st->entry) {
		struct kps_stack_entry *e = entry_at(s, st->entry - 1);

		if (kept == n || same_stack(e, desc, ips, (unsigned int)n)) {
			entry_add(e, ring);
			return true;
		}
	}
	if (kept < 0 || st->n < 0) {
		/* a stack the memo did not remember: its hash from scratch,
		 * and the sums no longer the memo's last stack's */
		st->n = kept < 0 ? -1 : 0;
		kept = 0;
	}
	/* each stack's first frame may be the probe's address instead of the
	 * one the memo has: its mix is made again */
	if (kept > 0 && (kept >= n || kept >= st->n))
		kept = (n < st->n ? n : st->n) - 1;
	/* the running sum in a register, not read back from the array */
	sum = kept ? st->sums[kept - 1] : 0;
	for (int d = kept; d < n; d++) {
		sum += kps_stack_mix(ips[n - 1 - d], (unsigned int)d);
		st->sums[d] = sum;
	}
	st->entry = count_hashed(s, ring, kps_stack_hash_of_sum(sum, desc, (unsigned int)n), desc,
				 ips, n);
	st->desc = desc;
	if (st->n >= 0)
		st->n = n;
	return st->entry != 0;
}

bool agent_stack_count_hit(struct agent_session *s, int ring, uint32_t desc,
			   const struct pt_regs *regs, uint64_t at)
{
	uint64_t ips[KPS_STACK_MAX];
	int n;

	if (ring >= 0 && s->stack_threads && (uint32_t)ring < s->nrings)
		return count_with_memo(s, ring, thread_at(s, ring), desc, regs, at);
	n = agent_stack_capture(s, regs, ips);
	if (n && at)
		ips[0] = at;
	return agent_stack_count(s, ring, desc, ips, n);
}
