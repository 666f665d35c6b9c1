/* kprobe: count, trace and time functions of any dynamically linked
 * program, started by it or already running (SPEC section 4). */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "attach.h"
#include "cli.h"
#include "cxx_names.h"
#include "dwarf_vars.h"
#include "usdt.h"
#include "escape.h"
#include "knobs.h"
#include "launch.h"
#include "list_functions.h"
#include "run.h"
#include "recdata.h"
#include "record.h"
#include "session.h"

#ifndef KPROBE_AGENT_INSTALL_DIR
#define KPROBE_AGENT_INSTALL_DIR "/usr/local/lib/kprobe"
#endif
#define AGENT_NAME "libkprobe-agent.so"

/* One line on stderr: whatever the message quotes (the user's input, a
 * target's names, an agent's reply) cannot break the line or reach the
 * terminal as a control sequence. */
static void say(const char *fmt, va_list ap)
{
	char msg[2048], safe[4096];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	text_escape(safe, sizeof(safe), msg);
	fflush(stdout);
	fprintf(stderr, "kprobe: %s\n", safe);
	fflush(stderr);
}

void cli_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say(fmt, ap);
	va_end(ap);
}

void cli_die(int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say(fmt, ap);
	va_end(ap);
	exit(status);
}

unsigned long long cli_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

void cli_check_pid(pid_t pid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (stat(path, &st))
		cli_die(EXIT_BAD, "no process with PID %d", (int)pid);
	if (pid == getpid())
		cli_die(EXIT_BAD, "PID %d is kprobe itself", (int)pid);
}

/* Beside the kprobe binary (the build tree), else where `make install`
 * puts it. */
int cli_agent_path(char *buf, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n > 0) {
		self[n] = '\0';
		slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			snprintf(buf, len, "%s/%s", self, AGENT_NAME);
			if (access(buf, R_OK) == 0)
				return 0;
			snprintf(buf, len, "%s/../lib/kprobe/%s", self, AGENT_NAME);
			if (access(buf, R_OK) == 0)
				return 0;
		}
	}
	snprintf(buf, len, "%s/%s", KPROBE_AGENT_INSTALL_DIR, AGENT_NAME);
	return access(buf, R_OK) ? -ENOENT : 0;
}

int main(int argc, char **argv)
{
	static struct probe_spec specs[KPROBE_MAX_SPECS];
	struct cli_opts o = { .specs = specs };
	struct session s;
	char agent[PATH_MAX];

	cli_parse(argc, argv, &o);
	if (o.cmd == CMD_RUN)
		run_compile(&o);
	if (o.pid)
		cli_check_pid(o.pid);
	if (o.cmd == CMD_VARS)
		return dwarf_vars_list(&o);
	if (o.cmd <= CMD_LATENCY || o.cmd == CMD_RECORD) {
		/* Reading debug information takes a moment: a stop signal
		 * then ends the session cleanly as it would later.  record
		 * takes the same PROBE forms (C++ names, FILE.c:LINE, usdt:)
		 * as count and trace. */
		session_catch_signals();
		usdt_resolve(&o);
		cxx_names_resolve(&o);
		dwarf_inlines_resolve(&o);
		dwarf_vars_resolve(&o);
		dwarf_retval_types(&o);
	}
	if (cli_agent_path(agent, sizeof(agent)) &&
	    CMD_PROBES(o.cmd))
		cli_die(EXIT_FAIL, "cannot find %s beside kprobe or in %s", AGENT_NAME,
			KPROBE_AGENT_INSTALL_DIR);
	if (o.cmd == CMD_LIST && o.list_object)
		return list_functions_run(&o);
	if (CMD_READS_DATA(o.cmd))
		return recdata_run(&o);
	if (!CMD_PROBES(o.cmd))
		return knobs_run(&o);
	if (o.cmd == CMD_RECORD)
		record_expand_objects(&o);
	session_catch_signals();
	session_open(&s, &o);
	if (o.command)
		return launch_run(&s, agent);
	return attach_run(&s, agent);
}
