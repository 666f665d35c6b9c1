/* What attach mode learns about a process before it touches it. */
#ifndef KPROBE_TARGET_CHECK_H
#define KPROBE_TARGET_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct target_state {
	char state;		/* /proc/PID/status State: R, S, D, T, t, Z, X */
	pid_t tracer;		/* TracerPid, 0 when untraced */
	int seccomp;		/* 0 none, 1 strict, 2 filter */
	int threads;
	bool main_exited;	/* the main thread is a zombie, others run */
};

/* Reads /proc/PID/status (and the main thread's state).  -ESRCH when the
 * process is gone. */
int target_read_state(pid_t pid, struct target_state *st);

/* Whether attaching to pid can be done without harming it: 0, or -errno
 * with one line saying why not in err.  Refused: a zombie, a process whose
 * main thread exited, one traced by another tracer, one under seccomp
 * (strict mode kills it at the first system call the agent makes, a filter
 * may kill it or make the agent fail half-way).  *st gets what was read
 * (a stopped process, state T, is attached to while it stays stopped). */
int target_check_attachable(pid_t pid, struct target_state *st, char *err, size_t errlen);

#endif
