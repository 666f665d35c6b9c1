/* Reading the session's rings: the consumer side of the transport. */
#ifndef KPROBE_CONSUMER_H
#define KPROBE_CONSUMER_H

#include <stddef.h>
#include <stdint.h>

#include "cli.h"
#include "output.h"

struct consumer {
	const struct kps_map *map;
	const struct cli_opts *opts;
	unsigned char *buf;		/* copies of this round's events */
	size_t len, cap;
	struct trace_event *evs;
	size_t nevs, evcap;
	double ns_per_tick;		/* TSC time stamps: current estimate */
	struct probe_spec **desc_specs;	/* per descriptor whose agent chose the
					 * arguments (a tracepoint's own) */
};

/* Moves every complete event out of the rings and writes them, in time
 * order, to out.  Returns the number of events written. */
size_t consumer_drain(struct consumer *c, struct output *out);
void consumer_free(struct consumer *c);

/* Events dropped because a ring was full or a thread had none. */
uint64_t consumer_lost(const struct kps_map *map);

#endif
