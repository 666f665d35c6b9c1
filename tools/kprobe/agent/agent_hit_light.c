/* The light handlers: what `count` and `record` need at a hit and no more.
 *
 * None reads its pt_regs unless it records arguments, none makes a system
 * call, writes through %fs or writes r8-r11, and everything they call is
 * inlined or takes one argument: the library's handler analysis, which
 * counts any read of %rsi (where pt_regs arrives) as a read of pt_regs,
 * then lets an optimized probe save only the light level, and a return
 * probe without an entry handler take the assembly fast paths.  This file
 * is compiled with %rsi and r8-r11 reserved (kprobe.mk) so the compiler
 * never picks them. */
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent_hit.h"
#include "agent_prog.h"

/* A free ring taken for me, or -1. */
HIT_INLINE int take_free_ring(struct agent_session *s, uint64_t me)
{
	for (uint32_t i = 0; i < s->nrings; i++) {
		struct kps_ring *r = &s->map.rings[i];
		uint64_t owner = 0;

		if (__atomic_load_n(&r->owner, __ATOMIC_RELAXED) ||
		    !__atomic_compare_exchange_n(&r->owner, &owner, me, false, __ATOMIC_ACQ_REL,
						 __ATOMIC_RELAXED))
			continue;
		__atomic_store_n(&r->used, 1, __ATOMIC_RELEASE);
		raise_rings_hint(s, (int)i);
		return (int)i;
	}
	return -1;
}

/* Every ring is taken: the reader frees those of exited threads once it
 * has read them (consumer_free_dead_rings()).  Waits for one as
 * ring_wait() waits for space, or, tracing, a thirty-second of that (a
 * fraction of a second, what the tool takes to read an exited thread's
 * ring and give it back, many times over): a wait that runs out means
 * every ring is a live thread's, and no thread of the session waits
 * again, so the program stalls that long once. */
HIT_INLINE int wait_free_ring(struct agent_session *s, uint64_t me)
{
	uint64_t limit = s->cfg.action == ACT_TRACE ? s->wait_ticks / 32 : s->wait_ticks;
	uint64_t start;
	int ring;

	if (__atomic_load_n(&s->map.hdr->drop, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&s->stalled, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&s->rings_exhausted, __ATOMIC_RELAXED))
		return -1;
	start = kp_cycles();
	do {
		for (int i = 0; i < 1024; i++)
			kp_cpu_relax();
		ring = take_free_ring(s, me);
		if (ring >= 0)
			return ring;
	} while (kp_cycles() - start < limit &&
		 !__atomic_load_n(&s->map.hdr->drop, __ATOMIC_RELAXED));
	__atomic_store_n(&s->rings_exhausted, true, __ATOMIC_RELAXED);
	return -1;
}

/* A thread's first hit in a session, on the light path: its id from its
 * control block, and a free ring if there is one (a counting thread
 * without one counts in the shared row; a recording one waits for the
 * reader to free one). */
__attribute__((noinline)) void agent_first_hit_light(struct agent_session *s)
{
	struct hit_thread *t = self();
	pid_t tid;
	uint64_t me;

	t->gen = s->gen;
	t->ring = -1;
	t->rec_tsc_hi = 0;	/* no generation is 0: a full event first */
	if (agent_tid_offset == AGENT_TID_UNKNOWN)
		return;
	tid = *(volatile const pid_t *)((const char *)__builtin_thread_pointer() + agent_tid_offset);
	t->pid = agent_hit_pid;
	if (kprobes_library_thread(tid)) {
		t->agent_depth = 1 << 20;
		return;
	}
	me = (uint64_t)(uint32_t)agent_hit_pid << 32 | (uint32_t)tid;
	t->ring = take_free_ring(s, me);
	/* A recorded or traced thread waits for the reader to free the ring
	 * of an exited thread rather than lose its events (the general
	 * path's first hit takes such a ring itself, with system calls this
	 * path does not make). */
	if (t->ring < 0 && (s->cfg.action == ACT_RECORD || s->cfg.action == ACT_TRACE))
		t->ring = wait_free_ring(s, me);
}

/* ---- light handlers: what count and record need, and no more ----
 * None reads its pt_regs unless it records arguments, none makes a system
 * call or writes through %fs, so an optimized probe saves the fewest
 * registers for them, and a return probe without an entry handler takes
 * the library's assembly fast paths. */

