/*
 * The library on arm64, its core API: BRK probes on instructions run out
 * of line and on simulated ones (ADR, ADRP, literal loads, B, BL, BLR,
 * B.cond, CBZ, TBNZ, RET), refusals (exclusive sequences, foreign BRKs,
 * misaligned addresses), handlers that change registers and the path,
 * enabling, missed hits, faults in slots, the list; jump-optimized probes
 * (a B to a detour): exact hits, the BRK path's registers, PC-relative
 * instructions re-done in the detour, landing pads, faults, no memory in
 * reach, and churn while other threads hammer the probe.  The probed functions
 * are A64 assembly (helpers_a64.S), so each probe sits on the instruction
 * class it means.  Return probes, jprobes, threads and fork:
 * test_arm64_kretprobe.c.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <sys/ptrace.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <elf.h>
#include <asm/ptrace.h>
#include <time.h>
#include <unistd.h>

#include "kprobes.h"
#include "arch/arch.h"
#include "core/arch_api.h"
#include "hang_watch.h"
#include "testutil.h"
#include "helpers_a64.h"

static volatile long hits, posts;
static volatile unsigned long seen_pc, seen_arg0, seen_arg1, post_x0;

static int count_pre(struct kprobe *p, struct pt_regs *regs)
{
	hits++;
	seen_pc = instruction_pointer(regs);
	seen_arg0 = regs_get_kernel_argument(regs, 0);
	seen_arg1 = regs_get_kernel_argument(regs, 1);
	return 0;
}

static void count_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
	posts++;
	post_x0 = regs->regs[0];
}

static void reset(void)
{
	hits = posts = 0;
	seen_pc = seen_arg0 = seen_arg1 = post_x0 = 0;
}

/* A probe at fn+off with the counting handlers (post too when asked). */
static int probe_at(struct kprobe *kp, void *fn, unsigned int off, bool post)
{
	memset(kp, 0, sizeof(*kp));
	kp->addr = AT(fn, off);
	kp->pre_handler = count_pre;
	kp->post_handler = post ? count_post : NULL;
	reset();
	return register_kprobe(kp);
}

Test(a64_kprobe, entry_of_a_function_runs_out_of_line)
{
	struct kprobe kp;

	cr_assert_eq(probe_at(&kp, a64_add, 0, false), 0);
	cr_assert_eq(a64_add(40, 2), 42);
	cr_assert_eq(a64_add(1, 2), 3);
	cr_expect_eq(hits, 2);
	cr_expect_eq(seen_pc, (unsigned long)a64_add, "handlers see the probed instruction's pc");
	cr_expect_eq(seen_arg0, 1);
	cr_expect_eq(seen_arg1, 2);
	cr_expect_eq(kp.opcode, 0xa9bf7bfdu, "opcode: stp x29, x30, [sp, #-16]!");
	unregister_kprobe(&kp);
	cr_assert_eq(a64_add(5, 6), 11);
	cr_expect_eq(hits, 2);
	cr_expect_eq(*(volatile unsigned int *)a64_add, 0xa9bf7bfdu, "the word is back");
}

Test(a64_kprobe, post_handler_sees_the_result)
{
	struct kprobe kp;

	cr_assert_eq(probe_at(&kp, a64_add, 8, true), 0);
	cr_assert_eq(a64_add(20, 22), 42);
	cr_expect_eq(hits, 1);
	cr_expect_eq(posts, 1);
	cr_expect_eq(post_x0, 42, "the add has run when the post handler sees x0");
	unregister_kprobe(&kp);
}

static int change_x1(struct kprobe *p, struct pt_regs *regs)
{
	regs->regs[1] = 100;
	return 0;
}

Test(a64_kprobe, pre_handler_changes_registers)
{
	struct kprobe kp = { .addr = AT(a64_add, 8), .pre_handler = change_x1 };

	cr_assert_eq(register_kprobe(&kp), 0);
	cr_expect_eq(a64_add(1, 2), 101);
	unregister_kprobe(&kp);
	cr_expect_eq(a64_add(1, 2), 3);
}

static int skip_insn(struct kprobe *p, struct pt_regs *regs)
{
	instruction_pointer_set(regs, instruction_pointer(regs) + 4);
	return 1;
}

Test(a64_kprobe, pre_handler_changes_the_path)
{
	struct kprobe kp = { .addr = AT(a64_add, 8), .pre_handler = skip_insn };

	/* A jump-optimized probe ignores a changed pc (as on x86-64 and in
	 * Linux): this is the BRK path's. */
	kprobes_set_optimization(false);
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_expect_eq(a64_add(7, 2), 7, "the add was skipped");
	unregister_kprobe(&kp);
}

/* Every simulated class, with and without a post handler: the same
 * results as unprobed, the handlers run once per call. */
struct sim_case {
	const char *name;
	void *fn;
	unsigned int off;
	long (*call)(void);
	long want;
};

static long call_literal(void) { return a64_literal(); }
static long call_literal_w(void) { return a64_literal_w(); }
static long call_adr(void) { return (long)a64_adr(); }
static long call_adrp(void) { return (long)a64_adrp(); }
static long call_cbz0(void) { return a64_cbz(0); }
static long call_cbz1(void) { return a64_cbz(5); }
static long call_tbnz1(void) { return a64_tbnz(8); }
static long call_tbnz0(void) { return a64_tbnz(7); }
static long call_blt_taken(void) { return a64_blt(-3, 2); }
static long call_blt_not(void) { return a64_blt(3, 2); }
static long call_b(void) { return a64_b(); }
static long call_bl(void) { return a64_bl(40); }
static long call_blr(void) { return a64_blr(41, a64_add_one); }
static long call_ret(void) { return a64_add(30, 12); }
static long call_ret_leaf(void) { return a64_add_one(41); }

static const struct sim_case sim_cases[] = {
	{ "ldr literal", a64_literal, 0, call_literal, 0x1122334455667788L },
	{ "ldrsw literal", a64_literal_w, 0, call_literal_w, (long)(int)0x89abcdef },
	{ "adr", a64_adr, 0, call_adr, 0 },
	{ "adrp", a64_adrp, 0, call_adrp, 0 },
	{ "cbz taken", a64_cbz, 0, call_cbz0, 2 },
	{ "cbz not taken", a64_cbz, 0, call_cbz1, 1 },
	{ "tbnz taken", a64_tbnz, 0, call_tbnz1, 2 },
	{ "tbnz not taken", a64_tbnz, 0, call_tbnz0, 1 },
	{ "b.lt taken", a64_blt, 4, call_blt_taken, 2 },
	{ "b.lt not taken", a64_blt, 4, call_blt_not, 1 },
	{ "b", a64_b, 4, call_b, 5 },
	{ "bl", a64_bl, 8, call_bl, 42 },
	{ "blr", a64_blr, 12, call_blr, 42 },
	{ "ret", a64_add, 16, call_ret, 42 },
	{ "ret in a leaf", a64_add_one, 4, call_ret_leaf, 42 },
};

