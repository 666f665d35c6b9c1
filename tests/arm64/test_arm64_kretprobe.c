/*
 * The library on arm64, beyond single probes: return probes through the
 * link register (return values, entry handlers and data, PAC frames,
 * registers and FP/SIMD return values kept, recursion and maxactive,
 * frames left by longjmp, unwinders through the return stubs), jprobes,
 * and probes hit by many threads, changed while they run, and inherited
 * by fork.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <execinfo.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kprobes.h"
#include "hang_watch.h"
#include "testutil.h"
#include "helpers_a64.h"

static volatile long hits, posts;

static int count_pre(struct kprobe *p, struct pt_regs *regs)
{
	hits++;
	return 0;
}

static void count_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
	posts++;
}

/* ---- threads and fork ---- */

/* Enough calls for four threads' hits to interleave: each hit is two
 * signals (the BRK and the slot's exit), some milliseconds apiece in the
 * emulator on a loaded host. */
#define NTHREADS 4
#define CALLS 1500

static void *caller(void *arg)
{
	long sum = 0;

	for (int i = 0; i < CALLS; i++)
		sum += a64_add(i, 1) - i;
	return (void *)sum;
}

static volatile long thread_hits;

static int thread_pre(struct kprobe *p, struct pt_regs *regs)
{
	__atomic_add_fetch(&thread_hits, 1, __ATOMIC_RELAXED);
	return 0;
}

static void thread_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
}

Test(a64_kprobe, threads_hit_every_time, .timeout = 120)
{
	struct kprobe kp = { .addr = AT(a64_add, 8), .pre_handler = thread_pre,
			     .post_handler = thread_post };
	pthread_t th[NTHREADS];

	thread_hits = 0;
	cr_assert_eq(register_kprobe(&kp), 0);
	for (int i = 0; i < NTHREADS; i++)
		pthread_create(&th[i], NULL, caller, NULL);
	for (int i = 0; i < NTHREADS; i++) {
		void *r;

		pthread_join(th[i], &r);
		cr_expect_eq((long)r, CALLS);
	}
	cr_expect_eq(thread_hits, NTHREADS * CALLS);
	unregister_kprobe(&kp);
}

static volatile bool stop_callers;

static void *caller_until_stopped(void *arg)
{
	long bad = 0;

	while (!__atomic_load_n(&stop_callers, __ATOMIC_RELAXED))
		for (int i = 0; i < 100; i++)
			bad += a64_add(i, 2) != i + 2 || a64_cbz(i) != (i ? 1 : 2);
	return (void *)bad;
}

/* The round the test is at, for the watchdogs (it has hung once, under
 * ASan, in some fifty runs: hang_watch.h). */
static volatile int reg_round, reg_step;

static void reg_where(char *buf, size_t len)
{
	snprintf(buf, len, "round %d, step %d", reg_round, reg_step);
}

Test(a64_kprobe, register_and_unregister_while_threads_run, .timeout = 120)
{
	pthread_t th[NTHREADS];
	struct hang_watch watch;

	stop_callers = false;
	hang_watch_start(&watch, "register/unregister", 60, reg_where);
	for (int i = 0; i < NTHREADS; i++)
		pthread_create(&th[i], NULL, caller_until_stopped, NULL);
	for (int round = 0; round < 20; round++) {
		struct kprobe a = { .addr = AT(a64_add, (round % 5) * 4), .pre_handler = thread_pre };
		struct kprobe b = { .addr = AT(a64_cbz, 0), .pre_handler = thread_pre,
				    .post_handler = round & 1 ? thread_post : NULL };

		reg_round = round;
		reg_step = 1;
		cr_assert_eq(register_kprobe(&a), 0);
		reg_step = 2;
		cr_assert_eq(register_kprobe(&b), 0);
		reg_step = 3;
		usleep(200);
		reg_step = 4;
		unregister_kprobe(&b);
		reg_step = 5;
		unregister_kprobe(&a);
	}
	reg_step = 6;
	stop_callers = true;
	for (int i = 0; i < NTHREADS; i++) {
		void *r;

		pthread_join(th[i], &r);
		cr_expect_eq((long)r, 0, "wrong results while probes came and went");
	}
	hang_watch_stop(&watch);
}

