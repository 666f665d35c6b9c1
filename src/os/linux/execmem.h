/* Executable memory in units of a fixed size, placed within the
 * architecture's direct-branch reach of the code it serves (ARCH_EXEC_REACH
 * in <asm/kprobes.h>: rel32 on x86-64, B on arm64), with per-unit metadata.  Lookups are lock-free;
 * allocation and freeing happen under the registry lock. */
#ifndef KP_OS_EXECMEM_H
#define KP_OS_EXECMEM_H

#include <stddef.h>
#include <stdint.h>

#define EXEC_POOL_SIZE (64 * 1024)
#define EXEC_MAX_POOLS 1024

struct exec_pool {
	uintptr_t base;
	char *meta;		/* meta_size bytes per unit */
	unsigned char *used;
	unsigned int nfree;
	unsigned int hint;	/* every unit below it is in use */
};

struct exec_arena {
	size_t unit;		/* bytes per unit, divides EXEC_POOL_SIZE */
	size_t meta_size;	/* metadata bytes per unit */
	struct exec_pool pools[EXEC_MAX_POOLS];
	unsigned int npools;	/* published with release */
	unsigned int in_use;
};

/* A free unit whose whole extent lies in [lo, hi); returns its address and
 * metadata (zeroed), or 0. */
uintptr_t exec_alloc(struct exec_arena *a, uintptr_t lo, uintptr_t hi, void **meta);
void exec_free(struct exec_arena *a, uintptr_t addr);
/* How many of the n addresses at addrs (at most max) follow each other
 * unit bytes apart from addrs[0]: a run that one write can fill. */
int exec_run_length(const uintptr_t *addrs, int n, size_t unit, int max);
/* Metadata of the unit containing ip, or NULL.  Async-signal-safe. */
/* Bytes of the pools' bookkeeping, kept for good as the pools are. */
size_t exec_kept_bytes(void);

void *exec_meta_of(const struct exec_arena *a, uintptr_t ip, uintptr_t *unit_addr);

/* The window [lo, hi) of unit addresses from which every address in
 * want[] is within the direct-branch reach. */
void exec_reach_window(const uintptr_t *want, int n, uintptr_t *lo, uintptr_t *hi);

#endif
