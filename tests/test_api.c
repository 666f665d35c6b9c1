/* The C API of SPEC section 2 and the semantics of section 3 that a single
 * thread can observe: every errno, symbol resolution, exact hit counts,
 * aggregates, batches, enable/disable, the list format, the enabled knob,
 * handlers that change the path or registers, and re-entrance. */
#include <libgen.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

TestSuite(api, .timeout = 10);

/* ---- functions to probe ---- */

/* Instruction layout is fixed here, so offsets are known:
 *   kpt_sumoff+0  mov %rdi,%rax   (3 bytes)
 *   kpt_sumoff+3  add $1,%rax     (4 bytes)
 *   kpt_sumoff+7  ret
 */
__asm__(".text\n"
	".globl kpt_sumoff\n.type kpt_sumoff,@function\n"
	"kpt_sumoff:\n"
	"\tmov %rdi, %rax\n"
	"\tadd $1, %rax\n"
	"\tret\n"
	".size kpt_sumoff, .-kpt_sumoff\n"

	".globl kpt_id\n.type kpt_id,@function\n"
	"kpt_id:\n"
	"\tmov %rdi, %rax\n"
	"\tret\n"
	".size kpt_id, .-kpt_id\n"

	/* movabs is 10 bytes: +1..+9 are not instruction boundaries. */
	".globl kpt_movabs\n.type kpt_movabs,@function\n"
	"kpt_movabs:\n"
	"\tmovabs $0x1122334455667788, %rax\n"
	"\tret\n"
	".size kpt_movabs, .-kpt_movabs\n"

	".globl kpt_ud2\n.type kpt_ud2,@function\n"
	"kpt_ud2:\n"
	"\tud2\n"
	"\tret\n"
	".size kpt_ud2, .-kpt_ud2\n"

	".globl kpt_hlt\n.type kpt_hlt,@function\n"
	"kpt_hlt:\n"
	"\thlt\n"
	"\tret\n"
	".size kpt_hlt, .-kpt_hlt\n"

	".globl kpt_int3fn\n.type kpt_int3fn,@function\n"
	"kpt_int3fn:\n"
	"\tint3\n"
	"\tret\n"
	".size kpt_int3fn, .-kpt_int3fn\n"

	".globl kpt_noprobe_asm\n.type kpt_noprobe_asm,@function\n"
	"kpt_noprobe_asm:\n"
	"\tmov %rdi, %rax\n"
	"\tret\n"
	".size kpt_noprobe_asm, .-kpt_noprobe_asm\n");

long kpt_sumoff(long x);
long kpt_id(long x);
long kpt_movabs(void);
void kpt_ud2(void);
void kpt_hlt(void);
void kpt_int3fn(void);
long kpt_noprobe_asm(long x);

long kpt_noprobe_c(long x);
TEST_FN long kpt_noprobe_c(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 5;
}
NOKPROBE_SYMBOL(kpt_noprobe_c)
NOKPROBE_SYMBOL(kpt_noprobe_asm)

long kpt_fn1(long x);
TEST_FN long kpt_fn1(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 2 + 1;
}

long kpt_fn2(long x);
TEST_FN long kpt_fn2(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 3 + 2;
}

long kpt_fn3(long x);
TEST_FN long kpt_fn3(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 5 + 3;
}

long kpt_id_c(long x);
TEST_FN long kpt_id_c(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x;
}

int kpt_ret1(void);
TEST_FN int kpt_ret1(void)
{
	int v = 1;

	__asm__ volatile("" : "+r"(v));
	return v;
}

int kpt_ret2(void);
TEST_FN int kpt_ret2(void)
{
	int v = 2;

	__asm__ volatile("" : "+r"(v));
	return v;
}

long kpt_args8(long a, long b, long c, long d, long e, long f, long g, long h);
TEST_FN long kpt_args8(long a, long b, long c, long d, long e, long f, long g, long h)
{
	__asm__ volatile("" : : "r"(a), "r"(b), "r"(c), "r"(d), "r"(e), "r"(f), "r"(g), "r"(h));
	return a + b + c + d + e + f + g + h;
}

long kpt_inner(long x);
TEST_FN long kpt_inner(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 100;
}

long kpt_outer(long x);
TEST_FN long kpt_outer(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 200;
}

static int kpt_data_var = 1;
static const char kpt_rodata[] = "not code";

/* Calls through volatile pointers: the compiler cannot see which function
 * runs, so it can neither fold nor drop the call. */
static long (*volatile call_fn1)(long) = kpt_fn1;
static long (*volatile call_fn2)(long) = kpt_fn2;
static long (*volatile call_fn3)(long) = kpt_fn3;
static long (*volatile call_sumoff)(long) = kpt_sumoff;
static long (*volatile call_id)(long) = kpt_id;
static long (*volatile call_id_c)(long) = kpt_id_c;
static int (*volatile call_ret1)(void) = kpt_ret1;
static long (*volatile call_inner)(long) = kpt_inner;
static long (*volatile call_outer)(long) = kpt_outer;
static long (*volatile call_args8)(long, long, long, long, long, long, long, long) = kpt_args8;
static pid_t (*volatile call_getpid)(void) = getpid;

/* ---- counting probes ---- */

struct cprobe {
	struct kprobe kp;
	long pre, post, fault;
};

#define CP(p) ((struct cprobe *)(p))

static int count_pre(struct kprobe *p, struct pt_regs *regs)
{
	__atomic_fetch_add(&CP(p)->pre, 1, __ATOMIC_RELAXED);
	return 0;
}

static void count_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
	__atomic_fetch_add(&CP(p)->post, 1, __ATOMIC_RELAXED);
}

static void cp_init(struct cprobe *c, void *addr, bool pre, bool post)
{
	memset(c, 0, sizeof(*c));
	c->kp.addr = addr;
	c->kp.pre_handler = pre ? count_pre : NULL;
	c->kp.post_handler = post ? count_post : NULL;
}