Test(a64_kprobe, fork_child_hits_the_probe)
{
	struct kprobe kp = { .addr = AT(a64_add, 0), .pre_handler = count_pre,
			     .post_handler = count_post };
	int status;
	pid_t pid;

	hits = posts = 0;
	cr_assert_eq(register_kprobe(&kp), 0);
	pid = fork();
	if (pid == 0)
		_exit(a64_add(2, 3) == 5 && hits == 1 && posts == 1 ? 0 : 1);
	cr_assert_gt(pid, 0);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x", status);
	cr_expect_eq(hits, 0, "the parent did not call it");
	unregister_kprobe(&kp);
}

/* ---- return probes ---- */

static volatile long ret_hits, ret_value, entry_hits;
static volatile unsigned long ret_addr_seen;

static int ret_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	ret_hits++;
	ret_value = (long)regs_return_value(regs);
	ret_addr_seen = (unsigned long)ri->ret_addr;
	return 0;
}

struct entry_data {
	long arg;
};

static int entry_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	entry_hits++;
	((struct entry_data *)ri->data)->arg = (long)regs_get_kernel_argument(regs, 0);
	return 0;
}

static volatile long data_seen;

static int ret_with_data(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	ret_hits++;
	data_seen = ((struct entry_data *)ri->data)->arg;
	ret_value = (long)regs_return_value(regs);
	return 0;
}

static void ret_reset(void)
{
	ret_hits = ret_value = entry_hits = data_seen = 0;
	ret_addr_seen = 0;
}

TEST_FN static long call_add_from_here(long a, long b, unsigned long *ret)
{
	long r;

	*ret = (unsigned long)__builtin_return_address(0);
	r = a64_add(a, b);
	KEEP(r);
	return r;
}

Test(a64_kretprobe, return_value_and_address)
{
	struct kretprobe rp = { .kp.addr = AT(a64_add, 0), .handler = ret_handler };
	unsigned long mine;

	ret_reset();
	cr_assert_eq(register_kretprobe(&rp), 0);
	cr_expect_eq(call_add_from_here(40, 2, &mine), 42);
	cr_expect_eq(ret_hits, 1);
	cr_expect_eq(ret_value, 42);
	cr_expect_neq(ret_addr_seen, 0);
	cr_expect(ret_addr_seen > (unsigned long)call_add_from_here &&
		  ret_addr_seen < (unsigned long)call_add_from_here + 256,
		  "the real return address, in call_add_from_here: %#lx", ret_addr_seen);
	unregister_kretprobe(&rp);
	cr_expect_eq(a64_add(1, 1), 2);
	cr_expect_eq(ret_hits, 1);
}

Test(a64_kretprobe, leaf_entry_handler_and_data)
{
	struct kretprobe rp = { .kp.addr = AT(a64_add_one, 0), .handler = ret_with_data,
				.entry_handler = entry_handler,
				.data_size = sizeof(struct entry_data) };

	ret_reset();
	cr_assert_eq(register_kretprobe(&rp), 0);
	cr_expect_eq(a64_add_one(9), 10);
	cr_expect_eq(entry_hits, 1);
	cr_expect_eq(ret_hits, 1);
	cr_expect_eq(data_seen, 9);
	cr_expect_eq(ret_value, 10);
	unregister_kretprobe(&rp);
}

Test(a64_kretprobe, pac_frame_returns_through_the_trampoline)
{
	struct kretprobe rp = { .kp.addr = AT(a64_pac, 0), .handler = ret_handler };

	ret_reset();
	cr_assert_eq(register_kretprobe(&rp), 0);
	for (int i = 0; i < 10; i++)
		cr_expect_eq(a64_pac(i), i + 3);
	cr_expect_eq(ret_hits, 10);
	cr_expect_eq(ret_value, 12);
	unregister_kretprobe(&rp);
}

