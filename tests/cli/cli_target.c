/* A program for the kprobe CLI tests: known functions called a known number
 * of times, in the modes the tests need (see usage()). */
#define _GNU_SOURCE	/* dl_iterate_phdr() */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <kprobes/tracepoint.h>

#define PROBED __attribute__((noinline, noclone, used))

/* Static tracepoints: a NOP each until the tool attaches. */
KPROBES_TRACEPOINT(cli, order, (int, id), (const char *, item), (double, price),
		   (unsigned short, qty), (float, weight));
KPROBES_TRACEPOINT(cli, tick, (unsigned long, n));

volatile long sink;

PROBED long target_add(long a, long b)
{
	sink += a;
	return a + b;
}

PROBED int target_greet(const char *who, int times)
{
	/* who is only passed on: the tests give it bad pointers too. */
	sink += (long)who;
	return times * 10;
}

PROBED void target_spin_ns(long ns)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do
		clock_gettime(CLOCK_MONOTONIC, &t);
	while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < ns);
}

/* Integer and floating-point arguments interleaved: n and k arrive in rdi
 * and rsi, x and y in xmm0 and xmm1; the result in xmm0. */
PROBED double target_scale(long n, double x, int k, double y)
{
	sink += n;
	return x * (double)n + y * k;
}

PROBED long target_recurse(long n)
{
	return n <= 0 ? 0 : 1 + target_recurse(n - 1);
}

/* FILE:LINE tests probe line 1003 (the multiplication). */
#line 1000 "cli_target.c"
PROBED long target_lines(long x)
{
	long y = x * 3;
	sink += y;
	return y;
}

/* Line 2003 is one statement in several line-table rows (the loop's
 * start, test and step); line 2009 is inlined into two callers. */
#line 2000 "cli_target.c"
PROBED long target_loop_line(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++) s += i * sink;
	return s;
}

static inline __attribute__((always_inline)) long twice(long v)
{
	return 2 * v + sink;
}

PROBED long target_inlined_a(long v)
{
	return twice(v) + 1;
}

PROBED long target_inlined_b(long v)
{
	return twice(v) - 1;
}
/* The threads of `threads T N` all live from before the first call of
 * any of them to after the last: T threads at once. */
static pthread_barrier_t threads_start, threads_end;

static void *thread_main(void *arg)
{
	long n = (long)arg;

	pthread_barrier_wait(&threads_start);
	for (long i = 0; i < n; i++)
		target_add(i, 1);
	pthread_barrier_wait(&threads_end);
	return NULL;
}

/* Threads checking every result of target_add for seconds: a probe that
 * corrupted a register or the stack would make one of them fail. */
static volatile int busy_failed;
static volatile sig_atomic_t busy_stop;

/* SIGUSR1 ends the busy threads early: a test that has seen what it
 * waited for need not wait out the time it allowed for it. */
static void on_busy_stop(int sig)
{
	(void)sig;
	busy_stop = 1;
}

static void *busy_main(void *arg)
{
	long seconds = (long)arg;
	time_t end = time(NULL) + seconds;
	long i = 0;

	while (time(NULL) < end && !busy_failed && !busy_stop) {
		for (int k = 0; k < 1000; k++, i++)
			if (target_add(i, 7) != i + 7)
				busy_failed = 1;
	}
	return NULL;
}

/* As busy_main, with every signal blocked, as thread pools often do. */
static void *masked_main(void *arg)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	return busy_main(arg);
}

static int run_busy(int nthreads, long seconds, bool masked)
{
	pthread_t th[64];

	if (nthreads > 64)
		nthreads = 64;
	signal(SIGUSR1, on_busy_stop);
	for (int i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, masked ? masked_main : busy_main, (void *)seconds);
	/* Tools may attach now (the tests wait for this line). */
	fprintf(stderr, "started\n");
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	printf(busy_failed ? "busy BAD\n" : "busy ok\n");
	return busy_failed;
}

/* Threads one after another, each calling target_add calls times: more
 * threads over a run than the session has rings. */
static int run_seqthreads(int nthreads, long calls)
{
	pthread_barrier_init(&threads_start, NULL, 1);
	pthread_barrier_init(&threads_end, NULL, 1);
	for (int i = 0; i < nthreads; i++) {
		pthread_t th;

		if (pthread_create(&th, NULL, thread_main, (void *)calls)) {
			fprintf(stderr, "cannot create thread %d\n", i);
			_exit(1);
		}
		pthread_join(th, NULL);
	}
	printf("threads done\n");
	return 0;
}

