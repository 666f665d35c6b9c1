/* Churn: a controller registers, unregisters (singly and in batches),
 * disables and enables probes at every site while the workers run through
 * them, and another thread flips jump optimization on and off and forces
 * optimizer passes.
 *
 * Each registration opens an interval.  Against the workers' counters it
 * must satisfy, with T1s/T1e the start/end of the registration call and
 * T2s/T2e those of the unregistration:
 *   hits <= started(T2e) - done(T1s)                  no double hit
 *   hits + nmissed >= done(T2s) - started(T1e)        no lost hit
 * (the second only when the probe stayed enabled: a call that begins after
 * registration returned and ends before unregistration began must hit).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "soak_probes.h"

#define CK(s) { .magic = CPROBE_MAGIC, .site = s, .kind = 'k' }
#define CR(s) { .magic = CPROBE_MAGIC, .site = s, .kind = 'r' }
#define CJ(s) { .magic = CPROBE_MAGIC, .site = s, .kind = 'j' }

/* Probes at every site, several at some (aggregates with each other and
 * with the steady ones), return probes and jprobes among them. */
struct cprobe churn[] = {
	CK(S_LEAF0), CK(S_LEAF_RET), CK(S_LOOP0), CK(S_LOOP_TOP), CK(S_LOOP_ODD),
	CK(S_LOOP_EVEN), CK(S_LOOP_FLAGS), CK(S_LOOP_RET), CK(S_REC0), CK(S_VEC_MUL),
	CK(S_VEC_RIP), CK(S_FDOT0), CK(S_JP0), CK(S_CHA0), CK(S_CHA0), CK(S_CHB0),
	CK(S_CHMID0), CK(S_CHMID3), CK(S_CHMID7), CK(S_CHMID10), CK(S_CHMID14),
	CK(S_CHRET0), CK(S_LOOP_TOP), CK(S_CHMID7),
	CR(S_REC0), CR(S_LOOP0), CR(S_CHRET0), CR(S_CHRET0),
	CJ(S_CHJP0), CJ(S_FDOT0),
};
const int nchurn = sizeof(churn) / sizeof(churn[0]);

void churn_init(void)
{
	for (int i = 0; i < nchurn; i++) {
		churn[i].idx = i;
		churn[i].state = C_IDLE;
		if (churn[i].kind == 'j' && churn[i].site == S_CHJP0)
			churn_jprobe_chjp = &churn[i];
		if (churn[i].kind == 'j' && churn[i].site == S_FDOT0)
			churn_jprobe_fdot = &churn[i];
	}
}

/* A fresh probe for a new interval: by address or by name, with or without
 * a post_handler, registered enabled or disabled, at random. */
static void churn_setup(struct cprobe *c, uint64_t r)
{
	const struct site *st = &sites[c->site];

	memset(&c->u, 0, sizeof(c->u));
	if (r & 1) {
		site_symbol(c->site, c->sym, sizeof(c->sym));
		c->u.kp.symbol_name = c->sym;
		c->u.kp.offset = st->off;
	} else {
		c->u.kp.addr = (kprobe_opcode_t *)site_addr(c->site);
	}
	c->post = c->kind == 'k' && (r & 6) == 0;
	c->u.kp.flags = (r & 0x18) == 0 ? KPROBE_FLAG_DISABLED : 0;
	c->disabled_once = c->u.kp.flags & KPROBE_FLAG_DISABLED;
	switch (c->kind) {
	case 'k':
		c->u.kp.pre_handler = churn_pre;
		c->u.kp.post_handler = c->post ? churn_post : NULL;
		break;
	case 'r':
		c->u.rp.handler = churn_rp_ret;
		c->u.rp.entry_handler = churn_rp_entry;
		c->u.rp.data_size = sizeof(long);
		c->u.rp.maxactive = (opt.threads + 2) * 4 * (REC_MAX + 2);
		break;
	case 'j':
		c->u.jp.entry = c == churn_jprobe_chjp ? (void *)churn_jp_chjp
						       : (void *)churn_jp_fdot;
		break;
	}
}

