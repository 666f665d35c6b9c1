/* kprobes_stack_memo() (src/core/stack.c): a walk that follows the memo of
 * the last stack must give exactly the walk from the tables alone
 * (kp_stack_uncached), and say truly how much of the last stack it kept:
 *
 *  - random call patterns: recursion of random depth through three shapes
 *    of frame (with and without frame pointers), the probed function
 *    called from different callers, through libc's sort, from a signal
 *    handler, with random depth limits;
 *  - a signal arriving in the middle of a capture, whose handler captures
 *    with the same memo (it must find it busy), and one that leaves a
 *    capture by longjmp (the memo stays unused until made again);
 *  - eight threads, each with its memo, while another thread loads and
 *    unloads a library (a new set of tables each time);
 *  - a library unloaded and another one loaded at its address, with the
 *    same code layout but a different frame size: its own frames;
 *  - what the handler analysis makes of it: no vector state to save. */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "arch/arch.h"
#include "core/arch_api.h"
#include "core/internal.h"
#include "core/stack.h"
#include "testutil.h"

TestSuite(memo, .timeout = 60);

#define MAXF 48
#define BARRIER() __asm__ volatile("" : : : "memory")
#define NOFP __attribute__((noinline, noclone, used, optimize("omit-frame-pointer")))
#define WITHFP __attribute__((noinline, noclone, used, optimize("no-omit-frame-pointer")))

static bool same_stacks(const unsigned long *a, int na, const unsigned long *b, int nb)
{
	return na == nb && !memcmp(a, b, (size_t)na * sizeof(*a));
}

/* A memo with the last stack it remembered, to check what kept says. */
struct checked_memo {
	struct kprobes_stack_memo *m;
	unsigned long prev[MAXF];
	int nprev;		/* -1: not known */
	long calls, diffs, kept_wrong, joined, busy;
	/* with a signal handler capturing with the same memo: its count of
	 * captures the memo remembered, and its value when prev was taken */
	const volatile long *intr;
	long prev_intr;
};

static struct kprobes_stack_memo *memo_new(void)
{
	struct kprobes_stack_memo *m = aligned_alloc(8, KPROBES_STACK_MEMO_SIZE(MAXF));

	cr_assert_not_null(m);
	cr_assert_eq(kprobes_stack_memo_init(m, KPROBES_STACK_MEMO_SIZE(MAXF)), MAXF);
	return m;
}

/* One capture with the memo against the tables' walk, at depth max. */
static void check_capture(struct checked_memo *c, const struct pt_regs *regs, int max)
{
	unsigned long a[MAXF], b[MAXF];
	long intr = c->intr ? *c->intr : 0;
	int kept = -2, na = kprobes_stack_memo(c->m, regs, a, max, &kept);
	long intr_after = c->intr ? *c->intr : 0;
	int nb = kp_stack_uncached(regs, b, max);

	c->calls++;
	if (!same_stacks(a, na, b, nb)) {
		int i = 0;

		while (i < na && i < nb && a[i] == b[i])
			i++;
		/* the first difference, for the one who debugs it */
		if (!c->diffs)
			fprintf(stderr, "memo: %d frames, tables: %d (max %d, kept %d), frame %d: "
				"%#lx against %#lx\n", na, nb, max, kept, i, i < na ? a[i] : 0,
				i < nb ? b[i] : 0);
		c->diffs++;
	}
	if (kept < 0) {
		c->busy++;
		return;
	}
	/* known unless the signal handler's captures came in between */
	if (c->nprev >= 0 && intr == c->prev_intr && intr_after == intr &&
	    (kept > na || kept > c->nprev ||
	     memcmp(a + na - kept, c->prev + c->nprev - kept, (size_t)kept * sizeof(a[0]))))
		c->kept_wrong++;
	if (kept > 0)
		c->joined++;
	memcpy(c->prev, a, (size_t)na * sizeof(a[0]));
	c->nprev = na;
	c->prev_intr = intr_after;
	if (c->intr && *c->intr != intr_after)
		c->nprev = -1;
}

/* ---- random call patterns ---- */

static volatile long sink;
static __thread struct checked_memo *tls_memo;
static __thread unsigned int tls_seed;
static void (*volatile leaf_hook)(void);

long memo_leaf(long x);
NOFP long memo_leaf(long x)
{
	sink += x;
	if (leaf_hook)
		leaf_hook();
	BARRIER();
	return x + 1;
}

