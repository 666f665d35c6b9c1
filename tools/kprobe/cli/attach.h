/* Attach mode: `kprobe ... -p PID`. */
#ifndef KPROBE_ATTACH_H
#define KPROBE_ATTACH_H

#include "session.h"

/* Loads the agent into s->opts->pid if it has none, runs the session and
 * leaves the process running unprobed; returns kprobe's exit status. */
int attach_run(struct session *s, const char *agent);

/* Connects to pid's agent, injecting it when needed; exits on failure. */
void attach_connect(struct ctl *c, pid_t pid, const char *agent);

#endif
