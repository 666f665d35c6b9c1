/* Stacks at probe hits (SPEC section 8): kprobes_stack() and the unwind
 * information of the probes' own code.
 *
 *  - the Linux Kprobes self-tests test_stacktrace_on_kretprobe and
 *    test_stacktrace_on_nested_kretprobe, re-created: inside a return
 *    handler glibc's backtrace() and libgcc's _Unwind_Backtrace() reach the
 *    real callers through the return trampoline, and kprobes_stack(regs)
 *    starts at the real return address; breakpoint and optimized entries;
 *  - kprobes_stack() against the return addresses the functions see
 *    themselves, through frames without frame pointers and return-probed
 *    frames;
 *  - gdb as the oracle: the stack equals the one gdb unwinds at the same
 *    point (a child process stops itself inside the handler with gdb
 *    attached), in C chains without frame pointers, in Debian's libc,
 *    in signal handlers on the normal and an alternate stack, in deep
 *    recursion, in threads, and from random instruction boundaries of libc.
 *    Skipped, saying so, when gdb is not installed. */
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <inttypes.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <unwind.h>

#include "core/internal.h"
#include "core/stack.h"
#include "elf/symbols.h"
#include "arch/x86_64/detour.h"
#include "arch/x86_64/regs.h"
#include "arch/x86_64/xol.h"
#include "os/linux/threads.h"
#include "testutil.h"
#include "libc_workload.h"

TestSuite(stack, .timeout = 30);

#define BARRIER() __asm__ volatile("" : : : "memory")
#define NOFP __attribute__((noinline, noclone, used, optimize("omit-frame-pointer")))
#define MAXF 64

static bool is_optimized(const struct kprobe *p)
{
	return __atomic_load_n(&p->flags, __ATOMIC_ACQUIRE) & KPROBE_FLAG_OPTIMIZED;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static bool wait_opt(const struct kprobe *p, int ms)
{
	for (int i = 0; i < ms && !is_optimized(p); i++)
		sleep_ms(1);
	return is_optimized(p);
}

static bool has(const unsigned long *v, int n, unsigned long x)
{
	for (int i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

static __attribute__((unused)) int index_of(const unsigned long *v, int n, unsigned long x)
{
	for (int i = 0; i < n; i++)
		if (v[i] == x)
			return i;
	return -1;
}

/* Inside the return trampoline's code? */
static bool in_trampoline(unsigned long a)
{
	Dl_info di;
	unsigned long t = arch_kretprobe_trampoline();

	return a >= t && a < t + 512 && dladdr((void *)t, &di) && a != 0;
}

/* ---------------------------------------------------------------------- */
/* The kernel's test_stacktrace_on_kretprobe and its nested variant        */
/* ---------------------------------------------------------------------- */

static unsigned long target_ra[2];	/* [0] outer's (or the only) target's, [1] inner's */
static volatile int record_ra;

long st_inner(long x);
TEST_FN long st_inner(long x)
{
	if (record_ra)
		target_ra[1] = (unsigned long)__builtin_return_address(0);
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}

static long (*volatile fp_inner)(long) = st_inner;

long st_target(long x);
TEST_FN long st_target(long x)
{
	long r;

	if (record_ra)
		target_ra[0] = (unsigned long)__builtin_return_address(0);
	r = fp_inner(x);
	__asm__ volatile("" : "+r"(r));
	return r * 2;
}

static long (*volatile fp_target)(long) = st_target;

static unsigned long caller_ra;

long st_caller(long x);
TEST_FN long st_caller(long x)
{
	long r;

	if (record_ra)
		caller_ra = (unsigned long)__builtin_return_address(0);
	r = fp_target(x);

	BARRIER();
	return r + 1;
}

struct st_result {
	int hits;
	int bt_n, uw_n, ks_n;
	unsigned long bt[MAXF], uw[MAXF], ks[MAXF];
	unsigned long ip;
};

static struct st_result res_outer, res_inner;

struct uw_state {
	unsigned long *buf;
	int n;
};

static _Unwind_Reason_Code uw_cb(struct _Unwind_Context *ctx, void *arg)
{
	struct uw_state *s = arg;

	if (s->n < MAXF)
		s->buf[s->n++] = _Unwind_GetIP(ctx);
	return _URC_NO_REASON;
}

/* What the kernel's handler does: a stack trace from inside the handler
 * (which passes the trampoline) and one from the probe's pt_regs. */
static void take_stacks(struct st_result *r, struct pt_regs *regs)
{
	void *bt[MAXF];
	struct uw_state s = { r->uw, 0 };

	r->hits++;
	r->ip = regs->ip;
	r->bt_n = backtrace(bt, MAXF);
	for (int i = 0; i < r->bt_n; i++)
		r->bt[i] = (unsigned long)bt[i];
	_Unwind_Backtrace(uw_cb, &s);
	r->uw_n = s.n;
	r->ks_n = kprobes_stack(regs, r->ks, MAXF);
}

static int outer_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	take_stacks(&res_outer, regs);
	return 0;
}

static int inner_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	take_stacks(&res_inner, regs);
	return 0;
}

/* The kernel's checks: the target's return address is in the trace taken
 * inside the handler, the trampoline is not; the trace from pt_regs
 * starts at it. */
static void check_result(const char *what, const struct st_result *r, unsigned long ra)
{
	cr_assert_eq(r->hits, 1, "%s: handler ran %d times", what, r->hits);
	cr_expect_eq(r->ip, ra, "%s: regs->ip is not the real return address", what);
	cr_expect(has(r->bt, r->bt_n, ra),
		  "%s: backtrace() inside the handler misses the real return address (%d frames)",
		  what, r->bt_n);
	cr_expect(has(r->uw, r->uw_n, ra),
		  "%s: _Unwind_Backtrace() inside the handler misses it (%d frames)", what, r->uw_n);
	for (int i = 0; i < r->bt_n; i++)
		cr_expect_not(in_trampoline(r->bt[i]) && i > 0 && r->bt[i - 1] == r->bt[i],
			      "%s: backtrace() loops in the trampoline", what);
	cr_assert_gt(r->ks_n, 2, "%s: kprobes_stack gave %d", what, r->ks_n);
	cr_expect_eq(r->ks[0], ra, "%s: kprobes_stack(regs)[0] %#lx, not the return address %#lx",
		     what, r->ks[0], ra);
	for (int i = 0; i < r->ks_n; i++)
		cr_expect_not(in_trampoline(r->ks[i]), "%s: the trampoline in kprobes_stack", what);
}

/* One call site for the recording call and the probed one. */
long run_caller(void);
TEST_FN long run_caller(void)
{
	long r = st_caller(1);

	BARRIER();
	return r;
}

static void record_return_addresses(void)
{
	record_ra = 1;
	cr_assert_eq(run_caller(), 5);
	record_ra = 0;
}

static void stacktrace_on_kretprobe(bool optimized)
{
	struct kretprobe rp = { .kp.addr = (void *)st_target, .handler = outer_ret };

	record_return_addresses();
	kprobes_set_optimization(optimized);
	memset(&res_outer, 0, sizeof(res_outer));
	cr_assert_eq(register_kretprobe(&rp), 0);
	if (optimized)
		cr_assert(wait_opt(&rp.kp, 3000), "the entry was not optimized");
	cr_assert_eq(run_caller(), 5);
	check_result("return probe", &res_outer, target_ra[0]);
	/* and the caller's own return address, one frame further */
	cr_expect_eq(res_outer.ks[1], caller_ra, "kprobes_stack: %#lx after the return address, not %#lx",
		     res_outer.ks[1], caller_ra);
	unregister_kretprobe(&rp);
}

Test(stack, stacktrace_on_kretprobe)
{
	stacktrace_on_kretprobe(false);
}

Test(stack, stacktrace_on_kretprobe_optimized)
{
	stacktrace_on_kretprobe(true);
}

static void stacktrace_on_nested_kretprobe(bool optimized)
{
	struct kretprobe outer = { .kp.addr = (void *)st_target, .handler = outer_ret };
	struct kretprobe inner = { .kp.addr = (void *)st_inner, .handler = inner_ret };

	record_return_addresses();
	kprobes_set_optimization(optimized);
	memset(&res_outer, 0, sizeof(res_outer));
	memset(&res_inner, 0, sizeof(res_inner));
	cr_assert_eq(register_kretprobe(&outer), 0);
	cr_assert_eq(register_kretprobe(&inner), 0);
	if (optimized) {
		cr_assert(wait_opt(&outer.kp, 3000), "the outer entry was not optimized");
		cr_assert(wait_opt(&inner.kp, 3000), "the inner entry was not optimized");
	}
	cr_assert_eq(run_caller(), 5);
	check_result("inner", &res_inner, target_ra[1]);
	check_result("outer", &res_outer, target_ra[0]);
	/* inside the inner handler the outer frame is still return-probed:
	 * every unwinder shows its real return address too */
	cr_expect(has(res_inner.bt, res_inner.bt_n, target_ra[0]),
		  "backtrace() in the inner handler misses the outer frame's caller");
	cr_expect(has(res_inner.uw, res_inner.uw_n, target_ra[0]),
		  "_Unwind_Backtrace() in the inner handler misses the outer frame's caller");
	cr_expect_eq(res_inner.ks[1], target_ra[0],
		     "kprobes_stack in the inner handler: %#lx after %#lx, not %#lx",
		     res_inner.ks[1], res_inner.ks[0], target_ra[0]);
	unregister_kretprobe(&inner);
	unregister_kretprobe(&outer);
}

Test(stack, stacktrace_on_nested_kretprobe)
{
	stacktrace_on_nested_kretprobe(false);
}

Test(stack, stacktrace_on_nested_kretprobe_optimized)
{
	stacktrace_on_nested_kretprobe(true);
}

/* ---------------------------------------------------------------------- */
/* gdb as the oracle                                                       */
/* ---------------------------------------------------------------------- */

#include "stack_oracle.h"

/* ---- C without frame pointers, a return-probed frame in the middle ---- */

static int oracle_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	oracle_stop(regs);
	return 0;
}

