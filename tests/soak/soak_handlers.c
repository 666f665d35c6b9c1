/* Probe handlers of the soak test.  They run inside SIGTRAP handlers, in
 * detours and return trampolines, on every worker thread, possibly inside
 * the program's own signal handlers: async-signal-safe, atomics only.
 *
 * This file is compiled without vector registers so that libkprobes'
 * handler analysis can prove the light handlers leave vector state and
 * errno alone and the detours take their fast path; the heavy ones call
 * clobber_vector_and_errno() to force the slow path.  The handlers live in
 * their own section so that the signal handler can tell when a signal
 * interrupted one of them.
 */
#pragma GCC target("general-regs-only")

#include <stddef.h>
#include <stdio.h>
#include <unistd.h>

#include "soak_probes.h"

#define HANDLER __attribute__((section("soak_handlers"), noinline, used))

/* ---- anomalies ---- */

#define NDETAIL 32

static unsigned long anomaly_count[NANOMALY];
static struct { int a; long d1, d2; } detail[NDETAIL];
static unsigned long detail_next;

/* Appends v in hex to buf at *n (async-signal-safe, no stdio). */
static HANDLER void put_hex(char *buf, int *n, unsigned long v)
{
	char tmp[16];
	int k = 0;

	do
		tmp[k++] = "0123456789abcdef"[v & 15];
	while ((v >>= 4) && k < 16);
	buf[(*n)++] = ' ';
	while (k)
		buf[(*n)++] = tmp[--k];
}

/* --verbose: each anomaly as it happens, in case the process dies next. */
static HANDLER void anomaly_trace(enum anomaly a, long d1, long d2)
{
	char buf[64] = "anomaly";
	int n = 7;

	put_hex(buf, &n, (unsigned long)a);
	put_hex(buf, &n, (unsigned long)d1);
	put_hex(buf, &n, (unsigned long)d2);
	buf[n++] = '\n';
	if (write(2, buf, (size_t)n) < 0)
		return;
}

HANDLER void anomaly(enum anomaly a, long d1, long d2)
{
	unsigned long i = __atomic_fetch_add(&detail_next, 1, __ATOMIC_RELAXED);

	if (opt.verbose && i < NDETAIL)
		anomaly_trace(a, d1, d2);

	add(&anomaly_count[a], 1);
	if (i < NDETAIL) {
		detail[i].a = a;
		detail[i].d1 = d1;
		detail[i].d2 = d2;
	}
}

unsigned long anomalies_total(void)
{
	unsigned long n = 0;

	for (int i = 0; i < NANOMALY; i++)
		n += ld(&anomaly_count[i]);
	return n;
}

static const char *const anomaly_name[NANOMALY] = {
	[A_BAD_P] = "handler got a foreign probe pointer",
	[A_BAD_IP] = "regs->ip not as documented",
	[A_BAD_REGS] = "registers at the probe inconsistent",
	[A_AFTER_UNREG] = "handler ran after unregister returned",
	[A_BAD_RESULT] = "probed function returned a wrong result",
	[A_BAD_ERRNO] = "errno changed across a probed call",
	[A_BAD_RETVAL] = "return handler saw a wrong return value",
	[A_SIG_DEPTH] = "signal handler nesting broken",
	[A_REG_FAIL] = "registration failed",
	[A_API_FAIL] = "API call failed",
	[A_CHURN_UPPER] = "churn interval: more hits than calls (double hit)",
	[A_CHURN_LOWER] = "churn interval: fewer hits than calls (lost hit)",
	[A_CHILD] = "fork child check failed",
	[A_EXEC] = "exec child failed",
	[A_DL] = "dlopen/dlclose cycle check failed",
	[A_RP_MISSED] = "kretprobe ran out of instances (nmissed)",
	[A_GONE] = "probe in the main executable marked GONE",
};

void anomalies_print(void)
{
	unsigned long n = ld(&detail_next);

	for (int i = 0; i < NANOMALY; i++)
		if (ld(&anomaly_count[i]))
			printf("ANOMALY %-50s %lu\n", anomaly_name[i], ld(&anomaly_count[i]));
	for (unsigned long i = 0; i < n && i < NDETAIL; i++)
		printf("  #%lu %s: %ld (%#lx) %ld (%#lx)\n", i, anomaly_name[detail[i].a],
		       detail[i].d1, (unsigned long)detail[i].d1, detail[i].d2,
		       (unsigned long)detail[i].d2);
}

/* ---- register checks per site ---- */

static HANDLER bool entry_aligned(const struct pt_regs *regs)
{
	return (regs->sp & 15) == 8;	/* just after a call */
}

