/* Attach mode: `kprobe ... -p PID`. */
#ifndef KPROBE_ATTACH_H
#define KPROBE_ATTACH_H

#include "session.h"

/* Loads the agent into s->opts->pid if it has none, runs the session and
 * leaves the process running unprobed; returns kprobe's exit status. */
int attach_run(struct session *s, const char *agent);

/* Connects to pid's agent, injecting it when needed; exits on failure. */
void attach_connect(struct ctl *c, pid_t pid, const char *agent);

/* A stopped process (group stop) keeps its agent's threads stopped too, and
 * a request would wait for an answer in vain: these let them run under
 * ptrace while the program's threads stay stopped.  0, or -errno with a
 * few words saying why into why[len]. */
int attach_run_stopped_agent(pid_t pid, char *why, size_t len);
/* A ctl_request() poll function that keeps them running. */
int attach_keep_agent_running(void *arg);
/* Hands them back to the group stop (nothing to do when none was run). */
void attach_release_agent(void);

#endif
