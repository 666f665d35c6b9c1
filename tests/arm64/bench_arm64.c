/*
 * The overhead rows on arm64, in the emulator: ns per call of a tiny
 * function, bare and probed every way the arm64 backend offers, with the
 * ratios to `call`, to a bare BRK trap (`brk`: the kernel's SIGTRAP
 * round trip and nothing of the library) and to the BRK probe (`k`)
 * measured in the same run, as kprobes-bench prints them on x86-64.
 * `o` and `ro` are a kprobe and a return probe on the same entry,
 * jump-optimized (a B to a detour instead of the BRK).  `watch` is a store
 * to a variable under a watchpoint probe (the trap before the access, the
 * step in a slot, the step's own trap: three signals where a BRK takes
 * one).  `o_floor` is the least any jump-optimized probe can cost here:
 * a64_add with its first instruction a B to code that keeps x30, calls
 * the handler (the same count as `o`'s), runs the displaced instruction
 * and branches back, and nothing else (no register kept for the handler,
 * no probe found, no read-side section).  That code is on a page of its
 * own, as every detour is: under TCG a branch within a page is chained
 * from one translated block to the next, a branch to another page looks
 * its target up.  `ro_floor` is the same for a return probe: the detour
 * keeps the return address in one word and points x30 at a trampoline
 * (on another page again), which calls the handler around the return
 * value and returns to the kept address.  `o_hop` is `o_floor` with the
 * handler reached as the library's detours reach it, through code they
 * share: a BL to it and a BLR from it.  `o_safe` is the least a probe
 * that keeps a kprobe's guarantees can cost with code of its own per
 * probe (below).  Under emulation only these ratios mean anything.  Built as a Criterion suite so that the guest runs it
 * (`make bench-arm64`); it prints "bench:" lines and checks that every
 * probed call was counted.
 */
#include <criterion/criterion.h>
#include <errno.h>
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

/* a64_add (helpers_a64.S) after its first instruction, whose place a
 * probe's B takes: what the displaced STP leads back to, at label 2. */
#define A64_ADD_REST \
	"2:\tmov x29, sp\n" \
	"\tadd x0, x0, x1\n" \
	"\tldp x29, x30, [sp], #16\n" \
	"\tret\n"

/* The least detour, at label 1, on a page of its own (as every detour
 * is): x30 kept around a BL to call, then the displaced instruction and
 * the B back. */
#define A64_FLOOR_DETOUR(call) \
	".p2align 12\n" \
	"1:\tstr x30, [sp, #-16]!\n" \
	"\tbl " call "\n" \
	"\tldr x30, [sp], #16\n" \
	"\tstp x29, x30, [sp, #-16]!\n" \
	"\tb 2b\n"

/* o_floor's function: a64_add (helpers_a64.S) as a jump-optimized probe
 * leaves it, a B in place of its first instruction, with the least a
 * detour can be. */
long a64_add_floor(long a, long b);
void a64_floor_count(void);
__asm__(".text\n.globl a64_add_floor\n.type a64_add_floor, %function\n.p2align 4\n"
	"a64_add_floor:\n"
	"\tb 1f\n"				/* the probe's B */
	A64_ADD_REST
	A64_FLOOR_DETOUR("a64_floor_count")	/* the handler itself */
	".size a64_add_floor, . - a64_add_floor\n");

/* ro_floor's function: a64_add as a jump-optimized return probe leaves
 * it, with the least a return probe can be: the detour keeps the return
 * address in one word (one thread, one activation) and points x30 at a
 * trampoline, which calls the handler, keeps the return value around it,
 * and returns to the kept address. */
long a64_add_rfloor(long a, long b);
__asm__(".text\n.globl a64_add_rfloor\n.type a64_add_rfloor, %function\n.p2align 4\n"
	"a64_add_rfloor:\n"
	"\tb 1f\n"				/* the probe's B */
	A64_ADD_REST
	".p2align 12\n"
	"1:\tadrp x16, a64_rfloor_ret\n"	/* the detour: the return hijacked */
	"\tstr x30, [x16, :lo12:a64_rfloor_ret]\n"
	"\tadr x30, 3f\n"
	"\tstp x29, x30, [sp, #-16]!\n"	/* the displaced instruction */
	"\tb 2b\n"
	".p2align 12\n"
	"3:\tstr x0, [sp, #-16]!\n"		/* the trampoline */
	"\tbl a64_floor_count\n"
	"\tldr x0, [sp], #16\n"
	"\tadrp x16, a64_rfloor_ret\n"
	"\tldr x30, [x16, :lo12:a64_rfloor_ret]\n"
	"\tret\n"
	".size a64_add_rfloor, . - a64_add_rfloor\n"
	".bss\n.p2align 3\na64_rfloor_ret: .quad 0\n.text\n");

/* o_hop's function: o_floor's, with the handler reached as the library's
 * detours reach it, through code they share (a BL to it, on a third
 * page, and a BLR from it to the handler it loads). */
