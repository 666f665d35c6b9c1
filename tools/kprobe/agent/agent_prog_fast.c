/* The handlers of a probe program's fast forms: the aggregations
 * `@x = count()`, `@[src] = count()`, `@x = hist(src)` and the latency
 * pattern's halves `@s[src] = nsecs` and `/@s[src]/ { @h = hist(nsecs -
 * @s[src]); delete(@s[src]); }`, at an entry or a return, without the
 * interpreter.
 *
 * Built for the library's lightest save levels (section 2.3 of the
 * design): the handlers and everything they run (the map code of
 * maps_impl.h, inlined) make no call, no system call, write nothing
 * through %fs (the thread's state is reached through a laundered
 * pointer, its id read from glibc's thread control block), use no vector
 * register, and read %rsi (their pt_regs) only where the form's source is
 * an argument or the return value.  This file is compiled with %rsi and
 * r8-r11 reserved (kprobe.mk), so the compiler never picks them: a form
 * on tid, pid, cpu, probe, func or nsecs then needs nothing saved beyond
 * the light level (an optimized entry jumps straight into its handler, a
 * return probe takes the assembly fast path), one on argN or retval a
 * complete pt_regs and still no vector state nor errno. */
#include "agent_hit.h"
#include "agent_prog.h"
#include "lang/lang_int.h"
#include "lang/maps_impl.h"

#define FAST_INLINE static inline __attribute__((always_inline))

/* A thread's state for the fast forms, valid for the session of
 * generation gen in the process agent_hit_pid was when it was filled (a
 * fork child's thread fills it again). */
struct prog_thread {
	unsigned int gen;
	pid_t pid;
	pid_t tid;
	bool library;		/* the library's own thread: not the program's */
	/* The slot the thread's last keyed form went to (a thread counting
	 * or timing by its own tid hits the same one every time): valid
	 * while the map and the key are the same and the slot's word still
	 * reads w, which a delete, a clear or a new key in the slot changes. */
	unsigned int map;
	uint64_t key;
	const uint64_t *word;	/* NULL: none */
	uint64_t w;
	int64_t *val;
};

static __thread struct prog_thread prog_tls TLS;

/* Through a plain pointer: the handler analysis takes a store through %fs
 * for one to errno. */
FAST_INLINE struct prog_thread *prog_self(void)
{
	struct prog_thread *t = &prog_tls;

	__asm__("" : "+r"(t));
	return t;
}

/* The calling thread for a hit in s, or NULL when the hit is not the
 * program's (agent code, the library's optimizer thread, a fork child of
 * a session that does not follow). */
FAST_INLINE struct prog_thread *prog_thread(const struct agent_session *s)
{
	struct prog_thread *t = prog_self();

	if (self()->agent_depth > 0 || __atomic_load_n(&agent_hit_quiet, __ATOMIC_RELAXED))
		return NULL;
	if (__builtin_expect(t->gen != s->gen || t->pid != agent_hit_pid, 0)) {
		t->gen = s->gen;
		t->pid = agent_hit_pid;
		t->tid = *(volatile const pid_t *)((const char *)__builtin_thread_pointer() +
						   agent_tid_offset);
		t->library = t->tid == __atomic_load_n(&kp_optimizer_tid, __ATOMIC_ACQUIRE);
		t->word = NULL;
	}
	return t->library ? NULL : t;
}

/* The form's source; with_regs false for the handlers that must not look
 * at their pt_regs (the source is then none of argN and retval). */
FAST_INLINE uint64_t fast_src_value(const struct agent_prog *p, const struct agent_probe *ap,
				    const struct prog_thread *t, const struct pt_regs *regs,
				    bool with_regs, int src, unsigned int arg)
{
	unsigned int aux;

	if (src == LANG_SRC_TID)
		return (uint64_t)t->tid;
	if (src == LANG_SRC_PID)
		return (uint64_t)t->pid;
	if (src == LANG_SRC_CPU) {
		__builtin_ia32_rdtscp(&aux);
		return aux & 0xfff;
	}
	if (src == LANG_SRC_UID)
		return p->uid;
	if (src == LANG_SRC_NSECS)
		return agent_prog_tsc_nsecs(p);
	if (src == LANG_SRC_PROBE)
		return PROBE_ID_DESC | ap->desc;
	if (src == LANG_SRC_FUNC)
		return (uint64_t)(uintptr_t)(ap->is_return ? ap->u.rp.kp.addr : ap->u.kp.addr);
	if (with_regs && src == LANG_SRC_RETVAL)
		return regs->ax;
	if (with_regs && src == LANG_SRC_ARG) {
		if (arg == 0)
			return regs->di;
		if (arg == 1)
			return regs->si;
		if (arg == 2)
			return regs->dx;
		if (arg == 3)
			return regs->cx;
		if (arg == 4)
			return regs->r8;
		return regs->r9;
	}
	return 0;	/* LANG_SRC_NONE */
}