static bool optimized(const struct kprobe *p)
{
	return __atomic_load_n(&p->flags, __ATOMIC_ACQUIRE) & KPROBE_FLAG_OPTIMIZED;
}

/* Registers rp with its entry a BRK, or jump-optimized (a return probe
 * without an entry handler then takes the detour's light path). */
static void arm_rp(struct kretprobe *rp, bool opt)
{
	kprobes_set_optimization(opt);
	cr_assert_eq(register_kretprobe(rp), 0);
	cr_assert_eq(kprobes_optimize_now(), 0);
	cr_assert_eq(optimized(&rp->kp), opt, "%s entry", opt ? "an optimized" : "a BRK");
}

Test(a64_kretprobe, registers_and_float_return_are_kept)
{
	for (int opt = 0; opt <= 1; opt++) {
		struct kretprobe rp = { .kp.addr = AT(a64_add_one_keeps, 0), .handler = ret_handler };
		struct kretprobe fp = { .kp.addr = AT(a64_fdouble, 0), .handler = ret_handler };

		ret_reset();
		arm_rp(&rp, opt);
		arm_rp(&fp, opt);
		cr_expect_eq(a64_regs_kept(), 0, "optimized: %d", opt);
		cr_expect_eq(ret_hits, 1);
		cr_expect_eq(ret_value, 2);
		cr_expect_eq(a64_fdouble(1.25), 2.5);
		cr_expect_eq(ret_hits, 2);
		unregister_kretprobe(&fp);
		unregister_kretprobe(&rp);
	}
}

/* Return handlers of the trampoline's three levels: one that reads no
 * pt_regs and changes no register the caller may keep (its needs: none),
 * one that reads none but changes x4-x18 (KP_OPT_SAVE_SCRATCH), and one
 * that changes the return value through its pt_regs (KP_OPT_SAVE_REGS),
 * whose change is the caller's. */
static int ret_count_only(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	(void)regs;
	ret_hits++;
	return 0;
}

static int ret_clobbers(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	(void)regs;
	a64_clobber_scratch();
	ret_hits++;
	return 0;
}

static int ret_sets_x0(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	regs->regs[0] = 77;
	ret_hits++;
	return 0;
}

Test(a64_kretprobe, every_handler_level_keeps_the_registers)
{
	kretprobe_handler_t h[] = { ret_count_only, ret_clobbers, ret_handler };

	for (int opt = 0; opt <= 1; opt++) {
		for (int i = 0; i < 3; i++) {
			struct kretprobe rp = { .kp.addr = AT(a64_add_one_keeps, 0), .handler = h[i] };

			ret_reset();
			arm_rp(&rp, opt);
			for (int k = 0; k < 3; k++)
				cr_expect_eq(a64_regs_kept(), 0, "handler %d, optimized: %d", i, opt);
			cr_expect_eq(ret_hits, 3, "handler %d, optimized: %d", i, opt);
			unregister_kretprobe(&rp);
		}
		{
			struct kretprobe rp = { .kp.addr = AT(a64_add, 0), .handler = ret_sets_x0 };

			ret_reset();
			arm_rp(&rp, opt);
			for (int k = 0; k < 3; k++)
				cr_expect_eq(a64_add(1, 2), 77, "optimized: %d", opt);
			cr_expect_eq(ret_hits, 3);
			unregister_kretprobe(&rp);
			cr_expect_eq(a64_add(1, 2), 3);
		}
	}
}

TEST_FN static long fact(long n)
{
	long r = n <= 1 ? 1 : n * fact(n - 1);

	KEEP(r);
	return r;
}

Test(a64_kretprobe, recursion_and_maxactive)
{
	for (int opt = 0; opt <= 1; opt++) {
		struct kretprobe rp = { .kp.addr = (kprobe_opcode_t *)fact, .handler = ret_handler,
					.maxactive = 3 };

		ret_reset();
		arm_rp(&rp, opt);
		cr_expect_eq(fact(5), 120);
		cr_expect_eq(ret_hits, 3, "three instances at most (optimized: %d)", opt);
		cr_expect_eq(rp.nmissed, 2);
		cr_expect_eq(ret_value, 120, "the outermost returns last");
		cr_expect_eq(fact(10), 3628800);
		cr_expect_eq(ret_hits, 6);
		unregister_kretprobe(&rp);
	}
}

