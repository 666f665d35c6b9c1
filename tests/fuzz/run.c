/*
 * Running one case: every mode in a child of its own, so that probes,
 * slots and detours never outlive the run, and a crash is a result.  The
 * parent (the fuzzer) never registers a probe.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include <kprobes.h>
#include "core/internal.h"
#include "fuzz.h"

const char *const fz_mode_name[M_NMODES] = {
	"base", "step", "boost", "opt", "sparse", "clobber",
};

/* Copies the code into the sandbox (parent, before any child runs). */
int fz_install(struct fz_case *c)
{
	if (mprotect(fuzz_sandbox, FZ_SANDBOX_SIZE, PROT_READ | PROT_WRITE))
		return -errno;
	memset(fuzz_sandbox, 0xcc, FZ_SANDBOX_SIZE);
	memcpy(fuzz_sandbox, c->code, c->code_len);
	if (mprotect(fuzz_sandbox, FZ_SANDBOX_SIZE, PROT_READ | PROT_EXEC))
		return -errno;
	return 0;
}

uint64_t fz_regs_hash(const uint64_t g[16], uint64_t flags)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (int i = 0; i < 16; i++)
		h = (h ^ g[i]) * 0x100000001b3ULL;
	return (h ^ (flags & 0xcd5)) * 0x100000001b3ULL;
}

/* The probes of the sparse mode: a random subset at least 5 bytes apart,
 * so that many of them can take a jump. */
bool fz_sparse_pick(const struct fz_case *c, int b)
{
	uint64_t s = c->seed ^ 0x5bd1e995;
	uint32_t last = 0;
	bool pick = false;

	for (int i = 0; i <= b; i++) {
		pick = c->boff[i] >= last + 5 && fz_rand(&s) % 3 != 0;
		if (pick)
			last = c->boff[i];
	}
	return pick;
}

/* ---- in the child ---- */

struct fprobe {
	struct kprobe kp;
	int b;
};

static struct fprobe probes[FZ_MAX_INSN];
static struct fz_result *cur;
static uint64_t cur_level;
static bool clobber;
bool fz_self_test;

static void record(struct fprobe *fp, struct pt_regs *regs)
{
	uint64_t g[16] = { regs->ax, regs->bx, regs->cx, regs->dx, regs->si, regs->di, regs->bp,
			   regs->r8, regs->r9, regs->r10, regs->r11, regs->r12, regs->r13, regs->r14,
			   regs->r15, regs->sp };
	int n = cur->nhits;

	if (n < FZ_MAX_HITS) {
		cur->hits[n].b = (uint16_t)fp->b;
		cur->hits[n].hash = fz_regs_hash(g, regs->flags);
	}
	cur->nhits = n + 1;
}

static int pre(struct kprobe *p, struct pt_regs *regs)
{
	struct fprobe *fp = (struct fprobe *)p;

	cur->pre[fp->b]++;
	if (regs->ip != (unsigned long)p->addr + 1)
		cur->bad_ip++;
	record(fp, regs);
	/* --self-test: the boosted mode's handler at the third boundary
	 * corrupts the carry flag, which the comparison must notice. */
	if (fz_self_test && !clobber && !p->post_handler && fp->b == 2 &&
	    !kprobes_optimization())
		regs->flags ^= 1;
	if (clobber)
		fuzz_clobber_vectors(cur_level);
	return 0;
}

static void post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
	struct fprobe *fp = (struct fprobe *)p;

	cur->post[fp->b]++;
	if (clobber)
		fuzz_clobber_vectors(cur_level);
}

static void on_fault(int sig, siginfo_t *si, void *uc_)
{
	ucontext_t *uc = uc_;

	cur->sig = sig;
	cur->fault_addr = (uint64_t)(uintptr_t)si->si_addr;
	cur->fault_rip = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
	cur->status = FS_FAULT;
	_exit(0);
}

static void catch_faults(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	sigaction(SIGILL, &sa, NULL);
	sigaction(SIGFPE, &sa, NULL);
}

static void arm(const struct fz_case *c, int mode)
{
	bool optimize = mode == M_OPT || mode == M_SPARSE;

	kprobes_set_optimization(optimize);
	clobber = mode == M_SPARSE || mode == M_CLOBBER;
	for (int b = 0; b < c->nb; b++) {
		struct fprobe *fp = &probes[b];

		cur->reg_err[b] = 1;
		if (mode == M_SPARSE && !fz_sparse_pick(c, b))
			continue;
		memset(fp, 0, sizeof(*fp));
		fp->b = b;
		fp->kp.addr = fuzz_sandbox + c->boff[b];
		fp->kp.pre_handler = pre;
		fp->kp.post_handler = mode == M_STEP || mode == M_CLOBBER ? post : NULL;
		cur->reg_err[b] = register_kprobe(&fp->kp);
	}
	if (!optimize)
		return;
	/* The optimizer's pass, now rather than 5 ms from now; a second one
	 * for probes a census held back. */
	for (int pass = 0; pass < 2; pass++) {
		pthread_mutex_lock(&kp_registry_lock);
		kp_optimizer_flush();
		pthread_mutex_unlock(&kp_registry_lock);
	}
	for (int b = 0; b < c->nb; b++)
		cur->optimized[b] = !cur->reg_err[b] &&
				    (__atomic_load_n(&probes[b].kp.flags, __ATOMIC_ACQUIRE) &
				     KPROBE_FLAG_OPTIMIZED);
}

