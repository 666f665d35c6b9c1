/*
 * The A64 classifier and simulator on the host (they are plain C): every
 * encoding of tests/a64/insn_table.h (assembled by aarch64-linux-gnu-as,
 * see scripts/gen-a64-table.sh) gets its expected class, and the simulated
 * forms give the results worked out by hand below.  The comparison with a
 * real CPU is tests/arm64/test_a64_sim.c, in the arm64 guest.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/arm64/insn.h"

enum { A64_CASE_XOL, A64_CASE_SIM, A64_CASE_REJECT };

static const struct a64_case {
	uint32_t word;
	int klass;
	const char *dis;
} cases[] = {
#include "a64/insn_table.h"
};

static const char *const class_names[] = { "XOL", "SIMULATE", "REJECT" };

static int class_of(uint32_t word, struct a64_insn *in)
{
	int ret = a64_insn_decode(word, in);

	if (in->kind == A64_INSN_REJECT) {
		cr_assert_eq(ret, -EINVAL, "%#010x: reject returned %d", word, ret);
		cr_assert(in->why && *in->why, "%#010x: reject without a reason", word);
	} else {
		cr_assert_eq(ret, 0, "%#010x: %s returned %d", word,
			     class_names[in->kind], ret);
	}
	return in->kind == A64_INSN_XOL ? A64_CASE_XOL :
	       in->kind == A64_INSN_SIMULATE ? A64_CASE_SIM : A64_CASE_REJECT;
}

Test(a64_insn, assembled_encodings_have_their_class)
{
	const size_t n = sizeof(cases) / sizeof(cases[0]);
	unsigned int seen[3] = { 0 };

	cr_assert_gt(n, 150, "the table has %zu cases", n);
	for (size_t i = 0; i < n; i++) {
		struct a64_insn in;
		int got = class_of(cases[i].word, &in);

		cr_expect_eq(got, cases[i].klass, "%#010x %s: %s, expected %s%s%s",
			     cases[i].word, cases[i].dis, class_names[got],
			     class_names[cases[i].klass], in.why ? ": " : "",
			     in.why ? in.why : "");
		seen[got]++;
	}
	for (int k = 0; k < 3; k++)
		cr_assert_gt(seen[k], 20, "only %u %s cases", seen[k], class_names[k]);
}

/*
 * Whatever the word, the verdict is one of the three, a refusal has a
 * reason and a simulated form an operation; and nothing in the branch
 * group outside the system instructions (d5xxxxxx) runs out of line, where
 * an unknown encoding might branch.
 */
Test(a64_insn, random_words_are_classified_consistently)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;

	for (int i = 0; i < 2000000; i++) {
		struct a64_insn in;
		uint32_t w;
		int got;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		w = (uint32_t)(x >> 16);
		got = class_of(w, &in);
		if (got == A64_CASE_SIM)
			cr_assert_neq(in.op, A64_OP_NONE, "%#010x", w);
		if ((w & 0x1c000000) == 0x14000000 && (w & 0xff000000) != 0xd5000000)
			cr_assert_neq(got, A64_CASE_XOL, "%#010x: branch group run out of line", w);
		if ((w & 0x3b000000) == 0x18000000)
			cr_assert_neq(got, A64_CASE_XOL, "%#010x: literal load run out of line", w);
	}
}

/* ---- simulation, results worked out by hand ---- */

static struct pt_regs regs_at(uint64_t pc)
{
	struct pt_regs r;

	for (int i = 0; i < 31; i++)
		r.regs[i] = 0x1111111111111111ull * (uint64_t)(i % 15 + 1);
	r.sp = 0x7ffffff000ull;
	r.pc = pc;
	r.pstate = 0;
	return r;
}

static long fail_read(void *dst, const void *src, size_t len)
{
	return -EFAULT;
}

static long host_read(void *dst, const void *src, size_t len)
{
	memcpy(dst, src, len);
	return 0;
}

