/* Registering and removing the probe points of an agent session. */
#ifndef KPROBE_AGENT_REGISTER_H
#define KPROBE_AGENT_REGISTER_H

#include "agent.h"
#include "agent_resolve.h"

/* Why a session could not start: one line, and the exit status class of
 * the CLI (2 a bad probe, 1 any other failure). */
struct agent_fail {
	char *msg;
	size_t len;
	int kind;
};

/* Fills f and returns rc. */
int agent_fail(struct agent_fail *f, int kind, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Registers the points as probes of s (appended to s->probes): all or
 * none, except a glob's matches that libkprobes refuses, which are
 * skipped and counted.  A follower skips any refused point. */
int agent_register_points(struct agent_session *s, const struct resolve_list *pts,
			  struct agent_fail *f);

/* The same for a session's first points, armed all at once and optimized
 * before it returns. */
int agent_register_first(struct agent_session *s, const struct resolve_list *pts,
			 struct agent_fail *f);

/* Optimizes every probe that can be, now (a module's, after its init). */
void agent_optimize_now(void);

/* Unregisters v[0..n) (NULL slots skipped). */
void agent_unregister_probes(struct agent_probe **v, int n);

#endif
