/* ptrace: stopping another process's threads and calling a function in it
 * (see tracee.h). */
#include "tracee.h"
#include "kp_ptrace.h"

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
	ts->v[ts->n] = (struct tracee){ .tid = tid, .call_nr = -1 };
	return &ts->v[ts->n++];
}

enum stop_kind { STOP_NONE, STOP_EVENT, STOP_SIGNAL, STOP_GONE };

/* One wait status of t, without blocking: STOP_EVENT for a ptrace event
 * (*event: PTRACE_EVENT_STOP for PTRACE_INTERRUPT and group stops,
 * PTRACE_EVENT_CLONE ...), STOP_SIGNAL for a signal about to be
 * delivered (*sig). */
static enum stop_kind poll_stop_event(struct tracee *t, int *sig, int *event)
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
	*event = st >> 16;
	return *event ? STOP_EVENT : STOP_SIGNAL;
}

/* System calls that return -EINTR, not one of the kernel's restart codes,
 * when merely stopped (signal(7): "never restarted after being interrupted
 * by a stop signal"): epoll_wait, sigtimedwait, System V semaphores, AIO
 * waits and socket calls with a timeout.  connect() is not here: after
 * EINTR the connection goes on, and a second call fails. */
static bool eintr_on_stop(long nr)
{
	switch (nr) {
#ifdef SYS_epoll_wait		/* not on arm64, which has epoll_pwait only */
	case SYS_epoll_wait:
#endif
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
 * return EINTR to the program, make the kernel re-issue it when the thread
 * resumes instead (with its original arguments: a timeout starts again),
 * exactly as if we had never stopped it (kp_uregs_reissue: on x86-64 the
 * restart code -ERESTARTNOHAND, which still returns EINTR if a signal
 * handler runs first; on arm64 the call's registers put back). */
static void keep_syscall_going(const struct tracee *t)
{
	struct kp_blocked_call c = { t->call_nr, t->call_arg0, t->call_pc };
	struct kp_uregs r;
	long nr;

	if (kp_uregs_get(t->tid, &r) || !kp_uregs_eintr_call(&r, &c, &nr) || !eintr_on_stop(nr))
		return;
	kp_uregs_reissue(&r, &c);
	kp_uregs_set(t->tid, &r);
}

/* Where the kernel forgets a call our stop interrupts (kp_ptrace.h), the
 * call thread t of pid is blocked in, from /proc (a thread that is running
 * or not in a call: none). */
static void note_blocked_call(pid_t pid, struct tracee *t)
{
	char path[96], line[256];
	unsigned long long a[8];
	long nr;
	FILE *f;

	t->call_nr = -1;
	if (!KP_NOTE_BLOCKED_CALLS)
		return;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)t->tid);
	f = fopen(path, "re");
	if (!f)
		return;
	if (fgets(line, sizeof(line), f) &&
	    sscanf(line, "%ld %llx %llx %llx %llx %llx %llx %llx %llx", &nr, &a[0], &a[1], &a[2],
		   &a[3], &a[4], &a[5], &a[6], &a[7]) == 9 && nr >= 0) {
		t->call_nr = nr;
		t->call_arg0 = a[0];
		t->call_pc = a[7];
	}
	fclose(f);
}

/* Stops thread t of ts (PTRACE_INTERRUPT), its blocked call noted first. */
static void interrupt(struct tracee_set *ts, struct tracee *t)
{
	note_blocked_call(ts->pid, t);
	ptrace(PTRACE_INTERRUPT, t->tid, 0, 0);
}

static void adopt_clone(struct tracee_set *ts, pid_t parent);

/* Waits until thread i of ts is in an event stop (PTRACE_INTERRUPT),
 * delivering any signal that comes first and taking in threads it creates
 * meanwhile (when tracing clones); ts->v may move. */
static int wait_held(struct tracee_set *ts, int i, unsigned long long deadline)
{
	for (;;) {
		int sig = 0, event = 0;
		pid_t tid = ts->v[i].tid;

		switch (poll_stop_event(&ts->v[i], &sig, &event)) {
		case STOP_EVENT:
			if (event != PTRACE_EVENT_STOP) {
				if (event == PTRACE_EVENT_CLONE)
					adopt_clone(ts, tid);
				ptrace(PTRACE_CONT, tid, 0, 0);
				break;
			}
			ts->v[i].stopped = true;
			keep_syscall_going(&ts->v[i]);
			return 0;
		case STOP_SIGNAL:
			ptrace(PTRACE_CONT, tid, 0, (void *)(long)sig);
			break;
		case STOP_GONE:
			ts->v[i].gone = true;
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
		if (ts->v[i].gone)
			continue;
		/* Only a stopped tracee can be detached. */
		if (!ts->v[i].stopped) {
			interrupt(ts, &ts->v[i]);
			wait_held(ts, i, deadline);
		}
		if (!ts->v[i].gone)
			ptrace(PTRACE_DETACH, ts->v[i].tid, 0, 0);
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

/* Whether thread tid of pid is traced by us already (the agent's threads
 * we keep running in a stopped process). */
static bool traced_by_us(pid_t pid, pid_t tid)
{
	char path[96], buf[2048], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	p = strstr(buf, "\nTracerPid:");
	return p && atoi(p + 11) == (int)getpid();
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
			int err = errno;

			/* Exited meanwhile (an exiting thread refuses with
			 * EPERM until it is gone). */
			if (err == ESRCH || (err == EPERM && (thread_exiting(ts->pid, tid) ||
							      traced_by_us(ts->pid, tid))))
				continue;
			added = -err;
			break;
		}
		if (!add(ts, tid)) {
			ptrace(PTRACE_DETACH, tid, 0, 0);
			added = -ENOMEM;
			break;
		}
		interrupt(ts, &ts->v[ts->n - 1]);
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
				rc = wait_held(ts, i, deadline);
	}
	if (rc < 0 || ts->n == 0) {
		tracee_release(ts);
		return rc < 0 ? rc : -ESRCH;
	}
	return 0;
}

uint64_t tracee_ip(pid_t tid)
{
	struct kp_uregs r;

	return kp_uregs_get(tid, &r) ? 0 : kp_uregs_ip(&r);
}

/* Seizes thread tid and waits until it is held; a thread already in the
 * set is left as it is. */
static int seize_one(struct tracee_set *ts, pid_t tid)
{
	if (find(ts, tid))
		return 0;
	if (ptrace(PTRACE_SEIZE, tid, 0, 0))
		return -errno;
	if (!add(ts, tid)) {
		ptrace(PTRACE_DETACH, tid, 0, 0);
		return -ENOMEM;
	}
	interrupt(ts, &ts->v[ts->n - 1]);
	return wait_held(ts, ts->n - 1, now_ns() + HOLD_TIMEOUT_NS);
}

/* Whether thread tid of pid has one of the names (its comm). */
static bool thread_named(pid_t pid, pid_t tid, const char *const *names)
{
	char path[96], comm[32];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, comm, sizeof(comm) - 1);
	close(fd);
	if (n <= 0)
		return false;
	comm[n] = '\0';
	comm[strcspn(comm, "\n")] = '\0';
	for (int i = 0; names[i]; i++)
		if (!strcmp(comm, names[i]))
			return true;
	return false;
}

int tracee_seize_named(struct tracee_set *ts, pid_t pid, const char *const *names)
{
	char path[64];
	struct dirent *de;
	DIR *d;
	int rc = 0;

	ts->pid = pid;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return -ESRCH;
	while (!rc && (de = readdir(d))) {
		pid_t tid = (pid_t)atoi(de->d_name);

		if (tid > 0 && thread_named(pid, tid, names))
			rc = seize_one(ts, tid);
	}
	closedir(d);
	return rc;
}

int tracee_run(struct tracee_set *ts, pid_t tid)
{
	struct tracee *t = find(ts, tid);

	if (!t || !t->stopped || t->gone)
		return -ESRCH;
	/* Threads it creates are traced too, so they can run as well (in a
	 * stopped process they would join the group stop at once). */
	if (ptrace(PTRACE_SETOPTIONS, tid, 0, (void *)PTRACE_O_TRACECLONE) ||
	    ptrace(PTRACE_CONT, tid, 0, 0))
		return -errno;
	t->stopped = false;
	return 0;
}

/* Takes in the thread a PTRACE_EVENT_CLONE stop of parent announced; it
 * starts with an event stop of its own, serviced like any other. */
static void adopt_clone(struct tracee_set *ts, pid_t parent)
{
	unsigned long child = 0;

	if (ptrace(PTRACE_GETEVENTMSG, parent, 0, &child) || !child || find(ts, (pid_t)child))
		return;
	add(ts, (pid_t)child);	/* not stopped: serviced until released */
}

/* tracee_service() for every thread but except (0: none). */
static void service_except(struct tracee_set *ts, pid_t except)
{
	for (int i = 0; i < ts->n; i++) {
		int sig = 0, event = 0;
		pid_t tid = ts->v[i].tid;

		if (ts->v[i].stopped || ts->v[i].gone || tid == except)
			continue;
		switch (poll_stop_event(&ts->v[i], &sig, &event)) {
		case STOP_EVENT:
			if (event == PTRACE_EVENT_CLONE)
				adopt_clone(ts, tid);	/* may move ts->v */
			/* Group stops too: this thread keeps running. */
			ptrace(PTRACE_CONT, tid, 0, 0);
			break;
		case STOP_SIGNAL:
			ptrace(PTRACE_CONT, tid, 0, (void *)(long)sig);
			break;
		case STOP_GONE:
			ts->v[i].gone = true;
			break;
		case STOP_NONE:
			break;
		}
	}
}

void tracee_service(struct tracee_set *ts)
{
	service_except(ts, 0);
}

void tracee_detach_one(struct tracee_set *ts, pid_t tid)
{
	struct tracee *t = find(ts, tid);
	int i;

	if (!t || t->gone)
		return;
	i = (int)(t - ts->v);
	if (!t->stopped) {
		interrupt(ts, t);
		wait_held(ts, i, now_ns() + HOLD_TIMEOUT_NS);
	}
	if (!ts->v[i].gone)
		ptrace(PTRACE_DETACH, tid, 0, 0);
	ts->v[i].gone = true;		/* no longer ours */
}

int tracee_hold_one(struct tracee_set *ts, pid_t tid)
{
	struct tracee *t = find(ts, tid);
	int i;

	if (!t || t->gone)
		return -ESRCH;
	if (t->stopped)
		return 0;
	i = (int)(t - ts->v);
	interrupt(ts, t);
	wait_held(ts, i, now_ns() + HOLD_TIMEOUT_NS);
	return ts->v[i].gone ? -ESRCH : ts->v[i].stopped ? 0 : -ETIMEDOUT;
}
