/* Probes and the program's signals: faults in probed instructions are seen
 * at the original address, the program's own SIGTRAP/SIGSEGV handlers keep
 * working and are virtualized, default actions still kill, and a probed
 * syscall instruction leaves rcx/r11 as the kernel set them. */
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "testutil.h"

TestSuite(signals, .timeout = 10);

/*   kpt_fault_load+0  mov (%rdi),%rax  (3)   +3 ret
 *   kpt_fault_mid+0   mov %rdi,%rax    (3)   +3 mov (%rax),%rax (3)  +6 ret
 *   kpt_div+0 mov %rdi,%rax (3)  +3 cqo (2)  +5 idiv %rsi (3)  +8 ret
 *   kpt_stray_int3+0  int3   +1 ret
 *   kpt_sc_getpid+0 mov $39,%eax (5)  +5 syscall (2)  +7 ret
 *   kpt_sc_regs(out): +0 mov $39,%eax (5)  +5 pushfq (1)  +6 popq 16(%rdi) (3)
 *                     +9 syscall (2)  +11 mov %rcx,(%rdi) (3)
 *                     +14 mov %r11,8(%rdi) (4)  +18 ret
 */
__asm__(".text\n"
	".globl kpt_fault_load\n.type kpt_fault_load,@function\n"
	"kpt_fault_load:\n"
	"\tmov (%rdi), %rax\n"
	"\tret\n"
	".size kpt_fault_load, .-kpt_fault_load\n"

	".globl kpt_fault_mid\n.type kpt_fault_mid,@function\n"
	"kpt_fault_mid:\n"
	"\tmov %rdi, %rax\n"
	"\tmov (%rax), %rax\n"
	"\tret\n"
	".size kpt_fault_mid, .-kpt_fault_mid\n"

	".globl kpt_div\n.type kpt_div,@function\n"
	"kpt_div:\n"
	"\tmov %rdi, %rax\n"
	"\tcqo\n"
	"\tidiv %rsi\n"
	"\tret\n"
	".size kpt_div, .-kpt_div\n"

	".globl kpt_stray_int3\n.type kpt_stray_int3,@function\n"
	"kpt_stray_int3:\n"
	"\tint3\n"
	"\tret\n"
	".size kpt_stray_int3, .-kpt_stray_int3\n"

	".globl kpt_sc_getpid\n.type kpt_sc_getpid,@function\n"
	"kpt_sc_getpid:\n"
	"\tmov $39, %eax\n"
	"\tsyscall\n"
	"\tret\n"
	".size kpt_sc_getpid, .-kpt_sc_getpid\n"

	".globl kpt_sc_regs\n.type kpt_sc_regs,@function\n"
	"kpt_sc_regs:\n"
	"\tmov $39, %eax\n"
	"\tpushfq\n"
	"\tpopq 16(%rdi)\n"
	"\tsyscall\n"
	"\tmov %rcx, (%rdi)\n"
	"\tmov %r11, 8(%rdi)\n"
	"\tret\n"
	".size kpt_sc_regs, .-kpt_sc_regs\n");

long kpt_fault_load(const long *p);
long kpt_fault_mid(const long *p);
long kpt_div(long a, long b);
void kpt_stray_int3(void);
long kpt_sc_getpid(void);
long kpt_sc_regs(unsigned long out[3]);

long kpt_sig_fn(long x);
TEST_FN long kpt_sig_fn(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 4 + 1;
}

static long (*volatile call_fault_load)(const long *) = kpt_fault_load;
static long (*volatile call_fault_mid)(const long *) = kpt_fault_mid;
static long (*volatile call_div)(long, long) = kpt_div;
static void (*volatile call_stray_int3)(void) = kpt_stray_int3;
static long (*volatile call_sc_getpid)(void) = kpt_sc_getpid;
static long (*volatile call_sc_regs)(unsigned long *) = kpt_sc_regs;
static long (*volatile call_fn)(long) = kpt_sig_fn;

