/* Return probes (SPEC sections 2-3, issue 3): return values of every kind
 * (rax, rax:rdx, xmm0:xmm1, ymm0, zmm0, st0:st1) with handlers that clobber
 * vector and x87 registers, ret_addr/task, entry_handler data and the skip
 * rule, nmissed, functions left by longjmp/siglongjmp/pthread_exit/
 * cancellation/thread exit without leaking instances, unregister while a
 * frame is pending, exact counts under threads, backtraces and
 * kretprobe_find_ret_addr, signals (also on an alternate stack), fork,
 * aggregates with kprobes and other kretprobes, the list and every errno. */
#include <execinfo.h>
#include <immintrin.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <unwind.h>

#include "core/kretprobe.h"
#include "core/stats.h"
#include "testutil.h"

TestSuite(kretprobe, .timeout = 10);

#define BARRIER() __asm__ volatile("" : : : "memory")

/* ASan cannot follow a thread that is cancelled (glibc unwinds and
 * longjmps past its frames: false stack-buffer-underflow reports, with or
 * without probes) or that leaves with a raw exit system call. */
#if defined(__SANITIZE_ADDRESS__)
#define SKIP_UNDER_ASAN(why) cr_skip_test("not under ASan: " why)
#else
#define SKIP_UNDER_ASAN(why) ((void)0)
#endif

/* ---- helpers ---- */

struct crp {
	struct kretprobe rp;
	long hits, entries, bad;
	unsigned long ax, dx;
	void *ret;
	pid_t task;
	unsigned long seq[16];	/* ax of the first handled returns, in order */
};

#define CRP(ri) ((struct crp *)(ri)->rp)

static int crp_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct crp *c = CRP(ri);
	long n = __atomic_fetch_add(&c->hits, 1, __ATOMIC_RELAXED);

	c->ax = regs->ax;
	c->dx = regs->dx;
	c->ret = ri->ret_addr;
	c->task = ri->task;
	if (n < 16)
		c->seq[n] = regs->ax;
	return 0;
}

static void crp_init(struct crp *c, void *addr, int maxactive)
{
	memset(c, 0, sizeof(*c));
	c->rp.kp.addr = addr;
	c->rp.handler = crp_handler;
	c->rp.maxactive = maxactive;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts))
		;
}

static pid_t my_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* Written by the probed functions: their return address as they see it in
 * their own frame, and where that slot is. */
static void *volatile ra_seen;
static volatile unsigned long slot_seen, ra_translated;
#define SEE()								\
	do {								\
		ra_seen = __builtin_return_address(0);			\
		slot_seen = (unsigned long)__builtin_frame_address(0) + 8; \
		ra_translated = kretprobe_find_ret_addr((unsigned long)ra_seen, slot_seen); \
	} while (0)

/* The list as one string (caller frees). */
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

static bool has_line(const char *list, const char *line)
{
	size_t n = strlen(line);

	for (const char *s = list; *s;) {
		const char *e = strchr(s, '\n');
		size_t l = e ? (size_t)(e - s) : strlen(s);

		if (l == n && !memcmp(s, line, n))
			return true;
		if (!e)
			break;
		s = e + 1;
	}
	return false;
}

/* ---- functions to probe, and their call sites ---- */

/*   kr_asm_add+0  mov %rdi,%rax (3)   +3  add $1,%rax (4)   +7  ret
 *
 *   kr_asm_regs: returns with every register and flag set to a known
 *   value; kr_asm_regs_caller calls it and stores what it sees. */
__asm__(".text\n"
	".globl kr_asm_add\n.type kr_asm_add,@function\n"
	"kr_asm_add:\n"
	"\tmov %rdi, %rax\n"
	"\tadd $1, %rax\n"
	"\tret\n"
	".size kr_asm_add, .-kr_asm_add\n");

long kr_asm_add(long x);
/* tests/helpers/regs_asm.S */
void kr_asm_regs(void);
void kr_asm_regs_caller(void);
extern char kr_asm_regs_ret[];
extern unsigned long kr_regs_out[16];
extern const unsigned long kr_regs_want[16];

long kr_long(long x);
TEST_FN long kr_long(long x)
{
	SEE();
	__asm__ volatile("" : "+r"(x));
	return x * 3 + 1;
}

void *kr_ptr(void *p);
TEST_FN void *kr_ptr(void *p)
{
	SEE();
	__asm__ volatile("" : "+r"(p));
	return (char *)p + 8;
}

double kr_double(double x);
TEST_FN double kr_double(double x)
{
	SEE();
	__asm__ volatile("" : "+x"(x));
	return x * 1.5 + 0.25;
}

struct two_longs {
	long a, b;
};

struct two_longs kr_pair(long x);
TEST_FN struct two_longs kr_pair(long x)
{
	struct two_longs r = { x + 1, x * 2 };

	SEE();
	__asm__ volatile("" : "+r"(r.a), "+r"(r.b));
	return r;
}

struct two_doubles {
	double a, b;
};

struct two_doubles kr_dpair(double x);
TEST_FN struct two_doubles kr_dpair(double x)
{
	struct two_doubles r = { x + 0.5, x * -2.0 };

	SEE();
	__asm__ volatile("" : "+x"(r.a), "+x"(r.b));
	return r;
}

struct four_floats {
	float a, b, c, d;	/* xmm0 (a, b) and xmm1 (c, d) */
};

struct four_floats kr_ffff(float x);
TEST_FN struct four_floats kr_ffff(float x)
{
	struct four_floats r = { x + 1, x + 2, x + 3, x + 4 };

	SEE();
	BARRIER();
	return r;
}

struct big {
	long v[6];	/* returned in memory; rax = the hidden pointer */
};

struct big kr_big(long x);
TEST_FN struct big kr_big(long x)
{
	struct big r;

	SEE();
	for (int i = 0; i < 6; i++)
		r.v[i] = x + i * 100;
	BARRIER();
	return r;
}

long double kr_ld(long double x);
TEST_FN long double kr_ld(long double x)
{
	volatile long double k = 3.0L;

	SEE();
	return x * k + 0.125L;
}

_Complex long double kr_cld(long double x);
TEST_FN _Complex long double kr_cld(long double x)
{
	volatile long double k = 2.0L;
	_Complex long double r;

	SEE();
	__real__ r = x * k;
	__imag__ r = x - 7.0L;
	return r;
}

__m256d kr_m256d(double x);
__attribute__((target("avx"))) TEST_FN __m256d kr_m256d(double x)
{
	SEE();
	return _mm256_set_pd(x + 4, x + 3, x + 2, x + 1);
}

__m256i kr_m256i(long x);
__attribute__((target("avx"))) TEST_FN __m256i kr_m256i(long x)
{
	SEE();
	return _mm256_set_epi64x(x * 4, x * 3, x * 2, x);
}

__m512d kr_m512d(double x);
__attribute__((target("avx512f"))) TEST_FN __m512d kr_m512d(double x)
{
	SEE();
	return _mm512_set_pd(x + 8, x + 7, x + 6, x + 5, x + 4, x + 3, x + 2, x + 1);
}

static long (*volatile fp_long)(long) = kr_long;
static void *(*volatile fp_ptr)(void *) = kr_ptr;
static double (*volatile fp_double)(double) = kr_double;
static struct two_longs (*volatile fp_pair)(long) = kr_pair;
static struct two_doubles (*volatile fp_dpair)(double) = kr_dpair;
static struct four_floats (*volatile fp_ffff)(float) = kr_ffff;
static struct big (*volatile fp_big)(long) = kr_big;
static long double (*volatile fp_ld)(long double) = kr_ld;
static _Complex long double (*volatile fp_cld)(long double) = kr_cld;
static long (*volatile fp_asm_add)(long) = kr_asm_add;

/* Fixed call sites: the return address is the same on every call. */
long call_long(long x);
TEST_FN long call_long(long x)
{
	long r = fp_long(x);

	BARRIER();
	return r;
}

void *call_ptr(void *p);
TEST_FN void *call_ptr(void *p)
{
	void *r = fp_ptr(p);

	BARRIER();
	return r;
}

double call_double(double x);
TEST_FN double call_double(double x)
{
	double r = fp_double(x);

	BARRIER();
	return r;
}

struct two_longs call_pair(long x);
TEST_FN struct two_longs call_pair(long x)
{
	struct two_longs r = fp_pair(x);

	BARRIER();
	return r;
}

struct two_doubles call_dpair(double x);
TEST_FN struct two_doubles call_dpair(double x)
{
	struct two_doubles r = fp_dpair(x);

	BARRIER();
	return r;
}

struct four_floats call_ffff(float x);
TEST_FN struct four_floats call_ffff(float x)
{
	struct four_floats r = fp_ffff(x);

	BARRIER();
	return r;
}

struct big call_big(long x);
TEST_FN struct big call_big(long x)
{
	struct big r = fp_big(x);

	BARRIER();
	return r;
}

long double call_ld(long double x);
TEST_FN long double call_ld(long double x)
{
	long double r = fp_ld(x);

	BARRIER();
	return r;
}

_Complex long double call_cld(long double x);
TEST_FN _Complex long double call_cld(long double x)
{
	_Complex long double r = fp_cld(x);

	BARRIER();
	return r;
}

/* Registers kretprobe c on fn; the real return address of the call site
 * must have been recorded (ra_seen) by an unprobed call first. */
static void *real_ra_of_unprobed_call(void)
{
	void *ra = ra_seen;

	cr_assert_not_null(ra);
	return ra;
}

/* After a probed call: the handler saw ret_addr == real and task == tid,
 * the function saw the trampoline in its slot, and find_ret_addr maps it
 * back. */
static void check_ret_addr(struct crp *c, void *real)
{
	cr_expect_eq(c->ret, real, "ret_addr %p, real %p", c->ret, real);
	cr_expect_eq(c->task, my_tid());
	cr_expect_neq(ra_seen, real, "the return address was not replaced");
	/* translated inside the function, while its frame was live */
	cr_expect_eq(ra_translated, (unsigned long)real);
	/* after the return there is nothing to translate */
	cr_expect_eq(kretprobe_find_ret_addr((unsigned long)real, slot_seen),
		     (unsigned long)real);
}

/* ---- return values ---- */

Test(kretprobe, returns_long)
{
	struct crp c;
	void *real;

	cr_assert_eq(call_long(5), 16);
	real = real_ra_of_unprobed_call();
	crp_init(&c, (void *)kr_long, 4);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	cr_expect_eq(c.rp.kp.addr, (void *)kr_long);
	for (long i = 0; i < 20; i++) {
		cr_assert_eq(call_long(i), i * 3 + 1);
		cr_assert_eq(c.ax, (unsigned long)(i * 3 + 1));
	}
	cr_expect_eq(c.hits, 20);
	cr_expect_eq(c.rp.nmissed, 0);
	check_ret_addr(&c, real);
	unregister_kretprobe(&c.rp);
	cr_assert_eq(call_long(2), 7);
	cr_expect_eq(c.hits, 20);
	cr_expect_eq(ra_seen, real);
}

Test(kretprobe, returns_pointer)
{
	struct crp c;
	char buf[32];
	void *real;

	cr_assert_eq(call_ptr(buf), buf + 8);
	real = real_ra_of_unprobed_call();
	crp_init(&c, (void *)kr_ptr, 0);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	cr_assert_eq(call_ptr(buf + 3), buf + 11);
	cr_expect_eq(c.hits, 1);
	cr_expect_eq(c.ax, (unsigned long)(buf + 11));
	check_ret_addr(&c, real);
	unregister_kretprobe(&c.rp);
}

Test(kretprobe, returns_double_xmm0)
{
	struct crp c;
	void *real;

	cr_assert_eq(call_double(2.0), 3.25);
	real = real_ra_of_unprobed_call();
	crp_init(&c, (void *)kr_double, 0);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (int i = 0; i < 10; i++)
		cr_assert_eq(call_double(i + 0.5), (i + 0.5) * 1.5 + 0.25);
	cr_expect_eq(c.hits, 10);
	check_ret_addr(&c, real);
	unregister_kretprobe(&c.rp);
}

Test(kretprobe, returns_struct_rax_rdx)
{
	struct crp c;
	struct two_longs r;
	void *real;

	r = call_pair(10);
	cr_assert(r.a == 11 && r.b == 20);
	real = real_ra_of_unprobed_call();
	crp_init(&c, (void *)kr_pair, 0);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	r = call_pair(1000);
	cr_expect_eq(r.a, 1001);
	cr_expect_eq(r.b, 2000);
	cr_expect_eq(c.hits, 1);
	cr_expect_eq(c.ax, 1001);
	cr_expect_eq(c.dx, 2000);
	check_ret_addr(&c, real);
	unregister_kretprobe(&c.rp);
}

