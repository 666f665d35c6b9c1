/* The kprobe command-line tool: shared declarations. */
#ifndef KPROBE_CLI_H
#define KPROBE_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "proto.h"
#include "shm.h"
#include "spec.h"

/* Exit statuses (SPEC section 4); a command's own status passes through. */
#define EXIT_FAIL	1	/* any other failure */
#define EXIT_BAD	2	/* a bad probe, option, PID or usage */

/* The commands that start a session come first (up to CMD_RECORD). */
enum cli_cmd { CMD_TRACE, CMD_COUNT, CMD_LATENCY, CMD_WATCH, CMD_LOAD, CMD_RUN, CMD_RECORD,
	       CMD_LIST, CMD_ENABLE, CMD_DISABLE, CMD_OPTIMIZE, CMD_VARS, CMD_REPORT, CMD_REPLAY,
	       CMD_DUMP };
/* The commands that start a session: trace, count, latency, watch, load,
 * run, record. */
#define CMD_PROBES(c) ((c) <= CMD_RECORD)
/* The commands that read a recording: report, replay, dump. */
#define CMD_READS_DATA(c) ((c) >= CMD_REPORT)
#define CLI_MAX_OBJECTS 32
enum report_sort { SORT_TOTAL, SORT_SELF, SORT_CALLS };
enum out_format { FMT_TEXT, FMT_JSON, FMT_CHROME, FMT_FOLDED };

struct run_program;

struct cli_opts {
	enum cli_cmd cmd;
	enum kps_action action;		/* for trace, count, latency */
	struct probe_spec *specs;	/* KPROBE_MAX_SPECS entries */
	int nspecs;
	pid_t pid;			/* -p, 0: none */
	char **command;			/* after --, NULL: none */
	const char *outfile;		/* -o, NULL: stdout */
	enum out_format format;
	double duration;		/* -d, 0: until the end */
	bool follow;			/* -f */
	bool zeros;			/* -z: count shows probes with no hits */
	bool optimize_on;		/* optimize on|off */
	bool no_inlines;		/* --no-inlines: not the inlined copies */
	const char *list_object;	/* list OBJECT [GLOB]: functions, not probes;
					 * vars PROBE OBJECT */
	const char *list_glob;
	unsigned int watch_len;		/* watch: the variable's length, 0: not watch */
	bool watch_rw;			/* watch --rw */
	/* trace/watch --stack[=N], count --stacks[=N]: frames kept per hit
	 * (0: no stacks); stack_count: count per distinct stack; lines:
	 * FILE:LINE after each frame (--lines) */
	unsigned int stack_depth;
	bool stack_count;
	bool lines;
	const char *module;		/* load: the module's absolute path */
	char **modargs;			/* its ARGs (argv entries) */
	int nmodargs;
	/* run: the program, its name in messages ("stdin" for -e, as
	 * bpftrace says), positional parameters, map size, and what
	 * compiling it made (run.c) */
	const char *prog_text;
	const char *prog_file;
	char **params;
	int nparams;
	uint32_t map_keys;		/* --map-keys, 0: the default */
	bool unsafe;			/* --unsafe: run allows system() */
	struct run_program *prog;
	bool drop;			/* --drop: a full ring drops, counted */
	/* record: -F OBJECT... (every function of each), the data directory
	 * (-o, default kprobe.data); report, replay, dump: the directory read */
	const char *objects[CLI_MAX_OBJECTS];
	int nobjects;
	const char *data_dir;
	enum report_sort sort;		/* report --sort */
	bool format_given;
};

/* Prints "kprobe: MESSAGE" on stderr and exits with status. */
void cli_die(int status, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
/* Prints "kprobe: MESSAGE" on stderr. */
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* options.c: parses argv; exits with EXIT_BAD and one line on any error. */
void cli_parse(int argc, char **argv, struct cli_opts *o);
void cli_usage(FILE *f);

/* Checks that pid names a live process (else exits EXIT_BAD). */
void cli_check_pid(pid_t pid);

/* The agent shared object to load into targets. */
int cli_agent_path(char *buf, size_t len);

/* Monotonic clock in ns, the clock events are stamped with. */
unsigned long long cli_now_ns(void);

#endif