static void cp_init_sym(struct cprobe *c, const char *sym, unsigned int off, bool pre, bool post)
{
	cp_init(c, NULL, pre, post);
	c->kp.symbol_name = sym;
	c->kp.offset = off;
}

static int plain_pre(struct kprobe *p, struct pt_regs *regs)
{
	return 0;
}

static int try_register(void *addr, const char *sym, unsigned int off)
{
	struct kprobe p;
	int err;

	memset(&p, 0, sizeof(p));
	p.addr = addr;
	p.symbol_name = sym;
	p.offset = off;
	p.pre_handler = plain_pre;
	err = register_kprobe(&p);
	if (err == 0)
		unregister_kprobe(&p);
	return err;
}

static uint8_t byte_at(const void *addr)
{
	return *(const volatile uint8_t *)addr;
}

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

static int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
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

/* ---- errno of register_kprobe & co. ---- */

Test(api, einval_both_addr_and_symbol)
{
	cr_expect_eq(try_register((void *)kpt_fn1, "kpt_fn1", 0), -EINVAL);
}

Test(api, einval_neither_addr_nor_symbol)
{
	cr_expect_eq(try_register(NULL, NULL, 0), -EINVAL);
	cr_expect_eq(try_register(NULL, NULL, 4), -EINVAL);
}

Test(api, einval_nokprobe_symbol)
{
	cr_expect_eq(try_register((void *)kpt_noprobe_c, NULL, 0), -EINVAL);
	cr_expect_eq(try_register(NULL, "kpt_noprobe_c", 0), -EINVAL);
	/* anywhere inside the function, not just its entry */
	cr_expect_eq(try_register((char *)kpt_noprobe_asm + 3, NULL, 0), -EINVAL);
	cr_expect_eq(try_register(NULL, "kpt_noprobe_asm", 3), -EINVAL);
	cr_expect_eq(kpt_noprobe_c(1), 6);
	/* the neighbours are fine */
	cr_expect_eq(try_register((void *)kpt_fn1, NULL, 0), 0);
}

Test(api, einval_inside_libkprobes)
{
	cr_expect_eq(try_register((void *)register_kprobe, NULL, 0), -EINVAL);
	cr_expect_eq(try_register((void *)unregister_kprobe, NULL, 0), -EINVAL);
	cr_expect_eq(try_register((void *)kprobes_list, NULL, 0), -EINVAL);
	cr_expect_eq(try_register(NULL, "register_kprobe", 0), -EINVAL);
}

/* The signal return trampoline every handler returns through. */
static void usr2_handler(int sig)
{
}

Test(api, einval_signal_restorer)
{
	struct sigaction sa;
	struct {
		void *handler;
		unsigned long flags;
		void *restorer;
		unsigned long mask;
	} ksa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = usr2_handler;
	cr_assert_eq(sigaction(SIGUSR2, &sa, NULL), 0);
	cr_assert_eq(syscall(SYS_rt_sigaction, SIGUSR2, NULL, &ksa, 8), 0);
	cr_assert_not_null(ksa.restorer);
	cr_expect_eq(try_register(ksa.restorer, NULL, 0), -EINVAL);
	raise(SIGUSR2);
}

Test(api, einval_not_code)
{
	char stack_buf[32];
	void *heap = malloc(64);
	void *anon = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	cr_assert_not_null(heap);
	cr_assert_neq(anon, MAP_FAILED);
	memset(stack_buf, 0x90, sizeof(stack_buf));
	memset(heap, 0x90, 64);
	memset(anon, 0x90, 4096);
	KEEP(stack_buf);
	cr_expect_eq(try_register(stack_buf, NULL, 0), -EINVAL, "stack");
	cr_expect_eq(try_register(heap, NULL, 0), -EINVAL, "heap");
	cr_expect_eq(try_register(anon, NULL, 0), -EINVAL, "anonymous rw mapping");
	cr_expect_eq(try_register(&kpt_data_var, NULL, 0), -EINVAL, ".data");
	cr_expect_eq(try_register((void *)kpt_rodata, NULL, 0), -EINVAL, ".rodata");
	cr_expect_eq(try_register((void *)16, NULL, 0), -EINVAL, "unmapped");
	free(heap);
	munmap(anon, 4096);
}

Test(api, einval_unprobeable_instruction)
{
	cr_expect_eq(try_register((void *)kpt_ud2, NULL, 0), -EINVAL, "ud2");
	cr_expect_eq(try_register((void *)kpt_hlt, NULL, 0), -EINVAL, "hlt");
	cr_expect_eq(try_register((void *)kpt_int3fn, NULL, 0), -EINVAL, "int3");
	cr_expect_eq(try_register(NULL, "kpt_ud2", 0), -EINVAL, "ud2 by name");
	/* the ret right after them is fine */
	cr_expect_eq(try_register((char *)kpt_ud2 + 2, NULL, 0), 0, "ret after ud2");
	cr_expect_eq(try_register((char *)kpt_hlt + 1, NULL, 0), 0, "ret after hlt");
}

Test(api, einval_reregister)
{
	struct cprobe c;

	cp_init(&c, (void *)kpt_fn1, true, false);
	cr_assert_eq(register_kprobe(&c.kp), 0);
	cr_expect_eq(register_kprobe(&c.kp), -EINVAL);
	/* the failed attempt left the probe registered and working */
	cr_expect_eq(call_fn1(4), 9);
	cr_expect_eq(c.pre, 1);
	cr_expect_eq(enable_kprobe(&c.kp), 0);
	unregister_kprobe(&c.kp);
	cr_expect_eq(call_fn1(4), 9);
	cr_expect_eq(c.pre, 1);
}

