/*
 * The handler call of a jump-optimized probe for the cases the detour's
 * assembly leaves to C: a thread already in a handler (the hit is counted
 * as missed), one without a thread record yet, a kernel without
 * membarrier, a misaligned stack.  The detour has saved everything by
 * then, pt_regs complete (ip included) and the vector state; errno is kept
 * here.  Compiled for general registers only, like the rest of the hit
 * path.
 */
#include "asm/hitpath.h"

#include <errno.h>

#include "core/internal.h"
#include "os/linux/threads.h"

/* No frame pointer: it is on the hit path. */
__attribute__((optimize("omit-frame-pointer")))
void kp_optimized_callback(struct kp_probepoint *pp, struct pt_regs *regs)
{
	struct kp_thread *t = kp_thread_current();
	int saved_errno;

	if (__builtin_expect(!t || t->in_handler, 0)) {
		kp_count_missed(pp);
		return;
	}
	kp_read_enter(t);
	saved_errno = errno;
	t->in_handler++;
	kp_pre_handlers_inline(pp, regs);
	t->in_handler--;
	errno = saved_errno;
	kp_read_exit(t);
}
