/* list, enable, disable and optimize on a live process's agent. */
#ifndef KPROBE_KNOBS_H
#define KPROBE_KNOBS_H

#include "cli.h"

/* Runs o->cmd (CMD_LIST ... CMD_OPTIMIZE); returns kprobe's exit status. */
int knobs_run(const struct cli_opts *o);

#endif
