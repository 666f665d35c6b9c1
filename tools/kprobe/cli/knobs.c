/* `kprobe list|enable|disable|optimize -p PID`: requests to the agent of a
 * live process.  A process without an agent has nothing probed: its list
 * is empty, and there is no knob to turn. */
#include "knobs.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attach.h"
#include "ctl_client.h"

#define KNOB_TIMEOUT_MS 10000

/* The probe lines as the agent sent them (the Kprobes list format),
 * after a header line when probing is globally disabled: then none of them
 * fires, whatever its own state says. */
static void print_list(const struct cli_opts *o, const char *lines, const char *status)
{
	if (strstr(status, "enabled=0"))
		printf("# probing is disabled in process %d: no probe fires "
		       "(kprobe enable -p %d)\n", (int)o->pid, (int)o->pid);
	fputs(lines ? lines : "", stdout);
}

/* The state of pid's agent control thread ("kprobe-agent") as /proc shows
 * it (R, S, T, t, ...) and its tracer; 0 when there is no such thread. */
static char agent_thread_state(pid_t pid, pid_t *tracer)
{
	char path[96], line[128], state = 0;
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	while (d && !state && (de = readdir(d))) {
		FILE *f;
		bool agent;

		snprintf(path, sizeof(path), "/proc/%d/task/%.32s/comm", (int)pid, de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		agent = fgets(line, sizeof(line), f) && !strcmp(line, "kprobe-agent\n");
		fclose(f);
		if (!agent)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.32s/status", (int)pid, de->d_name);
		f = fopen(path, "r");
		while (f && fgets(line, sizeof(line), f)) {
			if (!strncmp(line, "State:", 6))
				sscanf(line + 6, " %c", &state);
			else if (!strncmp(line, "TracerPid:", 10))
				*tracer = (pid_t)atoi(line + 10);
		}
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return state;
}

/* A stopped process (group stop) keeps its agent stopped too: run the
 * agent's threads (the program's stay stopped), rather than wait for an
 * answer in vain; an agent a tracer holds cannot answer either, and that
 * is said at once.  Whether the agent's threads were taken. */
static bool run_agent_if_stopped(pid_t pid)
{
	pid_t tracer = 0;
	char why[128], state = agent_thread_state(pid, &tracer);

	if (state == 't')
		cli_die(EXIT_FAIL, "the kprobe agent of process %d is held by a tracer (process "
			"%d): it cannot answer until the tracer lets it run", (int)pid, (int)tracer);
	if (state != 'T')
		return false;
	if (attach_run_stopped_agent(pid, why, sizeof(why)))
		cli_die(EXIT_FAIL, "process %d is stopped and its kprobe agent cannot be run to "
			"answer (%s): continue it first (kill -CONT %d)", (int)pid, why, (int)pid);
	return true;
}

int knobs_run(const struct cli_opts *o)
{
	struct ctl c;
	bool held;
	char status[512], *list = NULL;
	size_t list_len = 0;
	FILE *data = NULL;
	const char *req;
	int rc = ctl_connect(&c, o->pid);

	if (rc == -ENOENT || rc == -ECONNREFUSED) {
		if (o->cmd == CMD_LIST)
			return 0;
		cli_die(EXIT_FAIL, "no kprobe agent in process %d (nothing is probed there)",
			(int)o->pid);
	}
	if (rc && c.why[0])
		cli_die(EXIT_FAIL, "%s", c.why);
	if (rc)
		cli_die(EXIT_FAIL, "cannot reach the kprobe agent of process %d: %s", (int)o->pid,
			strerror(-rc));
	switch (o->cmd) {
	case CMD_LIST:
		req = "LIST\n";
		data = open_memstream(&list, &list_len);
		if (!data)
			cli_die(EXIT_FAIL, "out of memory");
		break;
	case CMD_ENABLE:
		req = "ENABLE\n";
		break;
	case CMD_DISABLE:
		req = "DISABLE\n";
		break;
	default:
		req = o->optimize_on ? "OPTIMIZE on\n" : "OPTIMIZE off\n";
		break;
	}
	held = run_agent_if_stopped(o->pid);
	/* -d bounds the wait as it bounds a session. */
	rc = ctl_request(&c, req, data, status, sizeof(status),
			 o->duration > 0 && o->duration < 1e6 ? (int)(o->duration * 1000) + 1 :
			 KNOB_TIMEOUT_MS, held ? attach_keep_agent_running : NULL, NULL);
	ctl_close(&c);
	if (held)
		attach_release_agent();
	if (data)
		fclose(data);
	if (rc < 0)
		cli_die(EXIT_FAIL, "the agent of process %d failed to answer: %s", (int)o->pid,
			status);
	if (rc > 0)
		cli_die(EXIT_FAIL, "%s", status);
	if (o->cmd == CMD_LIST)
		print_list(o, list, status);
	free(list);
	if (fflush(stdout) || ferror(stdout))
		cli_die(EXIT_FAIL, "cannot write the output: %s", strerror(errno));
	return 0;
}