Test(api, einval_enable_disable_unregistered)
{
	struct cprobe c;

	cp_init(&c, (void *)kpt_fn1, true, false);
	cr_expect_eq(enable_kprobe(&c.kp), -EINVAL);
	cr_expect_eq(disable_kprobe(&c.kp), -EINVAL);
	cr_expect_eq(enable_kprobe(NULL), -EINVAL);
	cr_expect_eq(disable_kprobe(NULL), -EINVAL);
	cr_assert_eq(register_kprobe(&c.kp), 0);
	cr_expect_eq(disable_kprobe(&c.kp), 0);
	cr_expect_eq(enable_kprobe(&c.kp), 0);
	unregister_kprobe(&c.kp);
	cr_expect_eq(enable_kprobe(&c.kp), -EINVAL);
	cr_expect_eq(disable_kprobe(&c.kp), -EINVAL);
	cr_expect_eq(call_fn1(1), 3);
	cr_expect_eq(c.pre, 0);
}

Test(api, enoent_unknown_symbol)
{
	cr_expect_eq(try_register(NULL, "kpt_no_such_symbol_zz9", 0), -ENOENT);
	cr_expect_eq(try_register(NULL, "libc.so.6:kpt_no_such_symbol_zz9", 0), -ENOENT);
	cr_expect_eq(try_register(NULL, "libkpt_no_such_object.so.3:getpid", 0), -ENOENT);
	/* a data symbol is not a function */
	cr_expect_neq(try_register(NULL, "kpt_rodata", 0), 0);
}

Test(api, eilseq_not_instruction_boundary)
{
	cr_assert_eq(kpt_movabs(), 0x1122334455667788L);
	for (int off = 1; off < 10; off++) {
		cr_expect_eq(try_register((char *)kpt_movabs + off, NULL, 0), -EILSEQ, "+%d", off);
		cr_expect_eq(try_register(NULL, "kpt_movabs", (unsigned int)off), -EILSEQ,
			     "name+%d", off);
	}
	cr_expect_eq(try_register((char *)kpt_movabs + 10, NULL, 0), 0, "the ret");
	cr_expect_eq(try_register(NULL, "kpt_sumoff", 1), -EILSEQ);
	cr_expect_eq(try_register(NULL, "kpt_sumoff", 5), -EILSEQ);
	cr_expect_eq(kpt_movabs(), 0x1122334455667788L);
}

Test(api, unregister_unregistered_clears_addr)
{
	struct kprobe p;

	memset(&p, 0, sizeof(p));
	p.addr = (void *)kpt_fn1;
	p.pre_handler = plain_pre;
	unregister_kprobe(&p);
	cr_expect_null(p.addr);

	struct kprobe q, *batch[] = { &p, &q };

	memset(&q, 0, sizeof(q));
	p.addr = (void *)kpt_fn1;
	q.addr = (void *)kpt_fn2;
	unregister_kprobes(batch, 2);
	cr_expect_null(p.addr);
	cr_expect_null(q.addr);
	/* and it did not break anything */
	cr_expect_eq(call_fn1(2), 5);
}

/* ---- resolution ---- */

static unsigned long seen_ip, seen_ax, seen_post_ip, seen_post_ax;

static int record_pre(struct kprobe *p, struct pt_regs *regs)
{
	seen_ip = regs->ip;
	seen_ax = regs->ax;
	return count_pre(p, regs);
}

static void record_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
	seen_post_ip = regs->ip;
	seen_post_ax = regs->ax;
	count_post(p, regs, flags);
}

Test(api, symbol_name_plus_offset)
{
	struct cprobe c;

	cp_init_sym(&c, "kpt_sumoff", 3, false, false);
	c.kp.pre_handler = record_pre;
	c.kp.post_handler = record_post;
	cr_assert_eq(register_kprobe(&c.kp), 0);
	cr_expect_eq((void *)c.kp.addr, (char *)kpt_sumoff + 3);
	cr_expect_eq(call_sumoff(41), 42);
	cr_expect_eq(c.pre, 1);
	cr_expect_eq(c.post, 1);
	/* the mov before the probe has run, the add has not */
	cr_expect_eq(seen_ip, (unsigned long)kpt_sumoff + 4);
	cr_expect_eq(seen_ax, 41);
	cr_expect_eq(seen_post_ip, (unsigned long)kpt_sumoff + 7);
	cr_expect_eq(seen_post_ax, 42);
	unregister_kprobe(&c.kp);
	cr_expect_eq(call_sumoff(1), 2);
	cr_expect_eq(c.pre, 1);
}

Test(api, symbol_name_of_main_executable_object)
{
	char exe[4096], spec[4200];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	struct cprobe c;

	cr_assert_gt(n, 0);
	exe[n] = 0;
	snprintf(spec, sizeof(spec), "%s:kpt_fn2", basename(exe));
	cp_init_sym(&c, spec, 0, true, false);
	cr_assert_eq(register_kprobe(&c.kp), 0, "%s", spec);
	cr_expect_eq((void *)c.kp.addr, (void *)kpt_fn2);
	cr_expect_eq(call_fn2(1), 5);
	cr_expect_eq(c.pre, 1);
	unregister_kprobe(&c.kp);
}

Test(api, object_colon_name_libc)
{
	struct cprobe c;
	pid_t pid = (pid_t)syscall(SYS_getpid), got = 0;

	cp_init_sym(&c, "libc.so.6:getpid", 0, true, true);
	cr_assert_eq(register_kprobe(&c.kp), 0);
	cr_expect_eq((void *)c.kp.addr, (void *)getpid);
	for (int i = 0; i < 100; i++)
		got |= call_getpid() ^ pid;
	long pre = c.pre, post = c.post;

	cr_expect_eq(got, 0, "getpid returned a wrong pid while probed");
	cr_expect_eq(pre, 100);
	cr_expect_eq(post, 100);

	char *l = list_str();
	char line[128];

	snprintf(line, sizeof(line), "%016lx  k  getpid+0x0  [libc.so.6]", (unsigned long)c.kp.addr);
	cr_expect(has_line(l, line), "want \"%s\" in:\n%s", line, l);
	free(l);
	unregister_kprobe(&c.kp);
	cr_expect_eq(call_getpid(), pid);
	cr_expect_eq(c.pre, 100);
}

/* ---- hits ---- */

