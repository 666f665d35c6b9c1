/* Return-probe trampoline selection and the jprobe state save/restore. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#include "arch/arch.h"
#include "arch/x86_64/regs.h"
#include "os/linux/memory.h"
#include "os/linux/sys.h"
#include "os/linux/threads.h"

extern char kp_kretprobe_trampoline[];

uintptr_t arch_kretprobe_trampoline(void)
{
	return (uintptr_t)kp_kretprobe_trampoline;
}

/* ---- jprobes ---- */

#define JPROBE_AREA (64 * 1024)
#define JPROBE_STACK 512	/* stack arguments copied and put back */
#define FP_MAX (JPROBE_AREA - sizeof(struct jprobe_state) - JPROBE_STACK)
#define FP_XSTATE_MAGIC1 0x46505853U

struct jprobe_state {
	struct pt_regs regs;
	size_t stack_len;
	size_t fp_len;
	uint8_t stack[JPROBE_STACK];
	uint8_t fp[];
};

/* Size of the signal frame's FPU/xsave image (fxsave layout, extended when
 * the kernel's software-reserved bytes say so). */
static size_t fpstate_size(const ucontext_t *uc)
{
	const uint8_t *fp = (const uint8_t *)uc->uc_mcontext.fpregs;
	uint32_t magic1, extended;

	if (!fp)
		return 0;
	memcpy(&magic1, fp + 464, 4);
	memcpy(&extended, fp + 468, 4);
	if (magic1 == FP_XSTATE_MAGIC1 && extended <= FP_MAX)
		return extended;
	return 512;
}

static struct jprobe_state *jprobe_area(struct kp_thread *t)
{
	void *p;

	if (t->jprobe_save)
		return t->jprobe_save;
	p = (void *)kp_syscall6(SYS_mmap, 0, JPROBE_AREA, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if ((unsigned long)p > -4096UL)
		return NULL;
	t->jprobe_save = p;
	return p;
}

int arch_jprobe_save(struct kp_thread *t, struct pt_regs *regs)
{
	struct jprobe_state *js = jprobe_area(t);
	const ucontext_t *uc = t->trap_ctx;
	size_t len = JPROBE_STACK;

	if (!js || !uc)
		return -ENOMEM;
	js->regs = *regs;
	js->fp_len = fpstate_size(uc);
	memcpy(js->fp, uc->uc_mcontext.fpregs, js->fp_len);
	while (len && kp_mem_read_nofault(regs->sp, js->stack, len))
		len /= 2;
	js->stack_len = len;
	/* The entry runs on a copy of the stack, far below this signal
	 * handler's frames: the real stack is never written. */
	{
		uintptr_t here = (uintptr_t)__builtin_frame_address(0);
		uintptr_t copy = (here - 16384 - JPROBE_STACK) & ~(uintptr_t)15;

		copy += regs->sp & 15;
		memcpy((void *)copy, js->stack, len);
		regs->sp = copy;
	}
	return 0;
}

/* At jprobe_return(): the state of the entry comes back; returns the
 * address the probed instruction was at. */
uintptr_t arch_jprobe_restore(struct kp_thread *t, ucontext_t *uc)
{
	struct jprobe_state *js = t->jprobe_save;

	regs_to_ucontext(&js->regs, uc);
	if (uc->uc_mcontext.fpregs && js->fp_len == fpstate_size(uc))
		memcpy(uc->uc_mcontext.fpregs, js->fp, js->fp_len);
	/* regs.ip is the address after the int3 at the probe. */
	return js->regs.ip - 1;
}