Test(kretprobe, returns_struct_xmm0_xmm1)
{
	struct crp c, c2;
	struct two_doubles r;
	struct four_floats f;

	r = call_dpair(3.0);
	cr_assert(r.a == 3.5 && r.b == -6.0);
	crp_init(&c, (void *)kr_dpair, 0);
	crp_init(&c2, (void *)kr_ffff, 0);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	cr_assert_eq(register_kretprobe(&c2.rp), 0);
	for (int i = 0; i < 10; i++) {
		r = call_dpair(i * 0.25);
		cr_assert_eq(r.a, i * 0.25 + 0.5);
		cr_assert_eq(r.b, i * 0.25 * -2.0);
		f = call_ffff((float)i);
		cr_assert(f.a == i + 1 && f.b == i + 2 && f.c == i + 3 && f.d == i + 4,
			  "%g %g %g %g", f.a, f.b, f.c, f.d);
	}
	cr_expect_eq(c.hits, 10);
	cr_expect_eq(c2.hits, 10);
	unregister_kretprobe(&c.rp);
	unregister_kretprobe(&c2.rp);
}

Test(kretprobe, returns_struct_in_memory)
{
	struct crp c;
	struct big r;

	crp_init(&c, (void *)kr_big, 0);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	r = call_big(7);
	for (int i = 0; i < 6; i++)
		cr_expect_eq(r.v[i], 7 + i * 100);
	cr_expect_eq(c.hits, 1);
	unregister_kretprobe(&c.rp);
}

Test(kretprobe, returns_long_double_st0)
{
	struct crp c;
	long double sum = 0, want = 0;
	void *real;

	cr_assert_eq(call_ld(1.0L), 3.125L);
	real = real_ra_of_unprobed_call();
	crp_init(&c, (void *)kr_ld, 0);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	/* 100 calls: an x87 stack left unbalanced would overflow into NaNs. */
	for (int i = 0; i < 100; i++) {
		long double x = 1.0L / (i + 3);
		long double r = call_ld(x);

		cr_assert_eq(r, x * 3.0L + 0.125L, "i=%d: %Lg", i, r);
		sum += r;
		want += x * 3.0L + 0.125L;
	}
	cr_expect_eq(sum, want);
	cr_expect_eq(c.hits, 100);
	check_ret_addr(&c, real);
	unregister_kretprobe(&c.rp);
}

Test(kretprobe, returns_complex_long_double_st0_st1)
{
	struct crp c;

	crp_init(&c, (void *)kr_cld, 0);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (int i = 0; i < 50; i++) {
		long double x = i + 0.75L;
		_Complex long double r = call_cld(x);

		cr_assert_eq(__real__ r, x * 2.0L, "i=%d: re %Lg", i, __real__ r);
		cr_assert_eq(__imag__ r, x - 7.0L, "i=%d: im %Lg", i, __imag__ r);
	}
	cr_expect_eq(c.hits, 50);
	unregister_kretprobe(&c.rp);
}

static __m256d (*volatile fp_m256d)(double) = kr_m256d;
static __m256i (*volatile fp_m256i)(long) = kr_m256i;
static __m512d (*volatile fp_m512d)(double) = kr_m512d;

__attribute__((target("avx"))) TEST_FN static void call_m256(double x, double *d, long long *q)
{
	__m256d v = fp_m256d(x);
	__m256i w = fp_m256i((long)x);

	_mm256_storeu_pd(d, v);
	_mm256_storeu_si256((__m256i *)q, w);
}

__attribute__((target("avx512f"))) TEST_FN static void call_m512(double x, double *d)
{
	__m512d v = fp_m512d(x);

	_mm512_storeu_pd(d, v);
}

Test(kretprobe, returns_m256_ymm0)
{
	struct crp c, c2;
	double d[4];
	long long q[4];

	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx"))
		cr_skip_test("no AVX");
	crp_init(&c, (void *)kr_m256d, 0);
	crp_init(&c2, (void *)kr_m256i, 0);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	cr_assert_eq(register_kretprobe(&c2.rp), 0);
	for (int i = 1; i < 20; i++) {
		call_m256(i, d, q);
		for (int k = 0; k < 4; k++) {
			cr_assert_eq(d[k], i + k + 1, "i=%d lane %d: %g", i, k, d[k]);
			cr_assert_eq(q[k], (long long)i * (k + 1), "i=%d lane %d: %lld", i, k, q[k]);
		}
	}
	cr_expect_eq(c.hits, 19);
	cr_expect_eq(c2.hits, 19);
	unregister_kretprobe(&c.rp);
	unregister_kretprobe(&c2.rp);
}

Test(kretprobe, returns_m512_zmm0)
{
	struct crp c;
	double d[8];

	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx512f"))
		cr_skip_test("no AVX-512");
	crp_init(&c, (void *)kr_m512d, 0);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (int i = 1; i < 20; i++) {
		call_m512(i, d);
		for (int k = 0; k < 8; k++)
			cr_assert_eq(d[k], i + k + 1, "i=%d lane %d: %g", i, k, d[k]);
	}
	cr_expect_eq(c.hits, 19);
	unregister_kretprobe(&c.rp);
}

/* Every general register and the arithmetic flags reach the caller as the
 * function left them; callee-saved ones as the caller had them. */
Test(kretprobe, preserves_all_registers_and_flags)
{
	const unsigned long *want = kr_regs_want;
	struct crp c;

	crp_init(&c, (void *)kr_asm_regs, 0);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (int round = 0; round < 3; round++) {
		memset(kr_regs_out, 0, sizeof(kr_regs_out));
		kr_asm_regs_caller();
		cr_expect_eq(kr_regs_out[0] & 0x8d5, want[0], "flags %#lx", kr_regs_out[0]);
		cr_expect_eq(kr_regs_out[0] & 0x400, 0, "DF set");
		for (int i = 1; i < 16; i++)
			cr_expect_eq(kr_regs_out[i], want[i], "reg %d: %#lx", i, kr_regs_out[i]);
	}
	cr_expect_eq(c.hits, 3);
	cr_expect_eq(c.ax, want[1]);
	cr_expect_eq(c.dx, want[2]);
	cr_expect_eq(c.ret, (void *)kr_asm_regs_ret);
	unregister_kretprobe(&c.rp);
}

/* ---- handlers that use vector and x87 registers ---- */

static char clob_a[8192], clob_b[8192];

__attribute__((target("avx"))) static void clobber_ymm(void)
{
	volatile double in[4] = { 1e9, -3.5, 42.0, 7.25 };
	__m256d v = _mm256_set_pd(in[0], in[1], in[2], in[3]);

	for (int i = 0; i < 8; i++)
		v = _mm256_mul_pd(_mm256_add_pd(v, v), v);
	_mm256_storeu_pd((double *)clob_b, v);
}

static int clobbering_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	volatile double x = 1.0;

	/* memset/memcpy use the widest vector registers glibc has */
	memset(clob_a, (int)(regs->ax & 0xff) | 1, sizeof(clob_a));
	memcpy(clob_b, clob_a, sizeof(clob_a));
	for (int i = 0; i < 50; i++)
		x = x * 1.0001 + (double)i / 3.0;
	if (__builtin_cpu_supports("avx"))
		clobber_ymm();
	CRP(ri)->ax = (unsigned long)(long)x;
	return crp_handler(ri, regs);
}

static int x87_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	volatile long double a = 1.0L, b = 3.0L, c = 5.0L;
	long double r = 0;

	/* a deep x87 expression: several stack registers in use */
	for (int i = 0; i < 20; i++)
		r += (a * b + c) / (b - a) * (c + i) - (a + b) * (b + c) / (a + c + i);
	CRP(ri)->ax = (unsigned long)(long)r;
	__atomic_fetch_add(&CRP(ri)->hits, 1, __ATOMIC_RELAXED);
	return 0;
}

Test(kretprobe, handler_clobbering_vectors_keeps_return_values)
{
	struct crp c1, c2, c3;

	__builtin_cpu_init();
	crp_init(&c1, (void *)kr_double, 0);
	c1.rp.handler = clobbering_handler;
	crp_init(&c2, (void *)kr_dpair, 0);
	c2.rp.handler = clobbering_handler;
	crp_init(&c3, (void *)kr_m256d, 0);
	c3.rp.handler = clobbering_handler;
	cr_assert_eq(register_kretprobe(&c1.rp), 0);
	cr_assert_eq(register_kretprobe(&c2.rp), 0);
	cr_assert_eq(register_kretprobe(&c3.rp), 0);
	for (int i = 0; i < 30; i++) {
		struct two_doubles r;

		cr_assert_eq(call_double(i * 0.125), i * 0.125 * 1.5 + 0.25);
		r = call_dpair(i * 3.0);
		cr_assert_eq(r.a, i * 3.0 + 0.5);
		cr_assert_eq(r.b, i * 3.0 * -2.0);
		if (__builtin_cpu_supports("avx")) {
			double d[4];
			long long q[4];

			call_m256(i, d, q);
			for (int k = 0; k < 4; k++)
				cr_assert_eq(d[k], i + k + 1);
		}
	}
	cr_expect_eq(c1.hits, 30);
	cr_expect_eq(c2.hits, 30);
	unregister_kretprobe(&c1.rp);
	unregister_kretprobe(&c2.rp);
	unregister_kretprobe(&c3.rp);
}

Test(kretprobe, handler_using_x87_keeps_long_double)
{
	struct crp c1, c2;

	crp_init(&c1, (void *)kr_ld, 0);
	c1.rp.handler = x87_handler;
	crp_init(&c2, (void *)kr_cld, 0);
	c2.rp.handler = x87_handler;
	cr_assert_eq(register_kretprobe(&c1.rp), 0);
	cr_assert_eq(register_kretprobe(&c2.rp), 0);
	for (int i = 0; i < 50; i++) {
		long double x = i / 7.0L;
		_Complex long double z;

		cr_assert_eq(call_ld(x), x * 3.0L + 0.125L, "i=%d", i);
		z = call_cld(x);
		cr_assert_eq(__real__ z, x * 2.0L, "i=%d", i);
		cr_assert_eq(__imag__ z, x - 7.0L, "i=%d", i);
	}
	cr_expect_eq(c1.hits, 50);
	cr_expect_eq(c2.hits, 50);
	unregister_kretprobe(&c1.rp);
	unregister_kretprobe(&c2.rp);
}

/* ---- entry_handler, data, skip ---- */

struct entry_data {
	long arg;
	unsigned long magic;
};

static int data_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct entry_data *d = (struct entry_data *)ri->data;

	__atomic_fetch_add(&CRP(ri)->entries, 1, __ATOMIC_RELAXED);
	d->arg = (long)regs_get_kernel_argument(regs, 0);
	d->magic = 0xfeedface ^ (unsigned long)d->arg;
	return 0;
}

static int data_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct entry_data *d = (struct entry_data *)ri->data;

	if (d->magic != (0xfeedface ^ (unsigned long)d->arg) ||
	    regs->ax != (unsigned long)(d->arg * 3 + 1) || ri->task != my_tid())
		__atomic_fetch_add(&CRP(ri)->bad, 1, __ATOMIC_RELAXED);
	return crp_handler(ri, regs);
}

Test(kretprobe, entry_handler_data_carried_to_return)
{
	struct crp c;

	crp_init(&c, (void *)kr_long, 2);
	c.rp.entry_handler = data_entry;
	c.rp.handler = data_return;
	c.rp.data_size = sizeof(struct entry_data);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (long i = -50; i < 50; i++)
		cr_assert_eq(call_long(i), i * 3 + 1);
	cr_expect_eq(c.entries, 100);
	cr_expect_eq(c.hits, 100);
	cr_expect_eq(c.bad, 0);
	cr_expect_eq(c.rp.nmissed, 0);
	unregister_kretprobe(&c.rp);
}

static uintptr_t data_addr_or;

static int align_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	data_addr_or |= (uintptr_t)ri->data;
	return 0;
}

/* ri->data holds the user's struct (a timestamp, a pointer, a long):
 * it must be aligned for them. */
Test(kretprobe, instance_data_is_aligned)
{
	struct crp c;

	crp_init(&c, (void *)kr_long, 8);
	c.rp.entry_handler = align_entry;
	c.rp.data_size = 24;
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (long i = 0; i < 10; i++)
		cr_assert_eq(call_long(i), i * 3 + 1);
	cr_expect_eq(data_addr_or % 8, 0, "ri->data at ...%#lx: misaligned",
		     (unsigned long)(data_addr_or & 15));
	unregister_kretprobe(&c.rp);
}

