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
void kp_optimized_callback(struct kp_probepoint *pp, struct pt_regs *regs,
			   const void *vec_area, unsigned int vec_layout)
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
	/* For kprobes_vector_reg(), once no other hit can change the note
	 * (any that interrupts from here on is missed). */
	t->vec_area = vec_area;
	t->vec_layout = vec_layout;
	__atomic_store_n(&t->vec_regs, regs, __ATOMIC_RELAXED);
	kp_pre_handlers_inline(pp, regs);
	__atomic_store_n(&t->vec_regs, NULL, __ATOMIC_RELAXED);
	t->in_handler--;
	errno = saved_errno;
	kp_read_exit(t);
}