static jmp_buf lj;

TEST_FN static long jumps_out(long x)
{
	if (x)
		longjmp(lj, 1);
	return 0;
}

/* Twenty calls left by longjmp (nothing live across the setjmp). */
static void leave_by_longjmp(void)
{
	for (volatile int i = 0; i < 20; i++)
		if (!setjmp(lj))
			jumps_out(1);
}

Test(a64_kretprobe, frames_left_by_longjmp_are_dropped)
{
	for (int opt = 0; opt <= 1; opt++) {
		struct kretprobe rp = { .kp.addr = (kprobe_opcode_t *)jumps_out,
					.handler = ret_handler, .maxactive = 2 };

		ret_reset();
		arm_rp(&rp, opt);
		leave_by_longjmp();
		cr_expect_eq(jumps_out(0), 0);
		cr_expect_eq(ret_hits, 1, "optimized: %d", opt);
		cr_expect_eq(rp.nmissed, 0, "instances of the left frames came back");
		unregister_kretprobe(&rp);
	}
}

static volatile int bt_depth;
static void *bt_frames[32];

TEST_FN static long bt_inner(long x)
{
	bt_depth = backtrace(bt_frames, 32);
	return x + 1;
}

TEST_FN static long bt_outer(long x)
{
	long r = bt_inner(x);

	KEEP(r);
	return r + 1;
}

TEST_FN static long bt_caller(void)
{
	long r = bt_outer(1);

	KEEP(r);
	return r;
}

Test(a64_kretprobe, unwinders_pass_through_the_stub)
{
	struct kretprobe rp = { .kp.addr = (kprobe_opcode_t *)bt_outer, .handler = ret_handler };
	bool found = false;

	ret_reset();
	cr_assert_eq(register_kretprobe(&rp), 0);
	cr_expect_eq(bt_caller(), 3);
	cr_expect_eq(ret_hits, 1);
	for (int i = 0; i < bt_depth; i++)
		if ((uintptr_t)bt_frames[i] > (uintptr_t)bt_caller &&
		    (uintptr_t)bt_frames[i] < (uintptr_t)bt_caller + 128)
			found = true;
	cr_expect(found, "backtrace() from inside a return-probed function reaches its caller "
			 "(%d frames)", bt_depth);
	unregister_kretprobe(&rp);
}

static void *ret_caller(void *arg)
{
	long bad = 0;

	for (int i = 0; i < CALLS; i++)
		bad += a64_add(i, 3) != i + 3;
	return (void *)bad;
}

Test(a64_kretprobe, threads, .timeout = 120)
{
	struct kretprobe rp = { .kp.addr = AT(a64_add, 0), .handler = ret_handler,
				.maxactive = 2 * NTHREADS };
	pthread_t th[NTHREADS];

	ret_reset();
	cr_assert_eq(register_kretprobe(&rp), 0);
	for (int i = 0; i < NTHREADS; i++)
		pthread_create(&th[i], NULL, ret_caller, NULL);
	for (int i = 0; i < NTHREADS; i++) {
		void *r;

		pthread_join(th[i], &r);
		cr_expect_eq((long)r, 0);
	}
	cr_expect_eq(rp.nmissed, 0);
	unregister_kretprobe(&rp);
}

/* ---- jprobes ---- */

static volatile long jp_a, jp_b, jp_hits;

static long jp_entry(long a, long b)
{
	jp_hits++;
	jp_a = a;
	jp_b = b;
	jprobe_return();
	return 0;
}

