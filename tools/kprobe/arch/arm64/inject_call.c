/* The self-restoring call of dlopen() in another process on arm64 (see
 * inject_call.h and cli/inject_stub.c).
 *
 * A64 has no return that pops its target, so no stub can reach an
 * arbitrary pc with every register as it was, but the kernel can: the
 * stub ends with rt_sigreturn(2) on a signal frame the tool wrote, which
 * puts back every general register, sp, pc, PSTATE, the FP/SIMD state and
 * the signal mask at once.  The tool writes, below the hijacked thread's
 * stack pointer, the object's path, the answer and that frame (the
 * thread's registers as they must be when it resumes, from NT_PRSTATUS,
 * NT_PRFPREG and PTRACE_GETSIGMASK), and points the thread at the stub,
 * placed in the padding after an object's code as on x86-64.  The stub
 * calls dlopen (and dlerror when it fails), leaves the answer, pauses
 * until the tool has read it, and returns to the program by the frame.
 * From the moment the registers are set the thread needs nobody: the tool
 * may die or stop waiting, and the thread still completes the call and
 * goes on as before.
 *
 * A system call the thread was stopped in needs nothing more: the kernel
 * had already rewound it for a restart before the stop (kp_ptrace.h), so
 * the saved registers re-issue it, and rt_sigreturn forgets the call.  The
 * frame's sigaltstack record has flags the kernel refuses, so the
 * thread's alternate signal stack stays as it is (rt_sigreturn ignores
 * that error).  SVE state beyond the V registers is not kept, as it is
 * not across a system call. */
#include "inject_call.h"
#include "kp_ptrace.h"

#include <asm/ptrace.h>
#include <elf.h>
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

/* Below the stack pointer: AAPCS64 has no red zone, but a signal frame
 * being built or a leaf's scratch are not ours to guess at. */
#define STACK_GAP	256

/* Entry: x0 the path, x1 dlopen's mode, x19 dlopen, x20 dlerror (or 0),
 * x21 the answer, x22 the nonce, x23 the signal frame; sp 16-aligned
 * below the block.  The nonce is stored last (a release store). */
extern const unsigned char inject_stub_start[], inject_stub_end[];
__asm__(".pushsection .rodata\n"
	".p2align 2\n"
	".globl inject_stub_start\n"
	".hidden inject_stub_start\n"
	".globl inject_stub_end\n"
	".hidden inject_stub_end\n"
	"inject_stub_start:\n"
	"	blr x19\n"
	"	str x0, [x21, #8]\n"
	"	cbnz x0, 1f\n"
	"	cbz x20, 1f\n"
	"	blr x20\n"
	"	str x0, [x21, #16]\n"
	"1:	stlr x22, [x21]\n"
	"	ldp x9, x10, [x21, #24]\n"	/* ppoll(NULL, 0, &answer.pause, &answer.mask, 8) */
	"	orr x9, x9, x10\n"
	"	cbz x9, 2f\n"
	"	mov x0, #0\n"
	"	mov x1, #0\n"
	"	add x2, x21, #24\n"
	"	add x3, x21, #48\n"
	"	mov x4, #8\n"
	"	mov x8, #73\n"			/* __NR_ppoll */
	"	svc #0\n"
	"2:	mov sp, x23\n"
	"	mov x8, #139\n"			/* __NR_rt_sigreturn */
	"	svc #0\n"				/* a refused frame ends in SIGSEGV */
	"inject_stub_end:\n"
	".popsection\n");

const unsigned char *inject_arch_stub(size_t *len)
{
	*len = (size_t)(inject_stub_end - inject_stub_start);
	return inject_stub_start;
}

/* A thread held inside the stub's ppoll re-issues it when it resumes (the
 * kernel rewound it, kp_ptrace.h) and reads the zero timeout: nothing to
 * do here. */
void inject_arch_end_pause(pid_t tid)
{
	(void)tid;
}

/* The signal frame rt_sigreturn reads at sp, as the kernel lays it out
 * (struct rt_sigframe: the siginfo, then the ucontext, whose layout
 * glibc's ucontext_t follows), and the FP/SIMD record of its
 * __reserved area (the kernel's struct fpsimd_context). */
struct frame {
	siginfo_t info;
	ucontext_t uc;
};

#define FPSIMD_MAGIC	0x46508001u
#define FPSIMD_SIZE	528
#define SS_REFUSED	4		/* neither SS_ONSTACK nor SS_DISABLE */

struct fpsimd_record {
	uint32_t magic, size;
	uint32_t fpsr, fpcr;
	__uint128_t vregs[32];
};

_Static_assert(sizeof(struct fpsimd_record) == FPSIMD_SIZE, "the kernel's fpsimd_context");
_Static_assert(offsetof(struct frame, uc.uc_mcontext) % 16 == 0, "the frame's sigcontext");

