/* Talking to an agent over its control socket (protocol and the checks on
 * both sides in proto.h).  Everything the agent sends is untrusted: lines
 * are bounded, every wait has a deadline and yields to a stop signal, and
 * data lines are escaped before they reach a terminal. */
#include "ctl_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli.h"
#include "escape.h"
#include "session.h"

#define WAIT_STEP_MS 100

int ctl_target_ids(pid_t pid, pid_t *tgid, uid_t *euid)
{
	char path[64], line[256];
	unsigned int ruid, uid;
	int got = 0, t;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (got != 3 && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Tgid: %d", &t) == 1) {
			*tgid = (pid_t)t;
			got |= 1;
		} else if (sscanf(line, "Uid: %u %u", &ruid, &uid) == 2) {
			/* The agent names its directory after its effective uid. */
			*euid = (uid_t)uid;
			got |= 2;
		}
	}
	fclose(f);
	return got == 3 ? 0 : -ESRCH;
}

/* The socket directory of euid, opened without following a symlink and
 * checked: 0 with *dirfd, -ENOENT when there is none, -EPERM otherwise. */
static int open_socket_dir(struct ctl *c, uid_t euid, int *dirfd)
{
	char dir[64];
	struct stat st;
	int fd, rc;

	rc = ctl_dir_path(euid, dir, sizeof(dir));
	if (rc)
		return rc;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && (errno == ELOOP || errno == ENOTDIR)) {
		snprintf(c->why, sizeof(c->why), "%s is not a directory but a symlink or a file: "
			 "refusing it (someone may be posing as the kprobe agent)", dir);
		return -EPERM;
	}
	if (fd < 0)
		return -errno;
	rc = ctl_dir_check(fd, euid);
	if (rc) {
		if (!fstat(fd, &st))
			snprintf(c->why, sizeof(c->why), "%s belongs to uid %u with mode %03o, not "
				 "privately to uid %u: refusing it (someone may be posing as the "
				 "kprobe agent; remove it)", dir, (unsigned int)st.st_uid,
				 (unsigned int)(st.st_mode & 0777), (unsigned int)euid);
		close(fd);
		return rc;
	}
	*dirfd = fd;
	return 0;
}

/* Connects to NAME in the checked directory dirfd, through the descriptor
 * so the directory cannot be swapped in between.  A socket that refuses
 * the connection is stale (proto.h): it is removed if it is still the one
 * that refused. */
static int connect_in(struct ctl *c, int dirfd, const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat before, after;
	int fd, rc, n;

	n = snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", dirfd, name);
	if (n < 0 || (size_t)n >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	if (fstatat(dirfd, name, &before, AT_SYMLINK_NOFOLLOW))
		return -errno;
	if (!S_ISSOCK(before.st_mode))
		return -ENOENT;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		c->fd = fd;
		line_reader_init(&c->rd, fd);
		return 0;
	}
	rc = -errno;
	close(fd);
	if (rc == -ECONNREFUSED && !fstatat(dirfd, name, &after, AT_SYMLINK_NOFOLLOW) &&
	    after.st_ino == before.st_ino && after.st_dev == before.st_dev)
		unlinkat(dirfd, name, 0);
	return rc;
}

int ctl_check_peer(struct ctl *c, pid_t tgid, uid_t euid)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len))
		return -errno;
	if (cred.pid == tgid && cred.uid == euid)
		return 0;
	snprintf(c->why, sizeof(c->why), "the control socket of process %d is served by process "
		 "%d of uid %u, not by process %d of uid %u: refusing it (someone may be posing "
		 "as the kprobe agent)", (int)tgid, (int)cred.pid, (unsigned int)cred.uid,
		 (int)tgid, (unsigned int)euid);
	return -EACCES;
}

int ctl_connect(struct ctl *c, pid_t pid)
{
	char name[32];
	pid_t tgid;
	uid_t euid;
	int dirfd = -1, rc;

	c->fd = -1;
	c->pass_fd = -1;
	c->why[0] = '\0';
	rc = ctl_target_ids(pid, &tgid, &euid);
	if (rc)
		return rc;
	rc = open_socket_dir(c, euid, &dirfd);
	if (rc)
		return rc;
	ctl_dir_sweep(dirfd);
	rc = ctl_socket_name(tgid, name, sizeof(name));
	if (!rc)
		rc = connect_in(c, dirfd, name);
	close(dirfd);
	if (!rc)
		rc = ctl_check_peer(c, tgid, euid);
	if (rc)
		ctl_close(c);
	return rc;
}

