/* The kprobe CLI's control-channel client (tools/kprobe/cli/ctl_client.c,
 * proto.c) against fake agents: the socket directory and peer checks,
 * stale sockets, bounded waits, and replies that break the protocol,
 * including a fuzz run of random and mutated replies over a socketpair. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "ctl_client.h"
#include "escape.h"

/* What ctl_client.c takes from the rest of the tool (main.c, session.c). */
volatile sig_atomic_t session_stop_signal;
volatile sig_atomic_t session_stop_count;

unsigned long long cli_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

TestSuite(ctl, .timeout = 30);

/* ---- a fake agent on the other end of a socketpair ---- */

struct pair {
	struct ctl c;
	int agent;		/* the fake agent's end */
};

static void pair_open(struct pair *p)
{
	int sv[2];

	cr_assert(!socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	p->c.fd = sv[0];
	line_reader_init(&p->c.rd, sv[0]);
	p->agent = sv[1];
}

static void pair_close(struct pair *p)
{
	ctl_close(&p->c);
	close(p->agent);
}

/* The agent says reply[0..len) and then, if hang_up, closes its side. */
static void agent_says(struct pair *p, const void *reply, size_t len, bool hang_up)
{
	cr_assert_eq(write(p->agent, reply, len), (ssize_t)len);
	if (hang_up)
		shutdown(p->agent, SHUT_WR);
}

static unsigned long long ms_since(unsigned long long t0)
{
	return (cli_now_ns() - t0) / 1000000ull;
}

/* Only printable ASCII and line breaks reach the data stream. */
static void assert_terminal_safe(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		cr_assert(text_byte_is_plain((unsigned char)s[i]) || s[i] == '\n',
			  "byte 0x%02x at %zu passed unescaped", (unsigned char)s[i], i);
}

Test(ctl, ok_and_data_lines_escaped)
{
	struct pair p;
	char status[128], *data = NULL;
	size_t dlen = 0;
	FILE *f = open_memstream(&data, &dlen);
	const char reply[] = "= 0000000000401000  k  \x1b]0;owned\x07main+0x0\n"
			     "= caf\xc3\xa9\x9b" "2J\n"
			     "OK pid=1\n";

	pair_open(&p);
	agent_says(&p, reply, sizeof(reply) - 1, false);
	cr_assert_eq(ctl_request(&p.c, "LIST\n", f, status, sizeof(status), 1000, NULL, NULL), 0);
	fclose(f);
	cr_assert_str_eq(status, "pid=1");
	cr_assert_str_eq(data, "0000000000401000  k  \\x1b]0;owned\\x07main+0x0\n"
			       "caf\\xc3\\xa9\\x9b2J\n");
	assert_terminal_safe(data, dlen);
	free(data);
	pair_close(&p);
}

Test(ctl, err_codes_are_only_1_or_2)
{
	static const struct { const char *line; int rc; const char *msg; } cases[] = {
		{ "ERR 2 bad probe 'x'\n", 2, "bad probe 'x'" },
		{ "ERR 1 no\n", 1, "no" },
		{ "ERR 99999999999999999999 huge\n", 1, "huge" },
		{ "ERR -5 negative\n", 1, "negative" },
		{ "ERR 22 two-two\n", 1, "two-two" },
		{ "ERR\n", -EPROTO, NULL },
		{ "OKAY\n", -EPROTO, NULL },
		{ "ok\n", -EPROTO, NULL },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pair p;
		char status[128];

		pair_open(&p);
		agent_says(&p, cases[i].line, strlen(cases[i].line), false);
		cr_assert_eq(ctl_request(&p.c, "X\n", NULL, status, sizeof(status), 1000, NULL,
					 NULL), cases[i].rc, "%s", cases[i].line);
		if (cases[i].msg)
			cr_assert_str_eq(status, cases[i].msg);
		pair_close(&p);
	}
}

Test(ctl, unanswered_request_times_out)
{
	struct pair p;
	char status[128];
	unsigned long long t0 = cli_now_ns();

	pair_open(&p);
	cr_assert_eq(ctl_request(&p.c, "ARM\n", NULL, status, sizeof(status), 300, NULL, NULL),
		     -ETIMEDOUT);
	cr_assert_geq(ms_since(t0), 300);
	cr_assert_lt(ms_since(t0), 2000);
	cr_assert(strstr(status, "no answer"), "%s", status);
	pair_close(&p);
}

static void set_stop(int sig)
{
	(void)sig;
	session_stop_signal = SIGTERM;
}

/* A stop signal ends the wait at once, whatever the timeout. */
Test(ctl, stop_signal_ends_the_wait)
{
	struct pair p;
	char status[128];
	unsigned long long t0 = cli_now_ns();
	struct sigaction sa = { .sa_handler = set_stop };

	sigaction(SIGALRM, &sa, NULL);
	pair_open(&p);
	ualarm(200000, 0);
	cr_assert_eq(ctl_request(&p.c, "ARM\n", NULL, status, sizeof(status), 20000, NULL, NULL),
		     -EINTR);
	cr_assert_lt(ms_since(t0), 2000);
	cr_assert(strstr(status, "interrupted"), "%s", status);
	pair_close(&p);
}

struct progress {
	int calls, give_up_after;
};

static int progress_then_give_up(void *arg)
{
	struct progress *pr = arg;

	return ++pr->calls >= pr->give_up_after ? -ECANCELED : 1;
}

/* Progress keeps the wait going past its timeout; the callback ends it. */
Test(ctl, progress_extends_and_poll_fn_gives_up)
{
	struct pair p;
	char status[128];
	struct progress pr = { 0, 8 };

	pair_open(&p);
	cr_assert_eq(ctl_request(&p.c, "ARM\n", NULL, status, sizeof(status), 150,
				 progress_then_give_up, &pr), -ECANCELED);
	cr_assert_eq(pr.calls, 8);
	pair_close(&p);
}

Test(ctl, overlong_line_is_an_error_not_cut)
{
	struct pair p;
	char status[128], *line = malloc(PROTO_LINE_MAX + 2);

	memset(line, 'x', PROTO_LINE_MAX + 1);
	line[0] = '=';
	line[1] = ' ';
	line[PROTO_LINE_MAX + 1] = '\n';
	pair_open(&p);
	agent_says(&p, line, PROTO_LINE_MAX + 2, false);
	cr_assert_eq(ctl_request(&p.c, "LIST\n", NULL, status, sizeof(status), 1000, NULL, NULL),
		     -EMSGSIZE);
	free(line);
	pair_close(&p);
}

Test(ctl, agent_hanging_up_is_a_clear_error)
{
	struct pair p;
	char status[128];

	pair_open(&p);
	agent_says(&p, "= half a reply\n", 15, true);
	cr_assert_eq(ctl_request(&p.c, "LIST\n", NULL, status, sizeof(status), 1000, NULL, NULL),
		     -ECONNRESET);
	cr_assert(strstr(status, "closed"), "%s", status);
	pair_close(&p);
}

/* An agent that never reads: the request cannot block the client. */
Test(ctl, agent_not_reading_cannot_block_the_send)
{
	struct pair p;
	char status[128];
	size_t n = 4u << 20;
	char *req = malloc(n + 1);
	unsigned long long t0 = cli_now_ns();

	memset(req, 'a', n);
	req[n - 1] = '\n';
	req[n] = '\0';
	pair_open(&p);
	cr_assert_eq(ctl_request(&p.c, req, NULL, status, sizeof(status), 300, NULL, NULL),
		     -ETIMEDOUT);
	cr_assert_lt(ms_since(t0), 2000);
	free(req);
	pair_close(&p);
}

/* ---- fuzz: random and mutated replies ---- */

static const char *const seeds[] = {
	"OK pid=42 tid=43 armed=0\n",
	"= 00005634a2c1d71a  k  parse_header+0x0\n= 00007f3c1a2dedc5  r  inflate+0x0  "
	"[libz.so.1]  [OPTIMIZED]\nOK\n",
	"ERR 2 unknown symbol 'foo' (did you mean 'food'?)\n",
	"ERR 1 cannot list the probes: Bad address\n",
	"= \nOK \n",
};

static uint64_t rng_state;

static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)rng_state;
}

