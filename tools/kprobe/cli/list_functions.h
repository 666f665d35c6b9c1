/* `kprobe list` of the functions probes can name, in a file or a process. */
#ifndef KPROBE_LIST_FUNCTIONS_H
#define KPROBE_LIST_FUNCTIONS_H

#include "cli.h"

/* Lists o->list_object / o->list_glob (of o->pid's objects when set);
 * returns kprobe's exit status, or exits with one line on an error. */
int list_functions_run(const struct cli_opts *o);

#endif
