/* kprobe record: the session's events to per-thread files (record.c). */
#ifndef KPROBE_RECORD_H
#define KPROBE_RECORD_H

#include <stdbool.h>

#include "cli.h"
#include "session.h"

/* -F OBJECT (main: the program): appends the specs of every function's
 * entry and return; exits on a bad object. */
void record_expand_objects(struct cli_opts *o);
/* Creates the data directory (clearing an earlier recording in it). */
void record_open(struct session *s);
/* Moves what the rings hold to the files; true if there was any. */
bool record_drain(struct session *s);
/* Drains the rest and writes the descriptors and the time base. */
void record_finish(struct session *s);

#endif
