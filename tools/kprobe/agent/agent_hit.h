/* The hit path's shared pieces: what a thread knows of itself, the rings
 * and counters, for the generic handlers (agent_hit.c) and the light ones
 * (agent_hit_light.c, compiled so that it never reads %rsi, the pt_regs
 * pointer, nor writes r8-r11: the library's handler analysis then lets an
 * optimized probe save the least). */
#ifndef KPROBE_AGENT_HIT_H
#define KPROBE_AGENT_HIT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <kprobes.h>

#include "kp_arch.h"
#include "agent.h"

#define TLS __attribute__((tls_model("initial-exec")))
/* A handler's own struct around the probe it is given. */
#define container_of(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))
/* general-regs-only: the helpers also go into the probe programs' handlers,
 * which libkprobes must be able to prove vector-free (any caller can
 * inline code that uses fewer registers). */
#define HIT_INLINE static inline __attribute__((always_inline, target("general-regs-only")))

/* What a thread knows of itself on the hit path. */
struct hit_thread {
	int ring;		/* its ring in the session of generation gen */
	unsigned int gen;
	pid_t pid;
	/* > 0 while the thread runs agent code (its own thread, or a
	 * program thread arming probes): hits there are the agent's, not the
	 * program's. */
	int agent_depth;
	/* record: the session generation and the upper TSC bits of the
	 * thread's last light event (its next may be a compact one). */
	uint64_t rec_tsc_hi;
	/* count: the generation of the session whose hits this thread adds
	 * straight to count_row, its row of counters there (it owns a ring,
	 * runs no agent code and its process is traced); 0 when its next
	 * hit must look again.  Cleared before anything that ends one of
	 * those: agent code, a fork. */
	unsigned int count_gen;
	uint64_t *count_row;
};

extern __thread struct hit_thread agent_tls_hit TLS;
/* A forked child of a session that does not follow forks. */
extern bool agent_hit_quiet;
/* Where glibc keeps a thread's id in its thread control block (found by
 * agent_hit_init()), AGENT_TID_UNKNOWN when unknown; and the process id, kept by the
 * agent across forks: the light handlers know who they run on without a
 * system call. */
#define AGENT_TID_UNKNOWN LONG_MIN
extern long agent_tid_offset;
extern pid_t agent_hit_pid;

/* The calling thread's state through a plain pointer.  The handler
 * analysis counts any store through %fs as one to errno, which would make
 * an optimized probe save the vector registers around the handler; a
 * store through an ordinary pointer to the same place it does not. */
HIT_INLINE struct hit_thread *self(void)
{
	struct hit_thread *t = &agent_tls_hit;

	__asm__("" : "+r"(t));
	return t;
}

/* A thread's first hit in a session on the light path (agent_hit_light.c):
 * no system call, no store through %fs. */
void agent_first_hit_light(struct agent_session *s);

/* The thread's state for a hit in s, or NULL when the hit is not the
 * program's (agent code, a fork child of a session that does not follow).
 * For handlers the analysis must find light (agent_hit_light_ok()). */
HIT_INLINE struct hit_thread *light_thread(struct agent_session *s)
{
	struct hit_thread *t = self();

	if (__builtin_expect(t->gen != s->gen, 0))
		agent_first_hit_light(s);
	if (t->agent_depth > 0 || __atomic_load_n(&agent_hit_quiet, __ATOMIC_RELAXED))
		return NULL;
	return t;
}

