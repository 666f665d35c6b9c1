/* `kprobe ACTION PROBE... -p PID`: load the agent into a running process
 * (once: it stays loaded, dormant and threadless, after we leave; a later
 * session starts it again), hold the process's
 * threads still while the agent arms the probes, stream the events, and on
 * exit, Ctrl-C or -d SECONDS have the agent remove every probe. */
#include "attach.h"
#include "run.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inject.h"
#include "target_check.h"
#include "tracee.h"

/* The agent's control thread answers once it has started (again, in a
 * process it was loaded into before): on a loaded machine that can take
 * seconds, more with the process stopped and its agent threads run by us. */
#define CONNECT_WAIT_NS (10ull * 1000000000ull)
/* Threads stay held at most this long while the agent arms: a thread we
 * stopped may hold a lock the agent needs. */
#define HOLD_MAX_NS (2ull * 1000000000ull)
/* Arming gives up after this long without progress from the agent. */
#define ARM_IDLE_MS 60000
#define ARM_MAX_NS (600ull * 1000000000ull)
/* With -d, the shortest silence from the agent that gives up arming: the
 * duration is the probing's (it starts once armed), and an agent that
 * is slow but moving on (an emulator, a process with many threads) is
 * waited for; one that says nothing for this long, or for the duration
 * if longer, is not. */
#define ARM_SILENT_MIN_NS (5ull * 1000000000ull)

/* A socket we must not talk to (not private, or not the target's) is a
 * failure at once: injecting would not make it trustworthy. */
static void check_connect(const struct ctl *c, pid_t pid, int rc)
{
	if (rc == -EPERM || rc == -EACCES)
		cli_die(EXIT_FAIL, "%s", c->why);
	if (rc == -ESRCH)
		cli_die(EXIT_FAIL, "process %d is gone", (int)pid);
}

/* In a stopped process (SIGSTOP, job control) the program's threads stay
 * stopped while the agent's run traced by us: they must, to answer.  When
 * we detach they rejoin the group stop, and everything goes on together
 * when the process is continued.  Empty for a running process. */
static struct tracee_set agent_threads;

/* Lets the agent's traced threads run on; called at least every 100 ms
 * while we wait for the agent (a ctl_request() poll function that says
 * nothing about progress). */
int attach_keep_agent_running(void *arg)
{
	(void)arg;
	if (agent_threads.n)
		tracee_service(&agent_threads);
	return 0;
}

static bool agent_threads_alive(void)
{
	for (int i = 0; i < agent_threads.n; i++)
		if (!agent_threads.v[i].gone)
			return true;
	return false;
}

#define LEAVE_WAIT_MS 2000

static void wait_agent_threads_gone(void)
{
	for (int i = 0; i < LEAVE_WAIT_MS && agent_threads_alive(); i++) {
		tracee_service(&agent_threads);
		poll(NULL, 0, 1);
	}
}

int attach_run_stopped_agent(pid_t pid, char *why, size_t len)
{
	static const char *const names[] = { "kprobe-agent", "kprobes-opt", NULL };
	int rc = tracee_seize_named(&agent_threads, pid, names);

	for (int i = 0; !rc && i < agent_threads.n; i++)
		rc = tracee_run(&agent_threads, agent_threads.v[i].tid);
	if (!rc && !agent_threads.n)
		rc = -ESRCH;
	if (rc) {
		tracee_release(&agent_threads);
		snprintf(why, len, "%s", rc == -ESRCH ? "not found" : strerror(-rc));
	}
	return rc;
}

void attach_release_agent(void)
{
	tracee_release(&agent_threads);
}

/* A stopped process whose agent is already there and serving (a
 * preloaded one): its threads (named by the agent and the library) are in
 * the group stop too. */
static void run_stopped_agent(pid_t pid)
{
	char why[128];

	if (attach_run_stopped_agent(pid, why, sizeof(why)))
		cli_die(EXIT_FAIL, "cannot attach to process %d: it is stopped and its agent's "
			"threads cannot be run (%s)", (int)pid, why);
}

void attach_connect(struct ctl *c, pid_t pid, const char *agent)
{
	struct target_state st;
	char err[512];
	bool stopped;
	int rc;

	/* Before anything touches the process, even a connection to an agent
	 * already there (arming holds the threads with ptrace). */
	if (target_check_attachable(pid, &st, err, sizeof(err)))
		cli_die(EXIT_FAIL, "%s", err);
	stopped = st.state == 'T';
	rc = ctl_connect(c, pid);
	if (!rc) {
		if (stopped)
			run_stopped_agent(pid);
		return;
	}
	check_connect(c, pid, rc);
	rc = inject_agent(pid, agent, stopped, &agent_threads, err, sizeof(err));
	if (rc)
		cli_die(EXIT_FAIL, "%s", err);
	for (unsigned long long t0 = cli_now_ns();
	     cli_now_ns() - t0 < CONNECT_WAIT_NS && !session_stop_signal;) {
		rc = ctl_connect(c, pid);
		if (!rc)
			return;
		check_connect(c, pid, rc);
		attach_keep_agent_running(NULL);
		poll(NULL, 0, 5);
	}
	cli_die(EXIT_FAIL, "the agent loaded into process %d but does not answer on its "
		"control socket", (int)pid);
}

struct arm_wait {
	struct session *s;
	struct tracee_set *held;
	unsigned long long start;
	uint64_t done;			/* progress_done last seen */
	unsigned long long moved;	/* when it last changed */
};

/* Called while the ARM request is pending: > 0 while the agent shows
 * progress; -ETIMEDOUT with -d after a silence of the duration (at least
 * ARM_SILENT_MIN_NS), or after ARM_MAX_NS whatever the progress counter
 * (the target writes it) says. */
