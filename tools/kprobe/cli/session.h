/* One probing session of the CLI: its shared memory, output and the loop
 * that moves events from the target to the output. */
#ifndef KPROBE_SESSION_H
#define KPROBE_SESSION_H

#include <signal.h>
#include <stdbool.h>

#include "cli.h"
#include "consumer.h"
#include "ctl_client.h"
#include "output.h"

struct session {
	struct cli_opts *opts;
	int shm_fd;			/* the session memory until handed over */
	char shm_ref[KPS_NAME_MAX];	/* how the config names it to the agent */
	struct kps_map map;
	size_t map_size;		/* bytes of the session memory */
	struct output out;
	struct consumer cons;
	struct ctl ctl;
	int out_errno;			/* why writing the output failed */
	pid_t target;
	/* Ring-full losses when the tool stopped reading (the rest came after
	 * the end of probing: -d, a signal, detaching), and whether it did. */
	uint64_t lost_at_stop;
	bool stopped_reading;
	/* the registration progress line */
	bool progress_shown, progress_newline;
	uint64_t progress_done;
	unsigned long long progress_at;
};

/* Set by SIGINT, SIGTERM, SIGHUP (the signal number), or to SIGPIPE when
 * the output cannot be written any more. */
extern volatile sig_atomic_t session_stop_signal;
/* How many of those signals arrived: a wait that began after the first
 * (the tool cleaning up) ends at the next. */
extern volatile sig_atomic_t session_stop_count;

/* Creates the shared memory (an anonymous, sealed memfd) and opens the
 * output; exits on failure. */
void session_open(struct session *s, struct cli_opts *o);
/* A launched command inherits the memory: returns the descriptor to keep
 * open across exec (the config names it); close it once forked. */
int session_inherit_fd(struct session *s);
/* An agent reached over its control socket gets the memory with the ARM
 * request: returns the descriptor to pass (the config says so). */
int session_pass_fd(struct session *s);
/* The agent holds the memory now: drops our descriptor (we keep the
 * mapping). */
void session_handed_over(struct session *s);
/* The agent's failure message from the session memory, terminated and
 * printable, and its exit status class (EXIT_BAD or EXIT_FAIL). */
int session_agent_error(const struct session *s, char *buf, size_t len);
/* Removes leftovers of earlier versions of the tool that were killed:
 * /dev/shm/kprobe-PID-* objects of ours whose PID is gone. */
void session_clean_stale(const char *dir);
/* Closes the output and frees the session (the target may keep its
 * mapping of the memory): 0, or -errno (reported on stderr) when the
 * results could not all be written. */
int session_close(struct session *s);
/* The session config for the agent (malloc'd). */
char *session_config(const struct session *s);
/* Catches the stop signals (SIGINT, SIGTERM, SIGHUP). */
void session_catch_signals(void);
/* Shows "registering probes N/M" on stderr once registration has taken
 * longer than a second (call repeatedly while waiting). */
void session_progress(struct session *s, unsigned long long since_ns);
void session_progress_done(struct session *s);
/* Moves the events that arrived to the output (trace); true if there
 * were any. */
bool session_pump(struct session *s);
/* How long to wait before the next session_pump(), in ms: none after a
 * busy one; 1 when a target thread may be waiting for ring space (trace,
 * record, run), 10 otherwise. */
int session_pump_delay_ms(const struct session *s, bool busy);
/* The number of rings a session has: KPROBE_RINGS from the environment
 * (1..KPS_RINGS), else KPS_RINGS; exits on a bad value. */
uint32_t session_ring_count(void);
/* The target's threads stop waiting for ring space (the CLI is about to
 * stop reading): full rings drop from now on. */
void session_stop_reading(struct session *s);
/* Ring-full losses while the tool was reading, and those after it stopped
 * (events that came after the end of probing, not kept). */
void session_split_losses(const struct session *s, uint64_t *during, uint64_t *after);
/* Writes what the run ends with: the trace's end, the counts or the
 * latency histogram. */
void session_report(struct session *s);
/* A session that failed to start: what a module's init printed before it
 * failed (its reason, often), shown before the error. */
void session_show_failed_lines(struct session *s);
/* Prints the agent's note about glob matches that could not be probed. */
void session_note_skipped(struct session *s);

#endif