NOFP long nf_leaf(long x);
NOFP long nf_leaf(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 3;
}

static long (*volatile fp_nf_leaf)(long) = nf_leaf;

NOFP long nf_mid(long x);
NOFP long nf_mid(long x)
{
	volatile char buf[40];

	buf[x & 31] = 1;
	return fp_nf_leaf(x + buf[1]) + 1;
}

static long (*volatile fp_nf_mid)(long) = nf_mid;

NOFP long nf_top(long x);
NOFP long nf_top(long x)
{
	long r = fp_nf_mid(x) * 2;

	BARRIER();
	return r;
}

static void chain_scenario(void)
{
	struct kprobe kp = { .addr = (void *)nf_leaf, .pre_handler = oracle_pre };
	struct kretprobe mid = { .kp.addr = (void *)nf_mid };
	struct kretprobe top = { .kp.addr = (void *)nf_top, .handler = oracle_ret };

	kprobes_set_optimization(false);
	if (register_kprobe(&kp) || register_kretprobe(&mid) || register_kretprobe(&top))
		_exit(4);
	nf_top(1);
	unregister_kprobe(&kp);
	unregister_kretprobe(&mid);
	unregister_kretprobe(&top);
}

Test(stack, gdb_c_chain_without_frame_pointers)
{
	expect_gdb_stacks(chain_scenario, 2);
}

/* The same with jump-optimized entries: the handlers run from a detour. */
static void chain_optimized_scenario(void)
{
	struct kprobe kp = { .addr = (void *)nf_leaf, .pre_handler = oracle_pre };
	struct kretprobe mid = { .kp.addr = (void *)nf_mid };
	struct kretprobe top = { .kp.addr = (void *)nf_top, .handler = oracle_ret };

	kprobes_set_optimization(true);
	if (register_kprobe(&kp) || register_kretprobe(&mid) || register_kretprobe(&top))
		_exit(4);
	if (!wait_opt(&kp, 3000) || !wait_opt(&mid.kp, 3000) || !wait_opt(&top.kp, 3000))
		_exit(7);
	nf_top(1);
	unregister_kprobe(&kp);
	unregister_kretprobe(&mid);
	unregister_kretprobe(&top);
}

Test(stack, gdb_c_chain_optimized)
{
	expect_gdb_stacks(chain_optimized_scenario, 2);
}

/* backtrace() and _Unwind_Backtrace() inside an optimized probe's
 * pre-handler go through the detour into the probed function's callers. */
static int bt_pre(struct kprobe *p, struct pt_regs *regs)
{
	take_stacks(&res_outer, regs);
	return 0;
}

Test(stack, backtrace_in_optimized_pre_handler)
{
	struct kprobe kp = { .addr = (void *)st_target, .pre_handler = bt_pre };

	record_return_addresses();
	kprobes_set_optimization(true);
	memset(&res_outer, 0, sizeof(res_outer));
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert(wait_opt(&kp, 3000), "the probe was not optimized");
	cr_assert_eq(run_caller(), 5);
	cr_assert_eq(res_outer.hits, 1);
	cr_expect(has(res_outer.bt, res_outer.bt_n, target_ra[0]),
		  "backtrace() misses the probed function's caller (%d frames)", res_outer.bt_n);
	cr_expect(has(res_outer.uw, res_outer.uw_n, target_ra[0]),
		  "_Unwind_Backtrace() misses it (%d frames)", res_outer.uw_n);
	cr_expect(has(res_outer.uw, res_outer.uw_n, caller_ra),
		  "_Unwind_Backtrace() misses the caller's caller");
	cr_expect_eq(res_outer.ks[0], (unsigned long)st_target + 1);
	cr_expect_eq(res_outer.ks[1], target_ra[0]);
	cr_expect_eq(res_outer.ks[2], caller_ra);
	unregister_kprobe(&kp);
}

/* The same chain without the return probe in the middle (gdb cannot see
 * the unwind information registered at run time for the return stubs:
 * this one checks the CFI tables alone). */
static void chain_plain_scenario(void)
{
	struct kprobe kp = { .addr = (void *)nf_leaf, .pre_handler = oracle_pre };
	struct kretprobe top = { .kp.addr = (void *)nf_top, .handler = oracle_ret };

	kprobes_set_optimization(false);
	if (register_kprobe(&kp) || register_kretprobe(&top))
		_exit(4);
	nf_top(1);
	unregister_kprobe(&kp);
	unregister_kretprobe(&top);
}

Test(stack, gdb_c_chain)
{
	expect_gdb_stacks(chain_plain_scenario, 2);
}

/* ---- Debian's libc, built without frame pointers: qsort's callback ---- */

NOFP int cmp_long(const void *a, const void *b);
NOFP int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return (x > y) - (x < y);
}

static void qsort_scenario(void)
{
	struct kprobe kp = { .addr = (void *)cmp_long, .pre_handler = oracle_pre };
	long v[64];

	for (int i = 0; i < 64; i++)
		v[i] = (i * 37) % 64;
	kprobes_set_optimization(false);
	if (register_kprobe(&kp))
		_exit(4);
	qsort(v, 8, sizeof(long), cmp_long);	/* msort: recursion inside libc */
	unregister_kprobe(&kp);
}

Test(stack, gdb_libc_qsort_callback)
{
	expect_gdb_stacks(qsort_scenario, 3);
}

/* ---- signal handlers, on the thread's stack and an alternate one ---- */

static void on_usr1(int sig)
{
	fp_nf_leaf(sig);
}

