/* Registration at its limits: many probes at one address (aggregates must
 * scale linearly), sizes that could overflow, addresses that are not
 * instruction boundaries, and places where a probe cannot work. */
#include <elf.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

TestSuite(limits, .timeout = 20);

long lim_fn(long x);
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
Test(limits, aggregate_of_100k_one_by_one)
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

Test(limits, aggregate_of_100k_in_one_batch)
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

/* ---- places a probe cannot work ---- */

__asm__(".text\n"
	/* Never returns: a loop. */
	".globl lim_spin\n.type lim_spin,@function\n"
	"lim_spin:\n"
	"1:\tpause\n"
	"\tjmp 1b\n"
	".size lim_spin, .-lim_spin\n"
	/* Never returns: ends calling abort, or in its cold part. */
	".globl lim_fatal\n.type lim_fatal,@function\n"
	"lim_fatal:\n"
	"\tsub $8, %rsp\n"
	"\ttest %rdi, %rdi\n"
	"\tjne lim_fatal.cold\n"
	"\tcall abort\n"
	".size lim_fatal, .-lim_fatal\n"
	".type lim_fatal.cold,@function\n"
	"lim_fatal.cold:\n"
	"\tud2\n"
	".size lim_fatal.cold, .-lim_fatal.cold\n"
	/* Returns through its cold part. */
	".globl lim_cold_ret\n.type lim_cold_ret,@function\n"
	"lim_cold_ret:\n"
	"\ttest %rdi, %rdi\n"
	"\tjne lim_cold_ret.cold\n"
	"\tud2\n"
	".size lim_cold_ret, .-lim_cold_ret\n"
	".type lim_cold_ret.cold,@function\n"
	"lim_cold_ret.cold:\n"
	"\tmov %rdi, %rax\n"
	"\tret\n"
	".size lim_cold_ret.cold, .-lim_cold_ret.cold\n"
	/* Return through a tail call, an indirect jump, a conditional ret. */
	".globl lim_tail\n.type lim_tail,@function\n"
	"lim_tail:\n"
	"\tjmp lim_after\n"
	".size lim_tail, .-lim_tail\n"
	".globl lim_indirect\n.type lim_indirect,@function\n"
	"lim_indirect:\n"
	"\tjmp *%rsi\n"
	".size lim_indirect, .-lim_indirect\n"
	".globl lim_maybe\n.type lim_maybe,@function\n"
	"lim_maybe:\n"
	"\tmov %rdi, %rax\n"
	"\ttest %rdi, %rdi\n"
	"\tjz 1f\n"
	"\tud2\n"
	"1:\tret\n"
	".size lim_maybe, .-lim_maybe\n");

void lim_spin(void);
void lim_fatal(long x);
long lim_cold_ret(long x);
long lim_tail(long x);
long lim_indirect(long x, long (*fn)(long));
long lim_maybe(long x);

static int returns_seen;

static int saw_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	returns_seen++;
	return 0;
}

static int try_kretprobe_at(void *addr, const char *sym)
{
	struct kretprobe rp;
	int err;

	memset(&rp, 0, sizeof(rp));
	rp.kp.addr = addr;
	rp.kp.symbol_name = sym;
	rp.handler = saw_return;
	err = register_kretprobe(&rp);
	if (!err)
		unregister_kretprobe(&rp);
	return err;
}

/* The program's entry point (_start, AT_ENTRY) is jumped to with argc
 * where a return address would be: a return probe there is refused; a
 * plain probe is fine. */
Test(limits, kretprobe_on_entry_point_refused)
{
	void *entry = (void *)getauxval(AT_ENTRY);

	cr_assert_not_null(entry);
	cr_expect_eq(try_kretprobe_at(entry, NULL), -EINVAL);
	cr_expect_eq(try_kretprobe_at(NULL, "_start"), -EINVAL);
	cr_expect_eq(try_kprobe(entry, NULL, 0), 0);
}

/* What does not return to its caller, by name or by its code. */
Test(limits, kretprobe_on_functions_that_never_return_refused)
{
	static const char *const libc_fns[] = {
		"libc.so.6:exit", "libc.so.6:_exit", "libc.so.6:abort", "libc.so.6:longjmp",
		"libc.so.6:__stack_chk_fail", "libc.so.6:__assert_fail", "libc.so.6:pthread_exit",
		"libc.so.6:__libc_start_main",
	};

	for (size_t i = 0; i < sizeof(libc_fns) / sizeof(libc_fns[0]); i++) {
		cr_expect_eq(try_kretprobe_at(NULL, libc_fns[i]), -EINVAL, "%s", libc_fns[i]);
		cr_expect_eq(try_kprobe(NULL, libc_fns[i], 0), 0, "kprobe on %s", libc_fns[i]);
	}
	cr_expect_eq(try_kretprobe_at((void *)lim_spin, NULL), -EINVAL, "a loop");
	cr_expect_eq(try_kretprobe_at((void *)lim_fatal, NULL), -EINVAL, "ends in a call");
	cr_expect_eq(try_kprobe((void *)lim_fatal, NULL, 0), 0);
}

