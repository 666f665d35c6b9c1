/*
 * What a handler needs saved around it (KP_OPT_SAVE_*): the handler and
 * every function it calls directly, each read here and decoded by the
 * architecture (arch_code_scan), which names the calls to follow; the
 * result remembered
 * for the library's own code: registering a thousand probes with one
 * handler of the library's section (the kprobe agent's are there) would
 * otherwise decode it a thousand times.  That code never changes while
 * this cache exists (both go only with the library's object), and a walk
 * from it stays inside it or meets a call through the PLT, which counts
 * as everything.  Direct-mapped, one word per entry (the address above
 * the needs), so concurrent registrations neither lock nor see half an
 * entry.
 */
#include <stdlib.h>

#include "core/internal.h"
#include "os/linux/memory.h"

/* How far a walk goes before it gives up and counts everything: calls
 * nested MAX_DEPTH deep (the kprobe agent's program handlers reach the
 * library's unwinder nine calls down), MAX_FUNCS functions, each at most
 * MAX_BYTES long. */
#define MAX_DEPTH 10
#define MAX_FUNCS 128
#define MAX_BYTES (16 * 1024)

struct kp_code_walk {
	uintptr_t seen[MAX_FUNCS];
	int nseen;
	int depth;
};

/* The needs of the function at fn, called from the code being walked: 0
 * for one already seen (its needs counted there), everything for one past
 * the walk's limits, not a whole known function, or not readable. */
uint8_t kp_code_walk_call(struct kp_code_walk *w, uintptr_t fn)
{
	uintptr_t start;
	size_t size;
	uint8_t *code, need;

	for (int i = 0; i < w->nseen; i++)
		if (w->seen[i] == fn)
			return 0;
	if (w->depth > MAX_DEPTH || w->nseen == MAX_FUNCS)
		return KP_OPT_SAVE_ALL;
	w->seen[w->nseen++] = fn;
	if (kp_function_bounds(fn, &start, &size) || start != fn || !size || size > MAX_BYTES)
		return KP_OPT_SAVE_ALL;
	code = malloc(size);
	if (!code || kp_mem_read_nofault(fn, code, size)) {
		free(code);
		return KP_OPT_SAVE_ALL;
	}
	w->depth++;
	need = arch_code_scan(w, code, size, fn);
	w->depth--;
	free(code);
	return need;
}

static uint8_t code_walk(uintptr_t fn)
{
	struct kp_code_walk *w = calloc(1, sizeof(*w));
	uint8_t need;

	if (!w)
		return KP_OPT_SAVE_ALL;
	need = kp_code_walk_call(w, fn);
	free(w);
	return need;
}

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
	need = code_walk(fn);
	if (cacheable)
		__atomic_store_n(e, (uint64_t)fn << 8 | need, __ATOMIC_RELAXED);
	return need;
}