Test(api, exact_hit_counts)
{
	struct cprobe a, b;
	long sum = 0;

	cp_init(&a, (void *)kpt_fn1, true, false);
	cp_init(&b, (void *)kpt_fn2, true, true);
	cr_assert_eq(register_kprobe(&a.kp), 0);
	cr_assert_eq(register_kprobe(&b.kp), 0);
	for (long i = 0; i < 1000; i++)
		sum += call_fn1(i) - (2 * i + 1);
	for (long i = 0; i < 1000; i++)
		sum += call_fn2(i) - (3 * i + 2);
	cr_expect_eq(sum, 0);
	cr_expect_eq(a.pre, 1000);
	cr_expect_eq(a.post, 0);
	cr_expect_eq(b.pre, 1000);
	cr_expect_eq(b.post, 1000);
	cr_expect_eq(a.kp.nmissed, 0);
	cr_expect_eq(b.kp.nmissed, 0);
	unregister_kprobe(&a.kp);
	unregister_kprobe(&b.kp);
	for (long i = 0; i < 10; i++)
		sum += call_fn1(i) + call_fn2(i);
	KEEP(sum);
	cr_expect_eq(a.pre, 1000);
	cr_expect_eq(b.pre, 1000);
	cr_expect_eq(b.post, 1000);
}

Test(api, post_only_probe)
{
	struct cprobe c;

	cp_init(&c, (char *)kpt_sumoff + 3, false, true);
	cr_assert_eq(register_kprobe(&c.kp), 0);
	for (long i = 0; i < 100; i++)
		cr_assert_eq(call_sumoff(i), i + 1);
	cr_expect_eq(c.post, 100);
	unregister_kprobe(&c.kp);
}

/* ---- aggregates ---- */

Test(api, aggregate_two_probes)
{
	struct cprobe a, b;

	cp_init(&a, (void *)kpt_fn1, true, true);
	cp_init(&b, (void *)kpt_fn1, true, false);
	cr_assert_eq(register_kprobe(&a.kp), 0);
	cr_assert_eq(register_kprobe(&b.kp), 0);
	for (long i = 0; i < 10; i++)
		cr_assert_eq(call_fn1(i), 2 * i + 1);
	cr_expect_eq(a.pre, 10);
	cr_expect_eq(a.post, 10);
	cr_expect_eq(b.pre, 10);
	unregister_kprobe(&a.kp);
	for (long i = 0; i < 10; i++)
		cr_assert_eq(call_fn1(i), 2 * i + 1);
	cr_expect_eq(a.pre, 10);
	cr_expect_eq(a.post, 10);
	cr_expect_eq(b.pre, 20);
	unregister_kprobe(&b.kp);
	cr_expect_eq(call_fn1(1), 3);
	cr_expect_eq(b.pre, 20);
}

Test(api, aggregate_three_probes)
{
	struct cprobe a, b, c;
	char line[128];
	char *l;

	kprobes_set_optimization(false);
	cp_init(&a, (void *)kpt_fn3, true, false);
	cp_init(&b, (void *)kpt_fn3, false, true);
	cp_init(&c, (void *)kpt_fn3, true, true);
	cr_assert_eq(register_kprobe(&a.kp), 0);
	cr_assert_eq(register_kprobe(&b.kp), 0);
	cr_assert_eq(register_kprobe(&c.kp), 0);
	for (long i = 0; i < 7; i++)
		cr_assert_eq(call_fn3(i), 5 * i + 3);
	cr_expect_eq(a.pre, 7);
	cr_expect_eq(a.post, 0);
	cr_expect_eq(b.pre, 0);
	cr_expect_eq(b.post, 7);
	cr_expect_eq(c.pre, 7);
	cr_expect_eq(c.post, 7);

	snprintf(line, sizeof(line), "%016lx  k  kpt_fn3+0x0", (unsigned long)kpt_fn3);
	l = list_str();
	cr_expect_eq(count_lines(l), 3, "%s", l);
	cr_expect(has_line(l, line), "want \"%s\" in:\n%s", line, l);
	free(l);

	/* one of them disabled: the others still run */
	cr_assert_eq(disable_kprobe(&c.kp), 0);
	cr_expect_eq(call_fn3(1), 8);
	cr_expect_eq(a.pre, 8);
	cr_expect_eq(b.post, 8);
	cr_expect_eq(c.pre, 7);
	cr_expect_eq(c.post, 7);
	cr_assert_eq(enable_kprobe(&c.kp), 0);

	unregister_kprobe(&b.kp);
	for (long i = 0; i < 5; i++)
		cr_assert_eq(call_fn3(i), 5 * i + 3);
	cr_expect_eq(a.pre, 13);
	cr_expect_eq(b.post, 8);
	cr_expect_eq(c.pre, 12);
	cr_expect_eq(c.post, 12);
	l = list_str();
	cr_expect_eq(count_lines(l), 2, "%s", l);
	free(l);

	unregister_kprobe(&a.kp);
	cr_expect_eq(call_fn3(0), 3);
	cr_expect_eq(a.pre, 13);
	cr_expect_eq(c.pre, 13);
	cr_expect_eq(c.post, 13);
	l = list_str();
	cr_expect_eq(count_lines(l), 1, "%s", l);
	free(l);

	unregister_kprobe(&c.kp);
	cr_expect_eq(call_fn3(0), 3);
	cr_expect_eq(c.pre, 13);
	l = list_str();
	cr_expect_str_eq(l, "");
	free(l);
	cr_expect_eq(byte_at((void *)kpt_fn3), a.kp.opcode);
}

/* ---- batches ---- */

