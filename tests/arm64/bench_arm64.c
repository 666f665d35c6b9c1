/*
 * The overhead rows on arm64, in the emulator: ns per call of a tiny
 * function, bare and probed every way the arm64 backend offers, with the
 * ratios to `call` and to a bare BRK trap (`brk`: the kernel's SIGTRAP
 * round trip and nothing of the library) measured in the same run, as
 * kprobes-bench prints them on x86-64.  Under emulation only these ratios
 * mean anything.  Built as a Criterion suite so that the guest runs it
 * (`make bench-arm64`); it prints "bench:" lines and checks that every
 * probed call was counted.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "kprobes.h"
#include "testutil.h"
#include "helpers_a64.h"

void a64_bare_brk(void);
__asm__(".text\n.globl a64_bare_brk\n.type a64_bare_brk, %function\n.p2align 4\n"
	"a64_bare_brk:\n\tbrk #0x77\n\tret\n.size a64_bare_brk, . - a64_bare_brk\n");

#define REPS 5

static long (*volatile add_fn)(long, long) = a64_add;
static void (*volatile brk_fn)(void) = a64_bare_brk;
static volatile long count;

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double per_call(long n, bool brk)
{
	double best = 0;

	for (int r = 0; r < REPS; r++) {
		double t0 = now_ns(), t;

		for (long i = 0; i < n; i++) {
			if (brk)
				brk_fn();
			else
				add_fn(i, 1);
		}
		t = (now_ns() - t0) / n;
		if (!r || t < best)
			best = t;
	}
	return best;
}

/* The bare BRK's handler, installed with the raw system call (not through
 * the library's interposed sigaction): resume after the BRK. */
struct ksigaction {
	void (*handler)(int, siginfo_t *, void *);
	unsigned long flags;
	void (*restorer)(void);
	unsigned long mask;
};

static void bare_trap(int sig, siginfo_t *si, void *ctx)
{
	((ucontext_t *)ctx)->uc_mcontext.pc += 4;
	count++;
}

static int pre(struct kprobe *p, struct pt_regs *regs)
{
	count++;
	return 0;
}

static void post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
}

static int ret_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	count++;
	return 0;
}

static long jp_entry(long a, long b)
{
	count++;
	jprobe_return();
	return 0;
}

static void report(const char *name, double ns, double call, double brk)
{
	printf("bench: %-8s %10.1f ns  %7.2fx call  %6.2fx brk\n", name, ns, ns / call,
	       ns / brk);
	fflush(stdout);
}

Test(arm64_bench, overhead_rows, .timeout = 110)
{
	const long calls = 200000, traps = 3000;
	struct ksigaction ksa = { .handler = bare_trap, .flags = SA_SIGINFO }, old;
	double call, brk, ns;

	call = per_call(calls, false);
	cr_assert_eq(syscall(SYS_rt_sigaction, SIGTRAP, &ksa, &old, 8), 0);
	count = 0;
	brk = per_call(traps, true);
	cr_assert_eq(count, REPS * traps);
	cr_assert_eq(syscall(SYS_rt_sigaction, SIGTRAP, &old, NULL, 8), 0);
	report("call", call, call, brk);
	report("brk", brk, call, brk);
	{
		struct kprobe kp = { .addr = AT(a64_add, 0), .pre_handler = pre };

		cr_assert_eq(register_kprobe(&kp), 0);
		count = 0;
		ns = per_call(traps, false);
		unregister_kprobe(&kp);
		cr_assert_eq(count, REPS * traps);
		report("k", ns, call, brk);
	}
	{
		struct kprobe kp = { .addr = AT(a64_add, 16), .pre_handler = pre };

		cr_assert_eq(register_kprobe(&kp), 0);
		count = 0;
		ns = per_call(traps, false);
		unregister_kprobe(&kp);
		cr_assert_eq(count, REPS * traps);
		report("k_sim", ns, call, brk);
	}
	{
		struct kprobe kp = { .addr = AT(a64_add, 0), .pre_handler = pre,
				     .post_handler = post };

		cr_assert_eq(register_kprobe(&kp), 0);
		count = 0;
		ns = per_call(traps, false);
		unregister_kprobe(&kp);
		cr_assert_eq(count, REPS * traps);
		report("kp", ns, call, brk);
	}
	{
		struct kretprobe rp = { .kp.addr = AT(a64_add, 0), .handler = ret_handler,
					.maxactive = 4 };

		cr_assert_eq(register_kretprobe(&rp), 0);
		count = 0;
		ns = per_call(traps, false);
		unregister_kretprobe(&rp);
		cr_assert_eq(count, REPS * traps);
		report("r", ns, call, brk);
	}
	{
		struct jprobe jp = { .kp.addr = AT(a64_add, 0), .entry = (void *)jp_entry };

		cr_assert_eq(register_jprobe(&jp), 0);
		count = 0;
		ns = per_call(traps, false);
		unregister_jprobe(&jp);
		cr_assert_eq(count, REPS * traps);
		report("j", ns, call, brk);
	}
}
