/*
 * Static keys: the tables of sites (found in every loaded object), the keys'
 * reference counts, and switching a key by rewriting its sites.
 *
 * Site tables are read lock-free by the trap path (a thread that hits a
 * site while it is being rewritten) and by the probe registry (no probe on
 * a site, no jump over a site's target).  Objects are appended to a fixed
 * array and never removed; unloaded ones are marked dead.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/jump_label.h"
#include "elf/sections.h"
#include "kprobes/tracepoint.h"

#define JL_MAX_OBJECTS 1024

/* A table entry as the header's asm lays it out: offsets from each field. */
struct jl_raw {
	int32_t site;
	int32_t target;
	int64_t key;
};

static struct kp_jl_object *objects[JL_MAX_OBJECTS];
static unsigned int nobjects;		/* published with release */
static unsigned long long scanned_gen = ~0ULL;

/* scan_lock guards the object list (only the loader lock is taken while
 * holding it); key_lock serializes key changes and tracepoint handlers. */
static pthread_mutex_t scan_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t kp_jl_key_lock = PTHREAD_MUTEX_INITIALIZER;

static int cmp_site(const void *a, const void *b)
{
	const struct kp_jl_site *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int load_sites(struct kp_jl_object *o, const struct ksec_object *so)
{
	uintptr_t addr;
	size_t size, n;
	int err = ksec_find(so, "__kprobes_jump_table", &addr, &size);

	if (err == -ENOENT)
		return 0;
	if (err)
		return err;
	n = size / sizeof(struct jl_raw);
	o->sites = calloc(n ? n : 1, sizeof(*o->sites));
	if (!o->sites)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct jl_raw *r = (const struct jl_raw *)addr + i;
		uintptr_t key = (uintptr_t)&r->key + (uintptr_t)r->key;

		o->sites[i].addr = (uintptr_t)&r->site + (uintptr_t)(intptr_t)r->site;
		o->sites[i].target = (uintptr_t)&r->target + (uintptr_t)(intptr_t)r->target;
		o->sites[i].key = (struct static_key *)(key & ~(uintptr_t)1);
		o->sites[i].branch = key & 1;
	}
	qsort(o->sites, n, sizeof(*o->sites), cmp_site);
	o->nsites = n;
	return 0;
}

static int load_tracepoints(struct kp_jl_object *o, const struct ksec_object *so)
{
	uintptr_t addr;
	size_t size;
	int err = ksec_find(so, "__kprobes_tracepoints", &addr, &size);

	if (err == -ENOENT)
		return 0;
	if (err)
		return err;
	o->tps = (struct kprobes_tracepoint *)addr;
	o->ntps = size / sizeof(struct kprobes_tracepoint);
	return 0;
}

static struct kp_jl_object *object_known(const struct ksec_object *so)
{
	for (unsigned int i = 0; i < nobjects; i++)
		if (objects[i]->bias == so->bias && !strcmp(objects[i]->path, so->path))
			return objects[i];
	return NULL;
}

static int scan_one(const struct ksec_object *so, void *arg)
{
	struct kp_jl_object *o = object_known(so);
	unsigned long long gen = *(unsigned long long *)arg;

	if (o) {
		o->seen = gen;
		__atomic_store_n(&o->live, true, __ATOMIC_RELEASE);
		return 0;
	}
	if (nobjects == JL_MAX_OBJECTS)
		return 0;
	o = calloc(1, sizeof(*o));
	if (!o || !(o->path = strdup(so->path)))
		goto nomem;
	o->bias = so->bias;
	o->text_lo = so->text_lo;
	o->text_hi = so->text_hi;
	/* An object whose file cannot be read has no tables we could use. */
	if (load_sites(o, so) == -ENOMEM || load_tracepoints(o, so) == -ENOMEM)
		goto nomem;
	o->seen = gen;
	o->live = true;
	objects[nobjects] = o;
	__atomic_store_n(&nobjects, nobjects + 1, __ATOMIC_RELEASE);
	return 0;
nomem:
	if (o) {
		free(o->sites);
		free(o->path);
	}
	free(o);
	return -ENOMEM;
}