/* ---- intervals ---- */

static unsigned long site_started(int site)
{
	return count_started(sites[site].func, sites[site].metric);
}

static unsigned long site_done(int site)
{
	return count_done(sites[site].func, sites[site].metric);
}

static void interval_open(struct cprobe *c)
{
	c->i_done_before = site_done(c->site);
	c->i_hits = ld(&c->hits);
	c->ret_hits = c->post_hits = 0;
	__atomic_store_n(&c->state, C_REGISTERING, __ATOMIC_RELEASE);
}

static void interval_registered(struct cprobe *c)
{
	__atomic_store_n(&c->state, C_LIVE, __ATOMIC_RELEASE);
	c->i_started_after = site_started(c->site);
}

static unsigned long churn_missed(const struct cprobe *c)
{
	unsigned long m = c->u.kp.nmissed;

	if (c->kind == 'r') {
		if (c->u.rp.nmissed)
			anomaly(A_RP_MISSED, c->site, c->u.rp.nmissed);
		m += (unsigned long)c->u.rp.nmissed;
	}
	return m;
}

static unsigned long in_flight_max(void)
{
	return 3UL * (unsigned long)nworkers_counted;
}

/* Checks one closed interval; done_t2s was read before unregistering. */
static void interval_check(struct cprobe *c, unsigned long done_t2s)
{
	unsigned long started_t2e = site_started(c->site);
	unsigned long hits = ld(&c->hits) - c->i_hits;
	unsigned long upper = started_t2e - c->i_done_before;

	add(&tot.churn_intervals, 1);
	add(&tot.churn_hits, hits);
	if (hits > upper)
		anomaly(A_CHURN_UPPER, c->site, (long)(hits - upper));
	/* A thread already between the pre and post handlers of the address
	 * when the probe joined (or was re-enabled) runs only its post_handler,
	 * as in Kprobes' aggregates: one such call per thread and signal level. */
	if (ld(&c->post_hits) > hits + in_flight_max() || ld(&c->ret_hits) > hits)
		anomaly(A_CHURN_UPPER, c->site, -1);
	if (!c->disabled_once && done_t2s > c->i_started_after) {
		unsigned long lower = done_t2s - c->i_started_after;

		add(&tot.churn_lower_checked, 1);
		if (hits + churn_missed(c) < lower)
			anomaly(A_CHURN_LOWER, c->site, (long)(lower - hits - churn_missed(c)));
	}
}

static unsigned long interval_closing(struct cprobe *c)
{
	__atomic_store_n(&c->state, C_UNREGISTERING, __ATOMIC_RELEASE);
	return site_done(c->site);
}

static void interval_closed(struct cprobe *c, unsigned long done_t2s)
{
	interval_check(c, done_t2s);
	__atomic_store_n(&c->state, C_IDLE, __ATOMIC_RELEASE);
	c->intervals++;
}

/* ---- the API calls by kind ---- */

static int c_register(struct cprobe *c)
{
	switch (c->kind) {
	case 'k': return register_kprobe(&c->u.kp);
	case 'r': return register_kretprobe(&c->u.rp);
	default:  return register_jprobe(&c->u.jp);
	}
}

static void c_unregister(struct cprobe *c)
{
	switch (c->kind) {
	case 'k': unregister_kprobe(&c->u.kp); break;
	case 'r': unregister_kretprobe(&c->u.rp); break;
	default:  unregister_jprobe(&c->u.jp); break;
	}
}

static int c_enable(struct cprobe *c, bool on)
{
	switch (c->kind) {
	case 'k': return on ? enable_kprobe(&c->u.kp) : disable_kprobe(&c->u.kp);
	case 'r': return on ? enable_kretprobe(&c->u.rp) : disable_kretprobe(&c->u.rp);
	default:  return on ? enable_jprobe(&c->u.jp) : disable_jprobe(&c->u.jp);
	}
}

