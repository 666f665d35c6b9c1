/* Watchpoint probes: what the trap code, the list and fork need. */
#ifndef KP_CORE_WPROBE_H
#define KP_CORE_WPROBE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kprobes.h"

/* One per debug register: all threads are watched, so a process can have
 * no more. */
#define KP_WSLOTS 4

/* A watchpoint trap's cookie (the event's sig_data): a fixed tag in the
 * top 24 bits, a generation, and the slot in the low byte. */
#define KP_WCOOKIE_MAGIC 0x6b70770000000000ULL
#define KP_WCOOKIE_TAG_MASK 0xffffff0000000000ULL
#define KP_WCOOKIE_GEN_MASK 0xffffffffu

static inline bool kp_wprobe_cookie_ours(uint64_t cookie)
{
	return (cookie & KP_WCOOKIE_TAG_MASK) == KP_WCOOKIE_MAGIC;
}

/* The hit path, inside a read-side section: the watchpoint a trap's cookie
 * names, or NULL for one gone since. */
struct wprobe *kp_wprobe_of_cookie(uint64_t cookie);

/* The global "enabled" knob changed: under kp_registry_lock. */
void kp_wprobes_rearm(void);

/* kprobes_list()'s "w" lines, under kp_registry_lock. */
void kp_list_wprobes(FILE *out);

/* fork(): in the child, under kp_registry_lock. */
void kp_wprobe_after_fork_child(void);

#endif
