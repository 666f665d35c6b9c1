/*
 * The A64 classifier and simulator against the CPU, in the arm64 guest of
 * `make check-arm64`:
 *  - differential: random encodings of every simulated form (ADR, ADRP,
 *    LDR/LDRSW/PRFM literal, B, BL, B.cond, CBZ/CBNZ, TBZ/TBNZ, BR, BLR,
 *    RET) run for real at a random place of an executable page, with
 *    random registers and flags, and simulated from the same registers:
 *    every register, SP, the PC and the flags must agree, and a literal
 *    the CPU cannot read must be one the simulation refuses (-EFAULT);
 *  - a fuzzer: random straight-line sequences (arithmetic, flags, loads,
 *    stores and LSE atomics on a scratch buffer, PC-relative forms,
 *    forward branches within the sequence, PAC hints) run unprobed, then
 *    with a breakpoint on every instruction and each one handled as a
 *    probe's hit path would: simulated, or run out of line in a slot
 *    followed by a branch back or by a BRK.  Registers, flags and memory
 *    must end the same.  (The library's own hit path is not used here:
 *    this checks the classifier's verdicts and the simulation.)
 *
 * How an instruction runs with chosen registers: a BRK raises SIGTRAP,
 * whose handler loads the registers into the signal frame, so that the
 * signal return starts the code under test; the next trap (a BRK after
 * it, or the fault of a branch into a page that is not executable)
 * records the registers and returns into the driver.  Handlers run on an
 * alternate stack, since SP is one of the random registers.
 *
 * The quick mode (the default, also in `make check-arm64-quick`) runs in
 * seconds; A64_FUZZ=long on the guest's kernel command line (`make
 * check-arm64` sets it) runs ten times as many.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include "kprobes.h"
#include "arch/arm64/insn.h"

#ifndef __aarch64__
#error "test_a64_sim is for arm64 only"
#endif

#define BRK(imm)	(0xd4200000u | (uint32_t)(imm) << 5)
#define BRK_START	0x55	/* the driver's: enter the state under test */
#define BRK_STOP	0x60	/* fills the code page: where a run ends */
#define BRK_PROBE	0x77	/* a probe on a fuzzed sequence */
#define BRK_SLOT	0x78	/* ends an out-of-line slot */
#define BRK_SKIP	0x79	/* a trap that resumes after itself */
#define NZCV		0xf0000000ull

/* Literal loads of the simulation read like this here (the library's
 * kp_copy_nofault is not linked in): a system call that fails with EFAULT
 * instead of faulting. */
long kp_copy_nofault(void *dst, const void *src, size_t len)
{
	struct iovec local = { dst, len }, remote = { (void *)src, len };

	return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)len ?
	       0 : -EFAULT;
}

/* ---- random numbers: xorshift64*, seeded per test (A64_SEED overrides) ---- */

static uint64_t rng_state;

static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static unsigned int rnd_below(unsigned int n)
{
	return (unsigned int)(rnd() % n);
}

static uint64_t seed_rng(uint64_t seed)
{
	const char *env = getenv("A64_SEED");

	if (env)
		seed = strtoull(env, NULL, 0);
	rng_state = seed ? seed : 1;
	return seed;
}

/* Values that make zero tests, bit tests and 32-bit forms interesting. */
static uint64_t interesting(void)
{
	switch (rnd_below(7)) {
	case 0: return 0;
	case 1: return rnd() & 0xffffffff;
	case 2: return rnd() << 32;
	case 3: return 1ull << rnd_below(64);
	case 4: return ~(1ull << rnd_below(64));
	case 5: return (uint64_t)(int64_t)(int32_t)rnd();
	default: return rnd();
	}
}

/*
 * How many encodings or sequences, per unit the caller names: ten times as
 * many in the long mode; a tenth in the sanitized build, which is there to
 * check the memory safety of the code under test and of this harness, and
 * runs five to ten times slower.  Each test stays well within the guest's
 * 120 s per test; there are few of them, as a sanitized test process
 * takes some 20 s to start in the emulator.
 */
static unsigned int scaled(unsigned int n)
{
	const char *mode = getenv("A64_FUZZ");

	if (mode && !strcmp(mode, "long"))
		n *= 10;
#if defined(__SANITIZE_ADDRESS__)
	n = (n + 9) / 10;
#endif
	return n;
}

/* ---- the address space: a 512 MiB reservation, readable around a code page ---- */

