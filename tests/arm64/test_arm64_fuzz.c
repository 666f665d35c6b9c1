/*
 * The differential fuzzer for arm64 with the library: random A64
 * sequences (a64_harness.c: arithmetic and flags, loads, stores and LSE
 * atomics on a scratch buffer, ADR/ADRP, literal loads, forward branches,
 * ADR x16 + BR/BLR/RET x16, PAC hints) run unprobed, then with a kprobe on
 * every instruction at once and on each one alone, in every mode the
 * arm64 port has: a pre handler only (the slot branches back, or the
 * instruction is simulated), with a post handler (the slot ends in a
 * BRK), and jump-optimized (a B to a detour that runs the instruction or
 * re-does it for its address; what cannot be optimized keeps its BRK).
 * Registers, flags and memory must end as unprobed, and every probe must
 * accept its instruction.
 *
 * The quick mode runs in `make check-arm64-quick` (about 20 s);
 * A64_FUZZ=long (set by `make check-arm64`) runs five times as many
 * sequences.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kprobes.h"
#include "a64_harness.h"

#ifndef __aarch64__
#error "test_arm64_fuzz is for arm64 only"
#endif

static struct kprobe kps[SEQ_MAX];
static volatile unsigned long pre_hits, post_hits;

/* The library's handlers run on the probed thread's stack: a real one. */
static uint8_t run_stack[256 * 1024] __attribute__((aligned(16)));

static int on_pre(struct kprobe *p, struct pt_regs *regs)
{
	pre_hits++;
	return 0;
}

static void on_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
	post_hits++;
}

enum mode { PRE_ONLY, WITH_POST, OPTIMIZED, NMODES };

static const char *const mode_names[] = { "pre handler only", "with a post handler",
					  "jump-optimized" };
static unsigned long optimized_probes;

static void arm_probes(unsigned int n, const bool *probed, enum mode m, const uint32_t *words)
{
	for (unsigned int k = 0; k < n; k++) {
		int ret;

		if (!probed[k])
			continue;
		memset(&kps[k], 0, sizeof(kps[k]));
		kps[k].addr = (kprobe_opcode_t *)&seq[k];
		kps[k].pre_handler = on_pre;
		kps[k].post_handler = m == WITH_POST ? on_post : NULL;
		ret = register_kprobe(&kps[k]);
		cr_assert_eq(ret, 0, "register_kprobe on word %u (%#010x): %d (%s)",
			     k, words[k], ret, strerror(-ret));
	}
	if (m != OPTIMIZED)
		return;
	kprobes_set_optimization(true);
	kprobes_optimize_now();
	for (unsigned int k = 0; k < n; k++)
		if (probed[k] && (kps[k].flags & KPROBE_FLAG_OPTIMIZED))
			optimized_probes++;
}

static void disarm_probes(unsigned int n, const bool *probed)
{
	for (unsigned int k = 0; k < n; k++)
		if (probed[k])
			unregister_kprobe(&kps[k]);
	kprobes_set_optimization(false);
}

static void run_probed(const uint32_t *words, unsigned int n, const struct pt_regs *in,
		       const bool *probed, enum mode m, struct outcome *out)
{
	arm_probes(n, probed, m, words);
	memcpy(scratch, scratch_init, SCRATCH);
	out->sig = run_from(in, &out->regs);
	memcpy(out->mem, scratch, SCRATCH);
	disarm_probes(n, probed);
	cr_assert_eq(memcmp(seq, words, 4 * (n + 1)), 0, "the sequence was not restored");
}

/*
 * Each sequence gets addresses no probe has been on: a BRK the program
 * writes where a probe was removed from (here the stop after a shorter
 * sequence) is taken by the library for a late hit of the old probe and
 * runs the old instruction — a JIT's reuse of its code memory; that case
 * is left to the port's own suites, this one checks the hit paths.
 */
#define ARENA_PAGES	64
#define SEQ_STRIDE	(SEQ_MAX + 2)

static uint32_t *arena;

static void map_arena(void)
{
	arena = (uint32_t *)((uint8_t *)code + 32 * PAGE);
	cr_assert_eq(mprotect(arena, ARENA_PAGES * PAGE, PROT_READ | PROT_WRITE | PROT_EXEC), 0);
	for (size_t i = 0; i < ARENA_PAGES * PAGE / 4; i++)
		arena[i] = BRK(BRK_STOP);
}

/*
 * The jump-optimized mode.  The code sits in the middle of the harness's
 * 512 MiB reservation, where no executable pool could be placed within a
 * B's reach: a megabyte of it 64 MiB below the code is given back for
 * the detours.  The optimizer's first pass takes the list of loaded
 * objects and marks probes outside every object (this anonymous code) as
 * gone: it runs once here, on a libc function, before any probe is on
 * the sequences, and the optimizer stays off but in that mode.
 */
