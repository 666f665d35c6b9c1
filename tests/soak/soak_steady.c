/* Steady probes: registered once, enabled for the whole run, one of each
 * kind of probe libkprobes has.  At the end their hits must match the
 * workers' counts exactly. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "soak_probes.h"

#define SP(w, s, k, p, c, o) \
	{ .magic = SPROBE_MAGIC, .what = w, .site = s, .kind = k, .post = p, \
	  .clobber = c, .must_optimize = o }

/* must_optimize: the analysis in docs/api.md section 7 allows a jump here,
 * so the probe has to be seen optimized at some point of the run. */
struct sprobe steady[] = {
	SP("post_handler, single-stepped", S_LEAF0,      'k', true,  false, false),
	SP("entry, optimizable",           S_LOOP0,      'k', false, false, true),
	SP("mid-function loop head",       S_LOOP_TOP,   'k', false, false, true),
	SP("boosted (jump would cover a branch target)", S_LOOP_ODD, 'k', false, false, false),
	SP("mid, handler clobbers xmm+errno", S_LOOP_EVEN, 'k', false, true, true),
	SP("mid, flags live across",       S_LOOP_FLAGS, 'k', false, false, true),
	SP("ret instruction",              S_LOOP_RET,   'k', false, false, false),
	SP("recursive entry (aggregate)",  S_REC0,       'k', false, false, true),
	SP("kretprobe, recursive",         S_REC0,       'r', false, false, false),
	SP("mid, xmm live, clobbering",    S_VEC_MUL,    'k', false, true,  true),
	SP("entry, fp args, clobbering",   S_FDOT0,      'k', false, true,  true),
	SP("jprobe, 8 args",               S_JP0,        'j', false, false, false),
};
const int nsteady = sizeof(steady) / sizeof(steady[0]);

static struct kprobe *steady_kp(struct sprobe *s)
{
	return &s->u.kp;
}

/* "st_loop+9" -> "st_loop" */
void site_symbol(int site, char *buf, size_t len)
{
	const char *name = sites[site].name;

	snprintf(buf, len, "%.*s", (int)strcspn(name, "+"), name);
}

/* Mid-function probes by "name"+offset, entries by address: both paths of
 * the symbol resolution are used. */
static void steady_setup(struct sprobe *s)
{
	const struct site *st = &sites[s->site];

	memset(&s->u, 0, sizeof(s->u));
	if (s->kind == 'k' && st->off) {
		site_symbol(s->site, s->sym, sizeof(s->sym));
		s->u.kp.symbol_name = s->sym;
		s->u.kp.offset = st->off;
	} else {
		s->u.kp.addr = (kprobe_opcode_t *)site_addr(s->site);
	}
	switch (s->kind) {
	case 'k':
		s->u.kp.pre_handler = steady_pre;
		s->u.kp.post_handler = s->post ? steady_post : NULL;
		break;
	case 'r':
		s->u.rp.handler = steady_rp_ret;
		s->u.rp.entry_handler = steady_rp_entry;
		s->u.rp.data_size = sizeof(long);
		/* every thread can be this deep in main code plus two nested
		 * signal handlers; no entry may find the pool empty */
		s->u.rp.maxactive = (opt.threads + 2) * 4 * (REC_MAX + 2);
		break;
	case 'j':
		s->u.jp.entry = (void *)steady_jp_entry;
		steady_jprobe = s;
		break;
	}
}

void steady_register(void)
{
	struct kprobe *batch[32];
	int n = 0, err;

	for (int i = 0; i < nsteady; i++) {
		struct sprobe *s = &steady[i];

		s->hits = s->post_hits = s->ret_hits = s->seen_optimized = 0;
		steady_setup(s);
		if (s->kind == 'k') {
			batch[n++] = steady_kp(s);
			continue;
		}
		err = s->kind == 'r' ? register_kretprobe(&s->u.rp) : register_jprobe(&s->u.jp);
		if (err)
			anomaly(A_REG_FAIL, s->site, err);
	}
	err = register_kprobes(batch, n);
	if (err)
		anomaly(A_REG_FAIL, -1, err);
}

void steady_unregister(void)
{
	for (int i = 0; i < nsteady; i++) {
		struct sprobe *s = &steady[i];

		if (s->kind == 'k')
			unregister_kprobe(&s->u.kp);
		else if (s->kind == 'r')
			unregister_kretprobe(&s->u.rp);
		else
			unregister_jprobe(&s->u.jp);
	}
}

/* Hits that the library saw but ran no handler for (recursion from a
 * signal handler that interrupted a probe handler; documented). */
static unsigned long steady_missed(const struct sprobe *s)
{
	unsigned long m = __atomic_load_n(&s->u.kp.nmissed, __ATOMIC_RELAXED);

	if (s->kind == 'r')
		m += (unsigned long)__atomic_load_n(&s->u.rp.nmissed, __ATOMIC_RELAXED);
	return m;
}

static unsigned long s_hits_and_missed(const struct sprobe *s)
{
	return ld(&s->hits) + steady_missed(s);
}

unsigned long steady_hits_total(void)
{
	unsigned long n = 0;

	for (int i = 0; i < nsteady; i++)
		n += ld(&steady[i].hits) + ld(&steady[i].ret_hits) + ld(&steady[i].post_hits);
	return n;
}