/* rec(n) = n + rec(n - 1), rec(0) = 0 */
TEST_FN long kr_rec(long n);
static long (*volatile fp_rec)(long) = kr_rec;

TEST_FN long kr_rec(long n)
{
	long r;

	__asm__ volatile("" : "+r"(n));
	if (n <= 0)
		return 0;
	r = fp_rec(n - 1);
	__asm__ volatile("" : "+r"(r));
	return r + n;
}

static int rec_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	*(long *)ri->data = (long)regs->di;
	__atomic_fetch_add(&CRP(ri)->entries, 1, __ATOMIC_RELAXED);
	return 0;
}

static int rec_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	long n = *(long *)ri->data;

	if ((long)regs->ax != n * (n + 1) / 2)
		__atomic_fetch_add(&CRP(ri)->bad, 1, __ATOMIC_RELAXED);
	return crp_handler(ri, regs);
}

Test(kretprobe, entry_handler_data_per_instance_under_recursion)
{
	struct crp c;

	crp_init(&c, (void *)kr_rec, 64);
	c.rp.entry_handler = rec_entry;
	c.rp.handler = rec_return;
	c.rp.data_size = sizeof(long);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	cr_assert_eq(fp_rec(20), 210);
	cr_expect_eq(c.entries, 21);
	cr_expect_eq(c.hits, 21);
	cr_expect_eq(c.bad, 0);
	/* innermost returns first */
	cr_expect_eq(c.seq[0], 0);
	cr_expect_eq(c.seq[1], 1);
	cr_expect_eq(c.seq[2], 3);
	unregister_kretprobe(&c.rp);
}

static int skip_odd_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	__atomic_fetch_add(&CRP(ri)->entries, 1, __ATOMIC_RELAXED);
	*(long *)ri->data = (long)regs->di;
	return regs->di & 1;
}

static int skip_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	if (*(long *)ri->data & 1)
		__atomic_fetch_add(&CRP(ri)->bad, 1, __ATOMIC_RELAXED);
	return crp_handler(ri, regs);
}

Test(kretprobe, entry_handler_nonzero_skips_return)
{
	struct crp c;
	void *real;

	cr_assert_eq(call_long(1), 4);
	real = ra_seen;
	crp_init(&c, (void *)kr_long, 1);
	c.rp.entry_handler = skip_odd_entry;
	c.rp.handler = skip_return;
	c.rp.data_size = sizeof(long);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (long i = 0; i < 200; i++) {
		cr_assert_eq(call_long(i), i * 3 + 1);
		/* a skipped return leaves the return address alone */
		if (i & 1)
			cr_assert_eq(ra_seen, real);
		else
			cr_assert_neq(ra_seen, real);
	}
	cr_expect_eq(c.entries, 200);
	cr_expect_eq(c.hits, 100);
	cr_expect_eq(c.bad, 0);
	/* maxactive 1: skipped entries gave their instance back */
	cr_expect_eq(c.rp.nmissed, 0);
	unregister_kretprobe(&c.rp);
}

/* ---- nmissed and maxactive ---- */

Test(kretprobe, nmissed_recursion_small_maxactive)
{
	struct crp c;

	crp_init(&c, (void *)kr_rec, 3);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	/* rec(10): 11 entries, the 3 outermost get instances */
	cr_assert_eq(fp_rec(10), 55);
	cr_expect_eq(c.hits, 3);
	cr_expect_eq(c.rp.nmissed, 8);
	cr_expect_eq(c.seq[0], 36);	/* rec(8) returns first */
	cr_expect_eq(c.seq[1], 45);
	cr_expect_eq(c.seq[2], 55);
	for (int i = 0; i < 9; i++)
		cr_assert_eq(fp_rec(10), 55);
	cr_expect_eq(c.hits, 30);
	cr_expect_eq(c.rp.nmissed, 80);
	/* shallow calls are all handled: nothing leaked */
	cr_assert_eq(fp_rec(2), 3);
	cr_expect_eq(c.hits, 33);
	cr_expect_eq(c.rp.nmissed, 80);
	unregister_kretprobe(&c.rp);
}

#define BAR_THREADS 4
static pthread_barrier_t kr_bar_barrier;

long kr_bar(long x);
TEST_FN long kr_bar(long x)
{
	pthread_barrier_wait(&kr_bar_barrier);
	__asm__ volatile("" : "+r"(x));
	return x * 2;
}

static long (*volatile fp_bar)(long) = kr_bar;
static long bar_bad;

static void *bar_thread(void *arg)
{
	long x = (long)(intptr_t)arg;

	if (fp_bar(x) != x * 2)
		__atomic_fetch_add(&bar_bad, 1, __ATOMIC_RELAXED);
	return NULL;
}

Test(kretprobe, nmissed_threads_maxactive_one)
{
	struct crp c;
	pthread_t th[BAR_THREADS];

	crp_init(&c, (void *)kr_bar, 1);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (int round = 0; round < 3; round++) {
		pthread_barrier_init(&kr_bar_barrier, NULL, BAR_THREADS);
		for (int i = 0; i < BAR_THREADS; i++)
			cr_assert_eq(pthread_create(&th[i], NULL, bar_thread,
						    (void *)(intptr_t)(i + 1)), 0);
		for (int i = 0; i < BAR_THREADS; i++)
			pthread_join(th[i], NULL);
		pthread_barrier_destroy(&kr_bar_barrier);
	}
	cr_expect_eq(bar_bad, 0);
	cr_expect_eq(c.hits, 3);
	cr_expect_eq(c.rp.nmissed, 3 * (BAR_THREADS - 1));
	unregister_kretprobe(&c.rp);
}

static int default_maxactive(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 1)
		n = 1;
	return 2 * n > 10 ? (int)(2 * n) : 10;
}

Test(kretprobe, maxactive_default)
{
	int want = default_maxactive();

	for (int ma = 0; ma >= -1; ma--) {
		struct crp c;
		long depth = want + 7;	/* depth + 1 entries */

		crp_init(&c, (void *)kr_rec, ma);
		cr_assert_eq(register_kretprobe(&c.rp), 0);
		cr_assert_eq(fp_rec(depth), depth * (depth + 1) / 2);
		cr_expect_eq(c.hits, want, "maxactive %d: %ld handled", ma, c.hits);
		cr_expect_eq(c.rp.nmissed, depth + 1 - want);
		cr_expect_geq(c.hits, 10);
		unregister_kretprobe(&c.rp);
	}
}

Test(kretprobe, deep_recursion_large_maxactive)
{
	struct crp c;

	crp_init(&c, (void *)kr_rec, 1000);
	c.rp.entry_handler = rec_entry;
	c.rp.handler = rec_return;
	c.rp.data_size = sizeof(long);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	cr_assert_eq(fp_rec(499), 499L * 500 / 2);
	cr_expect_eq(c.hits, 500);
	cr_expect_eq(c.entries, 500);
	cr_expect_eq(c.rp.nmissed, 0);
	cr_expect_eq(c.bad, 0);
	unregister_kretprobe(&c.rp);
}

/* ---- frames left by longjmp ---- */

static jmp_buf kr_jb;
static sigjmp_buf kr_sjb;

long kr_jmp(long x);
TEST_FN long kr_jmp(long x)
{
	__asm__ volatile("" : "+r"(x));
	if (x >= 0)
		longjmp(kr_jb, 1);
	return -x;
}

static long (*volatile fp_jmp)(long) = kr_jmp;

/* A probed function calling another probed function that longjmps. */
long kr_jmp_outer(long x);
TEST_FN long kr_jmp_outer(long x)
{
	long r = fp_jmp(x);

	__asm__ volatile("" : "+r"(r));
	return r + 1;
}

static long (*volatile fp_jmp_outer)(long) = kr_jmp_outer;

TEST_FN static void jmp_from_depth(long depth, long x)
{
	volatile char pad[64];

	pad[0] = (char)depth;
	if (depth > 0)
		jmp_from_depth(depth - 1, x);
	else
		fp_jmp_outer(x);
	KEEP(pad[0]);
}

Test(kretprobe, longjmp_out_of_probed_function_leaks_nothing)
{
	struct crp c;
	volatile long jumps = 0;

	crp_init(&c, (void *)kr_jmp, 4);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (volatile long i = 0; i < 1000; i++) {
		if (!setjmp(kr_jb))
			fp_jmp(i);
		else
			jumps++;
	}
	cr_assert_eq(jumps, 1000);
	cr_expect_eq(c.hits, 0);
	for (long i = 1; i <= 100; i++)
		cr_assert_eq(fp_jmp(-i), i);
	cr_expect_eq(c.hits, 100, "%ld handled", c.hits);
	cr_expect_eq(c.rp.nmissed, 0);
	unregister_kretprobe(&c.rp);
}

Test(kretprobe, longjmp_through_nested_probed_frames)
{
	struct crp in, out;
	volatile long jumps = 0;
	int in_missed, out_missed;

	crp_init(&in, (void *)kr_jmp, 4);
	crp_init(&out, (void *)kr_jmp_outer, 4);
	cr_assert_eq(register_kretprobe(&in.rp), 0);
	cr_assert_eq(register_kretprobe(&out.rp), 0);
	for (volatile long i = 0; i < 1000; i++) {
		/* from varying depths, so slots move both ways */
		if (!setjmp(kr_jb))
			jmp_from_depth(i % 5, i);
		else
			jumps++;
	}
	cr_assert_eq(jumps, 1000);
	/* Entries deeper than abandoned frames cannot tell them from live ones
	 * (as with uretprobes), so the loop may miss some; what follows may
	 * not. */
	in_missed = in.rp.nmissed;
	out_missed = out.rp.nmissed;
	for (long i = 1; i <= 100; i++)
		cr_assert_eq(fp_jmp_outer(-i), i + 1);
	cr_expect_eq(in.hits, 100, "inner: %ld handled, %d missed (%d in the loop)",
		     in.hits, in.rp.nmissed, in_missed);
	cr_expect_eq(out.hits, 100, "outer: %ld handled, %d missed (%d in the loop)",
		     out.hits, out.rp.nmissed, out_missed);
	cr_expect_eq(in.rp.nmissed, in_missed);
	cr_expect_eq(out.rp.nmissed, out_missed);
	unregister_kretprobe(&in.rp);
	unregister_kretprobe(&out.rp);
}

long kr_sigjmp(long x);
TEST_FN long kr_sigjmp(long x)
{
	__asm__ volatile("" : "+r"(x));
	if (x >= 0)
		siglongjmp(kr_sjb, 1);
	return -x;
}

static long (*volatile fp_sigjmp)(long) = kr_sigjmp;

Test(kretprobe, siglongjmp_out_of_probed_function)
{
	struct crp c;
	volatile long jumps = 0;

	crp_init(&c, (void *)kr_sigjmp, 3);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (volatile long i = 0; i < 1000; i++) {
		if (!sigsetjmp(kr_sjb, 1))
			fp_sigjmp(i);
		else
			jumps++;
	}
	cr_assert_eq(jumps, 1000);
	for (long i = 1; i <= 100; i++)
		cr_assert_eq(fp_sigjmp(-i), i);
	cr_expect_eq(c.hits, 100);
	cr_expect_eq(c.rp.nmissed, 0);
	unregister_kretprobe(&c.rp);
}

/* A signal arrives inside the probed function; its handler siglongjmps
 * out of both the handler and the probed frame. */
long kr_raise(long x);
TEST_FN long kr_raise(long x)
{
	__asm__ volatile("" : "+r"(x));
	if (x >= 0)
		raise(SIGUSR1);
	return -x;
}

static long (*volatile fp_raise)(long) = kr_raise;

static void jump_out_handler(int sig)
{
	siglongjmp(kr_sjb, 1);
}

Test(kretprobe, siglongjmp_from_signal_handler)
{
	struct crp c;
	struct sigaction sa;
	volatile long jumps = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = jump_out_handler;
	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);
	crp_init(&c, (void *)kr_raise, 3);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (volatile long i = 0; i < 1000; i++) {
		if (!sigsetjmp(kr_sjb, 1))
			fp_raise(i);
		else
			jumps++;
	}
	cr_assert_eq(jumps, 1000);
	for (long i = 1; i <= 100; i++)
		cr_assert_eq(fp_raise(-i), i);
	cr_expect_eq(c.hits, 100);
	cr_expect_eq(c.rp.nmissed, 0);
	unregister_kretprobe(&c.rp);
}

