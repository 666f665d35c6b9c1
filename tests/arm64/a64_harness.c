/*
 * The harness of the A64 suites in the guest (test_a64_sim.c, which checks
 * the classifier and simulator alone, and test_arm64_fuzz.c, which probes
 * with the library): random numbers, the address space of the code under
 * test, running code with chosen registers, and the sequence generator.
 * See a64_harness.h.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "a64_harness.h"

/* ---- random numbers: xorshift64*, seeded per test (A64_SEED overrides) ---- */

static uint64_t rng_state;

uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

unsigned int rnd_below(unsigned int n)
{
	return (unsigned int)(rnd() % n);
}

uint64_t seed_rng(uint64_t seed)
{
	const char *env = getenv("A64_SEED");

	if (env)
		seed = strtoull(env, NULL, 0);
	rng_state = seed ? seed : 1;
	return seed;
}

/* Values that make zero tests, bit tests and 32-bit forms interesting. */
uint64_t interesting(void)
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
 * 240 s per test; there are few of them, as a sanitized test process
 * takes some 20 s to start in the emulator.
 */
unsigned int scaled(unsigned int n)
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


static uint8_t *area;
uint32_t *code;		/* RWX, BRK_STOP everywhere but the test word */
uint32_t *seq;		/* RWX: a fuzzed sequence */
uint32_t *slots;		/* RWX: its out-of-line slots, two words each */
uint64_t *consts;	/* read-only constants for the sequence's literals */
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

bool (*a64_harness_trap)(mcontext_t *mc);

volatile sig_atomic_t phase;
struct pt_regs enter_regs, exit_regs;
volatile int exit_sig;
static struct pt_regs driver_regs;	/* at the driver's BRK */

void regs_to_frame(mcontext_t *mc, const struct pt_regs *r)
{
	memcpy(mc->regs, r->regs, sizeof(r->regs));
	mc->sp = r->sp;
	mc->pc = r->pc;
	mc->pstate = (mc->pstate & ~NZCV) | (r->pstate & NZCV);
}

void frame_to_regs(struct pt_regs *r, const mcontext_t *mc)
{
	memcpy(r->regs, mc->regs, sizeof(r->regs));
	r->sp = mc->sp;
	r->pc = mc->pc;
	r->pstate = mc->pstate;
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
	if (sig == SIGTRAP && a64_harness_trap && a64_harness_trap(mc))
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
int run_from(const struct pt_regs *in, struct pt_regs *out)
{
	enter_regs = *in;
	phase = SETUP;
	__asm__ volatile("brk %0" : : "i"(BRK_START) : "memory");
	cr_assert_eq(phase, IDLE, "the state under test was never entered");
	*out = exit_regs;
	return exit_sig;
}

void random_regs(struct pt_regs *r)
{
	for (int i = 0; i < 31; i++)
		r->regs[i] = interesting();
	r->sp = (rnd() & 0xfffffffff0ull) | 0x10000000000ull;
	r->pstate = rnd() & NZCV;
}

void setup_machine(uint64_t seed)
{
	seed_rng(seed);
	map_window();
	install_handlers();
}
uint32_t field(unsigned int bits_)
{
	return (uint32_t)rnd() & ((1u << bits_) - 1);
}


/* ---- the sequence generator ---- */

uint8_t scratch[SCRATCH] __attribute__((aligned(16)));
uint8_t scratch_init[SCRATCH];

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

unsigned int gen_sequence(uint32_t *words)
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

void expect_same_outcome(const struct outcome *ref, const struct outcome *got,
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

void print_sequence(const uint32_t *words, unsigned int n)
{
	for (unsigned int i = 0; i <= n; i++)
		fprintf(stderr, "  %2u: .inst %#010x\n", i, words[i]);
}