static long sim_want(const struct sim_case *c)
{
	if (c->fn == (void *)a64_adr)
		return (long)a64_adr;
	if (c->fn == (void *)a64_adrp)
		return (long)&a64_data;
	return c->want;
}

Test(a64_kprobe, simulated_instructions_behave_as_unprobed)
{
	for (size_t i = 0; i < sizeof(sim_cases) / sizeof(sim_cases[0]); i++) {
		const struct sim_case *c = &sim_cases[i];

		for (int post = 0; post < 2; post++) {
			struct kprobe kp;

			cr_assert_eq(c->call(), sim_want(c), "%s unprobed", c->name);
			cr_assert_eq(probe_at(&kp, c->fn, c->off, post), 0, "%s", c->name);
			cr_expect_eq(c->call(), sim_want(c), "%s probed (post %d)", c->name, post);
			cr_expect_eq(c->call(), sim_want(c), "%s probed again (post %d)", c->name,
				     post);
			cr_expect_eq(hits, 2, "%s: %ld hits", c->name, hits);
			cr_expect_eq(posts, post ? 2 : 0, "%s: %ld posts", c->name, posts);
			unregister_kprobe(&kp);
			cr_expect_eq(c->call(), sim_want(c), "%s after", c->name);
		}
	}
}

Test(a64_kprobe, refuses_what_cannot_be_probed)
{
	struct kprobe kp = { .pre_handler = count_pre };

	kp.addr = AT(a64_xinc, 0);
	cr_expect_eq(register_kprobe(&kp), -EINVAL, "a load-exclusive");
	memset(&kp, 0, sizeof(kp));
	kp.addr = AT(a64_xinc, 4);
	cr_expect_eq(register_kprobe(&kp), -EINVAL, "inside an exclusive sequence");
	memset(&kp, 0, sizeof(kp));
	kp.addr = AT(a64_xinc, 8);
	cr_expect_eq(register_kprobe(&kp), -EINVAL, "a store-exclusive");
	memset(&kp, 0, sizeof(kp));
	kp.addr = AT(a64_own_brk, 0);
	cr_expect_eq(register_kprobe(&kp), -EINVAL, "the program's own BRK");
	memset(&kp, 0, sizeof(kp));
	kp.addr = AT(a64_add, 2);
	cr_expect_eq(register_kprobe(&kp), -EILSEQ, "not an instruction boundary");
	/* after the loop: a probe is fine there */
	memset(&kp, 0, sizeof(kp));
	kp.addr = AT(a64_xinc, 16);
	kp.pre_handler = count_pre;
	cr_expect_eq(register_kprobe(&kp), 0, "after the exclusive sequence");
	{
		long v = 41;

		reset();
		cr_expect_eq(a64_xinc(&v), 42);
		cr_expect_eq(hits, 1);
	}
	unregister_kprobe(&kp);
}

Test(a64_kprobe, by_symbol_name_and_offset)
{
	struct kprobe kp = { .symbol_name = "a64_add", .offset = 8, .pre_handler = count_pre };

	reset();
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_expect_eq(kp.addr, AT(a64_add, 8));
	cr_expect_eq(a64_add(2, 3), 5);
	cr_expect_eq(hits, 1);
	unregister_kprobe(&kp);
}

Test(a64_kprobe, disable_and_enable)
{
	struct kprobe kp;

	cr_assert_eq(probe_at(&kp, a64_add_one, 0, false), 0);
	a64_add_one(1);
	cr_assert_eq(disable_kprobe(&kp), 0);
	cr_expect_eq(a64_add_one(1), 2);
	cr_expect_eq(hits, 1);
	cr_assert_eq(enable_kprobe(&kp), 0);
	a64_add_one(1);
	cr_expect_eq(hits, 2);
	unregister_kprobe(&kp);
}

static struct kprobe recursing;

static int recurse_pre(struct kprobe *p, struct pt_regs *regs)
{
	hits++;
	/* the probe inside its own handler: runs, missed */
	cr_assert_eq(a64_add_one(1), 2);
	return 0;
}

Test(a64_kprobe, hit_inside_a_handler_is_missed)
{
	recursing = (struct kprobe){ .addr = AT(a64_add_one, 0), .pre_handler = recurse_pre };
	reset();
	cr_assert_eq(register_kprobe(&recursing), 0);
	cr_expect_eq(a64_add_one(5), 6);
	cr_expect_eq(hits, 1);
	cr_expect_eq(recursing.nmissed, 1);
	unregister_kprobe(&recursing);
}

Test(a64_kprobe, pac_and_bti_entries)
{
	struct kprobe a, b;

	cr_assert_eq(probe_at(&a, a64_pac, 0, true), 0);
	cr_expect_eq(a64_pac(1), 4);
	cr_expect_eq(hits, 1);
	cr_expect_eq(posts, 1);
	unregister_kprobe(&a);
	cr_assert_eq(probe_at(&b, a64_bti, 0, true), 0);
	cr_expect_eq(a64_bti(1), 5);
	cr_expect_eq(hits, 1);
	cr_expect_eq(posts, 1);
	unregister_kprobe(&b);
}

Test(a64_kprobe, registers_and_flags_are_kept)
{
	struct kprobe kp;

	cr_assert_eq(a64_regs_kept(), 0);
	cr_assert_eq(probe_at(&kp, a64_add_one_keeps, 0, true), 0);
	cr_expect_eq(a64_regs_kept(), 0, "a probe out of line");
	unregister_kprobe(&kp);
	cr_assert_eq(probe_at(&kp, a64_add_one_keeps, 4, true), 0);
	cr_expect_eq(a64_regs_kept(), 0, "a simulated RET");
	cr_expect_eq(hits, 1);
	unregister_kprobe(&kp);
}

static volatile uintptr_t fault_pc;
static sigjmp_buf fault_jmp;

static void on_segv(int sig, siginfo_t *si, void *ctx)
{
	fault_pc = (uintptr_t)((ucontext_t *)ctx)->uc_mcontext.pc;
	siglongjmp(fault_jmp, 1);
}