/* The value of 8-byte key in map m through the thread's slot cache.  A
 * slot this thread saw deleted, and nobody has taken since, is given back
 * to the key in place (the latency pattern deletes and re-creates the
 * same key on every call). */
FAST_INLINE int64_t *thread_slot(struct prog_thread *t, const struct agent_prog *p, unsigned m,
				 uint64_t key, bool create)
{
	uint8_t *val;
	uint64_t w;

	if (__builtin_expect(t->word && t->map == m && t->key == key, 1)) {
		w = __atomic_load_n(t->word, __ATOMIC_ACQUIRE);
		if (__builtin_expect(w == t->w, 1))
			return t->val;
		if (create && w == lang_map_word_deleted(t->w) &&
		    mapi_revive(&p->img, p->region, m, (uint8_t *)t->val, w, &key)) {
			t->w = __atomic_load_n(t->word, __ATOMIC_ACQUIRE);
			if (!lang_map_word_live(t->w))
				t->word = NULL;
			return t->val;
		}
	}
	val = mapi_lookup_hashed(&p->img, p->region, m, &key, mapi_key8_hash(key), create);
	if (!val)
		return NULL;
	t->map = m;
	t->key = key;
	t->word = lang_map_val_word(&p->img, m, val);
	t->w = __atomic_load_n(t->word, __ATOMIC_ACQUIRE);
	t->val = (int64_t *)val;
	if (!lang_map_word_live(t->w))
		t->word = NULL;	/* deleted already: look it up next time */
	return t->val;
}

/* The value of the point's own key (`probe` or `func`: the same at every
 * hit of the point), created if need be: the slot is kept per point and
 * checked at each hit (live, the key still in it, the word unchanged
 * across the check), so a count by probe hashes once per point. */
FAST_INLINE int64_t *point_slot(const struct agent_prog *p, const struct agent_probe *ap,
				unsigned m, uint64_t key)
{
	uint8_t **cache = &p->point_val[ap->desc];
	uint8_t *val = __atomic_load_n(cache, __ATOMIC_ACQUIRE);

	if (__builtin_expect(val != NULL, 1)) {
		const uint64_t *word = lang_map_val_word(&p->img, m, val);
		uint64_t w = __atomic_load_n(word, __ATOMIC_ACQUIRE);

		if (__builtin_expect(lang_map_word_live(w) && load8((const uint8_t *)(word + 1)) == key &&
				     __atomic_load_n(word, __ATOMIC_ACQUIRE) == w, 1))
			return (int64_t *)val;
	}
	val = mapi_lookup_hashed(&p->img, p->region, m, &key, mapi_key8_hash(key), 1);
	if (val)
		__atomic_store_n(cache, val, __ATOMIC_RELEASE);
	return (int64_t *)val;
}

/* The latency pattern's return half: the start value, if any, becomes a
 * hist sample of now - start, and the entry is deleted. */
FAST_INLINE void delta_hist(struct prog_thread *t, const struct agent_prog *p,
			    const struct lang_probe_desc *d, uint64_t key)
{
	int64_t *val = thread_slot(t, p, d->fast_map2, key, false), start, *hist;

	start = val ? __atomic_load_n(val, __ATOMIC_RELAXED) : 0;
	if (!start)
		return;	/* the filter is false */
	hist = (int64_t *)mapi_lookup_keyless(&p->img, p->region, d->fast_map, 1);
	if (hist)
		__atomic_fetch_add(&hist[mapi_hist_index((int64_t)(agent_prog_tsc_nsecs(p) -
								   (uint64_t)start))],
				   1, __ATOMIC_RELAXED);
	mapi_delete_val(&p->img, p->region, d->fast_map2, (uint8_t *)val);
}

/* A hit's program, probe descriptor, thread and the form's source value;
 * false when the hit is not the program's or the program has exited. */
FAST_INLINE bool fast_hit(struct agent_probe *ap, const struct pt_regs *regs, bool with_regs,
			  struct agent_prog **pp, const struct lang_probe_desc **dp,
			  struct prog_thread **tp, uint64_t *x)
{
	struct agent_prog *p = ap->session->prog;
	const struct lang_probe_desc *d = &p->img.probes[ap->prog_probe];
	const struct region_hdr *rh = p->region;
	struct prog_thread *t = prog_thread(ap->session);

