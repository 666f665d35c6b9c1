/* Shared by the suites that run the kprobe tool as a command (test_cli,
 * test_run, test_cli_watch, test_cli_stack): paths in the build directory,
 * a command line run with its output captured, temporary files. */
#ifndef KP_TESTS_CLI_HELPERS_H
#define KP_TESTS_CLI_HELPERS_H

#include <stdbool.h>
#include <stddef.h>

/* KP_TEST_SLOWDOWN also multiplies the tool's -d durations in cli_run(). */
#include "slowdown.h"

/* What a command did. */
struct run {
	int status;		/* exit status, or 128 + signal */
	char out[1 << 17];	/* its standard output, NUL-terminated */
	char err[1 << 17];	/* its standard error, NUL-terminated */
};

/* The build directory this test runs from (build/tests/test_x: build),
 * without a trailing slash. */
const char *cli_build_dir(void);

/* path = the build directory + "/" + rel. */
void cli_build_path(char *path, size_t len, const char *rel);

/* How long cli_run() waits for more output before it stops reading (it
 * still waits for the command, which a write then kills with SIGPIPE):
 * 15 s unless a suite's init says otherwise, times KP_TEST_SLOWDOWN. */
extern int cli_run_quiet_ms;
/* Whether output beyond a buffer fails the test; otherwise (the default)
 * reading goes on at the buffer's start, for tests that look at small
 * outputs of commands that may print a lot. */
extern bool cli_run_output_must_fit;

/* Runs a shell command line (a printf format), capturing its standard
 * output and error into r; returns r->status.  Each " -d SECONDS" (the
 * tool's duration, which also bounds its arming) is multiplied by
 * KP_TEST_SLOWDOWN. */
int cli_run(struct run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A new empty file /tmp/TAG-XXXXXX: its name into path. */
void cli_tmpfile(char *path, size_t len, const char *tag);

/* The file's content into buf (at most cap - 1 bytes, NUL-terminated; ""
 * when it cannot be read); returns its length. */
size_t cli_read_file(const char *path, char *buf, size_t cap);

#endif
