/* A known call chain built without frame pointers (-O2
 * -fomit-frame-pointer), for kprobe trace --stack, count --stacks and
 * ustack: stack_leaf is reached from main through stack_top and stack_mid
 * TOP times, and through stack_side SIDE times, by each of THREADS threads
 * (cli_stack [TOP [SIDE [THREADS]]], THREADS 0: main does it alone).
 * The LINE_ comments mark the lines --lines must name. */
#include <pthread.h>
#include <stdlib.h>

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

NOINLINE void *stack_run(void *arg)
{
	for (int i = 0; i < top; i++)
		stack_top(i);
	for (int i = 0; i < side; i++)
		stack_side(i);
	__asm__ volatile("" ::: "memory");
	return arg;
}

int main(int argc, char **argv)
{
	int threads = argc > 3 ? atoi(argv[3]) : 0;
	pthread_t t[16];

	top = argc > 1 ? atoi(argv[1]) : 3;
	side = argc > 2 ? atoi(argv[2]) : 2;
	if (threads > 16)
		threads = 16;
	if (!threads)
		stack_run(NULL);
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, stack_run, NULL);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	return sink == 12345 ? 1 : 0;
}
