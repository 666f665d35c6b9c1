/* Holding the threads of another process still with ptrace, and making one
 * of them call a function. */
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

/* Makes the held thread tid call fn(a0, a1) on its own stack, with str (if
 * not NULL) copied onto that stack and passed as a0 instead; the thread's
 * registers, vector state and stack contents above the red zone are put
 * back afterwards.  If the call takes longer than two seconds (a lock held
 * by a stopped thread) the other threads are let run.  0 with the return
 * value in *ret, or -errno. */
int tracee_call(struct tracee_set *ts, pid_t tid, uint64_t fn, const char *str, uint64_t a0,
		uint64_t a1, uint64_t *ret);

/* The instruction pointer of the held thread tid, or 0. */
uint64_t tracee_ip(pid_t tid);

/* Reads a NUL-terminated string of the process (at most len - 1 bytes). */
int tracee_read_string(pid_t pid, uint64_t addr, char *buf, size_t len);

#endif