Test(a64_jprobe, entry_sees_the_arguments)
{
	struct jprobe jp = { .kp.addr = AT(a64_add, 0), .entry = (void *)jp_entry };

	jp_hits = jp_a = jp_b = 0;
	cr_assert_eq(register_jprobe(&jp), 0);
	cr_expect_eq(a64_add(30, 12), 42);
	cr_expect_eq(jp_hits, 1);
	cr_expect_eq(jp_a, 30);
	cr_expect_eq(jp_b, 12);
	cr_expect_eq(a64_add(1, 2), 3);
	cr_expect_eq(jp_hits, 2);
	unregister_jprobe(&jp);
	cr_expect_eq(a64_add(1, 2), 3);
	cr_expect_eq(jp_hits, 2);
}

Test(a64_jprobe, on_a_simulated_instruction)
{
	struct jprobe jp = { .kp.addr = AT(a64_cbz, 0), .entry = (void *)jp_entry };

	jp_hits = 0;
	cr_assert_eq(register_jprobe(&jp), 0);
	cr_expect_eq(a64_cbz(0), 2);
	cr_expect_eq(a64_cbz(3), 1);
	cr_expect_eq(jp_hits, 2);
	cr_expect_eq(jp_a, 3);
	unregister_jprobe(&jp);
}

/* ---- every function of libc ---- */

#include "arch/arm64/insn.h"
#include "elf/symbols.h"

/* libc has about 2,450 sized entries; the emulator arms this many within
 * the test's time under load (all of them take minutes there). */
#define LIBC_MAX 800

static struct kprobe libc_probes[LIBC_MAX];
static struct kprobe *libc_ptrs[LIBC_MAX];
static int libc_n;
static volatile long libc_hits;

static int libc_hit(struct kprobe *p, struct pt_regs *regs)
{
	__atomic_fetch_add(&libc_hits, 1, __ATOMIC_RELAXED);
	return 0;
}

static int libc_add(const struct ksym *s, void *arg)
{
	if (!s->size || libc_n == LIBC_MAX)
		return 0;
	for (int i = libc_n - 1; i >= 0 && i >= libc_n - 8; i--)
		if ((uintptr_t)libc_probes[i].addr == s->addr)
			return 0;
	libc_probes[libc_n].addr = (kprobe_opcode_t *)s->addr;
	libc_probes[libc_n].pre_handler = libc_hit;
	libc_ptrs[libc_n] = &libc_probes[libc_n];
	libc_n++;
	return 0;
}

static int cmp_long(const void *a, const void *b)
{
	return *(const long *)a < *(const long *)b ? -1 : *(const long *)a > *(const long *)b;
}

static void libc_workload(char *out, size_t cap)
{
	long arr[100];
	char *buf = malloc(300);
	size_t o = 0;

	for (int i = 0; i < 100; i++)
		arr[i] = (i * 7919) % 211;
	qsort(arr, 100, sizeof(long), cmp_long);
	for (int i = 0; i < 10; i++)
		o += snprintf(out + o, cap - o, "%ld:%x:%5.2f ", arr[i], (int)arr[i] * 3,
			      arr[i] / 3.0);
	strcpy(buf, "hello world");
	strcat(buf, " again");
	snprintf(out + o, cap - o, "[%s %zu %d %s %ld]", buf, strlen(buf), strcmp(buf, "hello"),
		 strstr(buf, "wor"), strtol("12345", NULL, 10));
	free(buf);
}

/* Registers libc_probes[from, from + n) as one batch, or, when the batch
 * is refused, one by one, dropping (and counting) those refused. */
static int libc_register_chunk(int from, int n, int *refused)
{
	int err = register_kprobes(&libc_ptrs[from], n);

	if (err != -EINVAL)
		return err;
	for (int i = from; i < from + n; i++) {
		err = register_kprobe(libc_ptrs[i]);
		if (err == -EINVAL) {
			libc_ptrs[i] = NULL;
			(*refused)++;
		} else if (err) {
			return err;
		}
	}
	return 0;
}

/* The first LIBC_MAX sized function entries of libc at once, registered in
 * batches of 64 (test_libc_all's one-by-one registration of all of them
 * does not finish within its timeout under emulation): the workload's
 * output is the same as unprobed, and the probes are hit.  The entries the classifier refuses
 * are left out beforehand; the few the registry refuses (the library's
 * own signal path) are found in their batch and left out. */
