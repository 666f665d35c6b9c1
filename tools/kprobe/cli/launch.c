/* `kprobe ACTION PROBE... -- COMMAND`: start the command with the agent
 * preloaded; its constructor arms the probes before main().  The command's
 * stdin, stdout and stderr are its own; its exit status is ours. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "elf_file.h"
#include "launch.h"
#include "run.h"
#include "stacks.h"

/* How long an agent may take to show up before we call it missing. */
#define AGENT_APPEAR_NS (10ull * 1000000000ull)

/* The file execvp() would run, or NULL if there is none. */
static bool find_command(const char *cmd, char *out, size_t len)
{
	const char *path = getenv("PATH");
	char copy[4096], *save = NULL;

	if (strchr(cmd, '/')) {
		snprintf(out, len, "%s", cmd);
		return access(cmd, X_OK) == 0;
	}
	snprintf(copy, sizeof(copy), "%s", path ? path : "/usr/local/bin:/usr/bin:/bin");
	for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		struct stat st;

		snprintf(out, len, "%s/%s", *dir ? dir : ".", cmd);
		if (!stat(out, &st) && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
			return true;
	}
	return false;
}

/* LD_PRELOAD only works for programs the dynamic loader starts. */
static void check_command(const char *cmd)
{
	char path[PATH_MAX];
	int rc;

	if (!find_command(cmd, path, sizeof(path)))
		cli_die(EXIT_BAD, "cannot run '%s': %s", cmd,
			strchr(cmd, '/') ? strerror(errno) : "command not found");
	rc = elf_file_has_interp(path);
	if (rc == 0)
		cli_die(EXIT_FAIL, "'%s' is statically linked: the agent cannot be preloaded "
			"into it", cmd);
	/* Not ELF (a script): its interpreter is what gets the agent. */
}

/* LD_AUDIT gets the audit module beside the agent (which starts the agent
 * before any library's constructor runs), ahead of the command's own;
 * without the module the agent starts from its constructor. */
static void set_audit(const char *agent)
{
	const char *before = getenv("LD_AUDIT");
	const char *slash = strrchr(agent, '/');
	char *audit;

	unsetenv(KPROBE_ENV_AUDIT);
	if (!slash || asprintf(&audit, "%.*s/libkprobe-audit.so", (int)(slash - agent), agent) < 0)
		return;
	if (access(audit, R_OK)) {
		free(audit);
		return;
	}
	if (before && *before) {
		char *both;

		setenv(KPROBE_ENV_AUDIT, before, 1);
		if (asprintf(&both, "%s:%s", audit, before) < 0)
			_exit(127);
		audit = both;
	}
	setenv("LD_AUDIT", audit, 1);
}

static void child_exec(struct session *s, const char *agent, const char *config, int errfd)
{
	const char *before = getenv("LD_PRELOAD");
	char *preload;
	int e;

	if (before && *before) {
		setenv(KPROBE_ENV_PRELOAD, before, 1);
		if (asprintf(&preload, "%s:%s", agent, before) < 0)
			_exit(127);
	} else {
		unsetenv(KPROBE_ENV_PRELOAD);
		preload = (char *)agent;
	}
	setenv("LD_PRELOAD", preload, 1);
	set_audit(agent);
	setenv(KPROBE_ENV_CONFIG, config, 1);
	unsetenv(KPROBE_ENV_FOLLOWER);
	/* The command must not inherit our handlers' effect or our mask. */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	signal(SIGPIPE, SIG_DFL);
	execvp(s->opts->command[0], s->opts->command);
	e = errno;
	if (write(errfd, &e, sizeof(e)) < 0)
		_exit(127);
	_exit(127);
}

static int exit_status_of(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return EXIT_FAIL;
}

/* Waits until the agent has armed the probes.  Returns 0, or dies. */
static void wait_armed(struct session *s, pid_t child)
{
	unsigned long long start = cli_now_ns();

	for (;;) {
		uint32_t st = __atomic_load_n(&s->map.hdr->status, __ATOMIC_ACQUIRE);
		int status;

		if (st == KPS_READY)
			break;
		if (st == KPS_FAILED) {
			char msg[KPS_MSG];
			int kind = session_agent_error(s, msg, sizeof(msg));

			session_progress_done(s);
			kill(child, SIGKILL);
			waitpid(child, &status, 0);
			session_show_failed_lines(s);
			session_close(s);
			cli_die(kind, "%s", msg);
		}
		if (waitpid(child, &status, WNOHANG) == child) {
			if (__atomic_load_n(&s->map.hdr->status, __ATOMIC_ACQUIRE) == KPS_FAILED)
				continue;
			session_close(s);
			cli_die(EXIT_FAIL, "'%s' exited before its probes were armed (status %d): "
				"the agent did not load (set-user-ID program?)",
				s->opts->command[0], exit_status_of(status));
		}
		/* Stopped before main(): the command never ran for the user. */
		if (session_stop_signal) {
			session_progress_done(s);
			kill(child, SIGKILL);
			waitpid(child, &status, 0);
			session_close(s);
			cli_die(128 + session_stop_signal, "interrupted while the probes were being "
				"armed: '%s' did not run", s->opts->command[0]);
		}
		if (st == KPS_INIT && cli_now_ns() - start > AGENT_APPEAR_NS) {
			kill(child, SIGKILL);
			waitpid(child, &status, 0);
			session_close(s);
			cli_die(EXIT_FAIL, "the agent did not load into '%s' (set-user-ID program?)",
				s->opts->command[0]);
		}
		session_progress(s, start);
		poll(NULL, 0, 5);
	}
	session_progress_done(s);
	session_note_skipped(s);
}

