/* Holding the threads of another process still with ptrace. */
#ifndef KPROBE_TRACEE_H
#define KPROBE_TRACEE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct tracee {
	pid_t tid;
	bool stopped;		/* in a ptrace stop we caused */
	bool gone;		/* exited */
};

struct tracee_set {
	pid_t pid;
	struct tracee *v;
	int n, cap;
};

/* Seizes and stops every thread of pid except `except` (0: none), including
 * threads created meanwhile.  -EPERM when ptrace is not permitted, -ESRCH
 * when the process is gone; on error nothing stays seized. */
int tracee_hold(struct tracee_set *ts, pid_t pid, pid_t except);
/* Removes sig from the signal mask of every held thread. */
void tracee_unblock(struct tracee_set *ts, int sig);
/* Resumes every held thread and detaches from it. */
void tracee_release(struct tracee_set *ts);

/* The instruction pointer of the held thread tid, or 0. */
uint64_t tracee_ip(pid_t tid);

#endif