static int run_threads(int nthreads, long calls)
{
	static pthread_t th[1024];
	pthread_attr_t attr;

	if (nthreads < 1)
		nthreads = 1;
	if (nthreads > 1024)
		nthreads = 1024;
	pthread_barrier_init(&threads_start, NULL, (unsigned int)nthreads);
	pthread_barrier_init(&threads_end, NULL, (unsigned int)nthreads);
	/* Small stacks: a thousand threads in little memory. */
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 << 10);
	for (int i = 0; i < nthreads; i++)
		if (pthread_create(&th[i], &attr, thread_main, (void *)calls)) {
			fprintf(stderr, "cannot create thread %d\n", i);
			_exit(1);
		}
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	printf("threads done\n");
	return 0;
}

/* Prints "tick N sum S" lines where S is the sum of target_add results so
 * far: a probe that disturbed the program would show in the numbers. */
static int run_loop(long ticks)
{
	long sum = 0;

	for (long i = 0; ticks <= 0 || i < ticks; i++) {
		struct timespec ts = { 0, 5 * 1000 * 1000 };

		sum = target_add(sum, i);
		printf("tick %ld sum %ld\n", i, sum);
		fflush(stdout);
		nanosleep(&ts, NULL);
	}
	return 0;
}

static int run_dlopen(const char *path, long calls, long delay_ms)
{
	struct timespec ts = { delay_ms / 1000, (delay_ms % 1000) * 1000000L };
	long (*fn)(long);
	void *h;

	/* Time for a tool to attach first. */
	if (delay_ms > 0) {
		printf("waiting\n");
		fflush(stdout);
		nanosleep(&ts, NULL);
	}
	h = dlopen(path, RTLD_NOW);

	if (!h) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 3;
	}
	fn = (long (*)(long))dlsym(h, "plugin_work");
	for (long i = 0; i < calls; i++)
		sink += fn(i);
	printf("plugin done\n");
	return 0;
}

/* Loads, calls and unloads the plugin, cycles times. */
static int run_dlcycle(const char *path, long cycles)
{
	for (long i = 0; i < cycles; i++) {
		void *h = dlopen(path, RTLD_NOW);
		long (*fn)(long);

		if (!h) {
			fprintf(stderr, "dlopen: %s\n", dlerror());
			return 3;
		}
		fn = (long (*)(long))dlsym(h, "plugin_work");
		sink += fn(i);
		dlclose(h);
	}
	printf("cycles done\n");
	return 0;
}

static int walk_first(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)info;
	(void)size;
	(void)arg;
	return 1;
}

/* cycles dlopen()/dlclose() pairs, then walks calls to dl_iterate_phdr():
 * the program's only calls of it. */
static int run_dlwalk(const char *path, long cycles, long walks)
{
	int ret = run_dlcycle(path, cycles);

	for (long i = 0; i < walks && !ret; i++)
		sink += dl_iterate_phdr(walk_first, NULL);
	return ret;
}

