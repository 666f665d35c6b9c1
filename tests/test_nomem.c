/*
 * Allocation failures while code is patched: whatever calloc() refuses,
 * registering, unregistering and taking jumps back leave the code and the
 * probes' state consistent.  This suite is linked with
 * -Wl,--wrap=calloc, so that every calloc() of the library comes here and
 * can be made to fail (only in the test's own thread: the optimizer
 * thread's passes retry on failure by design).
 */
#include "testutil.h"

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

TestSuite(nomem, .timeout = 20);

void *__real_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size);

/* calloc() calls let through before every later one fails; -1: none fails. */
static __thread int calloc_pass = -1;
static __thread unsigned long calloc_failed;

void *__wrap_calloc(size_t n, size_t size)
{
	if (calloc_pass == 0) {
		calloc_failed++;
		return NULL;
	}
	if (calloc_pass > 0)
		calloc_pass--;
	return __real_calloc(n, size);
}

static void fail_calloc_after(int pass)
{
	calloc_failed = 0;
	calloc_pass = pass;
}

static void calloc_works(void)
{
	calloc_pass = -1;
}

/* A function whose entry takes a jump: push, mov and lea make a region of
 * 8 bytes. */
int nomem_target(int x);
__asm__(".text\n"
	".globl nomem_target\n"
	".type nomem_target, @function\n"
	"nomem_target:\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	lea 1(%rdi,%rdi,2), %eax\n"
	"	pop %rbp\n"
	"	ret\n"
	".size nomem_target, .-nomem_target\n");

static int (*volatile target)(int) = nomem_target;
static unsigned long pre_hits, post_hits;

static int count_pre(struct kprobe *p, struct pt_regs *regs)
{
	__atomic_fetch_add(&pre_hits, 1, __ATOMIC_RELAXED);
	return 0;
}

static void count_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
	__atomic_fetch_add(&post_hits, 1, __ATOMIC_RELAXED);
}

static bool wait_optimized(const struct kprobe *p, int ms)
{
	struct timespec ts = { 0, 200000 };

	for (int i = 0; i < ms * 5; i++) {
		if (__atomic_load_n(&p->flags, __ATOMIC_ACQUIRE) & KPROBE_FLAG_OPTIMIZED)
			return true;
		nanosleep(&ts, NULL);
	}
	return false;
}

static void init(struct kprobe *p, kprobe_pre_handler_t pre, kprobe_post_handler_t post)
{
	memset(p, 0, sizeof(*p));
	p->addr = (kprobe_opcode_t *)nomem_target;
	p->pre_handler = pre;
	p->post_handler = post;
}

/* The first bytes of the target as the compiler left them. */
static uint8_t orig[16];

static void save_code(void)
{
	memcpy(orig, (const void *)nomem_target, sizeof(orig));
}

static void expect_code_unchanged(const char *what)
{
	cr_assert_arr_eq(orig, (const void *)nomem_target, sizeof(orig),
			 "%s: the code is not what it was", what);
	cr_assert_eq(target(2), 7, "%s", what);
}

/* Unregistering an optimized probe when no allocation succeeds: the jump
 * and the breakpoint go, the probe is no longer registered. */
Test(nomem, unregister_optimized)
{
	struct kprobe k;

	save_code();
	init(&k, count_pre, NULL);
	cr_assert_eq(register_kprobe(&k), 0);
	cr_assert(wait_optimized(&k, 2000), "the probe never took a jump");
	cr_assert_neq(memcmp(orig, (const void *)nomem_target, sizeof(orig)), 0);

	fail_calloc_after(0);
	unregister_kprobe(&k);
	calloc_works();
	cr_assert_gt(calloc_failed, 0, "no allocation was refused: the injection is broken");
	cr_expect_eq(k.flags & KPROBE_FLAG_OPTIMIZED, 0);
	expect_code_unchanged("after unregistering");
	pre_hits = 0;
	target(1);
	cr_expect_eq(pre_hits, 0, "an unregistered probe still fires");

	/* The address is free again. */
	init(&k, count_pre, NULL);
	cr_assert_eq(register_kprobe(&k), 0);
	target(1);
	cr_expect_eq(pre_hits, 1);
	unregister_kprobe(&k);
	expect_code_unchanged("after registering again");
}

/* A post handler arriving at an optimized probepoint takes its jump back;
 * for every point at which allocations start failing, the registration
 * either works (and the post handler runs: no jump left over the
 * breakpoint) or fails with -ENOMEM leaving the first probe as it was, and
 * unregistering leaves the code as it was. */
Test(nomem, unoptimize_on_register)
{
	bool failed_once = false, worked_once = false;

	save_code();
	for (int pass = 0; pass < 40; pass++) {
		struct kprobe k1, k2;
		int err;

		init(&k1, count_pre, NULL);
		init(&k2, NULL, count_post);
		cr_assert_eq(register_kprobe(&k1), 0);
		cr_assert(wait_optimized(&k1, 2000), "pass %d: never optimized", pass);

		fail_calloc_after(pass);
		err = register_kprobe(&k2);
		calloc_works();
		cr_assert(err == 0 || err == -ENOMEM, "pass %d: %d", pass, err);

		pre_hits = post_hits = 0;
		cr_assert_eq(target(2), 7);
		cr_expect_eq(pre_hits, 1, "pass %d: the first probe missed its hit", pass);
		if (err == 0) {
			worked_once = true;
			cr_expect_eq(post_hits, 1, "pass %d: post handler skipped (a jump left)",
				     pass);
			cr_expect_eq(k1.flags & KPROBE_FLAG_OPTIMIZED, 0, "pass %d", pass);
			unregister_kprobe(&k2);
		} else {
			failed_once = true;
			cr_expect_eq(post_hits, 0, "pass %d", pass);
		}
		unregister_kprobe(&k1);
		expect_code_unchanged("after the pass");
	}
	cr_expect(failed_once && worked_once, "the sweep did not cover both outcomes");
}

/* Disabling the only probe of an optimized probepoint without memory:
 * either it is disabled (no hit, and no jump into its handler) or the call
 * fails and it still fires. */
Test(nomem, disable_optimized)
{
	for (int pass = 0; pass < 8; pass++) {
		struct kprobe k;
		int err;

		save_code();
		init(&k, count_pre, NULL);
		cr_assert_eq(register_kprobe(&k), 0);
		cr_assert(wait_optimized(&k, 2000));
		fail_calloc_after(pass);
		err = disable_kprobe(&k);
		calloc_works();
		pre_hits = 0;
		target(1);
		if (err == 0)
			cr_expect_eq(pre_hits, 0, "pass %d: a disabled probe fired", pass);
		else
			cr_expect_eq(pre_hits, 1, "pass %d: %d, yet the probe missed", pass, err);
		unregister_kprobe(&k);
		expect_code_unchanged("after disable and unregister");
	}
}