static int leaf_pre(struct kprobe *p, struct pt_regs *regs)
{
	struct checked_memo *c = tls_memo;

	if (c)
		check_capture(c, regs, 1 + (int)(rand_r(&tls_seed) % MAXF));
	return 0;
}

/* Chains of three shapes of frame to a random depth: without frame
 * pointers and a large frame, without and a small one, with. */
NOFP long shape_a(long d, unsigned int *seed);
NOFP long shape_b(long d, unsigned int *seed);
WITHFP long shape_c(long d, unsigned int *seed);

NOFP long shape_a(long d, unsigned int *seed)
{
	volatile char pad[200];
	long r;

	pad[0] = (char)d;
	r = d <= 0 ? memo_leaf(d) : (rand_r(seed) & 1 ? shape_b(d - 1, seed) : shape_c(d - 1, seed));
	BARRIER();
	return r + pad[0];
}

NOFP long shape_b(long d, unsigned int *seed)
{
	volatile long pad[3];
	long r;

	pad[0] = d;
	if (d <= 0) {
		/* the same function from two call sites */
		r = memo_leaf(d);
		r += rand_r(seed) & 1 ? memo_leaf(d + 1) : 0;
	} else {
		r = rand_r(seed) % 3 ? shape_a(d - 1, seed) : shape_c(d - 1, seed);
	}
	BARRIER();
	return r + pad[0];
}

WITHFP long shape_c(long d, unsigned int *seed)
{
	long r = d <= 0 ? memo_leaf(d) : (rand_r(seed) & 1 ? shape_a(d - 1, seed) : shape_b(d - 1, seed));

	BARRIER();
	return r + 1;
}

static int sort_cmp(const void *a, const void *b, void *arg)
{
	(void)arg;
	memo_leaf(0);
	return *(const int *)a - *(const int *)b;
}

static void on_usr1(int sig)
{
	(void)sig;
	shape_a(rand_r(&tls_seed) % 6, &tls_seed);
}

/* One of the patterns, at random. */
static void random_calls(unsigned int *seed, int rounds, bool signals)
{
	int v[16];

	for (int i = 0; i < rounds; i++) {
		switch (rand_r(seed) % 8) {
		case 0:
			for (int k = 0; k < 16; k++)
				v[k] = (int)(rand_r(seed) % 50);
			qsort_r(v, 16, sizeof(int), sort_cmp, NULL);
			break;
		case 1:
			if (signals) {
				raise(SIGUSR1);
				break;
			}
			/* fall through */
		default:
			/* the same stack again, or a deeper or shallower one */
			shape_a(rand_r(seed) % 40, seed);
			break;
		}
	}
}

static void report(const struct checked_memo *c, const char *what)
{
	cr_log_info("%s: %ld captures, %ld joined the memo, %ld without it", what, c->calls,
		    c->joined, c->busy);
	cr_expect_eq(c->diffs, 0, "%s: %ld of %ld stacks differ from the tables'", what, c->diffs,
		     c->calls);
	cr_expect_eq(c->kept_wrong, 0, "%s: %ld times the kept frames were not the last stack's",
		     what, c->kept_wrong);
}

static void random_patterns(bool optimize)
{
	const char *env = getenv("KP_STACK_FUZZ_SEED");
	unsigned int seed = env ? (unsigned int)strtoul(env, NULL, 0) : (unsigned int)time(NULL);
	struct kprobe kp = { .addr = (void *)memo_leaf, .pre_handler = leaf_pre };
	struct checked_memo c = { .m = memo_new() };
	struct sigaction sa = { .sa_handler = on_usr1 };

	cr_log_info("seed %#x (KP_STACK_FUZZ_SEED)", seed);
	tls_seed = seed;
	kprobes_set_optimization(optimize);
	cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);
	cr_assert_eq(register_kprobe(&kp), 0);
	tls_memo = &c;
	random_calls(&seed, 4000, true);
	tls_memo = NULL;
	unregister_kprobe(&kp);
	report(&c, optimize ? "optimized" : "breakpoint");
	cr_assert_gt(c.calls, 4000);
	cr_expect_gt(c.joined, c.calls / 8, "the memo was joined only %ld times in %ld", c.joined,
		     c.calls);
	free(c.m);
}

Test(memo, equals_tables_on_random_call_patterns_breakpoint)
{
	random_patterns(false);
}

Test(memo, equals_tables_on_random_call_patterns_optimized)
{
	random_patterns(true);
}

/* Return-probed frames in the middle: their return addresses are the
 * stubs', mapped by the walk; a frame at one place probed in one stack
 * and not in the next (two instances at most: deeper calls are missed). */