Test(a64_kprobe, fault_in_a_slot_is_at_the_probed_address)
{
	struct sigaction sa = { .sa_sigaction = on_segv, .sa_flags = SA_SIGINFO };
	struct kprobe kp;

	cr_assert_eq(probe_at(&kp, a64_load, 0, false), 0);
	cr_assert_eq(sigaction(SIGSEGV, &sa, NULL), 0);
	if (!sigsetjmp(fault_jmp, 1))
		a64_load((long *)8);
	cr_expect_eq(fault_pc, (uintptr_t)a64_load);
	cr_expect_eq(hits, 1);
	{
		long v = 9;

		cr_expect_eq(a64_load(&v), 9);
	}
	unregister_kprobe(&kp);
}

Test(a64_kprobe, list_shows_the_probe)
{
	struct kprobe kp;
	char buf[4096] = "", want[128];
	FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");

	cr_assert_eq(probe_at(&kp, a64_add, 8, false), 0);
	cr_assert(f);
	kprobes_list(f);
	fclose(f);
	snprintf(want, sizeof(want), "%016lx  k  a64_add+0x8", (unsigned long)AT(a64_add, 8));
	cr_expect(strstr(buf, want), "list: %s", buf);
	unregister_kprobe(&kp);
}

Test(a64_kprobe, register_kprobes_is_all_or_none)
{
	struct kprobe a = { .addr = AT(a64_add, 0), .pre_handler = count_pre };
	struct kprobe b = { .addr = AT(a64_xinc, 4), .pre_handler = count_pre };
	struct kprobe *ps[] = { &a, &b };

	reset();
	cr_assert_eq(register_kprobes(ps, 2), -EINVAL);
	cr_expect_eq(a64_add(1, 1), 2);
	cr_expect_eq(hits, 0, "the first was unregistered again");
	cr_expect_eq(*(volatile unsigned int *)a64_add, 0xa9bf7bfdu);
}


#ifndef PROT_BTI
#define PROT_BTI 0x10
#endif
#ifndef HWCAP2_BTI
#define HWCAP2_BTI (1 << 17)
#endif

/* On a page guarded by Branch Target Identification, an indirect call to
 * a probed BTI C meets the BRK, which is no landing pad: the Branch Target
 * exception (SIGILL) comes before the trap, and the library takes it as
 * the probe hit. */
Test(a64_kprobe, probed_landing_pad_on_a_guarded_page)
{
	static const uint32_t code[] = {
		0xd503245fu,	/* bti c */
		0x91001000u,	/* add x0, x0, #4 */
		0xd65f03c0u,	/* ret */
	};
	long (*volatile fn)(long);
	struct kprobe kp;
	uint32_t *page;

	if (!(getauxval(AT_HWCAP2) & HWCAP2_BTI))
		cr_skip_test("no BTI on this CPU");
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(page, MAP_FAILED);
	memcpy(page, code, sizeof(code));
	cr_assert_eq(mprotect(page, 4096, PROT_READ | PROT_EXEC | PROT_BTI), 0);
	__builtin___clear_cache((char *)page, (char *)page + sizeof(code));
	fn = (long (*)(long))page;
	cr_assert_eq(fn(1), 5);
	kprobes_set_optimization(false);	/* the BRK's case */
	cr_assert_eq(probe_at(&kp, page, 0, true), 0);
	cr_expect_eq(fn(1), 5);
	cr_expect_eq(hits, 1);
	cr_expect_eq(posts, 1);
	unregister_kprobe(&kp);
	cr_expect_eq(fn(2), 6);
	munmap(page, 4096);
}

/* ---- jump optimization ---- */

#define A64_B_MASK 0xfc000000u
#define A64_B_OP 0x14000000u
#define A64_BRK_PROBE 0xd42d6e00u	/* BRK #0x6b70 */

static bool optimized(const struct kprobe *p)
{
	return __atomic_load_n(&p->flags, __ATOMIC_ACQUIRE) & KPROBE_FLAG_OPTIMIZED;
}

static uint32_t word_at(const void *a)
{
	return *(volatile const uint32_t *)a;
}

/* The optimizer's first pass takes the list of loaded objects and marks
 * probes outside every object as gone (their code unmapped): one on an
 * anonymous code page must come after that pass. */
static void objects_taken(void)
{
	struct kprobe kp = { .addr = AT(a64_add_one, 0), .pre_handler = count_pre };

	cr_assert_eq(register_kprobe(&kp), 0);
	kprobes_optimize_now();
	unregister_kprobe(&kp);
}

/* Registers a64_add+off's probe and has the optimizer put its B in. */
static void optimize_at(struct kprobe *kp, void *fn, unsigned int off)
{
	cr_assert_eq(probe_at(kp, fn, off, false), 0);
	cr_assert_eq(kprobes_optimize_now(), 0);
	cr_assert(optimized(kp), "%p+%u: not optimized", fn, off);
	cr_assert_eq(word_at(kp->addr) & A64_B_MASK, A64_B_OP, "a B at the probe: %#x",
		     word_at(kp->addr));
}

Test(a64_optimized, hits_exactly_and_goes_away)
{
	struct kprobe kp;

	optimize_at(&kp, a64_add, 0);
	for (long i = 0; i < 1000; i++)
		cr_assert_eq(a64_add(i, 2), i + 2);
	cr_expect_eq(hits, 1000, "every call one hit: %ld", hits);
	cr_expect_eq(seen_pc, (unsigned long)a64_add, "the probed pc");
	cr_expect_eq(seen_arg0, 999);
	cr_expect_eq(seen_arg1, 2);
	cr_expect_eq(kp.nmissed, 0);
	unregister_kprobe(&kp);
	cr_expect_eq(word_at(a64_add), 0xa9bf7bfdu, "the word is back");
	cr_expect_eq(a64_add(5, 6), 11);
	cr_expect_eq(hits, 1000);
}

/* The list says so, and the probe's BRK comes back when disabled. */
Test(a64_optimized, list_disable_enable)
{
	struct kprobe kp;
	char buf[4096] = "";
	FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");

	optimize_at(&kp, a64_add, 8);
	kprobes_list(f);
	fclose(f);
	cr_expect(strstr(buf, "[OPTIMIZED]"), "list: %s", buf);
	cr_assert_eq(disable_kprobe(&kp), 0);
	cr_expect(!optimized(&kp));
	cr_expect_eq(word_at(kp.addr), 0x8b010000u, "disabled: add x0, x0, x1 back");
	cr_expect_eq(a64_add(1, 2), 3);
	cr_expect_eq(hits, 0);
	cr_assert_eq(enable_kprobe(&kp), 0);
	cr_expect_eq(word_at(kp.addr), A64_BRK_PROBE, "enabled: the BRK first");
	cr_assert_eq(kprobes_optimize_now(), 0);
	cr_expect(optimized(&kp));
	cr_expect_eq(a64_add(1, 2), 3);
	cr_expect_eq(hits, 1);
	unregister_kprobe(&kp);
}

