/* Jprobes (classic Kprobes, issue 3): the entry function sees every
 * argument (integer and vector registers, the stack, a struct by value),
 * may change its own copies and clobber registers without the probed
 * function noticing; one jprobe per function; entry-only; the list; enable/
 * disable; probes hit inside the entry function are missed; coexistence
 * with kprobes and kretprobes on the same function; many threads. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "testutil.h"

TestSuite(jprobe, .timeout = 10);

/* ---- the probed function: 6 integer registers, xmm0-7, then the stack:
 * d8 d9 i6 i7 s f10 ---- */

struct sbig {
	long a, b, c;		/* 24 bytes: passed in memory */
};

#define NARGS 21

struct args {
	long i[8];
	double d[10];
	struct sbig s;
	float f10;
};

static struct args seen_real, seen_entry;

/* Overwrites the n stack-passed argument slots of the calling entry
 * function, wherever the compiler keeps its own copies (frame pointers:
 * the first stack argument is at rbp + 16). */
#define CLOBBER_STACK_ARGS(n)							\
	do {									\
		volatile long *stk_ = (volatile long *)((char *)__builtin_frame_address(0) + 16); \
		for (int k_ = 0; k_ < (n); k_++)				\
			stk_[k_] = 0x5a5a5a5a5a5a5a5aL;			\
	} while (0)

static void record(struct args *o, long i0, long i1, long i2, long i3, long i4, long i5,
		   double d0, double d1, double d2, double d3, double d4, double d5,
		   double d6, double d7, double d8, double d9, long i6, long i7,
		   struct sbig s, float f10)
{
	o->i[0] = i0; o->i[1] = i1; o->i[2] = i2; o->i[3] = i3;
	o->i[4] = i4; o->i[5] = i5; o->i[6] = i6; o->i[7] = i7;
	o->d[0] = d0; o->d[1] = d1; o->d[2] = d2; o->d[3] = d3; o->d[4] = d4;
	o->d[5] = d5; o->d[6] = d6; o->d[7] = d7; o->d[8] = d8; o->d[9] = d9;
	o->s = s;
	o->f10 = f10;
}

static double checksum(const struct args *a)
{
	double r = 0;

	for (int k = 0; k < 8; k++)
		r += (double)a->i[k] * (k + 1);
	for (int k = 0; k < 10; k++)
		r += a->d[k] * (k + 11);
	return r + a->s.a * 31.0 + a->s.b * 37.0 + a->s.c * 41.0 + a->f10 * 43.0;
}

double jp_target(long i0, long i1, long i2, long i3, long i4, long i5,
		 double d0, double d1, double d2, double d3, double d4, double d5,
		 double d6, double d7, double d8, double d9, long i6, long i7,
		 struct sbig s, float f10);
TEST_FN double jp_target(long i0, long i1, long i2, long i3, long i4, long i5,
			 double d0, double d1, double d2, double d3, double d4, double d5,
			 double d6, double d7, double d8, double d9, long i6, long i7,
			 struct sbig s, float f10)
{
	struct args a;

	record(&a, i0, i1, i2, i3, i4, i5, d0, d1, d2, d3, d4, d5, d6, d7, d8, d9,
	       i6, i7, s, f10);
	seen_real = a;
	return checksum(&a);
}

typedef double (*target_fn)(long, long, long, long, long, long, double, double, double,
			    double, double, double, double, double, double, double, long,
			    long, struct sbig, float);
static target_fn volatile fp_target = jp_target;

static void make_args(struct args *a, long base)
{
	for (int k = 0; k < 8; k++)
		a->i[k] = base * 100 + k + 1;
	for (int k = 0; k < 10; k++)
		a->d[k] = (double)base + (k + 1) * 0.125;
	a->s.a = base * 7 + 1;
	a->s.b = -base * 7 - 2;
	a->s.c = 0x1234567800000000L + base;
	a->f10 = (float)base + 0.5f;
}

