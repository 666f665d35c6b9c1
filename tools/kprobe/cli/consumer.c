/* Draining the per-thread rings (single consumer: this process).
 *
 * The target writes the rings, and may write anything there: a position
 * is read once and checked before use, a record's size is checked against
 * what is left of the ring before anything is copied, decoding works on
 * the copy only, and the read position that counts is our own. */
#include "kp_arch.h"
#include "consumer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* A copied event is preceded by the owner of its ring (pid << 32 | tid). */
struct copied {
	uint64_t owner;
	struct kps_event ev;
};

int consumer_init(struct consumer *c, const struct kps_map *map, const struct cli_opts *opts,
		  uint32_t nrings, bool time_tsc, uint64_t tsc_base, uint64_t ns_base)
{
	memset(c, 0, sizeof(*c));
	c->map = map;
	c->opts = opts;
	c->nrings = nrings > KPS_RINGS ? KPS_RINGS : nrings;
	c->time_tsc = time_tsc;
	c->tsc_base = tsc_base;
	c->ns_base = ns_base;
	c->tails = calloc(c->nrings ? c->nrings : 1, sizeof(*c->tails));
	return c->tails ? 0 : -ENOMEM;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

void consumer_copy_text(char *dst, size_t dstlen, const char *src, size_t srclen)
{
	size_t n = 0;

	if (!dstlen)
		return;
	for (; n + 1 < dstlen && n < srclen; n++) {
		unsigned char ch = (unsigned char)((volatile const char *)src)[n];

		if (!ch)
			break;
		dst[n] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
	}
	dst[n] = '\0';
}

uint32_t consumer_rings_claimed(const struct consumer *c)
{
	uint32_t hint = __atomic_load_n(&c->map->hdr->rings_hint, __ATOMIC_ACQUIRE);

	return hint < c->nrings ? hint : c->nrings;
}

static int grow(struct consumer *c, size_t more)
{
	if (more > CONSUMER_DRAIN_MAX || c->len > CONSUMER_DRAIN_MAX)
		return -1;
	if (c->len + more > c->cap) {
		size_t cap = (c->len + more) * 2;
		unsigned char *b = realloc(c->buf, cap);

		if (!b)
			return -1;
		c->buf = b;
		c->cap = cap;
	}
	return 0;
}

/* Copies ring i's events from our tail up to its head, about budget bytes
 * at most, and frees their space; returns the bytes of records read.  A
 * ring whose positions or records make no sense is skipped up to its head. */
static size_t copy_ring(struct consumer *c, uint32_t i, size_t budget)
{
	struct kps_ring *r = &c->map->rings[i];
	const unsigned char *data = c->map->ring_data + (size_t)i * KPS_RING_BYTES;
	uint64_t owner = __atomic_load_n(&r->owner, __ATOMIC_ACQUIRE);
	uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	uint64_t tail = c->tails[i];
	size_t work = 0;

	/* A producer is never more than a ring ahead (nor behind us), and
	 * moves in whole records. */
	if (head != tail && (head - tail > KPS_RING_BYTES || tail % 8)) {
		c->corrupt++;
		tail = head;
	}
	while (tail != head && work < budget) {
		uint32_t pos = (uint32_t)(tail & (KPS_RING_BYTES - 1));
		const struct kps_event *ev = (const void *)(data + pos);
		uint32_t size = __atomic_load_n(&ev->size, __ATOMIC_RELAXED);
		uint16_t type = __atomic_load_n(&ev->type, __ATOMIC_RELAXED);
		struct copied *cp;

		if (size < 8 || size % 8 || size > head - tail || size > KPS_RING_BYTES - pos) {
			c->corrupt++;
			tail = head;	/* never trust a bad length */
			break;
		}
		if (type != EV_PAD && size >= sizeof(*ev) && !grow(c, 8 + (size_t)size)) {
			cp = (struct copied *)(c->buf + c->len);
			cp->owner = owner;
			memcpy(&cp->ev, ev, size);
			/* The copy's size is the one we checked, whatever the
			 * target wrote meanwhile. */
			cp->ev.size = size;
			c->len += 8 + (size_t)size;
		} else if (type != EV_PAD && size >= sizeof(*ev)) {
			break;		/* no room this round: keep it for the next */
		}
		tail += size;
		work += size;
	}
	c->tails[i] = tail;
	__atomic_store_n(&r->tail, tail, __ATOMIC_RELEASE);
	return work;
}

static bool desc_valid(const struct consumer *c, const struct kps_desc *d)
{
	if (d->kind == DESC_WATCH)
		return c->opts->watch_len && d->spec < c->opts->nspecs;
	return d->kind >= DESC_ENTRY && d->kind <= DESC_TRACEPOINT && d->spec < c->opts->nspecs;
}

/* An accessing instruction the agent has not named yet: shown by its
 * address (the instruction after it), and read again next time. */
static bool provisional_name(struct kps_desc *d)
{
	if (d->kind != DESC_WATCH || d->name[0])
		return false;
	snprintf(d->name, sizeof(d->name), "0x%lx>", (unsigned long)d->addr);
	return true;
}

/* The agent names an accessing instruction within milliseconds of its
 * first access: worth waiting for once, rather than printing an address;
 * but never long in all (a target may publish any number of unnamed
 * descriptors). */
#define WATCH_NAME_WAIT_NS 100000000ull
#define WATCH_NAME_WAIT_TOTAL_NS 1000000000ull

static char wait_for_name(struct consumer *c, const struct kps_desc *src)
{
	unsigned long long begin = cli_now_ns(), last = begin, now = begin;
	struct timespec pause = { 0, 1000000 };
	char first;

	while (!(first = __atomic_load_n(&src->name[0], __ATOMIC_ACQUIRE)) &&
	       c->opts->watch_len && __atomic_load_n(&src->kind, __ATOMIC_RELAXED) == DESC_WATCH &&
	       now - begin < WATCH_NAME_WAIT_NS && c->name_wait_ns < WATCH_NAME_WAIT_TOTAL_NS) {
		nanosleep(&pause, NULL);
		now = cli_now_ns();
		c->name_wait_ns += now - last;
		last = now;
	}
	return first;
}

const struct kps_desc *consumer_desc(struct consumer *c, uint64_t id)
{
	const struct kps_desc *src;
	struct kps_desc *d;
	bool seen;
	char first;

	if (id >= KPS_MAX_PROBES)
		return NULL;
	seen = c->descs && c->descs[id];
	if (c->descs && c->descs[id] && !c->descs[id]->ready)
		free(c->descs[id]);	/* provisional: read it again */
	else if (c->descs && c->descs[id])
		return c->descs[id];
	if (c->descs)
		c->descs[id] = NULL;
	src = &c->map->desc[id];
	if (!__atomic_load_n(&src->ready, __ATOMIC_ACQUIRE))
		return NULL;
	if (!c->descs)
		c->descs = calloc(KPS_MAX_PROBES, sizeof(*c->descs));
	d = c->descs ? malloc(sizeof(*d)) : NULL;
	if (!d)
		return NULL;
	/* An agent's name is complete once its first byte is there; an
	 * accessing instruction's address is final then too. */
	first = seen ? __atomic_load_n(&src->name[0], __ATOMIC_ACQUIRE) : wait_for_name(c, src);
	d->addr = __atomic_load_n(&src->addr, __ATOMIC_RELAXED);
	d->missed = 0;
	d->pid = __atomic_load_n(&src->pid, __ATOMIC_RELAXED);
	d->spec = __atomic_load_n(&src->spec, __ATOMIC_RELAXED);
	d->kind = __atomic_load_n(&src->kind, __ATOMIC_RELAXED);
	d->ready = 1;
	consumer_copy_text(d->name, sizeof(d->name), src->name, first ? sizeof(src->name) : 0);
	consumer_copy_text(d->object, sizeof(d->object), src->object, sizeof(src->object));
	consumer_copy_text(d->args, sizeof(d->args), src->args, sizeof(src->args));
	if (!desc_valid(c, d)) {
		free(d);
		return NULL;
	}
	/* A probe the tool resolved to an address under a name of its own
	 * (an SDT probe) is shown by that name. */
	if (d->spec < c->opts->nspecs && c->opts->specs[d->spec].label[0])
		snprintf(d->name, sizeof(d->name), "%s", c->opts->specs[d->spec].label);
	else if (provisional_name(d))
		d->ready = 0;
	c->descs[id] = d;
	return d;
}

/* The TSC rate, from the session's base to now: the longer the session,
 * the better the estimate. */
static void update_tick_rate(struct consumer *c)
{
	uint64_t ns = cli_now_ns(), tsc = kp_cycles();

	if (c->time_tsc && tsc > c->tsc_base && ns > c->ns_base)
		c->ns_per_tick = (double)(ns - c->ns_base) / (double)(tsc - c->tsc_base);
}

/* A time stamp the target wrote, in ns: any value gives some time. */
static uint64_t to_ns(const struct consumer *c, uint64_t stamp)
{
	double d;

	if (!c->time_tsc)
		return stamp;
	d = (double)(int64_t)(stamp - c->tsc_base) * c->ns_per_tick;
	if (!(d > -9e18))
		d = -9e18;	/* also NaN */
	if (d > 9e18)
		d = 9e18;
	return c->ns_base + (uint64_t)(int64_t)d;
}

/* The spec an event of d is read with: the command line's, or, when the
 * agent chose the arguments (a tracepoint's declared ones), that spec with
 * them, parsed once. */
static const struct probe_spec *spec_of(struct consumer *c, const struct kps_desc *d, uint32_t id)
{
	const struct probe_spec *cli = &c->opts->specs[d->spec];
	char text[SPEC_TEXT_MAX + sizeof(d->args) + 2], err[160];
	struct probe_spec *s;

	if (!d->args[0])
		return cli;
	if (!c->desc_specs)
		c->desc_specs = calloc(KPS_MAX_PROBES, sizeof(*c->desc_specs));
	if (!c->desc_specs)
		return NULL;
	if (c->desc_specs[id])
		return c->desc_specs[id];
	s = malloc(sizeof(*s));
	snprintf(text, sizeof(text), "%s %.*s", cli->text, (int)sizeof(d->args), d->args);
	if (!s || spec_parse(text, s, err, sizeof(err)) || s->nargs > SPEC_MAX_ARGS) {
		free(s);
		return NULL;
	}
	c->desc_specs[id] = s;
	return s;
}

/* A module's line: only in a load session, and within the record. */
static bool decode_text(struct consumer *c, const struct copied *cp, struct trace_event *ev)
{
	const struct kps_event *e = &cp->ev;

	if (c->opts->action != ACT_LOAD || e->reserved > KPS_TEXT_MAX ||
	    e->reserved > e->size - sizeof(*e))
		return false;
	ev->type = EV_TEXT;
	ev->time_ns = to_ns(c, e->time_ns);
	ev->entry_ns = ev->time_ns;
	ev->pid = (pid_t)(cp->owner >> 32);
	ev->tid = (pid_t)(uint32_t)cp->owner;
	ev->text = (const unsigned char *)e->vals;
	ev->textlen = e->reserved;
	return true;
}

/* A program's event: only in a run session, its data within the record.
 * Its type and id are checked by whoever handles it (run.c). */
static bool decode_prog(struct consumer *c, const struct copied *cp, struct trace_event *ev)
{
	const struct kps_event *e = &cp->ev;

	if (c->opts->action != ACT_RUN || e->reserved > KPS_PROG_DATA_MAX ||
	    e->reserved > e->size - sizeof(*e))
		return false;
	ev->type = EV_PROG;
	ev->time_ns = to_ns(c, e->time_ns);
	ev->entry_ns = ev->time_ns;
	ev->pid = (pid_t)(cp->owner >> 32);
	ev->tid = (pid_t)(uint32_t)cp->owner;
	ev->prog_type = e->nvals;
	ev->prog_id = e->desc;
	ev->text = (const unsigned char *)e->vals;
	ev->textlen = e->reserved;
	return true;
}

/* The stack at the record's end (shm.h): no more frames than asked for,
 * and not overlapping what came before (p). */
static bool decode_stack(const struct consumer *c, const struct kps_event *e,
			 const unsigned char *p, struct trace_event *ev)
{
	const unsigned char *end = (const unsigned char *)e + e->size;
	uint32_t n = e->reserved >> KPS_STACK_SHIFT;

	if (!n)
		return true;
	if (n > c->opts->stack_depth || (size_t)(end - p) < 8 * (size_t)n)
		return false;
	ev->stack = (const uint64_t *)(const void *)(end - 8 * (size_t)n);
	ev->nstack = n;
	return true;
}

/* Fills ev from a copied record (its size checked by copy_ring); false if
 * it does not make sense. */
static bool decode(struct consumer *c, const struct copied *cp, struct trace_event *ev)
{
	const struct kps_event *e = &cp->ev;
	const unsigned char *p, *end = (const unsigned char *)e + e->size;
	int nfixed = e->type == EV_RETURN ? 1 : 0;
	size_t room = (e->size - sizeof(*e)) / 8;

	memset(ev, 0, sizeof(*ev));
	if (e->type == EV_TEXT)
		return decode_text(c, cp, ev);
	if (e->type == EV_PROG)
		return decode_prog(c, cp, ev);
	if (e->type != EV_ENTRY && e->type != EV_RETURN)
		return false;
	ev->desc = consumer_desc(c, e->desc);
	if (!ev->desc)
		return false;
	ev->spec = spec_of(c, ev->desc, e->desc);
	if (!ev->spec || e->nvals != nfixed + ev->spec->nargs || e->nvals > room)
		return false;
	ev->desc_id = e->desc;
	ev->type = e->type;
	ev->faults = e->reserved & ((1u << KPS_STACK_SHIFT) - 1);
	ev->time_ns = to_ns(c, e->time_ns);
	ev->entry_ns = nfixed ? to_ns(c, e->vals[0]) : ev->time_ns;
	ev->pid = (pid_t)(cp->owner >> 32);
	ev->tid = (pid_t)(uint32_t)cp->owner;
	p = (const unsigned char *)&e->vals[e->nvals];
	for (int i = 0; i < ev->spec->nargs; i++) {
		uint16_t n;

		ev->vals[i] = e->vals[nfixed + i];
		if (ev->spec->args[i].type != ARG_STRING)
			continue;
		if (end - p < 2)
			return false;
		n = (uint16_t)(p[0] | p[1] << 8);
		p += 2;
		if (n == KPS_STR_FAULT)
			continue;
		if (n > KPS_STR_MAX || end - p < n)
			return false;
		ev->str[i] = p;
		ev->strlen[i] = n;
		p += n;
	}
	return decode_stack(c, e, p, ev);
}

static int by_time(const void *a, const void *b)
{
	const struct trace_event *x = a, *y = b;

	if (x->time_ns != y->time_ns)
		return x->time_ns < y->time_ns ? -1 : 1;
	return 0;
}

/* Copies from every claimed ring, starting where the last drain stopped
 * so that no ring waits behind busier ones. */
static void copy_rings(struct consumer *c)
{
	uint32_t n = consumer_rings_claimed(c);
	size_t budget = CONSUMER_DRAIN_MAX;

	c->work = 0;
	if (c->next_ring >= n)
		c->next_ring = 0;
	for (uint32_t k = 0; k < n && budget; k++) {
		uint32_t i = (c->next_ring + k) % n;

		if (__atomic_load_n(&c->map->rings[i].used, __ATOMIC_ACQUIRE)) {
			size_t work = copy_ring(c, i, budget);

			c->work += work;
			budget = work < budget ? budget - work : 0;
		}
		if (!budget)
			c->next_ring = i;
	}
}

static bool thread_alive(uint64_t owner)
{
	pid_t pid = (pid_t)(owner >> 32), tid = (pid_t)(uint32_t)owner;

	return syscall(SYS_tgkill, pid, tid, 0) == 0 || errno == EPERM;
}

void consumer_free_dead_rings(struct consumer *c)
{
	uint32_t n = consumer_rings_claimed(c);

	/* until every ring has had an owner, a new thread takes an unused one */
	if (n < c->nrings)
		return;
	for (uint32_t i = 0; i < n; i++) {
		struct kps_ring *r = &c->map->rings[i];
		uint64_t owner = __atomic_load_n(&r->owner, __ATOMIC_ACQUIRE);

		if (!owner || __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) != c->tails[i] ||
		    thread_alive(owner))
			continue;
		__atomic_compare_exchange_n(&r->owner, &owner, 0, false, __ATOMIC_ACQ_REL,
					    __ATOMIC_RELAXED);
	}
}

