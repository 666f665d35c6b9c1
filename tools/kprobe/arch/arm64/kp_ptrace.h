/* A stopped thread's registers through ptrace, as the CLI's tracee and
 * injection code reads them on arm64: the general registers are the
 * NT_PRSTATUS register set (struct user_pt_regs), the number of the system
 * call the thread is in NT_ARM_SYSTEM_CALL (-1: none).
 *
 * Unlike x86-64, a thread our stop interrupted in a system call is not
 * "in" it any more when we see it: before the stop (get_signal()), the
 * kernel's do_signal() has forgotten the call (NT_ARM_SYSTEM_CALL -1)
 * and, for a restart code, put the original x0 back and the pc on the
 * SVC again; a call that returns EINTR shows x0 -EINTR with the pc after
 * the SVC.  So its registers as they are make the thread re-issue the
 * call when it resumes, and a call returning EINTR cannot be turned into
 * a restart (its original x0 is gone). */
#ifndef KPROBE_PTRACE_H
#define KPROBE_PTRACE_H

#include <elf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <asm/ptrace.h>

struct kp_uregs {
	struct user_pt_regs r;
	int syscallno;
};

static inline int kp_uregs_get(pid_t tid, struct kp_uregs *u)
{
	struct iovec iov = { &u->r, sizeof(u->r) };
	struct iovec sc = { &u->syscallno, sizeof(u->syscallno) };

	if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_PRSTATUS, &iov))
		return -1;
	if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_ARM_SYSTEM_CALL, &sc))
		u->syscallno = -1;
	return 0;
}

/* The general registers only: the system call number stays the kernel's. */
static inline int kp_uregs_set(pid_t tid, const struct kp_uregs *u)
{
	struct iovec iov = { (void *)&u->r, sizeof(u->r) };

	return ptrace(PTRACE_SETREGSET, tid, (void *)NT_PRSTATUS, &iov) ? -1 : 0;
}

static inline long kp_uregs_syscall(const struct kp_uregs *u)
{
	return u->syscallno < 0 ? -1 : u->syscallno;
}

static inline long kp_uregs_ret(const struct kp_uregs *u)
{
	return (long)u->r.regs[0];
}

static inline void kp_uregs_set_ret(struct kp_uregs *u, long v)
{
	u->r.regs[0] = (uint64_t)v;
}

static inline uint64_t kp_uregs_ip(const struct kp_uregs *u)
{
	return u->r.pc;
}

#define KP_A64_SVC0 0xd4000001u

/* The instruction word at addr in tid, or 0. */
static inline uint32_t kp_peek_insn(pid_t tid, uint64_t addr)
{
	long w;

	errno = 0;
	w = ptrace(PTRACE_PEEKTEXT, tid, (void *)(uintptr_t)(addr & ~7ull), 0);
	if (errno)
		return 0;
	return (uint32_t)((unsigned long)w >> (addr & 4 ? 32 : 0));
}

/* The call a thread was blocked in before our stop, as
 * /proc/PID/task/TID/syscall showed it (nr -1: none, or unknown). */
struct kp_blocked_call {
	long nr;
	uint64_t arg0, pc;
};

/* When our stop makes a call return EINTR, the kernel has forgotten the
 * call and its x0 by the time we see the thread: the tracee code notes
 * the blocked call of each thread before stopping it. */
#define KP_NOTE_BLOCKED_CALLS 1

/* Our stop made the noted call c return EINTR: x0 -EINTR, the pc just
 * after the SVC the call was made by, x8 still its number.  Its number in
 * *nr.  A call that ended with EINTR because a handler ran shows the
 * handler's registers, never this. */
static inline bool kp_uregs_eintr_call(const struct kp_uregs *u, const struct kp_blocked_call *c,
				       long *nr)
{
	*nr = c->nr;
	return c->nr >= 0 && kp_uregs_ret(u) == -EINTR && u->r.pc == c->pc &&
	       (long)u->r.regs[8] == c->nr;
}

/* The call made again when the thread resumes: its first argument back,
 * the pc on its SVC (x1..x5 and x8 are as they were). */
static inline void kp_uregs_reissue(struct kp_uregs *u, const struct kp_blocked_call *c)
{
	u->r.regs[0] = c->arg0;
	u->r.pc = c->pc - 4;
}

/* Whether the thread was stopped while blocked in a system call: the pc
 * is on the SVC again (a restart is pending), or just after one with x0
 * -EINTR. */
static inline bool kp_uregs_blocked_in_syscall(pid_t tid, const struct kp_uregs *u)
{
	return kp_peek_insn(tid, u->r.pc) == KP_A64_SVC0 ||
	       (kp_uregs_ret(u) == -EINTR && kp_peek_insn(tid, u->r.pc - 4) == KP_A64_SVC0);
}

#endif