static double call_target(const struct args *a)
{
	return fp_target(a->i[0], a->i[1], a->i[2], a->i[3], a->i[4], a->i[5],
			 a->d[0], a->d[1], a->d[2], a->d[3], a->d[4], a->d[5], a->d[6],
			 a->d[7], a->d[8], a->d[9], a->i[6], a->i[7], a->s, a->f10);
}

static bool args_eq(const struct args *x, const struct args *y)
{
	return memcmp(x->i, y->i, sizeof(x->i)) == 0 && memcmp(x->d, y->d, sizeof(x->d)) == 0 &&
	       memcmp(&x->s, &y->s, sizeof(x->s)) == 0 && x->f10 == y->f10;
}

static void expect_args(const struct args *got, const struct args *want, const char *who)
{
	for (int k = 0; k < 8; k++)
		cr_expect_eq(got->i[k], want->i[k], "%s: i%d %ld, want %ld", who, k,
			     got->i[k], want->i[k]);
	for (int k = 0; k < 10; k++)
		cr_expect_eq(got->d[k], want->d[k], "%s: d%d %g, want %g", who, k,
			     got->d[k], want->d[k]);
	cr_expect_eq(got->s.a, want->s.a, "%s: s.a", who);
	cr_expect_eq(got->s.b, want->s.b, "%s: s.b", who);
	cr_expect_eq(got->s.c, want->s.c, "%s: s.c", who);
	cr_expect_eq(got->f10, want->f10, "%s: f10 %g", who, got->f10);
}

static long entry_calls;
static char clob[16384];

/* Records what it sees, then changes every argument it has, including
 * those on the stack, and clobbers the vector registers. */
static double jp_entry(long i0, long i1, long i2, long i3, long i4, long i5, double d0,
		       double d1, double d2, double d3, double d4, double d5, double d6,
		       double d7, double d8, double d9, long i6, long i7, struct sbig s,
		       float f10)
{
	volatile double x = 1.0;

	record(&seen_entry, i0, i1, i2, i3, i4, i5, d0, d1, d2, d3, d4, d5, d6, d7, d8, d9,
	       i6, i7, s, f10);
	__atomic_fetch_add(&entry_calls, 1, __ATOMIC_RELAXED);
	/* the stack-passed arguments live in the caller's argument area */
	*(volatile double *)&d8 = -1.0;
	*(volatile double *)&d9 = -2.0;
	*(volatile long *)&i6 = -3;
	*(volatile long *)&i7 = -4;
	((volatile struct sbig *)&s)->a = -5;
	((volatile struct sbig *)&s)->c = -6;
	*(volatile float *)&f10 = -7.0f;
	*(volatile long *)&i0 = -8;
	*(volatile double *)&d0 = -9.0;
	CLOBBER_STACK_ARGS(8);	/* d8 d9 i6 i7 s(3) f10 */
	memset(clob, 0x5a, sizeof(clob));
	for (int k = 0; k < 40; k++)
		x = x * 1.5 + k;
	__asm__ volatile("xorps %%xmm0, %%xmm0\n\txorps %%xmm1, %%xmm1\n\t"
			 "xorps %%xmm7, %%xmm7\n\t"
			 "mov $0x77, %%rdi\n\tmov $0x77, %%rsi\n\tmov $0x77, %%r9"
			 : : : "xmm0", "xmm1", "xmm7", "rdi", "rsi", "r9", "memory");
	jprobe_return();
}

static struct jprobe jp_of(void *addr, void *entry)
{
	struct jprobe jp;

	memset(&jp, 0, sizeof(jp));
	jp.kp.addr = addr;
	jp.entry = entry;
	return jp;
}

