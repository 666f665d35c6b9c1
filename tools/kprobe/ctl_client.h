/* The CLI's side of an agent's control socket. */
#ifndef KPROBE_CTL_CLIENT_H
#define KPROBE_CTL_CLIENT_H

#include <stdio.h>
#include <sys/types.h>

#include "proto.h"

struct ctl {
	int fd;
	int pass_fd;			/* sent with the next request (SCM_RIGHTS), -1: none */
	struct line_reader rd;
};

/* Connects to the agent in pid; 0, -ENOENT/-ECONNREFUSED when it has none. */
int ctl_connect(struct ctl *c, pid_t pid);
void ctl_close(struct ctl *c);

/* Sends req (one or more lines, newline-terminated) and reads the reply:
 * data lines go to data (if not NULL) without their "= ", and the rest of
 * the final line to status.  Returns 0 for OK, the ERR code (> 0) with its
 * message in status, or -errno (-ETIMEDOUT after timeout_ms, -1: forever)
 * when the agent is unreachable.  poll_fn, if set, is called about every
 * 100 ms while waiting.  c->pass_fd, if set, goes with the request's first
 * byte (once). */
int ctl_request(struct ctl *c, const char *req, FILE *data, char *status, size_t len,
		int timeout_ms, void (*poll_fn)(void *), void *arg);

#endif
