/* Probes and threads: exact counts under concurrency, churn of
 * register/unregister/enable/disable while threads run through the probed
 * code, unregister waiting for running handlers, fork(), and threads that
 * block every signal. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "os/linux/threads.h"

TestSuite(threads, .timeout = 10);

/*   kpt_th_chain(x) = kpt_th_leaf(x) + 1 = 2x + 2
 *   +0  push %rbx         (1)
 *   +1  mov %rdi,%rbx     (3)
 *   +4  call kpt_th_leaf  (5)
 *   +9  add $1,%rax       (4)
 *   +13 pop %rbx          (1)
 *   +14 ret
 *   kpt_th_leaf+0  lea 1(%rdi,%rdi,1),%rax (5), +5 ret
 */
__asm__(".text\n"
	".globl kpt_th_chain\n.type kpt_th_chain,@function\n"
	"kpt_th_chain:\n"
	"\tpush %rbx\n"
	"\tmov %rdi, %rbx\n"
	"\tcall kpt_th_leaf\n"
	"\tadd $1, %rax\n"
	"\tpop %rbx\n"
	"\tret\n"
	".size kpt_th_chain, .-kpt_th_chain\n"
	".globl kpt_th_leaf\n.type kpt_th_leaf,@function\n"
	"kpt_th_leaf:\n"
	"\tlea 1(%rdi,%rdi,1), %rax\n"
	"\tret\n"
	".size kpt_th_leaf, .-kpt_th_leaf\n");

long kpt_th_chain(long x);
long kpt_th_leaf(long x);

#define CHAIN_SITES 5
static const unsigned int chain_offs[CHAIN_SITES] = { 0, 1, 4, 9, 14 };

long kpt_th_fn(long x);
TEST_FN long kpt_th_fn(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 7 + 3;
}

long kpt_th_a(long x);
TEST_FN long kpt_th_a(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 11;
}

long kpt_th_b(long x);
TEST_FN long kpt_th_b(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 22;
}

long kpt_th_c(long x);
TEST_FN long kpt_th_c(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 33;
}

long kpt_th_slow(long x);
TEST_FN long kpt_th_slow(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x - 1;
}

static long (*volatile call_chain)(long) = kpt_th_chain;
static long (*volatile call_fn)(long) = kpt_th_fn;
static long (*volatile call_a)(long) = kpt_th_a;
static long (*volatile call_b)(long) = kpt_th_b;
static long (*volatile call_c)(long) = kpt_th_c;
static long (*volatile call_slow)(long) = kpt_th_slow;

struct cprobe {
	struct kprobe kp;
	long pre, post;
};

#define CP(p) ((struct cprobe *)(p))

static int count_pre(struct kprobe *p, struct pt_regs *regs)
{
	__atomic_fetch_add(&CP(p)->pre, 1, __ATOMIC_RELAXED);
	return 0;
}

static void count_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
	__atomic_fetch_add(&CP(p)->post, 1, __ATOMIC_RELAXED);
}

static void cp_init(struct cprobe *c, void *addr, bool pre, bool post)
{
	memset(c, 0, sizeof(*c));
	c->kp.addr = addr;
	c->kp.pre_handler = pre ? count_pre : NULL;
	c->kp.post_handler = post ? count_post : NULL;
}

static long load(const long *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts))
		;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- exact counts ---- */

#define NTHREADS 8
#define NHITS 5000

static long bad_results;

static void *hammer_fn(void *arg)
{
	long base = (long)(intptr_t)arg * 1000000;

	for (long i = 0; i < NHITS; i++)
		if (call_fn(base + i) != (base + i) * 7 + 3)
			__atomic_fetch_add(&bad_results, 1, __ATOMIC_RELAXED);
	return NULL;
}

Test(threads, one_probe_exact_total)
{
	struct cprobe c;
	pthread_t t[NTHREADS];

	cp_init(&c, (void *)kpt_th_fn, true, true);
	cr_assert_eq(register_kprobe(&c.kp), 0);
	for (long i = 0; i < NTHREADS; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, hammer_fn, (void *)(intptr_t)i), 0);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	cr_expect_eq(bad_results, 0);
	cr_expect_eq(c.pre, (long)NTHREADS * NHITS);
	cr_expect_eq(c.post, (long)NTHREADS * NHITS);
	cr_expect_eq(c.kp.nmissed, 0);
	unregister_kprobe(&c.kp);
}