/* ---- signals nesting inside a probed function ---- */

static volatile long nested_result;

long kr_sig(long x);
TEST_FN long kr_sig(long x)
{
	__asm__ volatile("" : "+r"(x));
	if (x == 1)
		raise(SIGUSR2);
	return x * 10;
}

static long (*volatile fp_sig)(long) = kr_sig;

static void nested_call_handler(int sig)
{
	nested_result = fp_sig(2);
}

Test(kretprobe, signal_handler_calls_probed_function_inside_it)
{
	struct crp c;
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = nested_call_handler;
	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGUSR2, &sa, NULL), 0);
	crp_init(&c, (void *)kr_sig, 4);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (int i = 0; i < 20; i++) {
		nested_result = 0;
		cr_assert_eq(fp_sig(1), 10);
		cr_assert_eq(nested_result, 20);
	}
	cr_expect_eq(c.hits, 40);
	cr_expect_eq(c.seq[0], 20);
	cr_expect_eq(c.seq[1], 10);
	cr_expect_eq(c.rp.nmissed, 0);
	unregister_kretprobe(&c.rp);
}

/* The same, with the signal handler on an alternate stack that lies above
 * the thread's stack (both in one mapping). */
static char *alt_map;
#define ALT_THREAD_STACK (1UL << 20)
#define ALT_SIGSTACK (256UL << 10)
static volatile long alt_results[2];

static void *alt_thread(void *arg)
{
	stack_t ss = { .ss_sp = alt_map + ALT_THREAD_STACK, .ss_size = ALT_SIGSTACK };

	if (sigaltstack(&ss, NULL))
		return (void *)1;
	for (int i = 0; i < 10; i++) {
		nested_result = 0;
		alt_results[0] = fp_sig(1);
		alt_results[1] = nested_result;
		if (alt_results[0] != 10 || alt_results[1] != 20)
			return (void *)2;
	}
	return NULL;
}

Test(kretprobe, signal_on_alternate_stack_above_thread_stack)
{
	struct crp c;
	struct sigaction sa;
	pthread_attr_t attr;
	pthread_t th;
	void *ret = (void *)-1;

	alt_map = mmap(NULL, ALT_THREAD_STACK + ALT_SIGSTACK, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(alt_map, MAP_FAILED);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = nested_call_handler;
	sa.sa_flags = SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGUSR2, &sa, NULL), 0);
	crp_init(&c, (void *)kr_sig, 4);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	pthread_attr_init(&attr);
	cr_assert_eq(pthread_attr_setstack(&attr, alt_map, ALT_THREAD_STACK), 0);
	cr_assert_eq(pthread_create(&th, &attr, alt_thread, NULL), 0);
	pthread_join(th, &ret);
	cr_expect_null(ret, "thread: %p (results %ld %ld)", ret, alt_results[0], alt_results[1]);
	cr_expect_eq(c.hits, 20);
	cr_expect_eq(c.rp.nmissed, 0);
	unregister_kretprobe(&c.rp);
}

/* ---- threads that exit inside probed functions ---- */

long kr_exit_inner(long x);
TEST_FN long kr_exit_inner(long x)
{
	__asm__ volatile("" : "+r"(x));
	if (x > 0)
		pthread_exit((void *)(intptr_t)x);
	return -x;
}

static long (*volatile fp_exit_inner)(long) = kr_exit_inner;

static void *exit_inner_thread(void *arg)
{
	fp_exit_inner((long)(intptr_t)arg);
	return (void *)-1;
}

Test(kretprobe, pthread_exit_inside_probed_function)
{
	struct crp c;

	crp_init(&c, (void *)kr_exit_inner, 2);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (long i = 1; i <= 10; i++) {
		pthread_t th;
		void *ret = NULL;

		cr_assert_eq(pthread_create(&th, NULL, exit_inner_thread, (void *)(intptr_t)i), 0);
		pthread_join(th, &ret);
		cr_assert_eq(ret, (void *)(intptr_t)i);
	}
	cr_expect_eq(c.hits, 0);
	for (long i = 1; i <= 10; i++)
		cr_assert_eq(fp_exit_inner(-i), i);
	cr_expect_eq(c.hits, 10);
	cr_expect_eq(c.rp.nmissed, 0);
	unregister_kretprobe(&c.rp);
}

void *kr_thread_fn(void *arg);
TEST_FN void *kr_thread_fn(void *arg)
{
	long x = (long)(intptr_t)arg;

	__asm__ volatile("" : "+r"(x));
	if (x & 1)
		pthread_exit((void *)(intptr_t)(x * 100));
	return (void *)(intptr_t)(x * 10);
}

Test(kretprobe, probed_thread_function_exits_or_returns)
{
	struct crp c;

	crp_init(&c, (void *)kr_thread_fn, 2);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (long i = 1; i <= 20; i++) {
		pthread_t th;
		void *ret = NULL;

		cr_assert_eq(pthread_create(&th, NULL, kr_thread_fn, (void *)(intptr_t)i), 0);
		pthread_join(th, &ret);
		cr_assert_eq(ret, (void *)(intptr_t)(i & 1 ? i * 100 : i * 10));
	}
	/* the 10 that returned were handled, the 10 that exited were not */
	cr_expect_eq(c.hits, 10);
	cr_expect_eq(c.rp.nmissed, 0);
	for (long i = 2; i <= 20; i += 2)
		cr_assert_eq(kr_thread_fn((void *)(intptr_t)i), (void *)(intptr_t)(i * 10));
	cr_expect_eq(c.hits, 20);
	cr_expect_eq(c.rp.nmissed, 0);
	unregister_kretprobe(&c.rp);
}

static int cancel_pipe[2];
static volatile int cancel_cleaned;

long kr_cancel_wait(long x);
TEST_FN long kr_cancel_wait(long x)
{
	char ch;

	__asm__ volatile("" : "+r"(x));
	if (x > 0 && read(cancel_pipe[0], &ch, 1) < 0)
		return -1;
	return x + 1;
}

static long (*volatile fp_cancel_wait)(long) = kr_cancel_wait;

static void cancel_cleanup(void *arg)
{
	__atomic_fetch_add(&cancel_cleaned, 1, __ATOMIC_RELAXED);
}

static void *cancel_thread(void *arg)
{
	long r;

	pthread_cleanup_push(cancel_cleanup, NULL);
	r = fp_cancel_wait(1);
	pthread_cleanup_pop(0);
	return (void *)(intptr_t)r;
}

/* Thread records and instances of threads that exit without pthread_exit
 * are reclaimed once the kernel has really reaped the thread; joining
 * returns slightly before that. */
static void wait_thread_gone(pid_t tid)
{
	for (int i = 0; i < 500 && syscall(SYS_tgkill, getpid(), tid, 0) == 0; i++)
		sleep_ms(1);
}

static volatile pid_t cancel_tid;

static void *cancel_thread_tid(void *arg)
{
	cancel_tid = my_tid();
	return cancel_thread(arg);
}

Test(kretprobe, pthread_cancel_inside_probed_function)
{
	struct crp c;

	SKIP_UNDER_ASAN("pthread_cancel");

	cr_assert_eq(pipe(cancel_pipe), 0);
	crp_init(&c, (void *)kr_cancel_wait, 2);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (int i = 0; i < 10; i++) {
		pthread_t th;
		void *ret = NULL;

		cancel_tid = 0;
		cr_assert_eq(pthread_create(&th, NULL, cancel_thread_tid, NULL), 0);
		sleep_ms(5);
		pthread_cancel(th);
		pthread_join(th, &ret);
		cr_assert_eq(ret, PTHREAD_CANCELED);
		wait_thread_gone(cancel_tid);
	}
	cr_expect_eq(cancel_cleaned, 10);
	cr_expect_eq(c.hits, 0);
	for (long i = 1; i <= 10; i++)
		cr_assert_eq(fp_cancel_wait(-i), 1 - i);
	cr_expect_eq(c.hits, 10);
	cr_expect_eq(c.rp.nmissed, 0);
	unregister_kretprobe(&c.rp);
}

long kr_sys_exit(long x);
TEST_FN long kr_sys_exit(long x)
{
	__asm__ volatile("" : "+r"(x));
	if (x > 0)
		syscall(SYS_exit, 0);
	return -x;
}

static long (*volatile fp_sys_exit)(long) = kr_sys_exit;
static volatile pid_t vanish_tid;

static void *vanish_thread(void *arg)
{
	vanish_tid = my_tid();
	fp_sys_exit(1);
	return NULL;
}

Test(kretprobe, thread_vanishing_inside_probed_function)
{
	struct crp c;

	SKIP_UNDER_ASAN("raw SYS_exit of a thread");

	crp_init(&c, (void *)kr_sys_exit, 2);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (int i = 0; i < 10; i++) {
		pthread_t th;

		cr_assert_eq(pthread_create(&th, NULL, vanish_thread, NULL), 0);
		pthread_join(th, NULL);
		wait_thread_gone(vanish_tid);
	}
	for (long i = 1; i <= 10; i++)
		cr_assert_eq(fp_sys_exit(-i), i);
	cr_expect_eq(c.hits, 10);
	cr_expect_eq(c.rp.nmissed, 0);
	unregister_kretprobe(&c.rp);
}

/* ---- fork inside a probed function ---- */

long kr_fork(long x);
TEST_FN long kr_fork(long x)
{
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	return pid == 0 ? x + 1000 : x + 1;
}

static long (*volatile fp_fork)(long) = kr_fork;

Test(kretprobe, fork_inside_probed_function)
{
	struct crp c;
	long r;
	int status;

	crp_init(&c, (void *)kr_fork, 2);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	r = fp_fork(5);
	if (r == 1005) {
		/* child: returned through the trampoline with its own copy */
		_exit(c.hits == 1 && c.ax == 1005 ? 0 : 3);
	}
	cr_assert_eq(r, 6);
	cr_expect_eq(c.hits, 1);
	cr_expect_eq(c.ax, 6);
	cr_assert_eq(wait(&status) > 0, 1);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
	unregister_kretprobe(&c.rp);
}

/* ---- unregister while a frame is pending ---- */

static int block_pipe[2];
static volatile int block_inside;

long kr_block(long x);
TEST_FN long kr_block(long x)
{
	char ch;

	__atomic_store_n(&block_inside, 1, __ATOMIC_RELEASE);
	if (read(block_pipe[0], &ch, 1) != 1)
		return -1;
	__asm__ volatile("" : "+r"(x));
	return x + 5;
}

static long (*volatile fp_block)(long) = kr_block;

static void *block_thread(void *arg)
{
	return (void *)(intptr_t)fp_block((long)(intptr_t)arg);
}

static void wait_inside(void)
{
	for (int i = 0; i < 2000 && !__atomic_load_n(&block_inside, __ATOMIC_ACQUIRE); i++)
		sleep_ms(1);
	cr_assert(block_inside);
	sleep_ms(10);
}

Test(kretprobe, unregister_while_thread_inside)
{
	struct crp c, c2;
	pthread_t th;
	void *ret = NULL;

	cr_assert_eq(pipe(block_pipe), 0);
	crp_init(&c, (void *)kr_block, 1);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	block_inside = 0;
	cr_assert_eq(pthread_create(&th, NULL, block_thread, (void *)37), 0);
	wait_inside();
	unregister_kretprobe(&c.rp);
	cr_assert_eq(write(block_pipe[1], "x", 1), 1);
	pthread_join(th, &ret);
	cr_expect_eq(ret, (void *)42);
	cr_expect_eq(c.hits, 0);

	/* the function, probed again, works normally */
	crp_init(&c2, (void *)kr_block, 1);
	cr_assert_eq(register_kretprobe(&c2.rp), 0);
	cr_assert_eq(write(block_pipe[1], "x", 1), 1);
	cr_assert_eq(fp_block(1), 6);
	cr_expect_eq(c2.hits, 1);
	cr_expect_eq(c2.ax, 6);
	unregister_kretprobe(&c2.rp);
	cr_expect_eq(c.hits, 0);
}

