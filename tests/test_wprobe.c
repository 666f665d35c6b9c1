/* Watchpoint probes: every access counted once and attributed to the
 * instruction that made it, on every thread (those started later too);
 * reads with WPROBE_RW; 1-, 2-, 4- and 8-byte variables; argument checks;
 * the fifth refused; disable/enable; the list; the program's own SIGTRAP
 * handler and perf events untouched; fork and exec; nothing left behind. */
#include <dirent.h>
#include <fcntl.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "testutil.h"

/* The accessing instructions, each followed by a label: a watchpoint's
 * handler sees the pc at that label (on arm64 too, where the watchpoint
 * traps before the access and the library steps it).
 *   kpt_wstore_a(v): store v to kpt_wvar8   -> kpt_wstore_a_end
 *   kpt_wstore_b(v): the same, elsewhere    -> kpt_wstore_b_end
 *   kpt_wload():     load kpt_wvar8         -> kpt_wload_end
 */
#if defined(__x86_64__)
__asm__(".text\n"
	".globl kpt_wstore_a\n.type kpt_wstore_a,@function\n"
	"kpt_wstore_a:\n"
	"\tmov %rdi, kpt_wvar8(%rip)\n"
	".globl kpt_wstore_a_end\nkpt_wstore_a_end:\n"
	"\tret\n"
	".size kpt_wstore_a, .-kpt_wstore_a\n"

	".globl kpt_wstore_b\n.type kpt_wstore_b,@function\n"
	"kpt_wstore_b:\n"
	"\tnop\n"
	"\tmov %rdi, kpt_wvar8(%rip)\n"
	".globl kpt_wstore_b_end\nkpt_wstore_b_end:\n"
	"\tret\n"
	".size kpt_wstore_b, .-kpt_wstore_b\n"

	".globl kpt_wload\n.type kpt_wload,@function\n"
	"kpt_wload:\n"
	"\tmov kpt_wvar8(%rip), %rax\n"
	".globl kpt_wload_end\nkpt_wload_end:\n"
	"\tret\n"
	".size kpt_wload, .-kpt_wload\n");
/* The program's own breakpoint, reported after it. */
#define PROGRAM_BREAKPOINT() __asm__ volatile("int3")
#define PROGRAM_BREAKPOINT_SKIP 0
#elif defined(__aarch64__)
__asm__(".text\n"
	".globl kpt_wstore_a\n.type kpt_wstore_a,%function\n"
	"kpt_wstore_a:\n"
	"\tadrp x1, kpt_wvar8\n"
	"\tstr x0, [x1, :lo12:kpt_wvar8]\n"
	".globl kpt_wstore_a_end\nkpt_wstore_a_end:\n"
	"\tret\n"
	".size kpt_wstore_a, .-kpt_wstore_a\n"

	".globl kpt_wstore_b\n.type kpt_wstore_b,%function\n"
	"kpt_wstore_b:\n"
	"\tadrp x1, kpt_wvar8\n"
	"\tadd x1, x1, :lo12:kpt_wvar8\n"
	"\tstr x0, [x1]\n"
	".globl kpt_wstore_b_end\nkpt_wstore_b_end:\n"
	"\tret\n"
	".size kpt_wstore_b, .-kpt_wstore_b\n"

	".globl kpt_wload\n.type kpt_wload,%function\n"
	"kpt_wload:\n"
	"\tadrp x1, kpt_wvar8\n"
	"\tldr x0, [x1, :lo12:kpt_wvar8]\n"
	".globl kpt_wload_end\nkpt_wload_end:\n"
	"\tret\n"
	".size kpt_wload, .-kpt_wload\n");
/* The program's own breakpoint, reported at it: its handler steps over. */
#define PROGRAM_BREAKPOINT() __asm__ volatile("brk #0x77")
#define PROGRAM_BREAKPOINT_SKIP 4
#endif

void kpt_wstore_a(long v);
void kpt_wstore_b(long v);
long kpt_wload(void);
extern char kpt_wstore_a_end[], kpt_wstore_b_end[], kpt_wload_end[];