/* A reply: a seed with bytes flipped, inserted, deleted or lines
 * repeated, or plain random bytes; *len bytes in buf[cap]. */
static void make_reply(char *buf, size_t cap, size_t *len)
{
	const char *seed = seeds[rnd() % (sizeof(seeds) / sizeof(seeds[0]))];
	size_t n = 0;

	if (rnd() % 5 == 0) {
		n = rnd() % (cap / 4);
		for (size_t i = 0; i < n; i++)
			buf[i] = rnd() % 3 ? (char)rnd() : "\n= OK ERR 12"[rnd() % 12];
		*len = n;
		return;
	}
	for (int rep = 1 + (int)(rnd() % 4); rep-- && n + strlen(seed) < cap;) {
		memcpy(buf + n, seed, strlen(seed));
		n += strlen(seed);
	}
	for (int m = (int)(rnd() % 8); m--;) {
		size_t at = n ? rnd() % n : 0;

		switch (rnd() % 4) {
		case 0:
			if (n)
				buf[at] = (char)rnd();
			break;
		case 1:
			if (n + 1 < cap) {
				memmove(buf + at + 1, buf + at, n - at);
				buf[at] = (char)(rnd() % 2 ? '\n' : rnd());
				n++;
			}
			break;
		case 2:
			if (n) {
				memmove(buf + at, buf + at + 1, n - at - 1);
				n--;
			}
			break;
		default:	/* a long run: over-long lines */
			if (n + 5000 < cap) {
				memmove(buf + at + 5000, buf + at, n - at);
				memset(buf + at, 'A' + (int)(rnd() % 26), 5000);
				n += 5000;
			}
			break;
		}
	}
	*len = n;
}

