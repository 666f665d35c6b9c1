/* Hits counted per distinct stack (count --stacks): the layout both sides
 * of the session memory agree on.
 *
 * A count session's rings carry no events, so their data area (sparse:
 * only touched pages cost memory) holds one table shared by every thread
 * of the target, lock-free:
 *
 *   next     entries handed out so far (fetch-and-add)
 *   index    KPS_STACK_SLOTS words, open addressing by the stack's hash:
 *            0 free, else the hash's high half and the entry number + 1,
 *            set once by compare-and-swap
 *   entries  appended in the order stacks first appear (so they fill
 *            pages densely), each written whole before the index names it
 *            and never changed after, but for its two counts: the hits of
 *            the thread that made it (own: plain increments, only that
 *            thread, the owner of the ring named in owner, writes it) and
 *            those of every other thread (count: atomic add).  A stack
 *            counted by one thread, the common case, costs no locked
 *            instruction; the hits of a stack are count + own.
 *
 * A thread meeting a new stack takes an entry, fills it, and publishes it
 * in a free slot; if another thread published the same stack first, it
 * counts there and its own entry stays unused (count 0, skipped).  A stack
 * that finds no free slot within KPS_STACK_PROBES, or no entry left, is
 * dropped and counted (the ring's lost, or ringless_lost).
 *
 * The entry size follows from the depth the tool asked for (config
 * "stacks N"); the tool computes the layout itself, never reads it back,
 * and checks every entry (depth, descriptor) before use. */
#ifndef KPROBE_STACK_TABLE_H
#define KPROBE_STACK_TABLE_H

#include <stdint.h>

#include "shm.h"

struct kps_stack_entry {
	uint64_t count;			/* hits of threads other than the owner */
	uint64_t own;			/* hits of the owner; count + own 0: unused */
	uint64_t hash;
	uint32_t desc;			/* the probe point hit */
	uint32_t depth;			/* frames in ips[] */
	uint32_t owner;			/* the owner's ring + 1; 0: none (atomic adds only) */
	uint32_t reserved;
	uint64_t ips[];			/* innermost first */
};

#define KPS_STACK_SLOTS		(1u << 20)	/* index words (8 MiB) */
#define KPS_STACK_ENTRIES	(1u << 19)	/* at most half the slots used */
#define KPS_STACK_PROBES	64	/* slots looked at before a stack is dropped */
#define KPS_STACK_INDEX_OFF	64	/* after the next counter's cache line */

static inline uint32_t kps_stack_stride(unsigned int depth)
{
	return (uint32_t)(sizeof(struct kps_stack_entry) + 8u * depth);
}

static inline size_t kps_stack_entries_off(void)
{
	return KPS_STACK_INDEX_OFF + (size_t)KPS_STACK_SLOTS * 8;
}

/* Entries that fit in the rings' area at this depth. */
static inline uint32_t kps_stack_max_entries(unsigned int depth)
{
	size_t fit = ((size_t)KPS_RINGS * KPS_RING_BYTES - kps_stack_entries_off()) /
		     kps_stack_stride(depth);

	return fit < KPS_STACK_ENTRIES ? (uint32_t)fit : KPS_STACK_ENTRIES;
}

/* Each frame is mixed on its own, with its distance from the outermost
 * frame, and the mixes are summed: the multiplications of a stack's
 * frames overlap, where a chain of them (one per frame, each waiting for
 * the last) would cost a stack of ten frames some fifty cycles on the hit
 * path; and a thread whose next stack shares the last one's outer frames
 * keeps their partial sum (agent_stacks.c), counted from the outermost
 * so that it does not depend on how many frames lie inside them. */
static inline uint64_t kps_stack_mix(uint64_t ip, unsigned int dist)
{
	uint64_t x = (ip + dist * 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull;

	return x ^ (x >> 29);
}

/* The hash of a stack of n frames at desc whose mixes sum to sum. */
static inline uint64_t kps_stack_hash_of_sum(uint64_t sum, uint32_t desc, unsigned int n)
{
	uint64_t h = (0x9e3779b97f4a7c15ull ^ ((uint64_t)desc << 32 | n)) + sum;

	h ^= h >> 32;
	h *= 0xc4ceb9fe1a85ec53ull;
	return h ^ (h >> 29);
}

static inline uint64_t kps_stack_hash(uint32_t desc, const uint64_t *ips, unsigned int n)
{
	uint64_t sum = 0;

	for (unsigned int i = 0; i < n; i++)
		sum += kps_stack_mix(ips[i], n - 1 - i);
	return kps_stack_hash_of_sum(sum, desc, n);
}

#endif
