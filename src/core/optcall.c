/*
 * The handler call of a jump-optimized probe, reached from its detour.
 * Compiled for general registers only: the detour saves vector state only
 * when the user's handlers may touch it, so this code must not.
 */
#pragma GCC target("general-regs-only")

#include <errno.h>

#include "core/internal.h"
#include "os/linux/threads.h"

void kp_optimized_callback(struct kp_probepoint *pp, struct pt_regs *regs)
{
	struct kp_thread *t = kp_thread_self();
	int saved_errno;

	if (!t || t->in_handler) {
		kp_count_missed(pp);
		return;
	}
	kp_read_enter(t);
	saved_errno = errno;
	/* As after the int3 of the breakpoint path; changes are ignored. */
	regs->ip = pp->addr + 1;
	t->in_handler++;
	kp_run_pre_handlers(pp, regs);
	t->in_handler--;
	errno = saved_errno;
	kp_read_exit(t);
}