Test(jprobe, entry_sees_all_arguments_and_changes_nothing)
{
	struct jprobe jp = jp_of((void *)jp_target, (void *)jp_entry);
	struct args a;
	double want;

	make_args(&a, 3);
	want = checksum(&a);
	cr_assert_eq(call_target(&a), want);
	cr_assert(args_eq(&seen_real, &a));
	cr_assert_eq(register_jprobe(&jp), 0);
	cr_expect_eq(jp.kp.addr, (void *)jp_target);
	for (long n = 1; n <= 20; n++) {
		make_args(&a, n);
		memset(&seen_entry, 0, sizeof(seen_entry));
		memset(&seen_real, 0, sizeof(seen_real));
		want = checksum(&a);
		cr_assert_eq(call_target(&a), want, "n=%ld", n);
		cr_assert(args_eq(&seen_entry, &a), "n=%ld: the entry saw other arguments", n);
		cr_assert(args_eq(&seen_real, &a), "n=%ld: the function saw other arguments", n);
	}
	make_args(&a, 21);
	call_target(&a);
	expect_args(&seen_entry, &a, "entry");
	expect_args(&seen_real, &a, "function");
	cr_expect_eq(entry_calls, 21);
	cr_expect_eq(jp.kp.nmissed, 0);
	unregister_jprobe(&jp);
	cr_assert_eq(call_target(&a), checksum(&a));
	cr_expect_eq(entry_calls, 21);
}

/* Integer-only, through regs_get_kernel_argument as well. */
long jp_ints(long a, long b, long c, long d, long e, long f, long g, long h, long i);
TEST_FN long jp_ints(long a, long b, long c, long d, long e, long f, long g, long h, long i)
{
	__asm__ volatile("" : "+r"(a), "+r"(i));
	return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h + 9 * i;
}

static long (*volatile fp_ints)(long, long, long, long, long, long, long, long, long) = jp_ints;
static long ints_seen[9];

static long jp_ints_entry(long a, long b, long c, long d, long e, long f, long g, long h,
			  long i)
{
	long v[9] = { a, b, c, d, e, f, g, h, i };

	memcpy(ints_seen, v, sizeof(v));
	*(volatile long *)&g = 0;
	*(volatile long *)&h = 0;
	*(volatile long *)&i = 0;
	CLOBBER_STACK_ARGS(3);	/* g h i */
	jprobe_return();
}

Test(jprobe, integer_arguments_on_registers_and_stack)
{
	struct jprobe jp = jp_of((void *)jp_ints, (void *)jp_ints_entry);

	cr_assert_eq(register_jprobe(&jp), 0);
	for (long n = 0; n < 10; n++) {
		long want = 0;

		for (long k = 0; k < 9; k++)
			want += (k + 1) * (n * 10 + k);
		cr_assert_eq(fp_ints(n * 10, n * 10 + 1, n * 10 + 2, n * 10 + 3, n * 10 + 4,
				     n * 10 + 5, n * 10 + 6, n * 10 + 7, n * 10 + 8), want);
		for (long k = 0; k < 9; k++)
			cr_assert_eq(ints_seen[k], n * 10 + k, "arg %ld", k);
	}
	unregister_jprobe(&jp);
}

/* Floats only: xmm0-7, and more on the stack. */
double jp_floats(double a, double b, double c, double d, double e, double f, double g,
		 double h, double i, double j);
TEST_FN double jp_floats(double a, double b, double c, double d, double e, double f, double g,
			 double h, double i, double j)
{
	return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h + 9 * i + 10 * j;
}

static double (*volatile fp_floats)(double, double, double, double, double, double, double,
				     double, double, double) = jp_floats;
static double floats_seen[10];

static double jp_floats_entry(double a, double b, double c, double d, double e, double f,
			      double g, double h, double i, double j)
{
	double v[10] = { a, b, c, d, e, f, g, h, i, j };
	volatile double x = 0;

	memcpy(floats_seen, v, sizeof(v));
	CLOBBER_STACK_ARGS(2);	/* i j */
	for (int k = 0; k < 100; k++)
		x += k * 0.5;
	__asm__ volatile("pxor %%xmm0, %%xmm0\n\tpxor %%xmm3, %%xmm3\n\tpxor %%xmm6, %%xmm6"
			 : : : "xmm0", "xmm3", "xmm6");
	jprobe_return();
}

