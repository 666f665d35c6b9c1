/*
 * kretprobe_example: the classic return-probe sample, in user space.
 *
 * The entry handler stamps the time into the instance's private data; the
 * return handler prints the function's return value and how long it took.
 *
 *   build/examples/kretprobe_example [SYMBOL]   (default: compute)
 */
#include <kprobes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char func_name[64] = "compute";

struct my_data {
	struct timespec entry_stamp;
};

static long ns_between(const struct timespec *a, const struct timespec *b)
{
	return (b->tv_sec - a->tv_sec) * 1000000000L + (b->tv_nsec - a->tv_nsec);
}

static int entry_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct my_data *data = (struct my_data *)ri->data;

	clock_gettime(CLOCK_MONOTONIC, &data->entry_stamp);
	return 0;
}

static int ret_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct my_data *data = (struct my_data *)ri->data;
	struct timespec now;
	char buf[160];
	int n;

	clock_gettime(CLOCK_MONOTONIC, &now);
	n = snprintf(buf, sizeof(buf), "%s returned %ld and took %ld ns to execute\n",
		     func_name, (long)regs_return_value(regs), ns_between(&data->entry_stamp, &now));
	if (write(STDOUT_FILENO, buf, (size_t)n) < 0)
		return 0;
	return 0;
}

static struct kretprobe my_kretprobe = {
	.handler = ret_handler,
	.entry_handler = entry_handler,
	.data_size = sizeof(struct my_data),
	.maxactive = 20,
};

long compute(long n);
__attribute__((noinline)) long compute(long n)
{
	long s = 0;

	for (long i = 0; i < n * 1000; i++)
		s += i % 7;
	return s;
}

int main(int argc, char **argv)
{
	int ret;

	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc > 1)
		snprintf(func_name, sizeof(func_name), "%s", argv[1]);
	my_kretprobe.kp.symbol_name = func_name;
	ret = register_kretprobe(&my_kretprobe);
	if (ret < 0) {
		fprintf(stderr, "register_kretprobe failed, returned %d (%s)\n", ret, strerror(-ret));
		return 1;
	}
	printf("Planted return probe at %s: %p\n", func_name, (void *)my_kretprobe.kp.addr);
	for (long i = 1; i <= 3; i++)
		printf("compute(%ld) = %ld\n", i, compute(i));
	unregister_kretprobe(&my_kretprobe);
	printf("kretprobe at %p unregistered\n", (void *)my_kretprobe.kp.addr);
	printf("Missed probing %d instances of %s\n", my_kretprobe.nmissed, func_name);
	return 0;
}