size_t consumer_drain(struct consumer *c, struct output *out)
{
	size_t written = 0;

	c->len = 0;
	c->nevs = 0;
	update_tick_rate(c);
	copy_rings(c);
	for (size_t off = 0; off < c->len;) {
		const struct copied *cp = (const void *)(c->buf + off);

		off += 8 + cp->ev.size;
		if (c->nevs == c->evcap) {
			size_t cap = c->evcap ? c->evcap * 2 : 1024;
			struct trace_event *v = realloc(c->evs, cap * sizeof(*v));

			if (!v)
				break;
			c->evs = v;
			c->evcap = cap;
		}
		if (decode(c, cp, &c->evs[c->nevs]))
			c->nevs++;
	}
	if (c->nevs > 1)
		qsort(c->evs, c->nevs, sizeof(*c->evs), by_time);
	for (size_t i = 0; i < c->nevs; i++, written++)
		output_event(out, &c->evs[i]);
	if (written)
		fflush(out->f);
	return written;
}

size_t consumer_drain_all(struct consumer *c, struct output *out)
{
	size_t rounds = (size_t)c->nrings * KPS_RING_BYTES / CONSUMER_DRAIN_MAX + 2, n = 0;

	do
		n += consumer_drain(c, out);
	while (c->work && --rounds);
	return n;
}

void consumer_free(struct consumer *c)
{
	for (int i = 0; c->desc_specs && i < KPS_MAX_PROBES; i++)
		free(c->desc_specs[i]);
	for (int i = 0; c->descs && i < KPS_MAX_PROBES; i++)
		free(c->descs[i]);
	free(c->desc_specs);
	free(c->descs);
	free(c->tails);
	free(c->buf);
	free(c->evs);
	c->desc_specs = NULL;
	c->descs = NULL;
	c->tails = NULL;
	c->buf = NULL;
	c->evs = NULL;
	c->nrings = 0;
}

uint64_t consumer_lost_full(const struct consumer *c)
{
	uint32_t n = consumer_rings_claimed(c);
	uint64_t lost = 0;

	for (uint32_t i = 0; i < n; i++)
		lost = add_sat(lost, __atomic_load_n(&c->map->rings[i].lost, __ATOMIC_RELAXED));
	return lost;
}

uint64_t consumer_lost_ringless(const struct consumer *c)
{
	return __atomic_load_n(&c->map->hdr->ringless_lost, __ATOMIC_RELAXED);
}
