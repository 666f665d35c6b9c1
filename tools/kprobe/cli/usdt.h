/* SystemTap SDT probes (USDT): the .note.stapsdt notes of an ELF object,
 * their operands compiled into fetch plans, and usdt: PROBEs resolved into
 * OBJECT:0xADDRESS%sem=0xS probes the agent arms as it arms any address. */
#ifndef KPROBE_USDT_H
#define KPROBE_USDT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "spec.h"

struct cli_opts;

#define USDT_MAX_ARGS 12

struct usdt_probe {
	char provider[64];
	char name[64];
	uint64_t pc;		/* link-time address of the probe's nop */
	uint64_t semaphore;	/* link-time address of its semaphore, 0: none */
	char args[256];		/* the operand specs, "8@%rdi -4@-20(%rbp)" */
	uint16_t machine;	/* the object's e_machine: which syntax args use */
};

/* Calls fn for each SDT probe of the object at path (addresses adjusted
 * for prelinking through .stapsdt.base); stops when fn returns non-zero
 * and returns that.  0, or -errno when the file cannot be read. */
int usdt_foreach(const char *path, int (*fn)(const struct usdt_probe *p, void *arg), void *arg);

/* The objects a probe that names none is looked for in: the main
 * executable (the command's, or of -p PID), then the libraries it needs
 * (-- COMMAND) or every object mapped (-p PID); stores at most max paths
 * and returns how many.  Exits with one line when the executable cannot
 * be found. */
#define MAX_CANDIDATE_OBJECTS 64
int usdt_candidate_objects(const struct cli_opts *o, const struct probe_spec *s,
			   char (*paths)[PATH_MAX], int max);

/* How many operands the probe has. */
int usdt_nargs(const struct usdt_probe *p);

/* Compiles operand index of p (in the object at path, for rip-relative
 * symbols) into a's fetch plan and, unless a->typed, its type from the
 * operand's size and sign.  0, or -EINVAL with one line in err. */
int usdt_arg_plan(const char *path, const struct usdt_probe *p, int index, struct spec_arg *a,
		  char *err, size_t errlen);

/* One AArch64 operand (what follows SIZE@: x3, w1, sp, 7, [sp, 28],
 * [x4, -8], [x0, #:lo12:SYMBOL] with SYMBOL looked up in the object at
 * path) into a's fetch plan, loads of size bytes; 0 or -EINVAL.
 * (tools/kprobe/arch/arm64/usdt_operand.c, built on every host.) */
int usdt_a64_operand(const char *path, const char *op, unsigned int size, struct spec_arg *a);

/* The sites of the usdt: spec s: one OBJECT:0xADDRESS%sem= spec per
 * matching SDT probe, in the object s names, else in the first of the
 * main executable and the libraries it loads that has any, written to out
 * (at most max), with s's ARGs or, when all_args, every operand as
 * arg0.. (fetch plans).  Returns how many; exits with EXIT_BAD and one
 * line when none matches or an operand cannot be read. */
int usdt_sites(const struct cli_opts *o, const struct probe_spec *s, bool all_args,
	       struct probe_spec *out, int max);

/* The fewest operands among the sites usdt_sites() would find for the
 * usdt: spec s, into *nargs: 0, or -1 when none matches (usdt_sites()
 * then says so). */
int usdt_operand_count(const struct cli_opts *o, const struct probe_spec *s, int *nargs);

/* Replaces each usdt: probe of o by one OBJECT:0xADDRESS probe per
 * matching SDT probe, in the object it names, else in the main executable
 * and the libraries it loads; exits with EXIT_BAD and one line when none
 * matches or an operand cannot be read. */
void usdt_resolve(struct cli_opts *o);

/* kprobe vars usdt:...: prints each matching SDT probe and its operands
 * (arg0.., type, operand spec); returns the exit status. */
int usdt_vars(const struct cli_opts *o, const struct probe_spec *s);

/* Prints the SDT probes of the object at path, one "usdt:OBJ:PROV:NAME"
 * line each with its operands; returns how many. */
int usdt_list(const char *path, FILE *f);

#endif
