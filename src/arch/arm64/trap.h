/* What the arm64 trap handlers share (trap.c, watch.c). */
#ifndef KP_ARM64_TRAP_H
#define KP_ARM64_TRAP_H

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <ucontext.h>

#include "os/linux/threads.h"

#define PC(uc) ((uc)->uc_mcontext.pc)

/* Nothing before this point touches errno, so a probe on
 * __errno_location() or any libc function cannot recurse: hits from here
 * on count as missed. */
static inline int a64_handlers_begin(struct kp_thread *t)
{
	t->in_handler++;
	return errno;
}

static inline void a64_handlers_end(struct kp_thread *t, int saved_errno)
{
	errno = saved_errno;
	t->in_handler--;
}

/* Watchpoints (watch.c).  A watchpoint's trap (si_code TRAP_PERF), before
 * the access: true when it is ours (the access stepped, or the trap
 * dropped), false for the program's own perf events. */
bool a64_watch_trap(const siginfo_t *info, ucontext_t *uc);
/* SIGILL (ILL_ILLOPC): at the end of a step (the access done), the
 * handlers run and the thread sent on, or left to the step's own trap
 * delivered with it (true); false when it is no step's end. */
bool a64_watch_step_done(const siginfo_t *info, ucontext_t *uc);
/* A fault at pc: inside a step, the context becomes the program's at the
 * access (true), which then sees the fault there. */
bool a64_watch_step_fault(ucontext_t *uc);

#endif