/* Is "rcx < rdi" what the flags of `cmp %rdi,%rcx` say (SF != OF)? */
static HANDLER bool less_flags(const struct pt_regs *regs)
{
	return ((regs->flags >> 7) & 1) != ((regs->flags >> 11) & 1);
}

static HANDLER bool loop_regs_ok(int site, const struct pt_regs *regs)
{
	long n = (long)regs->di, i = (long)regs->cx, ax = (long)regs->ax;

	if (n < 0 || n > LOOP_MAX)
		return false;
	if (site == S_LOOP0)	/* rcx is not set yet */
		return entry_aligned(regs);
	if (i < 0 || i > n)
		return false;
	switch (site) {
	case S_LOOP_TOP:
		return i < n && ax == loop_partial[i];
	case S_LOOP_ODD:
		return i < n && (i & 1) && (long)regs->dx == i && ax == loop_partial[i];
	case S_LOOP_EVEN:
		return i < n && (long)regs->dx == (i & 1 ? 3 * i : i) && ax == loop_partial[i];
	case S_LOOP_FLAGS:
		return i >= 1 && ax == loop_partial[i] && less_flags(regs) == (i < n);
	case S_LOOP_RET:
		return ax == loop_partial[n];
	}
	return true;
}

static HANDLER bool chmid_regs_ok(int site, const struct pt_regs *regs)
{
	long x = (long)regs->di, ax = (long)regs->ax;

	switch (site) {
	case S_CHMID0:
		return entry_aligned(regs);
	case S_CHMID3:
		return ax == x;
	case S_CHMID7:
		return ax == x + 3;
	case S_CHMID10:
		return ax == 2 * (x + 3);
	case S_CHMID14:
		return ax == ((2 * (x + 3)) ^ 1);
	}
	return true;
}

/* The registers a pre_handler sees at each site follow from the code. */
HANDLER void check_regs(int site, const struct pt_regs *regs)
{
	bool ok = true;

	switch (site) {
	case S_LEAF0: case S_FDOT0: case S_CHA0: case S_CHB0: case S_CHRET0: case S_CHJP0:
		ok = entry_aligned(regs);
		break;
	case S_LEAF_RET:
		ok = regs->ax == 2 * regs->di + 1;
		break;
	case S_LOOP0: case S_LOOP_TOP: case S_LOOP_ODD: case S_LOOP_EVEN:
	case S_LOOP_FLAGS: case S_LOOP_RET:
		ok = loop_regs_ok(site, regs);
		break;
	case S_REC0:
		ok = entry_aligned(regs) && regs->di <= REC_MAX;
		break;
	case S_VEC_MUL: case S_VEC_RIP:
		ok = regs->di && regs->si;
		break;
	case S_JP0:
		ok = entry_aligned(regs) && regs->si == regs->di + 1 && regs->r9 == regs->di + 5 &&
		     regs_get_kernel_argument((struct pt_regs *)regs, 7) == regs->di + 7;
		break;
	case S_CHMID0: case S_CHMID3: case S_CHMID7: case S_CHMID10: case S_CHMID14:
		ok = chmid_regs_ok(site, regs);
		break;
	}
	if (!ok)
		anomaly(A_BAD_REGS, site, (long)regs->ip);
}

/* pre_handler: ip is the address after the breakpoint, optimized or not. */
static HANDLER void check_pre_ip(const struct kprobe *p, const struct pt_regs *regs)
{
	if (regs->ip != (unsigned long)p->addr + 1)
		anomaly(A_BAD_IP, (long)p->addr, (long)regs->ip);
}

/* post_handler: ip is where the thread goes next, in the original code. */
static HANDLER void check_post_ip(int site, const struct pt_regs *regs)
{
	const struct site *s = &sites[site];
	unsigned long off = regs->ip - (unsigned long)s->func_addr;

	if (s->post_off[0] != ~0u && off != s->post_off[0] && off != s->post_off[1])
		anomaly(A_BAD_IP, site, (long)regs->ip);
}

/* ---- steady probes ---- */

struct sprobe *steady_jprobe;

static HANDLER struct sprobe *to_steady(struct kprobe *p)
{
	struct sprobe *s = container_of(p, struct sprobe, u.kp);

	if (s < steady || s >= steady + nsteady || s->magic != SPROBE_MAGIC) {
		anomaly(A_BAD_P, (long)p, 0);
		return NULL;
	}
	return s;
}

HANDLER int steady_pre(struct kprobe *p, struct pt_regs *regs)
{
	struct sprobe *s = to_steady(p);

	if (!s)
		return 0;
	check_pre_ip(p, regs);
	check_regs(s->site, regs);
	add(&s->hits, 1);
	if (s->clobber)
		clobber_vector_and_errno();
	return 0;
}