Test(kretprobe, unregister_and_reregister_while_thread_inside)
{
	struct crp c;
	pthread_t th[3];
	void *ret = NULL;

	cr_assert_eq(pipe(block_pipe), 0);
	crp_init(&c, (void *)kr_block, 3);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (int i = 0; i < 3; i++) {
		block_inside = 0;
		cr_assert_eq(pthread_create(&th[i], NULL, block_thread, (void *)(intptr_t)i), 0);
		wait_inside();
	}
	unregister_kretprobe(&c.rp);
	/* the same struct, registered again while three old frames pend */
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	cr_assert_eq(write(block_pipe[1], "xyz", 3), 3);
	for (int i = 0; i < 3; i++) {
		pthread_join(th[i], &ret);
		cr_expect_eq(ret, (void *)(intptr_t)(i + 5));
	}
	cr_expect_eq(c.hits, 0, "old frames ran the new registration's handler");
	cr_assert_eq(write(block_pipe[1], "xyz", 3), 3);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(fp_block(i), i + 5);
	cr_expect_eq(c.hits, 3);
	cr_expect_eq(c.rp.nmissed, 0);
	unregister_kretprobe(&c.rp);
}

/* ---- many threads ---- */

#define NTHREADS 8
#define NCALLS 10000

static long many_bad;

static void *many_thread(void *arg)
{
	long base = (long)(intptr_t)arg * 1000000;

	for (long i = 0; i < NCALLS; i++)
		if (fp_long(base + i) != (base + i) * 3 + 1)
			__atomic_fetch_add(&many_bad, 1, __ATOMIC_RELAXED);
	return NULL;
}

static int many_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	*(long *)ri->data = (long)regs->di;
	return 0;
}

static int many_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	long x = *(long *)ri->data;

	if (regs->ax != (unsigned long)(x * 3 + 1) || ri->task != my_tid())
		__atomic_fetch_add(&CRP(ri)->bad, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&CRP(ri)->hits, 1, __ATOMIC_RELAXED);
	return 0;
}

Test(kretprobe, many_threads_exact_counts)
{
	struct crp c;
	pthread_t th[NTHREADS];

	crp_init(&c, (void *)kr_long, 2 * NTHREADS);
	c.rp.entry_handler = many_entry;
	c.rp.handler = many_return;
	c.rp.data_size = sizeof(long);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (long i = 0; i < NTHREADS; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, many_thread, (void *)i), 0);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	cr_expect_eq(many_bad, 0);
	cr_expect_eq(c.bad, 0);
	cr_expect_eq(c.hits, (long)NTHREADS * NCALLS);
	cr_expect_eq(c.rp.nmissed, 0);
	unregister_kretprobe(&c.rp);
}

/* ---- backtraces and kretprobe_find_ret_addr ---- */

static void *bt_buf[64];
static int bt_n;

long kr_bt_leaf(long x);
TEST_FN long kr_bt_leaf(long x)
{
	bt_n = backtrace(bt_buf, 64);
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}

static long (*volatile fp_bt_leaf)(long) = kr_bt_leaf;

long kr_bt(long x);
TEST_FN long kr_bt(long x)
{
	long r;

	SEE();
	if (x & 1)
		r = fp_bt_leaf(x);
	else
		r = (bt_n = backtrace(bt_buf, 64)) > 0 ? x + 1 : -1;
	__asm__ volatile("" : "+r"(r));
	return r * 2;
}

static long (*volatile fp_bt)(long) = kr_bt;

long kr_bt_caller(long x);
TEST_FN long kr_bt_caller(long x)
{
	long r = fp_bt(x);

	BARRIER();
	return r + 1;
}

static bool bt_has(void *addr)
{
	for (int i = 0; i < bt_n; i++)
		if (bt_buf[i] == addr)
			return true;
	return false;
}

Test(kretprobe, backtrace_from_inside_shows_real_callers)
{
	struct crp c, leaf;
	void *real, *tramp;

	cr_assert_eq(kr_bt_caller(2), 7);
	real = ra_seen;
	cr_assert(bt_has(real));
	crp_init(&c, (void *)kr_bt, 2);
	crp_init(&leaf, (void *)kr_bt_leaf, 2);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	cr_assert_eq(register_kretprobe(&leaf.rp), 0);
	for (long x = 2; x < 6; x++) {
		bt_n = 0;
		memset(bt_buf, 0, sizeof(bt_buf));
		cr_assert_eq(kr_bt_caller(x), (x + 1) * 2 + 1);
		tramp = ra_seen;
		cr_assert_neq(tramp, real);
		cr_expect_geq(bt_n, 3, "x=%ld", x);
		cr_expect(bt_has(real), "x=%ld: the real caller is missing", x);
		cr_expect_not(bt_has(tramp), "x=%ld: the trampoline is in the backtrace", x);
	}
	/* the return addresses went back: the handlers still ran */
	cr_expect_eq(c.hits, 4);
	cr_expect_eq(leaf.hits, 2);
	cr_expect_eq(c.ret, real);
	unregister_kretprobe(&c.rp);
	unregister_kretprobe(&leaf.rp);
}

struct uw_state {
	void **buf;
	int n, max;
};

static _Unwind_Reason_Code uw_cb(struct _Unwind_Context *ctx, void *arg)
{
	struct uw_state *s = arg;

	if (s->n < s->max)
		s->buf[s->n++] = (void *)_Unwind_GetIP(ctx);
	return _URC_NO_REASON;
}

long kr_uw(long x);
TEST_FN long kr_uw(long x)
{
	struct uw_state s = { bt_buf, 0, 64 };

	SEE();
	_Unwind_Backtrace(uw_cb, &s);
	bt_n = s.n;
	__asm__ volatile("" : "+r"(x));
	return x + 3;
}

static long (*volatile fp_uw)(long) = kr_uw;

long kr_uw_caller(long x);
TEST_FN long kr_uw_caller(long x)
{
	long r = fp_uw(x);

	BARRIER();
	return r;
}

Test(kretprobe, unwind_backtrace_from_inside_shows_real_callers)
{
	struct crp c;
	void *real;

	cr_assert_eq(kr_uw_caller(1), 4);
	real = ra_seen;
	cr_assert(bt_has(real));
	crp_init(&c, (void *)kr_uw, 2);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	bt_n = 0;
	cr_assert_eq(kr_uw_caller(2), 5);
	cr_expect_neq(ra_seen, real);
	cr_expect(bt_has(real), "the real caller is missing");
	cr_expect_not(bt_has(ra_seen), "the trampoline is in the unwind");
	cr_expect_geq(bt_n, 3);
	cr_expect_eq(c.hits, 1);
	unregister_kretprobe(&c.rp);
}

/* A kprobe on a function called by a return-probed one reads its caller's
 * return-address slot through the frame pointer and translates it. */
long kr_fr_inner(long x);
TEST_FN long kr_fr_inner(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}

static long (*volatile fp_fr_inner)(long) = kr_fr_inner;

long kr_fr_outer(long x);
TEST_FN long kr_fr_outer(long x)
{
	long r;

	SEE();
	r = fp_fr_inner(x);
	__asm__ volatile("" : "+r"(r));
	return r * 2;
}

static long (*volatile fp_fr_outer)(long) = kr_fr_outer;

long kr_fr_caller(long x);
TEST_FN long kr_fr_caller(long x)
{
	long r = fp_fr_outer(x);

	BARRIER();
	return r;
}

static unsigned long fr_slot_val, fr_translated;
static long fr_hits;

static int fr_pre(struct kprobe *p, struct pt_regs *regs)
{
	unsigned long slot = regs->bp + 8;

	fr_slot_val = *(unsigned long *)slot;
	fr_translated = kretprobe_find_ret_addr(fr_slot_val, slot);
	fr_hits++;
	return 0;
}

Test(kretprobe, find_ret_addr_from_a_kprobe_handler)
{
	struct crp c;
	struct kprobe kp;
	void *real;

	cr_assert_eq(kr_fr_caller(3), 8);
	real = ra_seen;
	memset(&kp, 0, sizeof(kp));
	kp.addr = (void *)kr_fr_inner;
	kp.pre_handler = fr_pre;
	cr_assert_eq(register_kprobe(&kp), 0);
	/* unprobed: the slot holds the real address, unchanged by translation */
	cr_assert_eq(kr_fr_caller(3), 8);
	cr_expect_eq(fr_slot_val, (unsigned long)real);
	cr_expect_eq(fr_translated, (unsigned long)real);
	crp_init(&c, (void *)kr_fr_outer, 2);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	cr_assert_eq(kr_fr_caller(4), 10);
	cr_expect_eq(fr_slot_val, (unsigned long)ra_seen);
	cr_expect_neq(fr_slot_val, (unsigned long)real);
	cr_expect_eq(fr_translated, (unsigned long)real);
	cr_expect_eq(fr_hits, 2);
	cr_expect_eq(c.hits, 1);
	/* not the trampoline: unchanged */
	cr_expect_eq(kretprobe_find_ret_addr(0x1234, slot_seen), 0x1234);
	cr_expect_eq(kretprobe_find_ret_addr((unsigned long)real, slot_seen),
		     (unsigned long)real);
	unregister_kretprobe(&c.rp);
	unregister_kprobe(&kp);
}

/* ---- aggregates ---- */

static long agg_pre_hits;

static int agg_pre(struct kprobe *p, struct pt_regs *regs)
{
	__atomic_fetch_add(&agg_pre_hits, 1, __ATOMIC_RELAXED);
	return 0;
}

Test(kretprobe, kprobe_and_kretprobe_on_same_function)
{
	struct crp c;
	struct kprobe kp;

	memset(&kp, 0, sizeof(kp));
	kp.addr = (void *)kr_long;
	kp.pre_handler = agg_pre;
	crp_init(&c, (void *)kr_long, 2);
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (long i = 0; i < 10; i++)
		cr_assert_eq(call_long(i), i * 3 + 1);
	cr_expect_eq(agg_pre_hits, 10);
	cr_expect_eq(c.hits, 10);
	unregister_kretprobe(&c.rp);
	cr_assert_eq(call_long(1), 4);
	cr_expect_eq(agg_pre_hits, 11);
	cr_expect_eq(c.hits, 10);
	/* the other order */
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	unregister_kprobe(&kp);
	cr_assert_eq(call_long(1), 4);
	cr_expect_eq(agg_pre_hits, 11);
	cr_expect_eq(c.hits, 11);
	unregister_kretprobe(&c.rp);
}

Test(kretprobe, two_kretprobes_on_same_function)
{
	struct crp a, b;
	void *real;

	cr_assert_eq(call_long(1), 4);
	real = ra_seen;
	crp_init(&a, (void *)kr_long, 2);
	crp_init(&b, (void *)kr_long, 2);
	cr_assert_eq(register_kretprobe(&a.rp), 0);
	cr_assert_eq(register_kretprobe(&b.rp), 0);
	for (long i = 0; i < 20; i++)
		cr_assert_eq(call_long(i), i * 3 + 1);
	cr_expect_eq(a.hits, 20, "a: %ld handled, %d missed", a.hits, a.rp.nmissed);
	cr_expect_eq(b.hits, 20, "b: %ld handled, %d missed", b.hits, b.rp.nmissed);
	cr_expect_eq(a.ret, real);
	cr_expect_eq(b.ret, real);
	cr_expect_eq(a.ax, 19 * 3 + 1);
	cr_expect_eq(b.ax, 19 * 3 + 1);
	cr_expect_eq(a.rp.nmissed, 0);
	cr_expect_eq(b.rp.nmissed, 0);
	unregister_kretprobe(&b.rp);
	cr_assert_eq(call_long(1), 4);
	cr_expect_eq(a.hits, 21);
	cr_expect_eq(b.hits, 20);
	unregister_kretprobe(&a.rp);
}

/* A return handler that calls the probed function: that entry is a hit
 * from inside a handler, missed, and the call returns normally. */
static long inner_call_result;

static int calls_self_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	inner_call_result = fp_long(100);
	return crp_handler(ri, regs);
}

Test(kretprobe, handler_calling_probed_function_is_missed)
{
	struct crp c;

	crp_init(&c, (void *)kr_long, 2);
	c.rp.handler = calls_self_handler;
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	for (long i = 0; i < 5; i++) {
		inner_call_result = 0;
		cr_assert_eq(call_long(i), i * 3 + 1);
		cr_assert_eq(inner_call_result, 301);
	}
	cr_expect_eq(c.hits, 5);
	cr_expect_eq(c.rp.kp.nmissed, 5);
	cr_expect_eq(c.rp.nmissed, 0);
	unregister_kretprobe(&c.rp);
}

/* ---- enable/disable, the list ---- */