static void batch_fails_at_third(struct cprobe *third, int want)
{
	struct cprobe a, b;
	struct kprobe *batch[] = { &a.kp, &b.kp, &third->kp };
	uint8_t b1 = byte_at((void *)kpt_fn1), b2 = byte_at((void *)kpt_fn2);
	char *l;

	cp_init(&a, (void *)kpt_fn1, true, true);
	cp_init(&b, (void *)kpt_fn2, true, false);
	cr_assert_eq(register_kprobes(batch, 3), want);
	cr_expect_eq(enable_kprobe(&a.kp), -EINVAL, "first probe still registered");
	cr_expect_eq(enable_kprobe(&b.kp), -EINVAL, "second probe still registered");
	cr_expect_eq(call_fn1(3), 7);
	cr_expect_eq(call_fn2(3), 11);
	cr_expect_eq(a.pre, 0);
	cr_expect_eq(a.post, 0);
	cr_expect_eq(b.pre, 0);
	cr_expect_eq(byte_at((void *)kpt_fn1), b1);
	cr_expect_eq(byte_at((void *)kpt_fn2), b2);
	l = list_str();
	cr_expect_str_eq(l, "");
	free(l);
}

Test(api, register_kprobes_all_or_nothing_enoent)
{
	struct cprobe bad;

	cp_init_sym(&bad, "kpt_no_such_symbol_zz9", 0, true, false);
	batch_fails_at_third(&bad, -ENOENT);
}

Test(api, register_kprobes_all_or_nothing_eilseq)
{
	struct cprobe bad;

	cp_init(&bad, (char *)kpt_movabs + 3, true, false);
	batch_fails_at_third(&bad, -EILSEQ);
}

Test(api, register_kprobes_all_or_nothing_einval)
{
	struct cprobe bad;

	cp_init(&bad, (void *)kpt_ud2, true, false);
	batch_fails_at_third(&bad, -EINVAL);
}

Test(api, register_unregister_kprobes)
{
	struct cprobe a, b, c, d;
	struct kprobe *batch[] = { &a.kp, &b.kp, &c.kp, &d.kp };
	char *l;

	cp_init(&a, (void *)kpt_fn1, true, false);
	cp_init(&b, (void *)kpt_fn2, true, false);
	cp_init(&c, (void *)kpt_fn3, true, true);
	cp_init(&d, (void *)kpt_fn3, true, false);	/* aggregate within the batch */
	cr_assert_eq(register_kprobes(batch, 4), 0);
	cr_expect_eq(call_fn1(1), 3);
	cr_expect_eq(call_fn2(1), 5);
	cr_expect_eq(call_fn3(1), 8);
	cr_expect_eq(a.pre, 1);
	cr_expect_eq(b.pre, 1);
	cr_expect_eq(c.pre, 1);
	cr_expect_eq(c.post, 1);
	cr_expect_eq(d.pre, 1);
	l = list_str();
	cr_expect_eq(count_lines(l), 4, "%s", l);
	free(l);
	unregister_kprobes(batch, 4);
	cr_expect_eq(call_fn1(1), 3);
	cr_expect_eq(call_fn2(1), 5);
	cr_expect_eq(call_fn3(1), 8);
	cr_expect_eq(a.pre, 1);
	cr_expect_eq(b.pre, 1);
	cr_expect_eq(c.pre, 1);
	cr_expect_eq(d.pre, 1);
	for (int i = 0; i < 4; i++)
		cr_expect_eq(enable_kprobe(batch[i]), -EINVAL);
	l = list_str();
	cr_expect_str_eq(l, "");
	free(l);
	cr_expect_eq(register_kprobes(batch, 0), 0);
}

/* ---- disable / enable ---- */

Test(api, disable_enable)
{
	struct cprobe c;
	char line[128], *l;
	uint8_t orig = byte_at((void *)kpt_fn1);

	kprobes_set_optimization(false);
	cp_init(&c, (void *)kpt_fn1, true, true);
	cr_assert_eq(register_kprobe(&c.kp), 0);
	cr_expect_eq(c.kp.opcode, orig);
	cr_expect_eq(call_fn1(0), 1);
	cr_expect_eq(c.pre, 1);

	cr_assert_eq(disable_kprobe(&c.kp), 0);
	cr_expect(c.kp.flags & KPROBE_FLAG_DISABLED);
	snprintf(line, sizeof(line), "%016lx  k  kpt_fn1+0x0  [DISABLED]", (unsigned long)kpt_fn1);
	l = list_str();
	cr_expect(has_line(l, line), "want \"%s\" in:\n%s", line, l);
	free(l);
	for (long i = 0; i < 50; i++)
		cr_assert_eq(call_fn1(i), 2 * i + 1);
	cr_expect_eq(c.pre, 1);
	cr_expect_eq(c.post, 1);
	cr_expect_eq(byte_at((void *)kpt_fn1), orig, "disabled probe left its breakpoint");
	cr_expect_eq(disable_kprobe(&c.kp), 0, "disabling twice");

	cr_assert_eq(enable_kprobe(&c.kp), 0);
	cr_expect_not(c.kp.flags & KPROBE_FLAG_DISABLED);
	snprintf(line, sizeof(line), "%016lx  k  kpt_fn1+0x0", (unsigned long)kpt_fn1);
	l = list_str();
	cr_expect(has_line(l, line), "want \"%s\" in:\n%s", line, l);
	free(l);
	for (long i = 0; i < 50; i++)
		cr_assert_eq(call_fn1(i), 2 * i + 1);
	cr_expect_eq(c.pre, 51);
	cr_expect_eq(c.post, 51);
	cr_expect_eq(enable_kprobe(&c.kp), 0, "enabling twice");
	unregister_kprobe(&c.kp);
	cr_expect_eq(byte_at((void *)kpt_fn1), orig);
}

Test(api, register_disabled)
{
	struct cprobe c;
	uint8_t orig = byte_at((void *)kpt_fn2);

	cp_init(&c, (void *)kpt_fn2, true, false);
	c.kp.flags = KPROBE_FLAG_DISABLED;
	cr_assert_eq(register_kprobe(&c.kp), 0);
	cr_expect(c.kp.flags & KPROBE_FLAG_DISABLED);
	cr_expect_eq(call_fn2(1), 5);
	cr_expect_eq(c.pre, 0);
	cr_expect_eq(byte_at((void *)kpt_fn2), orig);
	cr_assert_eq(enable_kprobe(&c.kp), 0);
	cr_expect_eq(call_fn2(1), 5);
	cr_expect_eq(c.pre, 1);
	unregister_kprobe(&c.kp);
}

