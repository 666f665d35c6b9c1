/*
 * The harness shared by the A64 suites in the guest (a64_harness.c).
 *
 * How an instruction runs with chosen registers: a BRK raises SIGTRAP,
 * whose handler loads the registers into the signal frame, so that the
 * signal return starts the code under test; the next trap (a BRK after
 * it, or the fault of a branch into a page that is not executable)
 * records the registers and returns into the driver.  Handlers run on an
 * alternate stack, since SP may be one of the random registers.
 */
#ifndef A64_HARNESS_H
#define A64_HARNESS_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <ucontext.h>

#include "kprobes.h"

#define BRK(imm)	(0xd4200000u | (uint32_t)(imm) << 5)
#define BRK_START	0x55	/* the driver's: enter the state under test */
#define BRK_STOP	0x60	/* fills the code page: where a run ends */
#define BRK_PROBE	0x77	/* a probe on a fuzzed sequence */
#define BRK_SLOT	0x78	/* ends an out-of-line slot */
#define BRK_SKIP	0x79	/* a trap that resumes after itself */
#define NZCV		0xf0000000ull

#define RESERVE		(512ul << 20)
#define WINDOW		((1ul << 20) + 4 * 4096)	/* readable, each side */
#define PAGE		4096ul
#define SEQ_MAX		48	/* words of a generated sequence, at most */
#define SCRATCH 256
#define XBASE	28	/* x28: the scratch buffer */

/* Random numbers: xorshift64*, seeded per test (A64_SEED overrides). */
uint64_t rnd(void);
unsigned int rnd_below(unsigned int n);
uint64_t seed_rng(uint64_t seed);
uint64_t interesting(void);
uint32_t field(unsigned int bits_);
unsigned int scaled(unsigned int n);

/* A 512 MiB reservation, readable (every eighth page not) for WINDOW
 * around code, an RWX page of BRK(BRK_STOP); seq and slots are RWX pages
 * for a sequence and its slots, consts a read-only page of random words
 * for its literal loads. */
extern uint32_t *code, *seq, *slots;
extern uint64_t *consts;

enum phase { IDLE, SETUP, RUN };
extern volatile sig_atomic_t phase;
extern struct pt_regs enter_regs, exit_regs;
extern volatile int exit_sig;

/* Called first for every SIGTRAP while code under test runs: true when it
 * handled the trap (a probe of the test's own) and the run goes on. */
extern bool (*a64_harness_trap)(mcontext_t *mc);

void regs_to_frame(mcontext_t *mc, const struct pt_regs *r);
void frame_to_regs(struct pt_regs *r, const mcontext_t *mc);
/* Runs from in->pc with *in until the next trap or fault; *out is the
 * state there, the return value the signal. */
int run_from(const struct pt_regs *in, struct pt_regs *out);
void random_regs(struct pt_regs *r);
/* Seeds, maps the address space and installs the handlers. */
void setup_machine(uint64_t seed);

/* A random sequence of n words (returned) at seq, and BRK(BRK_STOP) after
 * them: arithmetic, flags, loads/stores/LSE atomics on scratch (x28),
 * PC-relative forms, forward branches, ADR x16 + BR/BLR/RET x16, PAC hints. */
extern uint8_t scratch[SCRATCH], scratch_init[SCRATCH];
unsigned int gen_sequence(uint32_t *words);

struct outcome {
	struct pt_regs regs;
	uint8_t mem[SCRATCH];
	int sig;
};

void expect_same_outcome(const struct outcome *ref, const struct outcome *got,
			 const uint32_t *words, unsigned int n, const char *how);
void print_sequence(const uint32_t *words, unsigned int n);

#endif