Test(jprobe, float_arguments_survive_a_clobbering_entry)
{
	struct jprobe jp = jp_of((void *)jp_floats, (void *)jp_floats_entry);

	cr_assert_eq(register_jprobe(&jp), 0);
	for (int n = 0; n < 10; n++) {
		double v[10], want = 0;

		for (int k = 0; k < 10; k++) {
			v[k] = n + k * 0.25 + 0.125;
			want += (k + 1) * v[k];
		}
		cr_assert_eq(fp_floats(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8],
				       v[9]), want, "n=%d", n);
		for (int k = 0; k < 10; k++)
			cr_assert_eq(floats_seen[k], v[k], "n=%d arg %d", n, k);
	}
	unregister_jprobe(&jp);
}

/* ---- registration rules, list, enable/disable ---- */

/*   jp_asm_add+0 mov %rdi,%rax (3)  +3 add $1,%rax (4)  +7 ret */
__asm__(".text\n"
	".globl jp_asm_add\n.type jp_asm_add,@function\n"
	"jp_asm_add:\n"
	"\tmov %rdi, %rax\n"
	"\tadd $1, %rax\n"
	"\tret\n"
	".size jp_asm_add, .-jp_asm_add\n");
long jp_asm_add(long x);
static long (*volatile fp_asm_add)(long) = jp_asm_add;

static long add_entry_calls;
static long add_entry_arg;

static long jp_add_entry(long x)
{
	add_entry_calls++;
	add_entry_arg = x;
	jprobe_return();
}

static long jp_add_entry2(long x)
{
	jprobe_return();
}

Test(jprobe, second_jprobe_on_same_function_eexist)
{
	struct jprobe a = jp_of((void *)jp_asm_add, (void *)jp_add_entry);
	struct jprobe b = jp_of((void *)jp_asm_add, (void *)jp_add_entry2);
	struct jprobe c;

	cr_assert_eq(register_jprobe(&a), 0);
	cr_expect_eq(register_jprobe(&b), -EEXIST);
	memset(&c, 0, sizeof(c));
	c.kp.symbol_name = "jp_asm_add";
	c.entry = (void *)jp_add_entry2;
	cr_expect_eq(register_jprobe(&c), -EEXIST);
	cr_assert_eq(fp_asm_add(41), 42);
	cr_expect_eq(add_entry_calls, 1);
	cr_expect_eq(add_entry_arg, 41);
	unregister_jprobe(&a);
	/* free again */
	cr_assert_eq(register_jprobe(&b), 0);
	cr_assert_eq(fp_asm_add(1), 2);
	cr_expect_eq(add_entry_calls, 1);
	unregister_jprobe(&b);
}

Test(jprobe, einval_not_a_function_entry)
{
	struct jprobe a = jp_of((char *)jp_asm_add + 3, (void *)jp_add_entry);
	struct jprobe b;

	cr_expect_eq(register_jprobe(&a), -EINVAL);
	memset(&b, 0, sizeof(b));
	b.kp.symbol_name = "jp_asm_add";
	b.kp.offset = 3;
	b.entry = (void *)jp_add_entry;
	cr_expect_eq(register_jprobe(&b), -EINVAL);
	/* no entry function */
	b = jp_of((void *)jp_asm_add, NULL);
	cr_expect_eq(register_jprobe(&b), -EINVAL);
	/* re-register */
	a = jp_of((void *)jp_asm_add, (void *)jp_add_entry);
	cr_assert_eq(register_jprobe(&a), 0);
	cr_expect_eq(register_jprobe(&a), -EINVAL);
	cr_assert_eq(fp_asm_add(1), 2);
	cr_expect_eq(add_entry_calls, 1);
	unregister_jprobe(&a);
	cr_expect_eq(disable_jprobe(&a), -EINVAL);
	cr_expect_eq(enable_jprobe(&a), -EINVAL);
}

static char *list_str(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	cr_assert_not_null(f);
	cr_assert_eq(kprobes_list(f), 0);
	fclose(f);
	cr_assert_not_null(buf);
	return buf;
}