/* Counters live in shared memory so that a forked child's hits are seen. */
struct counters {
	long pre, post, fault, last_trapnr;
	unsigned long pre_ip, post_ip, pre_ax, post_ax;
	unsigned long fault_ip;
};
static struct counters *cnt;

static void init_counters(void)
{
	if (cnt)
		return;
	cnt = mmap(NULL, sizeof(*cnt), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(cnt, MAP_FAILED);
	memset(cnt, 0, sizeof(*cnt));
}

static int pre_h(struct kprobe *p, struct pt_regs *regs)
{
	cnt->pre++;
	cnt->pre_ip = regs->ip;
	cnt->pre_ax = regs->ax;
	return 0;
}

static void post_h(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
	cnt->post++;
	cnt->post_ip = regs->ip;
	cnt->post_ax = regs->ax;
}

static int fault_h(struct kprobe *p, struct pt_regs *regs, int trapnr)
{
	cnt->fault++;
	cnt->last_trapnr = trapnr;
	cnt->fault_ip = regs->ip;
	return 0;
}

static void kp_init_probe(struct kprobe *p, void *addr, bool post, bool fault)
{
	init_counters();
	memset(p, 0, sizeof(*p));
	p->addr = addr;
	p->pre_handler = pre_h;
	p->post_handler = post ? post_h : NULL;
	p->fault_handler = fault ? fault_h : NULL;
}

/* ---- the program's own fault handler ---- */

static sigjmp_buf jb;
static volatile unsigned long prog_rip, prog_rax;
static void *volatile prog_addr;
static volatile int prog_sig, prog_count;
static volatile long in_handler_result;

static void prog_fault_handler(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;

	prog_sig = sig;
	prog_rip = (unsigned long)uc->uc_mcontext.gregs[REG_RIP];
	prog_rax = (unsigned long)uc->uc_mcontext.gregs[REG_RAX];
	prog_addr = si->si_addr;
	prog_count++;
	/* a probe hit inside the program's signal handler counts normally */
	in_handler_result = call_fn(1);
	siglongjmp(jb, 1);
}

static void install_prog_handler(int sig)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = prog_fault_handler;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(sig, &sa, NULL), 0);
}

/* Calls kpt_fault_load(p) expecting a SIGSEGV; returns true if it came. */
static bool faulted_load(const long *p)
{
	if (sigsetjmp(jb, 1) == 0) {
		call_fault_load(p);
		return false;
	}
	return true;
}

static void fault_at_original_address(bool post)
{
	struct kprobe p, q;
	long v = 77;

	kp_init_probe(&p, (void *)kpt_fault_load, post, true);
	install_prog_handler(SIGSEGV);
	cr_assert_eq(register_kprobe(&p), 0);
	for (int i = 1; i <= 3; i++) {
		cr_assert(faulted_load(NULL), "no SIGSEGV reached the program");
		cr_expect_eq(prog_count, i);
		cr_expect_eq(prog_sig, SIGSEGV);
		cr_expect_eq(prog_rip, (unsigned long)kpt_fault_load,
			     "program saw the fault at %#lx, not at the probed %p", prog_rip,
			     (void *)kpt_fault_load);
		cr_expect_null(prog_addr);
		cr_expect_eq(cnt->pre, i);
		cr_expect_eq(cnt->fault, i);
		cr_expect_eq(cnt->last_trapnr, 14);
		cr_expect_eq(cnt->fault_ip, (unsigned long)kpt_fault_load);
		cr_expect_eq(cnt->post, 0, "post handler ran for an instruction that faulted");
		cr_expect_eq(in_handler_result, 5);
	}
	/* another bad address */
	cr_assert(faulted_load((const long *)16));
	cr_expect_eq(prog_addr, (void *)16);
	cr_expect_eq(prog_rip, (unsigned long)kpt_fault_load);
	cr_expect_eq(cnt->fault, 4);
	/* and the probe keeps working for good calls */
	cr_expect_eq(call_fault_load(&v), 77);
	cr_expect_eq(cnt->pre, 5);
	cr_expect_eq(cnt->post, post ? 1 : 0);
	if (post)
		cr_expect_eq(cnt->post_ip, (unsigned long)kpt_fault_load + 3);

	/* a probe on kpt_sig_fn counted the calls from the program's handler */
	kp_init_probe(&q, (void *)kpt_sig_fn, false, false);
	cr_assert_eq(register_kprobe(&q), 0);
	long pre_before = cnt->pre;

	cr_assert(faulted_load(NULL));
	cr_expect_eq(cnt->pre, pre_before + 2, "probe hit inside the program's handler lost");
	unregister_kprobe(&q);
	unregister_kprobe(&p);
	cr_assert(faulted_load(NULL));
	cr_expect_eq(prog_rip, (unsigned long)kpt_fault_load);
}

