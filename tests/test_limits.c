/* Registration at its limits: many probes at one address (aggregates must
 * scale linearly), sizes that could overflow, addresses that are not
 * instruction boundaries, and places where a probe cannot work. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "testutil.h"

TestSuite(limits, .timeout = 20);

TEST_FN long lim_fn(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 7 + 1;
}

static long (*volatile call_lim_fn)(long) = lim_fn;

/* ---- many probes at one address ---- */

#define MANY 100000

static unsigned long hits;

static int count_hit(struct kprobe *p, struct pt_regs *regs)
{
	__atomic_fetch_add(&hits, 1, __ATOMIC_RELAXED);
	return 0;
}

static struct kprobe *many_probes(struct kprobe ***vec)
{
	struct kprobe *kp = calloc(MANY, sizeof(*kp));
	struct kprobe **v = calloc(MANY, sizeof(*v));

	cr_assert(kp && v);
	for (int i = 0; i < MANY; i++) {
		kp[i].addr = (void *)lim_fn;
		kp[i].pre_handler = count_hit;
		v[i] = &kp[i];
	}
	*vec = v;
	return kp;
}

/* One hit runs every handler once; after the removals, none. */
static void check_all_run(int live)
{
	hits = 0;
	cr_assert_eq(call_lim_fn(3), 22);
	cr_assert_eq(hits, (unsigned long)live, "%lu handlers ran, %d probes", hits, live);
}

/* 100,000 probes at one address, one call each: a list walk per call
 * would take minutes (the suite's timeout fails it). */
Test(limits, aggregate_of_100k_one_by_one, .timeout = 15)
{
	struct kprobe **v, *kp = many_probes(&v);

	for (int i = 0; i < MANY; i++)
		cr_assert_eq(register_kprobe(&kp[i]), 0, "probe %d", i);
	check_all_run(MANY);
	cr_assert_eq(register_kprobe(&kp[MANY / 2]), -EINVAL, "registered twice");
	/* Out of order: every other one (a batch), then from the end. */
	for (int i = 0; i < MANY / 2; i++)
		v[i] = &kp[2 * i];
	unregister_kprobes(v, MANY / 2);
	check_all_run(MANY / 2);
	for (int i = MANY - 1; i >= MANY - 1000; i -= 2)
		unregister_kprobe(&kp[i]);
	check_all_run(MANY / 2 - 500);
	cr_assert_eq(disable_kprobe(&kp[1]), 0);
	check_all_run(MANY / 2 - 501);
	cr_assert_eq(enable_kprobe(&kp[1]), 0);
	for (int i = 0; i < MANY / 2; i++)
		v[i] = &kp[2 * i + 1];
	unregister_kprobes(v, MANY / 2);
	check_all_run(0);
	cr_assert_eq(enable_kprobe(&kp[1]), -EINVAL, "still registered after unregister");
	free(kp);
	free(v);
}

Test(limits, aggregate_of_100k_in_one_batch, .timeout = 15)
{
	struct kprobe **v, *kp = many_probes(&v);

	cr_assert_eq(register_kprobes(v, MANY), 0);
	check_all_run(MANY);
	for (int i = 0; i < 10; i++)
		cr_assert_eq(kp[i * (MANY / 10)].nmissed, 0);
	unregister_kprobes(v, MANY);
	check_all_run(0);
	/* The original byte is back. */
	cr_assert_eq(*(volatile unsigned char *)lim_fn, kp[0].opcode);
	free(kp);
	free(v);
}
