/* The agent's start in the target.
 *
 * Preloaded by `kprobe ... -- COMMAND`, its constructor finds the session
 * config in the environment and arms the probes before main() runs, while
 * the process still has a single thread; on failure it reports through the
 * session memory and exits before main(), so the command never runs
 * half-probed.  Injected by `kprobe ... -p PID`, it only starts serving its
 * control socket; the CLI then sends the session.
 *
 * Either way it never touches the command's stdin, stdout or stderr. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"

/* Status of a launched command whose probes could not be armed; the CLI
 * reads the reason from the session memory, not from this. */
#define AGENT_FAILED_EXIT 127

static char self_basename[256];
static bool follow_forks;
static bool injected;

bool agent_injected(void)
{
	return injected;
}

const char *agent_self_basename(void)
{
	return self_basename;
}

static void find_self(void)
{
	Dl_info info;
	const char *slash;

	if (!dladdr((void *)find_self, &info) || !info.dli_fname)
		return;
	slash = strrchr(info.dli_fname, '/');
	snprintf(self_basename, sizeof(self_basename), "%s", slash ? slash + 1 : info.dli_fname);
}

static void after_fork_child(void)
{
	const struct agent_session *s = agent_session;

	/* The session's own choice, whichever way it came (environment or
	 * control socket). */
	agent_hit_after_fork(s ? s->cfg.follow : follow_forks);
}

/* Without -f, the command's own children must run without the agent:
 * give them back the environment the command was given. */
static void restore_environment(void)
{
	const char *before = getenv(KPROBE_ENV_PRELOAD);

	if (before && *before)
		setenv("LD_PRELOAD", before, 1);
	else
		unsetenv("LD_PRELOAD");
	unsetenv(KPROBE_ENV_PRELOAD);
	unsetenv(KPROBE_ENV_CONFIG);
}

static void start_from_environment(const char *config)
{
	/* Set by the first agent of a session that follows forks and execs:
	 * an exec'd child joins the running session, best effort. */
	bool follower = getenv(KPROBE_ENV_FOLLOWER) != NULL;
	char err[KPS_MSG];
	int kind = 1;

	follow_forks = strstr(config, "\nfollow 1\n") != NULL;
	if (!follow_forks)
		restore_environment();
	if (agent_session_start(config, -1, follower, err, sizeof(err), &kind)) {
		if (follower)
			return;
		/* Nothing is armed and the CLI has the reason: never let the
		 * command run without its probes. */
		_exit(AGENT_FAILED_EXIT);
	}
	if (follow_forks && !follower)
		setenv(KPROBE_ENV_FOLLOWER, "1", 1);
	agent_session_wait_go();
}

/* libkprobes' SIGTRAP handler calls __errno_location() before it marks
 * the thread as inside a handler, so a probe there (a glob such as
 * 'libc.so.6:*' matches it) would trap forever. */
static void blacklist_unsafe_functions(void)
{
	__kprobes_blacklist_add((const void *)__errno_location);
}

__attribute__((constructor)) static void agent_init(void)
{
	const char *env = getenv(KPROBE_ENV_CONFIG);

	char err[KPS_MSG];

	agent_own_begin();
	find_self();
	/* Without it libkprobes refuses every probe (it cannot decode). */
	agent_private_load(err, sizeof(err));
	blacklist_unsafe_functions();
	agent_hit_init();
	pthread_atfork(NULL, NULL, after_fork_child);
	if (env) {
		char *config = strdup(env);

		if (!config)
			_exit(AGENT_FAILED_EXIT);
		start_from_environment(config);
		free(config);
	} else {
		/* Injected: not first in symbol lookup. */
		injected = true;
		agent_interpose_start();
	}
	/* Without a control socket the target still runs probed; list and
	 * the knobs are just unavailable. */
	agent_server_start();
	agent_own_end();
}

/* A later `kprobe -p` on a process the agent left (its control thread
 * ended when the last session did): dlopen() would find the agent loaded
 * and run no constructor, so the tool calls this instead, the way it
 * calls dlopen (two arguments, not used; non-zero on success). */
AGENT_EXPORT long kprobe_agent_start(const char *unused, long unused_flags)
{
	int rc;

	(void)unused;
	(void)unused_flags;
	agent_own_begin();
	rc = agent_server_start();
	agent_own_end();
	return rc ? 0 : 1;
}
