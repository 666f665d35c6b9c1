/* Hardware data breakpoints on every thread of the process, through
 * perf_event_open(PERF_TYPE_BREAKPOINT) events that send a synchronous
 * SIGTRAP (si_code TRAP_PERF) carrying a cookie. */
#ifndef KP_OS_HWBREAK_H
#define KP_OS_HWBREAK_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

/* One breakpoint: one event per thread that existed when it was armed;
 * threads created later inherit one (inherit_thread), exec drops them
 * (remove_on_exec). */
struct kp_hwbp {
	int *fds;
	unsigned int nfds, cap;
};

/* Arms a breakpoint of len bytes at addr on every thread, for writes or
 * also reads, whose traps carry cookie; disabled: armed but off.  Returns
 * 0, -ENOSPC (no free debug register on some thread), -EOPNOTSUPP (no
 * hardware breakpoints or no synchronous SIGTRAP from them), -EACCES,
 * -ENOMEM, -EMFILE; on failure nothing is left armed. */
int kp_hwbp_arm(struct kp_hwbp *bp, uintptr_t addr, unsigned int len, bool rw,
		uint64_t cookie, bool disabled);

/* Stops and frees every thread's breakpoint: no thread is watched after. */
void kp_hwbp_disarm(struct kp_hwbp *bp);

/* Turns every thread's breakpoint off or on. */
int kp_hwbp_enable(struct kp_hwbp *bp, bool on);

/* In a forked child: bp's descriptors are the parent's events; drops them
 * (without touching the parent's) and arms one for the calling thread. */
int kp_hwbp_rearm_child(struct kp_hwbp *bp, uintptr_t addr, unsigned int len, bool rw,
			uint64_t cookie, bool disabled);

/* TRAP_PERF's fields of a siginfo (glibc 2.36 does not name them). */
#ifndef TRAP_PERF
#define TRAP_PERF 6
#endif
#define KP_TRAP_PERF_FLAG_ASYNC 1u

static inline uint64_t kp_siginfo_perf_data(const siginfo_t *info)
{
	return *(const uint64_t *)((const char *)info + 24);
}

static inline uint32_t kp_siginfo_perf_flags(const siginfo_t *info)
{
	return *(const uint32_t *)((const char *)info + 36);
}

#endif