static void sim(uint32_t w, struct pt_regs *r)
{
	struct a64_insn in;

	cr_assert_eq(a64_insn_decode(w, &in), 0, "%#010x: %s", w, in.why);
	cr_assert_eq(in.kind, A64_INSN_SIMULATE, "%#010x is not simulated", w);
	cr_assert_eq(a64_insn_simulate_read(&in, r, host_read), 0, "%#010x", w);
}

/* ADRP Xd, imm21 pages: 1 immlo 10000 immhi Rd. */
static uint32_t adrp(unsigned int rd, uint32_t imm21)
{
	return 0x90000000u | (imm21 & 3) << 29 | (imm21 >> 2 & 0x7ffff) << 5 | rd;
}

static uint32_t adr(unsigned int rd, uint32_t imm21)
{
	return adrp(rd, imm21) & ~0x80000000u;
}

Test(a64_sim, adrp_page_arithmetic)
{
	struct pt_regs r = regs_at(0x12345678);

	sim(adrp(1, 1), &r);
	cr_assert_eq(r.regs[1], 0x12346000);
	cr_assert_eq(r.pc, 0x1234567c);
	r = regs_at(0x12345678);
	sim(adrp(2, 0x1fffff), &r);		/* -1 page */
	cr_assert_eq(r.regs[2], 0x12344000);
	r = regs_at(0x7f0012345ffcull);
	sim(adrp(3, 0x0fffff), &r);		/* the largest: +4 GiB - 4 KiB */
	cr_assert_eq(r.regs[3], 0x7f0012345000ull + 0xfffff000ull);
	r = regs_at(0x7f0012345ffcull);
	sim(adrp(4, 0x100000), &r);		/* the smallest: -4 GiB */
	cr_assert_eq(r.regs[4], 0x7f0012345000ull - 0x100000000ull);
	r = regs_at(0x1000);
	sim(adrp(5, 0x1ffffe), &r);		/* below zero wraps */
	cr_assert_eq(r.regs[5], 0xfffffffffffff000ull);
}

Test(a64_sim, adr_offsets_and_xzr)
{
	struct pt_regs r = regs_at(0x400000), before;

	sim(adr(0, 0x1234), &r);
	cr_assert_eq(r.regs[0], 0x401234);
	r = regs_at(0x400000);
	sim(adr(30, 0x1ffffc), &r);		/* -4 */
	cr_assert_eq(r.regs[30], 0x3ffffc);
	r = regs_at(0x400000);
	sim(adr(7, 0x100000), &r);		/* -1 MiB */
	cr_assert_eq(r.regs[7], 0x400000 - 0x100000);
	r = before = regs_at(0x400000);
	sim(adr(31, 0x10), &r);			/* ADR XZR: written nowhere */
	cr_assert_eq(memcmp(r.regs, before.regs, sizeof(r.regs)), 0);
	cr_assert_eq(r.sp, before.sp, "ADR XZR wrote SP");
	cr_assert_eq(r.pc, 0x400004);
}

Test(a64_sim, branch_limits)
{
	struct pt_regs r = regs_at(0x10000000);

	sim(0x15ffffff, &r);			/* B +0x7fffffc */
	cr_assert_eq(r.pc, 0x10000000 + 0x7fffffc);
	r = regs_at(0x10000000);
	sim(0x16000000, &r);			/* B -0x8000000 */
	cr_assert_eq(r.pc, 0x10000000 - 0x8000000);
	cr_assert_eq(r.regs[30], regs_at(0).regs[30], "B wrote X30");
	r = regs_at(0x10000000);
	sim(0x97ffffff, &r);			/* BL -4 */
	cr_assert_eq(r.pc, 0x10000000 - 4);
	cr_assert_eq(r.regs[30], 0x10000004);
	r = regs_at(0x10000000);
	sim(0x54ffffe0, &r);			/* B.EQ -4, Z set below */
	cr_assert_eq(r.pc, 0x10000004, "B.EQ taken with Z clear");
	r = regs_at(0x10000000);
	r.pstate = 1u << 30;
	sim(0x547fffe0, &r);			/* B.EQ +0xffffc */
	cr_assert_eq(r.pc, 0x10000000 + 0xffffc);
	r = regs_at(0x10000000);
	r.pstate = 1u << 30;
	sim(0x54800000, &r);			/* B.EQ -0x100000 */
	cr_assert_eq(r.pc, 0x10000000 - 0x100000);
}

