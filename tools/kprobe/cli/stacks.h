/* Stacks on the tool's side: the frames of trace --stack and watch --stack
 * events, and count --stacks' per-stack totals (text, folded), named as
 * "func+0xOFF", "[object]" when not the main executable, C++ names
 * demangled, "FILE:LINE" from DWARF with --lines. */
#ifndef KPROBE_STACKS_H
#define KPROBE_STACKS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "output.h"

struct session;

/* The target's objects are known once it is armed: reads its mappings
 * (while it lives), and again now and then (objects it loads later). */
void stacks_attached(struct session *s);
void stacks_pump(struct session *s);

/* A frame as text: innermost is the hit's own address, the others return
 * addresses (named by the call before them). */
void stacks_frame(uint64_t ip, bool innermost, bool with_offset, char *out, size_t len);

/* An event's stack: indented lines under it (text), or a JSON array. */
void stacks_print_text(FILE *f, const struct trace_event *ev);
void stacks_print_json(FILE *f, const struct trace_event *ev);

/* count --stacks: the per-stack totals of the target's table, in the
 * output's format (text: bpftrace's map style; folded: one line per
 * stack; JSON: see stacks_before_counts).  The hits not counted by stack
 * are reported on stderr. */
void stacks_report_counts(struct session *s);
/* Before the count report: with --format json, the stacks become the
 * count object's "stacks" member. */
void stacks_before_counts(struct session *s);

void stacks_free(void);

#endif
