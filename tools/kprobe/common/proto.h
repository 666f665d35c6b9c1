/* The control channel between the kprobe CLI and an agent.
 *
 * Each agent listens on a Unix socket /tmp/.kprobe-UID/PID.sock, UID the
 * target's effective uid.  Both sides authenticate (docs/design.md):
 *  - the directory must be a real directory (never a symlink) owned by UID
 *    that nobody else can write: the agent creates it 0700 and refuses an
 *    existing one that is not so; the client opens it with O_NOFOLLOW,
 *    checks it, and connects through that open descriptor;
 *  - the agent serves only peers whose SO_PEERCRED uid is its own or root;
 *    the client talks only to a server whose SO_PEERCRED pid is the target
 *    and whose uid is the target's.
 * The agent binds PID.sock.new and renames it to PID.sock once it listens,
 * so PID.sock is never a socket that merely is not listening yet: a refused
 * connection there, or a socket of a dead PID, is stale and whoever finds
 * it removes it.
 *
 * Requests are single lines; a reply is zero or more data lines "= ..." and
 * then "OK ..." or "ERR CODE message" (CODE 2: a bad probe, 1: any other
 * failure).  Lines are at most PROTO_LINE_MAX bytes; a longer one is a
 * protocol error.  New requests and reply fields may be added: a side
 * ignores the "key=value" fields of an OK it does not know.
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
 *   shm fd:N|passed / action trace|count|latency|load / follow 0|1 / probe SPEC
 *   / watch LEN w|rw   (a watch session: SPEC is the variable, watched
 *                       by a watchpoint probe instead of probed)
 *   / stack N          (trace, watch: each event carries the hit's stack,
 *                       at most N frames)
 *   / stacks N         (count: hits counted per distinct stack of at most
 *                       N frames, in per-thread tables: stacks.h)
 *   module PATH / modarg ARG      (load: the module and its ARGs, in order)
 *   program IMAGE REGION          (run: the sizes of the program image and
 *                                 its map region in the session memory)
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
#define KPROBE_ENV_AUDIT	"KPROBE_AGENT_AUDIT"	/* LD_AUDIT before us */
#define KPROBE_MAX_SPECS	256
#define KPROBE_MAX_MODARGS	64
#define PROTO_LINE_MAX		4096

struct session_config {
	char shm[KPS_NAME_MAX];
	enum kps_action action;
	bool follow;
	int nspecs;
	struct probe_spec *specs;	/* nspecs entries, malloc'd */
	unsigned int watch_len;		/* 0: not a watch session */
	bool watch_rw;			/* reads too */
	unsigned int stack_depth;	/* frames kept per hit, 0: no stacks */
	bool stack_count;		/* count: per distinct stack (stacks.h) */
	/* Returns taken by return probes only, never by kprobes on the
	 * functions' exit sites (KPROBE_RETURN_PROBES=1). */
	bool return_probes;
	char *module;			/* load: the module's path, malloc'd */
	int nmodargs;
	char **modargs;			/* its ARGs, malloc'd */
	uint64_t image_len, region_len;	/* run: 0 otherwise */
};

/* Serializes cfg; returns a malloc'd string or NULL. */
char *config_format(const struct session_config *cfg);
/* Parses text into cfg (allocating cfg->specs); 0 or -EINVAL with err set. */
int config_parse(const char *text, struct session_config *cfg, char *err, size_t errlen);
void config_free(struct session_config *cfg);

const char *action_name(enum kps_action a);

/* The socket directory for uid, the socket's name in it, and its path. */
int ctl_dir_path(uid_t uid, char *buf, size_t len);
int ctl_socket_name(pid_t pid, char *buf, size_t len);
int ctl_socket_path(pid_t pid, uid_t uid, char *buf, size_t len);

/* Whether the open directory dirfd may hold owner's sockets: a directory
 * owned by owner that nobody else can write.  0 or -EPERM (-errno). */
int ctl_dir_check(int dirfd, uid_t owner);

/* Removes the sockets of processes that no longer exist from a directory
 * that passed ctl_dir_check(); returns how many. */
int ctl_dir_sweep(int dirfd);

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
 * -EMSGSIZE for a line that does not fit out, -errno on error; waits at
 * most timeout_ms (-1: forever). */
int line_read(struct line_reader *r, char *out, size_t outlen, int timeout_ms);

/* Sends all of buf on a socket (never raising SIGPIPE); 0 or -errno. */
int write_all(int fd, const char *buf, size_t len);

#endif