int kp_jl_refresh(void)
{
	unsigned long long gen = ksec_generation();
	int err = 0;

	if (__atomic_load_n(&scanned_gen, __ATOMIC_ACQUIRE) == gen)
		return 0;
	pthread_mutex_lock(&scan_lock);
	if (scanned_gen != gen) {
		err = ksec_foreach_object(scan_one, &gen);
		for (unsigned int i = 0; !err && i < nobjects; i++)
			if (objects[i]->seen != gen)
				__atomic_store_n(&objects[i]->live, false, __ATOMIC_RELEASE);
		if (!err)
			__atomic_store_n(&scanned_gen, gen, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&scan_lock);
	return err;
}

unsigned int kp_jl_objects(struct kp_jl_object *const **out)
{
	*out = objects;
	return __atomic_load_n(&nobjects, __ATOMIC_ACQUIRE);
}

/* Async-signal-safe: the last site at or below addr in the live object
 * whose code holds addr, or NULL. */
static const struct kp_jl_site *site_at_or_below(uintptr_t addr)
{
	unsigned int n = __atomic_load_n(&nobjects, __ATOMIC_ACQUIRE);

	for (unsigned int i = 0; i < n; i++) {
		const struct kp_jl_object *o = objects[i];
		size_t a = 0, b = o->nsites;

		if (addr < o->text_lo || addr >= o->text_hi ||
		    !__atomic_load_n(&o->live, __ATOMIC_ACQUIRE))
			continue;
		while (a < b) {
			size_t m = (a + b) / 2;

			if (o->sites[m].addr <= addr)
				a = m + 1;
			else
				b = m;
		}
		return a ? &o->sites[a - 1] : NULL;
	}
	return NULL;
}

/* Async-signal-safe: the site starting at addr, or NULL. */
const struct kp_jl_site *kp_jl_site_at(uintptr_t addr)
{
	const struct kp_jl_site *s = site_at_or_below(addr);

	return s && s->addr == addr ? s : NULL;
}

/* Async-signal-safe: the site whose bytes include addr, or NULL. */
const struct kp_jl_site *kp_jl_site_covering(uintptr_t addr)
{
	const struct kp_jl_site *s = site_at_or_below(addr);

	return s && addr < s->addr + arch_jump_label_len() ? s : NULL;
}

/* Async-signal-safe: whether a site's bytes meet [lo, hi) (hi > lo), in
 * the objects holding lo and hi - 1.  Sites do not overlap and each
 * object's are sorted: the last one at or below hi - 1 is the one that
 * can reach furthest into the range. */
bool kp_jl_sites_meet(uintptr_t lo, uintptr_t hi)
{
	const struct kp_jl_site *s = site_at_or_below(hi - 1);

	if (s && s->addr + arch_jump_label_len() > lo)
		return true;
	return kp_jl_site_covering(lo) != NULL;
}

bool kp_jl_site_jumps(const struct kp_jl_site *s)
{
	return static_key_enabled(s->key) != s->branch;
}

/* Does [lo, hi) overlap a site, or (when targets) contain a site's jump
 * target other than at lo?  For the probe registry and the optimizer. */
bool kp_jl_busy(uintptr_t lo, uintptr_t hi, bool targets)
{
	unsigned int n;

	if (kp_jl_refresh())
		return true;
	n = __atomic_load_n(&nobjects, __ATOMIC_ACQUIRE);
	for (unsigned int i = 0; i < n; i++) {
		const struct kp_jl_object *o = objects[i];

		if (!o->live || hi <= o->text_lo || lo >= o->text_hi)
			continue;
		for (size_t j = 0; j < o->nsites; j++) {
			const struct kp_jl_site *s = &o->sites[j];

			if (s->addr < hi && s->addr + arch_jump_label_len() > lo)
				return true;
			if (targets && s->target > lo && s->target < hi)
				return true;
		}
	}
	return false;
}

/* Sets key to value and rewrites its sites when its truth changes.  Under
 * kp_jl_key_lock. */
int kp_jl_key_set(struct static_key *key, int value)
{
	int old = key->enabled, err, n = 0, cap = 16;
	bool on = value > 0;
	struct arch_jl_patch *p;
	struct kp_jl_object *const *objs;
	unsigned int nobj;

	if ((old > 0) == on) {
		__atomic_store_n(&key->enabled, value, __ATOMIC_RELEASE);
		return 0;
	}
	err = kp_init();
	if (!err)
		err = kp_jl_refresh();
	if (err)
		return err;
	p = malloc(cap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	nobj = kp_jl_objects(&objs);
	for (unsigned int i = 0; i < nobj; i++) {
		if (!objs[i]->live)
			continue;
		for (size_t j = 0; j < objs[i]->nsites; j++) {
			const struct kp_jl_site *s = &objs[i]->sites[j];

			if (s->key != key)
				continue;
			if (n == cap) {
				struct arch_jl_patch *q = realloc(p, 2 * cap * sizeof(*p));

				if (!q) {
					free(p);
					return -ENOMEM;
				}
				p = q;
				cap *= 2;
			}
			p[n].addr = s->addr;
			p[n].target = s->target;
			p[n].jump = on != s->branch;
			n++;
		}
	}
	/* The new value first: a thread that meets a half-written site in
	 * the trap handler follows the key's new value. */
	err = arch_jump_label_check(p, n);
	if (!err) {
		__atomic_store_n(&key->enabled, value, __ATOMIC_RELEASE);
		err = arch_jump_label_apply(p, n);
		if (err)
			__atomic_store_n(&key->enabled, old, __ATOMIC_RELEASE);
	}
	free(p);
	return err;
}

/* For the fork handlers (src/core/fork.c); the list itself is consistent
 * in a child at any moment: entries are published one by one. */
void kp_jl_scan_lock(void)
{
	pthread_mutex_lock(&scan_lock);
}

void kp_jl_scan_unlock(void)
{
	pthread_mutex_unlock(&scan_lock);
}

void kp_jl_lock(void)
{
	kp_fork_init();
	pthread_mutex_lock(&kp_jl_key_lock);
}

void kp_jl_unlock(void)
{
	pthread_mutex_unlock(&kp_jl_key_lock);
}

KP_EXPORT int kprobes_static_key_enable(struct static_key *key)
{
	int err = 0;

	kp_jl_lock();
	if (key->enabled <= 0)
		err = kp_jl_key_set(key, 1);
	kp_jl_unlock();
	return err;
}

KP_EXPORT int kprobes_static_key_disable(struct static_key *key)
{
	int err = 0;

	kp_jl_lock();
	if (key->enabled != 0)
		err = kp_jl_key_set(key, 0);
	kp_jl_unlock();
	return err;
}

KP_EXPORT int kprobes_static_key_inc(struct static_key *key)
{
	int err;

	kp_jl_lock();
	err = key->enabled < 0 ? -EINVAL : kp_jl_key_set(key, key->enabled + 1);
	kp_jl_unlock();
	return err;
}

KP_EXPORT int kprobes_static_key_dec(struct static_key *key)
{
	int err;

	kp_jl_lock();
	err = key->enabled <= 0 ? -EINVAL : kp_jl_key_set(key, key->enabled - 1);
	kp_jl_unlock();
	return err;
}