long kpt_wvar8 __attribute__((aligned(64)));
long kpt_wother[4] __attribute__((aligned(64)));
unsigned char kpt_wbytes[32] __attribute__((aligned(16)));

static unsigned long hits_a, hits_b, hits_load, hits_other, bad_value;

static void count_handler(struct wprobe *wp, struct pt_regs *regs)
{
	char *ip = (char *)instruction_pointer(regs);

	if (ip == kpt_wstore_a_end || ip == kpt_wstore_b_end) {
		/* After the access: the new value is there. */
		if (*(volatile long *)wp->addr != (long)regs_get_kernel_argument(regs, 0))
			__atomic_add_fetch(&bad_value, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(ip == kpt_wstore_a_end ? &hits_a : &hits_b, 1, __ATOMIC_RELAXED);
	} else if (ip == kpt_wload_end) {
		__atomic_add_fetch(&hits_load, 1, __ATOMIC_RELAXED);
	} else {
		__atomic_add_fetch(&hits_other, 1, __ATOMIC_RELAXED);
	}
}

static unsigned long nhits;

static void plain_handler(struct wprobe *wp, struct pt_regs *regs)
{
	__atomic_add_fetch(&nhits, 1, __ATOMIC_RELAXED);
}

/* Registers wp, or skips the test where this system has no usable
 * hardware breakpoints. */
static void register_or_skip(struct wprobe *wp)
{
	int err = register_wprobe(wp);

	if (err == -EOPNOTSUPP || err == -EACCES)
		cr_skip_test("no hardware breakpoints with SIGTRAP here (%s): "
			     "Linux >= 5.13, debug registers, perf_event_paranoid <= 2",
			     err == -EACCES ? "perf_event_open not permitted" : "unsupported");
	cr_assert_eq(err, 0, "register_wprobe: %d", err);
}

static struct wprobe var8_probe(unsigned int type)
{
	return (struct wprobe){ .addr = &kpt_wvar8, .len = 8, .type = type,
				.handler = count_handler };
}

/* How many perf event descriptors the process has open. */
static int perf_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	cr_assert(d);
	while ((e = readdir(d))) {
		char path[300], target[128];
		ssize_t len;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		len = readlink(path, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = '\0';
		if (strstr(target, "perf_event"))
			n++;
	}
	closedir(d);
	return n;
}

TestSuite(wprobe, .timeout = 20);

Test(wprobe, writes_attributed_to_instruction)
{
	struct wprobe wp = var8_probe(WPROBE_W);

	register_or_skip(&wp);
	for (long i = 0; i < 1000; i++)
		kpt_wstore_a(i);
	for (long i = 0; i < 300; i++)
		kpt_wstore_b(i + 7);
	kpt_wload();
	kpt_wother[0] = 5;	/* next to it, not it */
	unregister_wprobe(&wp);
	kpt_wstore_a(1);
	cr_expect_eq(hits_a, 1000);
	cr_expect_eq(hits_b, 300);
	cr_expect_eq(hits_load, 0, "a read caught by a write watchpoint");
	cr_expect_eq(hits_other, 0);
	cr_expect_eq(bad_value, 0, "the handler did not see the new value");
	cr_expect_eq(wp.nmissed, 0);
}

Test(wprobe, reads_and_writes)
{
	struct wprobe wp = var8_probe(WPROBE_RW);

	register_or_skip(&wp);
	for (int i = 0; i < 200; i++)
		KEEP(kpt_wload());
	for (long i = 0; i < 100; i++)
		kpt_wstore_b(i);
	unregister_wprobe(&wp);
	cr_expect_eq(hits_load, 200);
	cr_expect_eq(hits_b, 100);
	cr_expect_eq(hits_other, 0);
}

#define NTHREADS 4
#define PER_THREAD 2000

static void *writer(void *arg)
{
	for (long i = 0; i < PER_THREAD; i++)
		(i & 1 ? kpt_wstore_b : kpt_wstore_a)(i);
	return arg;
}

/* Starts a writer from a thread: the grandchild must be watched too, even
 * after its creator exited. */
static void *spawner(void *arg)
{
	pthread_t t;

	cr_assert_eq(pthread_create(&t, NULL, writer, NULL), 0);
	*(pthread_t *)arg = t;
	return NULL;
}

static pthread_barrier_t go;

static void *waiting_writer(void *arg)
{
	pthread_barrier_wait(&go);
	return writer(arg);
}

Test(wprobe, every_thread_present_and_future)
{
	struct wprobe wp = var8_probe(WPROBE_W);
	pthread_t early[NTHREADS], late[NTHREADS], sp, grandchild;

	/* Threads that exist before the registration (waiting), and threads
	 * created after it, one by a thread that exits first. */
	pthread_barrier_init(&go, NULL, NTHREADS + 1);
	for (int i = 0; i < NTHREADS; i++)
		cr_assert_eq(pthread_create(&early[i], NULL, waiting_writer, NULL), 0);
	register_or_skip(&wp);
	pthread_barrier_wait(&go);
	for (int i = 0; i < NTHREADS; i++)
		cr_assert_eq(pthread_create(&late[i], NULL, writer, NULL), 0);
	cr_assert_eq(pthread_create(&sp, NULL, spawner, &grandchild), 0);
	pthread_join(sp, NULL);
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(early[i], NULL);
		pthread_join(late[i], NULL);
	}
	pthread_join(grandchild, NULL);
	unregister_wprobe(&wp);
	cr_expect_eq(hits_a + hits_b, (2 * NTHREADS + 1) * PER_THREAD,
		     "a=%lu b=%lu", hits_a, hits_b);
	cr_expect_eq(hits_a, (2 * NTHREADS + 1) * PER_THREAD / 2);
	cr_expect_eq(hits_other, 0);
}

