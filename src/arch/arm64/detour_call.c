/*
 * The C side of a jump-optimized probe's hit (arm64), called by detour.S
 * with the general registers saved in a struct pt_regs and nothing else:
 * the FP/SIMD registers, FPCR and FPSR are still the program's.  This code
 * is compiled for the general registers only, and every handler that may
 * change the others (or errno) is called with them saved around it, as
 * its needs (the handler analysis, clobber.c) say: a handler that
 * provably leaves them alone costs no save at all.  So does a hit that
 * takes no handler.
 */
#include "asm/hitpath.h"

#include "arch/arch.h"
#include "arch/arm64/optimize.h"
#include "core/arch_api.h"
#include "os/linux/threads.h"

/* Claiming a thread record runs code that is not held to the general
 * registers (system calls, the allocator): through kp_call_fpu_saved. */
static int claim_record(void *out, void *unused)
{
	(void)unused;
	*(struct kp_thread **)out = kp_thread_self();
	return 0;
}

static struct kp_thread *thread_record(void)
{
	struct kp_thread *t = kp_thread_existing();

	if (__builtin_expect(!t, 0))
		kp_call_fpu_saved(claim_record, &t, NULL);
	return t;
}

/*
 * The trap path's dispatch (the pre-handlers of the probepoint, each per
 * its flags) under its rules.  A hit from inside a handler, or from
 * library code in a read-side section, is missed; the section and the
 * handler mark are raised before anything else runs (errno, which a
 * handler's needs may keep, is a call of __errno_location(), which may
 * itself be an optimized probe).
 */
void kp_a64_detour_call(struct kp_probepoint *pp, struct pt_regs *regs)
{
	struct kp_thread *t = thread_record();

	if (__builtin_expect(!t || t->in_handler || t->nest, 0)) {
		if (t)
			kp_read_enter(t);
		kp_count_missed(pp);
		if (t)
			kp_read_exit(t);
		return;
	}
	kp_handler_section_enter(t);
	kp_run_pre_handlers_saving(pp, regs);
	kp_handler_section_exit(t);
}