Test(jprobe, list_shows_j_line_and_disabled)
{
	struct jprobe a;
	char want[160];
	char *l;

	memset(&a, 0, sizeof(a));
	a.kp.symbol_name = "jp_asm_add";
	a.entry = (void *)jp_add_entry;
	cr_assert_eq(register_jprobe(&a), 0);
	snprintf(want, sizeof(want), "%016lx  j  jp_asm_add+0x0\n", (unsigned long)jp_asm_add);
	l = list_str();
	cr_expect_str_eq(l, want);
	free(l);
	cr_assert_eq(disable_jprobe(&a), 0);
	snprintf(want, sizeof(want), "%016lx  j  jp_asm_add+0x0  [DISABLED]\n",
		 (unsigned long)jp_asm_add);
	l = list_str();
	cr_expect_str_eq(l, want);
	free(l);
	unregister_jprobe(&a);
	l = list_str();
	cr_expect_str_eq(l, "");
	free(l);
}

Test(jprobe, disable_enable)
{
	struct jprobe a = jp_of((void *)jp_asm_add, (void *)jp_add_entry);

	cr_assert_eq(register_jprobe(&a), 0);
	cr_assert_eq(fp_asm_add(1), 2);
	cr_expect_eq(add_entry_calls, 1);
	cr_assert_eq(disable_jprobe(&a), 0);
	cr_expect(a.kp.flags & KPROBE_FLAG_DISABLED);
	for (long i = 0; i < 5; i++)
		cr_assert_eq(fp_asm_add(i), i + 1);
	cr_expect_eq(add_entry_calls, 1);
	cr_assert_eq(enable_jprobe(&a), 0);
	for (long i = 0; i < 5; i++)
		cr_assert_eq(fp_asm_add(i), i + 1);
	cr_expect_eq(add_entry_calls, 6);
	cr_expect_eq(add_entry_arg, 4);
	unregister_jprobe(&a);
	cr_assert_eq(fp_asm_add(1), 2);
	cr_expect_eq(add_entry_calls, 6);
}

/* ---- probes hit from the entry function ---- */

long jp_inner(long x);
TEST_FN long jp_inner(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 2;
}

static long (*volatile fp_inner)(long) = jp_inner;

long jp_outer(long x);
TEST_FN long jp_outer(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 100;
}

static long (*volatile fp_outer)(long) = jp_outer;
static long inner_from_entry;

static long jp_outer_entry(long x)
{
	inner_from_entry = fp_inner(x);
	jprobe_return();
}

static long inner_pre_hits;

static int inner_pre(struct kprobe *p, struct pt_regs *regs)
{
	inner_pre_hits++;
	return 0;
}

static struct kprobe inner_kp;

Test(jprobe, probe_hit_inside_entry_function_is_missed)
{
	struct jprobe jp = jp_of((void *)jp_outer, (void *)jp_outer_entry);

	inner_kp.addr = (void *)jp_inner;
	inner_kp.pre_handler = inner_pre;
	cr_assert_eq(register_kprobe(&inner_kp), 0);
	cr_assert_eq(register_jprobe(&jp), 0);
	for (long i = 0; i < 5; i++) {
		inner_from_entry = 0;
		cr_assert_eq(fp_outer(i), i + 100);
		cr_assert_eq(inner_from_entry, i * 2);
	}
	cr_expect_eq(inner_pre_hits, 0);
	cr_expect_eq(inner_kp.nmissed, 5, "nmissed %lu", inner_kp.nmissed);
	cr_expect_eq(jp.kp.nmissed, 0);
	/* outside the entry function it counts normally */
	cr_assert_eq(fp_inner(3), 6);
	cr_expect_eq(inner_pre_hits, 1);
	cr_expect_eq(inner_kp.nmissed, 5);
	unregister_jprobe(&jp);
	unregister_kprobe(&inner_kp);
}

/* What the entry function and the handlers it triggers write to memory
 * stays written, even in the caller's stack frame: only the probed
 * function's own state (registers, its arguments) is put back. */
