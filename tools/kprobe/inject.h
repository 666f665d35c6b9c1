/* ptrace injection of the agent into a running process. */
#ifndef KPROBE_INJECT_H
#define KPROBE_INJECT_H

#include <stddef.h>
#include <sys/types.h>

/* Makes pid dlopen() the agent with its own dynamic loader, then leaves it
 * running as before.  0, or -errno with one line in err (-EPERM: ptrace is
 * not permitted). */
int inject_agent(pid_t pid, const char *agent, char *err, size_t errlen);

#endif
