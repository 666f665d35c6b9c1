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
	/* The system call it was blocked in when we last stopped it (where
	 * the architecture needs the note, kp_ptrace.h): nr -1 none. */
	long call_nr;
	uint64_t call_arg0, call_pc;
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

/* A stopped process (group stop) keeps its own threads stopped while
 * these run under ptrace: the agent's loading and its threads. */
/* Seizes and holds the threads of pid whose name (comm) is in names. */
int tracee_seize_named(struct tracee_set *ts, pid_t pid, const char *const *names);
/* Lets the held thread tid run, traced, with the threads it creates. */
int tracee_run(struct tracee_set *ts, pid_t tid);
/* Services the running traced threads without blocking: group stops and
 * other events are continued, signals delivered, new threads taken in.
 * Call it often (every 100 ms at most) while they must run. */
void tracee_service(struct tracee_set *ts);
/* Stops one running traced thread again (held, as by tracee_hold()). */
int tracee_hold_one(struct tracee_set *ts, pid_t tid);
/* Stops and detaches one thread (which rejoins a group stop in effect). */
void tracee_detach_one(struct tracee_set *ts, pid_t tid);

/* The instruction pointer of the held thread tid, or 0. */
uint64_t tracee_ip(pid_t tid);


#endif