Test(a64_libc, many_function_entries, .timeout = 110)
{
	static char want[2048], got[2048];
	int refused = 0, undecodable = 0, n;

	libc_workload(want, sizeof(want));
	cr_assert_eq(ksym_foreach("libc.so.6", "*", libc_add, NULL), 0);
	cr_assert_eq(libc_n, LIBC_MAX, "only %d functions in libc", libc_n);
	for (int i = 0; i < libc_n; i++) {
		struct a64_insn in;

		if (a64_insn_decode(*(const uint32_t *)libc_probes[i].addr, &in)) {
			libc_probes[i] = libc_probes[--libc_n];
			libc_ptrs[i] = &libc_probes[i];
			undecodable++;
			i--;
		}
	}
	cr_assert_lt(undecodable, 20, "%d libc entries undecodable", undecodable);
	for (int i = 0; i < libc_n; i += 64)
		cr_assert_eq(libc_register_chunk(i, libc_n - i < 64 ? libc_n - i : 64, &refused), 0);
	cr_assert_lt(refused, 20, "%d libc functions refused", refused);
	/* the registered ones, packed for one unregistration */
	n = 0;
	for (int i = 0; i < libc_n; i++)
		if (libc_ptrs[i])
			libc_ptrs[n++] = libc_ptrs[i];
	libc_hits = 0;
	libc_workload(got, sizeof(got));
	unregister_kprobes(libc_ptrs, n);
	cr_expect_str_eq(got, want);
	cr_expect_gt(libc_hits, 20, "only %ld hits", libc_hits);
	cr_log_info("%d libc functions probed, %d refused, %d undecodable, %ld hits", n,
		    refused, undecodable, libc_hits);
}

/* ---- kprobes_stack ---- */

static unsigned long st_ips[16];
static volatile int st_n;

static int take_stack(struct kprobe *p, struct pt_regs *regs)
{
	st_n = kprobes_stack(regs, st_ips, 16);
	return 0;
}

TEST_FN static long st_leaf(long x)
{
	return x + 1;
}

TEST_FN static long st_mid(long x)
{
	long r = st_leaf(x);

	KEEP(r);
	return r + 1;
}

TEST_FN static long st_top(long x)
{
	long r = st_mid(x);

	KEEP(r);
	return r + 1;
}

static bool st_has(const void *fn, size_t len)
{
	for (int i = 0; i < st_n; i++)
		if (st_ips[i] > (unsigned long)fn && st_ips[i] < (unsigned long)fn + len)
			return true;
	return false;
}

/* At a function's first instruction the return address is still in x30:
 * the unwinder takes it from there (the CFI says "same value"), then goes
 * on through the callers' frames. */
Test(a64_stack, from_a_function_entry)
{
	struct kprobe kp = { .addr = (kprobe_opcode_t *)st_leaf, .pre_handler = take_stack };

	st_n = 0;
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_expect_eq(st_top(1), 4);
	unregister_kprobe(&kp);
	cr_assert_geq(st_n, 3, "%d frames", st_n);
	cr_expect_eq(st_ips[0], (unsigned long)st_leaf);
	cr_expect(st_has(st_mid, 64), "st_mid's call in the stack");
	cr_expect(st_has(st_top, 64), "st_top's call in the stack");
}

/* Through a return-probed frame: its saved return address is the stub,
 * which the unwinder maps back to the real caller. */
Test(a64_stack, through_a_return_probed_frame)
{
	struct kprobe kp = { .addr = (kprobe_opcode_t *)st_leaf, .pre_handler = take_stack };
	struct kretprobe rp = { .kp.addr = (kprobe_opcode_t *)st_mid, .handler = ret_handler };

	st_n = 0;
	ret_reset();
	cr_assert_eq(register_kretprobe(&rp), 0);
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_expect_eq(st_top(1), 4);
	unregister_kprobe(&kp);
	unregister_kretprobe(&rp);
	cr_expect_eq(ret_hits, 1);
	cr_assert_geq(st_n, 3, "%d frames", st_n);
	cr_expect(st_has(st_mid, 64), "st_mid's call in the stack");
	cr_expect(st_has(st_top, 64), "st_top's call, past the stub, in the stack");
}

