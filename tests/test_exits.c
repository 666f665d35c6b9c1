/* kprobes_exit_sites(): the sites of functions of known layout
 * (helpers/exits_asm.S) and every error; kprobes on the sites of a
 * compiled recursive function count exactly its returns, as a return
 * probe does, jump-optimized, also with threads; a tail call's return at
 * its jump. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "testutil.h"

TestSuite(exits, .timeout = 30);

long ex_straight(long x);
long ex_two(long x);
long ex_tail(long x);
long ex_after_call(long x);
long ex_cond_out(long x);
long ex_indirect(long x, void *to);
long ex_short(long x);
void ex_forever(void);
long ex_shared(void);
long ex_hot(long x);
extern char ex_two_site0[], ex_two_site1[], ex_tail_site0[], ex_tail_site1[];
extern char ex_after_call_site0[], ex_short_site0[], ex_short_site1[];

#define A(f) ((unsigned long)(uintptr_t)(f))

static int sites_of(void *fn, unsigned long *v, int max, unsigned int flags)
{
	return kprobes_exit_sites(A(fn), v, max, flags);
}

Test(exits, straight_function_has_its_entry_as_site)
{
	unsigned long v[4];

	cr_assert_eq(sites_of(ex_straight, v, 4, 0), 1);
	cr_assert_eq(v[0], A(ex_straight));
	cr_assert_eq(sites_of(ex_straight, v, 4, KPROBES_EXITS_JUMP), 1);
}

Test(exits, each_return_at_its_run_start)
{
	unsigned long v[4];

	cr_assert_eq(sites_of(ex_two, v, 4, KPROBES_EXITS_JUMP), 2);
	cr_assert_eq(v[0], A(ex_two_site0));
	cr_assert_eq(v[1], A(ex_two_site1));
}

Test(exits, tail_call_is_an_exit)
{
	unsigned long v[4];

	cr_assert_eq(sites_of(ex_tail, v, 4, KPROBES_EXITS_JUMP), 2);
	cr_assert_eq(v[0], A(ex_tail_site0));
	cr_assert_eq(v[1], A(ex_tail_site1));
	/* refused when only returns are wanted; a function without one is not */
	cr_assert_eq(sites_of(ex_tail, v, 4, KPROBES_EXITS_RETURNS), -EOPNOTSUPP);
	cr_assert_eq(sites_of(ex_two, v, 4, KPROBES_EXITS_JUMP | KPROBES_EXITS_RETURNS), 2);
}

Test(exits, run_starts_after_the_last_call)
{
	unsigned long v[4];

	cr_assert_eq(sites_of(ex_after_call, v, 4, 0), 1);
	cr_assert_eq(v[0], A(ex_after_call_site0));
}

Test(exits, refused_ways_out)
{
	unsigned long v[4];

	cr_assert_eq(sites_of(ex_cond_out, v, 4, 0), -EOPNOTSUPP);
	cr_assert_eq(sites_of(ex_indirect, v, 4, 0), -EOPNOTSUPP);
}

/* Code that reaches a function's exit without entering it: a tail shared
 * with another function, a moved-away part that comes back. */
Test(exits, refused_when_entered_from_elsewhere)
{
	unsigned long v[4];

	cr_assert_eq(sites_of(ex_shared, v, 4, 0), -EOPNOTSUPP);
	cr_assert_eq(sites_of(ex_hot, v, 4, 0), -EOPNOTSUPP);
}

Test(exits, short_run_needs_the_flag_to_be_refused)
{
	unsigned long v[4];

	cr_assert_eq(sites_of(ex_short, v, 4, 0), 2);
	cr_assert_eq(v[0], A(ex_short_site0));
	cr_assert_eq(v[1], A(ex_short_site1));
	/* a one-byte run followed by another run cannot take a jump */
	cr_assert_eq(sites_of(ex_short, v, 4, KPROBES_EXITS_JUMP), -EOPNOTSUPP);
}