static int arm_progress(void *arg)
{
	struct arm_wait *w = arg;
	uint64_t done = __atomic_load_n(&w->s->map.hdr->progress_done, __ATOMIC_RELAXED);
	double d = w->s->opts->duration;
	unsigned long long now = cli_now_ns(), silent = (unsigned long long)(d * 1e9);

	session_progress(w->s, w->start);
	attach_keep_agent_running(NULL);
	if (w->held->n && now - w->start > HOLD_MAX_NS)
		tracee_release(w->held);
	if (silent < ARM_SILENT_MIN_NS)
		silent = ARM_SILENT_MIN_NS;
	if ((d > 0 && now - w->moved > silent) || now - w->start > ARM_MAX_NS)
		return -ETIMEDOUT;
	if (done == w->done)
		return 0;
	w->done = done;
	w->moved = now;
	return 1;
}

static pid_t agent_thread(struct ctl *c)
{
	char status[256];
	const char *tid;

	if (ctl_request(c, "HELLO\n", NULL, status, sizeof(status), 5000,
			attach_keep_agent_running, NULL))
		return 0;
	tid = strstr(status, "tid=");
	return tid ? (pid_t)atoi(tid + 4) : 0;
}

/* Sends the session to the agent and waits until it is armed. */
static void arm(struct session *s)
{
	struct tracee_set held = { 0 };
	struct arm_wait w = { s, &held, cli_now_ns(), 0, cli_now_ns() };
	char *config, *req, status[KPS_MSG + 64];
	pid_t agent_tid = agent_thread(&s->ctl);
	int rc;

	/* The session memory goes with the request: the agent needs no
	 * name to open, and the memory never becomes its user's. */
	s->ctl.pass_fd = session_pass_fd(s);
	config = session_config(s);
	if (!config || asprintf(&req, "ARM\n%sEND\n", config) < 0)
		cli_die(EXIT_FAIL, "out of memory");
	free(config);
	/* Held still, threads cannot run into half-patched code, and the
	 * agent sees where each one is.  Without ptrace it still works. */
	if (agent_tid && tracee_hold(&held, s->target, agent_tid))
		held.n = 0;
	/* A thread that blocks SIGTRAP and hits a breakpoint is killed by the
	 * kernel.  A preloaded agent keeps SIGTRAP out of every mask the
	 * program sets; an injected one comes too late for that, so take it
	 * out of the masks the threads already have. */
	tracee_unblock(&held, SIGTRAP);
	rc = ctl_request(&s->ctl, req, NULL, status, sizeof(status), ARM_IDLE_MS, arm_progress,
			 &w);
	session_handed_over(s);
	if (held.n)
		tracee_release(&held);
	free(req);
	session_progress_done(s);
	if (rc) {
		/* Closing the connection is enough: an agent that finishes
		 * arming without its client removes the probes again. */
		session_show_failed_lines(s);
		session_close(s);
		if (rc == -EINTR || rc == -ETIMEDOUT)
			cli_die(EXIT_FAIL, "gave up waiting for the agent of process %d to arm the "
				"probes (%s); it removes them when it is done", (int)s->target,
				status);
		if (rc < 0)
			cli_die(EXIT_FAIL, "lost the agent of process %d: %s", (int)s->target,
				status);
		cli_die(rc == EXIT_BAD ? EXIT_BAD : EXIT_FAIL, "%s", status);
	}
	/* If we die, the agent disarms and leaves by itself. */
	ctl_request(&s->ctl, "OWN\n", NULL, status, sizeof(status), 5000,
		    attach_keep_agent_running, NULL);
	session_note_skipped(s);
}

static bool target_alive(struct session *s)
{
	struct pollfd pfd = { .fd = s->ctl.fd, .events = POLLIN };

	if (kill(s->target, 0) && errno == ESRCH)
		return false;
	/* The agent only speaks when asked: readable means closed. */
	return poll(&pfd, 1, 0) == 0;
}

int attach_run(struct session *s, const char *agent)
{
	struct cli_opts *o = s->opts;
	unsigned long long deadline = 0;
	bool busy;
	char status[256];
	bool alive = true;

	s->target = o->pid;
	attach_connect(&s->ctl, o->pid, agent);
	arm(s);
	output_begin(&s->out);
	if (o->prog)
		run_attached(s);
	if (o->duration > 0)
		deadline = cli_now_ns() + (unsigned long long)(o->duration * 1e9);
	while (!session_stop_signal && !(deadline && cli_now_ns() >= deadline) &&
	       !run_exit_requested(s)) {
		busy = session_pump(s);
		if (!target_alive(s)) {
			alive = false;
			break;
		}
		attach_keep_agent_running(NULL);
		/* Busy rings are read again at once, idle ones soon. */
		poll(NULL, 0, session_pump_delay_ms(s, busy));
	}
	/* Leave the process running unprobed; the agent ends its threads. */
	if (alive) {
		/* No thread may wait for ring space we no longer read. */
		session_stop_reading(s);
		ctl_request(&s->ctl, "DISARM\n", NULL, status, sizeof(status), 10000,
			    attach_keep_agent_running, NULL);
	}
	/* A process still stopped takes the agent's threads back into its
	 * group stop: first let them finish leaving (the control thread and
	 * the optimizer end after DISARM), or the next attach would find a
	 * half-closed agent. */
	wait_agent_threads_gone();
	tracee_release(&agent_threads);
	session_report(s);
	return session_close(s) ? EXIT_FAIL : 0;
}