static int ret_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	(void)regs;
	return 0;
}

Test(memo, return_probed_frames_in_the_middle)
{
	unsigned int seed = (unsigned int)time(NULL);
	struct kprobe kp = { .addr = (void *)memo_leaf, .pre_handler = leaf_pre };
	struct kretprobe rp = { .kp.addr = (void *)shape_c, .handler = ret_handler,
				.maxactive = 2 };
	struct checked_memo c = { .m = memo_new() };

	cr_log_info("seed %#x", seed);
	tls_seed = seed;
	kprobes_set_optimization(false);
	cr_assert_eq(register_kprobe(&kp), 0);
	tls_memo = &c;
	for (int round = 0; round < 4; round++) {
		if (round & 1)
			cr_assert_eq(register_kretprobe(&rp), 0);
		random_calls(&seed, 500, false);
		if (round & 1)
			unregister_kretprobe(&rp);
	}
	tls_memo = NULL;
	unregister_kprobe(&kp);
	report(&c, "return probes");
	cr_assert_gt(c.calls, 2000);
	free(c.m);
}

/* ---- a frame unwound by its bp ----
 *
 * nocfi_call(fn, bp) calls fn with bp in %rbp and has no call-frame
 * information, so its frame is unwound by frame pointers: from the same
 * registers but another bp, the walk goes elsewhere.  Both stacks have
 * the same probed frame at the same stack pointer: the memo of one must
 * not be followed for the other. */
long nocfi_call(long (*fn)(long), unsigned long *bp);
__asm__(".text\n"
	".globl nocfi_call\n"
	".type nocfi_call, @function\n"
	"nocfi_call:\n"
	"\tpush %rbp\n"
	"\tmov %rsi, %rbp\n"
	"\tcall *%rdi\n"
	"\tpop %rbp\n"
	"\tret\n"
	".size nocfi_call, . - nocfi_call\n");

static struct checked_memo bp_memo;

static int bp_pre(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	check_capture(&bp_memo, regs, MAXF);
	return 0;
}

NOFP long bp_frames(unsigned int seed);
NOFP long bp_frames(unsigned int seed)
{
	/* two made-up frames above the call, each "returning" elsewhere */
	unsigned long fake[2][2] = { { 0, (unsigned long)shape_a + 16 },
				     { 0, (unsigned long)shape_b + 16 } };
	long r = 0;

	for (int i = 0; i < 400; i++)
		r += nocfi_call(memo_leaf, fake[rand_r(&seed) & 1]);
	BARRIER();
	return r + (long)fake[0][0];
}

Test(memo, frames_unwound_by_their_bp)
{
	struct kprobe kp = { .addr = (void *)memo_leaf, .pre_handler = bp_pre };

	bp_memo.m = memo_new();
	kprobes_set_optimization(false);
	cr_assert_eq(register_kprobe(&kp), 0);
	bp_frames(3);
	unregister_kprobe(&kp);
	report(&bp_memo, "by bp");
	cr_assert_eq(bp_memo.calls, 400);
	free(bp_memo.m);
}

/* ---- signals in the middle of a capture ---- */

static struct checked_memo sig_memo, sig_handler_memo = { .nprev = -1 };
static volatile long sig_remembered;
static volatile sig_atomic_t sig_busy_seen;
static sigjmp_buf sig_jmp;
static volatile sig_atomic_t sig_jump_armed;

static void regs_of(struct pt_regs *regs, const ucontext_t *uc)
{
	memset(regs, 0, sizeof(*regs));
	regs->ip = (unsigned long)uc->uc_mcontext.gregs[REG_RIP];
	regs->sp = (unsigned long)uc->uc_mcontext.gregs[REG_RSP];
	regs->bp = (unsigned long)uc->uc_mcontext.gregs[REG_RBP];
}

/* The timer's handler captures the interrupted code's stack with the
 * memo the interrupted code may be using. */
static void on_alarm(int sig, siginfo_t *si, void *ctx)
{
	struct pt_regs regs;
	long busy = sig_handler_memo.busy;

	(void)sig;
	(void)si;
	regs_of(&regs, ctx);
	sig_handler_memo.m = sig_memo.m;
	check_capture(&sig_handler_memo, &regs, MAXF);
	/* kept is checked in the interrupted code only (this handler does
	 * not know the last stack the memo remembered) */
	sig_handler_memo.nprev = -1;
	if (sig_handler_memo.busy == busy)
		sig_remembered++;
	if (sig_handler_memo.busy > busy) {
		sig_busy_seen++;
		if (sig_jump_armed) {
			sig_jump_armed = 0;
			siglongjmp(sig_jmp, 1);
		}
	}
}

