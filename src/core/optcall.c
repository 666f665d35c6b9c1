/*
 * The handler call of a jump-optimized probe, reached from its detour.
 * Compiled for general registers only: the detour saves vector state only
 * when the user's handlers may touch it, so this code must not.
 */
#pragma GCC target("general-regs-only")

#include <errno.h>

#include "core/internal.h"
#include "os/linux/threads.h"

/* flags: KP_OPT_SAVE_* of the probepoint, as its detour read them.  No
 * frame pointer: this is the hottest function of the library. */
__attribute__((optimize("omit-frame-pointer")))
void kp_optimized_callback(struct kp_probepoint *pp, struct pt_regs *regs, unsigned int flags)
{
	struct kp_thread *t = kp_thread_current();
	int saved_errno = 0;

	if (__builtin_expect(!t || t->in_handler, 0)) {
		kp_count_missed(pp);
		return;
	}
	kp_read_enter(t);
	if (flags & KP_OPT_SAVE_ERRNO)
		saved_errno = errno;
	/* As after the int3 of the breakpoint path; changes are ignored. */
	regs->ip = pp->addr + 1;
	t->in_handler++;
	kp_pre_handlers_inline(pp, regs);
	t->in_handler--;
	if (flags & KP_OPT_SAVE_ERRNO)
		errno = saved_errno;
	kp_read_exit(t);
}
