/* ptrace: stopping another process's threads and calling a function in it
 * (see tracee.h). */
#include "tracee.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HOLD_TIMEOUT_NS		(5ull * 1000000000ull)

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static void nap(void)
{
	struct timespec ts = { 0, 200000 };

	nanosleep(&ts, NULL);
}

static struct tracee *find(struct tracee_set *ts, pid_t tid)
{
	for (int i = 0; i < ts->n; i++)
		if (ts->v[i].tid == tid)
			return &ts->v[i];
	return NULL;
}

static struct tracee *add(struct tracee_set *ts, pid_t tid)
{
	if (ts->n == ts->cap) {
		int cap = ts->cap ? ts->cap * 2 : 16;
		struct tracee *v = realloc(ts->v, (size_t)cap * sizeof(*v));

		if (!v)
			return NULL;
		ts->v = v;
		ts->cap = cap;
	}
	ts->v[ts->n] = (struct tracee){ .tid = tid };
	return &ts->v[ts->n++];
}

enum stop_kind { STOP_NONE, STOP_EVENT, STOP_SIGNAL, STOP_GONE };

/* One wait status of t, without blocking. */
static enum stop_kind poll_stop(struct tracee *t, int *sig)
{
	int st;
	pid_t r = waitpid(t->tid, &st, __WALL | WNOHANG);

	if (r == 0)
		return STOP_NONE;
	if (r < 0)
		return errno == EINTR ? STOP_NONE : STOP_GONE;
	if (WIFEXITED(st) || WIFSIGNALED(st))
		return STOP_GONE;
	if (!WIFSTOPPED(st))
		return STOP_NONE;
	*sig = WSTOPSIG(st);
	return (st >> 16) == PTRACE_EVENT_STOP ? STOP_EVENT : STOP_SIGNAL;
}

#define ERESTARTNOHAND 514	/* the kernel's: restart unless a handler runs */

/* System calls that return -EINTR, not one of the kernel's restart codes,
 * when merely stopped (signal(7): "never restarted after being interrupted
 * by a stop signal"): epoll_wait, sigtimedwait, System V semaphores, AIO
 * waits and socket calls with a timeout.  connect() is not here: after
 * EINTR the connection goes on, and a second call fails. */
static bool eintr_on_stop(long nr)
{
	switch (nr) {
	case SYS_epoll_wait:
	case SYS_epoll_pwait:
#ifdef SYS_epoll_pwait2
	case SYS_epoll_pwait2:
#endif
	case SYS_rt_sigtimedwait:
	case SYS_semop:
	case SYS_semtimedop:
	case SYS_io_getevents:
#ifdef SYS_io_pgetevents
	case SYS_io_pgetevents:
#endif
	case SYS_recvfrom:
	case SYS_recvmsg:
	case SYS_recvmmsg:
	case SYS_sendto:
	case SYS_sendmsg:
	case SYS_accept:
	case SYS_accept4:
		return true;
	default:
		return false;
	}
}

/* Our stop interrupted t's blocking system call: if that call would now
 * return EINTR to the program, make it return -ERESTARTNOHAND instead, so
 * the kernel re-issues it when the thread resumes (with its original
 * arguments: a timeout starts again) and still returns EINTR if a signal
 * handler runs first, exactly as if we had never stopped it.  A call that
 * ended with EINTR because a handler ran shows the handler's registers
 * here (rax 0), never this pair. */
static void keep_syscall_going(pid_t tid)
{
	struct user_regs_struct r;

	if (ptrace(PTRACE_GETREGS, tid, 0, &r))
		return;
	if ((long long)r.orig_rax < 0 || (long long)r.rax != -EINTR ||
	    !eintr_on_stop((long)r.orig_rax))
		return;
	r.rax = (unsigned long long)-ERESTARTNOHAND;
	ptrace(PTRACE_SETREGS, tid, 0, &r);
}

/* Waits until t is in an event stop (PTRACE_INTERRUPT), delivering any
 * signal that comes first. */