static void *hammer_all(void *arg)
{
	long base = (long)(intptr_t)arg * 1000000;

	for (long i = 0; i < NHITS / 2; i++) {
		long x = base + i;
		long bad = (call_a(x) != x + 11) + (call_b(x) != x + 22) +
			   (call_c(x) != x + 33) + (call_chain(x) != 2 * x + 2);

		if (bad)
			__atomic_fetch_add(&bad_results, bad, __ATOMIC_RELAXED);
	}
	return NULL;
}

Test(threads, several_probes_exact_totals)
{
	struct cprobe a, a2, b, c, sites[CHAIN_SITES];
	pthread_t t[NTHREADS];
	const long n = (long)NTHREADS * (NHITS / 2);

	cp_init(&a, (void *)kpt_th_a, true, false);
	cp_init(&a2, (void *)kpt_th_a, true, true);	/* aggregate */
	cp_init(&b, (void *)kpt_th_b, true, true);
	cp_init(&c, (void *)kpt_th_c, false, true);
	cr_assert_eq(register_kprobe(&a.kp), 0);
	cr_assert_eq(register_kprobe(&a2.kp), 0);
	cr_assert_eq(register_kprobe(&b.kp), 0);
	cr_assert_eq(register_kprobe(&c.kp), 0);
	for (int i = 0; i < CHAIN_SITES; i++) {
		cp_init(&sites[i], (char *)kpt_th_chain + chain_offs[i], true, i % 2 == 0);
		cr_assert_eq(register_kprobe(&sites[i].kp), 0, "chain+%u", chain_offs[i]);
	}
	for (long i = 0; i < NTHREADS; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, hammer_all, (void *)(intptr_t)i), 0);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	cr_expect_eq(bad_results, 0);
	cr_expect_eq(a.pre, n);
	cr_expect_eq(a2.pre, n);
	cr_expect_eq(a2.post, n);
	cr_expect_eq(b.pre, n);
	cr_expect_eq(b.post, n);
	cr_expect_eq(c.post, n);
	for (int i = 0; i < CHAIN_SITES; i++) {
		cr_expect_eq(sites[i].pre, n, "chain+%u", chain_offs[i]);
		cr_expect_eq(sites[i].post, i % 2 == 0 ? n : 0, "chain+%u", chain_offs[i]);
		cr_expect_eq(sites[i].kp.nmissed, 0);
	}
	unregister_kprobe(&a.kp);
	unregister_kprobe(&a2.kp);
	unregister_kprobe(&b.kp);
	unregister_kprobe(&c.kp);
	for (int i = 0; i < CHAIN_SITES; i++)
		unregister_kprobe(&sites[i].kp);
}

/* ---- churn ---- */

static volatile int stop_workers;
static long worker_calls;

static void *churn_worker(void *arg)
{
	long x = (long)(intptr_t)arg * 1000003, calls = 0;

	while (!__atomic_load_n(&stop_workers, __ATOMIC_RELAXED)) {
		long bad = (call_chain(x) != 2 * x + 2) + (call_fn(x) != x * 7 + 3) +
			   (call_a(x) != x + 11);

		if (bad)
			__atomic_fetch_add(&bad_results, bad, __ATOMIC_RELAXED);
		x++;
		calls++;
	}
	__atomic_fetch_add(&worker_calls, calls, __ATOMIC_RELAXED);
	return NULL;
}

static long total_hits(struct cprobe *ps, int n)
{
	long s = 0;

	for (int i = 0; i < n; i++)
		s += load(&ps[i].pre) + load(&ps[i].post);
	return s;
}