/* A count's hit off its fast path: the thread's first in the session, one
 * counting in the shared row, agent code, an untraced fork child.  Sets
 * the fast path up when the thread may take it.  One argument, as the
 * handler analysis wants of a call. */
static __attribute__((noinline)) int count_slow(struct agent_probe *ap)
{
	struct agent_session *s = ap->session;
	struct hit_thread *t = light_thread(s);

	if (!t)
		return 0;
	counter_add(s, t->ring, ap->desc);
	if (t->ring >= 0) {
		t->count_row = &s->map.counters[(size_t)t->ring * KPS_MAX_PROBES];
		/* The row before the generation that says it is valid: a
		 * signal handler's hit in between takes this path again. */
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		t->count_gen = s->gen;
	}
	return 0;
}

/* One plain increment in the thread's own row when the thread was set up
 * for this session (count_slow); only this thread writes that row. */
HIT_INLINE int count_hit(struct agent_probe *ap)
{
	uint64_t *c;

	if (__builtin_expect(agent_tls_hit.count_gen != ap->gen, 0))
		return count_slow(ap);
	c = &agent_tls_hit.count_row[ap->desc];
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
	return 0;
}

static int count_entry(struct kprobe *p, struct pt_regs *regs)
{
	(void)regs;
	return count_hit(container_of(p, struct agent_probe, u.kp));
}

static int count_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)regs;
	return count_hit(container_of(ri->rp, struct agent_probe, u.rp));
}

/* A return taken at one of the function's exit sites: as count_return,
 * from the exit's probe. */
static int count_exit(struct kprobe *p, struct pt_regs *regs)
{
	(void)regs;
	return count_hit(container_of(p, struct agent_exit, kp)->ap);
}

/* An event without values off its common path (no ring, the ring full
 * or the TSC's upper bits changed): one argument, as the handler analysis
 * wants of a call. */
struct rec_slow {
	struct agent_probe *ap;
	struct hit_thread *t;
	uint64_t time;
	uint16_t type;
};

static __attribute__((noinline)) void record_slow(struct rec_slow *a)
{
	struct agent_session *s = a->ap->session;
	struct hit_thread *t = a->t;
	uint64_t hi = (uint64_t)s->gen << 16 | a->time >> 48, head;

	if (t->ring < 0) {
		count_lost(s, -1);
		return;
	}
	if (hi == t->rec_tsc_hi) {
		uint64_t *w = ring_reserve(s, t->ring, 8, &head);

		if (!w) {
			count_lost(s, t->ring);
			return;
		}
		*w = KPS_REC_COMPACT | (a->type == EV_RETURN ? KPS_REC_COMPACT_RETURN : 0) |
		     (uint64_t)a->ap->desc << KPS_REC_DESC_SHIFT | a->time << KPS_REC_TIME_SHIFT;
		ring_commit(s, t->ring, head, 8);
		return;
	}
	{
		struct kps_rec_event *rev = ring_reserve(s, t->ring, sizeof(*rev), &head);

		if (!rev) {
			count_lost(s, t->ring);
			return;
		}
		rev->size = sizeof(*rev);
		rev->type = a->type == EV_ENTRY ? EV_REC_ENTRY : EV_REC_RETURN;
		rev->desc = (uint16_t)a->ap->desc;
		rev->time = a->time;
		ring_commit(s, t->ring, head, sizeof(*rev));
		t->rec_tsc_hi = hi;
	}
}

/* An event without values: a compact one (shm.h) when the TSC's upper
 * bits are the thread's last event's in this session and the ring has
 * room, in a few instructions (the reader moved the tail far enough at
 * its last look); anything else in record_slow(). */
