// Forced unwinding through return-probed frames (issue 3): pthread_exit()
// and pthread_cancel() of a thread inside a return-probed function run the
// destructors of every frame, the thread exits cleanly, and nothing leaks.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <exception>

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

TestSuite(cxx_unwind, .init = suite_init, .timeout = 10);

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

extern "C" TEST_FN long cx_exit_inside(long x);
static long (*volatile fp_exit_inside)(long) = cx_exit_inside;

long cx_exit_inside(long x)
{
	counted guard(x);

	__asm__ volatile("" : "+r"(x));
	if (x > 0)
		pthread_exit((void *)(intptr_t)x);
	return -x;
}

static void *exiting_thread(void *arg)
{
	counted outer_guard(0);	// in a frame above the probed one
	long r = fp_exit_inside((long)(intptr_t)arg);

	return (void *)(intptr_t)(r - 1);
}

Test(cxx_unwind, pthread_exit_runs_destructors_above_probed_frame)
{
	struct crp c;

	crp_init(&c, (void *)cx_exit_inside, 2);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (long i = 1; i <= 10; i++) {
		pthread_t th;
		void *ret = NULL;

		cr_assert_eq(pthread_create(&th, NULL, exiting_thread, (void *)(intptr_t)i), 0);
		pthread_join(th, &ret);
		cr_assert_eq(ret, (void *)(intptr_t)i);
	}
	cr_expect_eq(dtors, 20, "%ld of 20 destructors ran", dtors);
	for (long i = 1; i <= 10; i++)
		cr_assert_eq(fp_exit_inside(-i), i);
	cr_expect_eq(c.hits, 10);
	cr_expect_eq(c.rp.nmissed, 0);
	unregister_kretprobe(&c.rp);
}

static int cancel_pipe[2];

extern "C" TEST_FN long cx_blocking(long x);
static long (*volatile fp_blocking)(long) = cx_blocking;

long cx_blocking(long x)
{
	char ch;

	__asm__ volatile("" : "+r"(x));
	if (x > 0 && read(cancel_pipe[0], &ch, 1) < 0)
		return -1;
	return x + 1;
}

static volatile pid_t cancel_tid;

static void *cancelled_thread(void *arg)
{
	counted outer_guard(0);	// in the caller of the probed function
	long r;

	cancel_tid = (pid_t)syscall(SYS_gettid);
	r = fp_blocking(1);
	return (void *)(intptr_t)r;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts))
		;
}

Test(cxx_unwind, cancellation_runs_destructors_above_probed_frame)
{
	struct crp c;

#if defined(__SANITIZE_ADDRESS__)
	// ASan reports false stack-buffer-underflows for cancelled threads,
	// with or without probes.
	cr_skip_test("not under ASan: pthread_cancel");
#endif

	cr_assert_eq(pipe(cancel_pipe), 0);
	crp_init(&c, (void *)cx_blocking, 2);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (int i = 0; i < 5; i++) {
		pthread_t th;
		void *ret = NULL;

		cancel_tid = 0;
		cr_assert_eq(pthread_create(&th, NULL, cancelled_thread, NULL), 0);
		sleep_ms(5);
		pthread_cancel(th);
		pthread_join(th, &ret);
		cr_assert_eq(ret, PTHREAD_CANCELED);
		// the thread is really gone before its instances can be reclaimed
		for (int k = 0; k < 500 && syscall(SYS_tgkill, getpid(), cancel_tid, 0) == 0; k++)
			sleep_ms(1);
	}
	cr_expect_eq(dtors, 5, "%ld of 5 destructors ran", dtors);
	for (long i = 1; i <= 10; i++)
		cr_assert_eq(fp_blocking(-i), 1 - i);
	cr_expect_eq(c.hits, 10);
	cr_expect_eq(c.rp.nmissed, 0);
	unregister_kretprobe(&c.rp);
}