Test(threads, churn_register_unregister_enable_disable)
{
	enum { NW = 4, NP = CHAIN_SITES + 3 };
	struct cprobe ps[NP], extra;
	struct kprobe *batch[NP];
	void *addrs[NP];
	pthread_t t[NW];
	double deadline = now_s() + 3.0;
	int iters = 0;
	long after;

	for (int i = 0; i < CHAIN_SITES; i++)
		addrs[i] = (char *)kpt_th_chain + chain_offs[i];
	addrs[CHAIN_SITES] = (void *)kpt_th_leaf;
	addrs[CHAIN_SITES + 1] = (void *)kpt_th_fn;
	addrs[CHAIN_SITES + 2] = (void *)kpt_th_a;
	for (int i = 0; i < NP; i++) {
		cp_init(&ps[i], addrs[i], true, i % 2);
		batch[i] = &ps[i].kp;
	}
	cp_init(&extra, (void *)kpt_th_fn, true, true);
	for (long i = 0; i < NW; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, churn_worker, (void *)(intptr_t)i), 0);

	/* About 3 s, longer on a loaded machine until 200 iterations are
	 * done (at most 7 s, within the suite's timeout). */
	for (iters = 0; iters < 4000 && (now_s() < deadline || iters <= 200) &&
	     now_s() < deadline + 4.0; iters++) {
		int k = iters % NP;
		int err;

		switch (iters % 5) {
		case 0:	/* one probe on, off */
			ps[k].kp.addr = addrs[k];
			ps[k].kp.flags = 0;
			err = register_kprobe(&ps[k].kp);
			cr_assert_eq(err, 0, "iteration %d: register: %d", iters, err);
			unregister_kprobe(&ps[k].kp);
			break;
		case 1:	/* the whole batch, with disable/enable in between */
			for (int i = 0; i < NP; i++) {
				ps[i].kp.addr = addrs[i];
				ps[i].kp.flags = 0;
			}
			err = register_kprobes(batch, NP);
			cr_assert_eq(err, 0, "iteration %d: register_kprobes: %d", iters, err);
			cr_assert_eq(disable_kprobe(&ps[k].kp), 0);
			cr_assert_eq(disable_kprobe(&ps[(k + 1) % NP].kp), 0);
			cr_assert_eq(enable_kprobe(&ps[k].kp), 0);
			unregister_kprobes(batch, NP);
			break;
		case 2:	/* an aggregate forms and dissolves */
			ps[6].kp.addr = addrs[6];
			ps[6].kp.flags = 0;
			extra.kp.addr = (void *)kpt_th_fn;
			extra.kp.flags = 0;
			cr_assert_eq(register_kprobe(&ps[6].kp), 0);
			cr_assert_eq(register_kprobe(&extra.kp), 0);
			if (iters & 1) {
				unregister_kprobe(&ps[6].kp);
				unregister_kprobe(&extra.kp);
			} else {
				unregister_kprobe(&extra.kp);
				unregister_kprobe(&ps[6].kp);
			}
			break;
		case 3:	/* the knob flips under armed probes */
			ps[k].kp.addr = addrs[k];
			ps[k].kp.flags = 0;
			cr_assert_eq(register_kprobe(&ps[k].kp), 0);
			kprobes_set_enabled(false);
			kprobes_set_enabled(true);
			cr_assert_eq(disable_kprobe(&ps[k].kp), 0);
			cr_assert_eq(enable_kprobe(&ps[k].kp), 0);
			unregister_kprobe(&ps[k].kp);
			break;
		case 4:	/* stays registered across an iteration of others */
			ps[2].kp.addr = addrs[2];
			ps[2].kp.flags = 0;
			cr_assert_eq(register_kprobe(&ps[2].kp), 0);
			ps[3].kp.addr = addrs[3];
			ps[3].kp.flags = 0;
			cr_assert_eq(register_kprobe(&ps[3].kp), 0);
			unregister_kprobe(&ps[2].kp);
			unregister_kprobe(&ps[3].kp);
			break;
		}
	}
	/* everything is unregistered now: the counts must freeze */
	after = total_hits(ps, NP) + load(&extra.pre) + load(&extra.post);
	sleep_ms(50);
	cr_expect_eq(total_hits(ps, NP) + load(&extra.pre) + load(&extra.post), after,
		     "handlers ran after their probes were unregistered");
	__atomic_store_n(&stop_workers, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < NW; i++)
		pthread_join(t[i], NULL);
	cr_expect_eq(bad_results, 0, "probed functions returned wrong results");
	cr_expect_gt(after, 0, "no probe was ever hit in %d iterations", iters);
	cr_expect_gt(iters, 200, "only %d iterations", iters);
	cr_expect_gt(worker_calls, 1000);
	for (int i = 0; i < NP; i++)
		cr_expect_eq(enable_kprobe(&ps[i].kp), -EINVAL);
	cr_expect_eq(call_chain(5), 12);
}

/* ---- unregister waits for running handlers ---- */

static int slow_state;	/* 0 idle, 1 in the handler, 2 handler finished */

