/* Hits counted per distinct stack (count --stacks): the layout both sides
 * of the session memory agree on.
 *
 * A count session's rings carry no events, so each ring's data area holds
 * its thread's table instead: open addressing over fixed-size entries,
 * written only by the ring's owner (no lock, no atomic read-modify-write),
 * published entry by entry (the hash stored last, with release order) so
 * that the tool can read while the thread runs.  A thread that exits
 * leaves its table to the next thread that takes its ring, which goes on
 * counting in it.  A stack that finds no free entry within
 * KPS_STACK_PROBES slots is dropped and counted in the ring's lost; a
 * thread without a ring counts in the header's ringless_lost.
 *
 * The entry size follows from the depth the tool asked for (config
 * "stacks N"); the tool computes it itself, never reads it back, and
 * checks every entry (depth, descriptor) before use. */
#ifndef KPROBE_STACK_TABLE_H
#define KPROBE_STACK_TABLE_H

#include <stdint.h>

#include "shm.h"

struct kps_stack_entry {
	uint64_t hash;			/* 0: free; set last */
	uint64_t count;			/* hits of this stack */
	uint32_t desc;			/* the probe point hit */
	uint32_t depth;			/* frames in ips[] */
	uint64_t ips[];			/* innermost first */
};

#define KPS_STACK_PROBES	64	/* slots looked at before a stack is dropped */

static inline uint32_t kps_stack_stride(unsigned int depth)
{
	return (uint32_t)(sizeof(struct kps_stack_entry) + 8u * depth);
}

static inline uint32_t kps_stack_slots(unsigned int depth)
{
	return KPS_RING_BYTES / kps_stack_stride(depth);
}

static inline uint64_t kps_stack_hash(uint32_t desc, const uint64_t *ips, unsigned int n)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ ((uint64_t)desc << 32 | n);

	for (unsigned int i = 0; i < n; i++) {
		h ^= ips[i];
		h *= 0xff51afd7ed558ccdull;
		h ^= h >> 29;
	}
	return h ? h : 1;
}

#endif
