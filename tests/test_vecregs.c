/*
 * kprobes_vector_reg(): a handler reads the xmm registers the probed code
 * had at the probed instruction, on the breakpoint path (pre and post
 * handlers), at a jump-optimized function entry and at a mid-function
 * detour; bad arguments and calls from outside a hit.
 *
 * The code under test is assembly that loads every xmm register from a
 * table and then reaches the probe, so the expected values are known; the
 * handler overwrites every xmm register before it reads, so a value can
 * only come from what the hit kept.
 */
#include "testutil.h"

#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "arch/x86_64/regs.h"
#include "os/linux/threads.h"


TestSuite(vecregs, .timeout = 30);

#define NXMM 16

/* xmm i = vec_in[i] (16 bytes each). */
static unsigned char vec_in[NXMM][16] __attribute__((aligned(16), used));
/* What the mid-function code finds in its registers after the probe. */
static unsigned char vec_after[NXMM][16] __attribute__((aligned(16), used));

void vec_call(const void *tbl, void (*fn)(void));
void vec_entry_fn(void);
void vec_mid_fn(const void *tbl, void *after);
extern const char vec_mid_probe[];

__asm__(
	".pushsection .text\n"
	/* vec_call(tbl, fn): xmm0-15 from tbl, then fn() with the stack as
	 * the ABI has it at a call. */
	"\t.globl vec_call\n"
	"\t.type vec_call, @function\n"
	"\t.p2align 4, 0xcc\n"
	"vec_call:\n"
	"\tsub $8, %rsp\n"
	".irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
	"\tmovdqu 16*\\i(%rdi), %xmm\\i\n"
	".endr\n"
	"\tcall *%rsi\n"
	"\tadd $8, %rsp\n"
	"\tret\n"
	"\t.size vec_call, . - vec_call\n"

	/* An entry the optimizer takes (as test_optimize's opt_normal). */
	"\t.globl vec_entry_fn\n"
	"\t.type vec_entry_fn, @function\n"
	"\t.p2align 4, 0xcc\n"
	"vec_entry_fn:\n"
	"\tpush %rbp\n"
	"\tmov %rsp, %rbp\n"
	"\tlea 1(%rdi,%rsi), %rax\n"
	"\tadd $0x100, %rax\n"
	"\tpop %rbp\n"
	"\tret\n"
	"\t.size vec_entry_fn, . - vec_entry_fn\n"

	/* vec_mid_fn(tbl, after): xmm0-15 from tbl, a 10-byte instruction
	 * (the probe), then xmm0-15 into after. */
	"\t.globl vec_mid_fn, vec_mid_probe\n"
	"\t.type vec_mid_fn, @function\n"
	"\t.p2align 4, 0xcc\n"
	"vec_mid_fn:\n"
	"\tpush %rbx\n"
	".irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
	"\tmovdqu 16*\\i(%rdi), %xmm\\i\n"
	".endr\n"
	"vec_mid_probe:\n"
	"\tmovabs $0x1122334455667788, %r11\n"
	".irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
	"\tmovdqu %xmm\\i, 16*\\i(%rsi)\n"
	".endr\n"
	"\tpop %rbx\n"
	"\tret\n"
	"\t.size vec_mid_fn, . - vec_mid_fn\n"
	".popsection\n");

/* xmm i = vec_ret[i] when vec_ret_fn returns. */
static unsigned char vec_ret[NXMM][16] __attribute__((aligned(16), used));
void vec_ret_fn(void);

__asm__(
	".pushsection .text\n"
	/* An entry the optimizer takes; it returns with xmm0-15 from
	 * vec_ret (xmm0: a double return value). */
	"\t.globl vec_ret_fn\n"
	"\t.type vec_ret_fn, @function\n"
	"\t.p2align 4, 0xcc\n"
	"vec_ret_fn:\n"
	"\tpush %rbp\n"
	"\tmov %rsp, %rbp\n"
	"\tlea vec_ret(%rip), %rax\n"
	".irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
	"\tmovdqu 16*\\i(%rax), %xmm\\i\n"
	".endr\n"
	"\tpop %rbp\n"
	"\tret\n"
	"\t.size vec_ret_fn, . - vec_ret_fn\n"
	".popsection\n");

/* What a handler read: per register the return value and the bytes. */
static struct {
	int hits;
	int rc[NXMM];
	unsigned char got[NXMM][16];
	int rc_copy;		/* a copy of the hit's pt_regs */
	int rc_bad_n, rc_len0, rc_len17, rc_null;
} seen;