#define RESERVE		(512ul << 20)
#define WINDOW		((1ul << 20) + 4 * 4096)	/* readable, each side */
#define PAGE		4096ul

static uint8_t *area;
static uint32_t *code;		/* RWX, BRK_STOP everywhere but the test word */
static uint32_t *seq;		/* RWX: a fuzzed sequence */
static uint32_t *slots;		/* RWX: its out-of-line slots, two words each */
static uint64_t *consts;	/* read-only constants for the sequence's literals */
static uint8_t *altstack;

/* Every eighth page of the window is unreadable: literal loads that fault. */
static bool is_hole(const uint8_t *page)
{
	return (((uintptr_t)page / PAGE) & 7) == 3;
}

static void *fixed_rwx(uint8_t *at)
{
	cr_assert_eq(mprotect(at, PAGE, PROT_READ | PROT_WRITE | PROT_EXEC), 0,
		     "mprotect RWX: %s", strerror(errno));
	return at;
}

static void map_window(void)
{
	uint8_t *lo, *hi;

	area = mmap(NULL, RESERVE, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	cr_assert_neq(area, MAP_FAILED, "reserve: %s", strerror(errno));
	code = (uint32_t *)(area + RESERVE / 2);
	lo = (uint8_t *)code - WINDOW;
	hi = (uint8_t *)code + WINDOW;
	cr_assert_eq(mprotect(lo, hi - lo, PROT_READ | PROT_WRITE), 0);
	for (uint64_t *p = (uint64_t *)lo; p < (uint64_t *)hi; p++)
		*p = rnd();
	cr_assert_eq(mprotect(lo, hi - lo, PROT_READ), 0);
	for (uint8_t *p = lo; p < hi; p += PAGE)
		if (is_hole(p))
			cr_assert_eq(mprotect(p, PAGE, PROT_NONE), 0);
	/* The code page, and the fuzzer's pages away from the holes. */
	code = fixed_rwx((uint8_t *)code);
	seq = fixed_rwx((uint8_t *)code + 16 * PAGE);
	slots = fixed_rwx((uint8_t *)code + 17 * PAGE);
	for (size_t i = 0; i < PAGE / 4; i++)
		code[i] = seq[i] = slots[i] = BRK(BRK_STOP);
	consts = (uint64_t *)((uint8_t *)code + 18 * PAGE);
	cr_assert_eq(mprotect(consts, PAGE, PROT_READ), 0);
	__builtin___clear_cache((char *)code, (char *)code + PAGE);
	__builtin___clear_cache((char *)seq, (char *)slots + PAGE);
}

/* ---- running code with chosen registers ---- */

enum phase { IDLE, SETUP, RUN };

static volatile sig_atomic_t phase;
static struct pt_regs enter_regs, exit_regs;
static volatile int exit_sig;
static struct pt_regs driver_regs;	/* at the driver's BRK */

/* The fuzzer's probes: the decoded word of each sequence index. */
#define SEQ_MAX 48
static struct a64_insn probe_insn[SEQ_MAX];
static volatile unsigned long hits_sim, hits_xol;

static void regs_to_frame(mcontext_t *mc, const struct pt_regs *r)
{
	memcpy(mc->regs, r->regs, sizeof(r->regs));
	mc->sp = r->sp;
	mc->pc = r->pc;
	mc->pstate = (mc->pstate & ~NZCV) | (r->pstate & NZCV);
}

static void frame_to_regs(struct pt_regs *r, const mcontext_t *mc)
{
	memcpy(r->regs, mc->regs, sizeof(r->regs));
	r->sp = mc->sp;
	r->pc = mc->pc;
	r->pstate = mc->pstate;
}

/* A probe's hit: simulate, or go to the slot (which ends with a branch or
 * a BRK back); the BRK at a slot's end resumes after the probe. */
static bool probe_hit(mcontext_t *mc)
{
	uint32_t w = *(const uint32_t *)mc->pc;
	size_t k;

	if (w == BRK(BRK_SKIP)) {
		mc->pc += 4;
		return true;
	}
	if (w == BRK(BRK_SLOT)) {
		k = (mc->pc - (uintptr_t)slots) / 8;
		mc->pc = (uintptr_t)&seq[k + 1];
		return true;
	}
	if (w != BRK(BRK_PROBE))
		return false;
	k = (mc->pc - (uintptr_t)seq) / 4;
	if (probe_insn[k].kind == A64_INSN_SIMULATE) {
		struct pt_regs r;

		frame_to_regs(&r, mc);
		if (a64_insn_simulate(&probe_insn[k], &r))
			return false;
		regs_to_frame(mc, &r);
		hits_sim++;
	} else {
		mc->pc = (uintptr_t)&slots[2 * k];
		hits_xol++;
	}
	return true;
}

/*
 * SETUP (the driver's BRK): keep the driver's registers, start the state
 * under test.  RUN: a probe's trap, or the end of the run: record the
 * registers and return into the driver, after its BRK, with its own
 * registers (its FP/SIMD registers are untouched: the code under test
 * uses none).  No siglongjmp, which costs ten times more under ASan.
 */
static void on_signal(int sig, siginfo_t *si, void *uc_)
{
	mcontext_t *mc = &((ucontext_t *)uc_)->uc_mcontext;

	if (phase == SETUP && sig == SIGTRAP) {
		frame_to_regs(&driver_regs, mc);
		regs_to_frame(mc, &enter_regs);
		phase = RUN;
		return;
	}
	if (phase != RUN) {
		signal(sig, SIG_DFL);
		return;
	}
	if (sig == SIGTRAP && probe_hit(mc))
		return;
	frame_to_regs(&exit_regs, mc);
	exit_sig = sig;
	phase = IDLE;
	memcpy(mc->regs, driver_regs.regs, sizeof(driver_regs.regs));
	mc->sp = driver_regs.sp;
	mc->pc = driver_regs.pc + 4;
	mc->pstate = driver_regs.pstate;
}

static void install_handlers(void)
{
	static const int sigs[] = { SIGTRAP, SIGSEGV, SIGBUS, SIGILL };
	stack_t ss = { .ss_size = 256 * 1024 };
	struct sigaction sa = {
		.sa_sigaction = on_signal,
		.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER,
	};

	altstack = malloc(ss.ss_size);
	cr_assert_not_null(altstack);
	ss.ss_sp = altstack;
	cr_assert_eq(sigaltstack(&ss, NULL), 0);
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		cr_assert_eq(sigaction(sigs[i], &sa, NULL), 0);
}

/* Runs from in->pc with *in until the next trap or fault; *out is the
 * state there, the return value the signal. */
static int run_from(const struct pt_regs *in, struct pt_regs *out)
{
	enter_regs = *in;
	phase = SETUP;
	__asm__ volatile("brk %0" : : "i"(BRK_START) : "memory");
	cr_assert_eq(phase, IDLE, "the state under test was never entered");
	*out = exit_regs;
	return exit_sig;
}

static void random_regs(struct pt_regs *r)
{
	for (int i = 0; i < 31; i++)
		r->regs[i] = interesting();
	r->sp = (rnd() & 0xfffffffff0ull) | 0x10000000000ull;
	r->pstate = rnd() & NZCV;
}

static void setup_machine(uint64_t seed)
{
	seed_rng(seed);
	map_window();
	install_handlers();
}

/* ---- differential: one simulated form at a time ---- */

struct form {
	const char *name;
	uint32_t (*make)(struct pt_regs *r, uintptr_t pc);	/* word; may set r */
};

static uint32_t field(unsigned int bits_)
{
	return (uint32_t)rnd() & ((1u << bits_) - 1);
}

static uint32_t make_adr(struct pt_regs *r, uintptr_t pc)
{
	return 0x10000000u | field(2) << 29 | field(19) << 5 | field(5);
}

static uint32_t make_adrp(struct pt_regs *r, uintptr_t pc)
{
	return 0x90000000u | field(2) << 29 | field(19) << 5 | field(5);
}

static uint32_t make_ldr_literal(struct pt_regs *r, uintptr_t pc)
{
	return field(2) << 30 | 0x18000000u | field(19) << 5 | field(5);
}

static uint32_t make_b(struct pt_regs *r, uintptr_t pc)
{
	/* Half of them near, so that some land in the code page. */
	uint32_t imm = rnd_below(2) ? field(26) : (uint32_t)(rnd_below(2048) - 1024) & 0x3ffffff;

	return 0x14000000u | field(1) << 31 | imm;
}

static bool have_hbc(void)
{
	return getauxval(AT_HWCAP2) & (1ul << 44);	/* HWCAP2_HBC */
}

static uint32_t make_bcond(struct pt_regs *r, uintptr_t pc)
{
	uint32_t bc = have_hbc() ? field(1) << 4 : 0;

	return 0x54000000u | field(19) << 5 | bc | field(4);
}

static uint32_t make_cbz(struct pt_regs *r, uintptr_t pc)
{
	return 0x34000000u | field(1) << 31 | field(1) << 24 | field(19) << 5 | field(5);
}

static uint32_t make_tbz(struct pt_regs *r, uintptr_t pc)
{
	return 0x36000000u | field(1) << 31 | field(1) << 24 | field(5) << 19 |
	       field(14) << 5 | field(5);
}

/* A branch target: in the code page (a BRK there), misaligned, in the
 * readable window (not executable), or anywhere. */
static uint64_t branch_target(void)
{
	switch (rnd_below(5)) {
	case 0: return (uintptr_t)code + 4 * rnd_below(PAGE / 4);
	case 1: return (uintptr_t)code + rnd_below(PAGE);
	case 2: return (uintptr_t)code - WINDOW + 4 * rnd_below(2 * WINDOW / 4);
	case 3: return rnd() & 0x0000fffffffffffcull;
	default: return rnd() & ~3ull;
	}
}

static uint32_t make_br(struct pt_regs *r, uintptr_t pc)
{
	static const uint32_t ops[] = { 0xd61f0000, 0xd63f0000, 0xd65f0000 };
	uint32_t rn = field(5);

	if (rn != 31)
		r->regs[rn] = branch_target();
	return ops[rnd_below(3)] | rn << 5;
}

static const struct form forms[] = {
	{ "adr", make_adr }, { "adrp", make_adrp }, { "ldr literal", make_ldr_literal },
	{ "b/bl", make_b }, { "b.cond", make_bcond }, { "cbz/cbnz", make_cbz },
	{ "tbz/tbnz", make_tbz }, { "br/blr/ret", make_br },
};

static void expect_same(const char *what, uint32_t w, const struct pt_regs *in,
			const struct pt_regs *cpu, const struct pt_regs *sim, int sig)
{
	for (int i = 0; i < 31; i++)
		cr_assert_eq(cpu->regs[i], sim->regs[i],
			     "%s %#010x at %#lx: x%d cpu %#lx, simulated %#lx (in %#lx)",
			     what, w, in->pc, i, cpu->regs[i], sim->regs[i], in->regs[i]);
	cr_assert_eq(cpu->sp, sim->sp, "%s %#010x: sp", what, w);
	cr_assert_eq(cpu->pc, sim->pc, "%s %#010x at %#lx: pc cpu %#lx (signal %d), "
		     "simulated %#lx", what, w, in->pc, cpu->pc, sig, sim->pc);
	cr_assert_eq(cpu->pstate & NZCV, sim->pstate & NZCV, "%s %#010x: flags", what, w);
}

/* One word at a random place of the code page, run and simulated. */
static bool check_one(const struct form *f, unsigned long *faults)
{
	unsigned int pos = 1 + rnd_below(PAGE / 4 - 1);
	struct pt_regs in, cpu, sim;
	struct a64_insn insn;
	uint32_t w;
	int sig, ret;

	in.pc = (uintptr_t)&code[pos];
	random_regs(&in);
	w = f->make(&in, in.pc);
	cr_assert_eq(a64_insn_decode(w, &insn), 0, "%s %#010x: %s", f->name, w, insn.why);
	cr_assert_eq(insn.kind, A64_INSN_SIMULATE, "%s %#010x not simulated", f->name, w);
	sim = in;
	ret = a64_insn_simulate(&insn, &sim);
	/* A branch to itself would never stop. */
	if (ret == 0 && sim.pc == in.pc)
		return false;
	code[pos] = w;
	__builtin___clear_cache((char *)&code[pos], (char *)&code[pos + 1]);
	sig = run_from(&in, &cpu);
	code[pos] = BRK(BRK_STOP);
	__builtin___clear_cache((char *)&code[pos], (char *)&code[pos + 1]);
	if (ret == -EFAULT) {
		cr_assert_eq(sig, SIGSEGV, "%s %#010x: the simulation could not read, "
			     "the CPU raised %d", f->name, w, sig);
		cr_assert_eq(cpu.pc, in.pc, "%s %#010x: fault at %#lx", f->name, w, cpu.pc);
		(*faults)++;
		return true;
	}
	cr_assert_eq(ret, 0, "%s %#010x: simulate returned %d", f->name, w, ret);
	expect_same(f->name, w, &in, &cpu, &sim, sig);
	return true;
}

/* 1,500 random encodings of each of forms[first..last] (15,000 in the
 * long mode). */
static void check_forms(size_t first, size_t last, uint64_t seed)
{
	const unsigned int n = scaled(1500);

	setup_machine(seed);
	for (size_t f = first; f <= last; f++) {
		unsigned long done = 0, faults = 0;

		while (done < n)
			done += check_one(&forms[f], &faults);
		if (!strcmp(forms[f].name, "ldr literal"))
			cr_assert_gt(faults, n / 50, "only %lu unreadable literals", faults);
		cr_log_info("%s: %lu encodings (%lu unreadable literals)",
			    forms[f].name, done, faults);
	}
}

Test(a64_sim, adr_adrp_literal_match_the_cpu) { check_forms(0, 2, 0xa64001); }
Test(a64_sim, b_bl_bcond_cbz_match_the_cpu) { check_forms(3, 5, 0xa64002); }
Test(a64_sim, tbz_br_blr_ret_match_the_cpu) { check_forms(6, 7, 0xa64003); }

/* Every condition against every NZCV, both branch directions. */
Test(a64_sim, every_condition_and_flags)
{
	setup_machine(1);
	for (unsigned int cond = 0; cond < 16; cond++) {
		for (uint64_t flags = 0; flags < 16; flags++) {
			struct pt_regs in, cpu, sim;
			struct a64_insn insn;
			uint32_t w = 0x54000000u | 8u << 5 | cond;	/* B.cond +32 */

			random_regs(&in);
			in.pstate = flags << 28;
			in.pc = (uintptr_t)&code[100];
			cr_assert_eq(a64_insn_decode(w, &insn), 0);
			sim = in;
			cr_assert_eq(a64_insn_simulate(&insn, &sim), 0);
			code[100] = w;
			__builtin___clear_cache((char *)&code[100], (char *)&code[101]);
			run_from(&in, &cpu);
			cr_assert_eq(cpu.pc, sim.pc, "cond %u, NZCV %#lx: cpu %s, simulation %s",
				     cond, flags, cpu.pc == in.pc + 32 ? "taken" : "not taken",
				     sim.pc == in.pc + 32 ? "taken" : "not taken");
			cr_assert_eq(a64_condition_holds(cond, in.pstate), cpu.pc == in.pc + 32);
		}
	}
}

/*
 * Why exclusives are refused: with a trap between LDXR and STXR (a probe's
 * BRK, its handler and the signal return), the store-exclusive fails every
 * time, so the loop around it would never end; without it, it succeeds.
 */
static uint64_t store_exclusive_status(uint32_t between)
{
	static uint64_t word;
	struct pt_regs in, out;

	code[200] = 0xc85f7c20;		/* ldxr x0, [x1] */
	code[201] = between;
	code[202] = 0xc8027c20;		/* stxr w2, x0, [x1] */
	__builtin___clear_cache((char *)&code[200], (char *)&code[203]);
	random_regs(&in);
	in.regs[1] = (uintptr_t)&word;
	in.pc = (uintptr_t)&code[200];
	cr_assert_eq(run_from(&in, &out), SIGTRAP);
	cr_assert_eq(out.pc, (uintptr_t)&code[203]);
	return out.regs[2];
}

Test(a64_sim, exclusive_store_fails_across_a_trap)
{
	unsigned int ok = 0, ok_trapped = 0;

	setup_machine(2);
	for (int i = 0; i < 20; i++) {
		ok += store_exclusive_status(0xd503201f) == 0;		/* nop */
		ok_trapped += store_exclusive_status(BRK(BRK_SKIP)) == 0;
	}
	cr_assert_gt(ok, 15, "the plain LDXR/STXR pair succeeded %u times of 20", ok);
	cr_assert_eq(ok_trapped, 0, "the pair succeeded %u times of 20 across a trap",
		     ok_trapped);
}

/* ---- the fuzzer ---- */

#define SCRATCH 256
static uint8_t scratch[SCRATCH] __attribute__((aligned(16)));
static uint8_t scratch_init[SCRATCH];

#define XBASE	28	/* x28: the scratch buffer */

static unsigned int reg(void)
{
	return rnd_below(16);	/* x0..x15: data */
}

static uint32_t gen_alu(void)
{
	uint32_t sf = field(1);

	switch (rnd_below(9)) {
	case 0:	/* ADD/SUB(S) immediate */
		return sf << 31 | field(2) << 29 | 0x11000000u | field(1) << 22 |
		       field(12) << 10 | reg() << 5 | reg();
	case 1:	/* ADD/SUB(S) shifted register */
		return sf << 31 | field(2) << 29 | 0x0b000000u | rnd_below(3) << 22 |
		       reg() << 16 | (field(6) & (sf ? 63 : 31)) << 10 | reg() << 5 | reg();
	case 2:	/* AND/ORR/EOR/ANDS shifted register, N */
		return sf << 31 | field(2) << 29 | 0x0a000000u | field(2) << 22 |
		       field(1) << 21 | reg() << 16 | (field(6) & (sf ? 63 : 31)) << 10 |
		       reg() << 5 | reg();
	case 3:	/* MOVN/MOVZ/MOVK */
		return sf << 31 | (uint32_t[]){ 0, 2, 3 }[rnd_below(3)] << 29 | 0x12800000u |
		       (field(2) & (sf ? 3 : 1)) << 21 | field(16) << 5 | reg();
	case 4:	/* CSEL/CSINC/CSINV/CSNEG */
		return sf << 31 | field(1) << 30 | 0x1a800000u | reg() << 16 |
		       field(4) << 12 | field(1) << 10 | reg() << 5 | reg();
	case 5:	/* CCMN/CCMP immediate */
		return sf << 31 | field(1) << 30 | 0x3a400800u | field(5) << 16 |
		       field(4) << 12 | reg() << 5 | field(4);
	case 6:	/* MADD/MSUB */
		return sf << 31 | 0x1b000000u | reg() << 16 | field(1) << 15 |
		       reg() << 10 | reg() << 5 | reg();
	case 7:	/* UDIV/SDIV (by zero: zero, no trap) */
		return sf << 31 | 0x1ac00800u | reg() << 16 | field(1) << 10 | reg() << 5 | reg();
	default: /* ADC/SBC(S) */
		return sf << 31 | field(2) << 29 | 0x1a000000u | reg() << 16 | reg() << 5 | reg();
	}
}

static uint32_t gen_mem(void)
{
	unsigned int size = rnd_below(4), rt;

	switch (rnd_below(4)) {
	case 0:	/* LDR/STR unsigned offset, sizes B..X, LDRS* too */
		return size << 30 | 0x39000000u | rnd_below(4 - (size + 1) / 2) << 22 |
		       rnd_below(SCRATCH >> size) << 10 | XBASE << 5 | reg();
	case 1:	/* LDP/STP X, signed offset (LDP into one register twice is
		 * unpredictable: two different ones) */
		rt = reg();
		return 0xa9000000u | field(1) << 22 | rnd_below(SCRATCH / 8 - 1) << 15 |
		       (rt + 1 + rnd_below(15)) % 16 << 10 | XBASE << 5 | rt;
	case 2:	/* LDADD/LDCLR/LDEOR/LDSET/SWP (W, X; acquire/release) */
		return (2 | field(1)) << 30 | 0x38200000u | field(2) << 22 | reg() << 16 |
		       (rnd_below(2) ? 0x8000u : (uint32_t)rnd_below(4) << 12) |
		       XBASE << 5 | reg();
	default: /* CAS (W, X; acquire/release) */
		return (2 | field(1)) << 30 | 0x08a07c00u | field(1) << 22 | reg() << 16 |
		       field(1) << 15 | XBASE << 5 | reg();
	}
}

/*
 * A sequence is planned first, then encoded: the indirect branches come in
 * pairs (ADR x16, target; BR/BLR/RET x16), and no branch may land between
 * the two, where x16 would still hold an older, maybe backward, target.
 */
enum plan { P_ALU, P_MEM, P_ADR, P_LITERAL, P_BCOND, P_CBZ, P_TBZ, P_B, P_HINT,
	    P_PAIR_ADR, P_PAIR_BR };

static unsigned int pick_target(const enum plan *plan, unsigned int from, unsigned int n)
{
	unsigned int t;

	do
		t = from + rnd_below(n - from + 1);
	while (t < n && plan[t] == P_PAIR_BR);
	return t;
}

static uint32_t encode(const enum plan *plan, unsigned int i, unsigned int n)
{
	unsigned int t = pick_target(plan, i + 1, n);	/* forward, up to the stop */
	uint32_t d = t - i;				/* in words */
	intptr_t lit;

	switch (plan[i]) {
	case P_ALU:
		return gen_alu();
	case P_MEM:
		return gen_mem();
	case P_ADR:	/* ADR, ADRP: any offset, the result is a number */
		return field(1) << 31 | 0x10000000u | field(2) << 29 | field(19) << 5 | reg();
	case P_LITERAL:	/* LDR W/X/LDRSW/PRFM literal from the constants page */
		lit = (intptr_t)consts + 8 * rnd_below(PAGE / 8) - (intptr_t)&seq[i];
		return field(2) << 30 | 0x18000000u | ((uint32_t)(lit / 4) & 0x7ffff) << 5 | reg();
	case P_BCOND:
		return 0x54000000u | d << 5 | field(4);
	case P_CBZ:
		return field(1) << 31 | 0x34000000u | field(1) << 24 | d << 5 | reg();
	case P_TBZ:
		return field(1) << 31 | 0x36000000u | field(1) << 24 | field(5) << 19 |
		       d << 5 | reg();
	case P_B:	/* B, BL */
		return field(1) << 31 | 0x14000000u | d;
	case P_PAIR_ADR:	/* ADR x16, at least two words on */
		t = pick_target(plan, i + 2, n);
		return 0x10000000u | (t - i) << 5 | 16;		/* imm: (t - i) * 4 */
	case P_PAIR_BR:
		return (uint32_t[]){ 0xd61f0000, 0xd63f0000, 0xd65f0000 }[rnd_below(3)] | 16 << 5;
	default: /* hints: NOP, PACIASP, AUTIASP (SP is the modifier), XPACLRI */
		return (uint32_t[]){ 0xd503201f, 0xd503233f, 0xd50323bf, 0xd50320ff }[rnd_below(4)];
	}
}

static unsigned int gen_sequence(uint32_t *words)
{
	static const enum plan weights[] = {
		P_ALU, P_ALU, P_ALU, P_ALU, P_ALU, P_MEM, P_MEM, P_MEM, P_ADR,
		P_LITERAL, P_BCOND, P_CBZ, P_TBZ, P_B, P_HINT, P_PAIR_ADR,
	};
	enum plan plan[SEQ_MAX];
	unsigned int n = 8 + rnd_below(SEQ_MAX - 9), i;

	for (i = 0; i < n; i++) {
		plan[i] = weights[rnd_below(sizeof(weights) / sizeof(weights[0]))];
		if (plan[i] == P_PAIR_ADR && i + 2 > n)
			plan[i] = P_ALU;
		else if (plan[i] == P_PAIR_ADR)
			plan[++i] = P_PAIR_BR;
	}
	for (i = 0; i < n; i++)
		words[i] = encode(plan, i, n);
	words[n] = BRK(BRK_STOP);
	return n;
}

struct outcome {
	struct pt_regs regs;
	uint8_t mem[SCRATCH];
	int sig;
};

/* How a probed run handles its probes. */
enum probe_mode { UNPROBED, SLOT_BRANCH, SLOT_BRK };

/* The slot of word k: the word, then a branch back after the probe or a
 * BRK whose handler resumes there. */
static void fill_slot(unsigned int k, uint32_t w, enum probe_mode mode)
{
	int32_t back = (int32_t)((intptr_t)&seq[k + 1] - (intptr_t)&slots[2 * k + 1]);

	slots[2 * k] = w;
	slots[2 * k + 1] = mode == SLOT_BRK ? BRK(BRK_SLOT) :
			   0x14000000u | ((uint32_t)back / 4 & 0x3ffffff);
}

static void run_sequence(const uint32_t *words, unsigned int n, const struct pt_regs *in,
			 enum probe_mode mode, const bool *probed, struct outcome *out)
{
	for (unsigned int k = 0; k <= n; k++) {
		bool p = mode != UNPROBED && k < n && probed[k];

		seq[k] = p ? BRK(BRK_PROBE) : words[k];
		if (p)
			fill_slot(k, words[k], mode);
	}
	__builtin___clear_cache((char *)seq, (char *)&seq[n + 1]);
	__builtin___clear_cache((char *)slots, (char *)&slots[2 * n]);
	memcpy(scratch, scratch_init, SCRATCH);
	out->sig = run_from(in, &out->regs);
	memcpy(out->mem, scratch, SCRATCH);
}

static void expect_same_outcome(const struct outcome *ref, const struct outcome *got,
				const uint32_t *words, unsigned int n, const char *how)
{
	char where[64];

	snprintf(where, sizeof(where), "%s: seq %#lx", how, (unsigned long)(uintptr_t)seq);
	cr_assert_eq(got->sig, ref->sig, "%s: signal %d, unprobed %d", where, got->sig, ref->sig);
	for (int i = 0; i < 31; i++)
		cr_assert_eq(got->regs.regs[i], ref->regs.regs[i],
			     "%s: x%d %#lx, unprobed %#lx (stopped at word %ld of %u)", where, i,
			     got->regs.regs[i], ref->regs.regs[i],
			     (long)(got->regs.pc - (uintptr_t)seq) / 4, n);
	cr_assert_eq(got->regs.pc, ref->regs.pc, "%s: pc", where);
	cr_assert_eq(got->regs.sp, ref->regs.sp, "%s: sp", where);
	cr_assert_eq(got->regs.pstate & NZCV, ref->regs.pstate & NZCV, "%s: flags", where);
	cr_assert_eq(memcmp(got->mem, ref->mem, SCRATCH), 0, "%s: memory", where);
}

static void print_sequence(const uint32_t *words, unsigned int n)
{
	for (unsigned int i = 0; i <= n; i++)
		fprintf(stderr, "  %2u: .inst %#010x\n", i, words[i]);
}

static void fuzz(unsigned int sequences, uint64_t seed)
{
	uint32_t words[SEQ_MAX + 2];
	unsigned long discarded = 0, runs = 0;

	setup_machine(seed);
	for (unsigned int s = 0; s < sequences; s++) {
		struct outcome ref, got;
		struct pt_regs in;
		bool probed[SEQ_MAX];
		unsigned int n = gen_sequence(words);

		for (unsigned int k = 0; k < n; k++) {
			cr_assert_eq(a64_insn_decode(words[k], &probe_insn[k]), 0,
				     "word %u %#010x refused: %s", k, words[k], probe_insn[k].why);
		}
		for (size_t b = 0; b < SCRATCH; b++)
			scratch_init[b] = (uint8_t)rnd();
		random_regs(&in);
		in.regs[XBASE] = (uintptr_t)scratch;
		in.pc = (uintptr_t)seq;
		run_sequence(words, n, &in, UNPROBED, NULL, &ref);
		if (ref.sig != SIGTRAP || ref.regs.pc != (uintptr_t)&seq[n]) {
			discarded++;	/* e.g. AUTIASP on an unsigned X30 with FPAC */
			continue;
		}
		/* Every instruction probed at once, in both slot modes; then
		 * one at a time, alternating modes. */
		for (enum probe_mode m = SLOT_BRANCH; m <= SLOT_BRK; m++) {
			for (unsigned int k = 0; k < n; k++)
				probed[k] = true;
			run_sequence(words, n, &in, m, probed, &got);
			if (got.sig != ref.sig || memcmp(got.regs.regs, ref.regs.regs, sizeof(ref.regs.regs)))
				print_sequence(words, n);
			expect_same_outcome(&ref, &got, words, n, m == SLOT_BRK ?
					    "all probed, slots end in BRK" :
					    "all probed, slots branch back");
			runs++;
		}
		for (unsigned int k = 0; k < n; k++) {
			memset(probed, 0, sizeof(probed));
			probed[k] = true;
			run_sequence(words, n, &in, k & 1 ? SLOT_BRK : SLOT_BRANCH, probed, &got);
			if (got.sig != ref.sig || memcmp(got.regs.regs, ref.regs.regs, sizeof(ref.regs.regs)))
				print_sequence(words, n);
			expect_same_outcome(&ref, &got, words, n, "one probe");
			runs++;
		}
	}
	cr_assert_lt(discarded, sequences / 10 + 1, "%lu of %u sequences discarded",
		     discarded, sequences);
	cr_assert_gt(hits_sim, 4 * sequences, "only %lu simulated hits", hits_sim);
	cr_assert_gt(hits_xol, 4 * sequences, "only %lu out-of-line hits", hits_xol);
	cr_log_info("%u sequences (%lu discarded), %lu probed runs, %lu simulated and "
		    "%lu out-of-line hits", sequences, discarded, runs, hits_sim, hits_xol);
}

/* 75 sequences each (750 in the long mode). */
Test(a64_fuzz, sequences_probed_at_every_instruction_1) { fuzz(scaled(75), 0xf022f001); }
Test(a64_fuzz, sequences_probed_at_every_instruction_2) { fuzz(scaled(75), 0xf022f002); }
