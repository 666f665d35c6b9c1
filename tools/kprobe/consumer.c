/* Draining the per-thread rings (single consumer: this process). */
#include "consumer.h"

#include <stdlib.h>
#include <string.h>

/* A copied event is preceded by the owner of its ring (pid << 32 | tid). */
struct copied {
	uint64_t owner;
	struct kps_event ev;
};

static int grow(struct consumer *c, size_t more)
{
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

/* Copies ring i's events from tail up to head and frees their space; a
 * corrupt record makes the rest of the ring be skipped. */
static void copy_ring(struct consumer *c, int i)
{
	struct kps_ring *r = &c->map->rings[i];
	const unsigned char *data = c->map->ring_data + (size_t)i * KPS_RING_BYTES;
	uint64_t owner = __atomic_load_n(&r->owner, __ATOMIC_ACQUIRE);
	uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	uint64_t tail = r->tail;

	while (tail < head) {
		const struct kps_event *ev = (const void *)(data + (tail & (KPS_RING_BYTES - 1)));
		uint32_t size = ev->size;

		if (size < 8 || size % 8 || size > head - tail) {
			tail = head;	/* never trust a bad length */
			break;
		}
		if (ev->type != EV_PAD && size >= sizeof(*ev) && !grow(c, 8 + size)) {
			memcpy(c->buf + c->len, &owner, 8);
			memcpy(c->buf + c->len + 8, ev, size);
			c->len += 8 + size;
		}
		tail += size;
	}
	__atomic_store_n(&r->tail, tail, __ATOMIC_RELEASE);
}

static const struct kps_desc *desc_of(const struct consumer *c, uint32_t id)
{
	const struct kps_desc *d;

	if (id >= KPS_MAX_PROBES)
		return NULL;
	d = &c->map->desc[id];
	if (!__atomic_load_n(&d->ready, __ATOMIC_ACQUIRE))
		return NULL;
	if (d->spec >= c->opts->nspecs)
		return NULL;
	return d;
}

/* The TSC rate, from the session's base to now: the longer the session,
 * the better the estimate. */
static void update_tick_rate(struct consumer *c)
{
	const struct kps_header *h = c->map->hdr;
	uint64_t ns = cli_now_ns(), tsc = __builtin_ia32_rdtsc();

	if (h->time_tsc && tsc > h->tsc_base && ns > h->ns_base)
		c->ns_per_tick = (double)(ns - h->ns_base) / (double)(tsc - h->tsc_base);
}

static uint64_t to_ns(const struct consumer *c, uint64_t stamp)
{
	const struct kps_header *h = c->map->hdr;

	if (!h->time_tsc)
		return stamp;
	return h->ns_base + (uint64_t)((double)(int64_t)(stamp - h->tsc_base) * c->ns_per_tick);
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
	if (!s || spec_parse(text, s, err, sizeof(err))) {
		free(s);
		return NULL;
	}
	c->desc_specs[id] = s;
	return s;
}

/* Fills ev from a copied record; false if it does not make sense. */
static bool decode(struct consumer *c, const struct copied *cp, struct trace_event *ev)
{
	const struct kps_event *e = &cp->ev;
	const unsigned char *p, *end = (const unsigned char *)e + e->size;
	int nfixed = e->type == EV_RETURN ? 1 : 0;

	memset(ev, 0, sizeof(*ev));
	ev->desc = desc_of(c, e->desc);
	if (!ev->desc || (e->type != EV_ENTRY && e->type != EV_RETURN))
		return false;
	ev->spec = spec_of(c, ev->desc, e->desc);
	if (!ev->spec || e->nvals != nfixed + ev->spec->nargs ||
	    (const unsigned char *)&e->vals[e->nvals] > end)
		return false;
	ev->desc_id = e->desc;
	ev->type = e->type;
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
		if (p + 2 > end)
			return false;
		n = (uint16_t)(p[0] | p[1] << 8);
		p += 2;
		if (n == KPS_STR_FAULT)
			continue;
		if (n > KPS_STR_MAX || p + n > end)
			return false;
		ev->str[i] = p;
		ev->strlen[i] = n;
		p += n;
	}
	return true;
}

static int by_time(const void *a, const void *b)
{
	const struct trace_event *x = a, *y = b;

	if (x->time_ns != y->time_ns)
		return x->time_ns < y->time_ns ? -1 : 1;
	return 0;
}

size_t consumer_drain(struct consumer *c, struct output *out)
{
	size_t written = 0;

	c->len = 0;
	c->nevs = 0;
	update_tick_rate(c);
	for (int i = 0; i < KPS_RINGS; i++)
		if (__atomic_load_n(&c->map->rings[i].used, __ATOMIC_ACQUIRE))
			copy_ring(c, i);
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
	qsort(c->evs, c->nevs, sizeof(*c->evs), by_time);
	for (size_t i = 0; i < c->nevs; i++, written++)
		output_event(out, &c->evs[i]);
	if (written)
		fflush(out->f);
	return written;
}

void consumer_free(struct consumer *c)
{
	for (int i = 0; c->desc_specs && i < KPS_MAX_PROBES; i++)
		free(c->desc_specs[i]);
	free(c->desc_specs);
	c->desc_specs = NULL;
	free(c->buf);
	free(c->evs);
	c->buf = NULL;
	c->evs = NULL;
}

uint64_t consumer_lost(const struct kps_map *map)
{
	uint64_t lost = __atomic_load_n(&map->hdr->ringless_lost, __ATOMIC_RELAXED);

	for (int i = 0; i < KPS_RINGS; i++)
		lost += __atomic_load_n(&map->rings[i].lost, __ATOMIC_RELAXED);
	return lost;
}
