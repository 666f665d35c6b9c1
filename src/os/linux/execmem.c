/* Pools of executable units near the code they serve. */
#include "os/linux/execmem.h"

#include "asm/kprobes.h"	/* ARCH_EXEC_REACH, ARCH_USER_VA_END */

#include <stdlib.h>
#include <string.h>

#include "os/linux/memory.h"

static size_t kept;

size_t exec_kept_bytes(void)
{
	return __atomic_load_n(&kept, __ATOMIC_RELAXED);
}

static unsigned int units_per_pool(const struct exec_arena *a)
{
	return (unsigned int)(EXEC_POOL_SIZE / a->unit);
}

void *exec_meta_of(const struct exec_arena *a, uintptr_t ip, uintptr_t *unit_addr)
{
	unsigned int n = __atomic_load_n(&a->npools, __ATOMIC_ACQUIRE);

	for (unsigned int i = 0; i < n; i++) {
		uintptr_t off = ip - a->pools[i].base;

		if (off < EXEC_POOL_SIZE) {
			size_t idx = off / a->unit;

			if (unit_addr)
				*unit_addr = a->pools[i].base + idx * a->unit;
			return a->pools[i].meta + idx * a->meta_size;
		}
	}
	return NULL;
}

static struct exec_pool *pool_new(struct exec_arena *a, uintptr_t lo, uintptr_t hi)
{
	unsigned int n = units_per_pool(a);
	struct exec_pool *p;

	if (a->npools == EXEC_MAX_POOLS)
		return NULL;
	p = &a->pools[a->npools];
	p->meta = calloc(n, a->meta_size);
	p->used = calloc(n, 1);
	p->base = p->meta && p->used ? kp_map_exec_near(lo, hi, EXEC_POOL_SIZE) : 0;
	if (!p->base) {
		free(p->meta);
		free(p->used);
		memset(p, 0, sizeof(*p));
		return NULL;
	}
	p->nfree = n;
	p->hint = 0;
	__atomic_add_fetch(&kept, (size_t)n * a->meta_size + n, __ATOMIC_RELAXED);
	__atomic_store_n(&a->npools, a->npools + 1, __ATOMIC_RELEASE);
	return p;
}

/* The lowest free unit: found from the hint, below which every unit is
 * in use, so that filling a pool is not quadratic (a return probe takes
 * hundreds of units at once, and a tool registers thousands). */
static uintptr_t pool_take(struct exec_arena *a, struct exec_pool *p, void **meta)
{
	unsigned int n = units_per_pool(a);

	for (unsigned int i = p->hint; i < n; i++) {
		if (p->used[i])
			continue;
		p->used[i] = 1;
		p->hint = i + 1;
		p->nfree--;
		a->in_use++;
		*meta = p->meta + (size_t)i * a->meta_size;
		memset(*meta, 0, a->meta_size);
		return p->base + (uintptr_t)i * a->unit;
	}
	return 0;
}

uintptr_t exec_alloc(struct exec_arena *a, uintptr_t lo, uintptr_t hi, void **meta)
{
	struct exec_pool *p;

	for (unsigned int i = 0; i < a->npools; i++) {
		p = &a->pools[i];
		if (p->nfree && p->base >= lo && p->base + EXEC_POOL_SIZE <= hi)
			return pool_take(a, p, meta);
	}
	p = pool_new(a, lo, hi);
	return p ? pool_take(a, p, meta) : 0;
}

void exec_free(struct exec_arena *a, uintptr_t addr)
{
	for (unsigned int i = 0; i < a->npools; i++) {
		struct exec_pool *p = &a->pools[i];
		uintptr_t off = addr - p->base;

		if (off < EXEC_POOL_SIZE) {
			size_t idx = off / a->unit;

			if (p->used[idx]) {
				p->used[idx] = 0;
				p->nfree++;
				a->in_use--;
				if (idx < p->hint)
					p->hint = (unsigned int)idx;
			}
			return;
		}
	}
}

int exec_run_length(const uintptr_t *addrs, int n, size_t unit, int max)
{
	int k = 1;

	while (k < n && k < max && addrs[k] == addrs[0] + (uintptr_t)k * unit)
		k++;
	return n > 0 ? k : 0;
}

/* The architecture's direct-branch reach, less a margin. */
#define REACH ((uintptr_t)ARCH_EXEC_REACH)

void exec_reach_window(const uintptr_t *want, int n, uintptr_t *lo, uintptr_t *hi)
{
	*lo = 0x10000;
	*hi = ARCH_USER_VA_END;
	for (int i = 0; i < n; i++) {
		uintptr_t l = want[i] > REACH ? want[i] - REACH : 0x10000;
		uintptr_t h = want[i] + REACH;

		if (l > *lo)
			*lo = l;
		if (h < *hi)
			*hi = h;
	}
}