long jp_ptr(long *out, long x);
TEST_FN long jp_ptr(long *out, long x)
{
	__asm__ volatile("" : "+r"(x));
	return *out + x;
}

static long (*volatile fp_ptr)(long *, long) = jp_ptr;

static long jp_ptr_entry(long *out, long x)
{
	*out = 1000;			/* through a pointer argument */
	inner_from_entry = fp_inner(x);	/* a missed hit: kp.nmissed++ */
	jprobe_return();
}

Test(jprobe, entry_side_effects_on_caller_stack_survive)
{
	struct jprobe jp = jp_of((void *)jp_ptr, (void *)jp_ptr_entry);
	struct kprobe kp;	/* on this, the caller's, stack */
	long local = 1;

	memset(&kp, 0, sizeof(kp));
	kp.addr = (void *)jp_inner;
	kp.pre_handler = inner_pre;
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert_eq(register_jprobe(&jp), 0);
	cr_expect_eq(fp_ptr(&local, 5), 1005);
	cr_expect_eq(local, 1000);
	cr_expect_eq(inner_from_entry, 10);
	cr_expect_eq(kp.nmissed, 1, "nmissed %lu: the counter in the caller's frame was undone",
		     kp.nmissed);
	unregister_jprobe(&jp);
	unregister_kprobe(&kp);
}

/* ---- with kprobes and kretprobes on the same function ---- */

static long agg_pre, agg_post, agg_ret;

static int agg_pre_h(struct kprobe *p, struct pt_regs *regs)
{
	agg_pre++;
	return 0;
}

static void agg_post_h(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
	agg_post++;
}

static int agg_ret_h(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	if ((long)regs->ax == add_entry_arg + 1)
		agg_ret++;
	return 0;
}

static void check_aggregate(bool jprobe_first)
{
	struct jprobe jp = jp_of((void *)jp_asm_add, (void *)jp_add_entry);
	struct kprobe kp;
	struct kretprobe rp;

	memset(&kp, 0, sizeof(kp));
	kp.addr = (void *)jp_asm_add;
	kp.pre_handler = agg_pre_h;
	kp.post_handler = agg_post_h;
	memset(&rp, 0, sizeof(rp));
	rp.kp.addr = (void *)jp_asm_add;
	rp.handler = agg_ret_h;
	if (jprobe_first)
		cr_assert_eq(register_jprobe(&jp), 0);
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert_eq(register_kretprobe(&rp), 0);
	if (!jprobe_first)
		cr_assert_eq(register_jprobe(&jp), 0);
	for (long i = 0; i < 10; i++)
		cr_assert_eq(fp_asm_add(i), i + 1);
	cr_expect_eq(add_entry_calls, 10, "jprobe entry: %ld", add_entry_calls);
	cr_expect_eq(agg_pre, 10, "kprobe pre: %ld", agg_pre);
	cr_expect_eq(agg_post, 10, "kprobe post: %ld", agg_post);
	cr_expect_eq(agg_ret, 10, "kretprobe: %ld", agg_ret);
	unregister_jprobe(&jp);
	unregister_kprobe(&kp);
	unregister_kretprobe(&rp);
}

Test(jprobe, with_kprobe_and_kretprobe_registered_before)
{
	check_aggregate(false);
}

/* As in Kprobes (a jprobe goes to the end of the aggregate's list): the
 * other probes' handlers run whatever the registration order. */
Test(jprobe, with_kprobe_and_kretprobe_registered_after)
{
	check_aggregate(true);
}

/* ---- threads ---- */

#define NTHREADS 4
#define NCALLS 2000

static __thread long tls_entry_seen;
static long thread_bad;

static double jp_thread_entry(long i0, long i1, long i2, long i3, long i4, long i5,
			      double d0, double d1, double d2, double d3, double d4,
			      double d5, double d6, double d7, double d8, double d9, long i6,
			      long i7, struct sbig s, float f10)
{
	struct args a, want;

	record(&a, i0, i1, i2, i3, i4, i5, d0, d1, d2, d3, d4, d5, d6, d7, d8, d9, i6, i7, s,
	       f10);
	make_args(&want, (i0 - 1) / 100);
	if (!args_eq(&a, &want))
		__atomic_fetch_add(&thread_bad, 1, __ATOMIC_RELAXED);
	tls_entry_seen = i0;
	*(volatile long *)&i7 = 0;
	*(volatile double *)&d9 = 0;
	CLOBBER_STACK_ARGS(8);
	jprobe_return();
}