/* A post handler cannot run from a detour: adding one takes the B away. */
Test(a64_optimized, post_handler_unoptimizes)
{
	struct kprobe kp, post = { .addr = AT(a64_add, 8), .pre_handler = count_pre,
				    .post_handler = count_post };

	optimize_at(&kp, a64_add, 8);
	cr_assert_eq(register_kprobe(&post), 0);
	cr_expect(!optimized(&kp));
	cr_expect_eq(word_at(kp.addr), A64_BRK_PROBE);
	cr_expect_eq(a64_add(20, 22), 42);
	cr_expect_eq(hits, 2);
	cr_expect_eq(posts, 1);
	cr_expect_eq(post_x0, 42);
	unregister_kprobe(&post);
	cr_assert_eq(kprobes_optimize_now(), 0);
	cr_expect(optimized(&kp), "optimized again without the post handler");
	cr_expect_eq(a64_add(1, 1), 2);
	cr_expect_eq(hits, 3);
	unregister_kprobe(&kp);
}

Test(a64_optimized, pre_handler_changes_registers)
{
	struct kprobe kp = { .addr = AT(a64_add, 8), .pre_handler = change_x1 };

	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert_eq(kprobes_optimize_now(), 0);
	cr_assert(optimized(&kp));
	cr_expect_eq(a64_add(1, 2), 101);
	unregister_kprobe(&kp);
}

/* The registers a handler sees on the detour are those of the BRK path. */
static struct pt_regs captured;

static int capture_pre(struct kprobe *p, struct pt_regs *regs)
{
	captured = *regs;
	return 0;
}

static void capture_at_keeps(struct pt_regs *out, bool optimize)
{
	struct kprobe kp = { .addr = AT(a64_add_one_keeps, 0), .pre_handler = capture_pre };

	kprobes_set_optimization(optimize);
	memset(&captured, 0, sizeof(captured));
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert_eq(kprobes_optimize_now(), 0);
	cr_assert_eq(optimized(&kp), optimize);
	cr_expect_eq(a64_regs_kept(), 0, "registers and flags kept (%s)",
		     optimize ? "detour" : "BRK");
	unregister_kprobe(&kp);
	*out = captured;
}

Test(a64_optimized, regs_equal_the_brk_paths)
{
	static const int compared[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
					18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30 };
	struct pt_regs brk, opt;

	capture_at_keeps(&brk, false);
	capture_at_keeps(&opt, true);
	for (unsigned int i = 0; i < sizeof(compared) / sizeof(compared[0]); i++)
		cr_expect_eq(brk.regs[compared[i]], opt.regs[compared[i]], "x%d: %#lx / %#lx",
			     compared[i], brk.regs[compared[i]], opt.regs[compared[i]]);
	cr_expect_eq(brk.sp, opt.sp);
	cr_expect_eq(brk.pc, opt.pc);
	cr_expect_eq(opt.pc, (unsigned long)a64_add_one_keeps);
	cr_expect_eq(brk.pstate & 0xf0000000ul, opt.pstate & 0xf0000000ul, "NZCV %#lx / %#lx",
		     brk.pstate, opt.pstate);
	cr_expect_eq(opt.pstate & 0xf0000000ul, 0x80000000ul, "N set by a64_regs_kept");
}

/* A handler free to use the FP/SIMD registers: the program's d0 and the
 * rest survive the detour. */
static int clobber_fp(struct kprobe *p, struct pt_regs *regs)
{
	hits++;
	__asm__ volatile("movi v0.2d, #0\n\tmovi v1.2d, #0\n\tmovi v8.2d, #0\n\t"
			 "movi v16.2d, #0\n\tmovi v31.2d, #0\n\tmsr fpsr, xzr"
			 ::: "v0", "v1", "v8", "v16", "v31");
	return 0;
}

/* At the entry (the argument in d0) and at the RET (the result in d0),
 * which take the entry's and the mid-function's save. */
Test(a64_optimized, fp_registers_are_kept)
{
	for (unsigned int off = 0; off <= 4; off += 4) {
		struct kprobe kp = { .addr = AT(a64_fdouble, off), .pre_handler = clobber_fp };

		reset();
		cr_assert_eq(register_kprobe(&kp), 0);
		cr_assert_eq(kprobes_optimize_now(), 0);
		cr_assert(optimized(&kp));
		cr_expect_eq(a64_fdouble(1.25), 2.5, "probe at +%u", off);
		cr_expect_eq(hits, 1);
		unregister_kprobe(&kp);
	}
}

/* ---- the handler analysis (src/arch/arm64/clobber.c) ---- */

static volatile long int_sink;
static volatile double fp_sink;
static __thread long tls_word;

static __attribute__((noinline)) int only_integers(struct kprobe *p, struct pt_regs *regs)
{
	hits++;
	int_sink = int_sink + (long)regs->regs[0];
	return 0;
}

static __attribute__((noinline)) void uses_fp(void)
{
	fp_sink = fp_sink * 1.5 + 1.0;
}

/* FP code one call away: the walk follows BL. */
static __attribute__((noinline)) int calls_fp(struct kprobe *p, struct pt_regs *regs)
{
	hits++;
	uses_fp();
	return 0;
}

static void (*volatile unknown_fn)(void) = uses_fp;

static __attribute__((noinline)) int calls_unknown(struct kprobe *p, struct pt_regs *regs)
{
	hits++;
	unknown_fn();
	return 0;
}

/* A store through the thread pointer: what errno's are. */
static __attribute__((noinline)) int writes_tls(struct kprobe *p, struct pt_regs *regs)
{
	hits++;
	tls_word = (long)regs->regs[0];
	return 0;
}

static __attribute__((noinline)) int reads_tls(struct kprobe *p, struct pt_regs *regs)
{
	hits++;
	int_sink = tls_word;
	return 0;
}

/* What each handler may change, besides pt_regs. */
static uint8_t needs_of(void *fn)
{
	return kp_code_needs((uintptr_t)fn) & (KP_OPT_SAVE_VECTOR | KP_OPT_SAVE_ERRNO);
}