HIT_INLINE void record_plain(struct agent_probe *ap, struct hit_thread *t, uint16_t type,
			     uint64_t time)
{
	struct agent_session *s = ap->session;
	int ring = t->ring;
	struct kps_ring *r;
	uint64_t head;
	uint32_t pos;
	unsigned char *data;

	if (__builtin_expect(ring < 0 ||
			     ((uint64_t)s->gen << 16 | time >> 48) != t->rec_tsc_hi, 0))
		goto slow;
	r = &s->map.rings[ring];
	head = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
	if (__builtin_expect(head + 8 - r->tail_seen > KPS_RING_BYTES, 0))
		goto slow;
	data = s->map.ring_data + (size_t)ring * KPS_RING_BYTES;
	pos = (uint32_t)(head & (KPS_RING_BYTES - 1));
	*(uint64_t *)(data + pos) = KPS_REC_COMPACT |
				    (type == EV_RETURN ? KPS_REC_COMPACT_RETURN : 0) |
				    (uint64_t)ap->desc << KPS_REC_DESC_SHIFT |
				    time << KPS_REC_TIME_SHIFT;
	/* Own the next lines before they are needed (see ring_reserve). */
	kp_prefetch_write(&data[(pos + 256) & (KPS_RING_BYTES - 1)]);
	__atomic_store_n(&r->head, head + 8, __ATOMIC_RELEASE);
	return;
slow: {
		struct rec_slow a = { .ap = ap, .t = t, .time = time, .type = type };

		record_slow(&a);
	}
}

/* One event with n values (none for a traced entry without arguments):
 * its time, the probe and the values; a recorded return pairs with its
 * entry by the call stack, a traced one carries its entry's time as its
 * first value. */
static inline __attribute__((always_inline)) void record_put(struct agent_probe *ap,
							      struct hit_thread *t,
							      uint16_t type, uint64_t time,
							      const uint64_t *vals, int n)
{
	struct agent_session *s = ap->session;
	uint32_t len = (uint32_t)(sizeof(struct kps_event) + 8 * (unsigned int)n);
	struct kps_event *ev;
	uint64_t head;

	if (t->ring < 0) {
		count_lost(s, -1);
		return;
	}
	ev = ring_reserve(s, t->ring, len, &head);
	if (!ev) {
		count_lost(s, t->ring);
		return;
	}
	ev->size = len;
	ev->type = type;
	ev->nvals = (uint16_t)n;
	ev->desc = ap->desc;
	ev->reserved = 0;
	ev->time_ns = time;
	for (int i = 0; i < n; i++)
		ev->vals[i] = vals[i];
	ring_commit(s, t->ring, head, len);
}

/* An event without values of the probe ap, at time now (read first, as
 * near the hit as can be). */
HIT_INLINE int record_event(struct agent_probe *ap, uint16_t type, uint64_t now)
{
	struct hit_thread *t = light_thread(ap->session);

	if (t)
		record_plain(ap, t, type, now);
	return 0;
}

static int record_entry(struct kprobe *p, struct pt_regs *regs)
{
	uint64_t now = kp_cycles();

	(void)regs;
	return record_event(container_of(p, struct agent_probe, u.kp), EV_ENTRY, now);
}

static int record_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	uint64_t now = kp_cycles();

	(void)regs;
	return record_event(container_of(ri->rp, struct agent_probe, u.rp), EV_RETURN, now);
}

static int record_exit(struct kprobe *p, struct pt_regs *regs)
{
	uint64_t now = kp_cycles();

	(void)regs;
	return record_event(container_of(p, struct agent_exit, kp)->ap, EV_RETURN, now);
}

/* The same with integer arguments (or return values), read from pt_regs.
 * An entry's is also trace's: the event the general handler writes for
 * such arguments (no fault, no string, no stack). */
static int record_entry_args(struct kprobe *p, struct pt_regs *regs)
{
	uint64_t now = kp_cycles(), vals[SPEC_MAX_ARGS];
	struct agent_probe *ap = container_of(p, struct agent_probe, u.kp);
	struct hit_thread *t = light_thread(ap->session);

	if (!t)
		return 0;
	for (int i = 0; i < ap->nargs; i++)
		vals[i] = arg_value(regs, ap->args[i].src);
	record_put(ap, t, EV_ENTRY, now, vals, ap->nargs);
	return 0;
}

static int record_return_args(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	uint64_t now = kp_cycles(), vals[SPEC_MAX_ARGS];
	struct agent_probe *ap = container_of(ri->rp, struct agent_probe, u.rp);
	struct hit_thread *t = light_thread(ap->session);

	if (!t)
		return 0;
	for (int i = 0; i < ap->nargs; i++)
		vals[i] = regs_return_value(regs);
	record_put(ap, t, EV_RETURN, now, vals, ap->nargs);
	return 0;
}

