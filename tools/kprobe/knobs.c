/* `kprobe list|enable|disable|optimize -p PID`: requests to the agent of a
 * live process.  A process without an agent has nothing probed: its list
 * is empty, and there is no knob to turn. */
#include "knobs.h"

#include <errno.h>
#include <string.h>

#include "ctl_client.h"

int knobs_run(const struct cli_opts *o)
{
	struct ctl c;
	char status[512];
	const char *req;
	int rc = ctl_connect(&c, o->pid);

	if (rc == -ENOENT || rc == -ECONNREFUSED) {
		if (o->cmd == CMD_LIST)
			return 0;
		cli_die(EXIT_FAIL, "no kprobe agent in process %d (nothing is probed there)",
			(int)o->pid);
	}
	if (rc)
		cli_die(EXIT_FAIL, "cannot reach the kprobe agent of process %d: %s", (int)o->pid,
			strerror(-rc));
	switch (o->cmd) {
	case CMD_LIST:
		req = "LIST\n";
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
	rc = ctl_request(&c, req, stdout, status, sizeof(status), 10000, NULL, NULL);
	ctl_close(&c);
	if (rc < 0)
		cli_die(EXIT_FAIL, "the agent of process %d does not answer: %s", (int)o->pid,
			strerror(-rc));
	if (rc > 0)
		cli_die(EXIT_FAIL, "%s", status);
	fflush(stdout);
	return 0;
}
