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

/* ---- sizes ---- */

static unsigned long returns;

static int fill_data(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	/* Every byte of the instance's data is ours (ASan checks). */
	memset(ri->data, 0xa5, ri->rp->data_size);
	return 0;
}

static int count_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	const unsigned char *d = (const unsigned char *)ri->data;

	if (d[0] == 0xa5 && d[ri->rp->data_size - 1] == 0xa5)
		__atomic_fetch_add(&returns, 1, __ATOMIC_RELAXED);
	return 0;
}

static int try_kretprobe(int maxactive, size_t data_size)
{
	struct kretprobe rp;
	unsigned char first = *(volatile unsigned char *)lim_fn;
	int err;

	memset(&rp, 0, sizeof(rp));
	rp.kp.addr = (void *)lim_fn;
	rp.handler = count_return;
	rp.entry_handler = fill_data;
	rp.maxactive = maxactive;
	rp.data_size = data_size;
	err = register_kretprobe(&rp);
	if (err) {
		/* Nothing of it left behind. */
		cr_assert_null(rp.__pool);
		cr_assert_eq(*(volatile unsigned char *)lim_fn, first);
		cr_assert_eq(enable_kretprobe(&rp), -EINVAL);
		return err;
	}
	returns = 0;
	cr_assert_eq(call_lim_fn(2), 15);
	cr_assert_eq(returns, 1);
	unregister_kretprobe(&rp);
	return 0;
}

/* A stride or pool size computed from these must not wrap. */
Test(limits, kretprobe_sizes_that_would_wrap)
{
	cr_expect_eq(try_kretprobe(0, SIZE_MAX - 8), -EINVAL);
	cr_expect_eq(try_kretprobe(0, SIZE_MAX), -EINVAL);
	cr_expect_eq(try_kretprobe(0, SIZE_MAX / 2 + 1), -EINVAL);
	cr_expect_eq(try_kretprobe(0, KRETPROBE_MAX_DATA_SIZE + 1), -EINVAL);
	cr_expect_eq(try_kretprobe(INT_MAX, 0), -EINVAL);
	cr_expect_eq(try_kretprobe(KRETPROBE_MAXACTIVE_MAX + 1, 8), -EINVAL);
	/* Within each limit, but a pool of a terabyte. */
	cr_expect_eq(try_kretprobe(KRETPROBE_MAXACTIVE_MAX, KRETPROBE_MAX_DATA_SIZE), -ENOMEM);
	/* What the limits allow works, to the last byte of data. */
	cr_expect_eq(try_kretprobe(4, KRETPROBE_MAX_DATA_SIZE), 0);
	cr_expect_eq(try_kretprobe(1000, 4096), 0);
	cr_expect_eq(try_kretprobe(-5, 1), 0);
}

/* ---- instruction boundaries ---- */

/* lim_nosize has no size and no FDE (an assembly label): its code reaches
 * the next symbol, lim_sized (4 bytes), which lim_after follows. */
__asm__(".text\n"
	".globl lim_nosize\n.type lim_nosize,@function\n"
	"lim_nosize:\n"
	"\tmovabs $0x1122334455667788, %rax\n"	/* 10 bytes */
	"\tret\n"				/* +10 */
	".globl lim_sized\n.type lim_sized,@function\n"
	"lim_sized:\n"
	"\tmov %rdi, %rax\n"			/* 3 bytes */
	"\tret\n"
	".size lim_sized, .-lim_sized\n"
	".globl lim_after\n.type lim_after,@function\n"
	"lim_after:\n"
	"\tmov %rdi, %rax\n"
	"\tret\n"
	".size lim_after, .-lim_after\n");

long lim_nosize(void);
long lim_sized(long x);
long lim_after(long x);

static int try_kprobe(void *addr, const char *sym, unsigned int off)
{
	struct kprobe p;
	int err;

	memset(&p, 0, sizeof(p));
	p.addr = addr;
	p.symbol_name = sym;
	p.offset = off;
	p.pre_handler = count_hit;
	err = register_kprobe(&p);
	if (!err)
		unregister_kprobe(&p);
	return err;
}

/* A symbol of size 0 is decoded from its start up to the next symbol. */
Test(limits, size_zero_symbol_decoded_from_its_start)
{
	struct kprobe p;

	cr_assert_eq(lim_nosize(), 0x1122334455667788L);
	for (unsigned int off = 1; off < 10; off++) {
		cr_expect_eq(try_kprobe(NULL, "lim_nosize", off), -EILSEQ, "lim_nosize+%u", off);
		cr_expect_eq(try_kprobe((char *)lim_nosize + off, NULL, 0), -EILSEQ, "addr+%u", off);
	}
	cr_expect_eq(try_kprobe(NULL, "lim_nosize", 0), 0);
	/* Past its code, at the next symbol: not in lim_nosize. */
	cr_expect_eq(try_kprobe(NULL, "lim_nosize", 11), -EINVAL);
	cr_expect_eq(try_kprobe(NULL, "lim_nosize", 1000000), -EINVAL);

	/* Its ret is a boundary, and the probe there works. */
	memset(&p, 0, sizeof(p));
	p.symbol_name = "lim_nosize";
	p.offset = 10;
	p.pre_handler = count_hit;
	cr_assert_eq(register_kprobe(&p), 0);
	cr_expect_eq((char *)p.addr, (char *)lim_nosize + 10);
	hits = 0;
	cr_expect_eq(lim_nosize(), 0x1122334455667788L);
	cr_expect_eq(hits, 1);
	unregister_kprobe(&p);
	cr_expect_eq(lim_nosize(), 0x1122334455667788L);
}

/* crtstuff's helper, a symbol of size 0 in every program: +2 is inside
 * its first instruction (a 5-byte mov or a 7-byte lea). */
Test(limits, deregister_tm_clones_plus_2)
{
	int err = try_kprobe(NULL, "deregister_tm_clones", 0);

	if (err == -ENOENT)
		cr_skip_test("no deregister_tm_clones symbol in this program");
	cr_assert_eq(err, 0);
	cr_expect_eq(try_kprobe(NULL, "deregister_tm_clones", 2), -EILSEQ);
}

/* An offset past the symbol's end is not in the symbol: -EINVAL, even
 * where it lands on an instruction of the next function. */
Test(limits, offset_past_the_end_is_einval)
{
	cr_assert_eq(lim_sized(5), 5);
	cr_expect_eq(try_kprobe(NULL, "lim_sized", 3), 0, "its ret");
	cr_expect_eq(try_kprobe(NULL, "lim_sized", 4), -EINVAL, "lim_after+0");
	cr_expect_eq(try_kprobe(NULL, "lim_sized", 7), -EINVAL, "lim_after+3");
	cr_expect_eq(try_kprobe(NULL, "lim_sized", 5), -EINVAL, "inside lim_after");
	cr_expect_eq(try_kprobe(NULL, "lim_sized", 1), -EILSEQ, "inside its mov");
	cr_expect_eq(try_kprobe(NULL, "lim_sized", UINT_MAX), -EINVAL);
	cr_expect_eq(lim_after(6), 6);
}
