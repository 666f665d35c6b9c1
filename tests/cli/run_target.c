/* A program for the `kprobe run` tests (tests/run/): functions called a
 * known number of times with known values, in the modes below. */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sdt_probe.h"	/* SDT probe sites without <sys/sdt.h> */

#define PROBED __attribute__((noinline, noclone, used))

volatile long run_sink;

/* calls N: run_value(i % 7, i) for i in 0..N-1; run_value returns a + b. */
PROBED long run_value(long a, long b)
{
	run_sink += a;
	return a + b;
}

/* A string argument (NULL and bad pointers too). */
/* Another name for run_value, as open64 is for open in libc: a glob in a
 * program probes each name (tests/run/programs/aliases.bt). */
long run_sum(long a, long b) __attribute__((alias("run_value")));

PROBED int run_name(const char *name, int n)
{
	run_sink += n;
	return n * 2;
}

PROBED long run_recurse(long n)
{
	if (n <= 0)
		return 0;
	run_sink += n;
	return 1 + run_recurse(n - 1);
}

/* What override() replaces: returns n * 3 unless overridden. */
PROBED long run_check(long n)
{
	run_sink += n;
	return n * 3;
}

PROBED void run_tick(long n)
{
	run_sink += n;
}

/* A NULL-terminated array of strings, as argv (join()). */
PROBED void run_argv(char **v)
{
	run_sink += v[0] != NULL;
}

/* Eight arguments: the last two on the stack (x86-64), sarg0 and sarg1. */
PROBED long run_many(long a, long b, long c, long d, long e, long f, long g, long h)
{
	run_sink += a + b + c + d + e + f + g + h;
	return g * 10 + h;
}

static void *thread_main(void *arg)
{
	long n = (long)arg;

	for (long i = 0; i < n; i++)
		run_value(i % 5, 1);
	return NULL;
}

static int run_threads(int nthreads, long calls)
{
	pthread_t th[64];

	if (nthreads > 64)
		nthreads = 64;
	for (int i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, thread_main, (void *)calls);
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	printf("threads done\n");
	return 0;
}

static volatile sig_atomic_t got_signal;

static void on_usr1(int sig)
{
	(void)sig;
	got_signal++;
}

/* sigthreads T N K: T threads (at most 128) call run_value(i % 5, 1) N
 * times each, then the main thread sends each of them K SIGUSR2, one at a
 * time, waiting for each to be handled; the handler calls run_value(7, 2).
 * Exactly T * (N + K) calls, T * K of them with 7 as first argument.  The
 * signals wait for the calls: one that lands while its thread runs a
 * probe's handler makes the handler's own call a hit the probes miss (as
 * kernel kprobes miss a hit inside a handler), which would make the
 * count vary.  N 0: the threads call until the signals are all sent, K
 * rounds 0.2 ms apart without waiting, so that signals land anywhere,
 * handlers included; prints the calls made. */
#define SIG_THREADS_MAX 128

static volatile long sig_handled[SIG_THREADS_MAX];
static volatile int sig_done;
static __thread int sig_index;

static void on_usr2(int sig)
{
	(void)sig;
	run_value(7, 2);
	sig_handled[sig_index]++;
}

struct sig_thread {
	int index;
	long calls;		/* 0: until sig_done */
	long made;
	volatile int ready, called;
};

static void *sig_thread_main(void *arg)
{
	struct sig_thread *t = arg;

	long i;

	sig_index = t->index;
	t->ready = 1;
	for (i = 0; t->calls ? i < t->calls : !sig_done; i++)
		run_value(i % 5, 1);
	t->made = i;
	t->called = 1;
	while (!sig_done)
		sched_yield();
	return NULL;
}

static int run_sigthreads(int nthreads, long calls, long nsig)
{
	static struct sig_thread st[SIG_THREADS_MAX];
	pthread_t th[SIG_THREADS_MAX];
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr2;
	sigaction(SIGUSR2, &sa, NULL);
	if (nthreads > SIG_THREADS_MAX)
		nthreads = SIG_THREADS_MAX;
	for (int i = 0; i < nthreads; i++) {
		st[i].index = i;
		st[i].calls = calls;
		pthread_create(&th[i], NULL, sig_thread_main, &st[i]);
	}
	for (int i = 0; i < nthreads; i++)
		while (calls ? !st[i].called : !st[i].ready)
			sched_yield();
	for (long k = 0; k < nsig; k++) {
		struct timespec gap = { 0, 200000 };

		for (int i = 0; i < nthreads; i++) {
			pthread_kill(th[i], SIGUSR2);
			/* N 0: a storm (pending signals merge, the handler
			 * counts what ran), else exactly K each */
			while (calls && sig_handled[i] <= k)
				sched_yield();
		}
		if (!calls)
			nanosleep(&gap, NULL);
	}
	long total = 0;

	sig_done = 1;
	for (int i = 0; i < nthreads; i++) {
		pthread_join(th[i], NULL);
		total += st[i].made + sig_handled[i];
	}
	printf("calls %ld\n", total);
	return 0;
}

