/* A known call chain built without frame pointers (-O2
 * -fomit-frame-pointer), for kprobe trace --stack, count --stacks and
 * ustack: stack_leaf is reached from main through stack_top and stack_mid
 * TOP times, and through stack_side SIDE times (cli_stack [TOP [SIDE]]). */
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone))

volatile int sink;

NOINLINE int stack_leaf(int x)
{
	sink += x;
	return sink;
}

/* The work after each call keeps it from being a tail call. */
NOINLINE int stack_mid(int x)
{
	int r = stack_leaf(x + 1);

	sink += r;
	return r * 3;
}

NOINLINE int stack_top(int x)
{
	int r = stack_mid(x * 2);

	sink -= r;
	return r + 1;
}

NOINLINE int stack_side(int x)
{
	int r = stack_leaf(x);

	sink ^= r;
	return r - 2;
}

int main(int argc, char **argv)
{
	int top = argc > 1 ? atoi(argv[1]) : 3, side = argc > 2 ? atoi(argv[2]) : 2;

	for (int i = 0; i < top; i++)
		stack_top(i);
	for (int i = 0; i < side; i++)
		stack_side(i);
	return sink == 12345 ? 1 : 0;
}
