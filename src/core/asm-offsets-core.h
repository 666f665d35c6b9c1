/*
 * The offsets and constants of core's structures that every
 * architecture's assembly reads (the thread record's read-side section
 * and return instances, the probe's private words, a return probe's
 * instances and pools): one list for each arch's asm-offsets.c, which
 * defines DEFINE, OFFSET and BLANK and calls KP_CORE_ASM_OFFSETS() from
 * its kp_asm_offsets().  Included by those files alone.
 */
#ifndef KP_CORE_ASM_OFFSETS_CORE_H
#define KP_CORE_ASM_OFFSETS_CORE_H

#include <stddef.h>

#include "core/arch_api.h"
#include "core/kretprobe.h"
#include "os/linux/threads.h"

/* A section's end drops in_handler and nest with one 64-bit operation. */
_Static_assert(offsetof(struct kp_thread, in_handler) ==
		       offsetof(struct kp_thread, nest) + sizeof(unsigned int),
	       "in_handler must sit right above nest");
/* A return probe's optimized entry clears called, cached and dup (and the
 * pad before cache_n) with one 32-bit store. */
_Static_assert(offsetof(struct kp_ri, cached) == offsetof(struct kp_ri, called) + 1 &&
		       offsetof(struct kp_ri, dup) == offsetof(struct kp_ri, called) + 2 &&
		       offsetof(struct kp_ri, cache_n) == offsetof(struct kp_ri, called) + 4 &&
		       offsetof(struct kp_ri, called) % 4 == 0,
	       "kp_ri: called, cached, dup and cache_n as the entry's store needs them");
/* The assembly takes a struct kretprobe's kprobe for the kretprobe. */
_Static_assert(offsetof(struct kretprobe, kp) == 0, "kretprobe.kp must come first");

#define KP_CORE_ASM_OFFSETS()                                                                    \
	do {                                                                                     \
		/* struct kp_thread (os/linux/threads.h) */                                      \
		OFFSET(KPT_TID, struct kp_thread, tid);                                          \
		OFFSET(KPT_GEN, struct kp_thread, gen);                                          \
		OFFSET(KPT_NEST, struct kp_thread, nest);                                        \
		OFFSET(KPT_IN_HANDLER, struct kp_thread, in_handler);                            \
		OFFSET(KPT_RI_TOP, struct kp_thread, ri_top);                                    \
		OFFSET(KPT_RI_BUSY, struct kp_thread, ri_cache_busy);                            \
		OFFSET(KPT_RI_CACHE, struct kp_thread, ri_cache);                                \
		BLANK();                                                                         \
		/* struct kp_probepoint (core/arch_api.h) */                                     \
		OFFSET(PP_ADDR, struct kp_probepoint, addr);                                     \
		OFFSET(PP_FAST, struct kp_probepoint, fast);                                     \
		OFFSET(PP_PROBES, struct kp_probepoint, probes);                                 \
		OFFSET(PP_RFAST, struct kp_probepoint, rfast);                                   \
		BLANK();                                                                         \
		/* struct kprobe and its private words (core/arch_api.h) */                      \
		OFFSET(KP_FLAGS, struct kprobe, flags);                                          \
		OFFSET(KP_NEEDS, struct kprobe, __reserved[0]);	/* kp_probe_needs() */         \
		OFFSET(KP_FAST_FN, struct kprobe, __reserved[1]);	/* kp_probe_fast_fn() */      \
		OFFSET(KP_RI_SLOT, struct kprobe, __reserved[2]);	/* kp_probe_ri_slot() */      \
		DEFINE(KP_FLAG_DISABLED, KPROBE_FLAG_DISABLED);                                  \
		DEFINE(KP_DISABLED_BIT, __builtin_ctz(KPROBE_FLAG_DISABLED));                    \
		DEFINE(KP_SAVE_VECTOR, KP_OPT_SAVE_VECTOR);                                      \
		DEFINE(KP_SAVE_ERRNO, KP_OPT_SAVE_ERRNO);                                        \
		DEFINE(KP_SAVE_REGS, KP_OPT_SAVE_REGS);                                          \
		DEFINE(KP_SAVE_SCRATCH, KP_OPT_SAVE_SCRATCH);                                    \
		DEFINE(KP_SAVE_REGS_BIT, __builtin_ctz(KP_OPT_SAVE_REGS));                       \
		DEFINE(KP_SAVE_SCRATCH_BIT, __builtin_ctz(KP_OPT_SAVE_SCRATCH));                 \
		DEFINE(KP_NEEDS_ALL_ONLY, KP_OPT_SAVE_VECTOR | KP_OPT_SAVE_ERRNO);               \
		BLANK();                                                                         \
		/* struct kretprobe (include/kprobes.h) */                                       \
		OFFSET(KRP_HANDLER, struct kretprobe, handler);                                  \
		OFFSET(KRP_POOL, struct kretprobe, __pool);                                      \
		BLANK();                                                                         \
		/* struct kp_ri and its struct kretprobe_instance (core/kretprobe.h) */          \
		OFFSET(RI_NEXT, struct kp_ri, next);                                             \
		OFFSET(RI_POOL, struct kp_ri, pool);                                             \
		OFFSET(RI_SLOT, struct kp_ri, slot);                                             \
		OFFSET(RI_OWNER, struct kp_ri, owner);                                           \
		OFFSET(RI_CALLED, struct kp_ri, called);                                         \
		OFFSET(RI_CACHED, struct kp_ri, cached);                                         \
		OFFSET(RI_DUP, struct kp_ri, dup);                                               \
		OFFSET(RI_CACHE_N, struct kp_ri, cache_n);                                       \
		OFFSET(RI_STUB, struct kp_ri, stub);                                             \
		OFFSET(RI_STUB_ENTRY, struct kp_ri, stub_entry);                                 \
		OFFSET(RI_PUB, struct kp_ri, pub);                                               \
		DEFINE(RI_RET, offsetof(struct kp_ri, pub) +                                     \
				       offsetof(struct kretprobe_instance, ret_addr));           \
		BLANK();                                                                         \
		/* struct kp_rp_pool (core/kretprobe.h) */                                       \
		OFFSET(POOL_RP, struct kp_rp_pool, rp);                                          \
		OFFSET(POOL_LIVE, struct kp_rp_pool, live);                                      \
		OFFSET(POOL_NEEDS, struct kp_rp_pool, needs);                                    \
		OFFSET(POOL_CACHE_STATE, struct kp_rp_pool, cache_state);                        \
		OFFSET(POOL_CACHE_SLOT, struct kp_rp_pool, cache_slot);                          \
		OFFSET(POOL_CACHE_MAX, struct kp_rp_pool, cache_max);                            \
		DEFINE(POOL_CACHE_ON, CACHE_ON);                                                 \
	} while (0)

#endif