Test(signals, fault_seen_at_probed_address)
{
	fault_at_original_address(false);
}

Test(signals, fault_seen_at_probed_address_with_post_handler)
{
	fault_at_original_address(true);
}

Test(signals, fault_without_fault_handler)
{
	struct kprobe p;

	kp_init_probe(&p, (void *)kpt_fault_load, true, false);
	install_prog_handler(SIGSEGV);
	cr_assert_eq(register_kprobe(&p), 0);
	cr_assert(faulted_load(NULL));
	cr_expect_eq(prog_rip, (unsigned long)kpt_fault_load);
	cr_expect_eq(cnt->pre, 1);
	unregister_kprobe(&p);
}

/* Registers as the program sees them at the fault: rax holds the pointer. */
Test(signals, fault_mid_function_registers)
{
	struct kprobe p;

	kp_init_probe(&p, (char *)kpt_fault_mid + 3, false, true);
	install_prog_handler(SIGSEGV);
	cr_assert_eq(register_kprobe(&p), 0);
	if (sigsetjmp(jb, 1) == 0) {
		call_fault_mid((const long *)0x28);
		cr_assert_fail("no SIGSEGV");
	}
	cr_expect_eq(prog_rip, (unsigned long)kpt_fault_mid + 3);
	cr_expect_eq(prog_rax, 0x28);
	cr_expect_eq(prog_addr, (void *)0x28);
	cr_expect_eq(cnt->fault, 1);
	cr_expect_eq(cnt->last_trapnr, 14);
	unregister_kprobe(&p);
}

static int fixup_fault_h(struct kprobe *p, struct pt_regs *regs, int trapnr)
{
	cnt->fault++;
	cnt->last_trapnr = trapnr;
	/* skip the load: continue at the ret with a result */
	regs->ax = 0x1234;
	regs->ip = (unsigned long)kpt_fault_load + 3;
	return 1;
}

Test(signals, fault_handler_that_handles)
{
	struct kprobe p;

	kp_init_probe(&p, (void *)kpt_fault_load, false, false);
	p.fault_handler = fixup_fault_h;
	install_prog_handler(SIGSEGV);
	cr_assert_eq(register_kprobe(&p), 0);
	if (sigsetjmp(jb, 1) == 0) {
		cr_expect_eq(call_fault_load(NULL), 0x1234);
	} else {
		cr_assert_fail("the program's handler ran although the fault_handler returned 1");
	}
	cr_expect_eq(prog_count, 0);
	cr_expect_eq(cnt->fault, 1);
	cr_expect_eq(cnt->last_trapnr, 14);
	unregister_kprobe(&p);
}

