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
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HOLD_TIMEOUT_NS		(5ull * 1000000000ull)
#define CALL_LET_RUN_NS		(2ull * 1000000000ull)
#define CALL_TIMEOUT_NS		(60ull * 1000000000ull)
#define RED_ZONE		128
#define XSTATE_MAX		(64 * 1024)

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

/* Waits until t is in an event stop (PTRACE_INTERRUPT), delivering any
 * signal that comes first. */
static int wait_held(struct tracee *t, unsigned long long deadline)
{
	for (;;) {
		int sig = 0;

		switch (poll_stop(t, &sig)) {
		case STOP_EVENT:
			t->stopped = true;
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

static int write_mem(pid_t pid, uint64_t addr, const void *buf, size_t len)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = pwrite(fd, buf, len, (off_t)addr);
	close(fd);
	return n == (ssize_t)len ? 0 : -EFAULT;
}

uint64_t tracee_ip(pid_t tid)
{
	struct user_regs_struct r;

	return ptrace(PTRACE_GETREGS, tid, 0, &r) ? 0 : r.rip;
}

int tracee_read_string(pid_t pid, uint64_t addr, char *buf, size_t len)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = pread(fd, buf, len - 1, (off_t)addr);
	close(fd);
	if (n <= 0)
		return -EFAULT;
	buf[n] = '\0';
	return 0;
}

/* Saved state of the hijacked thread. */
struct saved_state {
	struct user_regs_struct regs;
	struct iovec xiov;
	unsigned char *xstate;
	struct user_fpregs_struct fp;
	bool have_xstate;
};

static int save_state(pid_t tid, struct saved_state *s)
{
	if (ptrace(PTRACE_GETREGS, tid, 0, &s->regs))
		return -errno;
	s->xstate = aligned_alloc(64, XSTATE_MAX);
	if (s->xstate) {
		s->xiov = (struct iovec){ s->xstate, XSTATE_MAX };
		s->have_xstate = !ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE, &s->xiov);
	}
	if (!s->have_xstate && ptrace(PTRACE_GETFPREGS, tid, 0, &s->fp))
		return -errno;
	return 0;
}

static void restore_state(pid_t tid, struct saved_state *s)
{
	ptrace(PTRACE_SETREGS, tid, 0, &s->regs);
	if (s->have_xstate)
		ptrace(PTRACE_SETREGSET, tid, (void *)NT_X86_XSTATE, &s->xiov);
	else
		ptrace(PTRACE_SETFPREGS, tid, 0, &s->fp);
	free(s->xstate);
	s->xstate = NULL;
}

/* Lets the other held threads run (the call may need a lock they hold);
 * they stay traced, and their stops are serviced while we wait. */
static void let_others_run(struct tracee_set *ts, pid_t tid)
{
	for (int i = 0; i < ts->n; i++) {
		struct tracee *t = &ts->v[i];

		if (t->tid != tid && t->stopped && !t->gone) {
			ptrace(PTRACE_CONT, t->tid, 0, 0);
			t->stopped = false;
		}
	}
}

static void service_others(struct tracee_set *ts, pid_t tid)
{
	for (int i = 0; i < ts->n; i++) {
		struct tracee *t = &ts->v[i];
		int sig = 0;

		if (t->tid == tid || t->stopped || t->gone)
			continue;
		switch (poll_stop(t, &sig)) {
		case STOP_SIGNAL:
			ptrace(PTRACE_CONT, t->tid, 0, (void *)(long)sig);
			break;
		case STOP_EVENT:
			ptrace(PTRACE_CONT, t->tid, 0, 0);
			break;
		case STOP_GONE:
			t->gone = true;
			break;
		case STOP_NONE:
			break;
		}
	}
}

/* Runs t until the called function returns to address 0. */
static int run_call(struct tracee_set *ts, struct tracee *t, uint64_t *ret)
{
	unsigned long long start = now_ns();
	bool others_running = false;

	if (ptrace(PTRACE_CONT, t->tid, 0, 0))
		return -errno;
	t->stopped = false;
	for (;;) {
		struct user_regs_struct r;
		int sig = 0;

		switch (poll_stop(t, &sig)) {
		case STOP_GONE:
			t->gone = true;
			return -ESRCH;
		case STOP_EVENT:
			ptrace(PTRACE_CONT, t->tid, 0, 0);
			break;
		case STOP_SIGNAL:
			if (sig == SIGSEGV && !ptrace(PTRACE_GETREGS, t->tid, 0, &r)) {
				/* Stopped before the signal is delivered: it never is. */
				t->stopped = true;
				if (r.rip != 0)
					return -EFAULT;
				*ret = r.rax;
				return 0;
			}
			ptrace(PTRACE_CONT, t->tid, 0, (void *)(long)sig);
			break;
		case STOP_NONE:
			if (!others_running && now_ns() - start > CALL_LET_RUN_NS) {
				let_others_run(ts, t->tid);
				others_running = true;
			}
			if (now_ns() - start > CALL_TIMEOUT_NS)
				return -ETIMEDOUT;
			if (others_running)
				service_others(ts, t->tid);
			nap();
			break;
		}
	}
}

int tracee_call(struct tracee_set *ts, pid_t tid, uint64_t fn, const char *str, uint64_t a0,
		uint64_t a1, uint64_t *ret)
{
	struct tracee *t = find(ts, tid);
	struct saved_state saved = { 0 };
	struct user_regs_struct r;
	uint64_t sp, zero = 0;
	int rc;

	if (!t || !t->stopped || t->gone)
		return -ESRCH;
	rc = save_state(tid, &saved);
	if (rc) {
		free(saved.xstate);
		return rc;
	}
	r = saved.regs;
	/* Below the red zone, 16-byte aligned, as at a call. */
	sp = (saved.regs.rsp - RED_ZONE - 256) & ~15ull;
	if (str) {
		size_t len = strlen(str) + 1;

		sp -= (len + 15) & ~15ull;
		rc = write_mem(ts->pid, sp, str, len);
		a0 = sp;
	}
	sp -= 8;
	if (!rc)
		rc = write_mem(ts->pid, sp, &zero, sizeof(zero));	/* return address */
	if (rc) {
		free(saved.xstate);
		return rc;
	}
	r.rsp = sp;
	r.rip = fn;
	r.rdi = a0;
	r.rsi = a1;
	r.rax = 0;
	/* Not in a system call any more: no restart on resume. */
	r.orig_rax = (unsigned long long)-1;
	r.eflags &= ~0x500ull;		/* DF and TF clear, as the ABI wants */
	if (ptrace(PTRACE_SETREGS, tid, 0, &r)) {
		rc = -errno;
		free(saved.xstate);
		return rc;
	}
	rc = run_call(ts, t, ret);
	if (t->gone) {
		free(saved.xstate);
		return rc;
	}
	if (!t->stopped) {
		/* Timed out: stop it where it is; it cannot be saved from here. */
		ptrace(PTRACE_INTERRUPT, tid, 0, 0);
		wait_held(t, now_ns() + HOLD_TIMEOUT_NS);
		free(saved.xstate);
		return rc;
	}
	/* The interrupted system call, if any, restarts as it would have. */
	restore_state(tid, &saved);
	return rc;
}
