/*
 * tp_demo: a program with two static tracepoints and nothing else; it
 * calls no libkprobes function, the tracepoints need only the header.
 * They cost a 5-byte NOP each until someone attaches, e.g.
 *
 *   kprobe trace 'tp:shop:order' -- build/examples/tp_demo 5
 *   kprobe count 'tp:shop:order' 'tp:shop:refund' -- build/examples/tp_demo 100000
 *
 *   build/examples/tp_demo [N [USEC]]   N orders (10), USEC between them (0)
 */
#include <kprobes/tracepoint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

KPROBES_TRACEPOINT(shop, order, (int, id), (const char *, item), (double, price));
KPROBES_TRACEPOINT(shop, refund, (int, id), (long, cents));

static const char *const items[] = { "apple", "bread", "cheese", "dates" };

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 10;
	long usec = argc > 2 ? atol(argv[2]) : 0;
	double total = 0;
	long refunds = 0;

	for (long i = 0; i < n; i++) {
		int id = (int)i + 1;
		const char *item = items[i % 4];
		double price = 1.25 * (double)(i % 4 + 1);

		trace_shop_order(id, item, price);
		total += price;
		if (id % 10 == 0) {
			trace_shop_refund(id, -(long)(price * 100));
			total -= price;
			refunds++;
		}
		if (usec)
			usleep((useconds_t)usec);
	}
	printf("%ld orders, %ld refunds, total %.2f\n", n, refunds, total);
	return 0;
}
