/*
 * What a handler needs saved around it (KP_OPT_SAVE_*), as the
 * architecture's handler analysis decodes it (arch_code_walk), remembered
 * for the library's own code: registering a thousand probes with one
 * handler of the library's section (the kprobe agent's are there) would
 * otherwise decode it a thousand times.  That code never changes while
 * this cache exists (both go only with the library's object), and a walk
 * from it stays inside it or meets a call through the PLT, which counts
 * as everything.  Direct-mapped, one word per entry (the address above
 * the needs), so concurrent registrations neither lock nor see half an
 * entry.
 */
#include "core/internal.h"

#define NEEDS_CACHE 256
static uint64_t needs_cache[NEEDS_CACHE];

static bool in_library_text(uintptr_t fn)
{
	uintptr_t lo, hi;

	arch_trap_path_range(&lo, &hi);
	return lo && fn >= lo && fn < hi && fn < (1ull << 56);
}

uint8_t kp_code_needs(uintptr_t fn)
{
	uint64_t *e = &needs_cache[(fn >> 2) % NEEDS_CACHE];
	uint64_t v = __atomic_load_n(e, __ATOMIC_RELAXED);
	bool cacheable = in_library_text(fn);
	uint8_t need;

	if (cacheable && v && v >> 8 == fn)
		return (uint8_t)v;
	need = arch_code_walk(fn);
	if (cacheable)
		__atomic_store_n(e, (uint64_t)fn << 8 | need, __ATOMIC_RELAXED);
	return need;
}