/* The block as laid out in the target, lowest address first:
 *   the stub's stack | path | answer | frame | STACK_GAP | the thread's sp */
struct block {
	unsigned char *buf;
	size_t len;
	uint64_t base, path, answer, frame;
};

static void fill_frame(struct frame *f, const struct kp_uregs *u,
		       const struct user_fpsimd_state *fp, uint64_t sigmask)
{
	struct fpsimd_record rec = { .magic = FPSIMD_MAGIC, .size = FPSIMD_SIZE };
	mcontext_t *mc = &f->uc.uc_mcontext;

	memset(f, 0, sizeof(*f));
	f->uc.uc_stack.ss_flags = SS_REFUSED;
	memcpy(&f->uc.uc_sigmask, &sigmask, sizeof(sigmask));
	memcpy(mc->regs, u->r.regs, sizeof(mc->regs));
	mc->sp = u->r.sp;
	mc->pc = u->r.pc;
	mc->pstate = u->r.pstate;
	rec.fpsr = fp->fpsr;
	rec.fpcr = fp->fpcr;
	memcpy(rec.vregs, fp->vregs, sizeof(rec.vregs));
	/* the record, then the terminator (zeroes) */
	memcpy(mc->__reserved, &rec, sizeof(rec));
}

static int build_block(struct block *b, const struct kp_uregs *u,
		       const struct user_fpsimd_state *fp, uint64_t sigmask, const char *file)
{
	size_t plen = strlen(file) + 1;
	uint64_t top = u->r.sp - STACK_GAP;
	struct inject_answer a;
	struct frame *f;

	b->frame = (top - sizeof(struct frame)) & ~15ull;
	b->answer = (b->frame - sizeof(a)) & ~15ull;
	b->path = (b->answer - plen) & ~15ull;
	b->base = (b->path - STACK_GAP) & ~15ull;
	if (b->base > b->path || top > u->r.sp)
		return -EFAULT;
	b->len = (size_t)(b->frame + sizeof(struct frame) - b->base);
	b->buf = calloc(1, b->len);
	f = malloc(sizeof(*f));
	if (!b->buf || !f) {
		free(b->buf);
		free(f);
		return -ENOMEM;
	}
	fill_frame(f, u, fp, sigmask);
	memcpy(b->buf + (b->frame - b->base), f, sizeof(*f));
	free(f);
	inject_answer_init(&a);
	memcpy(b->buf + (b->answer - b->base), &a, sizeof(a));
	memcpy(b->buf + (b->path - b->base), file, plen);
	return 0;
}

static int read_state(pid_t tid, struct kp_uregs *u, struct user_fpsimd_state *fp,
		      uint64_t *sigmask)
{
	struct iovec iov = { fp, sizeof(*fp) };

	if (kp_uregs_get(tid, u) || ptrace(PTRACE_GETREGSET, tid, (void *)NT_PRFPREG, &iov) ||
	    ptrace(PTRACE_GETSIGMASK, tid, (void *)sizeof(*sigmask), sigmask))
		return -errno;
	return 0;
}

int inject_call_dlopen(struct tracee_set *ts, pid_t tid, const struct inject_request *req,
		       int timeout_ms, struct inject_result *res)
{
	struct user_fpsimd_state fp;
	struct kp_uregs orig, r;
	struct block b = { 0 };
	uint64_t nonce = inject_make_nonce(), sigmask = 0;
	size_t stub_len;
	int rc;

	memset(res, 0, sizeof(*res));
	inject_arch_stub(&stub_len);
	rc = read_state(tid, &orig, &fp, &sigmask);
	if (!rc)
		rc = build_block(&b, &orig, &fp, sigmask, req->path);
	if (!rc)
		rc = inject_mem_io(ts->pid, req->stub, (void *)inject_stub_start, stub_len, true);
	if (!rc)
		rc = inject_mem_io(ts->pid, b.base, b.buf, b.len, true);
	free(b.buf);
	if (rc)
		return rc;
	r = orig;
	r.r.pc = req->stub;
	r.r.sp = b.base;
	r.r.regs[0] = b.path;
	r.r.regs[1] = req->flags;
	r.r.regs[19] = req->dlopen;
	r.r.regs[20] = req->dlerror;
	r.r.regs[21] = b.answer;
	r.r.regs[22] = nonce;
	r.r.regs[23] = b.frame;
	r.r.regs[29] = 0;		/* the frame chain ends here */
	r.r.regs[30] = 0;
	/* PSTATE.BTYPE: not in the middle of a branch into a guarded page
	 * (the frame keeps the thread's own) */
	r.r.pstate &= ~(3ull << 10);
	if (kp_uregs_set(tid, &r))
		return -errno;
	/* From here the thread restores itself; every other thread runs (a
	 * constructor may need a lock another thread holds). */
	return inject_call_traced(ts, tid, b.answer, nonce, timeout_ms, res);
}
