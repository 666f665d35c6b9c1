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
 * The harness (running code with chosen registers, the sequence
 * generator) is a64_harness.c, shared with test_arm64_fuzz.c, which runs
 * the same fuzzer with the library's probes.
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
#include "a64_harness.h"

#ifndef __aarch64__
#error "test_a64_sim is for arm64 only"
#endif


/* Literal loads of the simulation read like this here (the library's
 * kp_copy_nofault is not linked in): a system call that fails with EFAULT
 * instead of faulting. */
long kp_copy_nofault(void *dst, const void *src, size_t len)
{
	struct iovec local = { dst, len }, remote = { (void *)src, len };

	return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)len ?
	       0 : -EFAULT;
}


/* The fuzzer's probes: the decoded word of each sequence index. */
static struct a64_insn probe_insn[SEQ_MAX];
static volatile unsigned long hits_sim, hits_xol;

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

static void use_own_probes(void)
{
	a64_harness_trap = probe_hit;
}

TestSuite(a64_sim, .init = use_own_probes);
TestSuite(a64_fuzz, .init = use_own_probes);

/* ---- differential: one simulated form at a time ---- */

struct form {
	const char *name;
	uint32_t (*make)(struct pt_regs *r, uintptr_t pc);	/* word; may set r */
};

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