double jp_thread_target(long i0, long i1, long i2, long i3, long i4, long i5,
			double d0, double d1, double d2, double d3, double d4, double d5,
			double d6, double d7, double d8, double d9, long i6, long i7,
			struct sbig s, float f10);
TEST_FN double jp_thread_target(long i0, long i1, long i2, long i3, long i4, long i5,
				double d0, double d1, double d2, double d3, double d4, double d5,
				double d6, double d7, double d8, double d9, long i6, long i7,
				struct sbig s, float f10)
{
	struct args a;

	record(&a, i0, i1, i2, i3, i4, i5, d0, d1, d2, d3, d4, d5, d6, d7, d8, d9, i6, i7, s,
	       f10);
	return checksum(&a);
}

static target_fn volatile fp_thread_target = jp_thread_target;

static void *jp_thread(void *arg)
{
	long t = (long)(intptr_t)arg, bad = 0;

	for (long n = 0; n < NCALLS; n++) {
		struct args a;
		long base = t * 100000 + n;

		make_args(&a, base);
		tls_entry_seen = 0;
		if (fp_thread_target(a.i[0], a.i[1], a.i[2], a.i[3], a.i[4], a.i[5], a.d[0],
				     a.d[1], a.d[2], a.d[3], a.d[4], a.d[5], a.d[6], a.d[7],
				     a.d[8], a.d[9], a.i[6], a.i[7], a.s, a.f10) != checksum(&a))
			bad++;
		if (tls_entry_seen != a.i[0])
			bad++;
	}
	__atomic_fetch_add(&thread_bad, bad, __ATOMIC_RELAXED);
	return NULL;
}

Test(jprobe, many_threads_each_see_their_own_arguments)
{
	struct jprobe jp = jp_of((void *)jp_thread_target, (void *)jp_thread_entry);
	pthread_t th[NTHREADS];

	cr_assert_eq(register_jprobe(&jp), 0);
	for (long t = 0; t < NTHREADS; t++)
		cr_assert_eq(pthread_create(&th[t], NULL, jp_thread, (void *)(intptr_t)(t + 1)), 0);
	for (int t = 0; t < NTHREADS; t++)
		pthread_join(th[t], NULL);
	cr_expect_eq(thread_bad, 0);
	cr_expect_eq(jp.kp.nmissed, 0);
	unregister_jprobe(&jp);
}

/* register_jprobes: all or nothing. */
Test(jprobe, register_jprobes_all_or_nothing)
{
	struct jprobe a = jp_of((void *)jp_asm_add, (void *)jp_add_entry);
	struct jprobe b = jp_of((void *)jp_inner, (void *)jp_add_entry2);
	struct jprobe bad = jp_of((char *)jp_asm_add + 3, (void *)jp_add_entry2);
	struct jprobe *jps[3] = { &a, &b, &bad };
	char *l;

	cr_expect_eq(register_jprobes(jps, 3), -EINVAL);
	l = list_str();
	cr_expect_str_eq(l, "");
	free(l);
	cr_assert_eq(fp_asm_add(1), 2);
	cr_expect_eq(add_entry_calls, 0);
	bad = jp_of((void *)jp_outer, (void *)jp_add_entry2);
	cr_assert_eq(register_jprobes(jps, 3), 0);
	cr_assert_eq(fp_asm_add(1), 2);
	cr_expect_eq(add_entry_calls, 1);
	cr_assert_eq(fp_outer(1), 101);
	cr_assert_eq(fp_inner(2), 4);
	unregister_jprobes(jps, 3);
	l = list_str();
	cr_expect_str_eq(l, "");
	free(l);
}
