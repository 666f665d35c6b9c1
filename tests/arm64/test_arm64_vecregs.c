/*
 * kprobes_vector_reg() on arm64: a handler reads the V registers (q0..q31)
 * the probed code had at the probed instruction, at BRK hits: pre handlers
 * at a function entry and mid-function, post handlers after an instruction
 * run out of line and after a simulated one; bad arguments, a copy of the
 * registers, return handlers (the V registers as the function returned,
 * with KPROBE_FLAG_VECTOR_REGS) and calls from outside a hit.
 *
 * The code under test is assembly that loads every V register from a
 * table and then reaches the probe, so the expected values are known; the
 * handler overwrites every V register before it reads, so a value can only
 * come from what the hit kept.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kprobes.h"

TestSuite(a64_vecregs, .timeout = 60);

#define NVREG 32

/* v i = vec_in[i] (16 bytes each). */
static unsigned char vec_in[NVREG][16] __attribute__((aligned(16), used));
/* What the mid-function code finds in its registers after the probe. */
static unsigned char vec_after[NVREG][16] __attribute__((aligned(16), used));
/* What vec_ret_fn returns in v0..v31, and what its caller then has. */
static unsigned char vec_ret[NVREG][16] __attribute__((aligned(16), used));
static unsigned char vec_ret_after[NVREG][16] __attribute__((aligned(16), used));

void vec_ret_fn(const void *tbl);
void vec_call_ret(const void *tbl, void (*fn)(const void *), void *after);

void vec_call(const void *tbl, void (*fn)(void));
void vec_entry_fn(void);
void vec_mid_fn(const void *tbl, void *after);
extern const char vec_mid_probe[], vec_mid_sim[];

/* The callee-saved d8-d15 are kept on the stack around the loads: the
 * C callers may hold values there. */