Test(a64_handler_analysis, decodes_what_handlers_may_change)
{
#if defined(__SANITIZE_ADDRESS__)
	/* The sanitizer's checks call its run-time through the PLT: every
	 * handler compiled with them needs everything. */
	cr_skip_test("the analysis is the library's, tested without sanitizers");
#endif
	cr_expect_eq(kp_code_needs((uintptr_t)only_integers) & KP_OPT_SAVE_REGS, KP_OPT_SAVE_REGS);
	cr_expect_eq(needs_of(only_integers), 0, "only_integers: %#x", needs_of(only_integers));
	cr_expect_eq(needs_of(reads_tls), 0, "reads_tls: %#x", needs_of(reads_tls));
	cr_expect_eq(needs_of(writes_tls), KP_OPT_SAVE_ERRNO, "writes_tls: %#x",
		     needs_of(writes_tls));
	cr_expect_eq(needs_of(clobber_fp), KP_OPT_SAVE_VECTOR, "clobber_fp: %#x",
		     needs_of(clobber_fp));
	cr_expect_eq(needs_of(calls_fp), KP_OPT_SAVE_VECTOR, "calls_fp: %#x", needs_of(calls_fp));
	cr_expect_eq(kp_code_needs((uintptr_t)calls_unknown), KP_OPT_SAVE_ALL,
		     "calls_unknown: %#x", kp_code_needs((uintptr_t)calls_unknown));
}

/* Handlers that keep the FP/SIMD registers alone, and handlers that do
 * not, one probe after the other at the same places: the program's
 * d0 and its result come through every time. */
Test(a64_handler_analysis, detours_save_what_handlers_need)
{
	kprobe_pre_handler_t handlers[] = { only_integers, calls_fp, calls_unknown, writes_tls };

	for (size_t h = 0; h < sizeof(handlers) / sizeof(handlers[0]); h++)
		for (unsigned int off = 0; off <= 4; off += 4) {
			struct kprobe kp = { .addr = AT(a64_fdouble, off), .pre_handler = handlers[h] };

			reset();
			cr_assert_eq(register_kprobe(&kp), 0);
			cr_assert_eq(kprobes_optimize_now(), 0);
			cr_assert(optimized(&kp));
			cr_expect_eq(a64_fdouble(1.25), 2.5, "handler %zu, probe at +%u", h, off);
			cr_expect_eq(hits, 1);
			unregister_kprobe(&kp);
		}
}

/* ---- which handlers read their pt_regs (x1) ---- */

static __attribute__((noinline)) int ignores_regs(struct kprobe *p, struct pt_regs *regs)
{
	hits++;
	return 0;
}

/* Handlers in assembly, each with exactly the flow its name says;
 * analysed, never run.  x1 holds pt_regs at the entry. */
#define A64T(name, body)                                                                  \
	".globl " #name "\n.type " #name ", %function\n.p2align 2\n" #name ":\n" body     \
	"\n.size " #name ", . - " #name "\n"
__asm__(".text\n"
	A64T(a64t_x1_written_first, "mov x1, x0\n ldr x2, [x1]\n mov w0, #0\n ret")
	A64T(a64t_x1_on_one_path, "cbz x0, 1f\n mov x1, xzr\n1: ldr x2, [x1]\n mov w0, #0\n ret")
	A64T(a64t_x1_after_a_loop, "mov x2, #3\n1: subs x2, x2, #1\n b.ne 1b\n ldr x3, [x1]\n"
				   " mov w0, #0\n ret")
	A64T(a64t_x1_by_a_back_edge, "b 2f\n1: ldr x3, [x1]\n mov w0, #0\n ret\n2: b 1b")
	A64T(a64t_x1_stored, "stp x0, x1, [sp, #-16]!\n add sp, sp, #16\n mov w0, #0\n ret")
	A64T(a64t_x1_kept_by_movk, "movk x1, #1\n mov w0, #0\n ret")
	A64T(a64t_x1_tested, "cbz x1, 1f\n1: mov w0, #0\n ret")
	A64T(a64t_x1_loaded_pair, "ldp x0, x1, [sp]\n ldr x2, [x1]\n mov w0, #0\n ret")
	A64T(a64t_reads_own_x1, "ldr x0, [x1]\n ret")
	A64T(a64t_leaf, "add x0, x0, #1\n ret")
	A64T(a64t_callee_reads_x1, "stp x29, x30, [sp, #-16]!\n mov x29, sp\n"
				   " bl a64t_reads_own_x1\n ldp x29, x30, [sp], #16\n mov w0, #0\n ret")
	A64T(a64t_calls_a_leaf, "stp x29, x30, [sp, #-16]!\n mov x29, sp\n mov x1, #5\n"
				" bl a64t_leaf\n ldp x29, x30, [sp], #16\n mov w0, #0\n ret"));

int a64t_x1_written_first(struct kprobe *, struct pt_regs *);
int a64t_x1_on_one_path(struct kprobe *, struct pt_regs *);
int a64t_x1_after_a_loop(struct kprobe *, struct pt_regs *);
int a64t_x1_by_a_back_edge(struct kprobe *, struct pt_regs *);
int a64t_x1_stored(struct kprobe *, struct pt_regs *);
int a64t_x1_kept_by_movk(struct kprobe *, struct pt_regs *);
int a64t_x1_tested(struct kprobe *, struct pt_regs *);
int a64t_x1_loaded_pair(struct kprobe *, struct pt_regs *);
int a64t_callee_reads_x1(struct kprobe *, struct pt_regs *);
int a64t_calls_a_leaf(struct kprobe *, struct pt_regs *);

static bool reads_regs(void *fn)
{
	return kp_code_needs((uintptr_t)fn) & KP_OPT_SAVE_REGS;
}

Test(a64_handler_analysis, finds_the_handlers_that_read_pt_regs)
{
#if !defined(__SANITIZE_ADDRESS__)
	/* compiled C: the instrumented build calls the sanitizer's run-time */
	cr_expect_eq(kp_code_needs((uintptr_t)ignores_regs) & ~KP_OPT_SAVE_SCRATCH, 0,
		     "ignores_regs: %#x", kp_code_needs((uintptr_t)ignores_regs));
	cr_expect(reads_regs(only_integers));
	cr_expect(reads_regs(writes_tls));
#endif
	cr_expect(!reads_regs(a64t_x1_written_first));
	cr_expect(reads_regs(a64t_x1_on_one_path), "a path that keeps x1 joins the other");
	cr_expect(reads_regs(a64t_x1_after_a_loop));
	cr_expect(reads_regs(a64t_x1_by_a_back_edge));
	cr_expect(reads_regs(a64t_x1_stored), "a store of x1");
	cr_expect(reads_regs(a64t_x1_kept_by_movk), "MOVK keeps the rest of x1");
	cr_expect(reads_regs(a64t_x1_tested), "CBZ x1");
	cr_expect(!reads_regs(a64t_x1_loaded_pair), "LDP writes its second register");
	cr_expect(reads_regs(a64t_callee_reads_x1), "a callee reading its own x1");
	cr_expect(!reads_regs(a64t_calls_a_leaf));
}

