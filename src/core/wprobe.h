/* Watchpoint probes: what the trap code, the list and fork need. */
#ifndef KP_CORE_WPROBE_H
#define KP_CORE_WPROBE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kprobes.h"
#include "core/arch_api.h"	/* the cookie, kp_wprobe_of_cookie() */

/* One per debug register: all threads are watched, so a process can have
 * no more (asm/kprobes.h). */
#define KP_WSLOTS ARCH_WATCH_SLOTS


/* The global "enabled" knob changed: under kp_registry_lock. */
void kp_wprobes_rearm(void);

/* kprobes_list()'s "w" lines, under kp_registry_lock. */
void kp_list_wprobes(FILE *out);

/* fork(): in the child, under kp_registry_lock. */
void kp_wprobe_after_fork_child(void);

#endif
