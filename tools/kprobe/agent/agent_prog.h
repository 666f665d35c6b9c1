/* A probe program in the target: what agent_prog.c (set-up, services,
 * the interpreted handlers) and agent_prog_fast.c (the handlers of the
 * fast forms, built for the library's lightest save levels) share. */
#ifndef KPROBE_AGENT_PROG_H
#define KPROBE_AGENT_PROG_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "kp_arch.h"
#include "agent.h"
#include "lang/lang.h"

/* What `probe` prints is looked up by the tool: a point's descriptor (the
 * function a glob matched), or BEGIN/END/interval's probe number. */
#define PROBE_ID_DESC (1ull << 32)

struct interval {
	struct agent_prog *prog;
	unsigned probe;
	uint64_t period_ns;
	pthread_t thread;
	bool started;
};

struct agent_prog {
	struct agent_session *session;
	void *image;			/* private copy, verified */
	struct lang_image img;
	void *region;			/* maps, in the session memory */
	uint32_t *probe_of_spec;	/* image probe of each config spec */
	bool *uses_override;		/* per image probe */
	uint64_t uid, gid;
	pid_t cpid;			/* cpid: the pid at the start */
	uint64_t start_ns;
	uint64_t start_tsc;		/* with tick_q32: nsecs from the TSC */
	uint64_t tick_q32;		/* ns per TSC tick << 32, 0: use the clock */
	unsigned int gen;		/* the session's: per-thread caches */
	pid_t pid;			/* the process that runs END */
	int stop_fd[2];			/* interval threads wait on it */
	struct interval *intervals;
	int nintervals;
	bool ended;			/* END ran */
	bool shards;			/* some map has per-thread shards */
	/* The fast forms' points' states (agent_prog_fast.c) */
	struct prog_point *points;
};

/* nsecs from the TSC: only where p->tick_q32 says it is invariant. */
static inline __attribute__((always_inline)) uint64_t agent_prog_tsc_nsecs(
	const struct agent_prog *p)
{
	return p->start_ns + (uint64_t)(((unsigned __int128)(kp_cycles() -
							      p->start_tsc) *
					 p->tick_q32) >> 32);
}

/* Gives ap (a point of probe ap->prog_probe) the handlers of its probe's
 * fast form when the form and the point allow (agent_prog_fast.c):
 * whether it did. */
bool agent_prog_set_fast_handlers(struct agent_probe *ap);
/* The handler that runs a return probe's fast form at an exit site when
 * the form reads no register (agent_exit_handler()), or NULL. */
kprobe_pre_handler_t agent_prog_exit_handler(const struct agent_probe *ap);
/* 1 + the calling thread's shard of p's keyless aggregations, taken at
 * its first call in p's session (0: all taken). */
uint32_t agent_prog_thread_shard(const struct agent_prog *p);
/* Frees the states agent_prog_set_fast_handlers() gave the points. */
void agent_prog_free_points(struct agent_prog *p);

#endif
