/* A fake kprobe agent for the CLI tests: a process that serves its own
 * control socket (/tmp/.kprobe-EUID/PID.sock) as the agent would, so the
 * tool's checks accept it, but misbehaves as MODE says:
 *   silent    answers HELLO, never answers ARM (nor anything after it)
 *   escapes   answers LIST with data lines full of terminal escapes and
 *             every other request with an ERR message full of them
 *   nodisarm  arms (answers ARM once END arrives), never answers DISARM
 * It prints "ready" once it listens. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

static const char *mode;

static void say(int fd, const char *s)
{
	if (write(fd, s, strlen(s)) < 0)
		perror("write");
}

static void answer(int fd, const char *line, int *silent)
{
	static int arming;
	char buf[256];

	if (*silent)
		return;
	if (arming) {
		arming = strcmp(line, "END") != 0;
		if (!arming)
			say(fd, "OK\n");
		return;
	}
	if (!strcmp(line, "HELLO")) {
		snprintf(buf, sizeof(buf), "OK pid=%d tid=%ld armed=0\n", (int)getpid(),
			 (long)syscall(SYS_gettid));
		say(fd, buf);
	} else if (!strcmp(mode, "silent")) {
		*silent = !strcmp(line, "ARM");
	} else if (!strcmp(mode, "nodisarm")) {
		arming = !strcmp(line, "ARM");
		*silent = !strcmp(line, "DISARM");
	} else if (!strcmp(line, "LIST")) {
		say(fd, "= 0000000000401000  k  \x1b]0;owned\x07main+0x0\n"
			"= \x1b[2J\x1b[31mred\x9b" "1m\n"
			"OK\n");
	} else {
		say(fd, "ERR 1 \x1b[31mthe agent\rsays\x07 no\n");
	}
}

static void serve(int fd)
{
	char buf[8192];
	size_t len = 0;
	int silent = 0;

	for (;;) {
		ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
		char *nl;

		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
		while ((nl = strchr(buf, '\n'))) {
			*nl = '\0';
			answer(fd, buf, &silent);
			len -= (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, len + 1);
		}
		if (len == sizeof(buf) - 1)
			len = 0;
	}
	close(fd);
}

int main(int argc, char **argv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char dir[64];
	int fd;

	if (argc < 2 || (strcmp(argv[1], "silent") && strcmp(argv[1], "escapes") &&
			  strcmp(argv[1], "nodisarm"))) {
		fprintf(stderr, "usage: fake_agent silent|escapes|nodisarm\n");
		return 2;
	}
	mode = argv[1];
	snprintf(dir, sizeof(dir), "/tmp/.kprobe-%u", (unsigned int)geteuid());
	if (mkdir(dir, 0700) && errno != EEXIST) {
		perror(dir);
		return 1;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%d.sock", dir, (int)getpid());
	unlink(sa.sun_path);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 4)) {
		perror(sa.sun_path);
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		int c = accept(fd, NULL, NULL);

		if (c >= 0)
			serve(c);
	}
}
