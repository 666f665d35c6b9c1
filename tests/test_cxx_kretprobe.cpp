// C++ exceptions and return probes (issue 3): an exception thrown through
// return-probed frames is caught where it would be without the probes,
// destructors in between run, nothing leaks and std::terminate never
// happens.  This program deliberately references neither backtrace() nor
// pthread_exit(): linked with libkprobes.a, exceptions must work all the
// same (forced unwinding is in test_cxx_unwind.cpp).
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <exception>
#include <stdexcept>

#include "testutil.h"

static void on_terminate()
{
	static const char msg[] = "std::terminate called\n";

	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(99);
	_exit(99);
}

static void suite_init(void)
{
	std::set_terminate(on_terminate);
}

TestSuite(cxx_kretprobe, .init = suite_init, .timeout = 10);

#define BARRIER() __asm__ volatile("" : : : "memory")

struct crp {
	struct kretprobe rp;
	long hits;
	unsigned long ax;
};

static int crp_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct crp *c = (struct crp *)ri->rp;

	__atomic_fetch_add(&c->hits, 1, __ATOMIC_RELAXED);
	c->ax = regs->ax;
	return 0;
}

static void crp_init(struct crp *c, void *addr, int maxactive)
{
	memset(c, 0, sizeof(*c));
	c->rp.kp.addr = (kprobe_opcode_t *)addr;
	c->rp.handler = crp_handler;
	c->rp.maxactive = maxactive;
}

static long dtors;

struct counted {
	long v;
	explicit counted(long x) : v(x) {}
	~counted() { __atomic_fetch_add(&dtors, 1, __ATOMIC_RELAXED); }
};

struct kr_error {
	long v;
};

extern "C" {
TEST_FN long cx_thrower(long x);
TEST_FN long cx_leaf(long x);
TEST_FN long cx_mid(long x);
TEST_FN long cx_a(long x);
TEST_FN long cx_b(long x);
TEST_FN long cx_c(long x);
TEST_FN long cx_catcher(long x);
TEST_FN long cx_rethrower(long x);
TEST_FN long cx_outer(long x);
}

static long (*volatile fp_thrower)(long) = cx_thrower;
static long (*volatile fp_leaf)(long) = cx_leaf;
static long (*volatile fp_mid)(long) = cx_mid;
static long (*volatile fp_a)(long) = cx_a;
static long (*volatile fp_b)(long) = cx_b;
static long (*volatile fp_c)(long) = cx_c;
static long (*volatile fp_catcher)(long) = cx_catcher;
static long (*volatile fp_rethrower)(long) = cx_rethrower;
static long (*volatile fp_outer)(long) = cx_outer;

// Throws when x >= 0.
long cx_thrower(long x)
{
	counted guard(x);

	__asm__ volatile("" : "+r"(x));
	if (x >= 0)
		throw kr_error{ x };
	return -x;
}

// Not probed: throws for its probed caller.
long cx_leaf(long x)
{
	__asm__ volatile("" : "+r"(x));
	if (x >= 0)
		throw std::runtime_error("leaf");
	return -x;
}

long cx_mid(long x)
{
	counted guard(x);
	long r = fp_leaf(x);

	BARRIER();
	return r + 1;
}

long cx_c(long x)
{
	counted guard(x);

	__asm__ volatile("" : "+r"(x));
	if (x >= 0)
		throw kr_error{ x * 3 };
	return -x;
}

long cx_b(long x)
{
	counted guard(x);
	long r = fp_c(x);

	BARRIER();
	return r + 10;
}

long cx_a(long x)
{
	counted guard(x);
	long r = fp_b(x);

	BARRIER();
	return r + 100;
}

// Catches what its probed callee throws and returns normally.
long cx_catcher(long x)
{
	long r;

	try {
		r = fp_thrower(x);
	} catch (const kr_error &e) {
		r = e.v + 1000;
	}
	BARRIER();
	return r;
}

// Calls the catcher: never sees the exception.
long cx_outer(long x)
{
	long r = fp_catcher(x);

	BARRIER();
	return r + 1;
}

long cx_rethrower(long x)
{
	counted guard(x);

	try {
		return fp_thrower(x);
	} catch (const kr_error &) {
		throw;
	}
}

// ---- tests ----

Test(cxx_kretprobe, throw_from_probed_function)
{
	struct crp c;
	long caught = 0;

	crp_init(&c, (void *)cx_thrower, 4);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (long i = 0; i < 1000; i++) {
		try {
			fp_thrower(i);
		} catch (const kr_error &e) {
			if (e.v == i)
				caught++;
		}
	}
	cr_expect_eq(caught, 1000);
	cr_expect_eq(dtors, 1000);
	for (long i = 1; i <= 100; i++)
		cr_assert_eq(fp_thrower(-i), i);
	cr_expect_eq(c.hits, 100, "%ld handled", c.hits);
	cr_expect_eq(c.rp.nmissed, 0);
	unregister_kretprobe(&c.rp);
}

