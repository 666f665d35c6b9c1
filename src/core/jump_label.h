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
#include "core/arch_api.h"	/* struct kp_jl_site and its queries */

struct kprobes_tracepoint;


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


/* Key changes and tracepoint handler lists: under this lock. */
void kp_jl_lock(void);
void kp_jl_scan_lock(void);
void kp_jl_scan_unlock(void);
void kp_jl_unlock(void);
int kp_jl_key_set(struct static_key *key, int value);

#endif