/* A handler that reads no pt_regs and changes every register a call may
 * change, and the flags: the detour's light path. */
long a64t_light_hits;
int a64t_clobber_light(struct kprobe *, struct pt_regs *);
__asm__(".text\n"
	A64T(a64t_clobber_light,
	     "adrp x9, a64t_light_hits\n ldr x10, [x9, #:lo12:a64t_light_hits]\n"
	     " add x10, x10, #1\n str x10, [x9, #:lo12:a64t_light_hits]\n"
	     " mov x1, #0x5a1\n mov x2, #0x5a2\n mov x3, #0x5a3\n mov x4, #0x5a4\n"
	     " mov x5, #0x5a5\n mov x6, #0x5a6\n mov x7, #0x5a7\n mov x8, #0x5a8\n"
	     " mov x9, #0x5a9\n mov x10, #0x5aa\n mov x11, #0x5ab\n mov x12, #0x5ac\n"
	     " mov x13, #0x5ad\n mov x14, #0x5ae\n mov x15, #0x5af\n mov x16, #0x5b0\n"
	     " mov x17, #0x5b1\n mov x18, #0x5b2\n cmp x1, x1\n mov w0, #0\n ret")
	/* and one that changes x0-x3 and the flags only: x4-x18 are not
	 * even saved */
	A64T(a64t_tiny_light,
	     "adrp x0, a64t_light_hits\n ldr x1, [x0, #:lo12:a64t_light_hits]\n"
	     " add x1, x1, #1\n str x1, [x0, #:lo12:a64t_light_hits]\n cmp x1, #0\n"
	     " mov x2, #0x5a2\n mov x3, #0x5a3\n"
	     " mov w0, #0\n ret"));
int a64t_tiny_light(struct kprobe *, struct pt_regs *);

/* At the entry and at the RET: every register, the flags and the result
 * come through, and the handler ran once a call; x2-x18 saved for the
 * handler that changes them (x4-x18: the detour keeps x0-x3 anyway), and
 * not for the other. */
Test(a64_optimized, light_path_keeps_every_register)
{
	cr_expect_eq(kp_code_needs((uintptr_t)a64t_clobber_light), KP_OPT_SAVE_SCRATCH);
	cr_expect_eq(kp_code_needs((uintptr_t)a64t_tiny_light), 0);
	for (unsigned int i = 0; i < 4; i++) {
		unsigned int off = (i & 1) * 4;
		struct kprobe kp = { .addr = AT(a64_add_one_keeps, off),
				     .pre_handler = i < 2 ? a64t_clobber_light : a64t_tiny_light };

		a64t_light_hits = 0;
		cr_assert_eq(register_kprobe(&kp), 0);
		cr_assert_eq(kprobes_optimize_now(), 0);
		cr_assert(optimized(&kp));
		cr_assert_eq(kp_probe_fast_fn(&kp), (void *)kp.pre_handler,
			     "the light path's handler (needs %#x)", kp_probe_needs(&kp));
		for (int k = 0; k < 3; k++)
			cr_expect_eq(a64_regs_kept(), 0, "probe at +%u", off);
		cr_expect_eq(a64_add_one_keeps(41), 42);
		cr_expect_eq(a64t_light_hits, 4, "probe at +%u", off);
		unregister_kprobe(&kp);
	}
}

/* A second probe on the probepoint ends the light path: the general one
 * runs both (the first's needs are still its own). */
Test(a64_optimized, light_and_general_probes_together)
{
	struct kprobe light = { .addr = AT(a64_add_one_keeps, 0), .pre_handler = a64t_clobber_light };
	struct kprobe full = { .addr = AT(a64_add_one_keeps, 0), .pre_handler = count_pre };

	reset();
	a64t_light_hits = 0;
	cr_assert_eq(register_kprobe(&light), 0);
	cr_assert_eq(register_kprobe(&full), 0);
	cr_assert_eq(kprobes_optimize_now(), 0);
	cr_assert(optimized(&light));
	cr_expect_eq(a64_regs_kept(), 0);
	cr_expect_eq(a64t_light_hits, 1);
	cr_expect_eq(hits, 1);
	cr_expect_eq(seen_arg0, 1, "pt_regs complete for the second probe");
	unregister_kprobe(&full);
	cr_expect_eq(a64_regs_kept(), 0);
	cr_expect_eq(a64t_light_hits, 2);
	cr_expect_eq(hits, 1);
	unregister_kprobe(&light);
	cr_expect_eq(a64_regs_kept(), 0);
	cr_expect_eq(a64t_light_hits, 2);
}

/* errno as the program left it, whatever a handler does to it. */
static int sets_errno(struct kprobe *p, struct pt_regs *regs)
{
	hits++;
	errno = EINTR;
	return 0;
}

Test(a64_handler_analysis, errno_is_kept)
{
	struct kprobe kp = { .addr = (kprobe_opcode_t *)a64_add_one, .pre_handler = sets_errno };

	reset();
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert_eq(kprobes_optimize_now(), 0);
	cr_assert(optimized(&kp));
	errno = ENOENT;
	cr_expect_eq(a64_add_one(1), 2);
	cr_expect_eq(errno, ENOENT, "errno %d", errno);
	cr_expect_eq(hits, 1);
	unregister_kprobe(&kp);
}

/* The instructions that read the PC or branch, re-done in the detour for
 * their original address: the same results as unprobed. */
Test(a64_optimized, pc_relative_instructions)
{
	unsigned int n = 0, opt = 0;

	for (size_t i = 0; i < sizeof(sim_cases) / sizeof(sim_cases[0]); i++) {
		const struct sim_case *c = &sim_cases[i];
		struct kprobe kp;
		long want = sim_want(c);

		cr_assert_eq(probe_at(&kp, c->fn, c->off, false), 0, "%s", c->name);
		cr_assert_eq(kprobes_optimize_now(), 0);
		opt += optimized(&kp);
		cr_expect_eq(c->call(), want, "%s (%s)", c->name,
			     optimized(&kp) ? "optimized" : "BRK");
		cr_expect_eq(hits, 1, "%s: %ld hits", c->name, hits);
		unregister_kprobe(&kp);
		cr_expect_eq(c->call(), want, "%s unprobed", c->name);
		n++;
	}
	/* BLR alone keeps its BRK */
	cr_expect_eq(opt, n - 1, "%u of %u optimized", opt, n);
}