Test(signals, divide_error_in_probed_instruction)
{
	struct kprobe p;
	int hit = 0;

	kp_init_probe(&p, (char *)kpt_div + 5, true, true);
	install_prog_handler(SIGFPE);
	cr_assert_eq(register_kprobe(&p), 0);
	cr_expect_eq(call_div(42, 5), 8);
	cr_expect_eq(cnt->post, 1);
	if (sigsetjmp(jb, 1) == 0)
		call_div(42, 0);
	else
		hit = 1;
	cr_assert(hit, "no SIGFPE");
	cr_expect_eq(prog_sig, SIGFPE);
	cr_expect_eq(prog_rip, (unsigned long)kpt_div + 5);
	cr_expect_eq(prog_addr, (void *)((char *)kpt_div + 5));
	cr_expect_eq(cnt->fault, 1);
	cr_expect_eq(cnt->last_trapnr, 0);
	cr_expect_eq(cnt->post, 1);
	unregister_kprobe(&p);
}

/* ---- the program's own SIGTRAP handler ---- */

static volatile int trap_count, trap_code;
static volatile unsigned long trap_rip;
static volatile long trap_handler_result;

static void prog_trap_handler(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;

	trap_count++;
	trap_code = si->si_code;
	trap_rip = (unsigned long)uc->uc_mcontext.gregs[REG_RIP];
	trap_handler_result = call_fn(2);
}

static volatile int simple_trap_count;

static void prog_trap_simple(int sig)
{
	simple_trap_count++;
}

Test(signals, program_sigtrap_handler_after_probes)
{
	struct kprobe p;
	struct sigaction sa;

	kp_init_probe(&p, (void *)kpt_sig_fn, true, false);
	cr_assert_eq(register_kprobe(&p), 0);
	cr_expect_eq(call_fn(0), 1);
	cr_expect_eq(cnt->pre, 1);

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = prog_trap_handler;
	sa.sa_flags = SA_SIGINFO;
	cr_assert_eq(sigaction(SIGTRAP, &sa, NULL), 0);
	for (long i = 0; i < 20; i++)
		cr_assert_eq(call_fn(i), 4 * i + 1);
	cr_expect_eq(cnt->pre, 21);
	cr_expect_eq(cnt->post, 21);
	cr_expect_eq(trap_count, 0, "a probe hit reached the program's SIGTRAP handler");

	cr_assert_eq(raise(SIGTRAP), 0);
	cr_expect_eq(trap_count, 1);
	cr_expect_eq(trap_code, SI_TKILL);
	/* the probed function called from the program's handler was counted */
	cr_expect_eq(trap_handler_result, 9);
	cr_expect_eq(cnt->pre, 22);

	call_stray_int3();
	cr_expect_eq(trap_count, 2);
	cr_expect_eq(trap_code, SI_KERNEL);
	cr_expect_eq(trap_rip, (unsigned long)kpt_stray_int3 + 1);
	cr_expect_eq(cnt->pre, 23);

	cr_expect_eq(call_fn(3), 13);
	cr_expect_eq(cnt->pre, 24);

	/* signal() form, then SIG_IGN */
	cr_assert_neq(signal(SIGTRAP, prog_trap_simple), SIG_ERR);
	call_stray_int3();
	raise(SIGTRAP);
	cr_expect_eq(simple_trap_count, 2);
	cr_expect_eq(trap_count, 2);
	cr_assert_eq(signal(SIGTRAP, SIG_IGN), prog_trap_simple);
	raise(SIGTRAP);
	cr_expect_eq(call_fn(3), 13);
	cr_expect_eq(cnt->pre, 25);
	unregister_kprobe(&p);
}

static void prog_usr1_handler(int sig)
{
	trap_handler_result = call_fn(10);
}

Test(signals, probe_hit_in_program_signal_handler)
{
	struct kprobe p;
	struct sigaction sa;

	kp_init_probe(&p, (void *)kpt_sig_fn, true, false);
	cr_assert_eq(register_kprobe(&p), 0);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = prog_usr1_handler;
	sigfillset(&sa.sa_mask);	/* the handler runs with everything blocked */
	cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);
	cr_assert_eq(raise(SIGUSR1), 0);
	cr_expect_eq(trap_handler_result, 41);
	cr_expect_eq(cnt->pre, 1);
	cr_expect_eq(cnt->post, 1);
	unregister_kprobe(&p);
}