/* trace at a return: the entry keeps its time and its integer arguments
 * in the return instance (d[0], d[1 + i]), as the generic entry handler
 * does; the return writes the event the generic handler writes: the
 * entry's time as its first value, then the arguments, the return value
 * read now. */
static int trace_return_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	uint64_t now = kp_cycles(), *d = (uint64_t *)(void *)ri->data;
	struct agent_probe *ap = container_of(ri->rp, struct agent_probe, u.rp);

	/* Non-zero: no return instance, so the return costs nothing. */
	if (!light_thread(ap->session))
		return 1;
	d[0] = now;
	for (int i = 0; i < ap->nargs; i++)
		if (ap->args[i].src != ARG_SRC_RETVAL)
			d[1 + i] = arg_value(regs, ap->args[i].src);
	return 0;
}

static int trace_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	uint64_t now = kp_cycles(), vals[1 + SPEC_MAX_ARGS];
	const uint64_t *d = (const uint64_t *)(const void *)ri->data;
	struct agent_probe *ap = container_of(ri->rp, struct agent_probe, u.rp);
	struct hit_thread *t = light_thread(ap->session);

	if (!t)
		return 0;
	vals[0] = d[0];
	for (int i = 0; i < ap->nargs; i++)
		vals[1 + i] = ap->args[i].src == ARG_SRC_RETVAL ? regs_return_value(regs) : d[1 + i];
	record_put(ap, t, EV_RETURN, now, vals, 1 + ap->nargs);
	return 0;
}

/* Whether a probe's arguments are all integers the light handlers can
 * read: from the argument registers (at the entry) where args, the
 * return value where retval. */
static bool light_args(const struct agent_probe *ap, bool args, bool retval)
{
	if (!ap->session->time_tsc || !agent_hit_light_ok() || ap->tp)
		return false;
	for (int i = 0; i < ap->nargs; i++) {
		const struct spec_arg *a = &ap->args[i];

		if (a->type == ARG_STRING || spec_type_is_float(a->type))
			return false;
		if (a->src == ARG_SRC_RETVAL ? !retval : (!args || a->src >= SPEC_MAX_INT_ARG))
			return false;
	}
	return true;
}

/* A recorded probe's: at an entry the argument registers, at a return
 * the return value (the entry's arguments would need an entry handler). */
static bool record_light(const struct agent_probe *ap)
{
	return light_args(ap, !ap->is_return, ap->is_return);
}

/* Count and record get the light handlers when they can; a return probe
 * then has no entry handler (nothing to keep from the entry).  So does
 * trace, whose return keeps its entry's time (an entry handler, and the
 * instance's data). */
bool agent_set_light_handlers(struct agent_probe *ap)
{
	enum kps_action act = ap->session->cfg.action;

	if (act == ACT_TRACE && !ap->is_return && record_light(ap)) {
		ap->u.kp.pre_handler = record_entry_args;
		return true;
	}
	if (act == ACT_TRACE && ap->is_return && light_args(ap, true, true)) {
		ap->u.rp.entry_handler = trace_return_entry;
		ap->u.rp.handler = trace_return;
		ap->u.rp.data_size = sizeof(uint64_t) * (1 + (size_t)ap->nargs);
		return true;
	}
	if (ap->tp || (act != ACT_COUNT && !(act == ACT_RECORD && record_light(ap))))
		return false;
	if (ap->is_return) {
		ap->u.rp.entry_handler = NULL;
		ap->u.rp.handler = act == ACT_COUNT ? count_return :
				   ap->nargs ? record_return_args : record_return;
		ap->u.rp.data_size = 0;
	} else {
		ap->u.kp.pre_handler = act == ACT_COUNT ? count_entry :
				       ap->nargs ? record_entry_args : record_entry;
	}
	return true;
}


/* A return probe whose light handler reads nothing at the return (no
 * return value) can take its returns at the exit sites instead; so can a
 * program's fast form that reads no register. */
kprobe_pre_handler_t agent_exit_handler(const struct agent_probe *ap)
{
	if (!ap->is_return || ap->tp)
		return NULL;
	if (ap->session->cfg.action == ACT_RUN)
		return ap->prog_point ? agent_prog_exit_handler(ap) : NULL;
	if (ap->u.rp.handler == count_return)
		return count_exit;
	if (ap->u.rp.handler == record_return)
		return record_exit;
	return NULL;
}