static int slow_pre(struct kprobe *p, struct pt_regs *regs)
{
	struct timespec ts = { 0, 100 * 1000000L };

	__atomic_store_n(&slow_state, 1, __ATOMIC_SEQ_CST);
	count_pre(p, regs);
	nanosleep(&ts, NULL);
	__atomic_store_n(&slow_state, 2, __ATOMIC_SEQ_CST);
	return 0;
}

static void slow_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
	struct timespec ts = { 0, 100 * 1000000L };

	__atomic_store_n(&slow_state, 1, __ATOMIC_SEQ_CST);
	count_post(p, regs, flags);
	nanosleep(&ts, NULL);
	__atomic_store_n(&slow_state, 2, __ATOMIC_SEQ_CST);
}

static long slow_result;

static void *call_slow_once(void *arg)
{
	slow_result = call_slow(100);
	return NULL;
}

static void unregister_during_handler(bool in_post)
{
	struct cprobe c;
	pthread_t t;

	cp_init(&c, (void *)kpt_th_slow, false, false);
	if (in_post)
		c.kp.post_handler = slow_post;
	else
		c.kp.pre_handler = slow_pre;
	cr_assert_eq(register_kprobe(&c.kp), 0);
	cr_assert_eq(pthread_create(&t, NULL, call_slow_once, NULL), 0);
	while (__atomic_load_n(&slow_state, __ATOMIC_SEQ_CST) == 0)
		sched_yield();
	cr_assert_eq(__atomic_load_n(&slow_state, __ATOMIC_SEQ_CST), 1);
	unregister_kprobe(&c.kp);
	cr_expect_eq(__atomic_load_n(&slow_state, __ATOMIC_SEQ_CST), 2,
		     "unregister_kprobe returned while a handler was running");
	pthread_join(t, NULL);
	cr_expect_eq(slow_result, 99);
	cr_expect_eq(call_slow(5), 4);
	cr_expect_eq(in_post ? c.post : c.pre, 1);
}

Test(threads, unregister_waits_for_pre_handler)
{
	unregister_during_handler(false);
}

Test(threads, unregister_waits_for_post_handler)
{
	unregister_during_handler(true);
}

/* Many threads in and out of a slow handler while it is unregistered. */
static long active, entered;

static int busy_pre(struct kprobe *p, struct pt_regs *regs)
{
	struct timespec ts = { 0, 2 * 1000000L };

	__atomic_fetch_add(&active, 1, __ATOMIC_SEQ_CST);
	__atomic_fetch_add(&entered, 1, __ATOMIC_SEQ_CST);
	nanosleep(&ts, NULL);
	__atomic_fetch_sub(&active, 1, __ATOMIC_SEQ_CST);
	return 0;
}

static void *slow_caller(void *arg)
{
	long x = 0;

	while (!__atomic_load_n(&stop_workers, __ATOMIC_RELAXED)) {
		if (call_slow(x) != x - 1)
			__atomic_fetch_add(&bad_results, 1, __ATOMIC_RELAXED);
		x++;
	}
	return NULL;
}

Test(threads, no_handler_runs_after_unregister)
{
	enum { NW = 6 };
	struct kprobe p;
	pthread_t t[NW];

	memset(&p, 0, sizeof(p));
	p.addr = (void *)kpt_th_slow;
	p.pre_handler = busy_pre;
	cr_assert_eq(register_kprobe(&p), 0);
	for (int i = 0; i < NW; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, slow_caller, NULL), 0);
	while (__atomic_load_n(&entered, __ATOMIC_SEQ_CST) < 3 * NW)
		sched_yield();
	unregister_kprobe(&p);
	long a = __atomic_load_n(&active, __ATOMIC_SEQ_CST);
	long e = __atomic_load_n(&entered, __ATOMIC_SEQ_CST);

	sleep_ms(30);
	cr_expect_eq(a, 0, "%ld handlers still running after unregister_kprobe", a);
	cr_expect_eq(__atomic_load_n(&entered, __ATOMIC_SEQ_CST), e,
		     "a handler started after unregister_kprobe returned");
	__atomic_store_n(&stop_workers, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < NW; i++)
		pthread_join(t[i], NULL);
	cr_expect_eq(bad_results, 0);
}

/* ---- fork ---- */

