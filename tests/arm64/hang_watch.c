/* A watch over a test that may hang (hang_watch.h). */
#include "hang_watch.h"

#include <asm/ptrace.h>
#include <elf.h>
#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

static void dump_str(const char *s)
{
	size_t n = strlen(s);

	while (n) {
		ssize_t w = write(2, s, n);

		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

/* /proc/<pid>/task/<tid>/<what> (pid "self" or a number), its newlines
 * as ";", after a label. */
static void dump_task_file(const char *pid, const char *tid, const char *what)
{
	char path[96], buf[2048];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%s/task/%s/%s", pid, tid, what);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = 0;
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\n')
			buf[i] = i + 1 < n ? ';' : 0;
	dump_str("    ");
	dump_str(what);
	dump_str(": ");
	dump_str(buf);
	dump_str("\n");
}

/* Where a running thread is: its pc, x30 and sp, written from its own
 * signal handler (async-signal-safe: snprintf into a buffer, one write). */
static void where_am_i(int sig, siginfo_t *info, void *ctx)
{
	const ucontext_t *uc = ctx;
	char line[160];
	int n;

	n = snprintf(line, sizeof(line), "  task %ld: pc %#llx x30 %#llx sp %#llx\n",
		     (long)gettid(), (unsigned long long)uc->uc_mcontext.pc,
		     (unsigned long long)uc->uc_mcontext.regs[30],
		     (unsigned long long)uc->uc_mcontext.sp);
	if (n > 0 && write(2, line, (size_t)n) < 0)
		return;
}

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/* Each thread of process pid ("self" or a number): its state, where it
 * waits in the kernel, its system call (with the user sp and pc), the
 * kernel stack, then what more(tid) says. */
static void dump_tasks(const char *pid, void (*more)(pid_t tid))
{
	char dir[64], buf[4096];
	long n;
	int fd;

	snprintf(dir, sizeof(dir), "/proc/%s/task", pid);
	fd = open(dir, O_RDONLY | O_DIRECTORY);
	while (fd >= 0 && (n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n;) {
			struct linux_dirent64 *de = (struct linux_dirent64 *)(buf + off);

			off += de->d_reclen;
			if (de->d_name[0] == '.')
				continue;
			dump_str("  task ");
			dump_str(de->d_name);
			dump_str("\n");
			dump_task_file(pid, de->d_name, "stat");
			dump_task_file(pid, de->d_name, "wchan");
			dump_task_file(pid, de->d_name, "syscall");
			dump_task_file(pid, de->d_name, "stack");
			dump_task_file(pid, de->d_name, "status");
			more(atoi(de->d_name));
		}
	}
	if (fd >= 0)
		close(fd);
}

/* Another thread of this process says where it is (where_am_i). */
static void ask_where(pid_t tid)
{
	if (tid != gettid())
		tgkill(getpid(), tid, SIGUSR2);
}

/* Every thread: its state, where it waits in the kernel, its system call
 * with the user sp and pc (/proc's syscall), the kernel stack; then each
 * thread that can take a signal says its pc and x30; then the executable
 * mappings. */
static void dump_threads(const struct hang_watch *w)
{
	struct sigaction sa = { .sa_sigaction = where_am_i, .sa_flags = SA_SIGINFO };
	char head[512], where[384] = "", buf[4096];
	long n;
	int fd;

	if (w->where)
		w->where(where, sizeof(where));
	snprintf(head, sizeof(head), "%s watchdog: the test is still running; %s\n", w->name,
		 where);
	dump_str(head);
	sigaction(SIGUSR2, &sa, NULL);
	dump_tasks("self", ask_where);
	usleep(200000);
	fd = open("/proc/self/maps", O_RDONLY);
	while (fd >= 0 && (n = read(fd, buf, sizeof(buf) - 1)) > 0) {
		buf[n] = 0;
		dump_str(buf);
	}
	if (fd >= 0)
		close(fd);
}

/* A thread of another process stopped with ptrace: its pc, sp and x30
 * (what /proc does not say of a running thread). */
static void dump_regs_from_outside(pid_t tid)
{
	struct user_pt_regs regs;
	struct iovec iov = { &regs, sizeof(regs) };
	char line[160];
	int st, n;

	if (ptrace(PTRACE_SEIZE, tid, 0, 0))
		return;
	if (!ptrace(PTRACE_INTERRUPT, tid, 0, 0) && waitpid(tid, &st, __WALL) == tid &&
	    !ptrace(PTRACE_GETREGSET, tid, (void *)NT_PRSTATUS, &iov)) {
		long word;

		n = snprintf(line, sizeof(line), "    regs: pc %#llx x30 %#llx sp %#llx\n",
			     (unsigned long long)regs.pc, (unsigned long long)regs.regs[30],
			     (unsigned long long)regs.sp);
		if (n > 0)
			dump_str(line);
		/* the instruction it is at, as the process's memory has it */
		errno = 0;
		word = ptrace(PTRACE_PEEKTEXT, tid, (void *)(uintptr_t)(regs.pc & ~7ull), 0);
		n = snprintf(line, sizeof(line), "    word at pc: %#x%s; pstate %#llx\n",
			     (unsigned int)((unsigned long)word >> (8 * (regs.pc & 4))),
			     errno ? " (unreadable)" : "", (unsigned long long)regs.pstate);
		if (n > 0)
			dump_str(line);
	}
	ptrace(PTRACE_DETACH, tid, 0, 0);
}

/* From another process (the test's own may be stopped or frozen whole,
 * its watchdog thread with it): the state of every thread of pid. */
static void dump_from_outside(const struct hang_watch *w, pid_t pid)
{
	char spid[16];

	snprintf(spid, sizeof(spid), "%d", (int)pid);
	dump_str(w->name);
	dump_str(" outside watchdog: the test process is still running\n");
	dump_tasks(spid, dump_regs_from_outside);
}

/* A child process that dumps the test's threads (dump_from_outside) if
 * the test still runs w->after seconds (and two) from now; stopped once
 * the test is done. */
static pid_t outside_watchdog(const struct hang_watch *w)
{
	pid_t parent = getpid(), child = fork();

	if (child > 0)
		prctl(PR_SET_PTRACER, child, 0, 0, 0);	/* for its look at the registers */
	if (child != 0)
		return child;
	for (int i = 0; i < w->after * 10 + 20; i++) {
		usleep(100000);
		if (getppid() != parent)
			_exit(0);
	}
	dump_from_outside(w, parent);
	_exit(0);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Until the test is done: w->after seconds after it began, the threads'
 * state, once. */
static void *watchdog(void *arg)
{
	struct hang_watch *w = arg;
	struct timespec tick = { 0, 100000000 };
	double deadline = now_s() + w->after;

	while (now_s() < deadline) {
		if (__atomic_load_n(&w->done, __ATOMIC_ACQUIRE))
			return NULL;
		nanosleep(&tick, NULL);
	}
	dump_threads(w);
	return NULL;
}

void hang_watch_start(struct hang_watch *w, const char *name, int after,
		      void (*where)(char *buf, size_t len))
{
	const char *env = getenv("A64_HANG_DUMP");

	w->name = name;
	w->after = env && atoi(env) > 0 ? atoi(env) : after;
	w->where = where;
	w->done = false;
	w->outside = outside_watchdog(w);
	if (pthread_create(&w->dog, NULL, watchdog, w))
		w->dog = 0;
}

void hang_watch_stop(struct hang_watch *w)
{
	__atomic_store_n(&w->done, true, __ATOMIC_RELEASE);
	if (w->dog)
		pthread_join(w->dog, NULL);
	if (w->outside > 0) {
		kill(w->outside, SIGKILL);
		waitpid(w->outside, NULL, 0);
	}
}