Test(wprobe, lengths_1_2_4_8)
{
	static const unsigned int lens[] = { 1, 2, 4, 8 };

	for (unsigned int k = 0; k < 4; k++) {
		unsigned int len = lens[k], off = 8;
		struct wprobe wp = { .addr = kpt_wbytes + off, .len = len, .type = WPROBE_W,
				     .handler = plain_handler };

		nhits = 0;
		register_or_skip(&wp);
		/* Inside: every byte of the variable; outside: the bytes
		 * around it. */
		for (unsigned int b = 0; b < len; b++)
			((volatile unsigned char *)kpt_wbytes)[off + b] = (unsigned char)b;
		((volatile unsigned char *)kpt_wbytes)[off - 1] = 1;
		((volatile unsigned char *)kpt_wbytes)[off + len] = 1;
		unregister_wprobe(&wp);
		cr_expect_eq(nhits, len, "len %u: %lu hits", len, nhits);
	}
}

Test(wprobe, bad_arguments)
{
	struct wprobe wp = { .addr = &kpt_wvar8, .len = 8, .type = WPROBE_W };

	wp.len = 3;
	cr_expect_eq(register_wprobe(&wp), -EINVAL);
	wp.len = 16;
	cr_expect_eq(register_wprobe(&wp), -EINVAL);
	wp.len = 4;
	wp.addr = kpt_wbytes + 2;
	cr_expect_eq(register_wprobe(&wp), -EINVAL, "misaligned");
	wp.addr = &kpt_wvar8;
	wp.type = 2;
	cr_expect_eq(register_wprobe(&wp), -EINVAL, "type");
	wp.type = WPROBE_W;
	wp.symbol_name = "kpt_wvar8";
	cr_expect_eq(register_wprobe(&wp), -EINVAL, "both addr and symbol");
	wp.addr = NULL;
	wp.symbol_name = NULL;
	cr_expect_eq(register_wprobe(&wp), -EINVAL, "neither");
	wp.symbol_name = "kpt_no_such_variable";
	cr_expect_eq(register_wprobe(&wp), -ENOENT);
	cr_expect_eq(register_wprobe(NULL), -EINVAL);
	cr_expect_eq(disable_wprobe(&wp), -EINVAL, "not registered");
	cr_expect_eq(enable_wprobe(&wp), -EINVAL, "not registered");
	unregister_wprobe(&wp);
}