/* The batch calls take arrays of the kind's own structure; kp is first in
 * each, so one array of pointers serves all three. */
static int c_register_batch(char kind, void **arr, int n)
{
	switch (kind) {
	case 'k': return register_kprobes((struct kprobe **)arr, n);
	case 'r': return register_kretprobes((struct kretprobe **)arr, n);
	default:  return register_jprobes((struct jprobe **)arr, n);
	}
}

static void c_unregister_batch(char kind, void **arr, int n)
{
	switch (kind) {
	case 'k': unregister_kprobes((struct kprobe **)arr, n); break;
	case 'r': unregister_kretprobes((struct kretprobe **)arr, n); break;
	default:  unregister_jprobes((struct jprobe **)arr, n); break;
	}
}

/* ---- operations ---- */

/* Up to max probes in state st (and of kind, unless 0), from a random start. */
static int pick(uint64_t *rng, int st, char kind, struct cprobe **out, int max)
{
	int start = (int)(rnd(rng) % (uint64_t)nchurn), n = 0;

	for (int k = 0; k < nchurn && n < max; k++) {
		struct cprobe *c = &churn[(start + k) % nchurn];

		if (c->state == st && (!kind || c->kind == kind))
			out[n++] = c;
	}
	return n;
}

static void op_register(uint64_t *rng, int max)
{
	static const char kinds[] = "kkkkrj";
	char kind = max > 1 ? kinds[rnd(rng) % 6] : 0;
	struct cprobe *cs[8];
	void *arr[8];
	int n = pick(rng, C_IDLE, kind, cs, max), err;

	if (!n)
		return;
	for (int i = 0; i < n; i++) {
		churn_setup(cs[i], rnd(rng));
		arr[i] = &cs[i]->u;
		interval_open(cs[i]);
	}
	err = max > 1 ? c_register_batch(cs[0]->kind, arr, n) : c_register(cs[0]);
	for (int i = 0; i < n; i++) {
		if (err) {
			__atomic_store_n(&cs[i]->state, C_IDLE, __ATOMIC_RELEASE);
			anomaly(A_REG_FAIL, cs[i]->site, err);
		} else {
			interval_registered(cs[i]);
		}
	}
}

/* A batch with one element that cannot be registered: all or none, so the
 * good ones must not stay registered, and their handlers must stop. */
static struct kprobe bad_kp;
static struct kretprobe bad_rp;
static struct jprobe bad_jp;

static void *bad_element(char kind)
{
	switch (kind) {
	case 'k':	/* not an instruction boundary: -EILSEQ */
		memset(&bad_kp, 0, sizeof(bad_kp));
		bad_kp.addr = (kprobe_opcode_t *)site_addr(S_LEAF0) + 1;
		return &bad_kp;
	case 'r':	/* not a function entry: -EINVAL */
		memset(&bad_rp, 0, sizeof(bad_rp));
		bad_rp.kp.addr = (kprobe_opcode_t *)site_addr(S_LOOP_TOP);
		bad_rp.handler = churn_rp_ret;
		return &bad_rp;
	default:	/* no entry: -EINVAL */
		memset(&bad_jp, 0, sizeof(bad_jp));
		bad_jp.kp.addr = (kprobe_opcode_t *)site_addr(S_CHA0);
		return &bad_jp;
	}
}

static void op_register_bad_batch(uint64_t *rng)
{
	static const char kinds[] = "kkrj";
	char kind = kinds[rnd(rng) % 4];
	struct cprobe *cs[8];
	void *arr[8];
	int n = pick(rng, C_IDLE, kind, cs, 4), err;

	for (int i = 0; i < n; i++) {
		churn_setup(cs[i], rnd(rng));
		arr[i] = &cs[i]->u;
		interval_open(cs[i]);
	}
	arr[n] = bad_element(kind);
	err = c_register_batch(kind, arr, n + 1);
	if (!err) {
		anomaly(A_API_FAIL, 'B', kind);
		c_unregister_batch(kind, arr, n + 1);
	} else {
		add(&tot.churn_batch_fail_ok, 1);
	}
	for (int i = 0; i < n; i++) {
		interval_closed(cs[i], 0);
		if (c_enable(cs[i], true) != -EINVAL)	/* not registered */
			anomaly(A_API_FAIL, 'E', cs[i]->site);
	}
}