/* One condition and NZCV with the verdict the Arm ARM's table gives. */
static const struct {
	unsigned int cond;
	const char *flags;	/* of "NZCV", the set ones */
	bool taken;
} conditions[] = {
	{ 0, "Z", true }, { 0, "NCV", false }, { 1, "Z", false }, { 1, "", true },
	{ 2, "C", true }, { 2, "NZV", false }, { 3, "C", false }, { 3, "NZ", true },
	{ 4, "N", true }, { 4, "ZCV", false }, { 5, "N", false }, { 5, "ZC", true },
	{ 6, "V", true }, { 6, "NZC", false }, { 7, "V", false }, { 7, "", true },
	{ 8, "C", true }, { 8, "CZ", false }, { 8, "", false }, { 8, "NCV", true },
	{ 9, "C", false }, { 9, "CZ", true }, { 9, "Z", true }, { 9, "", true },
	{ 10, "", true }, { 10, "NV", true }, { 10, "N", false }, { 10, "V", false },
	{ 11, "", false }, { 11, "NV", false }, { 11, "N", true }, { 11, "VZ", true },
	{ 12, "", true }, { 12, "NV", true }, { 12, "Z", false }, { 12, "N", false },
	{ 12, "NVZ", false }, { 13, "", false }, { 13, "Z", true }, { 13, "V", true },
	{ 13, "NV", false }, { 14, "", true }, { 14, "NZCV", true }, { 15, "", true },
	{ 15, "NZCV", true },
};

static uint64_t nzcv(const char *flags)
{
	uint64_t p = 0x3c0;	/* DAIF bits, which must not matter */

	for (; *flags; flags++)
		p |= 1ull << (*flags == 'N' ? 31 : *flags == 'Z' ? 30 : *flags == 'C' ? 29 : 28);
	return p;
}

Test(a64_sim, condition_codes)
{
	for (size_t i = 0; i < sizeof(conditions) / sizeof(conditions[0]); i++) {
		struct pt_regs r = regs_at(0x8000);
		uint32_t w = 0x54000100u | conditions[i].cond;	/* B.cond +32 */

		r.pstate = nzcv(conditions[i].flags);
		sim(w, &r);
		cr_expect_eq(r.pc, conditions[i].taken ? 0x8020 : 0x8004,
			     "cond %u with {%s}: %s", conditions[i].cond,
			     conditions[i].flags, conditions[i].taken ? "not taken" : "taken");
		cr_assert_eq(r.pstate, nzcv(conditions[i].flags), "flags changed");
		/* BC.cond (bit 4) branches the same way. */
		r = regs_at(0x8000);
		r.pstate = nzcv(conditions[i].flags);
		sim(w | 0x10, &r);
		cr_expect_eq(r.pc, conditions[i].taken ? 0x8020 : 0x8004);
	}
}

Test(a64_sim, cbz_on_w_registers)
{
	struct pt_regs r = regs_at(0x1000);

	r.regs[3] = 0xffffffff00000000ull;
	sim(0x34000083, &r);			/* CBZ W3, +16 */
	cr_assert_eq(r.pc, 0x1010, "CBZ W3 looked at the upper half");
	r.pc = 0x1000;
	sim(0xb4000083, &r);			/* CBZ X3, +16 */
	cr_assert_eq(r.pc, 0x1004);
	r.pc = 0x1000;
	sim(0x35000083, &r);			/* CBNZ W3, +16 */
	cr_assert_eq(r.pc, 0x1004);
	r.pc = 0x1000;
	sim(0xb5000083, &r);			/* CBNZ X3, +16 */
	cr_assert_eq(r.pc, 0x1010);
	r.pc = 0x1000;
	sim(0xb4ffffff, &r);			/* CBZ XZR, -4: always */
	cr_assert_eq(r.pc, 0xffc);
	r.pc = 0x1000;
	sim(0x3580001f, &r);			/* CBNZ WZR, -0x100000: never */
	cr_assert_eq(r.pc, 0x1004);
}