/* ---- virtualized dispositions ---- */

static void h1(int sig)
{
}

static void h2(int sig)
{
}

static void h3(int sig, siginfo_t *si, void *ctx)
{
}

Test(signals, virtualized_dispositions)
{
	struct sigaction sa, old;
	sighandler_t prev;

	/* the library owns SIGTRAP; the program never set it */
	cr_assert_eq(sigaction(SIGTRAP, NULL, &old), 0);
	cr_expect_eq(old.sa_handler, SIG_DFL, "SIGTRAP query shows %p, not SIG_DFL",
		     (void *)old.sa_handler);

	cr_assert_eq(sigaction(SIGSEGV, NULL, &old), 0);
	prev = old.sa_handler;
	cr_expect_eq(signal(SIGSEGV, h1), prev);
	cr_expect_eq(signal(SIGSEGV, h2), h1);
	cr_assert_eq(sigaction(SIGSEGV, NULL, &old), 0);
	cr_expect_eq(old.sa_handler, h2);

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = h3;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGUSR1);
	cr_assert_eq(sigaction(SIGSEGV, &sa, &old), 0);
	cr_expect_eq(old.sa_handler, h2);
	cr_assert_eq(sigaction(SIGSEGV, NULL, &old), 0);
	cr_expect_eq(old.sa_sigaction, h3);
	cr_expect(old.sa_flags & SA_SIGINFO);
	cr_expect(old.sa_flags & SA_ONSTACK);
	cr_expect(sigismember(&old.sa_mask, SIGUSR1));
	cr_expect_eq((void *)signal(SIGSEGV, SIG_DFL), (void *)h3);
	cr_assert_eq(sigaction(SIGSEGV, NULL, &old), 0);
	cr_expect_eq(old.sa_handler, SIG_DFL);

	/* the same for SIGTRAP */
	cr_expect_eq(signal(SIGTRAP, h1), SIG_DFL);
	cr_assert_eq(sigaction(SIGTRAP, NULL, &old), 0);
	cr_expect_eq(old.sa_handler, h1);
	cr_expect_eq(signal(SIGTRAP, SIG_DFL), h1);

	/* and probes still work after all that */
	struct kprobe p;

	kp_init_probe(&p, (void *)kpt_sig_fn, false, false);
	cr_assert_eq(register_kprobe(&p), 0);
	cr_expect_eq(call_fn(1), 5);
	cr_expect_eq(cnt->pre, 1);
	unregister_kprobe(&p);
}

/* ---- default actions ---- */

static void no_core(void)
{
	struct rlimit rl = { 0, 0 };

	setrlimit(RLIMIT_CORE, &rl);
}

