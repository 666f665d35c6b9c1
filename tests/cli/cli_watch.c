/* A program for the end-to-end tests of kprobe watch (tests/test_cli_watch.c).
 *
 *   cli_watch writes    stores to `watched` from two functions and threads
 *   cli_watch reads     loads `watched` 30 times, then one store
 *   cli_watch sizes     stores to the 2-byte `half`, and next to it
 *   cli_watch loop      prints "ready", then stores to `watched` every 5 ms
 *
 * The accessing instructions are in assembly so their offsets are known
 * (tests/test_cli_watch.c names them):
 *   x86-64: store_a+0x0  mov %rdi, watched(%rip)
 *           store_b+0x1  mov %rdi, watched(%rip)   (after a nop)
 *           load_c+0x0   mov watched(%rip), %rax
 *   arm64:  store_a+0x4  str x0, [x1, :lo12:watched]   (after its adrp)
 *           store_b+0x8  str x0, [x1]                  (after adrp, add)
 *           load_c+0x4   ldr x0, [x1, :lo12:watched] */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
__asm__(".text\n"
	".globl store_a\n.type store_a,@function\n"
	"store_a:\n\tmov %rdi, watched(%rip)\n\tret\n.size store_a, .-store_a\n"
	".globl store_b\n.type store_b,@function\n"
	"store_b:\n\tnop\n\tmov %rdi, watched(%rip)\n\tret\n.size store_b, .-store_b\n"
	".globl load_c\n.type load_c,@function\n"
	"load_c:\n\tmov watched(%rip), %rax\n\tret\n.size load_c, .-load_c\n");
#elif defined(__aarch64__)
__asm__(".text\n"
	".globl store_a\n.type store_a,%function\n"
	"store_a:\n\tadrp x1, watched\n\tstr x0, [x1, :lo12:watched]\n\tret\n"
	".size store_a, .-store_a\n"
	".globl store_b\n.type store_b,%function\n"
	"store_b:\n\tadrp x1, watched\n\tadd x1, x1, :lo12:watched\n\tstr x0, [x1]\n\tret\n"
	".size store_b, .-store_b\n"
	".globl load_c\n.type load_c,%function\n"
	"load_c:\n\tadrp x1, watched\n\tldr x0, [x1, :lo12:watched]\n\tret\n"
	".size load_c, .-load_c\n");
#endif

void store_a(long v);
void store_b(long v);
long load_c(void);

long watched __attribute__((aligned(8)));
short half_before, half, half_after;
volatile long sink;

static void *writer(void *arg)
{
	for (long i = 0; i < 200; i++)
		store_a(i);
	return arg;
}

static int writes(void)
{
	pthread_t t[3];

	for (long i = 0; i < 100; i++)
		store_a(i);
	for (int i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, writer, NULL);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	for (long i = 1; i <= 50; i++)
		store_b(1000 + i);
	return 0;
}

static int reads(void)
{
	for (int i = 0; i < 30; i++)
		sink += load_c();
	store_b(7);
	return 0;
}

static int sizes(void)
{
	for (int i = 0; i < 5; i++) {
		*(volatile short *)&half = (short)i;
		*(volatile short *)&half_before = (short)i;
		*(volatile short *)&half_after = (short)i;
	}
	return 0;
}

static __attribute__((noreturn)) void loop(void)
{
	struct timespec ts = { 0, 5000000 };

	printf("ready\n");
	fflush(stdout);
	for (long i = 0;; i++) {
		store_a(i);
		nanosleep(&ts, NULL);
	}
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	if (!strcmp(mode, "writes"))
		return writes();
	if (!strcmp(mode, "reads"))
		return reads();
	if (!strcmp(mode, "sizes"))
		return sizes();
	if (!strcmp(mode, "loop"))
		loop();
	fprintf(stderr, "usage: cli_watch writes|reads|sizes|loop\n");
	return 2;
}