static int run_fork(long calls)
{
	pid_t child = fork();
	int status;

	if (child == 0) {
		for (long i = 0; i < calls; i++)
			target_add(i, 2);
		_exit(7);
	}
	for (long i = 0; i < calls; i++)
		target_add(i, 3);
	waitpid(child, &status, 0);
	printf("child status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	return 0;
}

/* Fires the tracepoints n times with values the tests recompute. */
static int run_tracepoints(long n)
{
	static const char *const items[] = { "apple", "pear", "fig" };
	long sum = 0;

	for (long i = 0; i < n; i++) {
		trace_cli_order((int)i - 5, items[i % 3], (double)i * 0.5, (unsigned short)(i + 65530),
				(float)i / 4);
		trace_cli_tick((unsigned long)i);
		sum += i;
	}
	printf("tp sum %ld\n", sum);
	return 0;
}

/* Ticks like run_loop, firing cli:tick: for attaching. */
static int run_tp_loop(void)
{
	for (unsigned long i = 0;; i++) {
		struct timespec ts = { 0, 5 * 1000 * 1000 };

		trace_cli_tick(i);
		printf("tick %lu\n", i);
		fflush(stdout);
		nanosleep(&ts, NULL);
	}
	return 0;
}

static void usage(void)
{
	fputs("usage: cli_target calls N | threads T N | seqthreads T N | busy T SECONDS |\n"
	      "       masked T SECONDS | greet | spin NS N | recurse N |\n"
	      "       lines N | statements N | loop [TICKS] | dlopen LIB N [DELAY_MS] |\n"
	      "       dlcycle LIB N | dlwalk LIB N M | fork N | exec N | spawn N | narrow | float [N] | dlsym NAME... | exit CODE |\n"
	      "       kill SIG | tp N | tploop\n",
	      stderr);
	exit(64);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	long a = argc > 2 ? atol(argv[2]) : 0, b = argc > 3 ? atol(argv[3]) : 0;

	if (!strcmp(mode, "calls")) {
		long sum = 0;

		for (long i = 0; i < a; i++)
			sum += target_add(i, 2 * i);
		printf("sum %ld\n", sum);
		return 0;
	}
	if (!strcmp(mode, "threads"))
		return run_threads((int)a, b);
	if (!strcmp(mode, "seqthreads"))
		return run_seqthreads((int)a, b);
	if (!strcmp(mode, "busy"))
		return run_busy((int)a, b, false);
	if (!strcmp(mode, "masked"))
		return run_busy((int)a, b, true);
	if (!strcmp(mode, "greet")) {
		int x = target_greet("hello", 3);
		int y = target_greet((const char *)1, 4);

		printf("%d %d\n", x, y);
		return 0;
	}
	if (!strcmp(mode, "spin")) {
		for (long i = 0; i < b; i++)
			target_spin_ns(a);
		return 0;
	}
	if (!strcmp(mode, "recurse")) {
		printf("%ld\n", target_recurse(a));
		return 0;
	}
	if (!strcmp(mode, "lines")) {
		for (long i = 0; i < a; i++)
			target_lines(i);
		return 0;
	}
	if (!strcmp(mode, "statements")) {
		for (long i = 0; i < a; i++)
			sink += target_loop_line(4) + target_inlined_a(i) + target_inlined_b(i);
		return 0;
	}
	if (!strcmp(mode, "loop"))
		return run_loop(a);
	if (!strcmp(mode, "dlopen") && argc > 3)
		return run_dlopen(argv[2], b, argc > 4 ? atol(argv[4]) : 0);
	if (!strcmp(mode, "dlcycle") && argc > 3)
		return run_dlcycle(argv[2], b);
	if (!strcmp(mode, "dlwalk") && argc > 4)
		return run_dlwalk(argv[2], b, atol(argv[4]));
	if (!strcmp(mode, "tp"))
		return run_tracepoints(a);
	if (!strcmp(mode, "tploop"))
		return run_tp_loop();
	if (!strcmp(mode, "fork"))
		return run_fork(a);
	if (!strcmp(mode, "dlsym")) {	/* what the program's own lookups find */
		for (int i = 2; i < argc; i++)
			printf("%s: %s\n", argv[i], dlsym(RTLD_DEFAULT, argv[i]) ? "found" : "absent");
		return 0;
	}
	if (!strcmp(mode, "float")) {
		double sum = 0;

		for (long i = 0; i < (a ? a : 1); i++)
			sum += target_scale(3, 1.5, 2, 0.25);
		printf("%g\n", sum);
		return 0;
	}
	if (!strcmp(mode, "narrow")) {	/* values whose low bits differ by type */
		printf("%ld\n", target_add(-2, 0x1ffff80));
		return 0;
	}
	if (!strcmp(mode, "spawn")) {	/* a child process that runs "calls N" */
		char n[32];
		pid_t child;
		int status;

		target_add(1, 1);
		snprintf(n, sizeof(n), "%ld", a);
		child = fork();
		if (child == 0) {
			execl("/proc/self/exe", argv[0], "calls", n, (char *)NULL);
			_exit(3);
		}
		waitpid(child, &status, 0);
		return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
	}
	if (!strcmp(mode, "exec")) {
		char n[32];

		target_add(1, 1);
		snprintf(n, sizeof(n), "%ld", a);
		execl("/proc/self/exe", argv[0], "calls", n, (char *)NULL);
		return 3;
	}
	if (!strcmp(mode, "exit"))
		return (int)a;
	if (!strcmp(mode, "kill")) {
		fflush(stdout);
		raise((int)a);
		return 0;
	}
	usage();
	return 64;
}
