/* A stopped thread's registers through ptrace, as the CLI's tracee and
 * injection code reads them on arm64: the general registers are the
 * NT_PRSTATUS register set (struct user_pt_regs), the number of the system
 * call the thread is in NT_ARM_SYSTEM_CALL (-1: none); x0 holds the call's
 * result so far, as rax does on x86-64, and the kernel restores the
 * original x0 itself when it restarts the call. */
#ifndef KPROBE_PTRACE_H
#define KPROBE_PTRACE_H

#include <elf.h>
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

#endif
