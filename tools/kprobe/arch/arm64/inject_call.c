/* Loading the agent into a running process (kprobe -p) on arm64: not
 * implemented.  The x86-64 call (arch/x86_64/inject_call.c) is
 * self-restoring: its stub reloads every register and returns to the
 * thread's own instruction with `ret $128`.  A64 has no return that pops
 * its target, so a stub cannot reach an arbitrary pc without a register of
 * its own, and the system call a stopped thread is in cannot be restarted
 * from user space either: ptrace does not show the original x0, which the
 * kernel puts back itself on a restart.  Until the arm64 call is built the
 * other way (the tool restores the thread, catching the restarted call at
 * its entry), attaching says so, before any thread of the target is
 * touched by a call: launch mode (the agent started by LD_AUDIT) works. */
#include "inject_call.h"

#include <errno.h>
#include <string.h>

int inject_find_stub_room(pid_t pid, uint64_t *addr)
{
	(void)pid;
	*addr = 0;
	return -EOPNOTSUPP;
}

int inject_call_dlopen(struct tracee_set *ts, pid_t tid, const struct inject_request *req,
		       int timeout_ms, struct inject_result *res)
{
	(void)ts;
	(void)tid;
	(void)req;
	(void)timeout_ms;
	memset(res, 0, sizeof(*res));
	return -EOPNOTSUPP;
}
