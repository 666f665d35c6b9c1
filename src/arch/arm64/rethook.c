/* Return-probe trampoline selection and the jprobe state save/restore
 * (arm64). */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#include "arch/arch.h"
#include "arch/arm64/regs.h"
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
/* The FP/SIMD record of a signal frame (struct fpsimd_context): its
 * header's magic, and its size (v0-v31, FPSR, FPCR). */
#define FPSIMD_MAGIC 0x46508001u
#define FPSIMD_SIZE 528

struct jprobe_state {
	struct pt_regs regs;
	size_t stack_len;
	uint8_t stack[JPROBE_STACK];
	bool fp_saved;
	uint8_t fp[FPSIMD_SIZE];
};

/* The FP/SIMD record in a signal frame's context (the first record of
 * __reserved, where the kernel puts it), or NULL. */
static uint8_t *fpsimd_record(const ucontext_t *uc)
{
	uint8_t *rec = (uint8_t *)uc->uc_mcontext.__reserved;
	uint32_t magic, size;

	memcpy(&magic, rec, 4);
	memcpy(&size, rec + 4, 4);
	return magic == FPSIMD_MAGIC && size == FPSIMD_SIZE ? rec : NULL;
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
	const uint8_t *fp;
	size_t len = JPROBE_STACK;

	if (!js || !uc)
		return -ENOMEM;
	a64_copy_bytes(&js->regs, regs, sizeof(*regs));
	fp = fpsimd_record(uc);
	js->fp_saved = fp != NULL;
	if (fp)
		a64_copy_bytes(js->fp, fp, FPSIMD_SIZE);
	while (len && kp_mem_read_nofault(regs->sp, js->stack, len))
		len /= 2;
	js->stack_len = len;
	/* The entry runs on a copy of the stack, far below this signal
	 * handler's frames: the real stack is never written.  sp stays
	 * 16-byte aligned, as AAPCS64 requires. */
	{
		uintptr_t here = (uintptr_t)__builtin_frame_address(0);
		uintptr_t copy = (here - 16384 - JPROBE_STACK) & ~(uintptr_t)15;

		a64_copy_bytes((void *)copy, js->stack, len);
		regs->sp = copy;
	}
	return 0;
}

/* At jprobe_return(): the state of the entry comes back; returns the
 * address the probed instruction was at. */
uintptr_t arch_jprobe_restore(struct kp_thread *t, ucontext_t *uc);
uintptr_t arch_jprobe_restore(struct kp_thread *t, ucontext_t *uc)
{
	struct jprobe_state *js = t->jprobe_save;
	uint8_t *fp = fpsimd_record(uc);

	regs_to_ucontext(&js->regs, uc);
	if (fp && js->fp_saved)
		a64_copy_bytes(fp, js->fp, FPSIMD_SIZE);
	/* regs.pc is the probed instruction's own address on arm64. */
	return js->regs.pc;
}
