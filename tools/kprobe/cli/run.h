/* `kprobe run`: a probe program (bpftrace's language) on the tool's side:
 * compiling it, placing its image and map region in the session memory,
 * handling its events (printf, print, clear, time, exit) as they arrive,
 * and printing its maps at the end, byte for byte as bpftrace 0.17 does
 * (text, or its -f json). */
#ifndef KPROBE_RUN_H
#define KPROBE_RUN_H

#include <stdbool.h>
#include <stddef.h>

#include "cli.h"

struct session;

/* Reads and compiles the program of o (-e or FILE.bt) into o->prog and
 * its uprobes into o->specs.  A program error is printed as bpftrace
 * prints it (file:line:col, the line, a marker under the place) and exits
 * with EXIT_BAD. */
void run_compile(struct cli_opts *o);

/* Bytes of the image and of the map region in the session memory. */
size_t run_image_len(const struct run_program *p);
size_t run_region_len(const struct run_program *p);

/* Puts the image and the initialised map region into the fresh session
 * memory and routes the program's events to run.c. */
void run_setup(struct session *s);

/* The probes are armed: "Attaching N probes..." as bpftrace says it. */
void run_attached(struct session *s);

/* Whether the program called exit(). */
bool run_exit_requested(const struct session *s);

/* The end (after END ran in the target): every map, in bpftrace's order
 * and format, and the events lost. */
void run_report(struct session *s);

#endif