Test(wprobe, by_symbol_and_offset)
{
	struct wprobe wp = { .symbol_name = "kpt_wother", .offset = 16, .len = 8,
			     .type = WPROBE_W, .handler = plain_handler };
	volatile long *v = kpt_wother;

	register_or_skip(&wp);
	cr_expect_eq(wp.addr, &kpt_wother[2]);
	v[1] = 1;
	v[2] = 2;
	v[2] = 3;
	cr_expect_eq(register_wprobe(&wp), -EINVAL, "registered twice");
	unregister_wprobe(&wp);
	cr_expect_eq(nhits, 2);
}

Test(wprobe, fifth_refused)
{
	struct wprobe wp[5];
	int i, err = 0;

	for (i = 0; i < 5; i++) {
		wp[i] = (struct wprobe){ .addr = &kpt_wother[i % 4], .len = 8, .type = WPROBE_W,
					 .handler = plain_handler };
		if (i == 4)
			wp[i].addr = &kpt_wvar8;
		if (i == 0)
			register_or_skip(&wp[0]);
		else if ((err = register_wprobe(&wp[i])))
			break;
	}
	cr_expect_eq(i, 4, "the first four register");
	cr_expect_eq(err, -ENOSPC);
	for (int j = 0; j < i; j++)
		unregister_wprobe(&wp[j]);
	/* Freed: a new one fits again. */
	cr_expect_eq(register_wprobe(&wp[4]), 0);
	unregister_wprobe(&wp[4]);
	cr_expect_eq(perf_fds(), 0, "descriptors left open");
}

Test(wprobe, disable_enable)
{
	struct wprobe wp = var8_probe(WPROBE_W);

	register_or_skip(&wp);
	kpt_wstore_a(1);
	cr_expect_eq(disable_wprobe(&wp), 0);
	cr_expect(wp.flags & KPROBE_FLAG_DISABLED);
	kpt_wstore_a(2);
	cr_expect_eq(enable_wprobe(&wp), 0);
	kpt_wstore_a(3);
	unregister_wprobe(&wp);
	cr_expect_eq(hits_a, 2);
	cr_expect_eq(wp.nmissed, 0);
}

Test(wprobe, list_lines)
{
	struct wprobe w = { .symbol_name = "kpt_wvar8", .len = 8, .type = WPROBE_W };
	struct wprobe rw = { .addr = &kpt_wother[1], .len = 4, .type = WPROBE_RW };
	char buf[4096] = "", want[256];
	FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");

	register_or_skip(&w);
	cr_assert_eq(register_wprobe(&rw), 0);
	cr_assert_eq(disable_wprobe(&rw), 0);
	cr_assert_eq(kprobes_list(f), 0);
	fclose(f);
	snprintf(want, sizeof(want), "%016lx  w  kpt_wvar8+0x0  [W]\n", (unsigned long)&kpt_wvar8);
	cr_expect(strstr(buf, want), "want %s in:\n%s", want, buf);
	snprintf(want, sizeof(want), "%016lx  w  kpt_wother+0x8  [RW]  [DISABLED]\n",
		 (unsigned long)&kpt_wother[1]);
	cr_expect(strstr(buf, want), "want %s in:\n%s", want, buf);
	unregister_wprobe(&w);
	unregister_wprobe(&rw);
}

Test(wprobe, unregister_leaves_nothing)
{
	struct wprobe wp = var8_probe(WPROBE_RW);
	pthread_t t[3];

	for (int i = 0; i < 3; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, writer, NULL), 0);
	register_or_skip(&wp);
	cr_expect_gt(perf_fds(), 0);
	unregister_wprobe(&wp);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	hits_a = hits_b = hits_load = 0;
	kpt_wstore_a(1);
	KEEP(kpt_wload());
	cr_expect_eq(hits_a + hits_b + hits_load, 0);
	cr_expect_eq(perf_fds(), 0);
	/* Registered again with the same structure. */
	wp.addr = &kpt_wvar8;
	cr_expect_eq(register_wprobe(&wp), 0);
	kpt_wstore_a(1);
	unregister_wprobe(&wp);
	cr_expect_eq(hits_a, 1);
}

