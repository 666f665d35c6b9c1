/* Reproduction: the optimizer's census misses a thread whose interrupted
 * context is inside the region a jump replaces (or inside an out-of-line
 * slot) while the thread runs one of the program's signal handlers.
 *
 *   repro-census region   thread stopped between the two instructions the
 *                         jump replaces
 *   repro-census slot     thread stopped in the boosted probe's slot, which
 *                         then jumps back into the middle of the jump
 *
 * A worker spins through rp_fn.  Its SIGUSR1 handler, when it finds it
 * interrupted where asked, parks until the main thread has optimized the
 * probe (the census sees the worker in its handler: "outside"), then
 * returns into code that no longer exists.  Exit 0: the library waited or
 * otherwise coped; 1: the jump was installed under the parked thread (it
 * dies with SIGSEGV/SIGILL right after, or computes garbage).
 */
#include <kprobes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "core/internal.h"

/*   rp_fn+0 cmp $1,%rdi (4)  +4 jg 1f (2)  +6 lea 1(%rdi),%rax (4)  +10 ret
 *   1: +11 lea 2(%rdi),%rax  +15 ret */
__asm__(".text\n.p2align 4, 0xcc\n"
	".globl rp_fn\n.type rp_fn,@function\nrp_fn:\n"
	"\tcmp $1, %rdi\n\tjg 1f\n\tlea 1(%rdi), %rax\n\tret\n"
	"1:\tlea 2(%rdi), %rax\n\tret\n"
	".size rp_fn, .-rp_fn\n.p2align 4, 0xcc\n");
long rp_fn(long x);

static long (*volatile call_fn)(long) = rp_fn;
static volatile int parked, release, slot_mode;
static volatile long bad;

static int pre(struct kprobe *p, struct pt_regs *regs)
{
	return 0;
}

extern char __executable_start[], etext[];

/* Region: right after the cmp.  Slot: code outside the executable yet
 * within 2 GiB of it (libc and the stacks are farther with ASLR). */
static bool wanted(uintptr_t ip)
{
	uintptr_t f = (uintptr_t)rp_fn;
	bool in_exe = ip >= (uintptr_t)__executable_start && ip < (uintptr_t)etext;

	if (!slot_mode)
		return ip == f + 4;
	return !in_exe && ip > f - (1UL << 31) && ip < f + (1UL << 31);
}

static void on_usr1(int sig, siginfo_t *si, void *ctx)
{
	uintptr_t ip = (uintptr_t)((ucontext_t *)ctx)->uc_mcontext.gregs[REG_RIP];

	if (parked || !wanted(ip))
		return;
	parked = 1;
	while (!release)
		;
}

static void *worker(void *arg)
{
	sigset_t s;

	sigemptyset(&s);
	sigaddset(&s, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &s, NULL);
	for (long i = 0;; i++)
		if (call_fn(i & 3) != ((i & 3) > 1 ? (i & 3) + 2 : (i & 3) + 1))
			bad++;
	return NULL;
}

static void flush(void)
{
	pthread_mutex_lock(&kp_registry_lock);
	kp_optimizer_flush();
	pthread_mutex_unlock(&kp_registry_lock);
}

int main(int argc, char **argv)
{
	struct kprobe kp = { .addr = (kprobe_opcode_t *)rp_fn, .pre_handler = pre };
	struct sigaction sa;
	pthread_t th;
	sigset_t s;

	slot_mode = argc > 1 && !strcmp(argv[1], "slot");
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_usr1;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	sigemptyset(&s);
	sigaddset(&s, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	kprobes_set_optimization(false);
	if (slot_mode && register_kprobe(&kp))	/* boosted: cmp runs in a slot */
		return 2;
	pthread_create(&th, NULL, worker, NULL);
	for (long n = 0; !parked; n++) {
		pthread_kill(th, SIGUSR1);
		if (n > 50000000)
			return printf("never caught the worker there\n"), 2;
	}
	if (!slot_mode && register_kprobe(&kp))
		return 2;
	kprobes_set_optimization(true);
	for (int i = 0; i < 200 && !(kp.flags & KPROBE_FLAG_OPTIMIZED); i++) {
		flush();
		usleep(1000);
	}
	bool under = kp.flags & KPROBE_FLAG_OPTIMIZED;

	printf("worker parked in %s; probe %s\n", slot_mode ? "the slot" : "the region",
	       under ? "OPTIMIZED under it" : "not optimized (ok)");
	fflush(stdout);
	release = 1;
	/* Once the worker has left, the jump may go in: it must keep working. */
	usleep(100000);
	for (int i = 0; i < 200 && !(kp.flags & KPROBE_FLAG_OPTIMIZED); i++) {
		flush();
		usleep(1000);
	}
	usleep(50000);
	printf("worker survived, %ld wrong results; probe %s afterwards\n", bad,
	       kp.flags & KPROBE_FLAG_OPTIMIZED ? "optimized" : "not optimized");
	fflush(stdout);
	unregister_kprobe(&kp);
	return under || bad ? 1 : 0;
}