static bool rc_is_expected(int rc)
{
	return rc == 0 || rc == 1 || rc == 2 || rc == -EPROTO || rc == -EMSGSIZE ||
	       rc == -ECONNRESET || rc == -ETIMEDOUT;
}

/* No crash, no hang, a clear error: every reply ends in a known result
 * with a terminated status, and nothing unescaped reaches the data. */
Test(ctl, fuzz_replies)
{
	static char reply[64 << 10];
	unsigned long long t0 = cli_now_ns();
	int cases = 0;

	rng_state = 0x9e3779b97f4a7c15ull;
	while (cases < 15000 && ms_since(t0) < 4000) {
		struct pair p;
		char status[64], *data = NULL;
		size_t len, dlen = 0;
		bool hang_up = rnd() % 16 != 0;
		FILE *f = open_memstream(&data, &dlen);
		unsigned long long t1 = cli_now_ns();
		int rc;

		make_reply(reply, sizeof(reply), &len);
		pair_open(&p);
		agent_says(&p, reply, len, hang_up);
		memset(status, 0x55, sizeof(status));
		rc = ctl_request(&p.c, "LIST\n", f, status, sizeof(status), 50, NULL, NULL);
		fclose(f);
		cr_assert(rc_is_expected(rc), "case %d: rc %d", cases, rc);
		cr_assert(memchr(status, '\0', sizeof(status)), "case %d: status unterminated",
			  cases);
		cr_assert(rc <= 0 || status[0], "case %d: an error without a message", cases);
		cr_assert_lt(ms_since(t1), 1500, "case %d took too long", cases);
		assert_terminal_safe(data, dlen);
		free(data);
		pair_close(&p);
		cases++;
	}
	cr_log_info("%d replies in %llu ms", cases, ms_since(t0));
	cr_assert_gt(cases, 100, "only %d cases ran", cases);
}

/* ---- the socket directory and the server's credentials ---- */

Test(ctl, peer_check_wants_the_target_and_its_uid)
{
	struct pair p;

	pair_open(&p);
	cr_assert_eq(ctl_check_peer(&p.c, getpid(), geteuid()), 0);
	cr_assert_eq(ctl_check_peer(&p.c, getpid() + 1, geteuid()), -EACCES);
	cr_assert(strstr(p.c.why, "refusing"), "%s", p.c.why);
	cr_assert_eq(ctl_check_peer(&p.c, getpid(), geteuid() + 1), -EACCES);
	pair_close(&p);
}

