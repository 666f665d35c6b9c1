/* A stopped thread's registers through ptrace, as the CLI's tracee and
 * injection code reads them on x86-64 (the arm64 counterpart has the same
 * names). */
#ifndef KPROBE_PTRACE_H
#define KPROBE_PTRACE_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/user.h>

struct kp_uregs {
	struct user_regs_struct r;
};

static inline int kp_uregs_get(pid_t tid, struct kp_uregs *u)
{
	return ptrace(PTRACE_GETREGS, tid, 0, &u->r) ? -1 : 0;
}

static inline int kp_uregs_set(pid_t tid, const struct kp_uregs *u)
{
	return ptrace(PTRACE_SETREGS, tid, 0, &u->r) ? -1 : 0;
}

/* The system call the thread was stopped in, or -1. */
static inline long kp_uregs_syscall(const struct kp_uregs *u)
{
	return (long long)u->r.orig_rax < 0 ? -1 : (long)u->r.orig_rax;
}

/* That system call's result so far (a restart code, -EINTR...). */
static inline long kp_uregs_ret(const struct kp_uregs *u)
{
	return (long)u->r.rax;
}

static inline void kp_uregs_set_ret(struct kp_uregs *u, long v)
{
	u->r.rax = (unsigned long long)v;
}

static inline uint64_t kp_uregs_ip(const struct kp_uregs *u)
{
	return u->r.rip;
}

/* The call a thread was blocked in before our stop, as
 * /proc/PID/task/TID/syscall showed it (nr -1: none, or unknown). */
struct kp_blocked_call {
	long nr;
	uint64_t arg0, pc;
};

/* x86-64 needs no note: at the stop the thread is still in its call. */
#define KP_NOTE_BLOCKED_CALLS 0

#define KP_ERESTARTNOHAND 514	/* the kernel's: restart unless a handler runs */

/* Our stop made the call return EINTR to the program: make it return
 * -ERESTARTNOHAND instead, which the kernel turns into a re-issue when the
 * thread resumes (its registers still name the call).  The call's number
 * in *nr; false when u is not such a call. */
static inline bool kp_uregs_eintr_call(const struct kp_uregs *u, const struct kp_blocked_call *c,
				       long *nr)
{
	(void)c;
	*nr = kp_uregs_syscall(u);
	return *nr >= 0 && kp_uregs_ret(u) == -EINTR;
}

static inline void kp_uregs_reissue(struct kp_uregs *u, const struct kp_blocked_call *c)
{
	(void)c;
	kp_uregs_set_ret(u, -KP_ERESTARTNOHAND);
}

/* Whether the thread was stopped while blocked in a system call: the
 * call returns a restart code, or EINTR. */
static inline bool kp_uregs_blocked_in_syscall(pid_t tid, const struct kp_uregs *u)
{
	long ret = kp_uregs_ret(u);

	(void)tid;
	return kp_uregs_syscall(u) >= 0 && (ret == -EINTR || (ret <= -512 && ret >= -516));
}

#endif
