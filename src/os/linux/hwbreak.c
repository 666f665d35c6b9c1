/* Hardware data breakpoints on every thread of the process.
 *
 * A breakpoint perf event is bound to one thread (pid = tid, cpu = -1),
 * so arming one opens an event per existing thread; inherit_thread hands
 * a copy to every thread one of them creates, so threads started later are
 * watched too, and the kernel frees a thread's copy (and its debug
 * register) when the thread exits.  An exited thread's own event must stay
 * open: closing it would free the copies it handed down.  sigtrap makes
 * each hit a synchronous SIGTRAP (si_code TRAP_PERF) right after the
 * accessing instruction, carrying the event's sig_data; the kernel
 * requires remove_on_exec with it, so an exec'd program starts unwatched.
 *
 * Descriptors are moved high and are close-on-exec: the program may close
 * or reuse low numbers. */
#include "os/linux/hwbreak.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "os/linux/sys.h"

/* Passes over /proc/self/task until one finds no thread without an event
 * (threads may be created while we open). */
#define MAX_PASSES 64

static void fill_attr(struct perf_event_attr *a, uintptr_t addr, unsigned int len, bool rw,
		      uint64_t cookie, bool disabled)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = PERF_TYPE_BREAKPOINT;
	a->bp_type = rw ? HW_BREAKPOINT_RW : HW_BREAKPOINT_W;
	a->bp_addr = addr;
	a->bp_len = len;
	a->sample_period = 1;
	a->disabled = disabled;
	a->inherit = 1;
	a->inherit_thread = 1;
	a->remove_on_exec = 1;
	a->sigtrap = 1;
	a->sig_data = cookie;
	a->exclude_kernel = 1;
	a->exclude_hv = 1;
}

/* The lowest descriptor number we move events to. */
static int high_floor(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return 1024;
	return rl.rlim_cur > 2048 ? 1024 : (int)(rl.rlim_cur / 2);
}

static int move_high(int fd)
{
	int hi = fcntl(fd, F_DUPFD_CLOEXEC, high_floor());

	if (hi < 0)
		return fd;
	close(fd);
	return hi;
}

/* What a failed perf_event_open() means for the caller. */
static int open_error(int e)
{
	switch (e) {
	case ENOSPC:
	case EACCES:
	case ENOMEM:
	case EMFILE:
	case ENFILE:
		return -e;
	case EPERM:
		return -EACCES;
	default:
		/* ENOENT, ENODEV, EOPNOTSUPP, ENOSYS: no breakpoint PMU;
		 * EINVAL, E2BIG: a kernel without sigtrap (before 5.13). */
		return -EOPNOTSUPP;
	}
}

static int open_one(const struct perf_event_attr *a, pid_t tid)
{
	long fd = syscall(SYS_perf_event_open, a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);

	if (fd < 0)
		return errno == ESRCH ? -ESRCH : open_error(errno);
	return move_high((int)fd);
}

static int push_fd(struct kp_hwbp *bp, int fd, pid_t **tids, pid_t tid)
{
	if (bp->nfds == bp->cap) {
		unsigned int cap = bp->cap ? 2 * bp->cap : 16;
		int *fds = realloc(bp->fds, cap * sizeof(*fds));
		pid_t *t;

		if (!fds)
			return -ENOMEM;
		bp->fds = fds;
		t = realloc(*tids, cap * sizeof(**tids));
		if (!t)
			return -ENOMEM;
		*tids = t;
		bp->cap = cap;
	}
	(*tids)[bp->nfds] = tid;
	bp->fds[bp->nfds++] = fd;
	return 0;
}

static bool has_tid(const pid_t *tids, unsigned int n, pid_t tid)
{
	for (unsigned int i = 0; i < n; i++)
		if (tids[i] == tid)
			return true;
	return false;
}

/* One pass: an event for every listed thread that has none of ours.
 * *opened: how many were opened. */
static int arm_pass(struct kp_hwbp *bp, const struct perf_event_attr *a, pid_t **tids,
		    unsigned int *opened)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int err = 0;

	*opened = 0;
	if (!d)
		return -errno;
	while (!err && (e = readdir(d))) {
		pid_t tid = (pid_t)atoi(e->d_name);
		int fd;

		if (tid <= 0 || has_tid(*tids, bp->nfds, tid))
			continue;
		fd = open_one(a, tid);
		if (fd == -ESRCH)
			continue;	/* exited meanwhile */
		if (fd < 0) {
			err = fd;
			break;
		}
		err = push_fd(bp, fd, tids, tid);
		if (err)
			close(fd);
		else
			(*opened)++;
	}
	closedir(d);
	return err;
}

int kp_hwbp_arm(struct kp_hwbp *bp, uintptr_t addr, unsigned int len, bool rw,
		uint64_t cookie, bool disabled)
{
	struct perf_event_attr a;
	pid_t *tids = NULL;
	unsigned int opened = 1;
	int err = 0;

	*bp = (struct kp_hwbp){ 0 };
	fill_attr(&a, addr, len, rw, cookie, disabled);
	/* A thread created by one that had no event yet is listed by a
	 * later pass.  One created by one that had already inherits a copy,
	 * and may get a second event of ours here if it was not listed
	 * before: its traps coincide, and the kernel merges the two pending
	 * SIGTRAPs into one. */
	for (int pass = 0; !err && opened && pass < MAX_PASSES; pass++)
		err = arm_pass(bp, &a, &tids, &opened);
	free(tids);
	if (err)
		kp_hwbp_disarm(bp);
	return err;
}

void kp_hwbp_disarm(struct kp_hwbp *bp)
{
	for (unsigned int i = 0; i < bp->nfds; i++)
		close(bp->fds[i]);
	free(bp->fds);
	*bp = (struct kp_hwbp){ 0 };
}

int kp_hwbp_enable(struct kp_hwbp *bp, bool on)
{
	unsigned long req = on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE;
	int err = 0;

	/* Each ioctl also reaches the copies the event handed down. */
	for (unsigned int i = 0; i < bp->nfds; i++)
		if (ioctl(bp->fds[i], req, 0) && !err)
			err = -errno;
	return err;
}

int kp_hwbp_rearm_child(struct kp_hwbp *bp, uintptr_t addr, unsigned int len, bool rw,
			uint64_t cookie, bool disabled)
{
	struct perf_event_attr a;
	int fd;

	/* Closing our copies of the parent's descriptors leaves its events
	 * alone; an ioctl on them would not. */
	kp_hwbp_disarm(bp);
	fill_attr(&a, addr, len, rw, cookie, disabled);
	fd = open_one(&a, kp_gettid());
	if (fd < 0)
		return fd;
	bp->fds = malloc(sizeof(*bp->fds));
	if (!bp->fds) {
		close(fd);
		return -ENOMEM;
	}
	bp->fds[0] = fd;
	bp->nfds = bp->cap = 1;
	return 0;
}