static void fill_pattern(unsigned int seed)
{
	for (int i = 0; i < NXMM; i++) {
		double d = (double)i + 0.25 + seed;

		memcpy(vec_in[i], &d, sizeof(d));
		for (int b = 8; b < 16; b++)
			vec_in[i][b] = (unsigned char)(0xa0 + i + 16 * b + seed);
	}
}

/* Every xmm register overwritten: a read of the live registers would see
 * this, not the program's values. */
static void clobber_xmm(void)
{
	__asm__ volatile("pcmpeqd %%xmm0, %%xmm0\n"
			 ".irp i,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
			 "\tmovdqa %%xmm0, %%xmm\\i\n"
			 ".endr\n"
			 : : : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6",
			   "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",
			   "xmm14", "xmm15");
}

static void read_all(struct pt_regs *regs)
{
	struct pt_regs copy = *regs;
	unsigned char b[16];

	clobber_xmm();
	for (unsigned int i = 0; i < NXMM; i++)
		seen.rc[i] = kprobes_vector_reg(regs, i, seen.got[i], 16);
	seen.rc_copy = kprobes_vector_reg(&copy, 0, b, 16);
	seen.rc_bad_n = kprobes_vector_reg(regs, NXMM, b, 16);
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

static bool wait_optimized(const struct kprobe *p)
{
	for (int i = 0; i < 4000; i++) {
		if (__atomic_load_n(&p->flags, __ATOMIC_ACQUIRE) & KPROBE_FLAG_OPTIMIZED)
			return true;
		usleep(500);
	}
	return false;
}

/* Registers 0..nkept-1 hold the pattern; the rest answer -ENOENT. */
static void expect_values(const char *where, int nkept)
{
	cr_assert_eq(seen.hits, 1, "%s: %d hits", where, seen.hits);
	for (int i = 0; i < NXMM; i++) {
		if (i >= nkept) {
			cr_expect_eq(seen.rc[i], -ENOENT, "%s: xmm%d rc %d", where, i, seen.rc[i]);
			continue;
		}
		cr_expect_eq(seen.rc[i], 0, "%s: xmm%d rc %d", where, i, seen.rc[i]);
		cr_expect_arr_eq(seen.got[i], vec_in[i], 16, "%s: xmm%d differs", where, i);
	}
	cr_expect_eq(seen.rc_copy, -ENOENT, "%s: a copy of pt_regs: %d", where, seen.rc_copy);
	cr_expect_eq(seen.rc_bad_n, -EINVAL, "%s", where);
	cr_expect_eq(seen.rc_len0, -EINVAL, "%s", where);
	cr_expect_eq(seen.rc_len17, -EINVAL, "%s", where);
	cr_expect_eq(seen.rc_null, -EINVAL, "%s", where);
}

Test(vecregs, breakpoint_entry)
{
	struct kprobe kp;

	kprobes_set_optimization(false);
	setup_probe(&kp, (const void *)vec_entry_fn, false);
	fill_pattern(1);
	vec_call(vec_in, vec_entry_fn);
	expect_values("breakpoint entry", NXMM);
	unregister_kprobe(&kp);
}

Test(vecregs, breakpoint_post)
{
	struct kprobe kp;

	kprobes_set_optimization(false);
	setup_probe(&kp, vec_mid_probe, true);
	fill_pattern(2);
	vec_mid_fn(vec_in, vec_after);
	/* movabs changes no vector register: the post handler sees them too. */
	expect_values("post handler", NXMM);
	cr_expect_arr_eq(vec_after, vec_in, sizeof(vec_in));
	unregister_kprobe(&kp);
}

Test(vecregs, breakpoint_mid)
{
	struct kprobe kp;

	kprobes_set_optimization(false);
	setup_probe(&kp, vec_mid_probe, false);
	fill_pattern(3);
	vec_mid_fn(vec_in, vec_after);
	expect_values("breakpoint mid-function", NXMM);
	cr_expect_arr_eq(vec_after, vec_in, sizeof(vec_in), "registers changed by the hit");
	unregister_kprobe(&kp);
}

/* An entry detour keeps the argument registers xmm0-7 only. */
Test(vecregs, optimized_entry)
{
	struct kprobe kp;

	kprobes_set_optimization(true);
	setup_probe(&kp, (const void *)vec_entry_fn, false);
	cr_assert(wait_optimized(&kp), "entry not optimized");
	fill_pattern(4);
	vec_call(vec_in, vec_entry_fn);
	expect_values("optimized entry", 8);
	memset(&seen, 0, sizeof(seen));
	fill_pattern(8);
	vec_call(vec_in, vec_entry_fn);
	expect_values("optimized entry, second hit", 8);
	unregister_kprobe(&kp);
}

Test(vecregs, optimized_mid)
{
	struct kprobe kp;

	kprobes_set_optimization(true);
	setup_probe(&kp, vec_mid_probe, false);
	cr_assert(wait_optimized(&kp), "mid-function point not optimized");
	fill_pattern(5);
	vec_mid_fn(vec_in, vec_after);
	expect_values("mid-function detour", NXMM);
	cr_expect_arr_eq(vec_after, vec_in, sizeof(vec_in), "registers changed by the detour");
	/* A second hit, on the detour's fast path now that the thread has
	 * its record. */
	memset(&seen, 0, sizeof(seen));
	fill_pattern(6);
	vec_mid_fn(vec_in, vec_after);
	expect_values("second hit", NXMM);
	unregister_kprobe(&kp);
}

/* A probe registered with the flag keeps it; one without it answers
 * from the breakpoint path all the same. */
Test(vecregs, flag_kept)
{
	struct kprobe kp;

	kprobes_set_optimization(false);
	setup_probe(&kp, vec_mid_probe, false);
	cr_expect(kp.flags & KPROBE_FLAG_VECTOR_REGS);
	unregister_kprobe(&kp);
	memset(&kp, 0, sizeof(kp));
	memset(&seen, 0, sizeof(seen));
	kp.addr = (kprobe_opcode_t *)vec_mid_probe;
	kp.pre_handler = pre_read;
	cr_assert_eq(register_kprobe(&kp), 0);
	fill_pattern(7);
	vec_mid_fn(vec_in, vec_after);
	expect_values("breakpoint, no flag", NXMM);
	unregister_kprobe(&kp);
}

/* Outside any handler there is no hit. */
Test(vecregs, outside_a_hit)
{
	struct pt_regs regs;
	unsigned char b[16];

	memset(&regs, 0, sizeof(regs));
	cr_expect_eq(kprobes_vector_reg(&regs, 0, b, 16), -EINVAL);
	cr_expect_eq(kprobes_vector_reg(NULL, 0, b, 16), -EINVAL);
	cr_expect_eq(kprobes_vector_reg(&regs, 99, b, 16), -EINVAL);
}

/* Every layout the hit paths note, read through a note made by hand (a
 * machine takes only one of the entry widths, and xsave or fxsave). */
static void note(struct kp_thread *t, const struct pt_regs *regs, const void *area,
		 unsigned int layout)
{
	t->vec_area = area;
	t->vec_layout = layout;
	t->vec_regs = regs;
}

Test(vecregs, layouts)
{
	static unsigned char img[1024] __attribute__((aligned(64)));
	struct kp_thread *t = kp_thread_self();
	struct pt_regs regs;
	unsigned char b[16];
	uint64_t bv = KP_VEC_XSTATE_SSE;

	cr_assert_not_null(t);
	memset(&regs, 0, sizeof(regs));
	for (unsigned int i = 0; i < sizeof(img); i++)
		img[i] = (unsigned char)(i * 7 + 1);
	for (unsigned int stride = 16; stride <= 64; stride *= 2) {
		note(t, &regs, img, stride);
		for (unsigned int n = 0; n < 8; n++) {
			cr_assert_eq(kprobes_vector_reg(&regs, n, b, 16), 0);
			cr_expect_arr_eq(b, img + n * stride, 16, "stride %u xmm%u", stride, n);
		}
		cr_expect_eq(kprobes_vector_reg(&regs, 8, b, 16), -ENOENT, "stride %u", stride);
	}
	note(t, &regs, img, KP_VEC_FXSAVE);
	for (unsigned int n = 0; n < NXMM; n++) {
		cr_assert_eq(kprobes_vector_reg(&regs, n, b, 4), 0);
		cr_expect_arr_eq(b, img + KP_VEC_FX_XMM + 16 * n, 4, "fxsave xmm%u", n);
	}
	memcpy(img + KP_VEC_XSTATE_BV, &bv, sizeof(bv));
	note(t, &regs, img, KP_VEC_XSAVE);
	cr_assert_eq(kprobes_vector_reg(&regs, 15, b, 16), 0);
	cr_expect_arr_eq(b, img + KP_VEC_FX_XMM + 16 * 15, 16, "xsave xmm15");
	/* XSTATE_BV says the registers are in their initial state. */
	bv = 0;
	memcpy(img + KP_VEC_XSTATE_BV, &bv, sizeof(bv));
	memset(b, 0x55, sizeof(b));
	cr_assert_eq(kprobes_vector_reg(&regs, 3, b, 16), 0);
	for (int i = 0; i < 16; i++)
		cr_expect_eq(b[i], 0, "initial state: byte %d is %#x", i, b[i]);
	t->vec_regs = NULL;
	cr_expect_eq(kprobes_vector_reg(&regs, 0, b, 16), -EINVAL);
}

/* ---- return probes: the registers at the return ---- */

static struct {
	int hits;
	int rc[NXMM];
	unsigned char got[NXMM][16];
} seen_ret;

static int ret_read(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	clobber_xmm();
	for (unsigned int i = 0; i < NXMM; i++)
		seen_ret.rc[i] = kprobes_vector_reg(regs, i, seen_ret.got[i], 16);
	seen_ret.hits++;
	return 0;
}

static int entry_read(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	read_all(regs);
	return 0;
}

static void fill_ret_pattern(unsigned int seed)
{
	for (int i = 0; i < NXMM; i++) {
		double d = -(double)i - 0.5 - seed;

		memcpy(vec_ret[i], &d, sizeof(d));
		for (int b = 8; b < 16; b++)
			vec_ret[i][b] = (unsigned char)(0x31 + 3 * i + b + seed);
	}
}

/* With the flag, the return handler reads every xmm register as the
 * function returned (xmm0: its double return value), and the entry
 * handler the arguments; the program's registers after the return are
 * the function's, whatever the handler did to them.  Through the
 * breakpoint entry and the optimized one. */
static void return_probe_reads(bool optimize, unsigned int seed)
{
	struct kretprobe rp;
	unsigned char after[NXMM][16];

	memset(&rp, 0, sizeof(rp));
	memset(&seen, 0, sizeof(seen));
	memset(&seen_ret, 0, sizeof(seen_ret));
	kprobes_set_optimization(optimize);
	rp.kp.addr = (kprobe_opcode_t *)vec_ret_fn;
	rp.kp.flags = KPROBE_FLAG_VECTOR_REGS;
	rp.handler = ret_read;
	rp.entry_handler = entry_read;
	rp.maxactive = 4;
	cr_assert_eq(register_kretprobe(&rp), 0);
	if (optimize)
		cr_assert(wait_optimized(&rp.kp), "entry not optimized");
	for (int round = 0; round < 2; round++) {
		fill_pattern(seed + round);
		fill_ret_pattern(seed + round);
		memset(&seen, 0, sizeof(seen));
		memset(&seen_ret, 0, sizeof(seen_ret));
		vec_call(vec_in, vec_ret_fn);
		__asm__ volatile(".irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
				 "\tmovdqu %%xmm\\i, 16*\\i(%0)\n"
				 ".endr\n" : : "r"(after) : "memory");
		expect_values(optimize ? "optimized entry of a return probe" :
					 "breakpoint entry of a return probe",
			      optimize ? 8 : NXMM);
		cr_assert_eq(seen_ret.hits, 1, "%d return hits", seen_ret.hits);
		for (int i = 0; i < NXMM; i++) {
			cr_expect_eq(seen_ret.rc[i], 0, "return: xmm%d rc %d", i, seen_ret.rc[i]);
			cr_expect_arr_eq(seen_ret.got[i], vec_ret[i], 16, "return: xmm%d differs", i);
		}
		cr_expect_arr_eq(after, vec_ret, sizeof(after), "registers changed by the handler");
	}
	unregister_kretprobe(&rp);
}

Test(vecregs, return_breakpoint_entry)
{
	return_probe_reads(false, 11);
}

Test(vecregs, return_optimized_entry)
{
	return_probe_reads(true, 21);
}

/* Without the flag the return path keeps no vector state (its fast path
 * saves none): -ENOENT, as documented. */
Test(vecregs, return_without_flag)
{
	struct kretprobe rp;

	memset(&rp, 0, sizeof(rp));
	memset(&seen_ret, 0, sizeof(seen_ret));
	kprobes_set_optimization(false);
	rp.kp.addr = (kprobe_opcode_t *)vec_ret_fn;
	rp.handler = ret_read;
	rp.maxactive = 4;
	cr_assert_eq(register_kretprobe(&rp), 0);
	fill_ret_pattern(3);
	vec_call(vec_in, vec_ret_fn);
	cr_assert_eq(seen_ret.hits, 1);
	for (int i = 0; i < NXMM; i++)
		cr_expect_eq(seen_ret.rc[i], -ENOENT, "xmm%d rc %d", i, seen_ret.rc[i]);
	unregister_kretprobe(&rp);
}