Test(cxx_kretprobe, throw_from_callee_of_probed_function)
{
	struct crp c;
	long caught = 0;

	crp_init(&c, (void *)cx_mid, 4);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (long i = 0; i < 1000; i++) {
		try {
			fp_mid(i);
		} catch (const std::runtime_error &e) {
			caught++;
		}
	}
	cr_expect_eq(caught, 1000);
	cr_expect_eq(dtors, 1000);
	for (long i = 1; i <= 100; i++)
		cr_assert_eq(fp_mid(-i), i + 1);
	cr_expect_eq(c.hits, 100);
	cr_expect_eq(c.rp.nmissed, 0);
	unregister_kretprobe(&c.rp);
}

Test(cxx_kretprobe, throw_through_nested_probed_frames)
{
	struct crp a, b, c;
	long caught = 0;

	crp_init(&a, (void *)cx_a, 3);
	crp_init(&b, (void *)cx_b, 3);
	crp_init(&c, (void *)cx_c, 3);
	cr_assert_eq(register_kretprobe(&a.rp), 0);
	cr_assert_eq(register_kretprobe(&b.rp), 0);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (long i = 0; i < 1000; i++) {
		try {
			fp_a(i);
		} catch (const kr_error &e) {
			if (e.v == i * 3)
				caught++;
		}
	}
	cr_expect_eq(caught, 1000);
	cr_expect_eq(dtors, 3000);
	for (long i = 1; i <= 100; i++)
		cr_assert_eq(fp_a(-i), i + 110);
	cr_expect_eq(a.hits, 100);
	cr_expect_eq(b.hits, 100);
	cr_expect_eq(c.hits, 100);
	cr_expect_eq(a.ax, 100 + 110);
	cr_expect_eq(a.rp.nmissed, 0);
	cr_expect_eq(b.rp.nmissed, 0);
	cr_expect_eq(c.rp.nmissed, 0);
	unregister_kretprobe(&a.rp);
	unregister_kretprobe(&b.rp);
	unregister_kretprobe(&c.rp);
}

Test(cxx_kretprobe, catch_inside_probed_function_then_normal_return)
{
	struct crp outer, inner;

	crp_init(&outer, (void *)cx_catcher, 2);
	crp_init(&inner, (void *)cx_thrower, 2);
	cr_assert_eq(register_kretprobe(&outer.rp), 0);
	cr_assert_eq(register_kretprobe(&inner.rp), 0);
	for (long i = 0; i < 1000; i++)
		cr_assert_eq(fp_catcher(i), i + 1000);
	cr_expect_eq(inner.hits, 0);
	for (long i = 1; i <= 100; i++)
		cr_assert_eq(fp_catcher(-i), i);
	cr_expect_eq(inner.hits, 100);
	cr_expect_eq(inner.rp.nmissed, 0);
	cr_expect_eq(outer.rp.nmissed, 0);
	cr_expect_geq(outer.hits, 100);
	unregister_kretprobe(&outer.rp);
	unregister_kretprobe(&inner.rp);
}

// The frame that caught the exception, and its callers, were never left:
// they return normally, so their return handlers run as for any return.
Test(cxx_kretprobe, frames_not_unwound_still_get_their_return_handlers)
{
	struct crp outer, catcher, thrower;

	crp_init(&outer, (void *)cx_outer, 2);
	crp_init(&catcher, (void *)cx_catcher, 2);
	crp_init(&thrower, (void *)cx_thrower, 2);
	cr_assert_eq(register_kretprobe(&outer.rp), 0);
	cr_assert_eq(register_kretprobe(&catcher.rp), 0);
	cr_assert_eq(register_kretprobe(&thrower.rp), 0);
	for (long i = 0; i < 100; i++)
		cr_assert_eq(fp_outer(i), i + 1001);
	cr_expect_eq(catcher.hits, 100, "catcher: %ld of 100 returns handled", catcher.hits);
	cr_expect_eq(outer.hits, 100, "outer: %ld of 100 returns handled", outer.hits);
	cr_expect_eq(outer.ax, 99 + 1001);
	cr_expect_eq(thrower.hits, 0);
	cr_expect_eq(outer.rp.nmissed + catcher.rp.nmissed + thrower.rp.nmissed, 0);
	unregister_kretprobe(&outer.rp);
	unregister_kretprobe(&catcher.rp);
	unregister_kretprobe(&thrower.rp);
}

Test(cxx_kretprobe, rethrow_through_probed_frames)
{
	struct crp r, t;
	long caught = 0;

	crp_init(&r, (void *)cx_rethrower, 2);
	crp_init(&t, (void *)cx_thrower, 2);
	cr_assert_eq(register_kretprobe(&r.rp), 0);
	cr_assert_eq(register_kretprobe(&t.rp), 0);
	for (long i = 0; i < 1000; i++) {
		try {
			fp_rethrower(i);
		} catch (const kr_error &e) {
			if (e.v == i)
				caught++;
		}
	}
	cr_expect_eq(caught, 1000);
	cr_expect_eq(dtors, 2000);
	for (long i = 1; i <= 100; i++)
		cr_assert_eq(fp_rethrower(-i), i);
	cr_expect_eq(r.hits, 100);
	cr_expect_eq(t.hits, 100);
	cr_expect_eq(r.rp.nmissed, 0);
	cr_expect_eq(t.rp.nmissed, 0);
	unregister_kretprobe(&r.rp);
	unregister_kretprobe(&t.rp);
}

