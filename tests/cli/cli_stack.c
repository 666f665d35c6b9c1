/* A known call chain built without frame pointers (-O2
 * -fomit-frame-pointer), for kprobe trace --stack, count --stacks and
 * ustack: stack_leaf is reached from main through stack_top and stack_mid
 * TOP times, and through stack_side SIDE times, by each of THREADS threads
 * (cli_stack [TOP [SIDE [THREADS [SIGNALS]]]], THREADS 0: main does it
 * alone).  With SIGNALS, main sends each thread SIGUSR1 that many times
 * while they run, whose handler calls stack_leaf through stack_on_signal,
 * and prints "signals N" (the handler's runs) on stderr at the end.
 * The LINE_ comments mark the lines --lines must name. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

volatile int sink;
static int top = 3, side = 2;

NOINLINE int stack_leaf(int x)
{
	sink += x;	/* LINE_LEAF */
	return sink;
}

/* The work after each call keeps it from being a tail call. */
NOINLINE int stack_mid(int x)
{
	int r = stack_leaf(x + 1);	/* LINE_MID */

	sink += r;
	return r * 3;
}

NOINLINE int stack_top(int x)
{
	int r = stack_mid(x * 2);	/* LINE_TOP */

	sink -= r;
	return r + 1;
}

NOINLINE int stack_side(int x)
{
	int r = stack_leaf(x);	/* LINE_SIDE */

	sink ^= r;
	return r - 2;
}

static unsigned long signal_runs;
static int running;

NOINLINE int stack_on_signal(int x)
{
	int r = stack_leaf(x);

	sink += r;
	return r;
}

static void on_signal(int sig)
{
	__atomic_fetch_add(&signal_runs, 1, __ATOMIC_RELAXED);
	stack_on_signal(sig);
}

NOINLINE void *stack_run(void *arg)
{
	for (int i = 0; i < top; i++)
		stack_top(i);
	for (int i = 0; i < side; i++)
		stack_side(i);
	__asm__ volatile("" ::: "memory");
	__atomic_fetch_sub(&running, 1, __ATOMIC_RELEASE);
	return arg;
}

/* Signals to every thread still running, n rounds. */
static void send_signals(pthread_t *t, int threads, int n)
{
	for (int k = 0; k < n && __atomic_load_n(&running, __ATOMIC_ACQUIRE); k++) {
		for (int i = 0; i < threads; i++)
			pthread_kill(t[i], SIGUSR1);
		usleep(200);
	}
}

int main(int argc, char **argv)
{
	int threads = argc > 3 ? atoi(argv[3]) : 0;
	int signals = argc > 4 ? atoi(argv[4]) : 0;
	struct sigaction sa = { .sa_handler = on_signal };
	pthread_t t[16];

	top = argc > 1 ? atoi(argv[1]) : 3;
	side = argc > 2 ? atoi(argv[2]) : 2;
	if (threads > 16)
		threads = 16;
	if (!threads)
		stack_run(NULL);
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	running = threads;
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, stack_run, NULL);
	send_signals(t, threads, signals);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	if (signals)
		fprintf(stderr, "signals %lu\n", __atomic_load_n(&signal_runs, __ATOMIC_RELAXED));
	return sink == 12345 ? 1 : 0;
}
