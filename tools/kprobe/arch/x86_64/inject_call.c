/* The self-restoring call of dlopen() in another process (see
 * inject_call.h).
 *
 * The tool writes, below the hijacked thread's red zone, a block holding
 * the thread's registers as they must be when it resumes, its vector state
 * and the object's path, and points the thread at a small position-
 * independent stub.  The stub calls dlopen, leaves the answer in the
 * block, reloads the vector state and every register from the block and
 * returns to the thread's own instruction with `ret $128`, which also
 * gives back the red zone untouched.  From the moment the registers are
 * set, the thread needs nobody: the tool may die, or stop waiting, and the
 * thread still completes the call and goes on as before. */
#include "inject_call.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <stddef.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <time.h>
#include <unistd.h>

#define RED_ZONE	128
#define XSTATE_MAX	(64 * 1024)
#define FRAME_SLACK	256		/* below the block, above dlopen's frame */

/* Entry: rax dlopen, rdi path, rsi flags, rbx vector state (64-aligned),
 * r12 the saved general registers, r13 the answer, r14 dlerror (or 0),
 * r15 1 for XRSTOR, 0 for FXRSTOR, rbp the nonce; rsp 16-aligned.
 * The answer is { nonce, handle, dlerror string }, the nonce stored last;
 * then the stub sleeps answer.pause if it is not zero.  The pause keeps
 * the thread in the stub until the tool has read the answer: the answer
 * lives on the thread's stack, which the program takes back as soon as the
 * thread goes on; in a stopped process it also keeps the program from
 * running a single instruction before it is continued.  The tool ends the
 * pause, see end_pause(); a tool that died leaves it to run out.  The pause is ppoll, not nanosleep: nanosleep forgets the
 * restart of an interrupted sleep the thread goes back to. */
extern const unsigned char inject_stub_start[], inject_stub_end[];
__asm__(".pushsection .rodata\n"
	".globl inject_stub_start\n"
	".hidden inject_stub_start\n"
	".globl inject_stub_end\n"
	".hidden inject_stub_end\n"
	"inject_stub_start:\n"
	"	call *%rax\n"
	"	mov %rax, 8(%r13)\n"
	"	test %rax, %rax\n"
	"	jnz 1f\n"
	"	test %r14, %r14\n"
	"	jz 1f\n"
	"	call *%r14\n"
	"	mov %rax, 16(%r13)\n"
	"1:	mov %rbp, (%r13)\n"
	"	mov 24(%r13), %rax\n"		/* ppoll(NULL, 0, &answer.pause, &answer.mask) */
	"	or 32(%r13), %rax\n"
	"	jz 4f\n"
	"	xor %edi, %edi\n"
	"	xor %esi, %esi\n"
	"	lea 24(%r13), %rdx\n"
	"	lea 48(%r13), %r10\n"		/* every signal blocked meanwhile */
	"	mov $8, %r8d\n"
	"	mov $271, %eax\n"
	"	syscall\n"
	"4:	mov 40(%r13), %eax\n"		/* the components to restore */
	"	mov 44(%r13), %edx\n"
	"	test %r15, %r15\n"
	"	jz 2f\n"
	"	xrstor64 (%rbx)\n"
	"	jmp 3f\n"
	"2:	fxrstor64 (%rbx)\n"
	"3:	mov %r12, %rsp\n"
	"	pop %r15\n"
	"	pop %r14\n"
	"	pop %r13\n"
	"	pop %r12\n"
	"	pop %r11\n"
	"	pop %r10\n"
	"	pop %r9\n"
	"	pop %r8\n"
	"	pop %rbp\n"
	"	pop %rdi\n"
	"	pop %rsi\n"
	"	pop %rdx\n"
	"	pop %rcx\n"
	"	pop %rbx\n"
	"	pop %rax\n"
	"	popfq\n"
	"	ret $128\n"
	"inject_stub_end:\n"
	".popsection\n");