/* Ends probing: the agent removes every probe (the command keeps running). */
/* The agent opens its control socket just after it reports the session
 * armed, so the connection made then can miss it: try again (briefly)
 * before disarming, or END would not run until the process exits. */
static void connect_late(struct session *s)
{
	for (int i = 0; s->ctl.fd < 0 && i < 50; i++) {
		if (ctl_connect(&s->ctl, s->target) != -ENOENT)
			break;
		poll(NULL, 0, 10);
	}
}

static void disarm(struct session *s)
{
	char status[256];

	session_stop_reading(s);
	connect_late(s);
	if (s->ctl.fd >= 0)
		ctl_request(&s->ctl, "DISARM\n", NULL, status, sizeof(status), 5000, NULL, NULL);
	ctl_close(&s->ctl);
}

/* SIGTERM and SIGHUP sent to kprobe are meant for the command too; a
 * terminal's SIGINT already reached it (same process group). */
static void forward_stop_signal(pid_t child)
{
	int sig = session_stop_signal;

	if (sig == SIGTERM || sig == SIGHUP)
		kill(child, sig);
}

/* Reaps the command; a second stop signal stops waiting for it. */
static int wait_command(pid_t child, int *status)
{
	int seen = session_stop_signal;

	for (;;) {
		pid_t r = waitpid(child, status, 0);

		if (r == child)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (session_stop_signal && session_stop_signal != seen)
			return -EINTR;
		forward_stop_signal(child);
		seen = session_stop_signal;
	}
}

int launch_run(struct session *s, const char *agent)
{
	struct cli_opts *o = s->opts;
	unsigned long long deadline = 0;
	bool busy;
	char *config;
	char status_line[256];
	int errpipe[2], e = 0, status = 0, inherit, rc;
	pid_t child;
	bool exited = false, lost_output;

	check_command(o->command[0]);
	/* The command inherits the session memory; with it, nobody else
	 * can reach it, and it goes when the last of us closes it. */
	inherit = session_inherit_fd(s);
	config = session_config(s);
	if (!config)
		cli_die(EXIT_FAIL, "out of memory");
	if (pipe2(errpipe, O_CLOEXEC))
		cli_die(EXIT_FAIL, "pipe: %s", strerror(errno));
	fflush(NULL);
	child = fork();
	if (child < 0)
		cli_die(EXIT_FAIL, "fork: %s", strerror(errno));
	if (child == 0)
		child_exec(s, agent, config, errpipe[1]);
	close(errpipe[1]);
	close(inherit);
	session_handed_over(s);
	free(config);
	s->target = child;
	if (read(errpipe[0], &e, sizeof(e)) == sizeof(e)) {
		waitpid(child, &status, 0);
		session_close(s);
		cli_die(EXIT_BAD, "cannot run '%s': %s", o->command[0], strerror(e));
	}
	close(errpipe[0]);
	wait_armed(s, child);
	output_begin(&s->out);
	/* The session ends when we go: the agent disarms if we die.  A socket
	 * that fails the checks is not ours to talk to: say so, and go on
	 * (the session memory does not depend on it). */
	rc = ctl_connect(&s->ctl, child);
	if (!rc)
		ctl_request(&s->ctl, "OWN\n", NULL, status_line, sizeof(status_line), 5000, NULL,
			    NULL);
	else if (s->ctl.why[0])
		cli_warn("%s", s->ctl.why);
	if (o->duration > 0)
		deadline = cli_now_ns() + (unsigned long long)(o->duration * 1e9);
	if (o->prog) {
		/* "Attaching..." and BEGIN's lines come before the command's
		 * own, as with bpftrace: main() waits for this. */
		run_attached(s);
		session_pump(s);
		fflush(s->out.f);
		__atomic_store_n(&s->map.hdr->go, 1, __ATOMIC_RELEASE);
	} else if (o->stack_depth) {
		/* The command's objects, read while it lives: main() waits. */
		stacks_attached(s);
		__atomic_store_n(&s->map.hdr->go, 1, __ATOMIC_RELEASE);
	}
	while (!session_stop_signal && !(deadline && cli_now_ns() >= deadline) &&
	       !run_exit_requested(s)) {
		if (waitpid(child, &status, WNOHANG) == child) {
			exited = true;
			break;
		}
		busy = session_pump(s);
		/* Busy rings are read again at once, idle ones soon. */
		poll(NULL, 0, session_pump_delay_ms(s, busy));
	}
	if (!exited) {
		disarm(s);
		forward_stop_signal(child);
	}
	session_report(s);
	lost_output = session_close(s) != 0;
	/* exit() ends the command too, as bpftrace's does. */
	if (!exited && run_exit_requested(s)) {
		kill(child, SIGTERM);
		wait_command(child, &status);
		return lost_output ? EXIT_FAIL : 0;
	}
	if (!exited && wait_command(child, &status))
		return 128 + session_stop_signal;
	return lost_output ? EXIT_FAIL : exit_status_of(status);
}