Test(ctl, dir_check_wants_a_private_directory_of_the_owner)
{
	char dir[] = "/tmp/kprobe-test-ctl-XXXXXX";
	int fd;

	cr_assert(mkdtemp(dir));
	fd = open(dir, O_RDONLY | O_DIRECTORY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(chmod(dir, 0700), 0);
	cr_assert_eq(ctl_dir_check(fd, geteuid()), 0);
	cr_assert_eq(ctl_dir_check(fd, geteuid() + 1), -EPERM);
	cr_assert_eq(chmod(dir, 0777), 0);
	cr_assert_eq(ctl_dir_check(fd, geteuid()), -EPERM);
	cr_assert_eq(chmod(dir, 0720), 0);
	cr_assert_eq(ctl_dir_check(fd, geteuid()), -EPERM);
	cr_assert_eq(chmod(dir, 0755), 0);
	cr_assert_eq(ctl_dir_check(fd, geteuid()), 0);
	close(fd);
	rmdir(dir);
}

/* ---- ctl_connect() on a process of a uid of our own (root only) ---- */

struct victim {
	pid_t pid;
	uid_t uid;
	char dir[64], sock[96];
};

/* Removes path, a symlink or a directory of sockets. */
static void remove_dir(const char *path)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	cr_assert_eq(system(cmd), 0);
}