	if (!t || __atomic_load_n(&rh->exited, __ATOMIC_RELAXED))
		return false;
	*x = fast_src_value(p, ap, t, regs, with_regs, d->fast_src, d->fast_arg);
	*pp = p;
	*dp = d;
	*tp = t;
	return true;
}

/* One function per form, and per form one handler for an entry and one
 * for a return, each with and without pt_regs: every handler holds only
 * the code its form runs, which keeps the library's analysis of it (at
 * each probe's registration) short. */

/* @x = count() */
FAST_INLINE void form_count_keyless(struct agent_probe *ap, const struct pt_regs *regs,
				    bool with_regs)
{
	const struct lang_probe_desc *d;
	struct agent_prog *p;
	struct prog_thread *t;
	int64_t *val;
	uint64_t x;

	if (!fast_hit(ap, regs, with_regs, &p, &d, &t, &x))
		return;
	val = (int64_t *)mapi_lookup_keyless(&p->img, p->region, d->fast_map, 1);
	if (val)
		__atomic_fetch_add(val, 1, __ATOMIC_RELAXED);
}

/* @[probe] = count(), @[func] = count(): the point's own key */
FAST_INLINE void form_count_point(struct agent_probe *ap, const struct pt_regs *regs,
				  bool with_regs)
{
	const struct lang_probe_desc *d;
	struct agent_prog *p;
	struct prog_thread *t;
	int64_t *val;
	uint64_t x;

	if (!fast_hit(ap, regs, with_regs, &p, &d, &t, &x))
		return;
	val = point_slot(p, ap, d->fast_map, x);
	if (val)
		__atomic_fetch_add(val, 1, __ATOMIC_RELAXED);
}

/* @[src] = count() for any other source: through the thread's cache */
FAST_INLINE void form_count_key(struct agent_probe *ap, const struct pt_regs *regs,
				bool with_regs)
{
	const struct lang_probe_desc *d;
	struct agent_prog *p;
	struct prog_thread *t;
	int64_t *val;
	uint64_t x;

	if (!fast_hit(ap, regs, with_regs, &p, &d, &t, &x))
		return;
	val = thread_slot(t, p, d->fast_map, x, true);
	if (val)
		__atomic_fetch_add(val, 1, __ATOMIC_RELAXED);
}

/* @x = hist(src) */
FAST_INLINE void form_hist(struct agent_probe *ap, const struct pt_regs *regs, bool with_regs)
{
	const struct lang_probe_desc *d;
	struct agent_prog *p;
	struct prog_thread *t;
	int64_t *val;
	uint64_t x;

	if (!fast_hit(ap, regs, with_regs, &p, &d, &t, &x))
		return;
	val = (int64_t *)mapi_lookup_keyless(&p->img, p->region, d->fast_map, 1);
	if (val)
		__atomic_fetch_add(&val[mapi_hist_index((int64_t)x)], 1, __ATOMIC_RELAXED);
}

/* @s[src] = nsecs */
FAST_INLINE void form_store(struct agent_probe *ap, const struct pt_regs *regs, bool with_regs)
{
	const struct lang_probe_desc *d;
	struct agent_prog *p;
	struct prog_thread *t;
	int64_t *val;
	uint64_t x;

	if (!fast_hit(ap, regs, with_regs, &p, &d, &t, &x))
		return;
	val = thread_slot(t, p, d->fast_map, x, true);
	if (val)
		__atomic_store_n(val, (int64_t)agent_prog_tsc_nsecs(p), __ATOMIC_RELAXED);
}

/* /@s[src]/ { @h = hist(nsecs - @s[src]); delete(@s[src]); } */
FAST_INLINE void form_delta(struct agent_probe *ap, const struct pt_regs *regs, bool with_regs)
{
	const struct lang_probe_desc *d;
	struct agent_prog *p;
	struct prog_thread *t;
	uint64_t x;

	if (fast_hit(ap, regs, with_regs, &p, &d, &t, &x))
		delta_hist(t, p, d, x);
}

#define container_of(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

/* The four handlers of a form. */
#define FORM_HANDLERS(form)                                                                   \
	static int form##_entry(struct kprobe *kp, struct pt_regs *regs)                      \
	{                                                                                      \
		(void)regs;                                                                    \
		form_##form(container_of(kp, struct agent_probe, u.kp), NULL, false);         \
		return 0;                                                                      \
	}                                                                                      \
	static int form##_return(struct kretprobe_instance *ri, struct pt_regs *regs)         \
	{                                                                                      \
		(void)regs;                                                                    \
		form_##form(container_of(ri->rp, struct agent_probe, u.rp), NULL, false);     \
		return 0;                                                                      \
	}                                                                                      \
	static int form##_entry_regs(struct kprobe *kp, struct pt_regs *regs)                 \
	{                                                                                      \
		form_##form(container_of(kp, struct agent_probe, u.kp), regs, true);          \
		return 0;                                                                      \
	}                                                                                      \
	static int form##_return_regs(struct kretprobe_instance *ri, struct pt_regs *regs)    \
	{                                                                                      \
		form_##form(container_of(ri->rp, struct agent_probe, u.rp), regs, true);      \
		return 0;                                                                      \
	}

