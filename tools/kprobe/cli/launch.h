/* Launch mode: `kprobe ... -- COMMAND`. */
#ifndef KPROBE_LAUNCH_H
#define KPROBE_LAUNCH_H

#include "session.h"

/* Runs the session on a new command with the agent at path agent; returns
 * the exit status for kprobe (the command's own). */
int launch_run(struct session *s, const char *agent);

#endif