/* A process running as a uid no one else uses, sleeping: the target. */
static void victim_start(struct victim *v)
{
	int ready[2];
	char c;

	if (geteuid() != 0)
		cr_skip_test("needs root to run a target as another uid");
	v->uid = 200000 + (uid_t)(getpid() % 100000);
	snprintf(v->dir, sizeof(v->dir), "/tmp/.kprobe-%u", (unsigned int)v->uid);
	remove_dir(v->dir);	/* left by a failed run with the same pid */
	cr_assert(!pipe(ready));
	v->pid = fork();
	cr_assert_geq(v->pid, 0);
	if (v->pid == 0) {
		int null = open("/dev/null", O_RDWR);

		/* It holds none of the test's output pipes open, and dies with
		 * the test, even a failed one (set after the change of
		 * credentials, which clears it). */
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		if (setgroups(0, NULL) || setresgid(v->uid, v->uid, v->uid) ||
		    setresuid(v->uid, v->uid, v->uid))
			_exit(1);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() == 1)
			_exit(1);
		if (write(ready[1], "r", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(ready[1]);
	cr_assert_eq(read(ready[0], &c, 1), 1);
	close(ready[0]);
	snprintf(v->sock, sizeof(v->sock), "%s/%d.sock", v->dir, (int)v->pid);
}

static void victim_stop(struct victim *v)
{
	kill(v->pid, SIGKILL);
	waitpid(v->pid, NULL, 0);
	remove_dir(v->dir);
}

/* A socket file at path; listening (fd returned) or, with listen_too
 * false, closed at once: stale. */
static int socket_at(const char *path, bool listen_too)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	cr_assert_geq(fd, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	unlink(path);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "%s", strerror(errno));
	if (listen_too) {
		cr_assert_eq(listen(fd, 4), 0);
		return fd;
	}
	close(fd);
	return -1;
}

Test(ctl, connect_without_directory_is_no_agent)
{
	struct victim v;
	struct ctl c;

	victim_start(&v);
	rmdir(v.dir);
	cr_assert_eq(ctl_connect(&c, v.pid), -ENOENT);
	victim_stop(&v);
}

Test(ctl, connect_refuses_a_symlinked_directory)
{
	struct victim v;
	struct ctl c;
	char real[] = "/tmp/kprobe-test-ctl-XXXXXX";

	victim_start(&v);
	cr_assert(mkdtemp(real));
	cr_assert_eq(chown(real, v.uid, v.uid), 0);
	cr_assert_eq(chmod(real, 0700), 0);
	cr_assert_eq(symlink(real, v.dir), 0, "%s", strerror(errno));
	cr_assert_eq(ctl_connect(&c, v.pid), -EPERM);
	cr_assert(strstr(c.why, "symlink"), "%s", c.why);
	cr_assert_eq(c.fd, -1);
	victim_stop(&v);
	rmdir(real);
}

Test(ctl, connect_refuses_a_directory_of_another_user_or_open_to_all)
{
	struct victim v;
	struct ctl c;
	int fd;

	victim_start(&v);
	cr_assert_eq(mkdir(v.dir, 0700), 0, "%s", strerror(errno));
	fd = socket_at(v.sock, true);
	/* Someone else's (here root's, with the nobody uid as in the wild
	 * the attacker's) directory. */
	cr_assert_eq(chown(v.dir, 65534, 65534), 0);
	cr_assert_eq(ctl_connect(&c, v.pid), -EPERM);
	cr_assert(strstr(c.why, "not privately"), "%s", c.why);
	/* The target's own, but writable by all. */
	cr_assert_eq(chown(v.dir, v.uid, v.uid), 0);
	cr_assert_eq(chmod(v.dir, 0777), 0);
	cr_assert_eq(ctl_connect(&c, v.pid), -EPERM);
	close(fd);
	victim_stop(&v);
}

/* The directory is right, but the server is not the target. */
Test(ctl, connect_refuses_an_impostor_server)
{
	struct victim v;
	struct ctl c;
	int fd;

	victim_start(&v);
	cr_assert_eq(mkdir(v.dir, 0700), 0, "%s", strerror(errno));
	fd = socket_at(v.sock, true);
	cr_assert_eq(chown(v.dir, v.uid, v.uid), 0);
	cr_assert_eq(ctl_connect(&c, v.pid), -EACCES);
	cr_assert(strstr(c.why, "refusing"), "%s", c.why);
	cr_assert_eq(c.fd, -1);
	close(fd);
	victim_stop(&v);
}

/* A socket nobody listens on is removed; so are sockets of dead PIDs. */
Test(ctl, stale_sockets_are_removed)
{
	struct victim v;
	struct ctl c;
	char dead_sock[96], other[96];
	struct stat st;
	pid_t dead = fork();

	if (dead == 0)
		_exit(0);
	cr_assert_eq(waitpid(dead, NULL, 0), dead);
	victim_start(&v);
	cr_assert_eq(mkdir(v.dir, 0700), 0, "%s", strerror(errno));
	socket_at(v.sock, false);
	snprintf(dead_sock, sizeof(dead_sock), "%s/%d.sock", v.dir, (int)dead);
	socket_at(dead_sock, false);
	/* Not a socket of a dead process: kept. */
	snprintf(other, sizeof(other), "%s/%d.sock", v.dir, (int)getpid());
	socket_at(other, false);
	cr_assert_eq(chown(v.dir, v.uid, v.uid), 0);
	cr_assert_eq(ctl_connect(&c, v.pid), -ECONNREFUSED);
	cr_assert_neq(lstat(v.sock, &st), 0, "the stale socket is still there");
	cr_assert_neq(lstat(dead_sock, &st), 0, "the dead process's socket is still there");
	cr_assert_eq(lstat(other, &st), 0, "a live process's socket was removed");
	unlink(other);
	victim_stop(&v);
}

static void count_stop(int sig)
{
	(void)sig;
	session_stop_count++;
}

/* A wait that began after a stop signal (the tool cleaning up) runs to its
 * timeout, unless another stop signal comes. */
Test(ctl, second_stop_signal_ends_a_cleanup_wait)
{
	struct pair p;
	char status[128];
	unsigned long long t0;
	struct sigaction sa = { .sa_handler = count_stop };

	session_stop_signal = SIGINT;
	session_stop_count = 1;
	pair_open(&p);
	t0 = cli_now_ns();
	cr_assert_eq(ctl_request(&p.c, "DISARM\n", NULL, status, sizeof(status), 300, NULL,
				 NULL), -ETIMEDOUT);
	cr_assert_geq(ms_since(t0), 300);
	sigaction(SIGALRM, &sa, NULL);
	ualarm(200000, 0);
	t0 = cli_now_ns();
	cr_assert_eq(ctl_request(&p.c, "DISARM\n", NULL, status, sizeof(status), 20000, NULL,
				 NULL), -EINTR);
	cr_assert_lt(ms_since(t0), 2000);
	pair_close(&p);
}