static int wait_held(struct tracee *t, unsigned long long deadline)
{
	for (;;) {
		int sig = 0;

		switch (poll_stop(t, &sig)) {
		case STOP_EVENT:
			t->stopped = true;
			keep_syscall_going(t->tid);
			return 0;
		case STOP_SIGNAL:
			ptrace(PTRACE_CONT, t->tid, 0, (void *)(long)sig);
			break;
		case STOP_GONE:
			t->gone = true;
			return 0;
		case STOP_NONE:
			if (now_ns() > deadline)
				return -ETIMEDOUT;
			nap();
			break;
		}
	}
}

void tracee_release(struct tracee_set *ts)
{
	unsigned long long deadline = now_ns() + HOLD_TIMEOUT_NS;

	for (int i = 0; i < ts->n; i++) {
		struct tracee *t = &ts->v[i];

		if (t->gone)
			continue;
		/* Only a stopped tracee can be detached. */
		if (!t->stopped) {
			ptrace(PTRACE_INTERRUPT, t->tid, 0, 0);
			wait_held(t, deadline);
		}
		if (!t->gone)
			ptrace(PTRACE_DETACH, t->tid, 0, 0);
	}
	free(ts->v);
	ts->v = NULL;
	ts->n = ts->cap = 0;
}

void tracee_unblock(struct tracee_set *ts, int sig)
{
	for (int i = 0; i < ts->n; i++) {
		uint64_t mask;	/* the kernel's sigset: bit sig - 1 */

		if (!ts->v[i].stopped || ts->v[i].gone ||
		    ptrace(PTRACE_GETSIGMASK, ts->v[i].tid, (void *)sizeof(mask), &mask))
			continue;
		if (!(mask & (1ull << (sig - 1))))
			continue;
		mask &= ~(1ull << (sig - 1));
		ptrace(PTRACE_SETSIGMASK, ts->v[i].tid, (void *)sizeof(mask), &mask);
	}
}

/* Whether thread tid of pid is gone or a zombie (state Z or X). */
static bool thread_exiting(pid_t pid, pid_t tid)
{
	char path[96], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return !p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X';
}

/* Seizes the threads listed now; returns how many were new, or -errno. */
static int seize_listed(struct tracee_set *ts, pid_t except)
{
	char path[64];
	struct dirent *de;
	DIR *d;
	int added = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)ts->pid);
	d = opendir(path);
	if (!d)
		return -ESRCH;
	while ((de = readdir(d))) {
		pid_t tid = (pid_t)atoi(de->d_name);

		if (tid <= 0 || tid == except || find(ts, tid))
			continue;
		if (ptrace(PTRACE_SEIZE, tid, 0, 0)) {
			/* Exited meanwhile (an exiting thread refuses with
			 * EPERM until it is gone). */
			if (errno == ESRCH || (errno == EPERM && thread_exiting(ts->pid, tid)))
				continue;
			added = -errno;
			break;
		}
		if (!add(ts, tid)) {
			ptrace(PTRACE_DETACH, tid, 0, 0);
			added = -ENOMEM;
			break;
		}
		ptrace(PTRACE_INTERRUPT, tid, 0, 0);
		added++;
	}
	closedir(d);
	return added;
}

int tracee_hold(struct tracee_set *ts, pid_t pid, pid_t except)
{
	unsigned long long deadline = now_ns() + HOLD_TIMEOUT_NS;
	int rc = 0;

	memset(ts, 0, sizeof(*ts));
	ts->pid = pid;
	/* Threads may be created until every thread is stopped. */
	for (int round = 0; round < 100 && !rc; round++) {
		int added = seize_listed(ts, except);

		if (added <= 0) {
			rc = added;
			break;
		}
		for (int i = 0; i < ts->n && !rc; i++)
			if (!ts->v[i].stopped && !ts->v[i].gone)
				rc = wait_held(&ts->v[i], deadline);
	}
	if (rc < 0 || ts->n == 0) {
		tracee_release(ts);
		return rc < 0 ? rc : -ESRCH;
	}
	return 0;
}

uint64_t tracee_ip(pid_t tid)
{
	struct user_regs_struct r;

	return ptrace(PTRACE_GETREGS, tid, 0, &r) ? 0 : r.rip;
}
