/* kprobe report, replay and dump: reading what kprobe record wrote
 * (recdata.c). */
#ifndef KPROBE_RECDATA_H
#define KPROBE_RECDATA_H

#include "cli.h"

/* Runs report, replay or dump on o->data_dir; exits on failure. */
int recdata_run(const struct cli_opts *o);

#endif