__asm__(
	".pushsection .text\n"
	".macro VEC_SAVE\n"
	"\tstp x29, x30, [sp, #-80]!\n"
	"\tmov x29, sp\n"
	"\tstp d8, d9, [sp, #16]\n"
	"\tstp d10, d11, [sp, #32]\n"
	"\tstp d12, d13, [sp, #48]\n"
	"\tstp d14, d15, [sp, #64]\n"
	".endm\n"
	".macro VEC_RESTORE\n"
	"\tldp d8, d9, [sp, #16]\n"
	"\tldp d10, d11, [sp, #32]\n"
	"\tldp d12, d13, [sp, #48]\n"
	"\tldp d14, d15, [sp, #64]\n"
	"\tldp x29, x30, [sp], #80\n"
	".endm\n"
	/* q0..q31 from the table at x0 (x0 moves on). */
	".macro VEC_LOAD\n"
	"\tld1 {v0.16b, v1.16b, v2.16b, v3.16b}, [x0], #64\n"
	"\tld1 {v4.16b, v5.16b, v6.16b, v7.16b}, [x0], #64\n"
	"\tld1 {v8.16b, v9.16b, v10.16b, v11.16b}, [x0], #64\n"
	"\tld1 {v12.16b, v13.16b, v14.16b, v15.16b}, [x0], #64\n"
	"\tld1 {v16.16b, v17.16b, v18.16b, v19.16b}, [x0], #64\n"
	"\tld1 {v20.16b, v21.16b, v22.16b, v23.16b}, [x0], #64\n"
	"\tld1 {v24.16b, v25.16b, v26.16b, v27.16b}, [x0], #64\n"
	"\tld1 {v28.16b, v29.16b, v30.16b, v31.16b}, [x0], #64\n"
	".endm\n"

	/* vec_call(tbl, fn): v0-v31 from tbl, then fn(). */
	"\t.globl vec_call\n"
	"\t.type vec_call, %function\n"
	"\t.p2align 4\n"
	"vec_call:\n"
	"\tVEC_SAVE\n"
	"\tVEC_LOAD\n"
	"\tblr x1\n"
	"\tVEC_RESTORE\n"
	"\tret\n"
	"\t.size vec_call, . - vec_call\n"

	/* A function entry: stp (run out of line). */
	"\t.globl vec_entry_fn\n"
	"\t.type vec_entry_fn, %function\n"
	"\t.p2align 4\n"
	"vec_entry_fn:\n"
	"\tstp x29, x30, [sp, #-16]!\n"
	"\tmov x29, sp\n"
	"\tadd x9, x0, x1\n"
	"\tldp x29, x30, [sp], #16\n"
	"\tret\n"
	"\t.size vec_entry_fn, . - vec_entry_fn\n"

	/* vec_ret_fn(tbl): returns with v0-v31 from tbl. */
	"\t.globl vec_ret_fn\n"
	"\t.type vec_ret_fn, %function\n"
	"\t.p2align 4\n"
	"vec_ret_fn:\n"
	"\tmov x9, x0\n"
	"\tVEC_LOAD\n"
	"\tret\n"
	"\t.size vec_ret_fn, . - vec_ret_fn\n"

	/* vec_call_ret(tbl, fn, after): fn(tbl), then v0-v31 into after. */
	"\t.globl vec_call_ret\n"
	"\t.type vec_call_ret, %function\n"
	"\t.p2align 4\n"
	"vec_call_ret:\n"
	"\tVEC_SAVE\n"
	"\tstr x19, [sp, #-16]!\n"
	"\tmov x19, x2\n"
	"\tblr x1\n"
	"\tst1 {v0.16b, v1.16b, v2.16b, v3.16b}, [x19], #64\n"
	"\tst1 {v4.16b, v5.16b, v6.16b, v7.16b}, [x19], #64\n"
	"\tst1 {v8.16b, v9.16b, v10.16b, v11.16b}, [x19], #64\n"
	"\tst1 {v12.16b, v13.16b, v14.16b, v15.16b}, [x19], #64\n"
	"\tst1 {v16.16b, v17.16b, v18.16b, v19.16b}, [x19], #64\n"
	"\tst1 {v20.16b, v21.16b, v22.16b, v23.16b}, [x19], #64\n"
	"\tst1 {v24.16b, v25.16b, v26.16b, v27.16b}, [x19], #64\n"
	"\tst1 {v28.16b, v29.16b, v30.16b, v31.16b}, [x19], #64\n"
	"\tldr x19, [sp], #16\n"
	"\tVEC_RESTORE\n"
	"\tret\n"
	"\t.size vec_call_ret, . - vec_call_ret\n"

	/* vec_mid_fn(tbl, after): v0-v31 from tbl, a MOVZ (run out of
	 * line), an ADR (simulated), then v0-v31 into after. */
	"\t.globl vec_mid_fn, vec_mid_probe, vec_mid_sim\n"
	"\t.type vec_mid_fn, %function\n"
	"\t.p2align 4\n"
	"vec_mid_fn:\n"
	"\tVEC_SAVE\n"
	"\tVEC_LOAD\n"
	"vec_mid_probe:\n"
	"\tmovz x9, #0x1234\n"
	"vec_mid_sim:\n"
	"\tadr x10, .\n"
	"\tst1 {v0.16b, v1.16b, v2.16b, v3.16b}, [x1], #64\n"
	"\tst1 {v4.16b, v5.16b, v6.16b, v7.16b}, [x1], #64\n"
	"\tst1 {v8.16b, v9.16b, v10.16b, v11.16b}, [x1], #64\n"
	"\tst1 {v12.16b, v13.16b, v14.16b, v15.16b}, [x1], #64\n"
	"\tst1 {v16.16b, v17.16b, v18.16b, v19.16b}, [x1], #64\n"
	"\tst1 {v20.16b, v21.16b, v22.16b, v23.16b}, [x1], #64\n"
	"\tst1 {v24.16b, v25.16b, v26.16b, v27.16b}, [x1], #64\n"
	"\tst1 {v28.16b, v29.16b, v30.16b, v31.16b}, [x1], #64\n"
	"\tVEC_RESTORE\n"
	"\tret\n"
	"\t.size vec_mid_fn, . - vec_mid_fn\n"
	".popsection\n");

/* What a handler read: per register the return value and the bytes. */
static struct {
	int hits;
	int rc[NVREG];
	unsigned char got[NVREG][16];
	unsigned char low4[4];
	int rc_low4;
	int rc_copy;		/* a copy of the hit's pt_regs */
	int rc_bad_n, rc_len0, rc_len17, rc_null;
} seen;

static void fill_pattern(unsigned int seed)
{
	for (int i = 0; i < NVREG; i++) {
		double d = (double)i + 0.25 + seed;

		memcpy(vec_in[i], &d, sizeof(d));
		for (int b = 8; b < 16; b++)
			vec_in[i][b] = (unsigned char)(0xa0 + i + 16 * b + seed);
	}
}

/* Every V register overwritten: a read of the live registers would see
 * this, not the program's values. */
static void clobber_vregs(void)
{
	__asm__ volatile("movi v0.16b, #0xee\n"
			 ".irp i,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31\n"
			 "\tmov v\\i\\().16b, v0.16b\n"
			 ".endr\n"
			 : : : "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9",
			   "v10", "v11", "v12", "v13", "v14", "v15", "v16", "v17", "v18",
			   "v19", "v20", "v21", "v22", "v23", "v24", "v25", "v26", "v27",
			   "v28", "v29", "v30", "v31");
}