/* ---- return probes and unwinding on jump-optimized entries ---- */

/* The entry's hijack of x30 works from the detour as from the BRK. */
Test(a64_kretprobe, optimized_entry)
{
	struct kretprobe rp = { .kp.addr = AT(a64_add, 0), .handler = ret_handler };
	unsigned long mine;

	ret_reset();
	cr_assert_eq(register_kretprobe(&rp), 0);
	cr_assert_eq(kprobes_optimize_now(), 0);
	cr_assert(optimized(&rp.kp), "the entry is jump-optimized");
	cr_assert_eq(*(volatile uint32_t *)a64_add & 0xfc000000u, 0x14000000u, "a B");
	for (int i = 0; i < 100; i++)
		cr_expect_eq(call_add_from_here(40, i, &mine), 40 + i);
	cr_expect_eq(ret_hits, 100);
	cr_expect_eq(ret_value, 139);
	cr_expect(ret_addr_seen > (unsigned long)call_add_from_here &&
		  ret_addr_seen < (unsigned long)call_add_from_here + 256,
		  "the real return address, in call_add_from_here: %#lx", ret_addr_seen);
	unregister_kretprobe(&rp);
	cr_expect_eq(a64_add(1, 1), 2);
	cr_expect_eq(ret_hits, 100);
}

Test(a64_kretprobe, optimized_leaf_and_pac_entries)
{
	struct kretprobe rp = { .kp.addr = AT(a64_add_one, 0), .handler = ret_with_data,
				.entry_handler = entry_handler,
				.data_size = sizeof(struct entry_data) };
	struct kretprobe pac = { .kp.addr = AT(a64_pac, 0), .handler = ret_handler };

	ret_reset();
	cr_assert_eq(register_kretprobe(&rp), 0);
	cr_assert_eq(register_kretprobe(&pac), 0);
	cr_assert_eq(kprobes_optimize_now(), 0);
	cr_assert(optimized(&rp.kp));
	cr_assert(optimized(&pac.kp));
	cr_expect_eq(a64_add_one(9), 10);
	cr_expect_eq(entry_hits, 1);
	cr_expect_eq(data_seen, 9);
	for (int i = 0; i < 10; i++)
		cr_expect_eq(a64_pac(i), i + 3);
	cr_expect_eq(ret_hits, 11);
	cr_expect_eq(ret_value, 12);
	unregister_kretprobe(&pac);
	unregister_kretprobe(&rp);
}

/* The optimized entry's set-up in assembly (detour.S, a return probe
 * alone on its probepoint) and in C (a kprobe before it): threads call a
 * function whose entry is a jump-optimized return probe while a kprobe
 * comes and goes there and the return probe is disabled and enabled.
 * Every call returns its value; with the probe alone again, every call is
 * counted and none missed. */
static volatile long opt_ret_hits;
static volatile int opt_stop;

static int opt_ret_count(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	__atomic_add_fetch(&opt_ret_hits, 1, __ATOMIC_RELAXED);
	return 0;
}

static void *opt_ret_caller(void *arg)
{
	long bad = 0;

	for (long i = 0; !__atomic_load_n(&opt_stop, __ATOMIC_ACQUIRE); i++)
		bad += a64_add(i, 5) != i + 5;
	return (void *)bad;
}