/* ---- the list ---- */

Test(api, list_format)
{
	struct cprobe a, b, c, d;
	char want[4][160];
	char *l;

	kprobes_set_optimization(false);
	cp_init(&a, (void *)kpt_fn1, true, false);
	cp_init_sym(&b, "kpt_sumoff", 3, true, false);
	cp_init_sym(&c, "libc.so.6:getpid", 0, true, false);
	cp_init(&d, (void *)kpt_fn2, true, false);
	cr_assert_eq(register_kprobe(&a.kp), 0);
	cr_assert_eq(register_kprobe(&b.kp), 0);
	cr_assert_eq(register_kprobe(&c.kp), 0);
	cr_assert_eq(register_kprobe(&d.kp), 0);
	cr_assert_eq(disable_kprobe(&d.kp), 0);
	snprintf(want[0], sizeof(want[0]), "%016lx  k  kpt_fn1+0x0", (unsigned long)kpt_fn1);
	snprintf(want[1], sizeof(want[1]), "%016lx  k  kpt_sumoff+0x3",
		 (unsigned long)kpt_sumoff + 3);
	snprintf(want[2], sizeof(want[2]), "%016lx  k  getpid+0x0  [libc.so.6]",
		 (unsigned long)getpid);
	snprintf(want[3], sizeof(want[3]), "%016lx  k  kpt_fn2+0x0  [DISABLED]",
		 (unsigned long)kpt_fn2);
	l = list_str();
	cr_expect_eq(count_lines(l), 4, "%s", l);
	for (int i = 0; i < 4; i++)
		cr_expect(has_line(l, want[i]), "want \"%s\" in:\n%s", want[i], l);
	free(l);
	unregister_kprobe(&b.kp);
	l = list_str();
	cr_expect_eq(count_lines(l), 3, "%s", l);
	cr_expect_not(has_line(l, want[1]), "%s", l);
	free(l);
	unregister_kprobe(&a.kp);
	unregister_kprobe(&c.kp);
	unregister_kprobe(&d.kp);
	l = list_str();
	cr_expect_str_eq(l, "");
	free(l);
	cr_expect_eq(kprobes_list(NULL), -EINVAL);
}

Test(api, list_to_fmemopen)
{
	struct cprobe a;
	char buf[256], want[160];
	FILE *f;

	kprobes_set_optimization(false);
	memset(buf, 0, sizeof(buf));
	cp_init(&a, (void *)kpt_fn3, true, false);
	cr_assert_eq(register_kprobe(&a.kp), 0);
	f = fmemopen(buf, sizeof(buf) - 1, "w");
	cr_assert_not_null(f);
	cr_assert_eq(kprobes_list(f), 0);
	fclose(f);
	snprintf(want, sizeof(want), "%016lx  k  kpt_fn3+0x0\n", (unsigned long)kpt_fn3);
	cr_expect_str_eq(buf, want);
	unregister_kprobe(&a.kp);
}

/* ---- the enabled knob ---- */

Test(api, enabled_knob)
{
	struct cprobe a, b;
	uint8_t oa = byte_at((void *)kpt_fn1), ob = byte_at((void *)kpt_fn2);
	uint8_t oc = byte_at((void *)kpt_fn3);
	struct cprobe c;

	kprobes_set_optimization(false);
	cr_expect(kprobes_enabled());
	cp_init(&a, (void *)kpt_fn1, true, true);
	cp_init(&b, (void *)kpt_fn2, true, false);
	cr_assert_eq(register_kprobe(&a.kp), 0);
	cr_assert_eq(register_kprobe(&b.kp), 0);
	cr_assert_eq(disable_kprobe(&b.kp), 0);
	cr_expect_eq(byte_at((void *)kpt_fn1), 0xcc);
	cr_expect_eq(call_fn1(1), 3);
	cr_expect_eq(a.pre, 1);

	kprobes_set_enabled(false);
	cr_expect_not(kprobes_enabled());
	cr_expect_eq(byte_at((void *)kpt_fn1), oa, "knob off left a breakpoint");
	cr_expect_eq(byte_at((void *)kpt_fn2), ob);
	for (long i = 0; i < 20; i++) {
		cr_assert_eq(call_fn1(i), 2 * i + 1);
		cr_assert_eq(call_fn2(i), 3 * i + 2);
	}
	cr_expect_eq(a.pre, 1);
	cr_expect_eq(a.post, 1);
	cr_expect_eq(b.pre, 0);

	/* registering while off: registered but not armed */
	cp_init(&c, (void *)kpt_fn3, true, false);
	cr_assert_eq(register_kprobe(&c.kp), 0);
	cr_expect_eq(byte_at((void *)kpt_fn3), oc);
	cr_expect_eq(call_fn3(1), 8);
	cr_expect_eq(c.pre, 0);
	/* per-probe state can change while off */
	cr_assert_eq(enable_kprobe(&b.kp), 0);
	cr_assert_eq(disable_kprobe(&b.kp), 0);
	cr_expect_eq(byte_at((void *)kpt_fn2), ob);

	kprobes_set_enabled(true);
	cr_expect(kprobes_enabled());
	cr_expect_eq(byte_at((void *)kpt_fn1), 0xcc);
	cr_expect_eq(byte_at((void *)kpt_fn3), 0xcc);
	cr_expect_eq(byte_at((void *)kpt_fn2), ob, "a disabled probe was re-armed by the knob");
	cr_expect(b.kp.flags & KPROBE_FLAG_DISABLED);
	cr_expect_not(a.kp.flags & KPROBE_FLAG_DISABLED);
	for (long i = 0; i < 20; i++) {
		cr_assert_eq(call_fn1(i), 2 * i + 1);
		cr_assert_eq(call_fn2(i), 3 * i + 2);
		cr_assert_eq(call_fn3(i), 5 * i + 3);
	}
	cr_expect_eq(a.pre, 21);
	cr_expect_eq(a.post, 21);
	cr_expect_eq(b.pre, 0);
	cr_expect_eq(c.pre, 20);
	cr_assert_eq(enable_kprobe(&b.kp), 0);
	cr_expect_eq(call_fn2(0), 2);
	cr_expect_eq(b.pre, 1);

	/* off twice, on twice: idempotent */
	kprobes_set_enabled(false);
	kprobes_set_enabled(false);
	cr_expect_eq(call_fn1(0), 1);
	kprobes_set_enabled(true);
	kprobes_set_enabled(true);
	cr_expect_eq(call_fn1(0), 1);
	cr_expect_eq(a.pre, 22);
	unregister_kprobe(&a.kp);
	unregister_kprobe(&b.kp);
	unregister_kprobe(&c.kp);
	cr_expect_eq(byte_at((void *)kpt_fn1), oa);
	cr_expect_eq(byte_at((void *)kpt_fn2), ob);
	cr_expect_eq(byte_at((void *)kpt_fn3), oc);
}

