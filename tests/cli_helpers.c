/* Running the kprobe tool from the CLI suites: see cli_helpers.h. */
#include "cli_helpers.h"

#include <criterion/criterion.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int cli_run_quiet_ms = 15000;
bool cli_run_output_must_fit;

const char *cli_build_dir(void)
{
	static char dir[PATH_MAX];

	if (!dir[0]) {
		ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);

		cr_assert(n > 0);
		dir[n] = '\0';
		for (int i = 0; i < 2; i++) {	/* build/tests/test_x -> build */
			char *slash = strrchr(dir, '/');

			cr_assert(slash, "%s is not in a build directory", dir);
			*slash = '\0';
		}
	}
	return dir;
}

void cli_build_path(char *path, size_t len, const char *rel)
{
	int n = snprintf(path, len, "%s/%s", cli_build_dir(), rel);

	cr_assert(n > 0 && (size_t)n < len, "path too long: %s/%s", cli_build_dir(), rel);
}

/* Reads what fd has into buf; open goes false at the end. */
static void drain(int fd, char *buf, size_t cap, size_t *len, bool *open)
{
	ssize_t n = read(fd, buf + *len, cap - 1 - *len);

	if (n <= 0) {
		*open = false;
		return;
	}
	*len += (size_t)n;
	buf[*len] = '\0';
	if (*len == cap - 1) {
		cr_assert(!cli_run_output_must_fit, "output too long for the test");
		*len = 0;
	}
}

/* Every " -d SECONDS" (a positive number) of cmd multiplied by
 * KP_TEST_SLOWDOWN: the tool's duration bounds the session and its
 * arming, which take that much longer. */
static void scale_durations(char *cmd, size_t cap)
{
	char out[8192], *p = cmd;
	size_t o = 0;

	if (KP_TEST_SLOWDOWN == 1)
		return;
	while (*p && o < sizeof(out) - 32) {
		char *end;
		double d;

		if (!strncmp(p, " -d ", 4) && (p[4] == '.' || (p[4] >= '0' && p[4] <= '9'))) {
			d = strtod(p + 4, &end);
			o += (size_t)snprintf(out + o, sizeof(out) - o, " -d %g",
					      d * KP_TEST_SLOWDOWN);
			p = end;
			continue;
		}
		out[o++] = *p++;
	}
	cr_assert(!*p && o < cap, "command too long: %s", cmd);
	out[o] = '\0';
	memcpy(cmd, out, o + 1);
}

int cli_run(struct run *r, const char *fmt, ...)
{
	char cmd[8192];
	int out[2], err[2], st;
	size_t lo = 0, le = 0;
	bool oo = true, eo = true;
	va_list ap;
	pid_t pid;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	scale_durations(cmd, sizeof(cmd));
	r->out[0] = r->err[0] = '\0';
	cr_assert(!pipe(out) && !pipe(err));
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		dup2(out[1], 1);
		dup2(err[1], 2);
		close(out[0]);
		close(err[0]);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	while (oo || eo) {
		struct pollfd p[2] = { { out[0], POLLIN, 0 }, { err[0], POLLIN, 0 } };

		if (poll(p, 2, cli_run_quiet_ms * KP_TEST_SLOWDOWN) <= 0)
			break;
		if (p[0].revents)
			drain(out[0], r->out, sizeof(r->out), &lo, &oo);
		if (p[1].revents)
			drain(err[0], r->err, sizeof(r->err), &le, &eo);
	}
	close(out[0]);
	close(err[0]);
	cr_assert(waitpid(pid, &st, 0) == pid);
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return r->status;
}

void cli_tmpfile(char *path, size_t len, const char *tag)
{
	int fd;

	cr_assert(snprintf(path, len, "/tmp/%s-XXXXXX", tag) < (int)len);
	fd = mkstemp(path);
	cr_assert(fd >= 0, "mkstemp %s", path);
	close(fd);
}

size_t cli_read_file(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, cap - 1, f) : 0;

	buf[n] = '\0';
	if (f)
		fclose(f);
	return n;
}
