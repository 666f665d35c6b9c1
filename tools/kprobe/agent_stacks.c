/* Stacks on the hit path: capturing a hit's stack with the library's
 * unwinder, and counting hits per distinct stack in the calling thread's
 * table (stack_table.h).  Async-signal-safe: no lock, no allocation, no
 * system call. */
#include "agent.h"
#include "stack_table.h"

int agent_stack_capture(const struct agent_session *s, const struct pt_regs *regs,
			uint64_t *ips)
{
	int n;

	if (!regs || !s->cfg.stack_depth)
		return 0;
	n = kprobes_stack(regs, (unsigned long *)ips, (int)s->cfg.stack_depth);
	return n > 0 ? n : 0;
}

static bool same_stack(const struct kps_stack_entry *e, uint32_t desc, const uint64_t *ips,
		       unsigned int n)
{
	if (e->desc != desc || e->depth != n)
		return false;
	for (unsigned int i = 0; i < n; i++)
		if (e->ips[i] != ips[i])
			return false;
	return true;
}

bool agent_stack_count(struct agent_session *s, int ring, uint32_t desc, const uint64_t *ips,
		       int n)
{
	unsigned int depth = s->cfg.stack_depth;
	uint32_t stride = kps_stack_stride(depth), slots = kps_stack_slots(depth);
	unsigned char *table;
	uint64_t hash;
	uint32_t slot;

	if (ring < 0 || n < 0 || (unsigned int)n > depth)
		return false;
	table = s->map.ring_data + (size_t)ring * KPS_RING_BYTES;
	hash = kps_stack_hash(desc, ips, (unsigned int)n);
	slot = (uint32_t)(hash % slots);
	for (int k = 0; k < KPS_STACK_PROBES; k++, slot = slot + 1 == slots ? 0 : slot + 1) {
		struct kps_stack_entry *e = (struct kps_stack_entry *)(table + (size_t)slot * stride);
		uint64_t h = __atomic_load_n(&e->hash, __ATOMIC_RELAXED);

		if (h == hash && same_stack(e, desc, ips, (unsigned int)n)) {
			/* only this thread writes its table */
			__atomic_store_n(&e->count, __atomic_load_n(&e->count, __ATOMIC_RELAXED) + 1,
					 __ATOMIC_RELAXED);
			return true;
		}
		if (h)
			continue;
		e->desc = desc;
		e->depth = (uint32_t)n;
		for (int i = 0; i < n; i++)
			e->ips[i] = ips[i];
		__atomic_store_n(&e->count, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&e->hash, hash, __ATOMIC_RELEASE);
		return true;
	}
	return false;
}
