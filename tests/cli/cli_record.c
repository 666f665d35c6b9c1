/* A program whose calls kprobe record must reproduce exactly (tests/record/
 * run-record.sh):
 *
 *   recurse DEPTH      rec() nested DEPTH + 1 deep, once
 *   threads T N        T threads, each calling leaf() N times
 *   seqthreads T N     the same, one thread after another
 *   longjmp N          N times: outer() -> middle() -> inner(), which
 *                      longjmps back to outer(): middle and inner never return
 *   fork N             leaf() N times in the parent, then N times in a child
 *   exit_in_call       leaf() once, then a thread that exits inside stay()
 *   fib N              fib(20) N times (the full-speed run)
 *   dlopen N LIB       open() N times, then dlopen(LIB): the agent,
 *                      arming its probes on the new object on this thread,
 *                      calls open() too (not the program's calls) */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile long sink;

NOINLINE long leaf(long x)
{
	sink += x;
	return x + 1;
}

NOINLINE int rec(int n)
{
	int v;

	if (n == 0)
		return 0;
	v = rec(n - 1);
	__asm__ volatile("" ::: "memory");
	return v + 1;
}

static jmp_buf jump;

/* Not provably noreturn: inner and middle keep a return, and so their
 * return probes, which a longjmp skips. */
NOINLINE void inner(int i)
{
	sink += i;
	if (i >= 0)
		longjmp(jump, 1);
}

NOINLINE void middle(int i)
{
	inner(i);
	sink++;
}

NOINLINE int outer(int i)
{
	if (setjmp(jump))
		return 1;
	middle(i);
	return 0;
}

NOINLINE long fib(long n)
{
	return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

static long per_thread;

static void *thread_main(void *arg)
{
	(void)arg;
	for (long i = 0; i < per_thread; i++)
		leaf(i);
	return NULL;
}

NOINLINE void stay(int i)
{
	if (i >= 0)
		pthread_exit(NULL);
	sink++;
}

static void *exiting_thread(void *arg)
{
	(void)arg;
	stay(1);
	return NULL;
}

int main(int argc, char **argv)
{
	long n = argc > 2 ? atol(argv[2]) : 1;

	if (argc < 2)
		return 2;
	if (!strcmp(argv[1], "recurse")) {
		printf("%d\n", rec((int)n));
	} else if (!strcmp(argv[1], "threads") && argc > 3) {
		long t = n;
		pthread_t tids[64];

		per_thread = atol(argv[3]);
		for (long i = 0; i < t && i < 64; i++)
			pthread_create(&tids[i], NULL, thread_main, NULL);
		for (long i = 0; i < t && i < 64; i++)
			pthread_join(tids[i], NULL);
	} else if (!strcmp(argv[1], "seqthreads") && argc > 3) {
		pthread_t tid;

		per_thread = atol(argv[3]);
		for (long i = 0; i < n; i++) {
			pthread_create(&tid, NULL, thread_main, NULL);
			pthread_join(tid, NULL);
		}
	} else if (!strcmp(argv[1], "longjmp")) {
		int jumped = 0;

		for (long i = 0; i < n; i++)
			jumped += outer((int)i);
		printf("%d\n", jumped);
	} else if (!strcmp(argv[1], "fork")) {
		pid_t child;
		int status;

		for (long i = 0; i < n; i++)
			leaf(i);
		fflush(stdout);
		child = fork();
		if (child == 0) {
			for (long i = 0; i < n; i++)
				leaf(i);
			_exit(0);
		}
		waitpid(child, &status, 0);
	} else if (!strcmp(argv[1], "exit_in_call")) {
		pthread_t t;

		leaf(1);
		pthread_create(&t, NULL, exiting_thread, NULL);
		pthread_join(t, NULL);
	} else if (!strcmp(argv[1], "fib")) {
		long s = 0;

		for (long i = 0; i < n; i++)
			s += fib(20);
		printf("%ld\n", s);
	} else if (!strcmp(argv[1], "dlopen") && argc > 3) {
		for (long i = 0; i < n; i++)
			close(open("/dev/null", O_RDONLY));
		/* (not closed: dlclose() is libkprobes', and so are its calls) */
		if (!dlopen(argv[3], RTLD_NOW))
			return 1;
	} else {
		return 2;
	}
	return 0;
}
