/* Reading the session's rings: the consumer side of the transport.
 *
 * Everything here is read from memory the target can write: positions are
 * read once and checked, the tail is our own, descriptors are used as
 * checked copies, and one drain does a bounded amount of work. */
#ifndef KPROBE_CONSUMER_H
#define KPROBE_CONSUMER_H

#include <stddef.h>
#include <stdint.h>

#include "cli.h"
#include "output.h"

/* Bytes of events one drain copies at most; the rest waits for the next. */
#define CONSUMER_DRAIN_MAX	(8u << 20)

struct consumer {
	const struct kps_map *map;
	const struct cli_opts *opts;
	/* What the CLI itself put in the header, never read back from it. */
	uint32_t nrings;		/* rings in use, <= KPS_RINGS */
	bool time_tsc;
	uint64_t tsc_base, ns_base;

	uint64_t *tails;		/* our own read position of each ring */
	uint32_t next_ring;		/* where the next drain starts */
	uint64_t corrupt;		/* rings found corrupt (skipped to head) */
	size_t work;			/* bytes of records the last drain read */
	unsigned char *buf;		/* copies of this round's events */
	size_t len, cap;
	struct trace_event *evs;
	size_t nevs, evcap;
	double ns_per_tick;		/* TSC time stamps: current estimate */
	struct kps_desc **descs;	/* checked copies, by descriptor id */
	struct probe_spec **desc_specs;	/* per descriptor whose agent chose the
					 * arguments (a tracepoint's own) */
	uint64_t name_wait_ns;		/* waited for agents' names of accessing
					 * instructions (watch), bounded */
};

/* Sets up c to read map, whose header the CLI filled with nrings rings and
 * this time base.  0 or -ENOMEM. */
int consumer_init(struct consumer *c, const struct kps_map *map, const struct cli_opts *opts,
		  uint32_t nrings, bool time_tsc, uint64_t tsc_base, uint64_t ns_base);
/* Moves the complete events out of the rings (at most CONSUMER_DRAIN_MAX
 * bytes) and writes them, in time order, to out.  Returns the number of
 * events written. */
size_t consumer_drain(struct consumer *c, struct output *out);
/* Drains until the rings are empty (the producers stopped), within a
 * bound: as many drains as all rings full take.  Returns the events. */
size_t consumer_drain_all(struct consumer *c, struct output *out);
void consumer_free(struct consumer *c);

/* Descriptor id as a checked copy (terminated, printable strings, a known
 * kind and a spec of the command line), or NULL when the target has not
 * published a valid one.  The copy lives as long as c. */
const struct kps_desc *consumer_desc(struct consumer *c, uint64_t id);
/* How many rings may hold anything: the agent's hint, bounded by ours. */
uint32_t consumer_rings_claimed(const struct consumer *c);

/* Gives back the rings of exited threads whose events are all read, for
 * threads still to come, once every ring has had an owner (before, a new
 * thread takes an unused one): a thread's first hit on the light path
 * takes a free ring, or waits for one when every ring is taken (the
 * general path's takes such a ring itself).  A dead owner writes nothing
 * more.  One system call per ring that is read to its end. */
void consumer_free_dead_rings(struct consumer *c);

/* Events dropped because a ring was full (the tool did not keep up). */
uint64_t consumer_lost_full(const struct consumer *c);
/* Events dropped because their thread found no free ring. */
uint64_t consumer_lost_ringless(const struct consumer *c);

/* Copies at most srclen bytes of a string the target wrote into dst
 * (always terminated), control characters replaced by '?'. */
void consumer_copy_text(char *dst, size_t dstlen, const char *src, size_t srclen);

#endif