/* A capture from right here, outside any probe's handler. */
static void direct_capture(void);
NOFP void direct_capture(void)
{
	struct pt_regs regs = { 0 };
	unsigned long ip, sp, bp;

	__asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
			 : "=r"(ip), "=r"(sp), "=r"(bp));
	regs.ip = ip;
	regs.sp = sp;
	regs.bp = bp;
	check_capture(&sig_memo, &regs, MAXF);
}

/* Tables for the walks, without a probe left registered. */
static void build_tables(void)
{
	struct kprobe kp = { .addr = (void *)memo_leaf };

	cr_assert_eq(register_kprobe(&kp), 0);
	unregister_kprobe(&kp);
}

static void start_timer(void)
{
	struct sigaction sa = { .sa_sigaction = on_alarm, .sa_flags = SA_SIGINFO };
	struct itimerval it = { { 0, 30 }, { 0, 30 } };

	cr_assert_eq(sigaction(SIGALRM, &sa, NULL), 0);
	cr_assert_eq(setitimer(ITIMER_REAL, &it, NULL), 0);
}

static void stop_timer(void)
{
	struct itimerval it = { { 0, 0 }, { 0, 0 } };

	setitimer(ITIMER_REAL, &it, NULL);
	signal(SIGALRM, SIG_IGN);
}