static void read_all(struct pt_regs *regs)
{
	struct pt_regs copy = *regs;
	unsigned char b[16];

	clobber_vregs();
	for (unsigned int i = 0; i < NVREG; i++)
		seen.rc[i] = kprobes_vector_reg(regs, i, seen.got[i], 16);
	seen.rc_low4 = kprobes_vector_reg(regs, 31, seen.low4, 4);
	seen.rc_copy = kprobes_vector_reg(&copy, 0, b, 16);
	seen.rc_bad_n = kprobes_vector_reg(regs, NVREG, b, 16);
	seen.rc_len0 = kprobes_vector_reg(regs, 0, b, 0);
	seen.rc_len17 = kprobes_vector_reg(regs, 0, b, 17);
	seen.rc_null = kprobes_vector_reg(regs, 0, NULL, 8);
	seen.hits++;
}

static int pre_read(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	read_all(regs);
	return 0;
}

static void post_read(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
	(void)p;
	(void)flags;
	read_all(regs);
}

static void setup_probe(struct kprobe *kp, const void *addr, bool post)
{
	memset(kp, 0, sizeof(*kp));
	memset(&seen, 0, sizeof(seen));
	kp->addr = (kprobe_opcode_t *)addr;
	if (post)
		kp->post_handler = post_read;
	else
		kp->pre_handler = pre_read;
	kp->flags = KPROBE_FLAG_VECTOR_REGS;
	cr_assert_eq(register_kprobe(kp), 0);
}

static void expect_values(const char *where)
{
	cr_assert_eq(seen.hits, 1, "%s: %d hits", where, seen.hits);
	for (int i = 0; i < NVREG; i++) {
		cr_expect_eq(seen.rc[i], 0, "%s: v%d rc %d", where, i, seen.rc[i]);
		cr_expect_arr_eq(seen.got[i], vec_in[i], 16, "%s: v%d differs", where, i);
	}
	cr_expect_eq(seen.rc_low4, 0, "%s", where);
	cr_expect_arr_eq(seen.low4, vec_in[31], 4, "%s: the low 4 bytes of v31", where);
	cr_expect_eq(seen.rc_copy, -ENOENT, "%s: a copy of pt_regs: %d", where, seen.rc_copy);
	cr_expect_eq(seen.rc_bad_n, -EINVAL, "%s", where);
	cr_expect_eq(seen.rc_len0, -EINVAL, "%s", where);
	cr_expect_eq(seen.rc_len17, -EINVAL, "%s", where);
	cr_expect_eq(seen.rc_null, -EINVAL, "%s", where);
}

Test(a64_vecregs, breakpoint_entry)
{
	struct kprobe kp;

	setup_probe(&kp, (const void *)vec_entry_fn, false);
	fill_pattern(1);
	vec_call(vec_in, vec_entry_fn);
	expect_values("function entry");
	unregister_kprobe(&kp);
}

Test(a64_vecregs, breakpoint_mid)
{
	struct kprobe kp;

	setup_probe(&kp, vec_mid_probe, false);
	fill_pattern(2);
	vec_mid_fn(vec_in, vec_after);
	expect_values("mid-function");
	cr_expect_arr_eq(vec_after, vec_in, sizeof(vec_in), "registers changed by the hit");
	unregister_kprobe(&kp);
}

/* After the instruction ran in its slot: the post handler's frame is the
 * slot's exit BRK's. */
Test(a64_vecregs, post_out_of_line)
{
	struct kprobe kp;

	setup_probe(&kp, vec_mid_probe, true);
	fill_pattern(3);
	vec_mid_fn(vec_in, vec_after);
	expect_values("post handler, out of line");
	cr_expect_arr_eq(vec_after, vec_in, sizeof(vec_in), "registers changed by the hit");
	unregister_kprobe(&kp);
}

/* After a simulated instruction (ADR): the post handlers run in the
 * probe's own frame. */
Test(a64_vecregs, post_simulated)
{
	struct kprobe kp;

	setup_probe(&kp, vec_mid_sim, true);
	fill_pattern(4);
	vec_mid_fn(vec_in, vec_after);
	expect_values("post handler, simulated");
	cr_expect_arr_eq(vec_after, vec_in, sizeof(vec_in), "registers changed by the hit");
	unregister_kprobe(&kp);
}