Test(kretprobe, disable_enable)
{
	struct crp c;

	crp_init(&c, (void *)kr_long, 2);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	cr_assert_eq(call_long(1), 4);
	cr_expect_eq(c.hits, 1);
	cr_assert_eq(disable_kretprobe(&c.rp), 0);
	cr_expect(c.rp.kp.flags & KPROBE_FLAG_DISABLED);
	for (long i = 0; i < 10; i++)
		cr_assert_eq(call_long(i), i * 3 + 1);
	cr_expect_eq(c.hits, 1);
	cr_assert_eq(enable_kretprobe(&c.rp), 0);
	cr_expect_not(c.rp.kp.flags & KPROBE_FLAG_DISABLED);
	for (long i = 0; i < 10; i++)
		cr_assert_eq(call_long(i), i * 3 + 1);
	cr_expect_eq(c.hits, 11);
	cr_expect_eq(c.rp.nmissed, 0);
	unregister_kretprobe(&c.rp);
	cr_expect_eq(disable_kretprobe(&c.rp), -EINVAL);
	cr_expect_eq(enable_kretprobe(&c.rp), -EINVAL);
}

Test(kretprobe, list_shows_r_lines)
{
	struct crp c, d;
	char want1[160], want2[160];
	char *l;

	crp_init(&c, (void *)kr_long, 2);
	memset(&d, 0, sizeof(d));
	d.rp.kp.symbol_name = "kr_ptr";
	d.rp.handler = crp_handler;
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	cr_assert_eq(register_kretprobe(&d.rp), 0);
	cr_expect_eq(d.rp.kp.addr, (void *)kr_ptr);
	snprintf(want1, sizeof(want1), "%016lx  r  kr_long+0x0", (unsigned long)kr_long);
	snprintf(want2, sizeof(want2), "%016lx  r  kr_ptr+0x0", (unsigned long)kr_ptr);
	l = list_str();
	cr_expect(has_line(l, want1), "want \"%s\" in:\n%s", want1, l);
	cr_expect(has_line(l, want2), "want \"%s\" in:\n%s", want2, l);
	free(l);
	cr_assert_eq(disable_kretprobe(&c.rp), 0);
	snprintf(want1, sizeof(want1), "%016lx  r  kr_long+0x0  [DISABLED]",
		 (unsigned long)kr_long);
	l = list_str();
	cr_expect(has_line(l, want1), "want \"%s\" in:\n%s", want1, l);
	free(l);
	unregister_kretprobe(&c.rp);
	unregister_kretprobe(&d.rp);
	l = list_str();
	cr_expect_str_eq(l, "");
	free(l);
}

/* ---- errors ---- */

Test(kretprobe, einval_not_a_function_entry)
{
	struct crp c;

	crp_init(&c, (void *)((char *)kr_asm_add + 3), 2);
	cr_expect_eq(register_kretprobe(&c.rp), -EINVAL);
	memset(&c, 0, sizeof(c));
	c.rp.kp.symbol_name = "kr_asm_add";
	c.rp.kp.offset = 3;
	c.rp.handler = crp_handler;
	cr_expect_eq(register_kretprobe(&c.rp), -EINVAL);
	/* the function still works and nothing is listed */
	cr_assert_eq(fp_asm_add(4), 5);
	cr_expect_eq(c.hits, 0);
	{
		char *l = list_str();

		cr_expect_str_eq(l, "");
		free(l);
	}
	/* both, neither */
	crp_init(&c, (void *)kr_asm_add, 2);
	c.rp.kp.symbol_name = "kr_asm_add";
	cr_expect_eq(register_kretprobe(&c.rp), -EINVAL);
	crp_init(&c, NULL, 2);
	cr_expect_eq(register_kretprobe(&c.rp), -EINVAL);
	memset(&c, 0, sizeof(c));
	c.rp.kp.symbol_name = "kr_no_such_function_anywhere";
	cr_expect_eq(register_kretprobe(&c.rp), -ENOENT);
	/* symbol + 0 is the entry */
	memset(&c, 0, sizeof(c));
	c.rp.kp.symbol_name = "kr_asm_add";
	c.rp.handler = crp_handler;
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	cr_assert_eq(fp_asm_add(9), 10);
	cr_expect_eq(c.hits, 1);
	cr_expect_eq(c.ax, 10);
	unregister_kretprobe(&c.rp);
}

Test(kretprobe, einval_reregister)
{
	struct crp c;

	crp_init(&c, (void *)kr_long, 2);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	cr_expect_eq(register_kretprobe(&c.rp), -EINVAL);
	/* still registered once, and working */
	cr_assert_eq(call_long(2), 7);
	cr_expect_eq(c.hits, 1);
	unregister_kretprobe(&c.rp);
	cr_assert_eq(call_long(2), 7);
	cr_expect_eq(c.hits, 1);
	/* after unregister it can be registered again */
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	cr_assert_eq(call_long(2), 7);
	cr_expect_eq(c.hits, 2);
	unregister_kretprobe(&c.rp);
	/* unregistering twice is harmless */
	unregister_kretprobe(&c.rp);
}

Test(kretprobe, register_kretprobes_all_or_nothing)
{
	struct crp a, b, bad;
	struct kretprobe *rps[3] = { &a.rp, &b.rp, &bad.rp };
	char *l;

	crp_init(&a, (void *)kr_long, 2);
	crp_init(&b, (void *)kr_ptr, 2);
	memset(&bad, 0, sizeof(bad));
	bad.rp.kp.symbol_name = "kr_no_such_function_anywhere";
	bad.rp.handler = crp_handler;
	cr_expect_eq(register_kretprobes(rps, 3), -ENOENT);
	crp_init(&bad, (void *)((char *)kr_asm_add + 3), 2);
	cr_expect_eq(register_kretprobes(rps, 3), -EINVAL);
	l = list_str();
	cr_expect_str_eq(l, "");
	free(l);
	cr_assert_eq(call_long(1), 4);
	cr_expect_eq(a.hits, 0);

	crp_init(&bad, (void *)kr_double, 2);
	cr_assert_eq(register_kretprobes(rps, 3), 0);
	cr_assert_eq(call_long(1), 4);
	cr_assert_eq(call_double(1.0), 1.75);
	cr_expect_eq(a.hits, 1);
	cr_expect_eq(bad.hits, 1);
	/* a registered one in a batch fails the batch */
	{
		struct crp e;
		struct kretprobe *rps2[2] = { &e.rp, &a.rp };

		crp_init(&e, (void *)kr_pair, 2);
		cr_expect_eq(register_kretprobes(rps2, 2), -EINVAL);
		call_pair(1);
		cr_expect_eq(e.hits, 0);
		cr_assert_eq(register_kretprobe(&e.rp), 0);
		call_pair(1);
		cr_expect_eq(e.hits, 1);
		unregister_kretprobe(&e.rp);
	}
	unregister_kretprobes(rps, 3);
	l = list_str();
	cr_expect_str_eq(l, "");
	free(l);
	cr_assert_eq(call_long(1), 4);
	cr_expect_eq(a.hits, 1);
}

/* ---- per-thread instance caches ---- */

static volatile int kc_go;
static int kc_in;

long kc_block(long x);
TEST_FN long kc_block(long x)
{
	__atomic_fetch_add(&kc_in, 1, __ATOMIC_RELAXED);
	while (!kc_go)
		sched_yield();
	BARRIER();
	return x + 1;
}

static long (*volatile fp_kc_block)(long) = kc_block;

static void *call_kc_thread(void *arg)
{
	return (void *)fp_kc_block((long)arg);
}

/* The instance a thread keeps after its return serves another thread when
 * the pool has no other: maxactive counts every instance. */
Test(kretprobe, cached_instance_serves_other_threads)
{
	struct crp c;
	pthread_t th;
	void *r;

	kc_go = 1;
	crp_init(&c, (void *)kc_block, 1);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	cr_assert_eq(fp_kc_block(1), 2);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(pthread_create(&th, NULL, call_kc_thread, (void *)10L), 0);
		pthread_join(th, &r);
		cr_assert_eq((long)r, 11);
		cr_assert_eq(fp_kc_block(2), 3);
	}
	cr_expect_eq(c.rp.nmissed, 0, "%d missed", c.rp.nmissed);
	cr_expect_eq(c.hits, 7);
	unregister_kretprobe(&c.rp);
}

struct kc_gate {
	pthread_barrier_t called, leave;
};

static void *call_then_wait(void *arg)
{
	struct kc_gate *g = arg;
	long r = fp_kc_block(5);

	pthread_barrier_wait(&g->called);
	pthread_barrier_wait(&g->leave);
	return (void *)r;
}

/* Live threads that returned keep instances in their caches; as many new
 * frames as maxactive still get one each, and exactly the one more is
 * missed. */
Test(kretprobe, maxactive_exact_with_cached_instances)
{
	enum { MAX = 3 };
	struct kc_gate g;
	pthread_t idle[MAX], busy[MAX + 1];
	struct crp c;
	void *r;

	crp_init(&c, (void *)kc_block, MAX);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	pthread_barrier_init(&g.called, NULL, MAX + 1);
	pthread_barrier_init(&g.leave, NULL, MAX + 1);
	kc_go = 1;
	for (int i = 0; i < MAX; i++)
		cr_assert_eq(pthread_create(&idle[i], NULL, call_then_wait, &g), 0);
	pthread_barrier_wait(&g.called);	/* each returned once, and waits alive */
	cr_assert_eq(c.hits, MAX);
	kc_go = 0;
	__atomic_store_n(&kc_in, 0, __ATOMIC_RELAXED);
	for (int i = 0; i < MAX + 1; i++)
		cr_assert_eq(pthread_create(&busy[i], NULL, call_kc_thread, (void *)(long)i), 0);
	/* every frame entered: MAX of them hold an instance */
	while (__atomic_load_n(&kc_in, __ATOMIC_RELAXED) < MAX + 1)
		sleep_ms(1);
	cr_expect_eq(c.rp.nmissed, 1, "%d missed (want exactly 1)", c.rp.nmissed);
	kc_go = 1;
	for (int i = 0; i < MAX + 1; i++) {
		pthread_join(busy[i], &r);
		cr_assert_eq((long)r, i + 1);
	}
	pthread_barrier_wait(&g.leave);
	for (int i = 0; i < MAX; i++)
		pthread_join(idle[i], &r);
	cr_expect_eq(c.hits, 2 * MAX, "%ld hits", c.hits);
	unregister_kretprobe(&c.rp);
}

/* Instances cached by threads, live or exited, do not keep an unregistered
 * return probe's pool alive. */
Test(kretprobe, unregister_frees_pool_with_cached_instances)
{
	struct kp_stats before, after;
	struct kc_gate g;
	pthread_t idle, gone;
	struct crp c;
	void *r;

	kp_get_stats(&before);
	kc_go = 1;
	crp_init(&c, (void *)kc_block, 4);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	pthread_barrier_init(&g.called, NULL, 2);
	pthread_barrier_init(&g.leave, NULL, 2);
	cr_assert_eq(pthread_create(&idle, NULL, call_then_wait, &g), 0);
	pthread_barrier_wait(&g.called);
	cr_assert_eq(pthread_create(&gone, NULL, call_kc_thread, (void *)1L), 0);
	pthread_join(gone, &r);
	cr_assert_eq(fp_kc_block(3), 4);
	cr_assert_eq(c.hits, 3);
	unregister_kretprobe(&c.rp);
	kp_get_stats(&after);
	cr_expect_eq(after.rp_pools, before.rp_pools, "%lu pools alive, %lu before",
		     after.rp_pools, before.rp_pools);
	pthread_barrier_wait(&g.leave);
	pthread_join(idle, &r);
}

/* Signal handlers that call a return-probed function interrupt the thread
 * anywhere, also while it takes or returns its cached instance: every
 * return is handled or counted as missed, and afterwards every instance
 * is free again. */
static long kc_sig_calls;

long kc_leaf(long x);
TEST_FN long kc_leaf(long x)
{
	if (x < 0) {		/* stays until kc_go */
		__atomic_fetch_add(&kc_in, 1, __ATOMIC_RELAXED);
		while (!kc_go)
			sched_yield();
	}
	BARRIER();
	return x * 3;
}

static long (*volatile fp_kc_leaf)(long) = kc_leaf;

static void *call_leaf_blocking(void *arg)
{
	(void)arg;
	return (void *)fp_kc_leaf(-1);
}

/* No instance was lost: max frames at once, in as many threads, each get
 * one. */
static void expect_all_in_flight(struct crp *c, int max)
{
	pthread_t th[16];
	void *r;

	cr_assert_leq(max, 16);
	c->rp.nmissed = 0;
	kc_go = 0;
	__atomic_store_n(&kc_in, 0, __ATOMIC_RELAXED);
	for (int i = 0; i < max; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, call_leaf_blocking, NULL), 0);
	while (__atomic_load_n(&kc_in, __ATOMIC_RELAXED) < max)
		sleep_ms(1);
	cr_expect_eq(c->rp.nmissed, 0, "%d of %d frames missed: instances lost", c->rp.nmissed,
		     max);
	kc_go = 1;
	for (int i = 0; i < max; i++) {
		pthread_join(th[i], &r);
		cr_assert_eq((long)r, -3);
	}
}