Test(a64_optimized, pac_and_bti_entries)
{
	struct kprobe a, b;

	optimize_at(&a, a64_pac, 0);
	cr_expect_eq(a64_pac(1), 4);
	cr_expect_eq(hits, 1);
	unregister_kprobe(&a);
	optimize_at(&b, a64_bti, 0);
	cr_expect_eq(a64_bti(1), 5);
	cr_expect_eq(hits, 1);
	unregister_kprobe(&b);
}

/* An indirect call to an optimized BTI C on a guarded page meets the B:
 * the Branch Target exception is taken and the call goes on through the
 * detour. */
Test(a64_optimized, landing_pad_on_a_guarded_page)
{
	static const uint32_t code[] = { 0xd503245fu, 0x91001000u, 0xd65f03c0u };
	long (*volatile fn)(long);
	struct kprobe kp;
	uint32_t *page;

	if (!(getauxval(AT_HWCAP2) & HWCAP2_BTI))
		cr_skip_test("no BTI on this CPU");
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(page, MAP_FAILED);
	memcpy(page, code, sizeof(code));
	cr_assert_eq(mprotect(page, 4096, PROT_READ | PROT_EXEC | PROT_BTI), 0);
	__builtin___clear_cache((char *)page, (char *)page + sizeof(code));
	fn = (long (*)(long))page;
	objects_taken();
	optimize_at(&kp, page, 0);
	cr_expect_eq(fn(1), 5);
	cr_expect_eq(fn(2), 6);
	cr_expect_eq(hits, 2);
	unregister_kprobe(&kp);
	cr_expect_eq(fn(2), 6);
	munmap(page, 4096);
}

Test(a64_optimized, fault_in_the_detour_is_at_the_probed_address)
{
	struct sigaction sa = { .sa_sigaction = on_segv, .sa_flags = SA_SIGINFO };
	struct kprobe kp;
	long v = 9;

	optimize_at(&kp, a64_load, 0);
	cr_assert_eq(sigaction(SIGSEGV, &sa, NULL), 0);
	if (!sigsetjmp(fault_jmp, 1))
		a64_load((long *)8);
	cr_expect_eq(fault_pc, (uintptr_t)a64_load);
	cr_expect_eq(hits, 1);
	cr_expect_eq(a64_load(&v), 9);
	cr_expect_eq(hits, 2);
	unregister_kprobe(&kp);
}

/* No executable memory within a B's reach of the probe: its BRK stays.
 * The code page sits in the middle of 512 MB of reserved address space. */
Test(a64_optimized, out_of_range_keeps_the_brk)
{
	static const uint32_t code[] = { 0x91001000u, 0xd65f03c0u };	/* add x0, x0, #4; ret */
	const size_t span = 512ul << 20;
	char *res = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			 -1, 0);
	long (*volatile fn)(long);
	struct kprobe kp;
	uint32_t *page;

	cr_assert_neq(res, MAP_FAILED);
	page = mmap(res + span / 2, 4096, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	cr_assert_eq((char *)page, res + span / 2);
	memcpy(page, code, sizeof(code));
	cr_assert_eq(mprotect(page, 4096, PROT_READ | PROT_EXEC), 0);
	__builtin___clear_cache((char *)page, (char *)page + sizeof(code));
	fn = (long (*)(long))page;
	objects_taken();
	cr_assert_eq(probe_at(&kp, page, 0, false), 0);
	kprobes_optimize_now();
	cr_expect(!optimized(&kp), "no detour can be in reach");
	cr_expect_eq(word_at(page), A64_BRK_PROBE, "the BRK stays");
	cr_expect_eq(fn(1), 5);
	cr_expect_eq(hits, 1);
	unregister_kprobe(&kp);
	cr_expect_eq(fn(1), 5);
	munmap(res, span);
}

/* Threads call the probed function while one registers, unregisters,
 * disables, enables and optimizes it over and over: every call computes
 * its result, no hit lands on a probe that is not there.  A64_CHURN=N in
 * the environment (the guest's kernel command line) multiplies the rounds
 * and the calling threads by N, and shortens the rest between rounds: a
 * stress mode for the detours' retirement (census, grace period, reuse),
 * which starts no round after CHURN_BUDGET seconds.
 * The run is bounded: before Criterion's timeout ends it, a watchdog
 * thread prints every thread's state (state, wchan, each running
 * thread's pc from its own signal handler), and a watchdog process (for
 * a test process that stops whole, which has hung it without a word
 * from the thread) prints their state and, through ptrace, their
 * registers, so a hang says where it hangs. */
#define CHURN_THREADS 2
#define CHURN_MAX_THREADS 16
#define CHURN_ROUNDS 60
#define CHURN_TIMEOUT 150
/* Before the guest runner's own limit (--timeout 240) ends the test. */
#define CHURN_DUMP_AFTER 60

#define CHURN_BUDGET 50

static volatile bool churn_stop;
static volatile long churn_bad;
/* Where the test's own thread is, for the watchdog's dump: the round, and
 * the step of it (enum churn_step). */
static volatile int churn_round, churn_step;
enum churn_step { CS_REGISTER = 1, CS_OPTIMIZE, CS_DISABLE, CS_ENABLE, CS_REOPTIMIZE, CS_SLEEP,
		  CS_UNREGISTER, CS_JOIN };

static void *churn_caller(void *arg)
{
	long (*volatile fn)(long, long) = a64_add;
	long calls = 0;

	while (!__atomic_load_n(&churn_stop, __ATOMIC_ACQUIRE)) {
		if (fn(calls, 3) != calls + 3)
			__atomic_add_fetch(&churn_bad, 1, __ATOMIC_RELAXED);
		calls++;
	}
	return (void *)calls;
}

static int churn_scale(void)
{
	const char *env = getenv("A64_CHURN");
	int n = env ? atoi(env) : 1;

	return n < 1 ? 1 : n > 8 ? 8 : n;
}

/* The dump uses system calls only (no stdio, no malloc, no directory
 * streams): a thread stuck holding a lock of the C library (the allocator's,
 * stderr's) must not keep it from saying where every thread is. */
/* Where the test is, for the watchdogs' first line: the round and step,
 * and the words at the probed function. */
static void churn_where(char *buf, size_t len)
{
	snprintf(buf, len, "round %d, step %d; a64_add at %p, its words %#x %#x %#x", churn_round,
		 churn_step, (void *)a64_add, word_at(a64_add), word_at(AT(a64_add, 4)),
		 word_at(AT(a64_add, 8)));
}

