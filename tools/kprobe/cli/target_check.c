/* Attach mode's look at the target before anything is done to it (see
 * target_check.h).  Everything is read from /proc, so nothing here can
 * disturb the process. */
#include "target_check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The state letter of thread tid of pid ('?' when unreadable). */
static char thread_state(pid_t pid, pid_t tid)
{
	char path[96], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return '?';
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return '?';
	buf[n] = '\0';
	p = strrchr(buf, ')');	/* the name may hold anything */
	return p && p[1] == ' ' && p[2] ? p[2] : '?';
}

int target_read_state(pid_t pid, struct target_state *st)
{
	char path[64], line[256];
	FILE *f;

	memset(st, 0, sizeof(*st));
	st->state = '?';
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "State:", 6))
			sscanf(line + 6, " %c", &st->state);
		else if (!strncmp(line, "TracerPid:", 10))
			st->tracer = (pid_t)atoi(line + 10);
		else if (!strncmp(line, "Seccomp:", 8))
			st->seccomp = atoi(line + 8);
		else if (!strncmp(line, "Threads:", 8))
			st->threads = atoi(line + 8);
	}
	fclose(f);
	/* A process whose main thread called pthread_exit shows the main
	 * thread's state: Z, with other threads still running. */
	if (st->threads > 1 && (st->state == 'Z' || thread_state(pid, pid) == 'Z'))
		st->main_exited = true;
	return 0;
}

/* The command name of pid, for messages ("?" when unknown). */
static void process_name(pid_t pid, char *buf, size_t len)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(buf, len, "?");
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0) {
		snprintf(buf, len, "?");
		return;
	}
	buf[n] = '\0';
	for (char *p = buf; *p; p++)
		if (*p == '\n' || (unsigned char)*p < 0x20 || *p == 0x7f)
			*p = *p == '\n' ? '\0' : '?';
}

int target_check_attachable(pid_t pid, struct target_state *state, char *err, size_t errlen)
{
	struct target_state st;
	char name[32];
	int rc = target_read_state(pid, &st);

	*state = st;
	if (rc) {
		snprintf(err, errlen, "cannot read the state of process %d: %s", (int)pid,
			 strerror(-rc));
		return rc;
	}
	if (st.main_exited) {
		snprintf(err, errlen, "cannot attach to process %d: its main thread has exited "
			 "(the process runs on in other threads, which cannot be attached to safely)",
			 (int)pid);
		return -ESRCH;
	}
	if (st.state == 'Z' || st.state == 'X') {
		snprintf(err, errlen, "cannot attach to process %d: it has exited (a zombie "
			 "waiting for its parent)", (int)pid);
		return -ESRCH;
	}
	if (st.tracer) {
		process_name(st.tracer, name, sizeof(name));
		snprintf(err, errlen, "cannot attach to process %d: it is already traced by "
			 "process %d (%s); a process has one tracer at a time", (int)pid,
			 (int)st.tracer, name);
		return -EBUSY;
	}
	if (st.seccomp == 1) {
		snprintf(err, errlen, "cannot attach to process %d: it runs in seccomp strict mode, "
			 "where loading the agent would kill it", (int)pid);
		return -EPERM;
	}
	if (st.seccomp == 2) {
		snprintf(err, errlen, "cannot attach to process %d: it runs under a seccomp filter, "
			 "which may kill it for a system call the agent makes; launch it under "
			 "kprobe instead (-- COMMAND)", (int)pid);
		return -EPERM;
	}
	return 0;
}