static void prepare_optimized_mode(void)
{
	struct kprobe kp = { .addr = (kprobe_opcode_t *)getppid, .pre_handler = on_pre };

	cr_assert_eq(munmap((uint8_t *)code - (64ul << 20), 1ul << 20), 0);
	kprobes_set_optimization(true);
	cr_assert_eq(register_kprobe(&kp), 0);
	kprobes_optimize_now();
	unregister_kprobe(&kp);
	kprobes_set_optimization(false);
	pre_hits = 0;
}

static void fuzz_with_library(unsigned int sequences, uint64_t seed)
{
	uint32_t words[SEQ_MAX + 2];
	unsigned long discarded = 0, runs = 0;

	setup_machine(seed);
	map_arena();
	prepare_optimized_mode();
	cr_assert_leq(sequences * SEQ_STRIDE, ARENA_PAGES * PAGE / 4);
	for (unsigned int s = 0; s < sequences; s++) {
		struct outcome ref, got;
		struct pt_regs in;
		char how[96];
		bool probed[SEQ_MAX];
		unsigned int n;

		seq = arena + s * SEQ_STRIDE;	/* before generating: literals are PC-relative */
		n = gen_sequence(words);

		memcpy(seq, words, 4 * (n + 1));
		__builtin___clear_cache((char *)seq, (char *)&seq[n + 1]);
		for (size_t b = 0; b < SCRATCH; b++)
			scratch_init[b] = (uint8_t)rnd();
		random_regs(&in);
		in.sp = (uintptr_t)(run_stack + sizeof(run_stack));
		in.regs[XBASE] = (uintptr_t)scratch;
		in.pc = (uintptr_t)seq;
		memcpy(scratch, scratch_init, SCRATCH);
		ref.sig = run_from(&in, &ref.regs);
		memcpy(ref.mem, scratch, SCRATCH);
		if (ref.sig != SIGTRAP || ref.regs.pc != (uintptr_t)&seq[n]) {
			discarded++;	/* e.g. AUTIASP on an unsigned X30 with FPAC */
			continue;
		}
		for (unsigned int k = 0; k < n; k++) {
			memset(probed, 0, sizeof(probed));
			probed[k] = true;
			run_probed(words, n, &in, probed, (enum mode)((k + s) % NMODES), &got);
			if (got.sig != ref.sig || memcmp(&got.regs, &ref.regs, sizeof(ref.regs)))
				print_sequence(words, n);
			snprintf(how, sizeof(how), "one probe, on word %u (%#010x), %s", k,
				 words[k], mode_names[(k + s) % NMODES]);
			expect_same_outcome(&ref, &got, words, n, how);
			runs++;
		}
		for (enum mode m = PRE_ONLY; m < NMODES; m++) {
			for (unsigned int k = 0; k < n; k++)
				probed[k] = true;
			run_probed(words, n, &in, probed, m, &got);
			if (got.sig != ref.sig || memcmp(&got.regs, &ref.regs, sizeof(ref.regs)))
				print_sequence(words, n);
			expect_same_outcome(&ref, &got, words, n, mode_names[m]);
			runs++;
		}
	}
	cr_assert_lt(discarded, sequences / 10 + 1, "%lu of %u sequences discarded",
		     discarded, sequences);
	cr_assert_gt(pre_hits, 4 * sequences, "only %lu hits", pre_hits);
	cr_assert_gt(post_hits, 0, "no post handler ran");
	cr_assert_gt(optimized_probes, 4 * sequences, "only %lu probes were jump-optimized",
		     optimized_probes);
	cr_log_info("%u sequences (%lu discarded), %lu probed runs, %lu hits, %lu post "
		    "handler runs, %lu probes jump-optimized", sequences, discarded, runs,
		    pre_hits, post_hits, optimized_probes);
}

/*
 * Sequences per test: every probe is registered and removed again some 100
 * times a sequence, about 4 s a sequence in TCG, 50 s with the sanitized
 * library, so: 3 (15 in the long mode), and one in the sanitized build,
 * which is there for memory safety.  Each test stays within the guest's
 * 240 s.
 */
static unsigned int lib_sequences(void)
{
#if defined(__SANITIZE_ADDRESS__)
	return 1;
#else
	const char *mode = getenv("A64_FUZZ");

	return mode && !strcmp(mode, "long") ? 15 : 3;
#endif
}

Test(arm64_fuzz, library_probes_every_instruction_1) { fuzz_with_library(lib_sequences(), 0x11b001); }
Test(arm64_fuzz, library_probes_every_instruction_2) { fuzz_with_library(lib_sequences(), 0x11b002); }