Test(exits, function_that_never_returns_has_none)
{
	unsigned long v[4];

	cr_assert_eq(sites_of(ex_forever, v, 4, 0), 0);
}

Test(exits, errors)
{
	static const int data[4] = { 1, 2, 3, 4 };
	unsigned long v[4];

	cr_assert_eq(sites_of(ex_two, v, 1, 0), -E2BIG);
	cr_assert_eq(sites_of(ex_two, v, 0, 0), -E2BIG);
	cr_assert_eq(kprobes_exit_sites(A(ex_two) + 1, v, 4, 0), -EINVAL);
	cr_assert_eq(kprobes_exit_sites(0, v, 4, 0), -EINVAL);
	cr_assert_eq(kprobes_exit_sites(A(ex_two), NULL, 4, 0), -EINVAL);
	cr_assert_eq(kprobes_exit_sites(A(ex_two), v, -1, 0), -EINVAL);
	cr_assert_eq(kprobes_exit_sites(A(ex_two), v, 4, 4), -EINVAL);
	cr_assert_eq(kprobes_exit_sites(A(data), v, 4, 0), -ENOENT);
}

/* ---- counting returns at the sites ---- */

/* (The compiler may turn one of the calls into a loop: the calls are
 * counted by a probe on the entry.) */
__attribute__((noinline)) long ex_fib(long n);
__attribute__((noinline)) long ex_fib(long n)
{
	return n < 2 ? n : ex_fib(n - 1) + ex_fib(n - 2);
}

static long entries_seen, exits_seen, returns_seen;

static int entry_hit(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	(void)regs;
	__atomic_fetch_add(&entries_seen, 1, __ATOMIC_RELAXED);
	return 0;
}

static int exit_hit(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	(void)regs;
	__atomic_fetch_add(&exits_seen, 1, __ATOMIC_RELAXED);
	return 0;
}

static int return_hit(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	(void)regs;
	__atomic_fetch_add(&returns_seen, 1, __ATOMIC_RELAXED);
	return 0;
}

#define MAX_SITES 16

/* kps[0] on the entry, kps[1..n] on the n sites; n. */
static int probe_sites(void *fn, struct kprobe *kps, struct kprobe **ptrs)
{
	unsigned long v[MAX_SITES];
	int n = sites_of(fn, v, MAX_SITES - 1, KPROBES_EXITS_JUMP);

	if (n <= 0)
		return n;
	kps[0] = (struct kprobe){ .addr = (kprobe_opcode_t *)fn, .pre_handler = entry_hit };
	ptrs[0] = &kps[0];
	for (int i = 1; i <= n; i++) {
		kps[i] = (struct kprobe){ .addr = (kprobe_opcode_t *)v[i - 1],
					  .pre_handler = exit_hit };
		ptrs[i] = &kps[i];
	}
	cr_assert_eq(register_kprobes(ptrs, n + 1), 0);
	kprobes_optimize_now();
	for (int i = 0; i <= n; i++)
		cr_assert(kps[i].flags & KPROBE_FLAG_OPTIMIZED, "site %d not optimized", i);
	return n;
}

Test(exits, sites_count_what_a_return_probe_counts)
{
	struct kprobe kps[MAX_SITES], *ptrs[MAX_SITES];
	struct kretprobe rp = { .kp.addr = (kprobe_opcode_t *)ex_fib, .handler = return_hit,
				.maxactive = 64 };
	int n = probe_sites(ex_fib, kps, ptrs);

	if (n == -EOPNOTSUPP)
		cr_skip_test("the compiler's ex_fib has an exit no site stands for");
	cr_assert_gt(n, 0);
	cr_assert_eq(register_kretprobe(&rp), 0);
	for (int i = 0; i < 20; i++)
		cr_assert_eq(ex_fib(15), 610);
	cr_assert_gt(entries_seen, 20 * 15);
	cr_assert_eq(exits_seen, entries_seen);
	cr_assert_eq(returns_seen, entries_seen);
	cr_assert_eq(rp.nmissed, 0);
	unregister_kretprobe(&rp);
	unregister_kprobes(ptrs, n + 1);
}