Test(threads, fork_child_runs_probed_code)
{
	struct cprobe c, d;
	int status;
	pid_t pid;

	cp_init(&c, (void *)kpt_th_fn, true, true);
	cp_init(&d, (char *)kpt_th_chain + 4, true, true);	/* the call */
	cr_assert_eq(register_kprobe(&c.kp), 0);
	cr_assert_eq(register_kprobe(&d.kp), 0);
	cr_assert_eq(call_fn(1), 10);
	cr_assert_eq(c.pre, 1);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int rc = 0;

		for (long i = 0; i < 100; i++)
			if (call_fn(i) != i * 7 + 3 || call_chain(i) != 2 * i + 2)
				rc = 10;
		if (!rc && (c.pre != 101 || c.post != 101))
			rc = 11;
		if (!rc && (d.pre != 100 || d.post != 100))
			rc = 12;
		/* the child can manage its copies of the probes */
		unregister_kprobe(&c.kp);
		if (!rc && call_fn(2) != 17)
			rc = 13;
		if (!rc && c.pre != 101)
			rc = 14;
		if (!rc && register_kprobe(&c.kp) != 0)
			rc = 15;
		if (!rc && (call_fn(2) != 17 || c.pre != 102))
			rc = 16;
		_exit(rc);
	}
	for (long i = 0; i < 50; i++)
		cr_assert_eq(call_fn(i), i * 7 + 3);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status), "child killed by signal %d", WTERMSIG(status));
	cr_expect_eq(WEXITSTATUS(status), 0, "child check %d failed", WEXITSTATUS(status));
	/* the parent's probe is untouched by the child's */
	cr_expect_eq(c.pre, 51);
	cr_expect_eq(call_fn(1), 10);
	cr_expect_eq(c.pre, 52);
	unregister_kprobe(&c.kp);
	unregister_kprobe(&d.kp);
}

Test(threads, fork_while_other_threads_hit)
{
	enum { NW = 4 };
	struct cprobe c;
	pthread_t t[NW];

	cp_init(&c, (void *)kpt_th_fn, true, false);
	cr_assert_eq(register_kprobe(&c.kp), 0);
	for (int i = 0; i < NW; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, churn_worker, (void *)(intptr_t)i), 0);
	for (int k = 0; k < 20; k++) {
		int status;
		pid_t pid = fork();

		cr_assert_geq(pid, 0);
		if (pid == 0) {
			long before = c.pre;

			for (long i = 0; i < 50; i++)
				if (call_fn(i) != i * 7 + 3)
					_exit(10);
			if (c.pre != before + 50)
				_exit(11);
			unregister_kprobe(&c.kp);
			if (call_fn(3) != 24 || c.pre != before + 50)
				_exit(12);
			_exit(0);
		}
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		cr_assert(WIFEXITED(status), "child %d killed by signal %d", k, WTERMSIG(status));
		cr_assert_eq(WEXITSTATUS(status), 0, "child %d: check %d failed", k,
			     WEXITSTATUS(status));
	}
	__atomic_store_n(&stop_workers, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < NW; i++)
		pthread_join(t[i], NULL);
	cr_expect_eq(bad_results, 0);
	cr_expect_gt(c.pre, 0);
	unregister_kprobe(&c.kp);
}

/* ---- threads that block every signal ---- */

static long masked_result;
static int masked_usr1_blocked;

static void *all_blocked(void *arg)
{
	sigset_t all, cur;

	sigfillset(&all);
	if (pthread_sigmask(SIG_BLOCK, &all, NULL))
		return NULL;
	pthread_sigmask(SIG_SETMASK, NULL, &cur);
	masked_usr1_blocked = sigismember(&cur, SIGUSR1) && sigismember(&cur, SIGSEGV);
	masked_result = 0;
	for (long i = 0; i < 10; i++)
		masked_result += call_fn(i);
	return NULL;
}

static void *all_blocked_sigprocmask(void *arg)
{
	sigset_t all;

	sigfillset(&all);
	if (sigprocmask(SIG_SETMASK, &all, NULL))
		return NULL;
	masked_result = 0;
	for (long i = 0; i < 10; i++)
		masked_result += call_fn(i);
	return NULL;
}

static void *all_blocked_from_start(void *arg)
{
	sigset_t cur;

	pthread_sigmask(SIG_SETMASK, NULL, &cur);
	masked_usr1_blocked = sigismember(&cur, SIGUSR1);
	masked_result = 0;
	for (long i = 0; i < 10; i++)
		masked_result += call_fn(i);
	return NULL;
}

