/* The signal libkprobes uses to ask threads where they are (SIGRTMAX-2)
 * stays the program's too: its own handler, installed after the library,
 * gets its own signals, and optimization keeps working. */
#include "testutil.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

static volatile int program_got;

static void program_handler(int sig)
{
	program_got++;
}

long census_fn(long x);
__attribute__((noinline, used)) long census_fn(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 3 + 1;
}

static volatile int stop;

/* Keeps running, so each census has to signal it. */
static void *spinner(void *arg)
{
	long s = 0;

	while (!stop)
		s += census_fn(s & 7);
	return (void *)s;
}

static int empty_pre(struct kprobe *p, struct pt_regs *regs)
{
	return 0;
}

Test(census, program_keeps_its_realtime_signal, .timeout = 10)
{
	struct kprobe kp = { .symbol_name = "census_fn", .pre_handler = empty_pre };
	struct sigaction sa, old;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = program_handler;
	cr_assert_eq(sigaction(SIGRTMAX - 2, &sa, NULL), 0);
	cr_assert_eq(raise(SIGRTMAX - 2), 0);
	cr_assert_eq(program_got, 1);
	cr_assert_eq(sigaction(SIGRTMAX - 2, NULL, &old), 0);
	cr_assert_eq(old.sa_handler, program_handler);

	pthread_t th;

	cr_assert_eq(pthread_create(&th, NULL, spinner, NULL), 0);
	kprobes_set_optimization(true);
	cr_assert_eq(register_kprobe(&kp), 0);
	for (int i = 0; i < 3000 && !(kp.flags & KPROBE_FLAG_OPTIMIZED); i++)
		usleep(1000);
	cr_assert(kp.flags & KPROBE_FLAG_OPTIMIZED, "not optimized");
	cr_assert_eq(census_fn(2), 7);
	unregister_kprobe(&kp);
	stop = 1;
	pthread_join(th, NULL);
	cr_assert_eq(program_got, 1, "the census reached the program's handler");
	cr_assert_eq(raise(SIGRTMAX - 2), 0);
	cr_assert_eq(program_got, 2);
}
