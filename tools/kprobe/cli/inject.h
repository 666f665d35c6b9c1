/* ptrace injection of the agent into a running process. */
#ifndef KPROBE_INJECT_H
#define KPROBE_INJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "tracee.h"

/* Makes pid dlopen() the agent with its own dynamic loader, then leaves it
 * running as before.  0, or -errno with one line in err (-EPERM: ptrace is
 * not permitted).  A stopped process stays stopped: the agent's threads
 * run traced, in keep (see tracee_service()), which the caller releases;
 * keep is empty otherwise. */
int inject_agent(pid_t pid, const char *agent, bool stopped, struct tracee_set *keep, char *err,
		 size_t errlen);

#endif