static void run_masked(void *(*fn)(void *), pthread_attr_t *attr)
{
	struct cprobe c;
	pthread_t t;
	long want = 0;

	for (long i = 0; i < 10; i++)
		want += i * 7 + 3;
	cp_init(&c, (void *)kpt_th_fn, true, true);
	cr_assert_eq(register_kprobe(&c.kp), 0);
	cr_assert_eq(pthread_create(&t, attr, fn, NULL), 0);
	pthread_join(t, NULL);
	cr_expect_eq(masked_result, want);
	cr_expect_eq(c.pre, 10);
	cr_expect_eq(c.post, 10);
	unregister_kprobe(&c.kp);
}

Test(threads, thread_with_all_signals_blocked)
{
	run_masked(all_blocked, NULL);
	cr_expect(masked_usr1_blocked, "pthread_sigmask did not block the other signals");
}

Test(threads, thread_with_all_signals_blocked_sigprocmask)
{
	run_masked(all_blocked_sigprocmask, NULL);
}

Test(threads, thread_created_with_full_sigmask)
{
	pthread_attr_t attr;
	sigset_t all;

	sigfillset(&all);
	cr_assert_eq(pthread_attr_init(&attr), 0);
	cr_assert_eq(pthread_attr_setsigmask_np(&attr, &all), 0);
	run_masked(all_blocked_from_start, &attr);
	cr_expect(masked_usr1_blocked, "the attribute's mask was not applied");
	pthread_attr_destroy(&attr);
}

Test(threads, main_thread_with_all_signals_blocked)
{
	struct cprobe c;
	sigset_t all;

	sigfillset(&all);
	cp_init(&c, (void *)kpt_th_fn, true, true);
	cr_assert_eq(register_kprobe(&c.kp), 0);
	cr_assert_eq(sigprocmask(SIG_BLOCK, &all, NULL), 0);
	cr_expect_eq(call_fn(2), 17);
	cr_assert_eq(pthread_sigmask(SIG_SETMASK, &all, NULL), 0);
	cr_expect_eq(call_fn(3), 24);
	cr_expect_eq(c.pre, 2);
	cr_expect_eq(c.post, 2);
	unregister_kprobe(&c.kp);
}

/* A running thread that blocks the census signal cannot say where it is:
 * it counts as inside any range, but a census over no range at all asks
 * nobody and succeeds (an optimizer batch emptied by unloaded objects once
 * waited on such a census forever). */
static volatile int census_blocker_stop, census_blocker_ready;

static void *census_blocker(void *arg)
{
	sigset_t s;

	sigemptyset(&s);
	sigaddset(&s, kp_census_signal());
	/* the raw call: libkprobes keeps the census signal out of the masks
	 * a program sets through libc */
	syscall(SYS_rt_sigprocmask, SIG_BLOCK, &s, NULL, sizeof(unsigned long));
	census_blocker_ready = 1;
	while (!census_blocker_stop)
		__asm__ volatile("pause");
	return NULL;
}

Test(threads, census_over_no_range_asks_nobody)
{
	static const uintptr_t everything[1][2] = { { 0, UINTPTR_MAX } };
	pthread_t t;

	cr_assert_neq(kp_census_signal(), 0);
	cr_assert_eq(pthread_create(&t, NULL, census_blocker, NULL), 0);
	while (!census_blocker_ready)
		sched_yield();
	cr_expect_not(kp_threads_outside(everything, 1),
		      "a running thread blocking the census was taken to be outside");
	cr_expect(kp_threads_outside(NULL, 0), "a census over no range failed");
	census_blocker_stop = 1;
	pthread_join(t, NULL);
}

/* Grace periods and the return-probe caches rely on membarrier in a fork
 * child too: the registration is the process's memory map's, which the
 * child's copy keeps. */
Test(threads, membarrier_registration_survives_fork)
{
	struct cprobe c;
	int status;
	pid_t pid;

	cp_init(&c, (void *)kpt_th_fn, true, false);
	cr_assert_eq(register_kprobe(&c.kp), 0);	/* libkprobes is set up */
	if (!kp_membarrier_ok)
		cr_skip_test("no membarrier on this kernel");
	cr_assert(kp_membarrier_all());
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(kp_membarrier_all() ? 0 : 1);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status));
	cr_expect_eq(WEXITSTATUS(status), 0, "membarrier failed in the fork child");
	unregister_kprobe(&c.kp);
}