/* KPROBES_ENABLED=0 / KPROBES_OPTIMIZATION=0 at start-up: the test binary
 * re-executes itself with the variables set; this constructor then runs the
 * check in the fresh process and exits with a code naming what failed. */
static long env_hits;

static int env_pre(struct kprobe *p, struct pt_regs *regs)
{
	env_hits++;
	return 0;
}

__attribute__((constructor)) static void env_child(void)
{
	struct kprobe p;
	uint8_t orig;
	int rc = 0;

	if (!getenv("KPT_ENV_CHILD"))
		return;
	orig = byte_at((void *)kpt_fn1);
	memset(&p, 0, sizeof(p));
	p.addr = (void *)kpt_fn1;
	p.pre_handler = env_pre;
	if (kprobes_enabled())
		rc = 10;
	else if (kprobes_optimization())
		rc = 11;
	else if (register_kprobe(&p))
		rc = 12;
	else {
		if (call_fn1(1) != 3)
			rc = 13;
		else if (env_hits != 0)
			rc = 14;
		else if (byte_at((void *)kpt_fn1) != orig)
			rc = 15;
		kprobes_set_enabled(true);
		if (!rc && (call_fn1(1) != 3 || env_hits != 1))
			rc = 16;
		unregister_kprobe(&p);
	}
	_exit(rc);
}

Test(api, env_at_startup)
{
	int status;
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		char *argv[] = { "test_api_env_child", NULL };

		setenv("KPT_ENV_CHILD", "1", 1);
		setenv("KPROBES_ENABLED", "0", 1);
		setenv("KPROBES_OPTIMIZATION", "0", 1);
		execv("/proc/self/exe", argv);
		_exit(99);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status), "child died with signal %d", WTERMSIG(status));
	cr_expect_eq(WEXITSTATUS(status), 0,
		     "child check %d failed (10: enabled, 11: optimization, 12: register, "
		     "13: result, 14: hit while off, 15: breakpoint while off, 16: knob on)",
		     WEXITSTATUS(status));
}

/* ---- handlers that change things ---- */

static int redirect_pre(struct kprobe *p, struct pt_regs *regs)
{
	count_pre(p, regs);
	instruction_pointer_set(regs, kpt_ret2);
	return 1;
}

Test(api, pre_handler_changes_path)
{
	struct cprobe c;

	kprobes_set_optimization(false);
	cp_init(&c, (void *)kpt_ret1, false, true);
	c.kp.pre_handler = redirect_pre;
	cr_assert_eq(call_ret1(), 1);
	cr_assert_eq(register_kprobe(&c.kp), 0);
	for (int i = 0; i < 10; i++)
		cr_assert_eq(call_ret1(), 2);
	cr_expect_eq(c.pre, 10);
	/* a pre_handler returning 1 skips single-stepping and the post handler */
	cr_expect_eq(c.post, 0);
	unregister_kprobe(&c.kp);
	cr_expect_eq(call_ret1(), 1);
}

static long inner_result;

static int calls_inner_pre(struct kprobe *p, struct pt_regs *regs)
{
	count_pre(p, regs);
	inner_result = call_inner(5);
	return 0;
}

static void calls_inner_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
	count_post(p, regs, flags);
	inner_result += call_inner(6);
}

Test(api, recursion_counts_nmissed)
{
	struct cprobe outer, inner;

	cp_init(&outer, (void *)kpt_outer, false, false);
	outer.kp.pre_handler = calls_inner_pre;
	cp_init(&inner, (void *)kpt_inner, true, true);
	cr_assert_eq(register_kprobe(&outer.kp), 0);
	cr_assert_eq(register_kprobe(&inner.kp), 0);
	for (long i = 0; i < 5; i++) {
		inner_result = 0;
		cr_assert_eq(call_outer(i), i + 200);
		cr_assert_eq(inner_result, 105);
	}
	cr_expect_eq(outer.pre, 5);
	cr_expect_eq(inner.pre, 0);
	cr_expect_eq(inner.post, 0);
	cr_expect_eq(inner.kp.nmissed, 5);
	cr_expect_eq(outer.kp.nmissed, 0);

	/* and from a post handler */
	outer.kp.post_handler = calls_inner_post;
	inner_result = 0;
	cr_assert_eq(call_outer(1), 201);
	cr_expect_eq(inner_result, 105 + 106);
	cr_expect_eq(outer.post, 1);
	cr_expect_eq(inner.pre, 0);
	cr_expect_eq(inner.kp.nmissed, 7);

	/* outside handlers the inner probe counts normally */
	cr_assert_eq(call_inner(1), 101);
	cr_expect_eq(inner.pre, 1);
	cr_expect_eq(inner.post, 1);
	cr_expect_eq(inner.kp.nmissed, 7);
	unregister_kprobe(&outer.kp);
	unregister_kprobe(&inner.kp);
}