HANDLER void steady_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
	struct sprobe *s = to_steady(p);

	if (!s)
		return;
	check_post_ip(s->site, regs);
	add(&s->post_hits, 1);
}

/* The kretprobe on st_rec: the entry keeps n, the return checks the value. */
HANDLER int steady_rp_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct sprobe *s = to_steady(&ri->rp->kp);

	if (!s)
		return 1;
	check_pre_ip(&ri->rp->kp, regs);
	check_regs(s->site, regs);
	*(long *)ri->data = (long)regs->di;
	add(&s->hits, 1);
	return 0;
}

HANDLER int steady_rp_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct sprobe *s = to_steady(&ri->rp->kp);
	long n = *(long *)ri->data;

	if (!s)
		return 0;
	if (n < 0 || n > REC_MAX || (long)regs->ax != rec_result[n])
		anomaly(A_BAD_RETVAL, n, (long)regs->ax);
	if (regs->ip != (unsigned long)ri->ret_addr)
		anomaly(A_BAD_IP, (long)ri->ret_addr, (long)regs->ip);
	add(&s->ret_hits, 1);
	return 0;
}

/* st_jp's jprobe: the arguments, stack ones included, as the caller made
 * them (a, a+1, ..., a+7). */
HANDLER long steady_jp_entry(long a, long b, long c, long d, long e, long f, long g, long h)
{
	if (b != a + 1 || c != a + 2 || d != a + 3 || e != a + 4 || f != a + 5 ||
	    g != a + 6 || h != a + 7)
		anomaly(A_BAD_REGS, S_JP0, a);
	add(&steady_jprobe->hits, 1);
	jprobe_return();
}

/* ---- churn probes ---- */

struct cprobe *churn_jprobe_chjp, *churn_jprobe_fdot;

/* The probe must be one of ours and registered: a handler that runs once
 * unregister has returned is a bug. */
static HANDLER struct cprobe *to_churn(struct kprobe *p)
{
	struct cprobe *c = container_of(p, struct cprobe, u.kp);

	if (c < churn || c >= churn + nchurn || c->magic != CPROBE_MAGIC) {
		anomaly(A_BAD_P, (long)p, 1);
		return NULL;
	}
	if (__atomic_load_n(&c->state, __ATOMIC_ACQUIRE) == C_IDLE)
		anomaly(A_AFTER_UNREG, c->idx, c->site);
	return c;
}

HANDLER int churn_pre(struct kprobe *p, struct pt_regs *regs)
{
	struct cprobe *c = to_churn(p);

	if (!c)
		return 0;
	check_pre_ip(p, regs);
	check_regs(c->site, regs);
	add(&c->hits, 1);
	return 0;
}

HANDLER void churn_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
	struct cprobe *c = to_churn(p);

	if (!c)
		return;
	check_post_ip(c->site, regs);
	add(&c->post_hits, 1);
}

HANDLER int churn_rp_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct cprobe *c = to_churn(&ri->rp->kp);

	if (!c)
		return 1;
	check_pre_ip(&ri->rp->kp, regs);
	check_regs(c->site, regs);
	*(long *)ri->data = (long)regs->di;
	add(&c->hits, 1);
	return 0;
}

static HANDLER bool churn_retval_ok(int site, long arg, long ax)
{
	switch (site) {
	case S_REC0:
		return arg >= 0 && arg <= REC_MAX && ax == rec_result[arg];
	case S_LOOP0:
		return arg >= 0 && arg <= LOOP_MAX && ax == loop_partial[arg];
	case S_CHRET0:
		return ax == arg + 7;
	}
	return true;
}

HANDLER int churn_rp_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct cprobe *c = to_churn(&ri->rp->kp);

	if (!c)
		return 0;
	if (!churn_retval_ok(c->site, *(long *)ri->data, (long)regs->ax))
		anomaly(A_BAD_RETVAL, c->site, (long)regs->ax);
	add(&c->ret_hits, 1);
	return 0;
}

HANDLER long churn_jp_chjp(long a, long b, long c)
{
	struct cprobe *cp = churn_jprobe_chjp;

	if (__atomic_load_n(&cp->state, __ATOMIC_ACQUIRE) == C_IDLE)
		anomaly(A_AFTER_UNREG, cp->idx, cp->site);
	if (b != a + 1 || c != a + 2)
		anomaly(A_BAD_REGS, S_CHJP0, a);
	add(&cp->hits, 1);
	jprobe_return();
}
