/* Raw system calls for the hit path: no libc, no errno, so they work in
 * any signal context and even when libc's own wrappers are being probed. */
#ifndef KP_OS_SYS_H
#define KP_OS_SYS_H

#include <sys/syscall.h>
#include <sys/types.h>

static inline long kp_syscall6(long n, long a, long b, long c, long d, long e, long f)
{
	long ret;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

#define kp_syscall(n, a, b, c) kp_syscall6((n), (long)(a), (long)(b), (long)(c), 0, 0, 0)

static inline pid_t kp_getpid(void) { return (pid_t)kp_syscall(SYS_getpid, 0, 0, 0); }
static inline pid_t kp_gettid(void) { return (pid_t)kp_syscall(SYS_gettid, 0, 0, 0); }

#endif
