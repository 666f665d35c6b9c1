/* Raw system calls for the hit path: no libc, no errno, so they work in
 * any signal context and even when libc's own wrappers are being probed. */
#ifndef KP_OS_SYS_H
#define KP_OS_SYS_H

#include <sys/syscall.h>
#include <sys/types.h>

#include "asm/syscall.h"

/* The instruction and its register convention are the architecture's. */
static inline long kp_syscall6(long n, long a, long b, long c, long d, long e, long f)
{
	return arch_syscall6(n, a, b, c, d, e, f);
}

#define kp_syscall(n, a, b, c) kp_syscall6((n), (long)(a), (long)(b), (long)(c), 0, 0, 0)

static inline pid_t kp_getpid(void) { return (pid_t)kp_syscall(SYS_getpid, 0, 0, 0); }
static inline pid_t kp_gettid(void) { return (pid_t)kp_syscall(SYS_gettid, 0, 0, 0); }

#endif
