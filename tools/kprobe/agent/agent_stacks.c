/* Stacks on the hit path: capturing a hit's stack with the library's
 * unwinder, and counting hits per distinct stack in the session's table
 * (stack_table.h).  Async-signal-safe: no lock, no allocation, no system
 * call; atomic operations only. */
#include "agent.h"
#include "stack_table.h"

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

/* A new entry holding the stack (not yet in the index), or NULL when the
 * table has none left. */
static struct kps_stack_entry *new_entry(struct agent_session *s, uint64_t hash, uint32_t desc,
					 const uint64_t *ips, int n, uint32_t *id)
{
	uint64_t *next = (uint64_t *)(void *)s->map.ring_data;
	uint64_t i = __atomic_fetch_add(next, 1, __ATOMIC_RELAXED);
	struct kps_stack_entry *e;

	if (i >= kps_stack_max_entries(s->cfg.stack_depth))
		return NULL;
	*id = (uint32_t)i;
	e = entry_at(s, *id);
	e->hash = hash;
	e->desc = desc;
	e->depth = (uint32_t)n;
	for (int k = 0; k < n; k++)
		e->ips[k] = ips[k];
	return e;
}

bool agent_stack_count(struct agent_session *s, uint32_t desc, const uint64_t *ips, int n)
{
	uint64_t *index = (uint64_t *)(void *)(s->map.ring_data + KPS_STACK_INDEX_OFF);
	uint64_t hash, tag;
	struct kps_stack_entry *mine = NULL;
	uint32_t slot, id = 0;

	if (n < 0 || (unsigned int)n > s->cfg.stack_depth)
		return false;
	hash = kps_stack_hash(desc, ips, (unsigned int)n);
	tag = hash & ~0xffffffffull;
	slot = (uint32_t)hash & (KPS_STACK_SLOTS - 1);
	for (int k = 0; k < KPS_STACK_PROBES; k++, slot = (slot + 1) & (KPS_STACK_SLOTS - 1)) {
		uint64_t v = __atomic_load_n(&index[slot], __ATOMIC_ACQUIRE);
		struct kps_stack_entry *e;

		if (!v) {
			if (!mine)
				mine = new_entry(s, hash, desc, ips, n, &id);
			if (!mine)
				return false;
			v = tag | (id + 1ull);
			/* the entry is complete before the index names it */
			if (__atomic_compare_exchange_n(&index[slot], &(uint64_t){ 0 }, v, false,
							__ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
				__atomic_fetch_add(&mine->count, 1, __ATOMIC_RELEASE);
				return true;
			}
			v = __atomic_load_n(&index[slot], __ATOMIC_ACQUIRE);
		}
		if ((v & ~0xffffffffull) != tag ||
		    (uint32_t)v > kps_stack_max_entries(s->cfg.stack_depth))
			continue;
		e = entry_at(s, (uint32_t)v - 1);
		if (same_stack(e, desc, ips, (unsigned int)n)) {
			__atomic_fetch_add(&e->count, 1, __ATOMIC_RELEASE);
			return true;
		}
	}
	return false;
}