/* The program's own SIGTRAP handler, its own int3 and its own perf
 * breakpoint with sigtrap, next to a watchpoint of ours. */
static volatile unsigned long prog_traps, prog_perf, prog_perf_bad;
long kpt_prog_var __attribute__((aligned(8)));

static volatile int prog_fd = -1;

/* The program's perf event is switched off by its handler and on again
 * before each write: on arm64 its trap comes before the write, which
 * would trap again at the return with the event still on. */
static void prog_trap(int sig, siginfo_t *info, void *ctx)
{
	if (info->si_code == 6 /* TRAP_PERF */) {
		if (*(uint64_t *)((char *)info + 24) == 0x5eed)
			prog_perf++;
		else
			prog_perf_bad++;
		ioctl(prog_fd, PERF_EVENT_IOC_DISABLE, 0);
	} else {
		prog_traps++;
#if defined(__aarch64__)
		((ucontext_t *)ctx)->uc_mcontext.pc += PROGRAM_BREAKPOINT_SKIP;
#endif
	}
}

Test(wprobe, program_sigtrap_and_perf_events)
{
	struct wprobe wp = var8_probe(WPROBE_W);
	struct sigaction sa = { .sa_sigaction = prog_trap, .sa_flags = SA_SIGINFO };
	struct perf_event_attr a = { 0 };
	long fd;

	cr_assert_eq(sigaction(SIGTRAP, &sa, NULL), 0);
	register_or_skip(&wp);
	a.size = sizeof(a);
	a.type = PERF_TYPE_BREAKPOINT;
	a.bp_type = HW_BREAKPOINT_W;
	a.bp_addr = (unsigned long)&kpt_prog_var;
	a.bp_len = 8;
	a.sample_period = 1;
	a.sigtrap = 1;
	a.remove_on_exec = 1;
	a.exclude_kernel = 1;
	a.sig_data = 0x5eed;
	fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	cr_assert_geq(fd, 0, "the program's own perf event");
	prog_fd = (int)fd;
	for (int i = 0; i < 50; i++) {
		ioctl(prog_fd, PERF_EVENT_IOC_ENABLE, 0);
		*(volatile long *)&kpt_prog_var = i;
		kpt_wstore_a(i);
	}
	PROGRAM_BREAKPOINT();
	close((int)fd);
	unregister_wprobe(&wp);
	cr_expect_eq(prog_perf, 50);
	cr_expect_eq(prog_perf_bad, 0);
	cr_expect_eq(prog_traps, 1);
	cr_expect_eq(hits_a, 50);
}

/* A watchpoint hit inside a handler is missed, not run. */
static void nesting_handler(struct wprobe *wp, struct pt_regs *regs)
{
	__atomic_add_fetch(&nhits, 1, __ATOMIC_RELAXED);
	kpt_wstore_b(99);
}

Test(wprobe, hit_in_handler_missed)
{
	struct wprobe wp = { .addr = &kpt_wvar8, .len = 8, .type = WPROBE_W,
			     .handler = nesting_handler };

	register_or_skip(&wp);
	kpt_wstore_a(1);
	kpt_wstore_a(2);
	unregister_wprobe(&wp);
	cr_expect_eq(nhits, 2);
	cr_expect_eq(wp.nmissed, 2);
}

/* fork: the child is watched by its own copy; the parent's count is its own. */
Test(wprobe, fork_child_watched)
{
	struct wprobe wp = { .addr = &kpt_wvar8, .len = 8, .type = WPROBE_W,
			     .handler = plain_handler };
	pid_t pid;
	int status;

	register_or_skip(&wp);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		for (long i = 0; i < 10; i++)
			kpt_wstore_a(i);
		unregister_wprobe(&wp);
		kpt_wstore_a(0);
		_exit((int)nhits);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	kpt_wstore_a(1);
	unregister_wprobe(&wp);
	cr_expect(WIFEXITED(status), "child status %#x", status);
	cr_expect_eq(WEXITSTATUS(status), 10);
	cr_expect_eq(nhits, 1);
}