/* Functions that leave by a jump do return: their return probes work. */
Test(limits, kretprobe_on_functions_that_return_by_a_jump)
{
	struct kretprobe rp[4];
	void *fns[4] = { (void *)lim_cold_ret, (void *)lim_tail, (void *)lim_indirect,
			 (void *)lim_maybe };

	memset(rp, 0, sizeof(rp));
	for (int i = 0; i < 4; i++) {
		rp[i].kp.addr = fns[i];
		rp[i].handler = saw_return;
		cr_assert_eq(register_kretprobe(&rp[i]), 0, "function %d", i);
	}
	returns_seen = 0;
	cr_expect_eq(lim_cold_ret(4), 4);
	cr_expect_eq(lim_tail(5), 5);
	cr_expect_eq(lim_indirect(6, lim_after), 6);
	cr_expect_eq(lim_maybe(0), 0);
	cr_expect_eq(returns_seen, 4);
	for (int i = 0; i < 4; i++)
		unregister_kretprobe(&rp[i]);
}

/* What the dynamic loader runs before anything else cannot be hit. */
Test(limits, loader_entry_point_refused)
{
	uintptr_t base = getauxval(AT_BASE);
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)base;

	if (!base)
		cr_skip_test("no dynamic loader");
	cr_expect_eq(try_kprobe((void *)(base + eh->e_entry), NULL, 0), -EINVAL);
}

/* ---- an aggregate changing under running threads ---- */

#define CHURN 64
#define WORKERS 2

static unsigned long sentinel_hits;
static volatile int stop_workers;

/* The sentinel is a jprobe: always last in its aggregate, so every probe
 * added or removed meanwhile is before it. */
static long sentinel_entry(long x)
{
	__atomic_fetch_add(&sentinel_hits, 1, __ATOMIC_RELAXED);
	jprobe_return();
	return 0;
}

/* Slow enough that threads are often inside the list while it changes. */
static int count_hit_slowly(struct kprobe *p, struct pt_regs *regs)
{
	for (int i = 0; i < 20; i++)
		__asm__ volatile("pause");
	return count_hit(p, regs);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static unsigned long hits_so_far(const unsigned long *calls)
{
	unsigned long n = 0;

	for (int i = 0; i < WORKERS; i++)
		n += __atomic_load_n(&calls[i], __ATOMIC_RELAXED);
	return n;
}

static void *call_lim_fn_until_stopped(void *arg)
{
	unsigned long *calls = arg;

	while (!__atomic_load_n(&stop_workers, __ATOMIC_ACQUIRE)) {
		if (call_lim_fn(1) != 8)
			abort();
		__atomic_store_n(calls, *calls + 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* The last probe of an aggregate whose other members come and go (one at
 * a time and in batches, disabled and enabled) while threads hit it and
 * walk the list: it runs exactly once per call, never skipped, never
 * twice. */
Test(limits, aggregate_member_counts_exactly_while_neighbours_churn)
{
	struct kprobe *kp = calloc(CHURN, sizeof(*kp)), **v = calloc(CHURN, sizeof(*v));
	struct jprobe sentinel;
	unsigned long calls[WORKERS] = { 0 }, total = 0;
	double deadline = now_s() + 4.0;
	pthread_t t[WORKERS];
	unsigned int seed = 1;

	cr_assert(kp && v);
	for (int i = 0; i < CHURN; i++) {
		kp[i].addr = (void *)lim_fn;
		kp[i].pre_handler = count_hit_slowly;
		v[i] = &kp[i];
	}
	memset(&sentinel, 0, sizeof(sentinel));
	sentinel.kp.addr = (void *)lim_fn;
	sentinel.entry = (void *)sentinel_entry;
	/* Registered among the others, it still goes last. */
	cr_assert_eq(register_kprobes(v, CHURN / 2), 0);
	cr_assert_eq(register_jprobe(&sentinel), 0);
	cr_assert_eq(register_kprobes(v + CHURN / 2, CHURN / 2), 0);
	sentinel_hits = 0;
	for (int i = 0; i < WORKERS; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, call_lim_fn_until_stopped, &calls[i]), 0);
	/* 1,000 rounds, and on until the threads made 10,000 calls (a loaded
	 * machine may not have scheduled them yet), for 4 s at most. */
	for (int round = 0; (round < 1000 || hits_so_far(calls) < 10000) && now_s() < deadline;
	     round++) {
		int i = (int)(rand_r(&seed) % CHURN), n = 1 + (int)(rand_r(&seed) % 16);

		if (i + n > CHURN)
			n = CHURN - i;
		switch (round % 3) {
		case 0:	/* out and back in (to the end of the list) */
			unregister_kprobes(v + i, n);
			for (int j = i; j < i + n; j++)
				kp[j].addr = (void *)lim_fn;
			cr_assert_eq(register_kprobes(v + i, n), 0);
			break;
		case 1:
			unregister_kprobe(&kp[i]);
			kp[i].addr = (void *)lim_fn;
			cr_assert_eq(register_kprobe(&kp[i]), 0);
			break;
		default:
			cr_assert_eq(disable_kprobe(&kp[i]), 0);
			cr_assert_eq(enable_kprobe(&kp[i]), 0);
			break;
		}
	}
	__atomic_store_n(&stop_workers, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < WORKERS; i++) {
		pthread_join(t[i], NULL);
		total += calls[i];
	}
	cr_assert_gt(total, 0);
	cr_expect_eq(sentinel_hits, total, "%lu runs for %lu calls", sentinel_hits, total);
	cr_log_info("%lu calls", total);
	cr_expect_eq(sentinel.kp.nmissed, 0);
	unregister_kprobes(v, CHURN);
	unregister_jprobe(&sentinel);
	check_all_run(0);
	free(kp);
	free(v);
}
