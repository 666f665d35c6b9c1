/* The CLI's side of an agent's control socket. */
#ifndef KPROBE_CTL_CLIENT_H
#define KPROBE_CTL_CLIENT_H

#include <stdio.h>
#include <sys/types.h>

#include "proto.h"

/* At most this many data lines in one reply (a hostile agent cannot fill
 * the disk through `kprobe list`). */
#define CTL_MAX_DATA_LINES	(1u << 20)

struct ctl {
	int fd;
	int pass_fd;			/* sent with the next request (SCM_RIGHTS), -1: none */
	struct line_reader rd;
	char why[256];		/* why the last call failed, when it did */
};

/* Connects to the agent in pid, after checking its socket directory and
 * the server's credentials (proto.h).  0; -ENOENT or -ECONNREFUSED when
 * the process has no agent (a stale socket found on the way is removed);
 * -EPERM (a directory that is not private to the target's user) or
 * -EACCES (a server that is not the target) with the reason in c->why;
 * -ESRCH when the process is gone; other -errno. */
int ctl_connect(struct ctl *c, pid_t pid);
void ctl_close(struct ctl *c);

/* The checks of ctl_connect(), for tests and for servers reached another
 * way: the target's thread group id and effective uid from /proc, and the
 * peer of a connected socket. */
int ctl_target_ids(pid_t pid, pid_t *tgid, uid_t *euid);
int ctl_check_peer(struct ctl *c, pid_t tgid, uid_t euid);

/* Sends req (one or more lines, newline-terminated) and reads the reply:
 * data lines go to data (if not NULL) without their "= ", escaped for a
 * terminal, and the rest of the final line to status.  Returns 0 for OK,
 * the ERR code (1 or 2) with its message in status, or a negative errno
 * with a reason in status: -ETIMEDOUT when the agent has not answered for
 * timeout_ms, -EINTR when a stop signal arrives (session_stop_signal set
 * during the wait, or another stop signal during a wait that began after
 * one), -EPROTO or -EMSGSIZE for a reply that breaks the
 * protocol, -ECONNRESET when the agent went away.  poll_fn, if set, is
 * called about every 100 ms while waiting: > 0 means the agent shows
 * progress (the timeout starts again), < 0 gives up with that errno.
 * c->pass_fd, if set, goes with the request's first byte (once). */
int ctl_request(struct ctl *c, const char *req, FILE *data, char *status, size_t len,
		int timeout_ms, int (*poll_fn)(void *), void *arg);

#endif