/* exec: the new program starts unwatched.  It writes to the same address
 * (a fixed mapping): a breakpoint left there would kill it by SIGTRAP. */
#define FIXED_ADDR ((void *)0x2badd0000000UL)

__attribute__((constructor)) static void exec_child(void)
{
	const char *e = getenv("KPT_WPROBE_EXEC");
	volatile long *v;

	if (!e)
		return;
	v = mmap(FIXED_ADDR, 4096, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (v != FIXED_ADDR)
		_exit(3);
	for (int i = 0; i < 100; i++)
		v[0] = i;
	_exit(42);
}

Test(wprobe, exec_unwatched)
{
	void *m = mmap(FIXED_ADDR, 4096, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	struct wprobe wp = { .addr = FIXED_ADDR, .len = 8, .type = WPROBE_W,
			     .handler = plain_handler };
	pid_t pid;
	int status;

	cr_assert_eq(m, FIXED_ADDR);
	register_or_skip(&wp);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		char *argv[] = { "exec-child", NULL };

		/* The watchpoint is armed in this child first.  Its handler
		 * runs in a signal handler: nhits is read after the store. */
		*(volatile long *)FIXED_ADDR = 1;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		if (nhits != 1)
			_exit(4);
		setenv("KPT_WPROBE_EXEC", "1", 1);
		execv("/proc/self/exe", argv);
		_exit(5);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	unregister_wprobe(&wp);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 42,
		  "exec'd child: status %#x", status);
}

/* The global knob turns watchpoints off and on too. */
Test(wprobe, global_knob)
{
	struct wprobe wp = var8_probe(WPROBE_W);

	register_or_skip(&wp);
	kpt_wstore_a(1);
	kprobes_set_enabled(false);
	kpt_wstore_a(2);
	kprobes_set_enabled(true);
	kpt_wstore_a(3);
	unregister_wprobe(&wp);
	cr_expect_eq(hits_a, 2);
}

/* Short-lived threads started one after another: each is watched, and
 * what they leave behind when they exit is nothing (no descriptor per
 * thread, the debug registers freed: four watchpoints still fit in every
 * new thread). */
static void *one_write(void *arg)
{
	kpt_wstore_a((long)arg);
	return NULL;
}

Test(wprobe, exited_threads_leave_nothing)
{
	struct wprobe wp = var8_probe(WPROBE_W), more[3];
	int fds;

	register_or_skip(&wp);
	for (int i = 0; i < 3; i++) {
		more[i] = (struct wprobe){ .addr = &kpt_wother[i], .len = 8, .type = WPROBE_W };
		cr_assert_eq(register_wprobe(&more[i]), 0);
	}
	fds = perf_fds();
	for (long i = 0; i < 300; i++) {
		pthread_t t;

		cr_assert_eq(pthread_create(&t, NULL, one_write, (void *)i), 0);
		pthread_join(t, NULL);
	}
	cr_expect_eq(perf_fds(), fds, "descriptors grew with threads");
	cr_expect_eq(hits_a, 300);
	for (int i = 0; i < 3; i++)
		unregister_wprobe(&more[i]);
	unregister_wprobe(&wp);
	cr_expect_eq(perf_fds(), 0);
}

#if defined(__aarch64__)
/* arm64 steps each access itself (the watchpoint traps before it), out
 * of line or, for a PC-relative load, simulated: every form of access
 * must leave the registers and memory as it would have, and the handler
 * must see them after it, at the next instruction.
 *   kpt_a64_post(v, p):  str x0, [x1], #8   returns p + 8
 *   kpt_a64_ldp(p):      ldp x0, x2, [x1]   returns the first word
 *   kpt_a64_ldadd(v, p): ldadd x0, x2, [x1] returns the old value
 *   kpt_a64_stq(p):      str q0, [x0]       (q0 = 16 bytes of 0x5a)
 *   kpt_a64_literal():   ldr x0, kpt_a64_lit (a literal in the code)
 */
__asm__(".text\n"
	".globl kpt_a64_post\n.type kpt_a64_post,%function\n"
	"kpt_a64_post:\n"
	"\tstr x0, [x1], #8\n"
	".globl kpt_a64_post_end\nkpt_a64_post_end:\n"
	"\tmov x0, x1\n\tret\n"
	".size kpt_a64_post, .-kpt_a64_post\n"

	".globl kpt_a64_ldp\n.type kpt_a64_ldp,%function\n"
	"kpt_a64_ldp:\n"
	"\tmov x1, x0\n"
	"\tldp x0, x2, [x1]\n"
	".globl kpt_a64_ldp_end\nkpt_a64_ldp_end:\n"
	"\tadd x0, x0, x2\n\tret\n"
	".size kpt_a64_ldp, .-kpt_a64_ldp\n"

	".globl kpt_a64_ldadd\n.type kpt_a64_ldadd,%function\n"
	"kpt_a64_ldadd:\n"
	"\t.arch_extension lse\n"
	"\tldadd x0, x2, [x1]\n"
	".globl kpt_a64_ldadd_end\nkpt_a64_ldadd_end:\n"
	"\tmov x0, x2\n\tret\n"
	".size kpt_a64_ldadd, .-kpt_a64_ldadd\n"

	".globl kpt_a64_stq\n.type kpt_a64_stq,%function\n"
	"kpt_a64_stq:\n"
	"\tmovi v0.16b, #0x5a\n"
	"\tstr q0, [x0]\n"
	".globl kpt_a64_stq_end\nkpt_a64_stq_end:\n"
	"\tret\n"
	".size kpt_a64_stq, .-kpt_a64_stq\n"

	".globl kpt_a64_literal\n.type kpt_a64_literal,%function\n"
	"kpt_a64_literal:\n"
	"\tldr x0, kpt_a64_lit\n"
	".globl kpt_a64_literal_end\nkpt_a64_literal_end:\n"
	"\tret\n"
	"\t.balign 8\n"
	".globl kpt_a64_lit\nkpt_a64_lit:\n\t.quad 0x1122334455667788\n"
	".size kpt_a64_literal, .-kpt_a64_literal\n");

long *kpt_a64_post(long v, long *p);
long kpt_a64_ldp(long *p);
long kpt_a64_ldadd(long v, long *p);
void kpt_a64_stq(void *p);
long kpt_a64_literal(void);
extern char kpt_a64_post_end[], kpt_a64_ldp_end[], kpt_a64_ldadd_end[], kpt_a64_stq_end[],
	kpt_a64_literal_end[];
extern const long kpt_a64_lit;

static char *a64_seen_pc;
static long a64_seen_value;
static int a64_seen_reg;

/* A handler's own read of a variable watched for reads is a hit of its
 * own (counted missed): the value is read only under write watchpoints,
 * and taken from the loaded register under read ones. */
static void a64_form_handler(struct wprobe *wp, struct pt_regs *regs)
{
	a64_seen_pc = (char *)regs->pc;
	if (wp->type == WPROBE_W)
		a64_seen_value = *(volatile long *)wp->addr;
	else
		a64_seen_value = (long)regs->regs[a64_seen_reg];
	nhits++;
}

/* One access by fn through the watchpoint on addr: one hit, at end, after
 * the access (the handler read expect there). */
#define ONE_ACCESS(addr_, type_, call, end, expect)					\
	do {										\
		struct wprobe wp = { .addr = (void *)(addr_), .len = 8, .type = (type_),	\
				     .handler = a64_form_handler };			\
		nhits = 0;								\
		a64_seen_pc = NULL;							\
		register_or_skip(&wp);							\
		call;									\
		unregister_wprobe(&wp);							\
		cr_expect_eq(nhits, 1, "%s: %lu hits", #call, nhits);			\
		cr_expect_eq(a64_seen_pc, (end), "%s: handler at %p", #call, a64_seen_pc); \
		cr_expect_eq(a64_seen_value, (long)(expect), "%s: saw %#lx", #call,	\
			     a64_seen_value);						\
		cr_expect_eq(wp.nmissed, 0);						\
	} while (0)

Test(wprobe, a64_every_form_of_access)
{
	static long buf[4] __attribute__((aligned(16)));
	long *after = NULL, r = 0;

	buf[0] = 1;
	ONE_ACCESS(&buf[0], WPROBE_W, after = kpt_a64_post(77, &buf[0]), kpt_a64_post_end, 77);
	cr_expect_eq(after, &buf[1], "post-index write-back");
	cr_expect_eq(buf[0], 77);

	buf[0] = 40;
	buf[1] = 2;
	a64_seen_reg = 2;
	ONE_ACCESS(&buf[1], WPROBE_RW, r = kpt_a64_ldp(&buf[0]), kpt_a64_ldp_end, 2);
	cr_expect_eq(r, 42, "the pair loaded");

	buf[2] = 100;
	ONE_ACCESS(&buf[2], WPROBE_W, r = kpt_a64_ldadd(5, &buf[2]), kpt_a64_ldadd_end, 105);
	cr_expect_eq(r, 100, "the old value");
	cr_expect_eq(buf[2], 105);

	memset(buf, 0, sizeof(buf));
	ONE_ACCESS(&buf[1], WPROBE_W, kpt_a64_stq(&buf[0]), kpt_a64_stq_end, 0x5a5a5a5a5a5a5a5aL);
	cr_expect_eq(buf[0], 0x5a5a5a5a5a5a5a5aL, "the vector store's first half");

	a64_seen_reg = 0;
	ONE_ACCESS(&kpt_a64_lit, WPROBE_RW, r = kpt_a64_literal(), kpt_a64_literal_end,
		   0x1122334455667788L);
	cr_expect_eq(r, 0x1122334455667788L, "the literal loaded");
}

/* Many threads stepping accesses at once, each in its own slot, while a
 * signal handler of the program's (which the step holds off) runs too. */
static volatile unsigned long a64_usr1;

static void a64_on_usr1(int sig)
{
	a64_usr1++;
}

Test(wprobe, a64_steps_under_threads_and_signals)
{
	struct wprobe wp = var8_probe(WPROBE_W);
	pthread_t t[NTHREADS];
	struct sigaction sa = { .sa_handler = a64_on_usr1 };

	sigaction(SIGUSR1, &sa, NULL);
	register_or_skip(&wp);
	for (int i = 0; i < NTHREADS; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, writer, NULL), 0);
	for (int i = 0; i < 200; i++) {
		pthread_kill(t[i % NTHREADS], SIGUSR1);
		usleep(100);
	}
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	unregister_wprobe(&wp);
	/* (the value seen may be another thread's, written since) */
	cr_expect_eq(hits_a + hits_b, NTHREADS * PER_THREAD, "a=%lu b=%lu", hits_a, hits_b);
	cr_expect_eq(hits_other, 0);
	cr_expect_eq(wp.nmissed, 0);
}
#endif

#if defined(__aarch64__)
/* A handler that meets a breakpoint: the trap must be open (a BRK with
 * SIGTRAP blocked would kill the process), on every way the step ends. */
__attribute__((noinline)) long kpt_a64_probed(long x);
__attribute__((noinline)) long kpt_a64_probed(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}

static int a64_probed_pre(struct kprobe *p, struct pt_regs *regs)
{
	return 0;
}

static void a64_calling_handler(struct wprobe *wp, struct pt_regs *regs)
{
	nhits += kpt_a64_probed(0);
}

Test(wprobe, a64_breakpoint_in_handler)
{
	struct wprobe wp = { .addr = &kpt_wvar8, .len = 8, .type = WPROBE_W,
			     .handler = a64_calling_handler };
	struct kprobe kp = { .addr = (void *)kpt_a64_probed, .pre_handler = a64_probed_pre };

	kprobes_set_optimization(false);
	cr_assert_eq(register_kprobe(&kp), 0);
	register_or_skip(&wp);
	for (long i = 0; i < 100; i++)
		kpt_wstore_a(i);
	unregister_wprobe(&wp);
	unregister_kprobe(&kp);
	cr_expect_eq(nhits, 100);
	cr_expect_eq(kp.nmissed, 100, "a hit inside a handler is missed");
}
#endif