Test(a64_kretprobe, optimized_entry_while_probes_change, .timeout = 150)
{
	struct kretprobe rp = { .kp.addr = AT(a64_add, 0), .handler = opt_ret_count,
				.maxactive = 4 * NTHREADS };
	pthread_t th[NTHREADS];
	long before, missed;

	cr_assert_eq(register_kretprobe(&rp), 0);
	cr_assert_eq(kprobes_optimize_now(), 0);
	cr_assert(optimized(&rp.kp));
	opt_stop = 0;
	for (int i = 0; i < NTHREADS; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, opt_ret_caller, NULL), 0);
	for (int round = 0; round < 30; round++) {
		struct kprobe kp = { .addr = AT(a64_add, 0), .pre_handler = thread_pre };

		cr_assert_eq(register_kprobe(&kp), 0);
		kprobes_optimize_now();
		usleep(2000);
		unregister_kprobe(&kp);
		kprobes_optimize_now();
		if (round % 3 == 0) {
			cr_assert_eq(disable_kretprobe(&rp), 0);
			usleep(1000);
			cr_assert_eq(enable_kretprobe(&rp), 0);
			kprobes_optimize_now();
		}
		usleep(2000);
	}
	__atomic_store_n(&opt_stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < NTHREADS; i++) {
		void *r;

		pthread_join(th[i], &r);
		cr_expect_eq((long)r, 0, "thread %d: calls that returned a wrong value", i);
	}
	cr_assert_eq(kprobes_optimize_now(), 0);
	cr_assert(optimized(&rp.kp), "alone again, the entry is jump-optimized");
	before = opt_ret_hits;
	missed = rp.nmissed;
	for (long i = 0; i < 1000; i++)
		cr_assert_eq(a64_add(i, 7), i + 7);
	cr_expect_eq(opt_ret_hits - before, 1000);
	cr_expect_eq(rp.nmissed, missed);
	unregister_kretprobe(&rp);
	cr_expect_eq(a64_add(1, 1), 2);
}

/* A fork child inherits the parent's cache of instances, whose owner is
 * the parent's thread: its optimized entries take them through the C
 * set-up, which makes them the child's, then through the assembly. */
Test(a64_kretprobe, optimized_entry_in_a_fork_child)
{
	struct kretprobe rp = { .kp.addr = AT(a64_add, 0), .handler = opt_ret_count,
				.maxactive = 8 };
	int status;
	pid_t pid;

	cr_assert_eq(register_kretprobe(&rp), 0);
	cr_assert_eq(kprobes_optimize_now(), 0);
	cr_assert(optimized(&rp.kp));
	opt_ret_hits = 0;
	for (long i = 0; i < 10; i++)
		cr_assert_eq(a64_add(i, 2), i + 2);
	cr_assert_eq(opt_ret_hits, 10);
	pid = fork();
	if (pid == 0) {
		long bad = 0;

		for (long i = 0; i < 50; i++)
			bad += a64_add(i, 4) != i + 4;
		_exit(!bad && opt_ret_hits == 60 && rp.nmissed == 0 ? 0 : 1);
	}
	cr_assert_gt(pid, 0);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x", status);
	for (long i = 0; i < 10; i++)
		cr_assert_eq(a64_add(i, 6), i + 6);
	cr_expect_eq(opt_ret_hits, 20);
	cr_expect_eq(rp.nmissed, 0);
	unregister_kretprobe(&rp);
}

/* backtrace() in a handler called from a detour goes on into the probed
 * function's callers (detour.S describes its frame as the probed code). */
static int bt_pre(struct kprobe *p, struct pt_regs *regs)
{
	bt_depth = backtrace(bt_frames, 32);
	return 0;
}

Test(a64_kretprobe, unwinders_pass_through_the_detour)
{
	struct kprobe kp = { .addr = (kprobe_opcode_t *)bt_outer, .pre_handler = bt_pre };
	bool found = false;

	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert_eq(kprobes_optimize_now(), 0);
	cr_assert(optimized(&kp));
	bt_depth = 0;
	cr_expect_eq(bt_caller(), 3);
	for (int i = 0; i < bt_depth; i++)
		if ((uintptr_t)bt_frames[i] > (uintptr_t)bt_caller &&
		    (uintptr_t)bt_frames[i] < (uintptr_t)bt_caller + 128)
			found = true;
	cr_expect(found, "backtrace() in a detour's handler reaches the probed function's "
			 "caller (%d frames)", bt_depth);
	unregister_kprobe(&kp);
}
