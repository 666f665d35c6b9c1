/* The agent's control socket (protocol in proto.h), served by one thread of
 * the agent that never reports probe hits and takes no process signals. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent.h"

#define MAX_CLIENTS 8
#define FLUSH_MS 200

/* ---- descriptors kept open in a program that is not ours ----
 * Moved near the top of the descriptor limit, out of the way of a program
 * that opens the lowest free number, and checked before each use: the
 * program may close them (all of its descriptors, say) and get the number
 * back for a file of its own. */

/* What a descriptor refers to. */
struct fd_id {
	dev_t dev;
	ino_t ino;
};

/* How far below the soft limit (capped at 64 Ki) moved descriptors go. */
#define FD_HIGH_ROOM 64

/* fd, or a close-on-exec duplicate of it high up (fd then closed). */
static int fd_move_high(int fd)
{
	struct rlimit rl;
	rlim_t limit;
	int high;

	if (fd < 0 || getrlimit(RLIMIT_NOFILE, &rl))
		return fd;
	limit = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 65536 ? 65536 : rl.rlim_cur;
	if (limit <= 3 + FD_HIGH_ROOM)
		return fd;
	high = fcntl(fd, F_DUPFD_CLOEXEC, (int)(limit - FD_HIGH_ROOM));
	if (high < 0)
		return fd;
	close(fd);
	return high;
}

/* Records what fd refers to: 0 or -errno. */
static int fd_identify(int fd, struct fd_id *id)
{
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	id->dev = st.st_dev;
	id->ino = st.st_ino;
	return 0;
}

/* Whether fd still refers to what fd_identify() recorded. */
static bool fd_unchanged(int fd, const struct fd_id *id)
{
	struct fd_id now = { 0, 0 };

	return fd >= 0 && !fd_identify(fd, &now) && now.dev == id->dev && now.ino == id->ino;
}

struct client {
	int fd;
	struct fd_id id;	/* the program may close fd and reuse it */
	struct line_reader rd;
	char *arm;		/* config being received after ARM, until END */
	size_t arm_len;
};

static int listen_fd = -1;
static struct fd_id listen_id;
static pid_t server_pid;
static char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static struct client clients[MAX_CLIENTS];
static int owner = -1;		/* client whose leaving ends the session */
static bool leaving;		/* an injected agent's session ended */
/* Ending the control thread and starting one exclude each other. */
static pthread_mutex_t server_lock = PTHREAD_MUTEX_INITIALIZER;

static int reply(struct client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* An injected agent's session is over: nobody may connect from now on (a
 * new session starts the agent again, after it has left). */
static void begin_leaving(void)
{
	if (!agent_injected())
		return;
	unlink(sock_path);
	__atomic_store_n(&leaving, true, __ATOMIC_RELEASE);
}