// std::exception_ptr: thrown again from somewhere else.
Test(cxx_kretprobe, rethrow_exception_ptr_through_probed_frame)
{
	struct crp c;
	long caught = 0;

	crp_init(&c, (void *)cx_mid, 2);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (long i = 0; i < 200; i++) {
		std::exception_ptr ep;

		try {
			fp_mid(i);
		} catch (...) {
			ep = std::current_exception();
		}
		try {
			std::rethrow_exception(ep);
		} catch (const std::runtime_error &) {
			caught++;
		}
	}
	cr_expect_eq(caught, 200);
	for (long i = 1; i <= 10; i++)
		cr_assert_eq(fp_mid(-i), i + 1);
	cr_expect_eq(c.hits, 10);
	cr_expect_eq(c.rp.nmissed, 0);
	unregister_kretprobe(&c.rp);
}

// ---- threads ----

#define NTHREADS 4

static long thread_caught;

static void *throwing_thread(void *arg)
{
	long base = (long)(intptr_t)arg * 100000, caught = 0;

	for (long i = 0; i < 300; i++) {
		try {
			fp_a(base + i);
		} catch (const kr_error &e) {
			if (e.v == (base + i) * 3)
				caught++;
		}
	}
	__atomic_fetch_add(&thread_caught, caught, __ATOMIC_RELAXED);
	return NULL;
}

Test(cxx_kretprobe, exceptions_in_many_threads)
{
	struct crp a, b, c;
	pthread_t th[NTHREADS];

	crp_init(&a, (void *)cx_a, 2 * NTHREADS);
	crp_init(&b, (void *)cx_b, 2 * NTHREADS);
	crp_init(&c, (void *)cx_c, 2 * NTHREADS);
	cr_assert_eq(register_kretprobe(&a.rp), 0);
	cr_assert_eq(register_kretprobe(&b.rp), 0);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (long t = 0; t < NTHREADS; t++)
		cr_assert_eq(pthread_create(&th[t], NULL, throwing_thread, (void *)(intptr_t)t), 0);
	for (int t = 0; t < NTHREADS; t++)
		pthread_join(th[t], NULL);
	cr_expect_eq(thread_caught, NTHREADS * 300);
	for (long i = 1; i <= 100; i++)
		cr_assert_eq(fp_a(-i), i + 110);
	cr_expect_eq(a.hits, 100);
	cr_expect_eq(c.hits, 100);
	cr_expect_eq(a.rp.nmissed + b.rp.nmissed + c.rp.nmissed, 0);
	unregister_kretprobe(&a.rp);
	unregister_kretprobe(&b.rp);
	unregister_kretprobe(&c.rp);
}

/* Deep recursion on the fast paths (the thread's cache is a stack of
 * instances) thrown out of from its bottom: the unwound frames' instances
 * come back, the catching frame's return is handled, and afterwards as
 * many frames as maxactive still get an instance each. */
TEST_FN long cx_deep(long n, long depth);
static long (*volatile fp_deep)(long, long) = cx_deep;
static volatile int deep_throw;

/* depth + 1 frames; the innermost throws (deep_throw) or returns depth,
 * and each frame adds 1. */
TEST_FN long cx_deep(long n, long depth)
{
	counted c(n);

	BARRIER();
	if (n >= depth) {
		if (deep_throw)
			throw kr_error{ n };
		return n;
	}
	return fp_deep(n + 1, depth) + 1;
}

static long deep_catch(long depth)
{
	try {
		return fp_deep(0, depth);
	} catch (const kr_error &e) {
		return -e.v;
	}
}

Test(cxx_kretprobe, throw_out_of_deep_recursion_on_fast_path)
{
	enum { MAX = 256, DEPTH = 40, ROUNDS = 300 };
	struct crp c;
	long want = 0;

	crp_init(&c, (void *)cx_deep, MAX);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (long i = 0; i < ROUNDS; i++) {
		long d = DEPTH - i % 10;

		deep_throw = 1;
		cr_assert_eq(deep_catch(d), -d);
		/* the same stack again, returning normally */
		deep_throw = 0;
		cr_assert_eq(fp_deep(0, d), 2 * d);
		want += d + 1;
	}
	cr_expect_eq(c.hits, want, "%ld handled, %ld returns", c.hits, want);
	cr_expect_eq(c.rp.nmissed, 0);
	/* no instance lost: MAX nested frames all get one */
	cr_assert_eq(fp_deep(0, MAX - 1), 2 * (MAX - 1));
	cr_expect_eq(c.rp.nmissed, 0, "%d missed: instances lost", c.rp.nmissed);
	unregister_kretprobe(&c.rp);
}
