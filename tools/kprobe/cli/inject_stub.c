/* The architecture-neutral half of the self-restoring dlopen() call (see
 * inject_call.h): where the stub goes, the answer it leaves on the
 * thread's stack and the pause that keeps the thread in the stub until the
 * tool has read it.  The stub itself, the block it reads and the
 * registers it starts with are the architecture's
 * (arch/<arch>/inject_call.c). */
#include "inject_call.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

int inject_mem_io(pid_t pid, uint64_t addr, void *buf, size_t len, bool write)
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

/* The end of the executable segment of the object mapped by the r-x
 * mapping [start, end) at file offset off, as bytes still inside the
 * mapping, or 0. */
static uint64_t code_end_in_mapping(pid_t pid, const char *file, uint64_t start, uint64_t off)
{
	char path[PATH_MAX + 64];
	Elf64_Ehdr eh;
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), found = 0;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/root%s", (int)pid, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
	    eh.e_phnum > 256)
		goto out;
	for (unsigned int i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;

		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) != sizeof(ph))
			break;
		if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) || (ph.p_offset & ~(page - 1)) != off)
			continue;
		/* Only what the file fills: past p_filesz the segment would
		 * be zero-filled memory the program may use. */
		if (ph.p_memsz != ph.p_filesz)
			break;
		found = start + (ph.p_offset & (page - 1)) + ph.p_filesz;
		break;
	}
out:
	close(fd);
	return found;
}

/* What is there now must be the file's zero padding, or the stub itself
 * (an earlier attach): anything else means the headers we read do not
 * describe what is mapped (a file changed on disk), so leave it alone. */
static bool room_is_free(pid_t pid, uint64_t addr)
{
	unsigned char now[512], zero[512] = { 0 };
	size_t len;
	const unsigned char *stub = inject_arch_stub(&len);

	if (len > sizeof(now) || inject_mem_io(pid, addr, now, len, false))
		return false;
	return !memcmp(now, zero, len) || !memcmp(now, stub, len);
}

int inject_find_stub_room(pid_t pid, uint64_t *addr)
{
	char path[64], line[PATH_MAX + 128];
	size_t len;
	FILE *f;
	int rc = -ENOSPC;

	inject_arch_stub(&len);
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (rc && fgets(line, sizeof(line), f)) {
		unsigned long start, end, off;
		char perms[8], file[PATH_MAX];
		uint64_t code_end;
		int n = 0;

		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &start, &end, perms, &off, &n) < 4 ||
		    !n || strcmp(perms, "r-xp"))
			continue;
		snprintf(file, sizeof(file), "%s", line + n);
		file[strcspn(file, "\n")] = '\0';
		if (file[0] != '/' || strstr(file, " (deleted)"))
			continue;
		code_end = code_end_in_mapping(pid, file, start, off);
		/* 16-aligned, and the stub entirely inside the mapping. */
		code_end = (code_end + 15) & ~15ull;
		if (code_end > start && code_end + len <= end && room_is_free(pid, code_end)) {
			*addr = code_end;
			rc = 0;
		}
	}
	fclose(f);
	return rc;
}

uint64_t inject_make_nonce(void)
{
	uint64_t v = 0;
	struct timespec ts;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v)) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		v = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ (uint64_t)getpid();
	}
	return v | 1;	/* never 0, what the block holds before */
}

void inject_answer_init(struct inject_answer *a)
{
	memset(a, 0, sizeof(*a));
	a->pause_sec = INJECT_PAUSE_S;
	a->mask = ~0ull;
	a->arch = ~0ull;
}

static int wait_answer(struct tracee_set *keep, pid_t pid, pid_t tid, uint64_t answer,
		       uint64_t nonce, int timeout_ms, struct inject_result *res)
{
	struct inject_answer a;
	char task[64];

	snprintf(task, sizeof(task), "/proc/%d/task/%d", (int)pid, (int)tid);
	for (int waited = 0; waited <= timeout_ms; waited += 1) {
		int rc;

		rc = inject_mem_io(pid, answer, &a, sizeof(a), false);
		/* The answer first: the thread may have ended since. */
		if (!rc && a.nonce == nonce) {
			res->handle = a.handle;
			if (!a.handle && a.why)
				inject_mem_io(pid, a.why, res->why, sizeof(res->why) - 1, false);
			res->why[sizeof(res->why) - 1] = '\0';
			return 0;
		}
		if (rc == -ESRCH || access(task, F_OK))
			return -ESRCH;
		if (keep)
			tracee_service(keep);
		poll(NULL, 0, 1);
	}
	return -ETIMEDOUT;
}

/* The thread has answered and is about to pause, or pausing, in the stub:
 * hold it there, and make the pause end at once when the process is
 * continued (the remaining instructions restore the thread). */
static void end_pause(struct tracee_set *ts, pid_t tid, uint64_t answer)
{
	static const int64_t zero[2];

	/* Held first: the pause is what keeps it in the stub until then. */
	if (tracee_hold_one(ts, tid))
		return;
	/* Not begun yet, or begun again when the thread resumes: it reads a
	 * zero timeout. */
	inject_mem_io(ts->pid, answer + offsetof(struct inject_answer, pause_sec), (void *)zero,
		      sizeof(zero), true);
	inject_arch_end_pause(tid);
}

int inject_call_traced(struct tracee_set *ts, pid_t tid, uint64_t answer, uint64_t nonce,
		       int timeout_ms, struct inject_result *res)
{
	pid_t pid = ts->pid;
	int rc;

	for (int i = 0; i < ts->n; i++)
		if (ts->v[i].tid != tid)
			tracee_detach_one(ts, ts->v[i].tid);
	rc = tracee_run(ts, tid);
	if (rc) {
		/* Still held with the stub's registers: it runs it when
		 * continued. */
		tracee_detach_one(ts, tid);
		return rc;
	}
	rc = wait_answer(ts, pid, tid, answer, nonce, timeout_ms, res);
	if (!rc)
		end_pause(ts, tid, answer);
	tracee_detach_one(ts, tid);
	return rc;
}