static void kc_on_signal(int sig)
{
	(void)sig;
	if (fp_kc_leaf(7) == 21)
		kc_sig_calls++;
}

struct kc_pelter {
	pthread_t target;
	volatile int stop;
	long sent;
	int gap;		/* spins between signals; 0: 200 */
};

static void *kc_pelt(void *arg)
{
	struct kc_pelter *p = arg;

	while (!p->stop) {
		pthread_kill(p->target, SIGUSR1);
		p->sent++;
		for (volatile int i = 0; i < (p->gap ? p->gap : 200); i++)
			;
	}
	return NULL;
}

static bool kc_wait_optimized(const struct kprobe *p, int ms)
{
	for (int i = 0; i < ms; i++) {
		if (__atomic_load_n(&p->flags, __ATOMIC_ACQUIRE) & KPROBE_FLAG_OPTIMIZED)
			return true;
		sleep_ms(1);
	}
	return false;
}

Test(kretprobe, signals_interrupt_cached_instances)
{
	enum { MAX = 4, CALLS = 300000 };
	struct sigaction sa = { .sa_handler = kc_on_signal, .sa_flags = SA_RESTART };
	struct kc_pelter pelter = { .target = pthread_self() };
	pthread_t pt;
	struct crp c;
	long calls;

	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);
	crp_init(&c, (void *)kc_leaf, MAX);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	kc_wait_optimized(&c.rp.kp, 2000);	/* both paths take instances */
	cr_assert_eq(pthread_create(&pt, NULL, kc_pelt, &pelter), 0);
	for (long i = 0; i < CALLS; i++)
		cr_assert_eq(fp_kc_leaf(i), i * 3);
	pelter.stop = 1;
	pthread_join(pt, NULL);
	calls = CALLS + kc_sig_calls;
	cr_expect_gt(kc_sig_calls, 0, "no signal arrived");
	/* (an entry hit inside the hit path is the probe's miss) */
	cr_expect_eq(c.hits + c.rp.nmissed + (long)c.rp.kp.nmissed, calls,
		     "%ld hits + %d + %lu missed, %ld calls", c.hits, c.rp.nmissed,
		     c.rp.kp.nmissed, calls);
	/* no instance was lost: MAX frames at once still get one each */
	sa.sa_handler = SIG_IGN;
	sigaction(SIGUSR1, &sa, NULL);
	expect_all_in_flight(&c, MAX);
	unregister_kretprobe(&c.rp);
}

/* More threads than instances, each calling in a loop: the pool runs out
 * while others use their caches, and takes the cached instances back from
 * under them.  Every return is counted once, and no instance is lost. */
static void *kc_loop(void *arg)
{
	long n = (long)arg, bad = 0;

	for (long i = 0; i < n; i++)
		bad += fp_kc_leaf(i) != i * 3;
	return (void *)bad;
}

Test(kretprobe, pool_runs_out_while_threads_use_caches)
{
	enum { MAX = 3, THREADS = 4, CALLS = 100000 };
	pthread_t th[THREADS];
	struct crp c;
	void *r;

	crp_init(&c, (void *)kc_leaf, MAX);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	kc_wait_optimized(&c.rp.kp, 2000);
	for (int i = 0; i < THREADS; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, kc_loop, (void *)(long)CALLS), 0);
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], &r);
		cr_assert_eq((long)r, 0);
	}
	cr_expect_eq(c.hits + c.rp.nmissed + (long)c.rp.kp.nmissed, THREADS * CALLS,
		     "%ld hits + %d + %lu missed", c.hits, c.rp.nmissed, c.rp.kp.nmissed);
	expect_all_in_flight(&c, MAX);
	unregister_kretprobe(&c.rp);
}

/* Return probes registered and unregistered over and over while a thread
 * returns through them, with signal handlers stopping it anywhere for a
 * while (inside the fast paths' cache windows too): each unregistration
 * takes the cached instances back, so every pool is freed in the end.
 * The handler reads no pt_regs: the trampoline's fast path runs it. */
static long kc_quiet_hits;
static volatile int kc_hammer_stop;

static int kc_quiet_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	(void)regs;
	__atomic_fetch_add(&kc_quiet_hits, 1, __ATOMIC_RELAXED);
	return 0;
}

static void kc_stall_on_signal(int sig)
{
	(void)sig;
	for (volatile int i = 0; i < 5000; i++)
		;
}

static void *kc_hammer(void *arg)
{
	long bad = 0;

	(void)arg;
	for (long i = 0; !kc_hammer_stop; i++)
		bad += fp_kc_leaf(i & 0xffff) != (i & 0xffff) * 3;
	return (void *)bad;
}

Test(kretprobe, unregistration_drains_caches_of_interrupted_threads)
{
	enum { ROUNDS = 1000 };
	struct sigaction sa = { .sa_handler = kc_stall_on_signal, .sa_flags = SA_RESTART };
	struct kc_pelter pelter = { 0 };
	struct kp_stats before, after;
	pthread_t hammer, pt;
	struct crp c;
	void *r;

	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);
	kp_get_stats(&before);
	cr_assert_eq(pthread_create(&hammer, NULL, kc_hammer, NULL), 0);
	pelter.target = hammer;
	pelter.gap = 20000;	/* the hammer runs half the time */
	cr_assert_eq(pthread_create(&pt, NULL, kc_pelt, &pelter), 0);
	for (int round = 0; round < ROUNDS; round++) {
		struct kretprobe rp;

		memset(&rp, 0, sizeof(rp));
		rp.kp.addr = (kprobe_opcode_t *)kc_leaf;
		rp.handler = kc_quiet_ret;
		rp.maxactive = 2;
		cr_assert_eq(register_kretprobe(&rp), 0);
		usleep(100 + round % 200);
		unregister_kretprobe(&rp);
	}
	pelter.stop = 1;
	pthread_join(pt, NULL);
	kc_hammer_stop = 1;
	pthread_join(hammer, &r);
	cr_assert_eq((long)r, 0);
	cr_expect_gt(kc_quiet_hits, 0);
	cr_expect_gt(pelter.sent, 0);
	/* one more unregistration frees what is free by now */
	crp_init(&c, (void *)kc_leaf, 2);
	cr_assert_eq(register_kretprobe(&c.rp), 0);
	unregister_kretprobe(&c.rp);
	kp_get_stats(&after);
	cr_expect_eq(after.rp_pools, before.rp_pools, "%lu pools alive, %lu before",
		     after.rp_pools, before.rp_pools);
}

/* A thread that runs a long return handler holds its section, with its
 * instance already back in its cache: a thread that finds the pool empty
 * gives up waiting for it (and misses), and the unregistration takes the
 * instance back, so the pool is freed. */
static volatile int kc_hold_ret, kc_ret_held;

static int kc_holding_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	(void)regs;
	if (kc_hold_ret) {
		kc_ret_held = 1;
		while (kc_hold_ret)
			__builtin_ia32_pause();
	}
	return 0;
}

static void *call_kc_leaf(void *arg)
{
	return (void *)fp_kc_leaf((long)arg);
}

Test(kretprobe, drainer_leaves_long_handler_then_unregister_frees_pool)
{
	struct kp_stats before, after;
	struct kretprobe rp;
	pthread_t holder, blocker;
	void *r;

	kp_get_stats(&before);
	memset(&rp, 0, sizeof(rp));
	rp.kp.addr = (kprobe_opcode_t *)kc_leaf;
	rp.handler = kc_holding_ret;
	rp.maxactive = 2;
	cr_assert_eq(register_kretprobe(&rp), 0);
	kc_wait_optimized(&rp.kp, 2000);
	/* one instance in the holder's cache, its handler still running */
	kc_hold_ret = 1;
	cr_assert_eq(pthread_create(&holder, NULL, call_kc_leaf, (void *)5L), 0);
	while (!kc_ret_held)
		sleep_ms(1);
	/* the other in a frame */
	kc_go = 0;
	__atomic_store_n(&kc_in, 0, __ATOMIC_RELAXED);
	cr_assert_eq(pthread_create(&blocker, NULL, call_leaf_blocking, NULL), 0);
	while (__atomic_load_n(&kc_in, __ATOMIC_RELAXED) < 1)
		sleep_ms(1);
	/* none for this call: it waits for the holder a while, then misses */
	cr_assert_eq(fp_kc_leaf(4), 12);
	cr_expect_eq(rp.nmissed, 1);
	kc_hold_ret = 0;
	pthread_join(holder, &r);
	cr_assert_eq((long)r, 15);
	kc_go = 1;
	pthread_join(blocker, &r);
	cr_assert_eq((long)r, -3);
	unregister_kretprobe(&rp);
	kp_get_stats(&after);
	cr_expect_eq(after.rp_pools, before.rp_pools, "%lu pools alive, %lu before",
		     after.rp_pools, before.rp_pools);
}

/* ---- recursion on the fast paths ----
 *
 * A thread's cache of a pool is a bounded stack: a recursion as deep as it
 * takes every instance from it and puts every one back, so once warm it
 * never touches the shared pool (whose free list's head, with its tag,
 * changes at every take and put). */

/* rd(n) = n + rd(n - 1), rd(0) = 0; with a jump out at depth rd_jump_at
 * (when rd_jump_on) and a thread exit at depth rd_exit_at (when > 0). */
TEST_FN long kr_rd(long n);
static long (*volatile fp_rd)(long) = kr_rd;
static jmp_buf rd_jb;
static volatile long rd_jump_at = -1, rd_exit_at = -1;
static long rd_sum, rd_hits;

TEST_FN long kr_rd(long n)
{
	long r;

	__asm__ volatile("" : "+r"(n));
	if (n == rd_jump_at)
		longjmp(rd_jb, 1);
	if (n == rd_exit_at)
		pthread_exit(NULL);
	if (n <= 0)
		return 0;
	r = fp_rd(n - 1);
	__asm__ volatile("" : "+r"(r));
	return r + n;
}

/* Reads only the return value: the trampoline's fast path runs it. */
static int rd_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	__atomic_fetch_add(&rd_sum, (long)regs->ax, __ATOMIC_RELAXED);
	__atomic_fetch_add(&rd_hits, 1, __ATOMIC_RELAXED);
	return 0;
}

/* The sum of rd(k) = k (k + 1) / 2 over k = 0..n: what the returns of
 * one rd(n) see. */
static long rd_sums(long n)
{
	return n * (n + 1) * (n + 2) / 6;
}

static void rd_init(struct kretprobe *rp, int maxactive)
{
	memset(rp, 0, sizeof(*rp));
	rp->kp.addr = (kprobe_opcode_t *)kr_rd;
	rp->handler = rd_ret;
	rp->maxactive = maxactive;
	rd_sum = 0;
	rd_hits = 0;
	rd_jump_at = -1;
	rd_exit_at = -1;
}

static uint64_t pool_free_head(const struct kretprobe *rp)
{
	return __atomic_load_n(&((struct kp_rp_pool *)rp->__pool)->free_head, __ATOMIC_ACQUIRE);
}

/* Every instance free again: as many frames as maxactive get one each. */
static void expect_all_free(struct kretprobe *rp, int maxactive)
{
	long sum = rd_sum;

	rp->nmissed = 0;
	cr_assert_eq(fp_rd(maxactive - 1), (long)(maxactive - 1) * maxactive / 2);
	cr_expect_eq(rp->nmissed, 0, "%d of %d frames missed: instances lost", rp->nmissed,
		     maxactive);
	cr_expect_eq(rd_sum - sum, rd_sums(maxactive - 1));
}

Test(kretprobe, deep_recursion_stays_on_thread_cache)
{
	enum { MAX = 512, DEPTH = 40, ROUNDS = 2000 };
	struct kretprobe rp;
	uint64_t head;

	rd_init(&rp, MAX);
	cr_assert_eq(register_kretprobe(&rp), 0);
	cr_expect(kc_wait_optimized(&rp.kp, 2000), "entry not optimized");
	cr_assert_eq(fp_rd(DEPTH), DEPTH * (DEPTH + 1) / 2);	/* warm */
	head = pool_free_head(&rp);
	for (int i = 0; i < ROUNDS; i++)
		cr_assert_eq(fp_rd(DEPTH), DEPTH * (DEPTH + 1) / 2);
	cr_expect_eq(pool_free_head(&rp), head,
		     "the shared pool was used %lu times in %d recursions of depth %d",
		     (unsigned long)((pool_free_head(&rp) - head) >> 32), ROUNDS, DEPTH);
	cr_expect_eq(rd_sum, (ROUNDS + 1) * rd_sums(DEPTH));
	cr_expect_eq(rp.nmissed, 0);
	expect_all_free(&rp, MAX);
	unregister_kretprobe(&rp);
}

