/* Loading the agent into a running process: one of its threads, held with
 * ptrace, is sent through a stub that calls the target's own
 * dlopen(agent, RTLD_NOW) and then puts the thread back exactly where it
 * was, by itself (inject_call.c). */
#include "inject.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <unistd.h>

#include "elf_file.h"
#include "inject_call.h"
#include "kp_ptrace.h"
#include "tracee.h"
#include "util.h"

#define RTLD_DLOPEN_FLAG 0x80000000u	/* glibc's __RTLD_DLOPEN */
/* How long the tool waits for the target's dlopen; not a limit for the
 * target, which completes the call whenever it can. */
#define LOAD_TIMEOUT_MS 30000

struct mapped_lib {
	char path[PATH_MAX];
	uint64_t base;		/* start of its mapping at file offset 0 */
};

/* Finds the first loaded object whose file name is one of names. */
static int find_lib(pid_t pid, const char *const *names, struct mapped_lib *lib)
{
	char path[64], line[PATH_MAX + 128];
	FILE *f;
	int rc = -ENOENT;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (rc && fgets(line, sizeof(line), f)) {
		unsigned long start, off;
		char file[PATH_MAX];
		int n = 0;

		file[0] = '\0';
		if (sscanf(line, "%lx-%*x %*s %lx %*s %*s %n", &start, &off, &n) < 2 || !n)
			continue;
		snprintf(file, sizeof(file), "%s", line + n);
		file[strcspn(file, "\n")] = '\0';
		if (off || file[0] != '/' || strstr(file, " (deleted)"))
			continue;
		for (int i = 0; names[i]; i++) {
			if (!strcmp(path_base(file), names[i])) {
				str_copy(lib->path, sizeof(lib->path), file);
				lib->base = start;
				rc = 0;
				break;
			}
		}
	}
	fclose(f);
	return rc;
}

/* The run-time address of name in lib, read from the file as the target
 * sees it (through /proc/PID/root, for processes in another mount
 * namespace). */
static int lib_symbol(pid_t pid, const struct mapped_lib *lib, const char *name, uint64_t *addr)
{
	char file[PATH_MAX + 64];
	uint64_t value, first;
	int rc;

	snprintf(file, sizeof(file), "/proc/%d/root%s", (int)pid, lib->path);
	if (access(file, R_OK))
		snprintf(file, sizeof(file), "%s", lib->path);
	rc = elf_file_symbol(file, name, &value);
	if (!rc)
		rc = elf_file_first_load(file, &first);
	if (!rc)
		*addr = lib->base + value - first;
	return rc;
}

struct loader {
	uint64_t dlopen;
	uint64_t dlerror;	/* 0 when unknown */
	uint64_t flags;
};

/* dlopen is in libc since glibc 2.34, in libdl before; __libc_dlopen_mode
 * works even when the program never linked libdl. */
static int find_loader(pid_t pid, struct loader *ld)
{
	static const char *const libc[] = { "libc.so.6", NULL };
	static const char *const libdl[] = { "libdl.so.2", NULL };
	struct mapped_lib lib;
	int rc;

	memset(ld, 0, sizeof(*ld));
	ld->flags = RTLD_NOW;
	rc = find_lib(pid, libc, &lib);
	if (rc)
		return rc;
	if (!lib_symbol(pid, &lib, "dlopen", &ld->dlopen)) {
		lib_symbol(pid, &lib, "dlerror", &ld->dlerror);
		return 0;
	}
	if (!find_lib(pid, libdl, &lib) && !lib_symbol(pid, &lib, "dlopen", &ld->dlopen)) {
		lib_symbol(pid, &lib, "dlerror", &ld->dlerror);
		return 0;
	}
	rc = find_lib(pid, libc, &lib);
	if (!rc)
		rc = lib_symbol(pid, &lib, "__libc_dlopen_mode", &ld->dlopen);
	ld->flags |= RTLD_DLOPEN_FLAG;
	return rc;
}

/* The dynamic loader's mapped range: a thread stopped in there may be
 * loading (holding the loader's lock, or before libc is ready). */
static void loader_range(pid_t pid, uint64_t *lo, uint64_t *hi)
{
	char path[64], line[PATH_MAX + 128];
	FILE *f;

	*lo = *hi = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long start, end;
		int n = 0;

		if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &start, &end, &n) < 2 || !n)
			continue;
		if (strncmp(path_base(line + n), "ld-linux", 8))
			continue;
		if (!*lo || start < *lo)
			*lo = start;
		if (end > *hi)
			*hi = end;
	}
	fclose(f);
}

/* Whether the held thread tid was stopped while blocked in a system call
 * (the call returns a restart code, or EINTR): such a thread holds no
 * lock of libc's in user code, unlike one preempted anywhere (inside
 * malloc, say, whose lock dlopen would then wait for forever). */
static bool blocked_in_syscall(pid_t tid)
{
	struct kp_uregs r;

	return !kp_uregs_get(tid, &r) && kp_uregs_blocked_in_syscall(tid, &r);
}

/* Whether tid is a thread of an agent that served earlier (the library's
 * optimizer, the control thread): they may be ending, and are not the
 * program's to lend. */