static int reply(struct client *c, const char *fmt, ...)
{
	char buf[PROTO_LINE_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n > sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	return write_all(c->fd, buf, (size_t)n);
}

/* The Kprobes list, without the agent's own dlopen hook. */
static void send_list(struct client *c)
{
	char *text = NULL, *save = NULL, hide[32] = "";
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	uintptr_t hook = agent_dlhook_address();
	int rc;

	if (!f) {
		reply(c, "ERR 1 out of memory");
		return;
	}
	rc = kprobes_list(f);
	fclose(f);
	if (rc) {
		free(text);
		reply(c, "ERR 1 cannot list the probes: %s", strerror(-rc));
		return;
	}
	if (hook)
		snprintf(hide, sizeof(hide), "%016lx ", (unsigned long)hook);
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (!hide[0] || strncmp(line, hide, strlen(hide)))
			reply(c, "= %s", line);
	free(text);
	reply(c, "OK enabled=%d", kprobes_enabled() ? 1 : 0);
}

static void finish_arm(struct client *c, int idx)
{
	char err[KPS_MSG];
	int kind = 1;
	int rc = agent_session_start(c->arm ? c->arm : "", line_reader_take_fd(&c->rd), false, err,
				     sizeof(err), &kind);

	free(c->arm);
	c->arm = NULL;
	c->arm_len = 0;
	if (rc) {
		reply(c, "ERR %d %s", kind, err);
		return;
	}
	owner = idx;
	reply(c, "OK");
}

static int append_arm(struct client *c, const char *line)
{
	size_t n = strlen(line);
	char *p = realloc(c->arm, c->arm_len + n + 2);

	if (!p)
		return -ENOMEM;
	memcpy(p + c->arm_len, line, n);
	p[c->arm_len + n] = '\n';
	p[c->arm_len + n + 1] = '\0';
	c->arm = p;
	c->arm_len += n + 1;
	return 0;
}

static void handle_line(struct client *c, int idx, const char *line)
{
	if (c->arm) {
		if (!strcmp(line, "END"))
			finish_arm(c, idx);
		else if (append_arm(c, line))
			reply(c, "ERR 1 out of memory");
		return;
	}
	if (!strcmp(line, "HELLO")) {
		reply(c, "OK pid=%d tid=%ld armed=%d", getpid(), syscall(SYS_gettid),
		      agent_session != NULL);
	} else if (!strcmp(line, "ARM")) {
		c->arm = calloc(1, 1);
		if (!c->arm)
			reply(c, "ERR 1 out of memory");
	} else if (!strcmp(line, "OWN")) {
		owner = idx;
		reply(c, "OK");
	} else if (!strcmp(line, "DISARM")) {
		agent_session_stop();
		if (owner == idx)
			owner = -1;
		begin_leaving();
		reply(c, "OK");
	} else if (!strcmp(line, "FLUSH")) {
		agent_session_flush();
		reply(c, "OK");
	} else if (!strcmp(line, "LIST")) {
		send_list(c);
	} else if (!strcmp(line, "ENABLE") || !strcmp(line, "DISABLE")) {
		kprobes_set_enabled(line[0] == 'E');
		reply(c, "OK");
	} else if (!strcmp(line, "OPTIMIZE on") || !strcmp(line, "OPTIMIZE off")) {
		kprobes_set_optimization(!strcmp(line, "OPTIMIZE on"));
		reply(c, "OK");
	} else {
		reply(c, "ERR 1 unknown request '%.64s'", line);
	}
}

static void client_close(int idx)
{
	struct client *c = &clients[idx];
	int passed = line_reader_take_fd(&c->rd);

	if (passed >= 0)
		close(passed);
	if (fd_unchanged(c->fd, &c->id))	/* else it is not ours any more */
		close(c->fd);
	free(c->arm);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	/* The tool that owns the session is gone: leave the target unprobed. */
	if (owner == idx) {
		owner = -1;
		agent_session_stop();
		begin_leaving();
	}
}

static bool peer_allowed(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len))
		return false;
	return cred.uid == geteuid() || cred.uid == 0;
}

static void accept_client(void)
{
	int fd = fd_move_high(accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC));

	if (fd < 0)
		return;
	if (!peer_allowed(fd)) {
		close(fd);
		return;
	}
	for (int i = 0; i < MAX_CLIENTS; i++) {
		if (clients[i].fd < 0 && !fd_identify(fd, &clients[i].id)) {
			clients[i].fd = fd;
			line_reader_init(&clients[i].rd, fd);
			/* ARM brings the session memory along. */
			clients[i].rd.want_fds = true;
			return;
		}
	}
	close(fd);
}

static void serve_client(int idx)
{
	struct client *c = &clients[idx];
	char line[PROTO_LINE_MAX];
	int rc;

	/* Everything already received, without waiting for more. */
	while ((rc = line_read(&c->rd, line, sizeof(line), 0)) == 1)
		handle_line(c, idx, line);
	if (rc != -ETIMEDOUT)
		client_close(idx);
}

static int server_listen(void);

/* The program closed our descriptors (all of its own, say): forget them
 * without closing (the numbers may be its files now), and listen anew. */
static void check_descriptors(void)
{
	for (int i = 0; i < MAX_CLIENTS; i++)
		if (clients[i].fd >= 0 && !fd_unchanged(clients[i].fd, &clients[i].id))
			client_close(i);
	if (listen_fd >= 0 && !fd_unchanged(listen_fd, &listen_id))
		listen_fd = -1;
	if (listen_fd < 0)
		server_listen();
}

/* An injected agent leaves nothing running once its session is over:
 * no thread, socket or descriptor of ours (the object itself stays: see
 * docs/design.md); kprobe_agent_start() begins anew. */
static void server_leave(void)
{
	pthread_mutex_lock(&server_lock);
	for (int i = 0; i < MAX_CLIENTS; i++)
		if (clients[i].fd >= 0)
			client_close(i);
	if (listen_fd >= 0 && fd_unchanged(listen_fd, &listen_id)) {
		unlink(sock_path);
		close(listen_fd);
	}
	listen_fd = -1;
	server_pid = 0;
	kprobes_release_resources();
	__atomic_store_n(&leaving, false, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&server_lock);
}

