/* A program for the `kprobe run` tests (tests/run/): functions called a
 * known number of times with known values, in the modes below. */
#include <pthread.h>
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
	fputs("usage: run_target calls N | names | threads T N | recurse N | check | signal |"
	      " ticks N MS | sdt N [MS]\n", stderr);
	return 64;
}