static int calls_self_pre(struct kprobe *p, struct pt_regs *regs)
{
	count_pre(p, regs);
	inner_result = call_inner(1);
	return 0;
}

Test(api, handler_hits_own_probe)
{
	struct cprobe c;

	cp_init(&c, (void *)kpt_inner, false, true);
	c.kp.pre_handler = calls_self_pre;
	cr_assert_eq(register_kprobe(&c.kp), 0);
	for (long i = 0; i < 10; i++) {
		inner_result = 0;
		cr_assert_eq(call_inner(i), i + 100);
		cr_assert_eq(inner_result, 101);
	}
	cr_expect_eq(c.pre, 10);
	cr_expect_eq(c.post, 10);
	cr_expect_eq(c.kp.nmissed, 10);
	unregister_kprobe(&c.kp);
}

static struct pt_regs args_regs;
static unsigned long args_seen[8], args_ret_addr;

static int args_pre(struct kprobe *p, struct pt_regs *regs)
{
	args_regs = *regs;
	for (unsigned int i = 0; i < 8; i++)
		args_seen[i] = regs_get_kernel_argument(regs, i);
	args_ret_addr = *(unsigned long *)user_stack_pointer(regs);
	return count_pre(p, regs);
}

TEST_FN static long call_args8_here(void)
{
	return call_args8(1001, -1002, 1003, 0x1122334455667788L, 1005, 1006, 1007, -1008);
}

Test(api, pre_handler_regs_and_arguments)
{
	struct cprobe c;
	const long want[8] = { 1001, -1002, 1003, 0x1122334455667788L, 1005, 1006, 1007, -1008 };
	long sum = 0;

	cp_init(&c, (void *)kpt_args8, false, false);
	c.kp.pre_handler = args_pre;
	cr_assert_eq(register_kprobe(&c.kp), 0);
	for (int i = 0; i < 8; i++)
		sum += want[i];
	cr_assert_eq(call_args8_here(), sum);
	cr_assert_eq(c.pre, 1);
	cr_expect_eq(args_regs.ip, (unsigned long)kpt_args8 + 1);
	cr_expect_eq(instruction_pointer(&args_regs), (unsigned long)kpt_args8 + 1);
	for (int i = 0; i < 8; i++)
		cr_expect_eq(args_seen[i], (unsigned long)want[i], "argument %d", i);
	cr_expect_eq(args_regs.di, (unsigned long)want[0]);
	cr_expect_eq(args_regs.r9, (unsigned long)want[5]);
	/* at the entry: the return address on top, the ABI's alignment */
	cr_expect_eq(args_regs.sp % 16, 8, "sp %#lx", args_regs.sp);
	cr_expect_geq(args_ret_addr, (unsigned long)call_args8_here);
	cr_expect_lt(args_ret_addr, (unsigned long)call_args8_here + 256);
	cr_expect_eq(args_regs.cs, 0x33);
	cr_expect(args_regs.flags & 0x200, "IF clear in flags %#lx", args_regs.flags);
	cr_expect_not(args_regs.flags & 0x100, "TF set in flags %#lx", args_regs.flags);
	unregister_kprobe(&c.kp);
}

Test(api, post_handler_sees_next_ip)
{
	struct cprobe c;

	cp_init(&c, (void *)kpt_sumoff, false, false);
	c.kp.pre_handler = record_pre;
	c.kp.post_handler = record_post;
	cr_assert_eq(register_kprobe(&c.kp), 0);
	cr_assert_eq(call_sumoff(9), 10);
	cr_expect_eq(seen_ip, (unsigned long)kpt_sumoff + 1);
	cr_expect_eq(seen_post_ip, (unsigned long)kpt_sumoff + 3);
	cr_expect_eq(seen_post_ax, 9);
	unregister_kprobe(&c.kp);

	/* on a C function's entry (whatever its first instruction is) */
	cp_init(&c, (void *)kpt_fn1, false, false);
	c.kp.pre_handler = record_pre;
	c.kp.post_handler = record_post;
	cr_assert_eq(register_kprobe(&c.kp), 0);
	cr_assert_eq(call_fn1(9), 19);
	cr_expect_eq(seen_ip, (unsigned long)kpt_fn1 + 1);
	cr_expect_geq(seen_post_ip, (unsigned long)kpt_fn1 + 1);
	cr_expect_leq(seen_post_ip, (unsigned long)kpt_fn1 + 15);
	unregister_kprobe(&c.kp);
}

static int set_di_pre(struct kprobe *p, struct pt_regs *regs)
{
	count_pre(p, regs);
	regs->di = 4242;
	return 0;
}

static void set_ax_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
	count_post(p, regs, flags);
	regs->ax += 1000;
}

Test(api, handlers_modify_registers)
{
	struct cprobe c;

	cp_init(&c, (void *)kpt_id, false, false);
	c.kp.pre_handler = set_di_pre;
	cr_assert_eq(register_kprobe(&c.kp), 0);
	cr_expect_eq(call_id(7), 4242);
	unregister_kprobe(&c.kp);
	cr_expect_eq(call_id(7), 7);

	cp_init(&c, (void *)kpt_id_c, false, false);
	c.kp.pre_handler = set_di_pre;
	cr_assert_eq(register_kprobe(&c.kp), 0);
	cr_expect_eq(call_id_c(7), 4242);
	cr_expect_eq(c.pre, 1);
	unregister_kprobe(&c.kp);
	cr_expect_eq(call_id_c(7), 7);

	/* a post handler after "mov %rdi,%rax" changes the result */
	cp_init(&c, (void *)kpt_sumoff, false, false);
	c.kp.post_handler = set_ax_post;
	cr_assert_eq(register_kprobe(&c.kp), 0);
	cr_expect_eq(call_sumoff(7), 1008);
	cr_expect_eq(c.post, 1);
	unregister_kprobe(&c.kp);
	cr_expect_eq(call_sumoff(7), 8);
}