Test(a64_sim, tbz_bit_63_and_31)
{
	struct pt_regs r = regs_at(0x2000);

	r.regs[0] = 1ull << 63;
	sim(0xb6f80080, &r);			/* TBZ X0, #63, +16 */
	cr_assert_eq(r.pc, 0x2004);
	r.pc = 0x2000;
	sim(0xb7f80080, &r);			/* TBNZ X0, #63, +16 */
	cr_assert_eq(r.pc, 0x2010);
	r.pc = 0x2000;
	sim(0x36f80080, &r);			/* TBZ W0, #31, +16: bit 31 clear */
	cr_assert_eq(r.pc, 0x2010);
	r.pc = 0x2000;
	r.regs[1] = 0x80000000;
	sim(0x37fbffe1, &r);			/* TBNZ W1, #31, +0x7ffc: the largest */
	cr_assert_eq(r.pc, 0x2000 + 0x7ffc);
	r.pc = 0x10000;
	sim(0x360c0001, &r);			/* TBZ W1, #1, -0x8000: the smallest */
	cr_assert_eq(r.pc, 0x10000 - 0x8000);
}

/* pc such that pc + imm is p; literal words LDR Rt, pc + imm. */
static struct pt_regs regs_for_literal(const void *p, int64_t imm)
{
	return regs_at((uint64_t)(uintptr_t)p - (uint64_t)imm);
}

static uint32_t ldr_lit(unsigned int opc, int64_t imm, unsigned int rt)
{
	return opc << 30 | 0x18000000u | ((uint32_t)(imm / 4) & 0x7ffff) << 5 | rt;
}

Test(a64_sim, literal_loads_extend_as_their_form)
{
	static const uint64_t lit[2] = { 0x1122334480000001ull, 0x8899aabbccddeeffull };
	struct pt_regs r, before;

	r = regs_for_literal(lit, 0x40);
	sim(ldr_lit(0, 0x40, 2), &r);		/* LDR W2: zero-extended */
	cr_assert_eq(r.regs[2], 0x80000001ull, "%#lx", r.regs[2]);
	cr_assert_eq(r.pc, (uint64_t)(uintptr_t)lit - 0x40 + 4);
	r = regs_for_literal(lit, -0x100000);
	sim(ldr_lit(2, -0x100000, 3), &r);	/* LDRSW X3: sign-extended */
	cr_assert_eq(r.regs[3], 0xffffffff80000001ull, "%#lx", r.regs[3]);
	r = regs_for_literal(&lit[1], 0xffffc);
	sim(ldr_lit(1, 0xffffc, 4), &r);	/* LDR X4 */
	cr_assert_eq(r.regs[4], 0x8899aabbccddeeffull);
	r = regs_for_literal((const char *)lit + 4, 8);
	sim(ldr_lit(2, 8, 5), &r);		/* LDRSW, positive */
	cr_assert_eq(r.regs[5], 0x11223344ull);
	r = before = regs_for_literal(lit, 8);
	sim(ldr_lit(1, 8, 31), &r);		/* LDR XZR: loads, keeps nothing */
	cr_assert_eq(memcmp(r.regs, before.regs, sizeof(r.regs)), 0);
	cr_assert_eq(r.sp, before.sp, "LDR XZR wrote SP");
}

Test(a64_sim, unreadable_literal_faults_and_changes_nothing)
{
	struct pt_regs r = regs_at(0x5000), before = r;
	struct a64_insn in;

	cr_assert_eq(a64_insn_decode(ldr_lit(1, 64, 7), &in), 0);
	cr_assert_eq(a64_insn_simulate_read(&in, &r, fail_read), -EFAULT);
	cr_assert_eq(memcmp(&r, &before, sizeof(r)), 0);
	/* PRFM literal never reads: it is a hint. */
	cr_assert_eq(a64_insn_decode(ldr_lit(3, 64, 0), &in), 0);
	cr_assert_eq(a64_insn_simulate_read(&in, &r, fail_read), 0);
	cr_assert_eq(r.pc, 0x5004);
	cr_assert_eq(memcmp(r.regs, before.regs, sizeof(r.regs)), 0);
}