FORM_HANDLERS(count_keyless)
FORM_HANDLERS(count_point)
FORM_HANDLERS(count_key)
FORM_HANDLERS(hist)
FORM_HANDLERS(store)
FORM_HANDLERS(delta)

struct form_handlers {
	int (*entry)(struct kprobe *, struct pt_regs *);
	int (*ret)(struct kretprobe_instance *, struct pt_regs *);
	int (*entry_regs)(struct kprobe *, struct pt_regs *);
	int (*ret_regs)(struct kretprobe_instance *, struct pt_regs *);
};

#define FORM(form) { form##_entry, form##_return, form##_entry_regs, form##_return_regs }
static const struct form_handlers forms[] = {
	FORM(count_keyless), FORM(count_point), FORM(count_key),
	FORM(hist), FORM(store), FORM(delta),
};
enum { F_COUNT_KEYLESS, F_COUNT_POINT, F_COUNT_KEY, F_HIST, F_STORE, F_DELTA };

/* Whether the form's source can be read here, and from pt_regs. */
static bool fast_source(const struct lang_probe_desc *d, bool *regs)
{
	*regs = false;
	switch (d->fast_src) {
	case LANG_SRC_NONE:
	case LANG_SRC_TID:
	case LANG_SRC_PID:
	case LANG_SRC_CPU:
	case LANG_SRC_UID:
	case LANG_SRC_NSECS:
	case LANG_SRC_PROBE:
	case LANG_SRC_FUNC:
		return true;
	case LANG_SRC_ARG:
		*regs = true;
		return d->kind == LANG_P_UPROBE && d->fast_arg < 6;
	case LANG_SRC_RETVAL:
		*regs = true;
		return d->kind == LANG_P_URETPROBE;
	default:
		return false;
	}
}

/* The form of probe descriptor d, or -1 when it has none these handlers
 * run. */
static int form_of(const struct agent_prog *p, const struct lang_probe_desc *d)
{
	bool point = d->fast_src == LANG_SRC_PROBE || d->fast_src == LANG_SRC_FUNC;

	/* nsecs only from the TSC: the clock's system call would cost every
	 * hit the library's full save */
	if (!p->tick_q32 && (d->fast_src == LANG_SRC_NSECS || d->fast == LANG_FAST_STORE_KEY ||
			     d->fast == LANG_FAST_DELTA_HIST))
		return -1;
	/* the second source of the latency forms is nsecs */
	if ((d->fast == LANG_FAST_STORE_KEY || d->fast == LANG_FAST_DELTA_HIST) &&
	    d->fast_src2 != LANG_SRC_NSECS)
		return -1;
	if (d->fast == LANG_FAST_COUNT_KEYLESS)
		return F_COUNT_KEYLESS;
	if (d->fast == LANG_FAST_COUNT_KEY)
		return point ? (p->point_val ? F_COUNT_POINT : -1) : F_COUNT_KEY;
	if (d->fast == LANG_FAST_HIST)
		return F_HIST;
	if (d->fast == LANG_FAST_STORE_KEY)
		return F_STORE;
	if (d->fast == LANG_FAST_DELTA_HIST)
		return F_DELTA;
	return -1;
}

bool agent_prog_set_fast_handlers(struct agent_probe *ap)
{
	struct agent_prog *p = ap->session->prog;
	const struct lang_probe_desc *d = &p->img.probes[ap->prog_probe];
	const struct form_handlers *f;
	int form = form_of(p, d);
	bool regs;

	/* without the thread's id from its control block the generic
	 * handlers ask the kernel */
	if (!agent_hit_light_ok() || form < 0 || !fast_source(d, &regs) ||
	    ap->desc >= KPS_MAX_PROBES)
		return false;
	f = &forms[form];
	if (ap->is_return) {
		ap->u.rp.handler = regs ? f->ret_regs : f->ret;
		ap->u.rp.entry_handler = NULL;
		ap->u.rp.data_size = 0;
	} else {
		ap->u.kp.pre_handler = regs ? f->entry_regs : f->entry;
	}
	return true;
}