static void signal_scenario_with(bool altstack)
{
	struct kprobe kp = { .addr = (void *)nf_leaf, .pre_handler = oracle_pre };
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = altstack ? SA_ONSTACK : 0 };
	static char alt[64 * 1024];
	stack_t ss = { .ss_sp = alt, .ss_size = sizeof(alt) };

	if (altstack && sigaltstack(&ss, NULL))
		_exit(5);
	sigaction(SIGUSR1, &sa, NULL);
	kprobes_set_optimization(false);
	if (register_kprobe(&kp))
		_exit(4);
	raise(SIGUSR1);		/* through libc's raise, without frame pointers */
	unregister_kprobe(&kp);
}

static void signal_scenario(void)
{
	signal_scenario_with(false);
}

static void altstack_scenario(void)
{
	signal_scenario_with(true);
}

Test(stack, gdb_signal_handler)
{
	expect_gdb_stacks(signal_scenario, 1);
}

Test(stack, gdb_signal_handler_on_alternate_stack)
{
	expect_gdb_stacks(altstack_scenario, 1);
}

/* ---- deep recursion ---- */

NOFP long nf_rec(long depth);
NOFP long nf_rec(long depth)
{
	volatile long pad[3] = { depth, 0, 0 };

	if (depth == 0)
		return fp_nf_leaf(pad[0]);
	return nf_rec(depth - 1) + pad[1];
}

static void recursion_scenario(void)
{
	struct kprobe kp = { .addr = (void *)nf_leaf, .pre_handler = oracle_pre };

	kprobes_set_optimization(false);
	if (register_kprobe(&kp))
		_exit(4);
	nf_rec(200);
	unregister_kprobe(&kp);
}

Test(stack, gdb_deep_recursion)
{
	expect_gdb_stacks(recursion_scenario, 1);
}

/* ---- threads ---- */

static void *thread_fn(void *arg)
{
	return (void *)nf_top((long)arg);
}

static void thread_scenario(void)
{
	struct kprobe kp = { .addr = (void *)nf_leaf, .pre_handler = oracle_pre };
	pthread_t th;

	kprobes_set_optimization(false);
	if (register_kprobe(&kp))
		_exit(4);
	for (long i = 0; i < 2; i++) {
		if (pthread_create(&th, NULL, thread_fn, (void *)i))
			_exit(5);
		pthread_join(th, NULL);
	}
	unregister_kprobe(&kp);
}

Test(stack, gdb_threads)
{
	expect_gdb_stacks(thread_scenario, 2);
}

/* ---- hostile registers, bad arguments ---- */

Test(stack, garbage_registers_never_fault)
{
	struct kprobe kp = { .addr = (void *)nf_leaf, .pre_handler = oracle_pre };
	long page = sysconf(_SC_PAGESIZE);
	char *none = mmap(NULL, 2 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned long ips[16];
	struct pt_regs regs;

	cr_assert_neq(none, MAP_FAILED);
	/* the tables exist once something is registered */
	cr_assert_eq(register_kprobe(&kp), 0);
	unregister_kprobe(&kp);
	memset(&regs, 0, sizeof(regs));
	/* a function entry (CFI: the return address at sp) with sp unreadable */
	regs.ip = (unsigned long)nf_top;
	regs.sp = (unsigned long)none + 64;
	regs.bp = (unsigned long)none + 128;
	cr_expect_eq(kprobes_stack(&regs, ips, 16), 1);
	cr_expect_eq(ips[0], (unsigned long)nf_top);
	/* code without CFI (frame pointers) and a wild rbp */
	regs.ip = 0x1000;
	regs.sp = (unsigned long)none;
	regs.bp = (unsigned long)none + 8;
	cr_expect_eq(kprobes_stack(&regs, ips, 16), 1);
	/* non-canonical and misaligned values */
	regs.ip = (unsigned long)nf_top;
	regs.sp = 0x8000000000000000UL;
	cr_expect_eq(kprobes_stack(&regs, ips, 16), 1);
	regs.sp = 3;
	cr_expect_geq(kprobes_stack(&regs, ips, 16), 1);
	munmap(none, 2 * page);
}

Test(stack, bad_arguments)
{
	struct pt_regs regs = { .ip = (unsigned long)nf_top };
	unsigned long ips[4];

	cr_expect_eq(kprobes_stack(NULL, ips, 4), -EINVAL);
	cr_expect_eq(kprobes_stack(&regs, NULL, 4), -EINVAL);
	cr_expect_eq(kprobes_stack(&regs, ips, -1), -EINVAL);
	cr_expect_eq(kprobes_stack(&regs, ips, 0), 0);
}

/* Without probes the same function walks the caller's own stack: from
 * registers taken here (ip and sp at the same instruction) it reaches this
 * function's caller and that one's. */
static unsigned long here_ra;

int stack_here(unsigned long *ips, int max);
TEST_FN int stack_here(unsigned long *ips, int max)
{
	struct pt_regs regs = { 0 };

	here_ra = (unsigned long)__builtin_return_address(0);
	__asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
			 : "=r"(regs.ip), "=r"(regs.sp), "=r"(regs.bp));
	return kprobes_stack(&regs, ips, max);
}

static unsigned long outer_ra;

int stack_here_outer(unsigned long *ips, int max);
TEST_FN int stack_here_outer(unsigned long *ips, int max)
{
	int n;

	outer_ra = (unsigned long)__builtin_return_address(0);
	n = stack_here(ips, max);
	BARRIER();
	return n;
}

Test(stack, own_stack)
{
	struct kprobe kp = { .addr = (void *)nf_leaf, .pre_handler = oracle_pre };
	unsigned long ips[64];
	int n;

	cr_assert_eq(register_kprobe(&kp), 0);
	unregister_kprobe(&kp);
	n = stack_here_outer(ips, 64);
	cr_assert_gt(n, 3);
	cr_expect_eq(ips[1], here_ra, "%#lx, not the caller's %#lx", ips[1], here_ra);
	cr_expect_eq(ips[2], outer_ra, "%#lx, not the caller's %#lx", ips[2], outer_ra);
}

/* ---- fuzz: random instruction boundaries of libc ---- */

/* Exported libc functions the workload below runs (not IFUNCs, whose
 * symbol is the resolver). */
static const char *const fuzz_fns[] = {
	"qsort_r", "strtod", "strtol", "snprintf", "vsnprintf", "getenv", "strtoul", "bsearch",
	"atoi", "strtok_r",
};


static struct kprobe fuzz_kps[16];
static int fuzz_hits[16];

static int fuzz_pre(struct kprobe *p, struct pt_regs *regs)
{
	int i = (int)(p - fuzz_kps);

	if (fuzz_hits[i]++)
		return 0;
	return oracle_pre(p, regs);
}

static void fuzz_scenario(void)
{
	const char *env = getenv("KP_STACK_FUZZ_SEED");
	unsigned int seed = env ? (unsigned int)strtoul(env, NULL, 0) : (unsigned int)time(NULL);
	int placed = 0;

	fprintf(stderr, "stack fuzz seed %#x (KP_STACK_FUZZ_SEED)\n", seed);
	srand(seed);
	kprobes_set_optimization(false);
	for (int tries = 0; tries < 400 && placed < 16; tries++) {
		const char *name = fuzz_fns[rand() % (int)(sizeof(fuzz_fns) / sizeof(fuzz_fns[0]))];
		void *fn = dlsym(RTLD_DEFAULT, name);
		const ElfW(Sym) *sym;
		Dl_info di;

		if (!fn || !dladdr1(fn, &di, (void **)&sym, RTLD_DL_SYMENT) || !sym || !sym->st_size)
			continue;
		memset(&fuzz_kps[placed], 0, sizeof(fuzz_kps[placed]));
		fuzz_kps[placed].addr = (kprobe_opcode_t *)fn + rand() % sym->st_size;
		fuzz_kps[placed].pre_handler = fuzz_pre;
		/* not an instruction boundary, or not probeable: another one */
		if (register_kprobe(&fuzz_kps[placed]) == 0)
			placed++;
	}
	for (int round = 0; round < 3; round++)
		libc_workload();
	for (int i = 0; i < placed; i++)
		unregister_kprobe(&fuzz_kps[i]);
}