/* The library's own non-faulting copy on a readable literal. */
Test(a64_sim, default_reader)
{
	static const uint32_t lit = 0xfffffffe;
	struct pt_regs r = regs_for_literal(&lit, 12);
	struct a64_insn in;

	cr_assert_eq(a64_insn_decode(ldr_lit(2, 12, 9), &in), 0);
	cr_assert_eq(a64_insn_simulate(&in, &r), 0);
	cr_assert_eq(r.regs[9], (uint64_t)-2);
}

Test(a64_sim, register_branches)
{
	struct pt_regs r = regs_at(0x3000);

	r.regs[16] = 0xaaaa0000;
	sim(0xd61f0200, &r);			/* BR X16 */
	cr_assert_eq(r.pc, 0xaaaa0000);
	r = regs_at(0x3000);
	r.regs[30] = 0xbbbb0000;
	sim(0xd63f03c0, &r);			/* BLR X30: the old X30 */
	cr_assert_eq(r.pc, 0xbbbb0000);
	cr_assert_eq(r.regs[30], 0x3004);
	r = regs_at(0x3000);
	r.regs[30] = 0xcccc0000;
	sim(0xd65f03c0, &r);			/* RET */
	cr_assert_eq(r.pc, 0xcccc0000);
	r = regs_at(0x3000);
	r.regs[2] = 0xdddd0002;
	sim(0xd65f0040, &r);			/* RET X2, misaligned kept as is */
	cr_assert_eq(r.pc, 0xdddd0002);
	r = regs_at(0x3000);
	sim(0xd61f03e0, &r);			/* BR XZR (not SP) */
	cr_assert_eq(r.pc, 0);
	/* A tagged user pointer: the top byte is ignored, as the CPU does. */
	r = regs_at(0x3000);
	r.regs[16] = 0xbe0000aaaa001230ull;
	sim(0xd61f0200, &r);			/* BR X16 */
	cr_assert_eq(r.pc, 0xaaaa001230ull);
	r = regs_at(0x3000);
	r.regs[1] = 0x3c7fffffaaaa0000ull;
	sim(0xd63f0020, &r);			/* BLR X1 */
	cr_assert_eq(r.pc, 0x7fffffaaaa0000ull);
	/* Upper-half addresses keep it (no TBI there): a fault at v. */
	r = regs_at(0x3000);
	r.regs[30] = 0x12ff800000001000ull;
	sim(0xd65f03c0, &r);			/* RET */
	cr_assert_eq(r.pc, 0x12ff800000001000ull);
}

/* BTYPE (pstate bits 11:10) is zero after a simulated instruction; the
 * flags and the rest of pstate stay. */
Test(a64_sim, btype_cleared_flags_kept)
{
	const uint32_t words[] = { adr(0, 8), 0xd61f0200 /* BR X16 */,
				   0x54000100 /* B.EQ */, 0x14000002 /* B */ };

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		struct pt_regs r = regs_at(0x3000);

		r.pstate = 0xa0000000 | 3 << 10 | 0x3c0 | 1 << 12;
		sim(words[i], &r);
		cr_assert_eq(r.pstate, 0xa0000000 | 0x3c0 | 1 << 12, "%#010x: pstate %#lx",
			     words[i], r.pstate);
	}
}

Test(a64_sim, only_simulated_forms_simulate)
{
	struct pt_regs r = regs_at(0x3000), before = r;
	struct a64_insn in;

	cr_assert_eq(a64_insn_decode(0xd503201f, &in), 0);	/* NOP */
	cr_assert_eq(a64_insn_simulate(&in, &r), -EINVAL);
	cr_assert_eq(a64_insn_decode(0xd65f0bff, &in), -EINVAL);	/* RETAA */
	cr_assert_eq(a64_insn_simulate(&in, &r), -EINVAL);
	cr_assert_eq(memcmp(&r, &before, sizeof(r)), 0);
}