static void *server_main(void *arg)
{
	(void)arg;
	agent_mark_own_thread();
	prctl(PR_SET_NAME, "kprobe-agent");
	for (;;) {
		struct pollfd pfd[MAX_CLIENTS + 1];
		int map[MAX_CLIENTS + 1], n = 0;

		check_descriptors();
		agent_interpose_refresh();
		/* Without a listening socket (-1), poll only waits. */
		pfd[n] = (struct pollfd){ .fd = listen_fd, .events = POLLIN };
		map[n++] = -1;
		for (int i = 0; i < MAX_CLIENTS; i++) {
			if (clients[i].fd < 0)
				continue;
			pfd[n] = (struct pollfd){ .fd = clients[i].fd, .events = POLLIN };
			map[n++] = i;
		}
		if (poll(pfd, (nfds_t)n, FLUSH_MS) < 0 && errno != EINTR) {
			/* Nobody can reach us any more: leave no socket file. */
			if (server_pid == getpid())
				unlink(sock_path);
			break;
		}
		/* Closed under us: never spin on it. */
		if (pfd[0].revents & POLLNVAL)
			listen_fd = -1;
		agent_session_flush();
		for (int i = 1; i < n; i++)
			if (pfd[i].revents)
				serve_client(map[i]);
		if (pfd[0].revents & POLLIN)
			accept_client();
		if (__atomic_load_n(&leaving, __ATOMIC_ACQUIRE))
			break;
	}
	if (agent_injected())
		server_leave();
	return NULL;
}

/* /tmp/.kprobe-UID must be ours and private: never follow someone else's
 * (a symlink, or a directory another user made first), or a client could
 * be led to an impostor, and our socket into someone else's hands. */
static int private_dir(const char *dir)
{
	struct stat st;
	int fd;

	if (mkdir(dir, 0700) && errno != EEXIST)
		return -errno;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ELOOP || errno == ENOTDIR ? -EPERM : -errno;
	if (fstat(fd, &st) || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077)) {
		close(fd);
		return -EPERM;
	}
	/* Sockets of processes that died without removing theirs. */
	ctl_dir_sweep(fd);
	close(fd);
	return 0;
}

/* Binds PID.sock.new and renames it to PID.sock once it listens: a client
 * never finds a socket of ours that refuses it (which it would take for a
 * stale one and remove). */
static int server_listen(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char dir[96], path[sizeof(sa.sun_path)];
	int fd, rc, n;

	rc = ctl_dir_path(geteuid(), dir, sizeof(dir));
	if (!rc)
		rc = private_dir(dir);
	if (!rc)
		rc = ctl_socket_path(getpid(), geteuid(), path, sizeof(path));
	if (rc)
		return rc;
	n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s.new", path);
	if (n < 0 || (size_t)n >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	fd = fd_move_high(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
	if (fd < 0 || fd_identify(fd, &listen_id)) {
		if (fd >= 0)
			close(fd);
		return -EMFILE;
	}
	unlink(sa.sun_path);	/* left by an earlier process with our pid */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || chmod(sa.sun_path, 0600) ||
	    listen(fd, MAX_CLIENTS) || rename(sa.sun_path, path)) {
		rc = -errno;
		unlink(sa.sun_path);
		close(fd);
		return rc;
	}
	snprintf(sock_path, sizeof(sock_path), "%s", path);
	listen_fd = fd;
	server_pid = getpid();
	return 0;
}

int agent_server_start(void)
{
	pthread_t th;
	pthread_attr_t attr;
	sigset_t all, old;
	int rc;

	/* A control thread still leaving (its last session just ended). */
	for (int i = 0;; i++) {
		pthread_mutex_lock(&server_lock);
		if (!__atomic_load_n(&leaving, __ATOMIC_ACQUIRE))
			break;
		pthread_mutex_unlock(&server_lock);
		if (i == 2000)
			return -EBUSY;
		/* poll, not usleep: this may run on a program thread sent here
		 * from a sleep, whose restart nanosleep would discard. */
		poll(NULL, 0, 1);
	}
	if (listen_fd >= 0 && server_pid == getpid()) {
		pthread_mutex_unlock(&server_lock);
		return 0;
	}
	for (int i = 0; i < MAX_CLIENTS; i++)
		clients[i].fd = -1;
	rc = server_listen();
	if (rc) {
		pthread_mutex_unlock(&server_lock);
		return rc;
	}
	/* The thread inherits a mask that leaves the process's signals to the
	 * program's threads; libkprobes keeps its own signals deliverable. */
	sigfillset(&all);
	sigdelset(&all, SIGTRAP);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGRTMAX - 2);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = -pthread_create(&th, &attr, server_main, NULL);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		unlink(sock_path);
		close(listen_fd);
		listen_fd = -1;
	}
	pthread_mutex_unlock(&server_lock);
	return rc;
}

/* The socket file goes with the process that made it. */
__attribute__((destructor)) static void server_cleanup(void)
{
	/* Runs on the program's thread: its libc calls are not the program's. */
	agent_own_begin();
	if (listen_fd >= 0 && server_pid == getpid())
		unlink(sock_path);
	agent_own_end();
}
