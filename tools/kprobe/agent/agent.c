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

extern char **environ;

#include "agent.h"

/* glibc: sets the calling thread's ctype table pointers from its locale. */
extern void __ctype_init(void);

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
static bool is_follower;

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
	before = getenv(KPROBE_ENV_AUDIT);
	if (before && *before)
		setenv("LD_AUDIT", before, 1);
	else
		unsetenv("LD_AUDIT");
	unsetenv(KPROBE_ENV_AUDIT);
	unsetenv(KPROBE_ENV_CONFIG);
}

/* Arms the session of a launched command.  follower: an exec'd child of a
 * session that follows forks and execs, which joins it, best effort (the
 * first agent of such a session sets KPROBE_ENV_FOLLOWER for them). */
static void start_from_environment(const char *config, bool follower)
{
	char err[KPS_MSG];
	int kind = 1;

	follow_forks = strstr(config, "\nfollow 1\n") != NULL;
	if (agent_session_start(config, -1, follower, err, sizeof(err), &kind)) {
		if (follower)
			return;
		/* Nothing is armed and the CLI has the reason: never let the
		 * command run without its probes. */
		_exit(AGENT_FAILED_EXIT);
	}
	is_follower = follower;
}

/* The environment the command's children get: without -f, the one the
 * command was given; with it, ours, saying that a session runs.  Only
 * once libc has set up the environment (the constructor). */
static void fix_environment(void)
{
	if (!follow_forks)
		restore_environment();
	else if (!is_follower)
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

/* Starts the agent once: from the audit module (early), before any
 * constructor of the program's libraries runs, or from our constructor.
 * config: the session's, or NULL (injected: the CLI sends it later). */
static void agent_start(const char *config, bool follower, bool early)
{
	static bool started;
	char err[KPS_MSG];

	if (started)
		return;
	started = true;
	agent_own_begin();
	find_self();
	/* Without it libkprobes refuses every probe (it cannot decode). */
	agent_private_load(err, sizeof(err));
	/* Before the program's initializers, a dlopen() (the decoder's, just
	 * now) leaves this thread's libc ctype pointers unset: set them. */
	if (early)
		__ctype_init();
	blacklist_unsafe_functions();
	agent_hit_init();
	pthread_atfork(NULL, NULL, after_fork_child);
	if (config) {
		char *copy = strdup(config);

		if (!copy)
			_exit(AGENT_FAILED_EXIT);
		start_from_environment(copy, follower);
		free(copy);
		/* Arming the probes may dlopen() too: libgcc_s, whose frame
		 * registry takes the return stubs' unwind information (the
		 * first return probe on arm64, where no decoder was loaded
		 * above), which unsets the pointers again. */
		if (early)
			__ctype_init();
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

static bool started_early;

/* Called by libkprobe-audit.so once the program is loaded and relocated
 * and before any initializer runs, with the session config, whether this
 * is a follower, and the environment.  libc has not run its initializer
 * yet: its environment pointer is still unset, and the first dlopen()
 * (the decoder's) runs that initializer with what libc has then.  So the
 * environment goes in first; the program's name, which libc takes from
 * the arguments it does not have yet, is set by the constructor. */
AGENT_EXPORT void kprobe_agent_early_start(const char *config, int follower, char **envp);
AGENT_EXPORT void kprobe_agent_early_start(const char *config, int follower, char **envp)
{
	if (!environ)
		environ = envp;
	started_early = true;
	agent_start(config, follower != 0, true);
}

/* glibc passes the program's arguments to constructors. */
/* glibc passes the program's arguments to constructors.  Everything here
 * is the agent's: with the probes armed early, its libc calls (getenv,
 * setenv, ...) must not count as the program's. */
__attribute__((constructor)) static void agent_init(int argc, char **argv, char **envp)
{
	const char *config;

	(void)envp;
	agent_own_begin();
	config = getenv(KPROBE_ENV_CONFIG);
	if (started_early && argc > 0 && argv && argv[0] &&
	    (!program_invocation_name || !*program_invocation_name)) {
		const char *slash = strrchr(argv[0], '/');

		program_invocation_name = argv[0];
		program_invocation_short_name = (char *)(slash ? slash + 1 : argv[0]);
	}
	agent_start(config, getenv(KPROBE_ENV_FOLLOWER) != NULL, false);
	if (config)
		fix_environment();
	agent_own_end();
}