/* ---- exclusive sequences ---- */

#define LDXR	0xc85f7c20u	/* ldxr x0, [x1] */
#define LDAXP	0x887f8820u	/* ldaxp w0, w2, [x1] */
#define STXR	0xc8027c20u	/* stxr w2, x0, [x1] */
#define STLXP	0xc8238820u	/* stlxp w3, x0, x2, [x1] */
#define LDAR	0xc8dffc20u	/* ldar x0, [x1] */
#define CASP	0x48207c82u	/* casp x0, x1, x2, x3, [x4] */
#define ADD	0x91000400u	/* add x0, x0, #1 */
#define CBNZ	0x35ffff82u	/* cbnz w2, back */

Test(a64_excl, inside_and_outside)
{
	const uint32_t loop[] = { ADD, LDXR, ADD, ADD, STXR, CBNZ, ADD };
	const uint32_t pair[] = { LDAXP, ADD, STLXP, ADD };
	const uint32_t plain[] = { LDAR, ADD, CASP, ADD };
	uint32_t far[A64_EXCLUSIVE_WINDOW + 3];

	cr_assert_not(a64_in_exclusive_sequence(loop, 7, 0));
	cr_assert_not(a64_in_exclusive_sequence(loop, 7, 1), "the load itself");
	cr_assert(a64_in_exclusive_sequence(loop, 7, 2));
	cr_assert(a64_in_exclusive_sequence(loop, 7, 3));
	cr_assert(a64_in_exclusive_sequence(loop, 7, 4), "the store");
	cr_assert_not(a64_in_exclusive_sequence(loop, 7, 5));
	cr_assert_not(a64_in_exclusive_sequence(loop, 7, 6));
	cr_assert_not(a64_in_exclusive_sequence(loop, 7, 7), "past the end");
	cr_assert(a64_in_exclusive_sequence(pair, 4, 1));
	cr_assert(a64_in_exclusive_sequence(pair, 4, 2));
	cr_assert_not(a64_in_exclusive_sequence(pair, 4, 3));
	for (size_t i = 0; i < 4; i++)
		cr_assert_not(a64_in_exclusive_sequence(plain, 4, i), "LDAR/CASP at %zu", i);
	far[0] = LDXR;
	for (size_t i = 1; i < sizeof(far) / sizeof(far[0]); i++)
		far[i] = ADD;
	cr_assert(a64_in_exclusive_sequence(far, A64_EXCLUSIVE_WINDOW + 3,
					    A64_EXCLUSIVE_WINDOW));
	cr_assert_not(a64_in_exclusive_sequence(far, A64_EXCLUSIVE_WINDOW + 3,
						A64_EXCLUSIVE_WINDOW + 1),
		      "beyond the window");
}

/* ---- random words against the cross binutils' disassembler ---- */

static bool is_one_of(const char *m, const char *const *list)
{
	for (; *list; list++)
		if (!strcmp(m, *list))
			return true;
	return false;
}

static bool starts_with_one_of(const char *m, const char *const *list)
{
	for (; *list; list++)
		if (!strncmp(m, *list, strlen(*list)))
			return true;
	return false;
}

/* What objdump's reading of a word requires of the classifier. */
enum oracle { O_UNDEFINED, O_PC, O_REFUSE, O_PLAIN };

static enum oracle oracle_of(const char *m, const char *ops)
{
	static const char *const pc[] = {
		"adr", "adrp", "b", "bl", "cbz", "cbnz", "tbz", "tbnz", "br", "blr", "ret",
		"braa", "brab", "braaz", "brabz", "blraa", "blrab", "blraaz", "blrabz",
		"retaa", "retab", NULL,
	};
	static const char *const traps[] = {
		"svc", "hvc", "smc", "brk", "hlt", "dcps1", "dcps2", "dcps3", "udf",
		"eret", "eretaa", "eretab", "drps", NULL,
	};
	static const char *const exclusive[] = { "ldxr", "ldaxr", "stxr", "stlxr", "ldxp",
						  "ldaxp", "stxp", "stlxp", NULL };

