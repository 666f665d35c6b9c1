/* Unwind tables of the loaded objects, for kprobes_stack() (stack.c). */
#ifndef KP_CORE_STACK_H
#define KP_CORE_STACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Builds the tables of objects loaded since the last call, drops those of
 * unloaded ones.  Off the hit path, not from a handler.  0 or -ENOMEM. */
int kp_stack_tables_update(void);
/* After dlclose (os/linux/dl.c) and, in the kprobe agent, after each
 * dlopen (its loader hook): the same, once tables exist. */
void kp_stack_objects_changed(void);

/* The tables' lock, held across fork() (src/core/fork.c): a child must not
 * inherit it held by a thread that was building tables. */
void kp_stack_fork_lock(void);
void kp_stack_fork_unlock(void);

/* For tests: the row kind (enum cfi_kind) for pc, -1 when none; the kind
 * of the rule the cache holds for pc, -1 when it holds none. */
int kp_stack_row_kind(uintptr_t pc);
int kp_stack_cached_kind(uintptr_t pc);
/* For tests: the rules cache's slot of pc (two pcs of one slot evict each
 * other). */
unsigned int kp_stack_cache_slot(uintptr_t pc);

/* For tests: the rules cache's operations on a cache of
 * kp_stack_cache_bytes() (zeroed) the caller owns; pcs that differ by a
 * multiple of KP_STACK_CACHE_SAME_SLOT share a slot. */
#define KP_STACK_CACHE_SAME_SLOT (1ul << 24)
size_t kp_stack_cache_bytes(void);
void kp_stack_cache_put(void *cache, uintptr_t pc, uint32_t rule);
bool kp_stack_cache_get(void *cache, uintptr_t pc, uint32_t *rule);

struct pt_regs;
/* kprobes_stack() without the rules cache: every frame's rule from the
 * tables (tests compare the two). */
int kp_stack_uncached(const struct pt_regs *regs, unsigned long *ips, int max);

struct kp_stack_tables_stats {
	size_t objects, rows, table_bytes, code_bytes;
};
void kp_stack_tables_stats(struct kp_stack_tables_stats *st);

#endif
