/* Writing results: trace events as they come, count and latency summaries
 * at the end, in text, JSON (SPEC section 4) or Chrome Trace Event format. */
#ifndef KPROBE_OUTPUT_H
#define KPROBE_OUTPUT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "cli.h"

/* One decoded trace event. */
struct trace_event {
	uint64_t time_ns;
	uint64_t entry_ns;		/* return events: when the function was entered */
	pid_t pid, tid;
	int type;			/* EV_ENTRY or EV_RETURN */
	uint32_t desc_id;
	const struct kps_desc *desc;
	const struct probe_spec *spec;
	uint64_t vals[SPEC_MAX_ARGS];
	const unsigned char *str[SPEC_MAX_ARGS];	/* :string args, NULL: fault */
	uint16_t strlen[SPEC_MAX_ARGS];
	const uint64_t *stack;		/* --stack: nstack frames, innermost first */
	uint32_t nstack;
	const unsigned char *text;	/* EV_TEXT: a module's line (no desc);
					 * EV_PROG: the event's data */
	uint32_t textlen;
	uint16_t prog_type;		/* EV_PROG: enum lang_event */
	uint32_t prog_id;		/* EV_PROG: format or map number */
	uint32_t faults;		/* bit i: argument i could not be read */
};

struct output {
	FILE *f;
	/* run: what handles a program's events (run.c) */
	void (*prog_event)(void *arg, const struct trace_event *ev);
	void *prog_arg;
	enum out_format format;
	bool zeros;			/* count text: also the probes with no hits */
	uint64_t t0;			/* session start, for relative text times */
	unsigned long nevents;
	/* chrome: entry descs paired with a return desc of the same function */
	const struct kps_map *map;
	/* count JSON: more members of the object (",\"NAME\":..."), or NULL */
	void (*counts_json_more)(void *arg, FILE *f);
	void *counts_json_more_arg;
};

void output_begin(struct output *o);
void output_event(struct output *o, const struct trace_event *ev);
/* Ends the trace (closes the chrome array). */
void output_end_trace(struct output *o);

/* Totals gathered from the session memory at the end. */
struct count_row {
	const struct kps_desc *desc;
	const char *inlined_of;		/* an inlined copy of this function, or NULL */
	uint64_t hits, missed;
};

void output_counts(struct output *o, const struct count_row *rows, int n, uint64_t lost);
void output_latency(struct output *o, const char *function, const uint64_t *buckets,
		    uint64_t lost);

/* Writes s as a JSON string (with quotes). */
void json_string(FILE *f, const char *s, size_t len);
/* Argument i of ev as text (trace's format) or as a JSON value. */
void output_value_text(FILE *f, const struct trace_event *ev, int i);
void output_value_json(FILE *f, const struct trace_event *ev, int i);

#endif
