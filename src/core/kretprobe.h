/* Return-probe instances and their pools (kretprobe.c), whose layout the
 * architecture's assembly fast paths read through offsets generated at
 * build time (src/arch/<arch>/asm-offsets.c). */
#ifndef KP_CORE_KRETPROBE_H
#define KP_CORE_KRETPROBE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "kprobes.h"

struct kp_ri {
	/* The thread's LIFO of live frames; while cached, the next
	 * instance in the thread's cache of its pool. */
	struct kp_ri *next;
	struct kp_rp_pool *pool;
	uintptr_t slot;			/* stack address of the return address */
	pid_t owner;			/* thread holding it, 0 when free */
	uintptr_t stub;			/* its return stub (what the frame returns to) */
	uint32_t next_free;		/* pool free list: index + 1 */
	uint32_t idx;			/* its own index in the pool */
	bool called;			/* the function was called from the stub */
	bool cached;			/* free, in a thread's cache (owner kept) */
	bool dup;			/* the next instance is of the same frame
					 * (another return probe on the function) */
	uint32_t cache_n;		/* cached: instances in the cache from here down */
	uintptr_t stub_entry;		/* the stub's entry (retstub.c) */
	struct kretprobe_instance pub;	/* last: data[] follows */
};

struct kp_rp_pool {
	struct kretprobe *rp;		/* valid while live */
	bool live;
	char *mem;
	size_t stride;
	int n;
	uint64_t free_head;		/* (tag << 32) | (index + 1) */
	uint8_t needs;			/* KP_OPT_SAVE_* of the return handler */
	uint8_t cache_state;		/* CACHE_* */
	uint8_t cache_slot;		/* its slot in the threads' caches */
	uint32_t cache_max;		/* instances a thread's cache keeps at most */
	pid_t drainer;			/* the thread that claimed the draining, or 0 */
	struct ret_stubs *stubs;
	struct kp_rp_pool *next_orphan;
};

/* For the unwinder interposers (os/linux/unwind.c, through its upcalls):
 * the real return addresses back in this thread's live frames, and with
 * release the instances given up; the stubs back; the frames below an
 * exception caught at cfa dropped. */
void kp_kretprobe_unhijack(bool release);
void kp_kretprobe_rehijack(void);
void kp_kretprobe_after_catch(uintptr_t cfa);

/* A pool's use of the threads' caches: in use; being emptied for good;
 * empty for good (no instance of it in any cache). */
enum { CACHE_ON, CACHE_DRAINING, CACHE_OFF };

#endif