long a64_add_hop(long a, long b);
__asm__(".text\n.globl a64_add_hop\n.type a64_add_hop, %function\n.p2align 4\n"
	"a64_add_hop:\n"
	"\tb 1f\n"				/* the probe's B */
	A64_ADD_REST
	A64_FLOOR_DETOUR("a64_hop_shared")
	".p2align 12\n"
	"a64_hop_shared:\n"			/* the shared code */
	"\tstp x29, x30, [sp, #-16]!\n"
	"\tadrp x16, a64_hop_fn\n"
	"\tldr x16, [x16, :lo12:a64_hop_fn]\n"
	"\tblr x16\n"
	"\tldp x29, x30, [sp], #16\n"
	"\tret\n"
	".size a64_add_hop, . - a64_add_hop\n"
	".data\n.p2align 3\na64_hop_fn: .quad a64_floor_count\n.text\n");

/* o_safe's function: the least a probe can cost that keeps what a kprobe
 * must, with code of its own per probe (no shared code): x0-x3 and x30
 * kept in a frame for the handler; the thread's flag checked (a hit
 * inside a handler is missed), raised, and dropped with a release after
 * the handler (what a grace period before freeing a probe waits for);
 * the handler found through memory, as an unregistration may change it.
 * No flags, no scratch registers beyond x3, no pc for unwinders, no
 * count of sections. */
__thread long a64_safe_nest __attribute__((tls_model("local-exec")));
void (*a64_safe_probe)(void);
long a64_add_safe(long a, long b);
__asm__(".text\n.globl a64_add_safe\n.type a64_add_safe, %function\n.p2align 4\n"
	"a64_add_safe:\n"
	"\tb 1f\n"
	A64_ADD_REST
	".p2align 12\n"
	"1:\tsub sp, sp, #48\n"
	"\tstp x0, x1, [sp]\n"
	"\tstp x2, x3, [sp, #16]\n"
	"\tstr x30, [sp, #32]\n"
	"\tmrs x2, tpidr_el0\n"
	"\tadd x2, x2, #:tprel_hi12:a64_safe_nest, lsl #12\n"
	"\tadd x2, x2, #:tprel_lo12_nc:a64_safe_nest\n"
	"\tldr x3, [x2]\n"
	"\tcbnz x3, 9f\n"
	"\tmov x3, #1\n"
	"\tstr x3, [x2]\n"
	"\tadrp x0, a64_safe_probe\n"
	"\tldr x1, [x0, :lo12:a64_safe_probe]\n"
	"\tblr x1\n"
	"\tmrs x2, tpidr_el0\n"
	"\tadd x2, x2, #:tprel_hi12:a64_safe_nest, lsl #12\n"
	"\tadd x2, x2, #:tprel_lo12_nc:a64_safe_nest\n"
	"\tstlr xzr, [x2]\n"
	"9:\tldp x0, x1, [sp]\n"
	"\tldp x2, x3, [sp, #16]\n"
	"\tldr x30, [sp, #32]\n"
	"\tadd sp, sp, #48\n"
	"\tstp x29, x30, [sp, #-16]!\n"
	"\tb 2b\n"
	".size a64_add_safe, . - a64_add_safe\n");

#define REPS 5

static long (*volatile add_fn)(long, long) = a64_add;
static long (*volatile add_floor_fn)(long, long) = a64_add_floor;
static long (*volatile add_rfloor_fn)(long, long) = a64_add_rfloor;
static long (*volatile add_hop_fn)(long, long) = a64_add_hop;
static long (*volatile add_safe_fn)(long, long) = a64_add_safe;
static void (*volatile brk_fn)(void) = a64_bare_brk;
static volatile long count;

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static long watched __attribute__((aligned(8)));

/* What a row times: a call, the bare BRK, or a store to the watched
 * variable. */
enum row_op { OP_CALL, OP_BRK, OP_STORE, OP_FLOOR, OP_RFLOOR, OP_HOP, OP_SAFE };

/* ns per operation of n. */
static double per_call(long n, enum row_op op)
{
	double t0 = now_ns();

	for (long i = 0; i < n; i++) {
		if (op == OP_BRK)
			brk_fn();
		else if (op == OP_STORE)
			*(volatile long *)&watched = i;
		else if (op == OP_FLOOR)
			add_floor_fn(i, 1);
		else if (op == OP_RFLOOR)
			add_rfloor_fn(i, 1);
		else if (op == OP_HOP)
			add_hop_fn(i, 1);
		else if (op == OP_SAFE)
			add_safe_fn(i, 1);
		else
			add_fn(i, 1);
	}
	return (now_ns() - t0) / n;
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

/* o_floor's handler: pre's work. */
void a64_floor_count(void)
{
	count++;
}

static void post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
}