/* sdt N [MS]: N rounds, MS apart, of two SDT probes, demo:req (operands 1000 + i in a
 * register, -(i % 3) in memory, the constant 7), which fires only while
 * its semaphore is raised, and demo:name (a string, i, 0) always; prints
 * how many rounds found the semaphore raised. */
__attribute__((section(".probes"), used)) volatile unsigned short run_req_semaphore;

static void run_sdt(long n, long ms)
{
	static const char *const names[] = { "alpha", "beta", "gamma" };
	long enabled = 0;

	for (long i = 0; i < n; i++) {
		int neg = (int)-(i % 3);

		if (run_req_semaphore) {
			enabled++;
			SDT_PROBE3(demo, req, run_req_semaphore, "r", 1000 + i, "m", neg, "n", 7);
		}
		SDT_PROBE3(demo, name, 0, "r", names[i % 3], "r", i, "n", 0);
		if (ms) {
			struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

			nanosleep(&ts, NULL);
		}
	}
	printf("sdt enabled %ld of %ld\n", enabled, n);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	long a = argc > 2 ? atol(argv[2]) : 0, b = argc > 3 ? atol(argv[3]) : 0;

	if (!strcmp(mode, "calls")) {
		long sum = 0;

		for (long i = 0; i < a; i++)
			sum += run_value(i % 7, i);
		printf("sum %ld\n", sum);
		return 0;
	}
	if (!strcmp(mode, "names")) {
		run_name("alpha", 1);
		run_name("beta", 2);
		run_name(NULL, 3);
		run_name((const char *)16, 4);
		run_name("gamma", 5);
		return 0;
	}
	if (!strcmp(mode, "threads"))
		return run_threads((int)a, b);
	if (!strcmp(mode, "sigthreads"))
		return run_sigthreads((int)a, b, argc > 4 ? atol(argv[4]) : 0);
	if (!strcmp(mode, "recurse")) {
		printf("depth %ld\n", run_recurse(a));
		return 0;
	}
	if (!strcmp(mode, "check")) {
		for (long i = 1; i <= 3; i++)
			printf("check %ld = %ld\n", i, run_check(i));
		return 0;
	}
	if (!strcmp(mode, "signal")) {
		signal(SIGUSR1, on_usr1);
		for (long i = 0; i < 3; i++)
			run_tick(i);
		printf("signals %d\n", (int)got_signal);
		return 0;
	}
	if (!strcmp(mode, "ticks")) {	/* ticks N MS: N calls, MS apart */
		for (long i = 0; i < a; i++) {
			struct timespec ts = { b / 1000, (b % 1000) * 1000000L };

			run_tick(i);
			nanosleep(&ts, NULL);
		}
		return 0;
	}
	if (!strcmp(mode, "sdt")) {
		run_sdt(a, b);
		return 0;
	}
	if (!strcmp(mode, "argv")) {	/* three arrays: words, 20 strings, none */
		char *words[] = { "one", "two words", "", "three", NULL, "after" };
		char *many[21], *none[] = { NULL };

		for (int i = 0; i < 20; i++)
			many[i] = i % 2 ? "odd" : "even";
		many[20] = NULL;
		run_argv(words);
		run_argv(many);
		run_argv(none);
		return 0;
	}
	if (!strcmp(mode, "many")) {	/* many N: run_many(i, .., i + 7) for i in 0..N-1 */
		for (long i = 0; i < a; i++)
			run_many(i, i + 1, i + 2, i + 3, i + 4, i + 5, i + 6, i + 7);
		return 0;
	}
	fputs("usage: run_target calls N | names | threads T N | sigthreads T N K | recurse N |"
	      " check | signal | ticks N MS | sdt N [MS] | many N | argv\n", stderr);
	return 64;
}
