/*
 * kprobe_example: the classic Kprobes sample, in user space.
 *
 * Puts a probe on the first instruction of a function of this program;
 * the pre handler prints the probed address, ip and flags before the
 * instruction runs, the post handler ip and flags after it.
 *
 *   build/examples/kprobe_example [SYMBOL]   (default: do_work)
 */
#include <kprobes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char symbol[64] = "do_work";

static struct kprobe kp = {
	.symbol_name = symbol,
};

/* Handlers may run in a signal handler: use write(2), not stdio. */
static void say(const char *fmt, unsigned long a, unsigned long b, unsigned long c)
{
	char buf[160];
	int n = snprintf(buf, sizeof(buf), fmt, a, b, c);

	if (write(STDOUT_FILENO, buf, (size_t)n) < 0)
		return;
}

static int handler_pre(struct kprobe *p, struct pt_regs *regs)
{
	say("pre_handler: p->addr = 0x%lx, ip = %lx, flags = 0x%lx\n",
	    (unsigned long)p->addr, regs->ip, regs->flags);
	return 0;
}

static void handler_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
	say("post_handler: p->addr = 0x%lx, ip = %lx, flags = 0x%lx\n",
	    (unsigned long)p->addr, regs->ip, regs->flags);
}

static int handler_fault(struct kprobe *p, struct pt_regs *regs, int trapnr)
{
	say("fault_handler: p->addr = 0x%lx, trap #%lu%.0lu\n", (unsigned long)p->addr,
	    (unsigned long)trapnr, (unsigned long)"");
	return 0;
}

long do_work(long n);
__attribute__((noinline)) long do_work(long n)
{
	long s = 0;

	for (long i = 0; i < n; i++)
		s += i * i;
	return s;
}

int main(int argc, char **argv)
{
	int ret;

	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc > 1)
		snprintf(symbol, sizeof(symbol), "%s", argv[1]);
	kp.pre_handler = handler_pre;
	kp.post_handler = handler_post;
	kp.fault_handler = handler_fault;
	ret = register_kprobe(&kp);
	if (ret < 0) {
		fprintf(stderr, "register_kprobe failed, returned %d (%s)\n", ret, strerror(-ret));
		return 1;
	}
	printf("Planted kprobe at %p\n", (void *)kp.addr);
	kprobes_list(stdout);
	for (int i = 1; i <= 3; i++)
		printf("do_work(%d) = %ld\n", i * 10, do_work(i * 10));
	unregister_kprobe(&kp);
	printf("kprobe at %p unregistered, missed %lu\n", (void *)kp.addr, kp.nmissed);
	return 0;
}
