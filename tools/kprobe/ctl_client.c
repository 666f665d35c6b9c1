/* Talking to an agent over its control socket. */
#include "ctl_client.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* The agent runs as the target's user: its socket is under that uid. */
static uid_t process_uid(pid_t pid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	return stat(path, &st) ? geteuid() : st.st_uid;
}

int ctl_connect(struct ctl *c, pid_t pid)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, rc;

	c->fd = -1;
	c->pass_fd = -1;
	rc = ctl_socket_path(pid, process_uid(pid), sa.sun_path, sizeof(sa.sun_path));
	if (rc)
		return rc;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		rc = -errno;
		close(fd);
		return rc;
	}
	c->fd = fd;
	line_reader_init(&c->rd, fd);
	return 0;
}

void ctl_close(struct ctl *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

/* Sends the first byte of req with c->pass_fd attached (once). */
static int send_passed_fd(struct ctl *c, const char *req)
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
	c->pass_fd = -1;
	do
		n = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n == 1 ? 0 : n < 0 ? -errno : -EIO;
}

int ctl_request(struct ctl *c, const char *req, FILE *data, char *status, size_t len,
		int timeout_ms, void (*poll_fn)(void *), void *arg)
{
	unsigned long long deadline = cli_now_ns() + (unsigned long long)timeout_ms * 1000000ull;
	char line[PROTO_LINE_MAX];
	int rc;

	if (c->fd < 0)
		return -ENOTCONN;
	if (c->pass_fd >= 0 && *req) {
		rc = send_passed_fd(c, req++);
		if (rc)
			return rc;
	}
	rc = write_all(c->fd, req, strlen(req));
	if (rc)
		return rc;
	for (;;) {
		rc = line_read(&c->rd, line, sizeof(line), 100);
		if (rc == -ETIMEDOUT) {
			if (poll_fn)
				poll_fn(arg);
			if (timeout_ms >= 0 && cli_now_ns() > deadline)
				return -ETIMEDOUT;
			continue;
		}
		if (rc <= 0)
			return rc ? rc : -ECONNRESET;
		if (!strncmp(line, "= ", 2)) {
			if (data)
				fprintf(data, "%s\n", line + 2);
			continue;
		}
		if (!strncmp(line, "OK", 2)) {
			snprintf(status, len, "%s", line[2] ? line + 3 : "");
			return 0;
		}
		if (!strncmp(line, "ERR ", 4)) {
			char *msg;
			long code = strtol(line + 4, &msg, 10);

			snprintf(status, len, "%s", *msg ? msg + 1 : "unknown error");
			return code > 0 ? (int)code : EXIT_FAIL;
		}
		snprintf(status, len, "unexpected reply '%.64s'", line);
		return -EPROTO;
	}
}