static void op_unregister(uint64_t *rng, int max)
{
	static const char kinds[] = "kkkkrj";
	char kind = max > 1 ? kinds[rnd(rng) % 6] : 0;
	struct cprobe *cs[8];
	unsigned long done[8];
	void *arr[8];
	int n = pick(rng, C_LIVE, kind, cs, max);

	if (!n)
		return;
	for (int i = 0; i < n; i++) {
		arr[i] = &cs[i]->u;
		done[i] = interval_closing(cs[i]);
	}
	if (max > 1)
		c_unregister_batch(cs[0]->kind, arr, n);
	else
		c_unregister(cs[0]);
	for (int i = 0; i < n; i++)
		interval_closed(cs[i], done[i]);
}

static void op_toggle(uint64_t *rng)
{
	struct cprobe *c;
	bool on;
	int err;

	if (!pick(rng, C_LIVE, 0, &c, 1))
		return;
	on = c->u.kp.flags & KPROBE_FLAG_DISABLED;
	if (!on)
		c->disabled_once = true;
	err = c_enable(c, on);
	if (err)
		anomaly(A_API_FAIL, on ? 'e' : 'd', err);
}

void churn_step(uint64_t *rng)
{
	unsigned int r = (unsigned int)(rnd(rng) % 100);

	if (r < 30)
		op_register(rng, 1);
	else if (r < 40)
		op_register(rng, 2 + (int)(rnd(rng) % 4));
	else if (r < 44)
		op_register_bad_batch(rng);
	else if (r < 68)
		op_unregister(rng, 1);
	else if (r < 78)
		op_unregister(rng, 2 + (int)(rnd(rng) % 4));
	else if (r < 95)
		op_toggle(rng);
	else
		sleep_us(1000 + (long)(rnd(rng) % 2000));
	add(&tot.churn_ops, 1);
	/* let intervals last long enough for hits to accumulate */
	sleep_us(50 + (long)(rnd(rng) % 400));
}

void churn_unregister_all(void)
{
	for (int i = 0; i < nchurn; i++) {
		struct cprobe *c = &churn[i];

		if (c->state == C_LIVE) {
			unsigned long done = interval_closing(c);

			c_unregister(c);
			interval_closed(c, done);
		}
	}
}

void *churn_thread(void *arg)
{
	uint64_t rng = opt.seed * 31 + 7;

	while (!stop_all) {
		if (opt.no_churn) {
			sleep_us(10000);
			add(&tot.churn_ops, 1);	/* alive, for the watchdog */
			continue;
		}
		churn_step(&rng);
	}
	churn_unregister_all();
	return NULL;
}

/* ---- optimization on/off, optimizer passes on demand ---- */

static void optimizer_flush_now(void)
{
	pthread_mutex_lock(&kp_registry_lock);
	kp_optimizer_flush();
	pthread_mutex_unlock(&kp_registry_lock);
}

void *optimizer_thread(void *arg)
{
	uint64_t rng = opt.seed * 131 + 3;
	bool on = true;

	while (!stop_all) {
		unsigned int r = (unsigned int)(rnd(&rng) % 10);

		sleep_us(2000 + (long)(rnd(&rng) % 30000));
		if (opt.no_opt)
			r = 9;
		if (r < 4) {
			on = !on;
			kprobes_set_optimization(on);
			add(&tot.opt_toggles, 1);
		} else if (on && r < 9) {
			optimizer_flush_now();
			add(&tot.opt_flushes, 1);
		}
		steady_sample_optimized();
	}
	kprobes_set_optimization(true);
	return NULL;
}