/* Forks a child that runs fn with the probe p armed; returns its status. */
static int child_status(struct kprobe *p, void (*fn)(void))
{
	int status;
	pid_t pid;

	cr_assert_eq(register_kprobe(p), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		no_core();
		fn();
		_exit(0);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	unregister_kprobe(p);
	return status;
}

static void child_null_load_dfl(void)
{
	signal(SIGSEGV, SIG_DFL);
	call_fault_load(NULL);
}

static void child_null_load_ign(void)
{
	signal(SIGSEGV, SIG_IGN);
	call_fault_load(NULL);
}

static void child_stray_int3(void)
{
	signal(SIGTRAP, SIG_DFL);
	call_stray_int3();
}

static void expect_killed_by(int status, int sig)
{
	cr_expect(WIFSIGNALED(status), "child was not killed (exit status %d)",
		  WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	if (WIFSIGNALED(status))
		cr_expect_eq(WTERMSIG(status), sig, "child killed by signal %d, want %d",
			     WTERMSIG(status), sig);
}

Test(signals, default_action_kills_with_sigsegv)
{
	struct kprobe p;

	kp_init_probe(&p, (void *)kpt_fault_load, false, false);
	expect_killed_by(child_status(&p, child_null_load_dfl), SIGSEGV);
	cr_expect_eq(cnt->pre, 1, "the child did not hit the probe");
}

Test(signals, default_action_kills_with_sigsegv_post_mode)
{
	struct kprobe p;

	kp_init_probe(&p, (void *)kpt_fault_load, true, true);
	expect_killed_by(child_status(&p, child_null_load_dfl), SIGSEGV);
	cr_expect_eq(cnt->pre, 1);
	cr_expect_eq(cnt->fault, 1);
	cr_expect_eq(cnt->post, 0);
}

Test(signals, ignored_sigsegv_from_fault_still_kills)
{
	struct kprobe p;

	kp_init_probe(&p, (void *)kpt_fault_load, false, false);
	expect_killed_by(child_status(&p, child_null_load_ign), SIGSEGV);
	cr_expect_eq(cnt->pre, 1);
}

Test(signals, stray_int3_default_kills_with_sigtrap)
{
	struct kprobe p;

	kp_init_probe(&p, (void *)kpt_sig_fn, false, false);
	expect_killed_by(child_status(&p, child_stray_int3), SIGTRAP);
}

/* ---- a probed syscall instruction ---- */

static void syscall_probe(bool post)
{
	struct kprobe p;
	pid_t pid = (pid_t)syscall(SYS_getpid);
	unsigned long plain[3], probed[3];

	cr_assert_eq(call_sc_getpid(), pid);
	cr_assert_eq(call_sc_regs(plain), pid);
	cr_assert_eq(plain[0], (unsigned long)kpt_sc_regs + 11, "the test itself is wrong");
	cr_assert_eq(plain[1], plain[2], "the test itself is wrong: r11 %#lx, flags %#lx",
		     plain[1], plain[2]);

	kp_init_probe(&p, (char *)kpt_sc_getpid + 5, post, false);
	cr_assert_eq(register_kprobe(&p), 0);
	for (int i = 0; i < 10; i++)
		cr_assert_eq(call_sc_getpid(), pid);
	cr_expect_eq(cnt->pre, 10);
	cr_expect_eq(cnt->pre_ip, (unsigned long)kpt_sc_getpid + 6);
	cr_expect_eq(cnt->pre_ax, 39);
	if (post) {
		cr_expect_eq(cnt->post, 10);
		cr_expect_eq(cnt->post_ip, (unsigned long)kpt_sc_getpid + 7);
		cr_expect_eq(cnt->post_ax, (unsigned long)pid);
	}
	unregister_kprobe(&p);

	kp_init_probe(&p, (char *)kpt_sc_regs + 9, post, false);
	cr_assert_eq(register_kprobe(&p), 0);
	for (int i = 0; i < 10; i++) {
		memset(probed, 0, sizeof(probed));
		cr_assert_eq(call_sc_regs(probed), pid);
		cr_assert_eq(probed[0], (unsigned long)kpt_sc_regs + 11,
			     "rcx after the probed syscall is %#lx, want %p", probed[0],
			     (void *)((char *)kpt_sc_regs + 11));
		cr_assert_eq(probed[1], probed[2], "r11 %#lx != rflags %#lx before the syscall",
			     probed[1], probed[2]);
	}
	cr_expect_eq(cnt->pre, 20);
	unregister_kprobe(&p);
	cr_expect_eq(call_sc_regs(probed), pid);
	cr_expect_eq(probed[0], (unsigned long)kpt_sc_regs + 11);
}

Test(signals, probed_syscall_instruction)
{
	syscall_probe(false);
}

Test(signals, probed_syscall_instruction_post_handler)
{
	syscall_probe(true);
}
