/* Static keys and tracepoints inside the library: the site tables of the
 * loaded objects and what the trap path, the registry and the optimizer ask
 * of them. */
#ifndef KP_CORE_JUMP_LABEL_H
#define KP_CORE_JUMP_LABEL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kprobes/jump_label.h"

struct kprobes_tracepoint;

/* One site: addr is a NOP or a JMP to target, per its key. */
struct kp_jl_site {
	uintptr_t addr;
	uintptr_t target;
	struct static_key *key;
	bool branch;		/* a JMP when the key is false */
};

/* The tables of one loaded object (never freed; dead once unloaded). */
struct kp_jl_object {
	char *path;
	uintptr_t bias;
	uintptr_t text_lo, text_hi;
	struct kp_jl_site *sites;	/* sorted by addr */
	size_t nsites;
	struct kprobes_tracepoint *tps;	/* its __kprobes_tracepoints */
	size_t ntps;
	bool live;
	unsigned long long seen;
};

/* Rescans the loaded objects if any came or went. 0 or -errno. */
int kp_jl_refresh(void);
/* The object list (append-only) and its length. */
unsigned int kp_jl_objects(struct kp_jl_object *const **out);

/* Async-signal-safe: the site starting at addr, or NULL; whether it jumps
 * under its key's current value. */
const struct kp_jl_site *kp_jl_site_at(uintptr_t addr);
const struct kp_jl_site *kp_jl_site_covering(uintptr_t addr);
bool kp_jl_site_jumps(const struct kp_jl_site *s);

/* Whether [lo, hi) overlaps a site or (targets) has a site's jump target
 * inside (lo, hi).  Refreshes the tables first; true when that fails. */
bool kp_jl_busy(uintptr_t lo, uintptr_t hi, bool targets);

/* Key changes and tracepoint handler lists: under this lock. */
void kp_jl_lock(void);
void kp_jl_scan_lock(void);
void kp_jl_scan_unlock(void);
void kp_jl_unlock(void);
int kp_jl_key_set(struct static_key *key, int value);

#endif
