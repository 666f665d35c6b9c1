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

/* Adds a probe for each inlined copy (DWARF) of the functions the
 * probes without variables name, in their object or the main executable,
 * unless --no-inlines.  Objects without DWARF add nothing. */
void dwarf_inlines_resolve(struct cli_opts *o);

/* kprobe vars: prints the variables at each point of o's probes; returns
 * the exit status. */
int dwarf_vars_list(struct cli_opts *o);

#endif