/* Exactness of one steady probe, given what should have reached it. */
static bool steady_exact(const struct sprobe *s, unsigned long want, unsigned long hits,
			 unsigned long post, unsigned long ret, unsigned long missed)
{
	if (hits + missed != want)
		return false;
	if (s->post && post != hits)
		return false;
	if (s->kind == 'r' && (ret != hits || s->u.rp.nmissed))
		return false;
	return true;
}

int steady_verify(bool print)
{
	int bad = 0;

	if (print)
		printf("%-46s %12s %12s %8s %10s  %s\n", "steady probe", "expected", "hits",
		       "nmissed", "optimized", "");
	for (int i = 0; i < nsteady; i++) {
		const struct sprobe *s = &steady[i];
		const struct site *st = &sites[s->site];
		unsigned long want = count_done(st->func, st->metric);
		unsigned long started = count_started(st->func, st->metric);
		unsigned long missed = steady_missed(s);
		bool ok = started == want &&
			  steady_exact(s, want, s->hits, s->post_hits, s->ret_hits, missed);

		bad += !ok;
		if (s->kind == 'r' && s->u.rp.nmissed)
			anomaly(A_RP_MISSED, s->site, s->u.rp.nmissed);
		if (print)
			printf("%-12s %c %-32.32s %12lu %12lu %8lu %10lu  %s\n", st->name, s->kind,
			       s->what, want, s->hits, missed, s->seen_optimized,
			       ok ? "exact" : "MISMATCH");
		if (print && !ok)
			printf("    started %lu, post hits %lu, return hits %lu\n", started,
			       s->post_hits, s->ret_hits);
	}
	return bad;
}

/* Also: the main executable is never unloaded, so a steady probe that
 * turns GONE (when the plugin is dlclose'd) is a bug. */
void steady_sample_optimized(void)
{
	for (int i = 0; i < nsteady; i++) {
		unsigned int f = __atomic_load_n(&steady[i].u.kp.flags, __ATOMIC_RELAXED);

		if (f & KPROBE_FLAG_OPTIMIZED)
			add(&steady[i].seen_optimized, 1);
		if (f & KPROBE_FLAG_GONE)
			anomaly(A_GONE, steady[i].site, f);
	}
}

/* Each probe docs/api.md says can be optimized was seen optimized. */
int steady_check_optimized(void)
{
	int bad = 0;

	for (int i = 0; i < nsteady; i++)
		if (steady[i].must_optimize && !steady[i].seen_optimized) {
			printf("FAIL: steady probe %s was never seen optimized\n",
			       sites[steady[i].site].name);
			bad++;
		}
	return bad;
}

/* ---- in a fork child ---- */

static unsigned long local_done(const struct worker *w, const struct site *st)
{
	return w->c.done[st->func][st->metric];
}

/* The probes were inherited: every call the child makes hits them exactly
 * (no signals arrive here: timers are not inherited).  Then the child's own
 * copy of the library must still register and remove a probe. */
static unsigned long child_hits;

static int child_pre(struct kprobe *p, struct pt_regs *regs)
{
	add(&child_hits, 1);
	return 0;
}

static int child_own_probe(struct worker *w)
{
	struct kprobe kp = { .symbol_name = "ch_b", .pre_handler = child_pre };
	int err = register_kprobe(&kp);

	if (err)
		return 50;
	for (int i = 0; i < 100; i++)
		call_one(w, F_CHB, i);
	unregister_kprobe(&kp);
	call_one(w, F_CHB, 0);
	return child_hits == 100 && !kp.nmissed ? 0 : 51;
}

int steady_child_check(void)
{
	static struct worker local;	/* zero: the child's own counters */
	unsigned long snap[64], bad0 = anomalies_total();
	int rc;

	worker_bind(&local);
	for (int i = 0; i < nsteady; i++)
		snap[i] = s_hits_and_missed(&steady[i]);
	for (int i = 0; i < 300; i++)
		call_one(&local, (unsigned int)i % NFUNC, i * 7);
	for (int i = 0; i < nsteady; i++) {
		const struct sprobe *s = &steady[i];

		if (s_hits_and_missed(s) - snap[i] != local_done(&local, &sites[s->site]))
			return 10 + i;
	}
	if (anomalies_total() != bad0)
		return 40;
	rc = child_own_probe(&local);
	if (!rc && anomalies_total() != bad0)
		return 41;
	return rc;
}

/* ---- a freshly exec'd soak binary ---- */

/* The image a worker exec'd: the library starts from scratch there and
 * must probe exactly, optimized or not. */
int exec_child_main(void)
{
	static struct worker local;
	struct kprobe kp = { .symbol_name = "st_loop", .offset = 9, .pre_handler = child_pre };
	unsigned long want = 0;

	targets_init();
	worker_bind(&local);
	if (register_kprobe(&kp))
		return 60;
	for (int round = 0; round < 2; round++) {
		for (long i = 0; i < 200; i++) {
			call_one(&local, F_LOOP, i);
			want += (unsigned long)(i % (LOOP_MAX + 1));
		}
		sleep_us(10000);	/* the optimizer's turn */
	}
	unregister_kprobe(&kp);
	if (child_hits != want)
		return 61;
	return anomalies_total() ? 62 : 0;
}
