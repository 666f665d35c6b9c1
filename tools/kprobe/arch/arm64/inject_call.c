/* The call of dlopen() in another process on arm64 (see inject_call.h).
 *
 * Not self-restoring as x86-64's (arch/x86_64/inject_call.c): A64 has no
 * return that pops its target, so no stub can reach an arbitrary pc with
 * every register as it was.  The tool restores the thread instead: it
 * saves the thread's general registers (NT_PRSTATUS) and FP/SIMD state
 * (NT_PRFPREG), writes the object's path below the stack pointer, and
 * points the thread at dlopen with x0 the path, x1 the mode and x30 0;
 * dlopen's return then faults at pc 0 (SIGSEGV), where the tool holds the
 * thread, reads x0, asks dlerror() the same way when it is 0, and puts the
 * saved state back.  A system call the thread was stopped in needs
 * nothing more: the kernel had already rewound it for a restart before
 * the stop (kp_ptrace.h), so the saved registers re-issue it.
 *
 * The price of this form: the thread depends on the tool until the call
 * returns.  A tool killed meanwhile leaves it to return to 0 and the
 * process to die of SIGSEGV; a call that does not return within the
 * timeout (a constructor waiting for a lock) is reported and the thread
 * left traced, held by the tool, which waits no longer. */
#include "inject_call.h"
#include "kp_ptrace.h"

#include <asm/ptrace.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* Below the stack pointer: AAPCS64 has no red zone, but a signal frame
 * being built or a leaf's scratch are not ours to guess at. */
#define STACK_GAP	256
/* The return address of every call: a fault at 0 is ours. */
#define RETURN_TRAP	0

static int mem_io(pid_t pid, uint64_t addr, void *buf, size_t len, bool write)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, (write ? O_RDWR : O_RDONLY) | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	n = write ? pwrite(fd, buf, len, (off_t)addr) : pread(fd, buf, len, (off_t)addr);
	close(fd);
	return n == (ssize_t)len ? 0 : -EFAULT;
}

/* No code is written into the target: the calls return to RETURN_TRAP. */
int inject_find_stub_room(pid_t pid, uint64_t *addr)
{
	(void)pid;
	*addr = RETURN_TRAP;
	return 0;
}

static int fpsimd_io(pid_t tid, struct user_fpsimd_state *fp, bool set)
{
	struct iovec iov = { fp, sizeof(*fp) };

	return ptrace(set ? PTRACE_SETREGSET : PTRACE_GETREGSET, tid, (void *)NT_PRFPREG, &iov) ?
		       -errno : 0;
}

/* fn(a0, a1) in held thread tid with stack pointer sp; its x0 in *ret. */
static int call_in(struct tracee_set *ts, pid_t tid, const struct kp_uregs *base, uint64_t fn,
		   uint64_t a0, uint64_t a1, uint64_t sp, int timeout_ms, uint64_t *ret)
{
	struct kp_uregs r = *base;
	int rc;

	r.r.pc = fn;
	r.r.sp = sp;
	r.r.regs[0] = a0;
	r.r.regs[1] = a1;
	r.r.regs[30] = RETURN_TRAP;
	r.r.regs[29] = 0;		/* the frame chain ends here */
	if (kp_uregs_set(tid, &r))
		return -errno;
	rc = tracee_run_to_fault(ts, tid, SIGSEGV, RETURN_TRAP, timeout_ms);
	if (rc)
		return rc;
	if (kp_uregs_get(tid, &r))
		return -errno;
	*ret = r.r.regs[0];
	return 0;
}

/* The saved state back, and the thread let go. */
static int restore(struct tracee_set *ts, pid_t tid, const struct kp_uregs *orig,
		   struct user_fpsimd_state *fp)
{
	int rc = 0;

	if (kp_uregs_set(tid, orig))
		rc = -errno;
	if (fpsimd_io(tid, fp, true) && !rc)
		rc = -EIO;
	tracee_detach_one(ts, tid);
	return rc;
}

int inject_call_dlopen(struct tracee_set *ts, pid_t tid, const struct inject_request *req,
		       int timeout_ms, struct inject_result *res)
{
	struct user_fpsimd_state fp;
	struct kp_uregs orig;
	size_t plen = strlen(req->path) + 1;
	uint64_t path, sp, handle = 0, why = 0;
	int rc;

	memset(res, 0, sizeof(*res));
	if (req->stub != RETURN_TRAP)
		return -EINVAL;
	if (kp_uregs_get(tid, &orig))
		return -errno;
	rc = fpsimd_io(tid, &fp, false);
	if (rc)
		return rc;
	path = (orig.r.sp - STACK_GAP - plen) & ~15ull;
	sp = path - STACK_GAP;
	if (path > orig.r.sp)
		return -EFAULT;
	rc = mem_io(ts->pid, path, (void *)req->path, plen, true);
	if (rc)
		return rc;
	/* The program's other threads go on meanwhile (a constructor may need
	 * a lock one of them holds); this one runs traced until it returns. */
	for (int i = 0; i < ts->n; i++)
		if (ts->v[i].tid != tid)
			tracee_detach_one(ts, ts->v[i].tid);
	rc = call_in(ts, tid, &orig, req->dlopen, path, req->flags, sp, timeout_ms, &handle);
	if (rc == -ETIMEDOUT || rc == -ESRCH)
		return rc;	/* still in the call, or gone: nothing to restore */
	if (!rc && !handle && req->dlerror &&
	    !call_in(ts, tid, &orig, req->dlerror, 0, 0, sp, timeout_ms, &why) && why)
		mem_io(ts->pid, why, res->why, sizeof(res->why) - 1, false);
	res->why[sizeof(res->why) - 1] = '\0';
	res->handle = handle;
	return restore(ts, tid, &orig, &fp) ?: rc;
}