static bool agent_thread(pid_t pid, pid_t tid)
{
	char path[96], comm[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
	f = fopen(path, "re");
	if (!f)
		return true;	/* gone */
	if (!fgets(comm, sizeof(comm), f))
		comm[0] = '\0';
	fclose(f);
	comm[strcspn(comm, "\n")] = '\0';
	return !strcmp(comm, "kprobes-opt") || !strcmp(comm, "kprobe-agent");
}

/* The main thread if it is blocked in a system call, else another such
 * thread, else the main thread, else any held thread of the program. */
static pid_t pick_thread(const struct tracee_set *ts)
{
	for (int pass = 0; pass < 4; pass++) {
		for (int i = 0; i < ts->n; i++) {
			const struct tracee *t = &ts->v[i];

			if (!t->stopped || t->gone || ((pass == 0 || pass == 2) && t->tid != ts->pid))
				continue;
			if (t->tid != ts->pid && agent_thread(ts->pid, t->tid))
				continue;
			if (pass < 2 && !blocked_in_syscall(t->tid))
				continue;
			return t->tid;
		}
	}
	return 0;
}

/* Holds the process with its main thread out of the dynamic loader: a
 * process still starting up, or in the middle of a dlopen, is let run a
 * little and held again. */
static int hold_outside_loader(struct tracee_set *ts, pid_t pid, bool stopped)
{
	uint64_t lo, hi;
	int rc;

	if (stopped)	/* it does not move until continued */
		return tracee_hold(ts, pid, 0);
	loader_range(pid, &lo, &hi);
	for (int tries = 0;; tries++) {
		uint64_t ip;

		rc = tracee_hold(ts, pid, 0);
		if (rc)
			return rc;
		ip = tracee_ip(pick_thread(ts));
		if (!(ip >= lo && ip < hi) || tries == 100)
			return 0;
		tracee_release(ts);
		poll(NULL, 0, 10);
	}
}

/* An agent that served a session before stays loaded when it leaves (it
 * cannot be unloaded safely): dlopen() would run no constructor, so its
 * exported start function is called instead, the same way.  True when
 * req now calls it. */
static bool agent_start_function(pid_t pid, const char *agent, struct inject_request *req)
{
	const char *const names[] = { path_base(agent), NULL };
	struct mapped_lib lib;
	uint64_t start;

	if (find_lib(pid, names, &lib) || lib_symbol(pid, &lib, "kprobe_agent_start", &start))
		return false;
	req->dlopen = start;
	req->dlerror = 0;
	req->flags = 0;
	return true;
}

int inject_agent(pid_t pid, const char *agent, bool stopped, struct tracee_set *keep, char *err,
		 size_t errlen)
{
	struct inject_request req = { .flags = 0 };
	struct inject_result res;
	struct tracee_set ts;
	struct loader ld;
	char real[PATH_MAX];
	bool restarting;
	pid_t tid;
	int rc;

	if (!realpath(agent, real)) {
		snprintf(err, errlen, "cannot find the agent %s: %s", agent, strerror(errno));
		return -ENOENT;
	}
	memset(keep, 0, sizeof(*keep));
	rc = hold_outside_loader(&ts, pid, stopped);
	if (rc == -EPERM) {
		snprintf(err, errlen, "cannot attach to process %d: ptrace is not permitted "
			 "(another tracer, different user, or /proc/sys/kernel/yama/ptrace_scope)",
			 (int)pid);
		return rc;
	}
	if (rc) {
		snprintf(err, errlen, "cannot stop process %d: %s", (int)pid, strerror(-rc));
		return rc;
	}
	rc = find_loader(pid, &ld);
	if (rc) {
		tracee_release(&ts);
		snprintf(err, errlen, "cannot find dlopen in process %d (not a dynamically linked "
			 "glibc program?)", (int)pid);
		return rc;
	}
	rc = inject_find_stub_room(pid, &req.stub);
	if (rc) {
		tracee_release(&ts);
		snprintf(err, errlen, "cannot load the agent into process %d: no room for the "
			 "loading code in its executable mappings", (int)pid);
		return rc;
	}
	req.dlopen = ld.dlopen;
	req.dlerror = ld.dlerror;
	req.flags = ld.flags;
	req.path = real;
	restarting = agent_start_function(pid, real, &req);
	tid = pick_thread(&ts);
	if (!tid) {
		tracee_release(&ts);
		snprintf(err, errlen, "cannot stop any thread of process %d", (int)pid);
		return -ESRCH;
	}
	/* Releases the threads; the target finishes the call by itself even
	 * if we stop waiting. */
	rc = inject_call_dlopen(&ts, tid, &req, LOAD_TIMEOUT_MS, &res);
	if (stopped)
		*keep = ts;	/* the agent's threads, running traced */
	else
		tracee_release(&ts);	/* the agent's threads run on their own */
	if (rc == -ETIMEDOUT) {
		snprintf(err, errlen, "process %d is still loading the agent after %d s (a library "
			 "constructor or a lock it waits for); it goes on unharmed, try again later",
			 (int)pid, LOAD_TIMEOUT_MS / 1000);
		return rc;
	}
	if (rc) {
		snprintf(err, errlen, "cannot load the agent into process %d: %s", (int)pid,
			 rc == -ESRCH ? "the process or its thread exited" : strerror(-rc));
		return rc;
	}
	if (!res.handle) {
		if (restarting)
			snprintf(err, errlen, "the agent in process %d could not start again (no "
				 "control socket)", (int)pid);
		else
			snprintf(err, errlen, "process %d could not load the agent: %s", (int)pid,
				 res.why[0] ? res.why : "dlopen failed");
		return -ENOEXEC;
	}
	return 0;
}