/* Deeper than a cache holds: the rest goes through the pool, exactly. */
Test(kretprobe, recursion_deeper_than_cache_exact)
{
	enum { MAX = 512, DEPTH = 300, ROUNDS = 200 };
	struct kretprobe rp;

	rd_init(&rp, MAX);
	cr_assert_eq(register_kretprobe(&rp), 0);
	kc_wait_optimized(&rp.kp, 2000);
	for (int i = 0; i < ROUNDS; i++)
		cr_assert_eq(fp_rd(DEPTH - i % 7), (DEPTH - i % 7) * (DEPTH - i % 7 + 1) / 2);
	cr_expect_eq(rp.nmissed, 0);
	for (int i = 0; i < ROUNDS; i++)
		rd_sum -= rd_sums(DEPTH - i % 7);
	cr_expect_eq(rd_sum, 0);
	expect_all_free(&rp, MAX);
	unregister_kretprobe(&rp);
}

/* A longjmp from deep inside leaves the frames below the target without a
 * return: the next entries drop their instances, which go back to the
 * cache or the pool; none is lost and no handler runs for them. */
Test(kretprobe, longjmp_out_of_deep_recursion_on_fast_path)
{
	enum { MAX = 256, DEPTH = 60, ROUNDS = 300 };
	struct kretprobe rp;

	rd_init(&rp, MAX);
	cr_assert_eq(register_kretprobe(&rp), 0);
	kc_wait_optimized(&rp.kp, 2000);
	for (int i = 0; i < ROUNDS; i++) {
		rd_jump_at = i % 20;
		if (!setjmp(rd_jb))
			fp_rd(DEPTH);
		rd_jump_at = -1;
		/* a normal recursion in between, through the same stack */
		cr_assert_eq(fp_rd(10), 55);
	}
	cr_expect_eq(rd_sum, ROUNDS * rd_sums(10));
	cr_expect_eq(rp.nmissed, 0);
	expect_all_free(&rp, MAX);
	unregister_kretprobe(&rp);
}

static void *rd_exit_thread(void *arg)
{
	fp_rd((long)arg);
	return NULL;
}

/* Threads that exit deep inside, and threads that return and exit with a
 * full cache: their instances come back (reaped, or taken from the dead
 * threads' caches) when the pool runs short. */
Test(kretprobe, threads_exiting_mid_recursion_lose_no_instance)
{
	enum { MAX = 256, DEPTH = 30, THREADS = 12 };
	struct kretprobe rp;

	SKIP_UNDER_ASAN("pthread_exit unwinds past probed frames");
	rd_init(&rp, MAX);
	cr_assert_eq(register_kretprobe(&rp), 0);
	kc_wait_optimized(&rp.kp, 2000);
	for (int i = 0; i < THREADS; i++) {
		pthread_t th;

		rd_exit_at = i % 2 ? 5 : -1;
		cr_assert_eq(pthread_create(&th, NULL, rd_exit_thread, (void *)(long)DEPTH), 0);
		pthread_join(th, NULL);
	}
	rd_exit_at = -1;
	cr_expect_eq(rd_sum, THREADS / 2 * rd_sums(DEPTH));
	expect_all_free(&rp, MAX);
	unregister_kretprobe(&rp);
}

/* Signal handlers that recurse themselves interrupt a recursion anywhere,
 * also inside the cache's windows: every return is handled or counted as
 * missed, and no instance is lost. */
static void rd_on_signal(int sig)
{
	(void)sig;
	fp_rd(3);
}

Test(kretprobe, signals_interrupt_recursion_on_fast_path)
{
	enum { MAX = 256, DEPTH = 20, ROUNDS = 20000 };
	struct sigaction sa = { .sa_handler = rd_on_signal, .sa_flags = SA_RESTART };
	struct kc_pelter pelter = { .target = pthread_self() };
	struct kretprobe rp;
	pthread_t pt;
	long want;

	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);
	rd_init(&rp, MAX);
	cr_assert_eq(register_kretprobe(&rp), 0);
	kc_wait_optimized(&rp.kp, 2000);
	cr_assert_eq(pthread_create(&pt, NULL, kc_pelt, &pelter), 0);
	for (int i = 0; i < ROUNDS; i++)
		cr_assert_eq(fp_rd(DEPTH), DEPTH * (DEPTH + 1) / 2);
	pelter.stop = 1;
	pthread_join(pt, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGUSR1, &sa, NULL);
	cr_expect_gt(pelter.sent, 0);
	/* each missed return (a signal inside a handler) lowers the sum; the
	 * recursion's own always count in full unless missed */
	want = ROUNDS * rd_sums(DEPTH);
	cr_expect_geq(rd_sum, want, "%ld < %ld", rd_sum, want);
	if (!rp.nmissed && !rp.kp.nmissed)
		cr_expect_eq((rd_sum - want) % rd_sums(3), 0);
	expect_all_free(&rp, MAX);
	unregister_kretprobe(&rp);
}

/* A light kprobe and a return probe on the same function (count or record
 * a function's entry and return): the optimized entry's assembly runs the
 * kprobe, then takes the instance from the cache.  Every entry and every
 * return is seen once, in recursion too, the function's arguments and
 * results stay right, and a kprobe that returns non-zero ends the hit
 * there: no instance, no return handler. */
static long pair_pre_hits;
static volatile int pair_stop;

static int pair_pre(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	(void)regs;
	__atomic_fetch_add(&pair_pre_hits, 1, __ATOMIC_RELAXED);
	return pair_stop;
}

Test(kretprobe, light_kprobe_and_return_probe_pair_under_recursion)
{
	enum { MAX = 256, DEPTH = 30, ROUNDS = 500 };
	struct kretprobe rp;
	struct kprobe kp;
	uint64_t head;

	memset(&kp, 0, sizeof(kp));
	kp.addr = (kprobe_opcode_t *)kr_rd;
	kp.pre_handler = pair_pre;
	pair_pre_hits = 0;
	pair_stop = 0;
	rd_init(&rp, MAX);
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert_eq(register_kretprobe(&rp), 0);
	cr_expect(kc_wait_optimized(&rp.kp, 2000), "entry not optimized");
	cr_assert_eq(fp_rd(DEPTH), DEPTH * (DEPTH + 1) / 2);	/* warm */
	head = pool_free_head(&rp);
	for (int i = 0; i < ROUNDS; i++)
		cr_assert_eq(fp_rd(DEPTH), DEPTH * (DEPTH + 1) / 2);
	cr_expect_eq(pool_free_head(&rp), head, "the shared pool was used");
	cr_expect_eq(pair_pre_hits, (ROUNDS + 1) * (DEPTH + 1));
	cr_expect_eq(rd_sum, (ROUNDS + 1) * rd_sums(DEPTH));
	cr_expect_eq(rp.nmissed, 0);
	/* the kprobe stops every hit: no return is handled, none missed */
	pair_stop = 1;
	rd_sum = 0;
	cr_assert_eq(fp_rd(DEPTH), DEPTH * (DEPTH + 1) / 2);
	cr_expect_eq(rd_sum, 0);
	cr_expect_eq(pair_pre_hits, (ROUNDS + 2) * (DEPTH + 1));
	pair_stop = 0;
	expect_all_free(&rp, MAX);
	unregister_kprobe(&kp);
	unregister_kretprobe(&rp);
}

/* The pair registered and unregistered over and over while a thread
 * recurses through it and signal handlers (which recurse too) stop it
 * anywhere, inside the kprobe's call from the assembly as well: results
 * stay right, and every pool is freed in the end. */
static volatile int pair_hammer_stop;

static void *pair_hammer(void *arg)
{
	long bad = 0;

	(void)arg;
	while (!pair_hammer_stop)
		bad += fp_rd(12) != 78;
	return (void *)bad;
}

Test(kretprobe, pair_churn_under_signals_and_recursion)
{
	enum { ROUNDS = 300 };
	struct sigaction sa = { .sa_handler = rd_on_signal, .sa_flags = SA_RESTART };
	struct kc_pelter pelter = { 0 };
	struct kp_stats before, after;
	pthread_t hammer, pt;
	void *r;

	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);
	kp_get_stats(&before);
	rd_jump_at = -1;
	rd_exit_at = -1;
	pair_stop = 0;
	cr_assert_eq(pthread_create(&hammer, NULL, pair_hammer, NULL), 0);
	pelter.target = hammer;
	pelter.gap = 5000;
	cr_assert_eq(pthread_create(&pt, NULL, kc_pelt, &pelter), 0);
	for (int round = 0; round < ROUNDS; round++) {
		struct kretprobe rp;
		struct kprobe kp;

		memset(&kp, 0, sizeof(kp));
		kp.addr = (kprobe_opcode_t *)kr_rd;
		kp.pre_handler = pair_pre;
		memset(&rp, 0, sizeof(rp));
		rp.kp.addr = (kprobe_opcode_t *)kr_rd;
		rp.handler = rd_ret;
		rp.maxactive = 64;
		/* both orders of registration and unregistration */
		if (round & 1) {
			cr_assert_eq(register_kprobe(&kp), 0);
			cr_assert_eq(register_kretprobe(&rp), 0);
		} else {
			cr_assert_eq(register_kretprobe(&rp), 0);
			cr_assert_eq(register_kprobe(&kp), 0);
		}
		usleep(200 + round % 300);
		if (round & 2) {
			unregister_kprobe(&kp);
			unregister_kretprobe(&rp);
		} else {
			unregister_kretprobe(&rp);
			unregister_kprobe(&kp);
		}
	}
	pelter.stop = 1;
	pthread_join(pt, NULL);
	pair_hammer_stop = 1;
	pthread_join(hammer, &r);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGUSR1, &sa, NULL);
	cr_assert_eq((long)r, 0, "%ld wrong results", (long)r);
	cr_expect_gt(pair_pre_hits, 0);
	cr_expect_gt(pelter.sent, 0);
	/* one more unregistration frees what a frame still held at the last */
	{
		struct kretprobe rp;

		rd_init(&rp, 2);
		cr_assert_eq(register_kretprobe(&rp), 0);
		unregister_kretprobe(&rp);
	}
	kp_get_stats(&after);
	cr_expect_eq(after.rp_pools, before.rp_pools, "%lu pools alive, %lu before",
		     after.rp_pools, before.rp_pools);
}

/* Threads recursing deeper than the pool allows between them: the pool
 * runs out while their caches hold stacks of instances, takes the stacks
 * back from under them (caching off for good, then an owner's own stack
 * comes back whole with its next entry).  Every return is handled or
 * missed exactly once, and afterwards every instance is free. */
static pthread_barrier_t rd_start;

static void *rd_loop(void *arg)
{
	long n = (long)arg, bad = 0;

	pthread_barrier_wait(&rd_start);
	for (long i = 0; i < n; i++)
		bad += fp_rd(20) != 210;
	return (void *)bad;
}

Test(kretprobe, pool_runs_out_under_recursion_with_stacked_caches)
{
	enum { MAX = 32, THREADS = 4, CALLS = 1000 };
	pthread_t th[THREADS];
	struct kretprobe rp;
	long handled, calls = (long)THREADS * CALLS * 21;
	void *r;

	rd_init(&rp, MAX);
	cr_assert_eq(register_kretprobe(&rp), 0);
	kc_wait_optimized(&rp.kp, 2000);
	pthread_barrier_init(&rd_start, NULL, THREADS);
	for (int i = 0; i < THREADS; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, rd_loop, (void *)(long)CALLS), 0);
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], &r);
		cr_assert_eq((long)r, 0);
	}
	handled = rd_hits;
	cr_log_info("%ld handled, %d missed", handled, rp.nmissed);
	cr_expect_eq(handled + rp.nmissed + (long)rp.kp.nmissed, calls,
		     "%ld handled + %d + %lu missed, %ld calls", handled, rp.nmissed,
		     rp.kp.nmissed, calls);
	cr_expect_leq(rd_sum, THREADS * CALLS * rd_sums(20));
	if (!rp.nmissed && !rp.kp.nmissed)
		cr_expect_eq(rd_sum, THREADS * CALLS * rd_sums(20));
	expect_all_free(&rp, MAX);
	unregister_kretprobe(&rp);
}