static void *fib_thread(void *arg)
{
	(void)arg;
	for (int i = 0; i < 50; i++)
		ex_fib(12);
	return NULL;
}

Test(exits, sites_count_exactly_with_threads)
{
	struct kprobe kps[MAX_SITES], *ptrs[MAX_SITES];
	pthread_t t[4];
	int n = probe_sites(ex_fib, kps, ptrs);

	if (n == -EOPNOTSUPP)
		cr_skip_test("the compiler's ex_fib has an exit no site stands for");
	cr_assert_gt(n, 0);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, fib_thread, NULL), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	cr_assert_gt(entries_seen, 4 * 50 * 12);
	cr_assert_eq(exits_seen, entries_seen);
	unregister_kprobes(ptrs, n + 1);
}

Test(exits, tail_call_counted_at_its_jump)
{
	struct kprobe kps[MAX_SITES], *ptrs[MAX_SITES];
	int n = probe_sites(ex_tail, kps, ptrs);

	cr_assert_eq(n, 2);
	cr_assert_eq(ex_tail(0), 7);
	cr_assert_eq(ex_tail(5), 7);
	cr_assert_eq(ex_tail(9), 11);
	cr_assert_eq(entries_seen, 3);
	cr_assert_eq(exits_seen, 3);
	unregister_kprobes(ptrs, n + 1);
}

/* ---- an entry and an exit site at one address: two light kprobes ----
 * ex_straight's only site is its entry: both handlers run at every hit;
 * a third probe coming and going meanwhile (a handler that reads
 * pt_regs) never costs either a hit. */

static long pair_a, pair_b, third_hits;
static volatile bool pair_stop;

static int pair_a_hit(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	(void)regs;
	__atomic_fetch_add(&pair_a, 1, __ATOMIC_RELAXED);
	return 0;
}

static int pair_b_hit(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	(void)regs;
	__atomic_fetch_add(&pair_b, 1, __ATOMIC_RELAXED);
	return 0;
}

static int third_hit(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	if (regs_return_value(regs) != 0x5a5a5a5a)
		__atomic_fetch_add(&third_hits, 1, __ATOMIC_RELAXED);
	return 0;
}

#define PAIR_CALLS 400000

static void *pair_caller(void *arg)
{
	long sum = 0;

	(void)arg;
	for (long i = 0; i < PAIR_CALLS; i++)
		sum += ex_straight(i);
	return (void *)sum;
}

Test(exits, entry_and_exit_at_one_address_both_counted)
{
	struct kprobe a = { .addr = (kprobe_opcode_t *)ex_straight, .pre_handler = pair_a_hit };
	struct kprobe b = { .addr = (kprobe_opcode_t *)ex_straight, .pre_handler = pair_b_hit };
	struct kprobe *both[2] = { &a, &b };
	pthread_t t[2];
	void *sum;

	cr_assert_eq(register_kprobes(both, 2), 0);
	kprobes_optimize_now();
	cr_assert(a.flags & KPROBE_FLAG_OPTIMIZED);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, pair_caller, NULL), 0);
	for (int round = 0; round < 100; round++) {
		struct kprobe c = { .addr = (kprobe_opcode_t *)ex_straight,
				    .pre_handler = third_hit };

		cr_assert_eq(register_kprobe(&c), 0);
		usleep(200);
		unregister_kprobe(&c);
	}
	for (int i = 0; i < 2; i++) {
		pthread_join(t[i], &sum);
		cr_assert_eq((long)sum, (long)PAIR_CALLS * (PAIR_CALLS + 1) / 2);
	}
	cr_assert_eq(pair_a, 2 * PAIR_CALLS);
	cr_assert_eq(pair_b, 2 * PAIR_CALLS);
	cr_assert_eq(a.nmissed, 0);
	cr_assert_eq(b.nmissed, 0);
	unregister_kprobes(both, 2);
}