	if (!strcmp(m, ".inst") || strstr(ops, "undefined"))
		return O_UNDEFINED;
	/* SVE's ADR (vector) computes from Z registers, not the PC. */
	if ((is_one_of(m, pc) && ops[0] != 'z') || !strncmp(m, "b.", 2) ||
	    !strncmp(m, "bc.", 3))
		return O_PC;
	/* Literal loads: objdump prints their target as "<.text+...>". */
	if ((!strcmp(m, "ldr") || !strcmp(m, "ldrsw") || !strcmp(m, "prfm")) && strchr(ops, '<'))
		return O_PC;
	if (is_one_of(m, traps) || starts_with_one_of(m, exclusive))
		return O_REFUSE;
	return O_PLAIN;
}

/*
 * Refusals of instructions that neither read the PC nor trap, by policy:
 * MSR (PSTATE fields, registers EL0 cannot write), memory copy/set, and
 * TCANCEL (in the exception-generating group).
 */
static bool refused_by_policy(const char *m)
{
	static const char *const mops[] = { "cpy", "setp", "setm", "sete", "setg", NULL };

	return !strcmp(m, "msr") || !strcmp(m, "tcancel") || starts_with_one_of(m, mops);
}

#define ORACLE_WORDS 100000

Test(a64_insn, random_words_agree_with_objdump, .timeout = 120)
{
	char dir[] = "/tmp/a64oracle.XXXXXX", cmd[512], line[512];
	unsigned int count[4] = { 0 }, n = 0;
	uint64_t x = 0x5eed5eed5eedull;
	FILE *f;

	if (system("command -v aarch64-linux-gnu-as >/dev/null && "
		   "command -v aarch64-linux-gnu-objdump >/dev/null"))
		cr_skip_test("no aarch64-linux-gnu binutils (scripts/install-deps.sh --arm64)");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd), "%s/w.s", dir);
	f = fopen(cmd, "w");
	cr_assert_not_null(f);
	for (int i = 0; i < ORACLE_WORDS; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		fprintf(f, ".inst %#010x\n", (uint32_t)(x >> 20));
	}
	fclose(f);
	snprintf(cmd, sizeof(cmd), "cd %s && aarch64-linux-gnu-as w.s -o w.o && "
		 "aarch64-linux-gnu-objdump -d -M no-aliases w.o; rm -rf %s", dir, dir);
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		char m[64] = "", ops[256] = "";
		struct a64_insn in;
		unsigned int w;
		enum oracle o;
		int got;

		if (sscanf(line, " %*x:\t%8x \t%63s %255[^\n]", &w, m, ops) < 2)
			continue;
		n++;
		o = oracle_of(m, ops);
		count[o]++;
		got = class_of(w, &in);
		if (o == O_PC)
			cr_assert_neq(got, A64_CASE_XOL, "%#010x %s %s: run out of line", w, m, ops);
		else if (o == O_REFUSE)
			cr_assert_eq(got, A64_CASE_REJECT, "%#010x %s %s: %s", w, m, ops,
				     class_names[got]);
		else if (o == O_PLAIN && got != A64_CASE_XOL)
			cr_assert(got == A64_CASE_REJECT && refused_by_policy(m),
				  "%#010x %s %s: %s%s%s", w, m, ops, class_names[got],
				  in.why ? ": " : "", in.why ? in.why : "");
	}
	cr_assert_eq(pclose(f), 0, "as or objdump failed");
	cr_assert_eq(n, ORACLE_WORDS, "objdump printed %u of %d words", n, ORACLE_WORDS);
	cr_log_info("%u undefined, %u reading the PC, %u traps/exclusives, %u plain",
		    count[O_UNDEFINED], count[O_PC], count[O_REFUSE], count[O_PLAIN]);
}
