/* A watch over a test that may hang (tests/arm64): if the test still runs
 * after a while, a watchdog thread prints every thread's state (state,
 * wchan, system call, kernel stack, and each running thread's pc, x30 and
 * sp from its own signal handler) and a watchdog process prints the same
 * from outside, with the registers through ptrace (for a test process
 * stopped whole, which takes its watchdog thread with it).  So a hang says
 * where it hangs, before the runner's limit ends the test. */
#ifndef KP_TESTS_ARM64_HANG_WATCH_H
#define KP_TESTS_ARM64_HANG_WATCH_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct hang_watch {
	const char *name;	/* in the dumps' first line */
	int after;		/* seconds before they dump */
	/* the test's own words for the first line (where it is), or NULL */
	void (*where)(char *buf, size_t len);
	pthread_t dog;
	pid_t outside;
	bool done;
};

/* Starts both watchdogs: before the test starts threads of its own (the
 * process is forked).  after: seconds, or A64_HANG_DUMP from the
 * environment when set (to see the dumps of a run that does not hang). */
void hang_watch_start(struct hang_watch *w, const char *name, int after,
		      void (*where)(char *buf, size_t len));
/* The test is done: neither dumps. */
void hang_watch_stop(struct hang_watch *w);

#endif
