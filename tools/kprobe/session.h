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
	char shm_name[KPS_NAME_MAX];
	struct kps_map map;
	struct output out;
	struct consumer cons;
	struct ctl ctl;
	pid_t target;
	/* the registration progress line */
	bool progress_shown, progress_newline;
	uint64_t progress_done;
	unsigned long long progress_at;
};

/* Set by SIGINT, SIGTERM, SIGHUP (the signal number), or to SIGPIPE when
 * the output cannot be written any more. */
extern volatile sig_atomic_t session_stop_signal;

/* Creates the shared memory and opens the output; exits on failure. */
void session_open(struct session *s, struct cli_opts *o);
/* Makes the shared memory the target's when it runs as another user (we
 * are root): its agent must map it. */
void session_share_with(struct session *s, pid_t pid);
/* Removes the shared memory (the target may keep its mapping). */
void session_close(struct session *s);
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
/* Writes what the run ends with: the trace's end, the counts or the
 * latency histogram. */
void session_report(struct session *s);
/* Prints the agent's note about glob matches that could not be probed. */
void session_note_skipped(struct session *s);

#endif