static void watch_handler(struct wprobe *wp, struct pt_regs *regs)
{
	count++;
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

static struct kprobe row_kp;
static struct kretprobe row_rp;
static struct jprobe row_jp;
static struct wprobe row_wp;
static struct ksigaction bare_old;

enum row_kind { ROW_CALL, ROW_BRK, ROW_K, ROW_K_SIM, ROW_KP, ROW_R, ROW_J, ROW_O, ROW_RO, ROW_WATCH,
		ROW_O_FLOOR, ROW_RO_FLOOR, ROW_O_HOP, ROW_O_SAFE, NROWS };
static const char *const row_names[NROWS] = { "call", "brk", "k", "k_sim", "kp", "r", "j",
					      "o", "ro", "watch", "o_floor", "ro_floor", "o_hop", "o_safe" };

/* The jump-optimized rows (a B to a detour): the others are the BRK's,
 * measured with the optimizer off so that it cannot put its B in while
 * they run. */
static bool row_optimized(int r)
{
	return r == ROW_O || r == ROW_RO || r == ROW_O_FLOOR || r == ROW_RO_FLOOR || r == ROW_O_HOP || r == ROW_O_SAFE;
}

/* Arms row r (0 or a negative errno). */
static int row_setup(int r)
{
	struct ksigaction ksa = { .handler = bare_trap, .flags = SA_SIGINFO };
	int err;

	kprobes_set_optimization(row_optimized(r));
	switch (r) {
	case ROW_BRK:
		return syscall(SYS_rt_sigaction, SIGTRAP, &ksa, &bare_old, 8) ? -1 : 0;
	case ROW_K:
	case ROW_K_SIM:
	case ROW_KP:
		row_kp = (struct kprobe){ .addr = AT(a64_add, r == ROW_K_SIM ? 16 : 0),
					  .pre_handler = pre,
					  .post_handler = r == ROW_KP ? post : NULL };
		return register_kprobe(&row_kp);
	case ROW_R:
		row_rp = (struct kretprobe){ .kp.addr = AT(a64_add, 0), .handler = ret_handler,
					     .maxactive = 4 };
		return register_kretprobe(&row_rp);
	case ROW_J:
		row_jp = (struct jprobe){ .kp.addr = AT(a64_add, 0), .entry = (void *)jp_entry };
		return register_jprobe(&row_jp);
	case ROW_O:
		row_kp = (struct kprobe){ .addr = AT(a64_add, 0), .pre_handler = pre };
		err = register_kprobe(&row_kp);
		if (!err && (kprobes_optimize_now() || !(row_kp.flags & KPROBE_FLAG_OPTIMIZED)))
			err = -EAGAIN;
		return err;
	case ROW_RO:
		row_rp = (struct kretprobe){ .kp.addr = AT(a64_add, 0), .handler = ret_handler,
					     .maxactive = 4 };
		err = register_kretprobe(&row_rp);
		if (!err && (kprobes_optimize_now() || !(row_rp.kp.flags & KPROBE_FLAG_OPTIMIZED)))
			err = -EAGAIN;
		return err;
	case ROW_WATCH:
		row_wp = (struct wprobe){ .addr = &watched, .len = sizeof(watched), .type = WPROBE_W,
					  .handler = watch_handler };
		return register_wprobe(&row_wp);
	default:
		return 0;
	}
}

static void row_teardown(int r)
{
	switch (r) {
	case ROW_BRK:
		syscall(SYS_rt_sigaction, SIGTRAP, &bare_old, NULL, 8);
		break;
	case ROW_K:
	case ROW_K_SIM:
	case ROW_KP:
	case ROW_O:
		unregister_kprobe(&row_kp);
		break;
	case ROW_R:
	case ROW_RO:
		unregister_kretprobe(&row_rp);
		break;
	case ROW_J:
		unregister_jprobe(&row_jp);
		break;
	case ROW_WATCH:
		unregister_wprobe(&row_wp);
		break;
	default:
		break;
	}
}

static void report(const char *name, double ns, double call, double brk, double k)
{
	printf("bench: %-8s %10.1f ns  %8.1fx call  %6.2fx brk  %6.3fx k\n", name, ns,
	       ns / call, ns / brk, ns / k);
	fflush(stdout);
}

/* The rows take turns, REPS rounds, and each keeps its best round: a
 * load that comes and goes on the host weighs on every row alike. */
Test(arm64_bench, overhead_rows, .timeout = 110)
{
	a64_safe_probe = a64_floor_count;
	const long calls = 200000, traps = 1000, jumps = 50000;
	double best[NROWS] = { 0 };

	for (int rep = 0; rep < REPS; rep++)
		for (int r = 0; r < NROWS; r++) {
			long n = r == ROW_CALL ? calls : row_optimized(r) ? jumps : traps;
			enum row_op op = r == ROW_BRK ? OP_BRK : r == ROW_WATCH ? OP_STORE :
					 r == ROW_O_FLOOR ? OP_FLOOR :
					 r == ROW_RO_FLOOR ? OP_RFLOOR :
					 r == ROW_O_HOP ? OP_HOP :
					 r == ROW_O_SAFE ? OP_SAFE : OP_CALL;
			double ns;

			cr_assert_eq(row_setup(r), 0, "%s", row_names[r]);
			count = 0;
			ns = per_call(n, op);
			row_teardown(r);
			cr_assert_eq(count, r == ROW_CALL ? 0 : n, "%s: %ld of %ld counted",
				     row_names[r], count, n);
			if (!rep || ns < best[r])
				best[r] = ns;
		}
	for (int r = 0; r < NROWS; r++)
		report(row_names[r], best[r], best[ROW_CALL], best[ROW_BRK], best[ROW_K]);
}