Test(stack, gdb_fuzz_libc_instruction_boundaries)
{
	expect_gdb_stacks(fuzz_scenario, 3);
}

/* ---- signals landing inside a detour ----
 *
 * The detour's own code (the exit that pops the light level, the copied
 * instructions, the jump back) is described by generated unwind
 * information: a program signal that lands there unwinds, with libgcc,
 * into the probed function and its callers.  A thread runs the probed
 * function in a loop while another one signals it; every sample whose
 * interrupted ip is in the detour must reach the probed function's
 * caller. */

static uintptr_t storm_lo, storm_hi;
static volatile long storm_in, storm_ok, storm_samples;
static volatile int storm_stop;

static void on_storm(int sig, siginfo_t *info, void *ctx)
{
	ucontext_t *uc = ctx;
	uintptr_t ip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	unsigned long buf[MAXF];
	struct uw_state s = { buf, 0 };

	storm_samples++;
	if (ip < storm_lo || ip >= storm_hi)
		return;
	storm_in++;
	_Unwind_Backtrace(uw_cb, &s);
	if (has(buf, s.n, target_ra[0]) && has(buf, s.n, caller_ra))
		storm_ok++;
}

static void *storm_kicker(void *arg)
{
	pthread_t t = *(pthread_t *)arg;
	struct timespec ts = { 0, 20000 };

	while (!__atomic_load_n(&storm_stop, __ATOMIC_ACQUIRE)) {
		pthread_kill(t, SIGUSR2);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static int empty_pre(struct kprobe *p, struct pt_regs *regs)
{
	return 0;
}

Test(stack, signals_inside_a_detour_unwind_into_the_probed_function)
{
	struct kprobe kp = { .addr = (void *)st_target, .pre_handler = empty_pre };
	struct sigaction sa = { .sa_sigaction = on_storm, .sa_flags = SA_SIGINFO };
	pthread_t self = pthread_self(), th;
	struct kp_probepoint *pp;
	struct timespec t0, t;

	record_return_addresses();
	sigaction(SIGUSR2, &sa, NULL);
	kprobes_set_optimization(true);
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert(wait_opt(&kp, 3000), "the probe was not optimized");
	pthread_mutex_lock(&kp_registry_lock);
	pp = kp_probepoint_lookup((uintptr_t)st_target);
	storm_lo = pp && pp->ainsn.opt ? pp->ainsn.opt->detour : 0;
	pthread_mutex_unlock(&kp_registry_lock);
	cr_assert_neq(storm_lo, 0);
	storm_hi = storm_lo + arch_detour_bytes();
	cr_assert_eq(pthread_create(&th, NULL, storm_kicker, &self), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 1000; i++)
			run_caller();
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < 1500 &&
		 storm_in < 20);
	__atomic_store_n(&storm_stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	signal(SIGUSR2, SIG_IGN);
	unregister_kprobe(&kp);
	cr_log_info("%ld signals, %ld inside the detour", storm_samples, storm_in);
	if (!storm_in)
		cr_skip_test("no signal landed inside the detour in 1.5 s (%ld signals)", storm_samples);
	cr_expect_eq(storm_ok, storm_in, "%ld of %ld samples in the detour did not unwind to the "
		     "probed function's callers", storm_in - storm_ok, storm_in);
}


/* The same in the middle of a function, on the fast path: a light
 * handler (it spins a little, so that signals land in it too) is jumped
 * into with the detour's exit as its return address; from the handler,
 * the exit and the copy, libgcc unwinds into st_target and its callers.
 * The site is where st_target resumes after calling st_inner. */
extern char kp_opt_midf_xsave[], kp_opt_midf_fxsave[];
static volatile unsigned long mid_spin_sink;
static uintptr_t mid_h_lo, mid_h_hi;
static volatile long mid_h_in, mid_h_ok;

static __attribute__((noinline, no_sanitize("address", "undefined"))) int
mid_spin_pre(struct kprobe *p, struct pt_regs *regs)
{
	for (int i = 0; i < 40; i++)
		mid_spin_sink = mid_spin_sink + 1;
	return 0;
}

static void on_mid_storm(int sig, siginfo_t *info, void *ctx)
{
	ucontext_t *uc = ctx;
	uintptr_t ip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	unsigned long buf[MAXF];
	struct uw_state s = { buf, 0 };
	bool in_detour = ip >= storm_lo && ip < storm_hi, in_handler = ip >= mid_h_lo && ip < mid_h_hi;

	storm_samples++;
	if (!in_detour && !in_handler)
		return;
	_Unwind_Backtrace(uw_cb, &s);
	if (in_detour) {
		storm_in++;
		storm_ok += has(buf, s.n, target_ra[0]) && has(buf, s.n, caller_ra);
	} else {
		mid_h_in++;
		mid_h_ok += has(buf, s.n, target_ra[0]) && has(buf, s.n, caller_ra);
	}
}

Test(stack, signals_in_a_mid_function_fast_detour_unwind_into_the_probed_function)
{
	struct kprobe kp = { .pre_handler = mid_spin_pre };
	struct sigaction sa = { .sa_sigaction = on_mid_storm, .sa_flags = SA_SIGINFO };
	pthread_t self = pthread_self(), th;
	struct kp_probepoint *pp;
	struct ksym sym;
	struct timespec t0, t;
	uintptr_t common;

	record_return_addresses();
	cr_assert_eq(ksym_lookup_name("mid_spin_pre", &sym), 0);
	cr_assert_gt(sym.size, 0);
	mid_h_lo = sym.addr;
	mid_h_hi = sym.addr + sym.size;
	kp.addr = (void *)target_ra[1];		/* in st_target, after the call */
	sigaction(SIGUSR2, &sa, NULL);
	kprobes_set_optimization(true);
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert(wait_opt(&kp, 3000), "the probe was not optimized");
	pthread_mutex_lock(&kp_registry_lock);
	pp = kp_probepoint_lookup((uintptr_t)kp.addr);
	storm_lo = pp && pp->ainsn.opt ? pp->ainsn.opt->detour : 0;
	cr_assert_eq(pp ? pp->fast : NULL, &kp, "not the probepoint's fast probe");
	pthread_mutex_unlock(&kp_registry_lock);
	cr_assert_neq(storm_lo, 0);
	memcpy(&common, (const void *)(storm_lo + 120), sizeof(common));
	cr_assert(common == (uintptr_t)kp_opt_midf_xsave || common == (uintptr_t)kp_opt_midf_fxsave,
		  "the detour does not take the mid-function fast path");
	storm_hi = storm_lo + arch_detour_bytes();
	cr_assert_eq(pthread_create(&th, NULL, storm_kicker, &self), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 1000; i++)
			cr_assert_eq(run_caller(), 5);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < 1500 &&
		 (storm_in < 20 || mid_h_in < 20));
	__atomic_store_n(&storm_stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	signal(SIGUSR2, SIG_IGN);
	unregister_kprobe(&kp);
	cr_log_info("%ld signals, %ld inside the detour, %ld in the handler", storm_samples,
		    storm_in, mid_h_in);
	if (!storm_in && !mid_h_in)
		cr_skip_test("no signal landed inside the detour or the handler in 1.5 s (%ld signals)",
			     storm_samples);
	cr_expect_eq(storm_ok, storm_in, "%ld of %ld samples in the detour did not unwind to the "
		     "probed function's callers", storm_in - storm_ok, storm_in);
	cr_expect_eq(mid_h_ok, mid_h_in, "%ld of %ld samples in the handler did not unwind to the "
		     "probed function's callers", mid_h_in - mid_h_ok, mid_h_in);
}

/* ---- signals landing inside an out-of-line slot ----
 *
 * A rep movsb of a megabyte runs in its slot long enough (it is
 * interruptible) for signals to land there: libgcc unwinds through the
 * slot's generated unwind information, kprobes_stack() from the
 * interrupted registers maps the slot back to the probed instruction. */

__asm__(".text\n"
	".globl st_repmov\n"
	".type st_repmov, @function\n"
	"st_repmov:\n"
	".cfi_startproc\n"
	"mov %rdx, %rcx\n"
	".globl st_repmov_insn\n"
	"st_repmov_insn:\n"
	"rep movsb\n"
	"ret\n"
	".cfi_endproc\n"
	".size st_repmov, . - st_repmov\n");
void st_repmov(void *dst, const void *src, size_t n);
extern char st_repmov_insn[];

static unsigned long rep_ra;

void rep_caller(char *dst, const char *src, size_t n);
TEST_FN void rep_caller(char *dst, const char *src, size_t n)
{
	rep_ra = (unsigned long)__builtin_return_address(0);
	st_repmov(dst, src, n);
	BARRIER();
}

static volatile long slot_in, slot_ok, slot_ks_ok, slot_samples;

static void on_slot_storm(int sig, siginfo_t *info, void *ctx)
{
	ucontext_t *uc = ctx;
	uintptr_t ip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	unsigned long buf[MAXF], ks[MAXF];
	struct uw_state s = { buf, 0 };
	struct pt_regs regs = { 0 };
	int n;

	slot_samples++;
	if (ip < storm_lo || ip >= storm_hi)
		return;
	slot_in++;
	_Unwind_Backtrace(uw_cb, &s);
	if (has(buf, s.n, rep_ra))
		slot_ok++;
	regs.ip = ip;
	regs.sp = (unsigned long)uc->uc_mcontext.gregs[REG_RSP];
	regs.bp = (unsigned long)uc->uc_mcontext.gregs[REG_RBP];
	n = kprobes_stack(&regs, ks, MAXF);
	if (n > 2 && ks[0] == (unsigned long)st_repmov_insn && has(ks, n, rep_ra))
		slot_ks_ok++;
}

Test(stack, signals_inside_a_slot_unwind_into_the_probed_function)
{
	struct kprobe kp = { .addr = (void *)st_repmov_insn, .pre_handler = empty_pre };
	struct sigaction sa = { .sa_sigaction = on_slot_storm, .sa_flags = SA_SIGINFO };
	pthread_t self = pthread_self(), th;
	struct kp_probepoint *pp;
	size_t size = 1 << 20;
	char *a = malloc(size), *b = malloc(size);
	struct timespec t0, t;

	cr_assert(a && b);
	memset(b, 1, size);
	sigaction(SIGUSR2, &sa, NULL);
	kprobes_set_optimization(false);
	cr_assert_eq(register_kprobe(&kp), 0);
	pthread_mutex_lock(&kp_registry_lock);
	pp = kp_probepoint_lookup((uintptr_t)st_repmov_insn);
	storm_lo = pp && pp->ainsn.slot ? pp->ainsn.slot->code : 0;
	pthread_mutex_unlock(&kp_registry_lock);
	cr_assert_neq(storm_lo, 0);
	storm_hi = storm_lo + XOL_SLOT_SIZE;
	storm_stop = 0;
	cr_assert_eq(pthread_create(&th, NULL, storm_kicker, &self), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		rep_caller(a, b, size);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < 1500 &&
		 slot_in < 20);
	__atomic_store_n(&storm_stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	signal(SIGUSR2, SIG_IGN);
	unregister_kprobe(&kp);
	free(a);
	free(b);
	cr_log_info("%ld signals, %ld inside the slot", slot_samples, slot_in);
	if (!slot_in)
		cr_skip_test("no signal landed inside the slot in 1.5 s (%ld signals)", slot_samples);
	cr_expect_eq(slot_ok, slot_in, "libgcc: %ld of %ld samples in the slot did not unwind to "
		     "the probed function's caller", slot_in - slot_ok, slot_in);
	cr_expect_eq(slot_ks_ok, slot_in, "kprobes_stack: %ld of %ld samples in the slot wrong",
		     slot_in - slot_ks_ok, slot_in);
}

/* ---- the two table builders agree ----
 *
 * libdw's CFI evaluation cannot be linked into the agent (it links libdw
 * statically); there the FDEs' programs are run by the library itself.
 * Both must give the same rows, on Debian's libraries. */

#include <fcntl.h>
#include <gelf.h>
#include "elf/cfi.h"

static void expect_same_tables(const char *path)
{
	struct cfi_table a, b;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t diffs = 0;
	Elf *elf;

	if (fd < 0) {
		/* (a warning would make the suite's exit status a failure) */
		cr_log_info("%s: not installed, not compared", path);
		return;
	}
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	cr_assert_not_null(elf);
	cr_assert_eq(cfi_libdw_build(elf, &a), 0, "%s: libdw", path);
	cr_assert_eq(cfi_interp_build(elf, &b), 0, "%s: interpreter", path);
	cr_expect_eq(a.base, b.base, "%s: base", path);
	cr_expect_eq(a.n, b.n, "%s: %zu rows by libdw, %zu by the interpreter", path, a.n, b.n);
	cr_expect_eq(a.code_bytes, b.code_bytes, "%s: code bytes", path);
	for (size_t i = 0; i < a.n && i < b.n; i++) {
		const struct cfi_row *x = &a.rows[i], *y = &b.rows[i];

		if (x->pc == y->pc && x->r.kind == y->r.kind && x->r.cfa8 == y->r.cfa8 &&
		    x->r.bp8 == y->r.bp8 && x->r.ra8 == y->r.ra8)
			continue;
		if (diffs++ < 5)
			cr_log_error("%s row %zu: libdw pc %#x kind %d cfa %d bp %d ra %d, interpreter "
				     "pc %#x kind %d cfa %d bp %d ra %d", path, i, x->pc, x->r.kind,
				     x->r.cfa8, x->r.bp8, x->r.ra8, y->pc, y->r.kind, y->r.cfa8,
				     y->r.bp8, y->r.ra8);
	}
	cr_expect_eq(diffs, 0, "%s: %zu rows differ", path, diffs);
	cfi_table_free(&a);
	cfi_table_free(&b);
	elf_end(elf);
	close(fd);
}

Test(stack, interpreter_tables_equal_libdw_tables)
{
	Dl_info di;

	cr_assert(dladdr((void *)printf, &di) && di.dli_fname);
	expect_same_tables(di.dli_fname);
	expect_same_tables("/lib/x86_64-linux-gnu/libstdc++.so.6");
	expect_same_tables("/lib/x86_64-linux-gnu/libgcc_s.so.1");
	expect_same_tables("/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0");
	expect_same_tables("/proc/self/exe");
}

/* The library's save code (detour_common.S) describes every instruction
 * of its in a form the compact tables hold: a frame standing for the
 * probed instruction (CFI_CHAIN), or, where a handler entered by a jump is
 * about to run, an ordinary call's frame (CFI_SP).  Never a signal frame
 * (whose ucontext the walk would look for) or a rule left to frame
 * pointers. */
Test(stack, save_code_rows_hold_every_instruction)
{
	static const char *const names[] = {
		"kp_opt_entry_sse", "kp_opt_entry_avx512_flags", "kp_opt_centry_avx",
		"kp_opt_centry_sse_flags", "kp_opt_mid_xsave", "kp_opt_midx_fxsave",
		"kp_opt_midf_xsave", "kp_opt_midf_fxsave",
	};

	cr_assert_eq(kp_stack_tables_update(), 0);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct ksym sym;
		long chain = 0, call = 0, other = 0;
		uintptr_t first_other = 0;

		cr_assert_eq(ksym_lookup_name(names[i], &sym), 0, "%s", names[i]);
		for (uintptr_t pc = sym.addr; pc < sym.addr + sym.size; pc++) {
			int k = kp_stack_row_kind(pc);

			if (k == CFI_CHAIN)
				chain++;
			else if (k == CFI_SP)
				call++;
			else if (!other++)
				first_other = pc;
		}
		cr_expect_eq(other, 0, "%s: %ld bytes with another kind of row (first at +%#lx, kind "
			     "%d)", names[i], other, first_other - sym.addr,
			     first_other ? kp_stack_row_kind(first_other) : -1);
		cr_expect_gt(chain, call, "%s: %ld bytes of chain rows, %ld of call rows", names[i],
			     chain, call);
	}
}

/* ---- objects loaded with dlopen (and gone with dlclose) ----
 *
 * libsqlite3 (not loaded by this program otherwise), dlopen'ed after the
 * first registration, calls the program back from sqlite3_exec (no frame
 * pointers in Debian's build): the next registration builds its tables,
 * and the stack at the callback equals gdb's.  dlclose drops them. */

NOFP int sql_row(void *arg, int n, char **values, char **names);
NOFP int sql_row(void *arg, int n, char **values, char **names)
{
	__asm__ volatile("" : : "r"(values) : "memory");
	return 0;
}

static void dlopen_scenario(void)
{
	struct kprobe first = { .addr = (void *)nf_leaf, .pre_handler = oracle_pre };
	struct kprobe kp = { .addr = (void *)sql_row, .pre_handler = oracle_pre };
	int (*open_db)(const char *, void **);
	int (*exec)(void *, const char *, int (*)(void *, int, char **, char **), void *, char **);
	int (*close_db)(void *);
	void *h, *db = NULL;

	kprobes_set_optimization(false);
	if (register_kprobe(&first))	/* tables, before libsqlite3 is loaded */
		_exit(4);
	h = dlopen("libsqlite3.so.0", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		_exit(8);
	*(void **)&open_db = dlsym(h, "sqlite3_open");
	*(void **)&exec = dlsym(h, "sqlite3_exec");
	*(void **)&close_db = dlsym(h, "sqlite3_close");
	if (!open_db || !exec || !close_db || register_kprobe(&kp))
		_exit(9);
	if (open_db(":memory:", &db) ||
	    exec(db, "select 1 union all select 2", sql_row, NULL, NULL))
		_exit(10);
	close_db(db);
	unregister_kprobe(&kp);
	unregister_kprobe(&first);
	dlclose(h);
}

Test(stack, gdb_dlopened_library)
{
	expect_gdb_stacks(dlopen_scenario, 2);
}

/* ---- the vDSO ----
 *
 * A thread loops on clock_gettime (the vDSO's code) while another one
 * signals it: from the registers of every sample interrupted inside the
 * vDSO, kprobes_stack() goes through the vDSO's frame (its tables come
 * from its image in memory) and libc's wrapper to the loop's caller. */

#include <sys/auxv.h>

static uintptr_t vdso_lo, vdso_hi;
static volatile long vdso_in, vdso_ok, vdso_rows;
static unsigned long vdso_loop_ra;

static void on_vdso_storm(int sig, siginfo_t *info, void *ctx)
{
	ucontext_t *uc = ctx;
	uintptr_t ip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	struct pt_regs regs = { 0 };
	unsigned long ks[MAXF];
	int n;

	if (ip < vdso_lo || ip >= vdso_hi)
		return;
	vdso_in++;
	/* (a CFI row, not frame pointers: the vDSO has frame pointers too,
	 * which would give the same stack) */
	if (kp_stack_row_kind(ip) == CFI_SP || kp_stack_row_kind(ip) == CFI_BP)
		vdso_rows++;
	regs.ip = ip;
	regs.sp = (unsigned long)uc->uc_mcontext.gregs[REG_RSP];
	regs.bp = (unsigned long)uc->uc_mcontext.gregs[REG_RBP];
	n = kprobes_stack(&regs, ks, MAXF);
	if (has(ks, n, vdso_loop_ra))
		vdso_ok++;
}

void vdso_loop(long ms);
TEST_FN void vdso_loop(long ms)
{
	struct timespec t0, t;

	vdso_loop_ra = (unsigned long)__builtin_return_address(0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do
		clock_gettime(CLOCK_MONOTONIC, &t);
	while (((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms) &&
	       vdso_in < 20);
	BARRIER();
}

Test(stack, vdso_frames)
{
	struct kprobe kp = { .addr = (void *)nf_leaf, .pre_handler = empty_pre };
	struct sigaction sa = { .sa_sigaction = on_vdso_storm, .sa_flags = SA_SIGINFO };
	const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)getauxval(AT_SYSINFO_EHDR);
	const ElfW(Phdr) *ph;
	pthread_t self = pthread_self(), th;

	if (!eh)
		cr_skip_test("no vDSO");
	ph = (const ElfW(Phdr) *)((const char *)eh + eh->e_phoff);
	for (int i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD) {
			vdso_lo = (uintptr_t)eh;
			vdso_hi = (uintptr_t)eh + ph[i].p_memsz;
		}
	cr_assert_neq(vdso_hi, 0);
	cr_assert_eq(register_kprobe(&kp), 0);	/* the tables */
	unregister_kprobe(&kp);
	sigaction(SIGUSR2, &sa, NULL);
	storm_stop = 0;
	cr_assert_eq(pthread_create(&th, NULL, storm_kicker, &self), 0);
	vdso_loop(1500);
	__atomic_store_n(&storm_stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	signal(SIGUSR2, SIG_IGN);
	cr_log_info("%ld samples inside the vDSO", vdso_in);
	if (!vdso_in)
		cr_skip_test("no signal landed inside the vDSO in 1.5 s");
	cr_expect_eq(vdso_ok, vdso_in, "%ld of %ld samples in the vDSO did not reach the caller",
		     vdso_in - vdso_ok, vdso_in);
	cr_expect_eq(vdso_rows, vdso_in, "%ld of %ld samples in the vDSO without a CFI row",
		     vdso_in - vdso_rows, vdso_in);
}

/* ---- signal handlers calling a probed function ----
 *
 * A thread runs probe A's function in a loop while a timer signals it at
 * a high rate; the signal handler calls sd_leaf, where probe B's handler
 * takes the stack.  Wherever the signal lands in A's detour, the library's
 * save and restore code or A's handler, the stacks taken from the
 * interrupted registers (kprobes_stack, kprobes_stack_memo) and from B's
 * pt_regs (through the signal frame) must go on as the probed function
 * and its callers: a frame in st_target, then target_ra[0], caller_ra.
 * Every call of sd_leaf from the handler while both probes are armed is
 * either a hit of B or counted in B's nmissed (a hit from inside A's
 * handler, on the same thread). */

extern char __start_kprobes_text[] __attribute__((weak));
extern char __stop_kprobes_text[] __attribute__((weak));

enum sd_where { SD_ELSEWHERE, SD_DETOUR, SD_LIBRARY, SD_HANDLER, SD_NWHERE };

static const char *const sd_where_name[SD_NWHERE] = { "elsewhere", "the detour", "the library",
						      "the handler" };

static uintptr_t sd_detour_lo, sd_detour_hi, sd_h_lo, sd_h_hi, sd_fn_lo, sd_fn_hi;
static volatile int sd_armed;
static volatile int sd_interrupted;	/* where the signal being handled landed */
static volatile long sd_calls, sd_hits, sd_in[SD_NWHERE], sd_uc_bad[SD_NWHERE],
	sd_uc_memo_bad[SD_NWHERE], sd_gcc_bad[SD_NWHERE], sd_b_in[SD_NWHERE], sd_b_bad[SD_NWHERE], sd_b_memo_bad[SD_NWHERE];
static unsigned long sd_bad_stack[MAXF], sd_gcc_bad_ip;
static int sd_bad_n;
static volatile unsigned long sd_sink;
static _Alignas(8) char sd_memo_uc[KPROBES_STACK_MEMO_SIZE(MAXF)],
	sd_memo_b[KPROBES_STACK_MEMO_SIZE(MAXF)];

/* The probed function's frame, then its callers. */
static bool sd_chain_ok(const unsigned long *ks, int n)
{
	int i = index_of(ks, n, target_ra[0]);

	return i > 0 && i + 1 < n && ks[i + 1] == caller_ra && ks[i - 1] >= sd_fn_lo &&
	       ks[i - 1] < sd_fn_hi;
}

static void sd_note_bad(const unsigned long *ks, int n)
{
	if (sd_bad_n)
		return;
	memcpy(sd_bad_stack, ks, sizeof(*ks) * (size_t)(n > 0 ? n : 0));
	sd_bad_n = n > 0 ? n : -1;
}

/* A's handlers: each spins a little, so that signals land in them too. */
static __attribute__((noinline, no_sanitize("address", "undefined"))) int
sd_light_pre(struct kprobe *p, struct pt_regs *regs)
{
	for (int i = 0; i < 40; i++)
		sd_sink = sd_sink + 1;
	return 0;
}

static __attribute__((noinline, no_sanitize("address", "undefined"))) int
sd_args_pre(struct kprobe *p, struct pt_regs *regs)
{
	for (int i = 0; i < 40; i++)
		sd_sink = sd_sink + regs->di;
	return 0;
}

static void sd_opaque(void)
{
	sd_sink = sd_sink + 1;
}

static void (*volatile sd_opaque_fn)(void) = sd_opaque;

/* An unknown callee: everything is saved for it. */
static __attribute__((noinline)) int sd_all_pre(struct kprobe *p, struct pt_regs *regs)
{
	for (int i = 0; i < 40; i++)
		sd_sink = sd_sink + 1;
	sd_opaque_fn();
	return 0;
}

static int sd_where_of(uintptr_t ip)
{
	if (ip >= sd_detour_lo && ip < sd_detour_hi)
		return SD_DETOUR;
	if (ip >= sd_h_lo && ip < sd_h_hi)
		return SD_HANDLER;
	if (ip >= (uintptr_t)__start_kprobes_text && ip < (uintptr_t)__stop_kprobes_text)
		return SD_LIBRARY;
	return SD_ELSEWHERE;
}

static void sd_check(const struct pt_regs *regs, struct kprobes_stack_memo *memo,
		     volatile long *bad, volatile long *memo_bad)
{
	unsigned long ks[MAXF], km[MAXF];
	int n = kprobes_stack(regs, ks, MAXF), nm = kprobes_stack_memo(memo, regs, km, MAXF, NULL);

	if (!sd_chain_ok(ks, n)) {
		(*bad)++;
		sd_note_bad(ks, n);
	}
	if (!sd_chain_ok(km, nm))
		(*memo_bad)++;
}

long sd_leaf(long x);
TEST_FN long sd_leaf(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}

static long (*volatile sd_leaf_fn)(long) = sd_leaf;

/* B: the stack at every hit from a handler that interrupted A's code. */
static __attribute__((noinline)) int sd_leaf_pre(struct kprobe *p, struct pt_regs *regs)
{
	int w = sd_interrupted;

	sd_hits++;
	if (w != SD_ELSEWHERE) {
		sd_b_in[w]++;
		sd_check(regs, (struct kprobes_stack_memo *)sd_memo_b, &sd_b_bad[w], &sd_b_memo_bad[w]);
	}
	return 0;
}

static void on_sd_signal(int sig, siginfo_t *info, void *ctx)
{
	ucontext_t *uc = ctx;
	struct pt_regs regs = { 0 };
	int w;

	if (!sd_armed)
		return;
	/* every register: where the library's save code keeps its frame in
	 * rbx (for a few instructions) the walk needs it */
	regs_from_ucontext(&regs, uc);
	w = sd_where_of(regs.ip);
	sd_in[w]++;
	if (w != SD_ELSEWHERE) {
		unsigned long buf[MAXF];
		struct uw_state s = { buf, 0 };

		sd_check(&regs, (struct kprobes_stack_memo *)sd_memo_uc, &sd_uc_bad[w],
			 &sd_uc_memo_bad[w]);
		_Unwind_Backtrace(uw_cb, &s);
		if (!sd_chain_ok(buf, s.n) && !sd_gcc_bad[w]++)
			sd_gcc_bad_ip = regs.ip;
	}
	sd_interrupted = w;
	sd_calls++;
	sd_leaf_fn(sig);
	sd_interrupted = SD_ELSEWHERE;
}

enum sd_level { SD_LIGHT, SD_ARGS, SD_ALL };

/* ours: where (1 << enum sd_where) the stacks of kprobes_stack() and
 * kprobes_stack_memo() are checked too (0: libgcc's and that every call
 * is a hit or missed, in less time) */
#define SD_OURS(w) (1u << (w))
#define SD_ALL_OURS (SD_OURS(SD_DETOUR) | SD_OURS(SD_LIBRARY) | SD_OURS(SD_HANDLER))

static void signals_calling_probed(bool mid, enum sd_level level, unsigned int ours)
{
	static const char *const lname[] = { "light", "args", "all" };
	kprobe_pre_handler_t pre[] = { sd_light_pre, sd_args_pre, sd_all_pre };
	static const char *const hname[] = { "sd_light_pre", "sd_args_pre", "sd_all_pre" };
	struct kprobe a = { .pre_handler = pre[level] }, b = { .addr = (void *)sd_leaf,
							      .pre_handler = sd_leaf_pre };
	struct sigaction sa = { .sa_sigaction = on_sd_signal, .sa_flags = SA_SIGINFO | SA_RESTART };
	struct sigevent sev = { .sigev_notify = SIGEV_THREAD_ID, .sigev_signo = SIGUSR2 };
	struct itimerspec its = { { 0, 40000 }, { 0, 40000 } };
	struct kp_probepoint *pp;
	struct ksym sym;
	struct timespec t0, t;
	timer_t timer;
	long total = 0, bad = 0;

	if (!__start_kprobes_text)
		cr_skip_test("the library's code has no kprobes_text section here");
	record_return_addresses();
	cr_assert_eq(ksym_lookup_name("st_target", &sym), 0);
	sd_fn_lo = sym.addr;
	sd_fn_hi = sym.addr + sym.size;
	cr_assert_eq(ksym_lookup_name(hname[level], &sym), 0);
	sd_h_lo = sym.addr;
	sd_h_hi = sym.addr + sym.size;
	a.addr = mid ? (void *)target_ra[1] : (void *)st_target;
	if (level == SD_ARGS)
		a.flags = KPROBE_FLAG_ARGS_ONLY;
	cr_assert_eq(kprobes_stack_memo_init((struct kprobes_stack_memo *)sd_memo_uc,
					     sizeof(sd_memo_uc)), MAXF);
	cr_assert_eq(kprobes_stack_memo_init((struct kprobes_stack_memo *)sd_memo_b,
					     sizeof(sd_memo_b)), MAXF);
	kprobes_set_optimization(true);
	cr_assert_eq(register_kprobe(&a), 0);
	cr_assert_eq(register_kprobe(&b), 0);
	cr_assert(wait_opt(&a, 3000), "A was not optimized");
	cr_assert(wait_opt(&b, 3000), "B was not optimized");
	pthread_mutex_lock(&kp_registry_lock);
	pp = kp_probepoint_lookup((uintptr_t)a.addr);
	sd_detour_lo = pp && pp->ainsn.opt ? pp->ainsn.opt->detour : 0;
	if (level == SD_LIGHT)
		cr_assert_eq(pp ? pp->fast : NULL, &a, "not the probepoint's fast probe");
	if (level == SD_ARGS)
		cr_assert_eq(pp ? pp->afast : NULL, &a, "not the probepoint's args probe");
	if (level == SD_ALL)
		cr_assert(pp && !pp->fast && !pp->afast, "a fast path for the all level");
	pthread_mutex_unlock(&kp_registry_lock);
	cr_assert_neq(sd_detour_lo, 0);
	sd_detour_hi = sd_detour_lo + arch_detour_bytes();

	sigaction(SIGUSR2, &sa, NULL);
	sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	cr_assert_eq(timer_create(CLOCK_MONOTONIC, &sev, &timer), 0, "%s", strerror(errno));
	sd_armed = 1;
	cr_assert_eq(timer_settime(timer, 0, &its, NULL), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 1000; i++)
			if (run_caller() != 5)
				bad++;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 <
		 (ours ? 1000 : 300));
	/* the signal goes to this thread only: none runs past this */
	sd_armed = 0;
	timer_delete(timer);
	signal(SIGUSR2, SIG_IGN);
	unregister_kprobe(&b);
	unregister_kprobe(&a);

	cr_expect_eq(bad, 0, "%ld wrong results", bad);
	for (int w = SD_DETOUR; w < SD_NWHERE; w++) {
		total += sd_in[w];
		cr_log_info("%s %s, signals in %s: %ld; stacks wrong: libgcc %ld, from the registers "
			    "%ld (memo %ld), from the hit %ld of %ld (memo %ld)", mid ? "mid" : "entry",
			    lname[level], sd_where_name[w], sd_in[w], sd_gcc_bad[w], sd_uc_bad[w],
			    sd_uc_memo_bad[w], sd_b_bad[w], sd_b_in[w], sd_b_memo_bad[w]);
	}
	cr_log_info("%ld calls from the signal handler, %ld hits, %lu missed", sd_calls, sd_hits,
		    b.nmissed);
	if (sd_gcc_bad_ip) {
		Dl_info di;

		if (dladdr((void *)sd_gcc_bad_ip, &di) && di.dli_sname)
			cr_log_info("libgcc: first wrong at %s+%#lx", di.dli_sname,
				    sd_gcc_bad_ip - (unsigned long)di.dli_saddr);
		else
			cr_log_info("libgcc: first wrong at %#lx (%#lx in its object)", sd_gcc_bad_ip,
				    dladdr((void *)sd_gcc_bad_ip, &di) ?
				    sd_gcc_bad_ip - (unsigned long)di.dli_fbase : 0);
	}
	if (sd_bad_n) {
		for (int i = 0; i < sd_bad_n; i++)
			cr_log_info("  bad stack frame %d: %#lx", i, sd_bad_stack[i]);
	}
	cr_expect_eq(sd_hits + (long)b.nmissed, sd_calls, "calls of the probed function from the "
		     "signal handler: %ld, hits %ld, missed %lu", sd_calls, sd_hits, b.nmissed);
	if (!total)
		cr_skip_test("no signal landed in the probe's code in 1 s (%ld signals)",
			     sd_in[SD_ELSEWHERE]);
	for (int w = SD_DETOUR; w < SD_NWHERE; w++) {
		cr_expect_eq(sd_gcc_bad[w], 0, "libgcc from a handler that interrupted %s: %ld of %ld "
			     "wrong", sd_where_name[w], sd_gcc_bad[w], sd_in[w]);
		if (!(ours & SD_OURS(w)))
			continue;
		cr_expect_eq(sd_uc_bad[w], 0, "kprobes_stack from the registers in %s: %ld of %ld wrong",
			     sd_where_name[w], sd_uc_bad[w], sd_in[w]);
		cr_expect_eq(sd_uc_memo_bad[w], 0, "kprobes_stack_memo from the registers in %s: %ld of "
			     "%ld wrong", sd_where_name[w], sd_uc_memo_bad[w], sd_in[w]);
		cr_expect_eq(sd_b_bad[w], 0, "kprobes_stack at a hit in a handler that interrupted %s: "
			     "%ld of %ld wrong", sd_where_name[w], sd_b_bad[w], sd_b_in[w]);
		cr_expect_eq(sd_b_memo_bad[w], 0, "kprobes_stack_memo at a hit in a handler that "
			     "interrupted %s: %ld of %ld wrong", sd_where_name[w], sd_b_memo_bad[w],
			     sd_b_in[w]);
	}
}

/* Every call of the probed function from a signal handler is a hit or
 * missed, whatever the handler interrupted, and libgcc unwinds from
 * wherever it interrupted the probe's code. */
Test(stack, signal_handler_hits_run_or_missed_at_an_entry_light_level)
{
	signals_calling_probed(false, SD_LIGHT, 0);
}

Test(stack, signal_handler_hits_run_or_missed_at_an_entry_args_level)
{
	signals_calling_probed(false, SD_ARGS, 0);
}

Test(stack, signal_handler_hits_run_or_missed_at_an_entry_all_level)
{
	signals_calling_probed(false, SD_ALL, 0);
}

Test(stack, signal_handler_hits_run_or_missed_mid_function_fast_path)
{
	signals_calling_probed(true, SD_LIGHT, 0);
}

Test(stack, signal_handler_hits_run_or_missed_mid_function)
{
	signals_calling_probed(true, SD_ALL, 0);
}

/* The same with kprobes_stack() and kprobes_stack_memo() where they
 * unwind already: anywhere in the detour, and in a handler entered by a
 * jump from it (the fast paths: light and args levels at an entry, the
 * mid-function fast exit), whose return address leads into the detour. */
#define SD_DETOUR_AND_JUMPED (SD_OURS(SD_DETOUR) | SD_OURS(SD_HANDLER))

Test(stack, signal_handler_stacks_in_the_detour_at_an_entry_light_level)
{
	signals_calling_probed(false, SD_LIGHT, SD_DETOUR_AND_JUMPED);
}

Test(stack, signal_handler_stacks_in_the_detour_at_an_entry_args_level)
{
	signals_calling_probed(false, SD_ARGS, SD_DETOUR_AND_JUMPED);
}

Test(stack, signal_handler_stacks_in_the_detour_at_an_entry_all_level)
{
	signals_calling_probed(false, SD_ALL, SD_OURS(SD_DETOUR));
}

Test(stack, signal_handler_stacks_in_the_detour_mid_function_fast_path)
{
	signals_calling_probed(true, SD_LIGHT, SD_DETOUR_AND_JUMPED);
}

Test(stack, signal_handler_stacks_in_the_detour_mid_function)
{
	signals_calling_probed(true, SD_ALL, SD_OURS(SD_DETOUR));
}

/* Everywhere, the library's save and restore code and the handlers it
 * calls included: there the compact tables hold the save code's own
 * description (CFI_CHAIN rows: the CFA from rsp, from the frame's address
 * the code keeps on top of a stack it realigned, or for a few
 * instructions from rbx; the caller read through the probepoint). */

Test(stack, signal_handler_stacks_at_an_entry_light_level)
{
	signals_calling_probed(false, SD_LIGHT, SD_ALL_OURS);
}

Test(stack, signal_handler_stacks_at_an_entry_args_level)
{
	signals_calling_probed(false, SD_ARGS, SD_ALL_OURS);
}

Test(stack, signal_handler_stacks_at_an_entry_all_level)
{
	signals_calling_probed(false, SD_ALL, SD_ALL_OURS);
}

Test(stack, signal_handler_stacks_mid_function_fast_path)
{
	signals_calling_probed(true, SD_LIGHT, SD_ALL_OURS);
}

Test(stack, signal_handler_stacks_mid_function)
{
	signals_calling_probed(true, SD_ALL, SD_ALL_OURS);
}