/* The general registers in the order the stub pops them, then the flags
 * and the return address (which sits RED_ZONE + 8 below the stack pointer
 * to restore). */
struct saved_gprs {
	uint64_t r15, r14, r13, r12, r11, r10, r9, r8, rbp, rdi, rsi, rdx, rcx, rbx, rax;
	uint64_t rflags, rip;
};

/* AMX tile state: with XFD armed (a thread that never asked for AMX), an
 * XRSTOR that names it faults and the kernel kills the thread; it is only
 * restored when the thread had it in use. */
#define XFEATURE_AMX	(3ull << 17)
#define XSTATE_BV_OFF	512

#define ERESTARTSYS		512
#define ERESTARTNOINTR		513
#define ERESTARTNOHAND		514
#define ERESTART_RESTARTBLOCK	516
#define NR_RESTART_SYSCALL	219

static size_t stub_len(void)
{
	return (size_t)(inject_stub_end - inject_stub_start);
}

const unsigned char *inject_arch_stub(size_t *len)
{
	*len = stub_len();
	return inject_stub_start;
}

/* The registers the thread must resume with: a system call our stop
 * interrupted is issued again, as the kernel would have done on resuming
 * it (the stub returns to user space, where no restart happens). */
static void resume_registers(struct user_regs_struct *r)
{
	if ((long long)r->orig_rax < 0)
		return;
	switch (-(long long)r->rax) {
	case ERESTARTSYS:
	case ERESTARTNOINTR:
	case ERESTARTNOHAND:
		r->rax = r->orig_rax;
		r->rip -= 2;
		break;
	case ERESTART_RESTARTBLOCK:
		r->rax = NR_RESTART_SYSCALL;
		r->rip -= 2;
		break;
	default:
		break;
	}
	r->orig_rax = (unsigned long long)-1;
}

static void fill_gprs(struct saved_gprs *g, const struct user_regs_struct *r)
{
	*g = (struct saved_gprs){
		.r15 = r->r15, .r14 = r->r14, .r13 = r->r13, .r12 = r->r12,
		.r11 = r->r11, .r10 = r->r10, .r9 = r->r9, .r8 = r->r8,
		.rbp = r->rbp, .rdi = r->rdi, .rsi = r->rsi, .rdx = r->rdx,
		.rcx = r->rcx, .rbx = r->rbx, .rax = r->rax,
		.rflags = r->eflags, .rip = r->rip,
	};
}

/* The block as laid out in the target, lowest address first:
 *   frame slack | vector state | path | answer | gprs (rip last)
 * with rip at rsp - RED_ZONE - 8. */
struct block {
	unsigned char *buf;
	size_t len;
	uint64_t base;		/* target address of buf[0] */
	uint64_t xstate, path, answer, gprs;
};

static int build_block(struct block *b, const struct user_regs_struct *resume,
		       const void *vec, size_t veclen, const char *file)
{
	size_t plen = strlen(file) + 1;
	uint64_t top = resume->rsp - RED_ZONE;		/* just past rip's slot */
	struct saved_gprs g;

	b->gprs = top - sizeof(g);
	b->answer = (b->gprs - sizeof(struct inject_answer)) & ~7ull;
	b->path = (b->answer - plen) & ~15ull;
	b->xstate = (b->path - veclen) & ~63ull;
	b->base = (b->xstate - FRAME_SLACK) & ~15ull;
	if (b->base > b->xstate || b->gprs > top)
		return -EFAULT;
	b->len = (size_t)(top - b->base);
	b->buf = calloc(1, b->len);
	if (!b->buf)
		return -ENOMEM;
	fill_gprs(&g, resume);
	memcpy(b->buf + (b->gprs - b->base), &g, sizeof(g));
	memcpy(b->buf + (b->path - b->base), file, plen);
	memcpy(b->buf + (b->xstate - b->base), vec, veclen);
	{
		struct inject_answer a;
		uint64_t bv = 0;

		inject_answer_init(&a);
		if (veclen >= XSTATE_BV_OFF + 8) {
			memcpy(&bv, (const unsigned char *)vec + XSTATE_BV_OFF, sizeof(bv));
			a.arch = (~0ull & ~XFEATURE_AMX) | (bv & XFEATURE_AMX);	/* XRSTOR's mask */
		}
		memcpy(b->buf + (b->answer - b->base), &a, sizeof(a));
	}
	return 0;
}

