/* The control channel between the kprobe CLI and an agent.
 *
 * Each agent listens on a Unix socket /tmp/.kprobe-UID/PID.sock (directory
 * 0700, socket 0600, peers checked with SO_PEERCRED).  Requests are single
 * lines; a reply is zero or more data lines "= ..." and then "OK ..." or
 * "ERR CODE message" (CODE 2: a bad probe, 1: any other failure).
 *
 *   HELLO                 OK pid=P tid=T      (T: the agent's own thread)
 *   ARM                   the session config follows, ended by "END"
 *   DISARM                removes every probe of the session
 *   FLUSH                 copies the probes' miss counts to the session
 *   LIST                  "= " + one Kprobes list line per probe, then
 *                         "OK enabled=0|1" (the global enabled knob)
 *   ENABLE | DISABLE      the global enabled knob
 *   OPTIMIZE on|off       the optimization knob
 *
 * The session config (also passed to a launched command's agent in the
 * environment variable KPROBE_AGENT_CONFIG) is one item per line:
 *   shm fd:N|passed / action trace|count|latency / follow 0|1 / probe SPEC
 * where "shm" names the session memory's descriptor: N, inherited by a
 * launched command, or the one passed with the ARM request (SCM_RIGHTS). */
#ifndef KPROBE_PROTO_H
#define KPROBE_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "shm.h"
#include "spec.h"

#define KPROBE_ENV_CONFIG	"KPROBE_AGENT_CONFIG"
#define KPROBE_ENV_PRELOAD	"KPROBE_AGENT_PRELOAD"	/* LD_PRELOAD before us */
#define KPROBE_ENV_FOLLOWER	"KPROBE_AGENT_FOLLOWER"	/* set for exec'd children */
#define KPROBE_MAX_SPECS	256
#define PROTO_LINE_MAX		4096

struct session_config {
	char shm[KPS_NAME_MAX];
	enum kps_action action;
	bool follow;
	int nspecs;
	struct probe_spec *specs;	/* nspecs entries, malloc'd */
};

/* Serializes cfg; returns a malloc'd string or NULL. */
char *config_format(const struct session_config *cfg);
/* Parses text into cfg (allocating cfg->specs); 0 or -EINVAL with err set. */
int config_parse(const char *text, struct session_config *cfg, char *err, size_t errlen);
void config_free(struct session_config *cfg);

const char *action_name(enum kps_action a);

/* The socket directory for uid and the socket path of pid in it. */
int ctl_dir_path(uid_t uid, char *buf, size_t len);
int ctl_socket_path(pid_t pid, uid_t uid, char *buf, size_t len);

/* Buffered line reading from a socket. */
struct line_reader {
	int fd;
	bool want_fds;		/* keep a descriptor a peer sends (the agent) */
	int passed_fd;		/* the last one received, -1: none */
	size_t len;
	char buf[PROTO_LINE_MAX * 2];
};

void line_reader_init(struct line_reader *r, int fd);
/* The descriptor received with the data read so far (the caller owns it
 * then), or -1. */
int line_reader_take_fd(struct line_reader *r);
/* Reads one line (without the newline) into out; 1 on success, 0 on EOF,
 * -errno on error; waits at most timeout_ms (-1: forever). */
int line_read(struct line_reader *r, char *out, size_t outlen, int timeout_ms);

/* Sends all of buf on a socket (never raising SIGPIPE); 0 or -errno. */
int write_all(int fd, const char *buf, size_t len);

#endif