void ctl_close(struct ctl *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

/* ---- bounded waiting ---- */

struct ctl_wait {
	unsigned long long deadline, timeout_ns;
	bool stoppable;			/* no stop signal yet when it began */
	sig_atomic_t stops;		/* stop signals seen when it began */
	int (*poll_fn)(void *);
	void *arg;
};

static void wait_init(struct ctl_wait *w, int timeout_ms, int (*poll_fn)(void *), void *arg)
{
	w->timeout_ns = (unsigned long long)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
	w->deadline = cli_now_ns() + w->timeout_ns;
	w->stoppable = !session_stop_signal;
	w->stops = session_stop_count;
	w->poll_fn = poll_fn;
	w->arg = arg;
}

/* Between two short waits (idle: a wait step passed without a word from
 * the agent): 0 to wait on, or why to stop waiting. */
static int wait_more(struct ctl_wait *w, bool idle, char *status, size_t len)
{
	int p;

	if ((w->stoppable && session_stop_signal) || session_stop_count != w->stops) {
		snprintf(status, len, "interrupted by a signal");
		return -EINTR;
	}
	if (idle && w->poll_fn) {
		p = w->poll_fn(w->arg);
		if (p < 0) {
			snprintf(status, len, "%s", strerror(-p));
			return p;
		}
		if (p > 0)
			w->deadline = cli_now_ns() + w->timeout_ns;
	}
	if (cli_now_ns() >= w->deadline) {
		snprintf(status, len, "no answer in %llu ms", w->timeout_ns / 1000000ull);
		return -ETIMEDOUT;
	}
	return 0;
}

/* Sends the first byte of req with c->pass_fd attached; the descriptor
 * is the caller's still, and goes only once. */
static ssize_t send_passed_fd(struct ctl *c, const char *req)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct iovec iov = { (void *)req, 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			      .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	ssize_t n;

	memset(&u, 0, sizeof(u));
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &c->pass_fd, sizeof(int));
	n = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n == 1)
		c->pass_fd = -1;
	return n;
}

/* Sends all of req without ever blocking for longer than a wait step. */
static int send_request(struct ctl *c, const char *req, struct ctl_wait *w, char *status,
			size_t len)
{
	size_t left = strlen(req);

	while (left) {
		struct pollfd pfd = { .fd = c->fd, .events = POLLOUT };
		ssize_t n = c->pass_fd >= 0 ? send_passed_fd(c, req) :
			    send(c->fd, req, left, MSG_NOSIGNAL | MSG_DONTWAIT);
		int rc;

		if (n > 0) {
			req += n;
			left -= (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			rc = -errno;
			snprintf(status, len, "%s", strerror(-rc));
			return rc;
		}
		if (poll(&pfd, 1, WAIT_STEP_MS) == 0 || pfd.revents == 0) {
			rc = wait_more(w, true, status, len);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* The final line of a reply: 0 (OK), 1 or 2 (ERR), or -EPROTO. */
static int final_line(const char *line, char *status, size_t len)
{
	const char *msg;

	if (!strcmp(line, "OK") || !strncmp(line, "OK ", 3)) {
		snprintf(status, len, "%s", line[2] ? line + 3 : "");
		return 0;
	}
	if (!strncmp(line, "ERR ", 4)) {
		msg = strchr(line + 4, ' ');
		snprintf(status, len, "%s", msg && msg[1] ? msg + 1 : "the agent failed");
		/* Only the two codes there are: an exit status never comes
		 * from the agent unchecked. */
		return line[4] == '2' && (line[5] == ' ' || !line[5]) ? EXIT_BAD : EXIT_FAIL;
	}
	snprintf(status, len, "unexpected reply '%.64s'", line);
	return -EPROTO;
}

int ctl_request(struct ctl *c, const char *req, FILE *data, char *status, size_t len,
		int timeout_ms, int (*poll_fn)(void *), void *arg)
{
	char line[PROTO_LINE_MAX];
	unsigned int ndata = 0;
	struct ctl_wait w;
	int rc;

	snprintf(status, len, "not connected");
	if (c->fd < 0)
		return -ENOTCONN;
	wait_init(&w, timeout_ms, poll_fn, arg);
	rc = send_request(c, req, &w, status, len);
	if (rc)
		return rc;
	for (;;) {
		rc = line_read(&c->rd, line, sizeof(line), WAIT_STEP_MS);
		if (rc == -ETIMEDOUT) {
			rc = wait_more(&w, true, status, len);
			if (rc)
				return rc;
			continue;
		}
		if (rc == 0) {
			snprintf(status, len, "the agent closed the connection");
			return -ECONNRESET;
		}
		if (rc < 0) {
			if (rc == -EMSGSIZE)
				snprintf(status, len, "a reply line longer than %d bytes",
					 PROTO_LINE_MAX);
			else
				snprintf(status, len, "%s", strerror(-rc));
			return rc;
		}
		if (strncmp(line, "= ", 2))
			return final_line(line, status, len);
		if (++ndata > CTL_MAX_DATA_LINES) {
			snprintf(status, len, "more than %u lines in a reply", CTL_MAX_DATA_LINES);
			return -EMSGSIZE;
		}
		if (data) {
			text_escape_to(data, line + 2, strlen(line + 2));
			fputc('\n', data);
		}
		/* A fast stream of data lines must not outrun the deadline. */
		rc = wait_more(&w, false, status, len);
		if (rc)
			return rc;
	}
}
