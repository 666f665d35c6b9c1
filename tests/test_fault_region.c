/* A fault in the second instruction of an optimized region: the program's
 * handler sees it at that instruction's own address, fixes the cause and
 * returns; execution must go on from the copy, not from the middle of the
 * installed jump. */
#include "testutil.h"

#include <signal.h>
#include <stdint.h>
#include <ucontext.h>
#include <sys/mman.h>
#include <unistd.h>

long fr_loadit(long a, long *p);
__asm__(".text\n.globl fr_loadit\n.type fr_loadit,@function\nfr_loadit:\n"
	"  mov %rdi, %rax\n"
	".globl fr_loadit_load\nfr_loadit_load:\n"
	"  mov (%rsi), %rdx\n"
	"  add %rdx, %rax\n"
	"  ret\n.size fr_loadit, .-fr_loadit\n");
extern char fr_loadit_load[];

static long *page;
static volatile uintptr_t fault_ip;

static void on_segv(int sig, siginfo_t *si, void *ctx)
{
	fault_ip = (uintptr_t)((ucontext_t *)ctx)->uc_mcontext.gregs[REG_RIP];
	mprotect(page, 4096, PROT_READ | PROT_WRITE);
}

static int empty_pre(struct kprobe *p, struct pt_regs *r)
{
	return 0;
}

Test(fault_region, second_copied_instruction_resumes_in_copy, .timeout = 10)
{
	struct kprobe kp = { .symbol_name = "fr_loadit", .pre_handler = empty_pre };
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO;
	cr_assert_eq(sigaction(SIGSEGV, &sa, NULL), 0);
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(page, MAP_FAILED);
	page[0] = 5;
	kprobes_set_optimization(true);
	cr_assert_eq(register_kprobe(&kp), 0);
	for (int i = 0; i < 2000 && !(kp.flags & KPROBE_FLAG_OPTIMIZED); i++)
		usleep(1000);
	cr_assert(kp.flags & KPROBE_FLAG_OPTIMIZED, "not optimized");
	mprotect(page, 4096, PROT_NONE);
	cr_assert_eq(fr_loadit(10, page), 15);
	cr_assert_eq(fault_ip, (uintptr_t)fr_loadit_load, "fault seen at %#lx", (unsigned long)fault_ip);
	unregister_kprobe(&kp);
}