/* Tells the CLI how far to look for claimed rings. */
HIT_INLINE void raise_rings_hint(struct agent_session *s, int ring)
{
	uint32_t hint = __atomic_load_n(&s->map.hdr->rings_hint, __ATOMIC_RELAXED);

	while (hint < (uint32_t)ring + 1 &&
	       !__atomic_compare_exchange_n(&s->map.hdr->rings_hint, &hint, (uint32_t)ring + 1,
					    true, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
}

HIT_INLINE void counter_add(struct agent_session *s, int ring, uint32_t desc)
{
	uint64_t *c;

	if (ring >= 0) {
		/* Only this thread writes its row: a plain add suffices. */
		c = &s->map.counters[(size_t)ring * KPS_MAX_PROBES + desc];
		__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
	} else {
		c = &s->map.counters[(size_t)KPS_RINGS * KPS_MAX_PROBES + desc];
		__atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
	}
}


/* A full ring: wait for the reader to free up to want_tail rather than
 * drop, unless the session allows drops, the reader said it stopped
 * reading, or an earlier wait of the session timed out (the reader is
 * gone or stuck: no thread waits again).  The wait spins: a system call
 * anywhere in a handler would make every hit of its probe save the full
 * register state, and the reader, another process, needs no wake-up. */
HIT_INLINE bool ring_wait(struct agent_session *s, struct kps_ring *r, uint64_t want_tail,
			    uint64_t *tail)
{
	uint64_t start;

	if (__atomic_load_n(&s->map.hdr->drop, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&s->stalled, __ATOMIC_RELAXED))
		return false;
	start = kp_cycles();
	do {
		for (int i = 0; i < 64; i++)
			kp_cpu_relax();
		*tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
		if ((int64_t)(*tail - want_tail) >= 0)
			return true;
		if (__atomic_load_n(&s->map.hdr->drop, __ATOMIC_RELAXED))
			return false;
	} while (kp_cycles() - start < s->wait_ticks);
	__atomic_store_n(&s->stalled, true, __ATOMIC_RELAXED);
	return false;
}

/* Reserves len bytes (a multiple of 8) in ring r, writing a padding record
 * first when the record would wrap; NULL when the ring is full. */
HIT_INLINE void *ring_reserve(struct agent_session *s, int ring, uint32_t len,
			       uint64_t *head_out)
{
	struct kps_ring *r = &s->map.rings[ring];
	unsigned char *data = s->map.ring_data + (size_t)ring * KPS_RING_BYTES;
	uint64_t head = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
	uint64_t tail = r->tail_seen;
	uint32_t pos = (uint32_t)(head & (KPS_RING_BYTES - 1));
	uint32_t room = KPS_RING_BYTES - pos;
	uint64_t need = len <= room ? len : room + len;

	if (head + need - tail > KPS_RING_BYTES) {
		tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
		if (head + need - tail > KPS_RING_BYTES &&
		    !ring_wait(s, r, head + need - KPS_RING_BYTES, &tail))
			return NULL;
		r->tail_seen = tail;
	}
	if (len > room) {
		struct kps_event *pad = (struct kps_event *)(data + pos);

		pad->size = room;
		pad->type = EV_PAD;
		head += room;
		pos = 0;
	}
	*head_out = head;
	/* Own the next lines before they are needed: the reader's core had
	 * them last, and waiting for that transfer is most of an event's cost. */
	kp_prefetch_write(&data[(pos + 256) & (KPS_RING_BYTES - 1)]);
	return data + pos;
}

HIT_INLINE void ring_commit(struct agent_session *s, int ring, uint64_t head, uint32_t len)
{
	__atomic_store_n(&s->map.rings[ring].head, head + len, __ATOMIC_RELEASE);
}

HIT_INLINE void count_lost(struct agent_session *s, int ring)
{
	if (ring >= 0) {
		uint64_t *l = &s->map.rings[ring].lost;

		__atomic_store_n(l, __atomic_load_n(l, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
	} else {
		__atomic_fetch_add(&s->map.hdr->ringless_lost, 1, __ATOMIC_RELAXED);
	}
}

/* arg1..arg6 and retval straight from the registers: no call, so the
 * handler stays one that libkprobes can prove leaves vector state alone
 * (an optimized probe then skips saving it). */
HIT_INLINE uint64_t arg_value(const struct pt_regs *regs, uint8_t src)
{
	/* A table of offsets, not a switch: a jump table is an indirect
	 * branch, which the library cannot follow. */
	static const uint8_t offsets[ARG_SRC_RETVAL + 1] = {
		KP_ARG_REG_OFFSETS,
		[ARG_SRC_RETVAL] = KP_RET_REG_OFFSET,
	};

	return *(const uint64_t *)((const char *)regs + offsets[src]);
}

/* Sets count's, record's or a traced entry's light handlers when the
 * probe can have them (agent_hit_light.c); false: it needs the generic
 * ones. */
bool agent_set_light_handlers(struct agent_probe *ap);

#endif