/* A probe without the flag answers from the breakpoint path all the same,
 * hit after hit. */
Test(a64_vecregs, without_the_flag)
{
	struct kprobe kp;

	memset(&kp, 0, sizeof(kp));
	memset(&seen, 0, sizeof(seen));
	kp.addr = (kprobe_opcode_t *)vec_mid_probe;
	kp.pre_handler = pre_read;
	cr_assert_eq(register_kprobe(&kp), 0);
	fill_pattern(5);
	vec_mid_fn(vec_in, vec_after);
	expect_values("no flag");
	memset(&seen, 0, sizeof(seen));
	fill_pattern(6);
	vec_mid_fn(vec_in, vec_after);
	expect_values("no flag, second hit");
	unregister_kprobe(&kp);
}

/* Return handlers: without KPROBE_FLAG_VECTOR_REGS the hit keeps no
 * vector state (-ENOENT); with it the handler reads v0..v31 as the
 * function returned them, and the caller gets them whatever the handler
 * did to its own. */
static struct {
	int hits;
	int rc[NVREG];
	unsigned char got[NVREG][16];
} seen_ret;

static int ret_read(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	clobber_vregs();
	for (unsigned int i = 0; i < NVREG; i++)
		seen_ret.rc[i] = kprobes_vector_reg(regs, i, seen_ret.got[i], 16);
	seen_ret.hits++;
	return 0;
}

static void fill_ret_pattern(unsigned int seed)
{
	for (int i = 0; i < NVREG; i++) {
		double d = -(double)i - 0.5 - seed;

		memcpy(vec_ret[i], &d, sizeof(d));
		for (int b = 8; b < 16; b++)
			vec_ret[i][b] = (unsigned char)(0x31 + 3 * i + b + seed);
	}
}

static void return_probe_reads(bool flag, bool optimize, unsigned int seed)
{
	struct kretprobe rp;

	memset(&rp, 0, sizeof(rp));
	memset(&seen_ret, 0, sizeof(seen_ret));
	kprobes_set_optimization(optimize);
	rp.kp.addr = (kprobe_opcode_t *)vec_ret_fn;
	rp.kp.flags = flag ? KPROBE_FLAG_VECTOR_REGS : 0;
	rp.handler = ret_read;
	rp.maxactive = 4;
	cr_assert_eq(register_kretprobe(&rp), 0);
	if (optimize) {
		cr_assert_eq(kprobes_optimize_now(), 0);
		cr_assert(__atomic_load_n(&rp.kp.flags, __ATOMIC_ACQUIRE) & KPROBE_FLAG_OPTIMIZED,
			  "the entry was not optimized");
	}
	for (int round = 0; round < 2; round++) {
		fill_ret_pattern(seed + round);
		memset(&seen_ret, 0, sizeof(seen_ret));
		memset(vec_ret_after, 0, sizeof(vec_ret_after));
		vec_call_ret(vec_ret, vec_ret_fn, vec_ret_after);
		cr_assert_eq(seen_ret.hits, 1, "%d return hits", seen_ret.hits);
		for (int i = 0; i < NVREG; i++) {
			if (!flag) {
				cr_expect_eq(seen_ret.rc[i], -ENOENT, "v%d rc %d", i, seen_ret.rc[i]);
				continue;
			}
			cr_expect_eq(seen_ret.rc[i], 0, "return: v%d rc %d", i, seen_ret.rc[i]);
			cr_expect_arr_eq(seen_ret.got[i], vec_ret[i], 16, "return: v%d differs", i);
		}
		cr_expect_arr_eq(vec_ret_after, vec_ret, sizeof(vec_ret),
				 "the caller's registers changed by the handler");
	}
	unregister_kretprobe(&rp);
	kprobes_set_optimization(true);
}

Test(a64_vecregs, return_handler_without_flag)
{
	return_probe_reads(false, false, 7);
}

Test(a64_vecregs, return_handler_breakpoint_entry)
{
	return_probe_reads(true, false, 11);
}

Test(a64_vecregs, return_handler_optimized_entry)
{
	return_probe_reads(true, true, 21);
}

/* Outside any handler there is no hit. */
Test(a64_vecregs, outside_a_hit)
{
	struct pt_regs regs;
	unsigned char b[16];

	memset(&regs, 0, sizeof(regs));
	cr_expect_eq(kprobes_vector_reg(&regs, 0, b, 16), -EINVAL);
	cr_expect_eq(kprobes_vector_reg(NULL, 0, b, 16), -EINVAL);
	cr_expect_eq(kprobes_vector_reg(&regs, 99, b, 16), -EINVAL);
}