Test(a64_optimized, churn_while_others_hammer, .timeout = CHURN_TIMEOUT)
{
	pthread_t th[CHURN_MAX_THREADS];
	int scale = churn_scale();
	int nthreads = CHURN_THREADS * scale, rounds = CHURN_ROUNDS * scale;
	long opt_rounds = 0;
	time_t t0 = time(NULL);
	struct hang_watch watch;

	/* Its rare hang, threads executing a stale copy of a word whose
	 * probe had gone, is cured by the trap path (trap.c, refetch);
	 * make check's quick run leaves this stress test to make
	 * check-arm64. */
	if (getenv("A64_CHURN") && !strcmp(getenv("A64_CHURN"), "off"))
		cr_skip_test("A64_CHURN=off: the churn test runs in make check-arm64");

	reset();
	hang_watch_start(&watch, "churn", CHURN_DUMP_AFTER, churn_where);
	for (int i = 0; i < nthreads; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, churn_caller, NULL), 0);
	for (int r = 0; r < rounds; r++) {
		/* every other pair of rounds a handler of the light path */
		struct kprobe kp = { .addr = AT(a64_add, (r % 3) * 4),
				     .pre_handler = (r >> 1) & 1 ? a64t_clobber_light : count_pre };

		churn_round = r;
		churn_step = CS_REGISTER;
		cr_assert_eq(register_kprobe(&kp), 0);
		churn_step = CS_OPTIMIZE;
		kprobes_optimize_now();
		opt_rounds += optimized(&kp);
		if (r & 1) {
			churn_step = CS_DISABLE;
			cr_assert_eq(disable_kprobe(&kp), 0);
			churn_step = CS_ENABLE;
			cr_assert_eq(enable_kprobe(&kp), 0);
			churn_step = CS_REOPTIMIZE;
			kprobes_optimize_now();
		}
		churn_step = CS_SLEEP;
		usleep(scale > 1 ? 100 * (unsigned int)(r % 10) : 1000);
		churn_step = CS_UNREGISTER;
		unregister_kprobe(&kp);
		if (scale > 1 && time(NULL) - t0 > CHURN_BUDGET) {
			cr_log_info("stress: %d of %d rounds in %d s", r + 1, rounds, CHURN_BUDGET);
			rounds = r + 1;
		}
	}
	churn_step = CS_JOIN;
	__atomic_store_n(&churn_stop, true, __ATOMIC_RELEASE);
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	hang_watch_stop(&watch);
	cr_expect_eq(churn_bad, 0, "%ld wrong results", churn_bad);
	cr_expect_gt(opt_rounds, rounds / 2, "optimized in %ld of %d rounds", opt_rounds, rounds);
	cr_expect_gt(hits, 0);
	cr_expect_eq(word_at(a64_add), 0xa9bf7bfdu);
	cr_expect_eq(word_at(AT(a64_add, 4)), 0x910003fdu);
}

/* ---- exit sites (kprobes_exit_sites()): each RET, and a B out ---- */

__asm__(".text\n"
	A64T(a64x_two, "cmp x0, #1\n b.gt 1f\n mov x0, #7\n"
		       ".globl a64x_two_ret0\na64x_two_ret0: ret\n"
		       "1: add x0, x0, x0\n.globl a64x_two_ret1\na64x_two_ret1: ret")
	A64T(a64x_tail, "cbnz x0, 1f\n mov x0, #7\n.globl a64x_tail_ret\na64x_tail_ret: ret\n"
			"1: add x0, x0, #1\n.globl a64x_tail_b\na64x_tail_b: b a64x_two")
	A64T(a64x_cond_out, "cbz x0, a64x_two\n mov x0, #3\n ret")
	A64T(a64x_indirect, "br x1")
	A64T(a64x_forever, "1: yield\n b 1b"));

long a64x_two(long x);
long a64x_tail(long x);
long a64x_cond_out(long x);
long a64x_indirect(long x, void *to);
void a64x_forever(void);
extern char a64x_two_ret0[], a64x_two_ret1[], a64x_tail_ret[], a64x_tail_b[];

#define EXA(f) ((unsigned long)(uintptr_t)(f))

Test(a64_exits, each_ret_and_each_branch_out)
{
	unsigned long v[4];

	cr_assert_eq(kprobes_exit_sites(EXA(a64x_two), v, 4, KPROBES_EXITS_JUMP), 2);
	cr_assert_eq(v[0], EXA(a64x_two_ret0));
	cr_assert_eq(v[1], EXA(a64x_two_ret1));
	cr_assert_eq(kprobes_exit_sites(EXA(a64x_tail), v, 4, KPROBES_EXITS_JUMP), 2);
	cr_assert_eq(v[0], EXA(a64x_tail_ret));
	cr_assert_eq(v[1], EXA(a64x_tail_b));
	cr_assert_eq(kprobes_exit_sites(EXA(a64x_tail), v, 4, KPROBES_EXITS_RETURNS),
		     -EOPNOTSUPP);
	cr_assert_eq(kprobes_exit_sites(EXA(a64x_cond_out), v, 4, 0), -EOPNOTSUPP);
	cr_assert_eq(kprobes_exit_sites(EXA(a64x_indirect), v, 4, 0), -EOPNOTSUPP);
	cr_assert_eq(kprobes_exit_sites(EXA(a64x_forever), v, 4, 0), 0);
	cr_assert_eq(kprobes_exit_sites(EXA(a64x_two), v, 1, 0), -E2BIG);
	cr_assert_eq(kprobes_exit_sites(EXA(a64x_two) + 4, v, 4, 0), -EINVAL);
}

static volatile long exit_hits;

static int exit_pre(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	(void)regs;
	exit_hits++;
	return 0;
}

/* Kprobes on the sites count every return, jump-optimized, and the
 * returns are the function's own. */
Test(a64_exits, sites_count_every_return)
{
	struct kprobe kps[2], *ptrs[2];
	unsigned long v[2];
	long sum = 0;

	exit_hits = 0;
	cr_assert_eq(kprobes_exit_sites(EXA(a64x_two), v, 2, KPROBES_EXITS_JUMP), 2);
	for (int i = 0; i < 2; i++) {
		memset(&kps[i], 0, sizeof(kps[i]));
		kps[i].addr = (kprobe_opcode_t *)v[i];
		kps[i].pre_handler = exit_pre;
		ptrs[i] = &kps[i];
	}
	cr_assert_eq(register_kprobes(ptrs, 2), 0);
	kprobes_optimize_now();
	for (int i = 0; i < 2; i++)
		cr_assert(kps[i].flags & KPROBE_FLAG_OPTIMIZED, "site %d", i);
	for (long i = 0; i < 1000; i++)
		sum += a64x_two(i % 3);
	/* x = 0, 1: 7; x = 2: 4 */
	cr_assert_eq(sum, 334 * 7 + 333 * 7 + 333 * 4);
	cr_assert_eq(exit_hits, 1000);
	unregister_kprobes(ptrs, 2);
}