Test(memo, signal_in_the_middle_of_a_capture)
{
	unsigned int seed = 7;
	struct timespec t0, t;

	sig_memo.m = memo_new();
	sig_memo.intr = &sig_remembered;
	build_tables();
	leaf_hook = direct_capture;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	start_timer();
	do {
		shape_a(rand_r(&seed) % 30, &seed);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (sig_busy_seen < 50 && t.tv_sec - t0.tv_sec < 10);
	stop_timer();
	leaf_hook = NULL;
	report(&sig_memo, "interrupted");
	report(&sig_handler_memo, "in the signal handler");
	cr_expect_eq(sig_memo.busy, 0, "the interrupted code found its memo busy");
	cr_expect_gt(sig_busy_seen, 0, "no signal arrived in the middle of a capture");
	free(sig_memo.m);
}

Test(memo, longjmp_out_of_a_capture)
{
	struct checked_memo after = { 0 };
	unsigned int seed = 9;
	struct timespec t0, t;

	sig_memo.m = memo_new();
	sig_memo.intr = &sig_remembered;
	build_tables();
	leaf_hook = direct_capture;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (!sigsetjmp(sig_jmp, 1)) {
		sig_jump_armed = 1;
		start_timer();
		do {
			shape_a(rand_r(&seed) % 30, &seed);
			clock_gettime(CLOCK_MONOTONIC, &t);
		} while (t.tv_sec - t0.tv_sec < 10);
	}
	stop_timer();
	if (sig_jump_armed)
		cr_skip_test("no signal arrived in the middle of a capture within 10 s");
	/* the capture left is not finished: the memo is not used again, and
	 * the stacks are still right */
	sig_memo.calls = sig_memo.busy = sig_memo.diffs = 0;
	for (int i = 0; i < 200; i++)
		shape_a(i % 20, &seed);
	cr_expect_eq(sig_memo.busy, sig_memo.calls, "a memo left by longjmp was used");
	cr_expect_eq(sig_memo.diffs, 0, "wrong stacks after the longjmp");
	/* made again, it works */
	cr_assert_eq(kprobes_stack_memo_init(sig_memo.m, KPROBES_STACK_MEMO_SIZE(MAXF)), MAXF);
	after.m = sig_memo.m;
	sig_memo = after;
	for (int i = 0; i < 200; i++)
		shape_a(i % 20, &seed);
	leaf_hook = NULL;
	report(&sig_memo, "made again");
	cr_expect_eq(sig_memo.busy, 0);
	cr_expect_gt(sig_memo.joined, 0);
	free(sig_memo.m);
}

/* ---- threads, while the tables change ---- */

static const char *test_lib(const char *name)
{
	static char path[2][PATH_MAX];
	static int k;
	char exe[PATH_MAX], *p = path[k++ & 1];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	cr_assert_gt(len, 0);
	exe[len] = 0;
	snprintf(p, PATH_MAX, "%s/../tests/%s", dirname(exe), name);
	cr_assert_eq(access(p, R_OK), 0, "%s missing (make it)", p);
	return p;
}

static volatile int thr_stop;

static void *thr_work(void *arg)
{
	struct checked_memo *c = arg;
	unsigned int seed = (unsigned int)(uintptr_t)c->m;

	tls_seed = seed;
	tls_memo = c;
	random_calls(&seed, 1500, false);
	tls_memo = NULL;
	return NULL;
}

static void *thr_churn(void *arg)
{
	long *rounds = calloc(1, sizeof(*rounds));

	while (rounds && !__atomic_load_n(&thr_stop, __ATOMIC_ACQUIRE)) {
		void *h = dlopen(arg, RTLD_NOW | RTLD_LOCAL);

		if (!h)
			break;
		kp_stack_tables_update();
		dlclose(h);
		++*rounds;
	}
	return rounds;
}

Test(memo, threads_while_tables_change)
{
	struct kprobe kp = { .addr = (void *)memo_leaf, .pre_handler = leaf_pre };
	static struct checked_memo c[8];
	struct checked_memo all = { 0 };
	pthread_t th[8], churn;
	long *rounds = NULL;

	kprobes_set_optimization(true);
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert_eq(pthread_create(&churn, NULL, thr_churn,
				    (void *)test_lib("libkpframe_a.so")), 0);
	for (int i = 0; i < 8; i++) {
		c[i].m = memo_new();
		cr_assert_eq(pthread_create(&th[i], NULL, thr_work, &c[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		all.calls += c[i].calls;
		all.diffs += c[i].diffs;
		all.kept_wrong += c[i].kept_wrong;
		all.joined += c[i].joined;
		all.busy += c[i].busy;
		free(c[i].m);
	}
	__atomic_store_n(&thr_stop, 1, __ATOMIC_RELEASE);
	pthread_join(churn, (void **)&rounds);
	unregister_kprobe(&kp);
	cr_assert_not_null(rounds);
	cr_log_info("tables replaced %ld times", 2 * *rounds);
	free(rounds);
	report(&all, "threads");
	cr_assert_gt(all.calls, 8 * 1500);
	cr_expect_gt(all.joined, 0);
	cr_expect_eq(all.busy, 0);
}

/* ---- another library at the same address ---- */

typedef long (*kpframe_cb)(long);

static struct checked_memo dl_memo;

static int dl_pre(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	check_capture(&dl_memo, regs, MAXF);
	return 0;
}

long dl_callback(long x);
NOFP long dl_callback(long x)
{
	return memo_leaf(x);
}

static void *run_lib(const char *path, unsigned long *base)
{
	struct kprobe tables = { .addr = (void *)random_calls };
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	long (*call)(kpframe_cb, long);
	Dl_info di;

	cr_assert_not_null(h, "%s: %s", path, dlerror());
	*(void **)&call = dlsym(h, "kpframe_call");
	cr_assert_not_null(call);
	cr_assert(dladdr((void *)call, &di));
	*base = (unsigned long)di.dli_fbase;
	/* a registration builds the new library's tables */
	cr_assert_eq(register_kprobe(&tables), 0);
	unregister_kprobe(&tables);
	for (int i = 0; i < 3; i++)
		call(dl_callback, i);
	return h;
}

Test(memo, another_library_at_the_same_address)
{
	struct kprobe kp = { .addr = (void *)memo_leaf, .pre_handler = dl_pre };
	unsigned long base_a, base_b;

	dl_memo.m = memo_new();
	kprobes_set_optimization(false);
	cr_assert_eq(register_kprobe(&kp), 0);
	dlclose(run_lib(test_lib("libkpframe_a.so"), &base_a));
	dlclose(run_lib(test_lib("libkpframe_b.so"), &base_b));
	unregister_kprobe(&kp);
	report(&dl_memo, "two libraries");
	cr_assert_eq(dl_memo.calls, 6);
	free(dl_memo.m);
	if (base_a != base_b)
		cr_skip_test("the second library was loaded at %#lx, not at the first's %#lx",
			     base_b, base_a);
}

/* The same, with the second library's function entered 768 bytes higher
 * up (its frame is 768 bytes larger): its frames have the first's stack
 * pointers and return addresses, and only the rules, from the new tables,
 * tell them apart.  A memo of the first library's walk must not be
 * followed. */
static ucontext_t main_uc, lib_uc;
static long (*lib_call)(kpframe_cb, long);
static char lib_stack[1 << 16] __attribute__((aligned(64)));

static void on_lib_stack(void);
NOFP void on_lib_stack(void)
{
	for (int i = 0; i < 3; i++)
		lib_call(dl_callback, i);
}

static void *run_lib_at(const char *path, unsigned long *base, size_t above)
{
	struct kprobe tables = { .addr = (void *)random_calls };
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	Dl_info di;

	cr_assert_not_null(h, "%s: %s", path, dlerror());
	*(void **)&lib_call = dlsym(h, "kpframe_call");
	cr_assert_not_null(lib_call);
	cr_assert(dladdr((void *)lib_call, &di));
	*base = (unsigned long)di.dli_fbase;
	cr_assert_eq(register_kprobe(&tables), 0);
	unregister_kprobe(&tables);
	/* what the last run left on the stack is no help to a stale memo:
	 * every word a return address of somewhere else */
	for (size_t i = 0; i < sizeof(lib_stack) / sizeof(long); i++)
		((unsigned long *)(void *)lib_stack)[i] = (unsigned long)shape_a + 16;
	cr_assert_eq(getcontext(&lib_uc), 0);
	lib_uc.uc_stack.ss_sp = lib_stack;
	lib_uc.uc_stack.ss_size = sizeof(lib_stack) - 1024 + above;
	lib_uc.uc_link = &main_uc;
	makecontext(&lib_uc, on_lib_stack, 0);
	cr_assert_eq(swapcontext(&main_uc, &lib_uc), 0);
	return h;
}

Test(memo, another_library_at_the_same_address_and_stack_pointer)
{
	struct kprobe kp = { .addr = (void *)memo_leaf, .pre_handler = dl_pre };
	unsigned long base_a, base_b;

	dl_memo.m = memo_new();
	kprobes_set_optimization(false);
	cr_assert_eq(register_kprobe(&kp), 0);
	dlclose(run_lib_at(test_lib("libkpframe_a.so"), &base_a, 0));
	dlclose(run_lib_at(test_lib("libkpframe_b.so"), &base_b, 1024 - 256));
	unregister_kprobe(&kp);
	report(&dl_memo, "two libraries, one stack");
	cr_assert_eq(dl_memo.calls, 6);
	free(dl_memo.m);
	if (base_a != base_b)
		cr_skip_test("the second library was loaded at %#lx, not at the first's %#lx",
			     base_b, base_a);
}

/* ---- the interface ---- */

Test(memo, bad_arguments)
{
	unsigned long ips[4];
	struct pt_regs regs = { 0 };
	struct kprobes_stack_memo *m = memo_new();
	char *raw = aligned_alloc(16, (KPROBES_STACK_MEMO_SIZE(4) + 8 + 15) & ~(size_t)15);
	int kept = 5;

	cr_assert_eq(kprobes_stack_memo_init(NULL, 4096), -EINVAL);
	cr_assert_eq(kprobes_stack_memo_init((void *)(raw + 4), KPROBES_STACK_MEMO_SIZE(4)),
		     -EINVAL);
	cr_assert_eq(kprobes_stack_memo_init((void *)raw, KPROBES_STACK_MEMO_SIZE(1) - 1), -EINVAL);
	cr_assert_eq(kprobes_stack_memo_init((void *)raw, KPROBES_STACK_MEMO_SIZE(4) + 8), 4);
	cr_assert_eq(kprobes_stack_memo_init((void *)raw, KPROBES_STACK_MEMO_SIZE(4) - 1), 3);
	cr_assert_eq(kprobes_stack_memo(NULL, &regs, ips, 4, &kept), -EINVAL);
	cr_assert_eq(kept, -1);
	cr_assert_eq(kprobes_stack_memo(m, NULL, ips, 4, &kept), -EINVAL);
	cr_assert_eq(kprobes_stack_memo(m, &regs, NULL, 4, NULL), -EINVAL);
	cr_assert_eq(kprobes_stack_memo(m, &regs, ips, -1, &kept), -EINVAL);
	cr_assert_eq(kprobes_stack_memo(m, &regs, ips, 0, &kept), 0);
	free(raw);
	free(m);
}

/* The handler analysis (src/arch/x86_64/clobber.c) follows the call: a
 * handler that captures with a memo needs no vector state saved. */
Test(memo, needs_no_vector_state)
{
#if !defined(__SANITIZE_ADDRESS__)
	uint8_t need = kp_code_needs((uintptr_t)kprobes_stack_memo);

	cr_expect_eq(need & KP_OPT_SAVE_VECTOR, 0, "needs %#x", need);
#else
	cr_skip_test("sanitizer calls in every function: nothing to prove");
#endif
}