static void copy_out(struct fz_result *r, const struct fz_state *out)
{
	r->out = *out;
	memcpy(r->data, fuzz_data, FZ_DATA_SIZE);
	memcpy(r->stack, fuzz_stack + FZ_STACK_TOP - 8 - FZ_RED, FZ_STACK_CMP);
}

static void child(const struct fz_case *c, int mode, struct fz_result *r)
{
	static struct fz_state in, out;

	cur = r;
	cur_level = (uint64_t)c->level;
	alarm(20);
	catch_faults();
	fz_make_state(c, &in, fuzz_data, fuzz_stack);
	if (mode != M_BASE)
		arm(c, mode);
	fuzz_run(&in, &out);
	copy_out(r, &out);
	r->status = FS_OK;
	_exit(0);
}

void fz_run_mode(const struct fz_case *c, int mode, struct fz_result *r)
{
	int st;
	pid_t pid;

	memset(r, 0, offsetof(struct fz_result, hits));
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		r->status = FS_SETUP;
		return;
	}
	if (pid == 0)
		child(c, mode, r);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (r->status != FS_NONE)
		return;
	r->status = WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM ? FS_TIMEOUT : FS_CRASH;
	r->sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

/* ---- the reference trace: hardware single-steps under ptrace ---- */

static int boundary_at(const struct fz_case *c, uint32_t off)
{
	int lo = 0, hi = c->nb;

	while (lo < hi) {
		int m = (lo + hi) / 2;

		if (c->boff[m] < off)
			lo = m + 1;
		else
			hi = m;
	}
	return lo < c->nb && c->boff[lo] == off ? lo : -1;
}

static void trace_child(const struct fz_case *c)
{
	static struct fz_state in, out;

	fz_make_state(c, &in, fuzz_data, fuzz_stack);
	if (ptrace(PTRACE_TRACEME, 0, NULL, NULL))
		_exit(1);
	raise(SIGSTOP);
	fuzz_run(&in, &out);
	_exit(0);
}

/* The trap flag the tracer sets is visible to the code in two places:
 * the flags pushf stores and the flags syscall copies into r11.  Undo it
 * after such a step, so the traced run computes what an untraced one does. */
static void hide_trap_flag(const struct fz_case *c, pid_t pid, uintptr_t prev,
			   struct user_regs_struct *ur)
{
	uintptr_t lo = (uintptr_t)fuzz_sandbox;
	const uint8_t *p;

	if (prev < lo || prev >= lo + c->code_len)
		return;
	p = c->code + (prev - lo);
	if (p[0] == 0x0f && p[1] == 0x05) {
		ur->r11 &= ~0x100ULL;
		ptrace(PTRACE_SETREGS, pid, NULL, ur);
	} else if (p[0] == 0x9c || (p[0] == 0x66 && p[1] == 0x9c)) {
		long v = ptrace(PTRACE_PEEKDATA, pid, (void *)ur->rsp, NULL);

		ptrace(PTRACE_POKEDATA, pid, (void *)ur->rsp, (void *)(v & ~0x100L));
	}
}

/* Counts how often each boundary is entered (a rep string instruction
 * stops once per iteration at the same address: counted once), with the
 * registers at each entry. */
void fz_run_trace(const struct fz_case *c, struct fz_trace *t)
{
	uintptr_t lo = (uintptr_t)fuzz_sandbox, prev = 0;
	int st;
	pid_t pid;

	memset(t, 0, offsetof(struct fz_trace, hits));
	memset(t->count, 0, sizeof(t->count));
	fflush(NULL);
	pid = fork();
	if (pid == 0)
		trace_child(c);
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFSTOPPED(st))
		goto out;
	for (long steps = 0; steps < 400000; steps++) {
		struct user_regs_struct ur;

		if (ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL) || waitpid(pid, &st, 0) != pid ||
		    !WIFSTOPPED(st) || WSTOPSIG(st) != SIGTRAP ||
		    ptrace(PTRACE_GETREGS, pid, NULL, &ur))
			goto out;
		hide_trap_flag(c, pid, prev, &ur);
		if (ur.rip == (uintptr_t)fuzz_run_done) {
			uint64_t g[16] = { ur.rax, ur.rbx, ur.rcx, ur.rdx, ur.rsi, ur.rdi, ur.rbp, ur.r8,
					   ur.r9, ur.r10, ur.r11, ur.r12, ur.r13, ur.r14, ur.r15, ur.rsp };

			memcpy(t->gpr, g, sizeof(g));
			t->ok = true;
			goto out;
		}
		if (ur.rip >= lo && ur.rip < lo + c->code_len && ur.rip != prev) {
			int b = boundary_at(c, (uint32_t)(ur.rip - lo));
			uint64_t g[16] = { ur.rax, ur.rbx, ur.rcx, ur.rdx, ur.rsi, ur.rdi, ur.rbp, ur.r8,
					   ur.r9, ur.r10, ur.r11, ur.r12, ur.r13, ur.r14, ur.r15, ur.rsp };

			if (b >= 0) {
				t->count[b]++;
				if (t->nhits < FZ_MAX_HITS) {
					t->hits[t->nhits].b = (uint16_t)b;
					t->hits[t->nhits].hash = fz_regs_hash(g, ur.eflags);
				}
				t->nhits++;
			}
		}
		prev = ur.rip;
	}
out:
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
}
