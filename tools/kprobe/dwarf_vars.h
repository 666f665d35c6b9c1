/* Program variables by name (DWARF), resolved by the tool into fetch plans
 * the agent runs on the hit path, and `kprobe vars`. */
#ifndef KPROBE_DWARF_VARS_H
#define KPROBE_DWARF_VARS_H

#include <stddef.h>

struct cli_opts;

/* Replaces every probe of o whose ARGs name program variables by one probe
 * per resolved point ("OBJECT:0xVADDR" with fetch plans, appended to
 * o->specs; the original slot keeps the first).  Exits with EXIT_BAD and
 * one line for an unknown variable, a field of a non-struct and the like. */
void dwarf_vars_resolve(struct cli_opts *o);

/* kprobe vars: prints the variables at each point of o's probes; returns
 * the exit status. */
int dwarf_vars_list(struct cli_opts *o);

#endif