/* Thread tid's vector state in the layout XRSTOR (or FXRSTOR) reads. */
static int read_vector_state(pid_t tid, unsigned char **buf, size_t *len, bool *xsave)
{
	struct iovec iov;

	*buf = calloc(1, XSTATE_MAX);
	if (!*buf)
		return -ENOMEM;
	iov = (struct iovec){ *buf, XSTATE_MAX };
	if (!ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE, &iov) && iov.iov_len >= 576) {
		/* The standard (non-compacted) form: XRSTOR wants XCOMP_BV 0. */
		memset(*buf + 520, 0, 8);
		*len = iov.iov_len;
		*xsave = true;
		return 0;
	}
	if (ptrace(PTRACE_GETFPREGS, tid, 0, *buf))
		return -errno;
	*len = sizeof(struct user_fpregs_struct);
	*xsave = false;
	return 0;
}

/* Held inside the stub's ppoll: done, as if it had timed out (no
 * restart). */
void inject_arch_end_pause(pid_t tid)
{
	struct user_regs_struct r;

	if (ptrace(PTRACE_GETREGS, tid, 0, &r))
		return;
	if ((long long)r.orig_rax == SYS_ppoll && (long long)r.rax < 0) {
		r.rax = 0;
		r.orig_rax = (unsigned long long)-1;
		ptrace(PTRACE_SETREGS, tid, 0, &r);
	}
}

int inject_call_dlopen(struct tracee_set *ts, pid_t tid, const struct inject_request *req,
		       int timeout_ms, struct inject_result *res)
{
	struct user_regs_struct orig, resume, r;
	struct block b = { 0 };
	unsigned char *vec = NULL;
	uint64_t nonce = inject_make_nonce();
	pid_t pid = ts->pid;
	size_t veclen = 0;
	bool xsave = false;
	int rc;

	memset(res, 0, sizeof(*res));
	if (ptrace(PTRACE_GETREGS, tid, 0, &orig))
		return -errno;
	resume = orig;
	resume_registers(&resume);
	rc = read_vector_state(tid, &vec, &veclen, &xsave);
	if (!rc)
		rc = build_block(&b, &resume, vec, veclen, req->path);
	free(vec);
	if (!rc)
		rc = inject_mem_io(pid, req->stub, (void *)inject_stub_start, stub_len(), true);
	if (!rc)
		rc = inject_mem_io(pid, b.base, b.buf, b.len, true);
	free(b.buf);
	if (rc)
		return rc;
	r = orig;
	r.rip = req->stub;
	r.rsp = b.base;
	r.rax = req->dlopen;
	r.rdi = b.path;
	r.rsi = req->flags;
	r.rbx = b.xstate;
	r.r12 = b.gprs;
	r.r13 = b.answer;
	r.r14 = req->dlerror;
	r.r15 = xsave;
	r.rbp = nonce;
	/* Not in a system call any more: the kernel must not restart one
	 * into the stub; the stub restarts it itself on the way back. */
	r.orig_rax = (unsigned long long)-1;
	r.eflags &= ~0x500ull;		/* DF and TF clear, as the ABI wants */
	if (ptrace(PTRACE_SETREGS, tid, 0, &r))
		return -errno;
	/* From here the thread restores itself; every other thread runs (a
	 * constructor may need a lock another thread holds). */
	return inject_call_traced(ts, tid, b.answer, nonce, timeout_ms, res);
}
