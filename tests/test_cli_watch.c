/* End-to-end tests of kprobe watch on tests/cli/cli_watch: every access
 * counted and attributed to its instruction, launched and attached, with
 * old and new values; bad input refused with one line and status 2. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_helpers.h"

/* The accessing instructions of tests/cli/cli_watch.c. */
#if defined(__x86_64__)
#define STORE_A "store_a+0x0"
#define STORE_B "store_b+0x1"
#define LOAD_C "load_c+0x0"
#elif defined(__aarch64__)
#define STORE_A "store_a+0x4"
#define STORE_B "store_b+0x8"
#define LOAD_C "load_c+0x4"
#endif

static char kprobe[PATH_MAX + 16];
static char prog[PATH_MAX + 32];

static void init_paths(void)
{
	cli_build_path(kprobe, sizeof(kprobe), "kprobe");
	cli_build_path(prog, sizeof(prog), "tests/cli/cli_watch");
}

TestSuite(cli_watch, .init = init_paths, .timeout = 30);

/* Skips where this system offers no perf hardware breakpoints. */
static void skip_without_watchpoints(const struct run *r)
{
	if (r->status == 1 && (strstr(r->err, "perf events are not permitted") ||
			       strstr(r->err, "no hardware breakpoints")))
		cr_skip_test("no watchpoints here: %s", r->err);
}

/* The "hits" of the count entry of probe in a JSON count report, -1 if
 * absent. */
static long hits_of(const char *json, const char *probe)
{
	char key[256];
	const char *p, *h;

	snprintf(key, sizeof(key), "\"probe\":\"%s\"", probe);
	p = strstr(json, key);
	if (!p)
		return -1;
	h = strstr(p, "\"hits\":");
	return h ? strtol(h + 7, NULL, 10) : -1;
}

static int count_lines(const char *s, const char *needle)
{
	int n = 0;

	for (const char *p = s; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

Test(cli_watch, count_per_instruction_all_threads)
{
	struct run r;
	char out[64];

	cli_tmpfile(out, sizeof(out), "kpwatch-out");
	cli_run(&r, "%s watch watched --count --format json -o %s -- %s writes", kprobe, out, prog);
	cli_read_file(out, r.out, sizeof(r.out));
	unlink(out);
	skip_without_watchpoints(&r);
	cr_assert_eq(r.status, 0, "%s", r.err);
	/* 100 by the main thread, 200 by each of three threads started
	 * after the watchpoint, and 50 from another instruction. */
	cr_expect_eq(hits_of(r.out, STORE_A), 700, "%s", r.out);
	cr_expect_eq(hits_of(r.out, STORE_B), 50, "%s", r.out);
	cr_expect_eq(count_lines(r.out, "\"probe\":"), 3, "only the variable and two instructions: %s",
		     r.out);
	/* each named by its object, the program's own, as count names it */
	cr_expect_eq(count_lines(r.out, "\"object\":\"cli_watch\""), 3, "%s", r.out);
	cr_expect(strstr(r.out, "\"lost\":0"), "%s", r.out);
}

Test(cli_watch, trace_old_and_new)
{
	struct run r;
	char want[160], out[64];

	cli_tmpfile(out, sizeof(out), "kpwatch-out");
	cli_run(&r, "%s watch watched --format json -o %s -- %s writes", kprobe, out, prog);
	cli_read_file(out, r.out, sizeof(r.out));
	unlink(out);
	skip_without_watchpoints(&r);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_eq(count_lines(r.out, "\"probe\":\"" STORE_A "\""), 700);
	cr_expect_eq(count_lines(r.out, "\"probe\":\"" STORE_B "\""), 50);
	/* store_b writes 1001..1050 in order, on one thread (the first
	 * one's old value is store_a's). */
	for (int i = 2; i <= 50; i++) {
		snprintf(want, sizeof(want), "\"args\":{\"old\":\"0x%x\",\"new\":\"0x%x\"}",
			 1000 + i - 1, 1000 + i);
		cr_expect(strstr(r.out, want), "no %s in the trace", want);
	}
}

/* --stack: each access with the stack the library's unwinder finds from
 * the trap, through main (CFI) into libc's start and _start. */
Test(cli_watch, stack_of_each_access)
{
	struct run r;
	char out[64];

	cli_tmpfile(out, sizeof(out), "kpwatch-out");
	cli_run(&r, "%s watch half:2 --stack --format json -o %s -- %s sizes", kprobe, out, prog);
	cli_read_file(out, r.out, sizeof(r.out));
	unlink(out);
	skip_without_watchpoints(&r);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_eq(count_lines(r.out, "\"stack\":[\"main+0x"), 5, "%s", r.out);
	cr_expect_eq(count_lines(r.out, "__libc_start_main+0x"), 5, "%s", r.out);
	cr_expect_eq(count_lines(r.out, "\"_start+0x"), 5, "%s", r.out);
}

Test(cli_watch, reads_with_rw)
{
	struct run r;
	char out[64];

	cli_tmpfile(out, sizeof(out), "kpwatch-out");
	cli_run(&r, "%s watch watched --rw --count --format json -o %s -- %s reads", kprobe, out, prog);
	cli_read_file(out, r.out, sizeof(r.out));
	unlink(out);
	skip_without_watchpoints(&r);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_eq(hits_of(r.out, LOAD_C), 30, "%s", r.out);
	cr_expect_eq(hits_of(r.out, STORE_B), 1, "%s", r.out);
	/* Without --rw, the reads are not caught. */
	cli_tmpfile(out, sizeof(out), "kpwatch-out");
	cli_run(&r, "%s watch watched --count --format json -o %s -- %s reads", kprobe, out, prog);
	cli_read_file(out, r.out, sizeof(r.out));
	unlink(out);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_eq(hits_of(r.out, LOAD_C), -1, "%s", r.out);
	cr_expect_eq(hits_of(r.out, STORE_B), 1, "%s", r.out);
}

Test(cli_watch, two_byte_variable)
{
	struct run r;
	char out[64];

	cli_tmpfile(out, sizeof(out), "kpwatch-out");
	cli_run(&r, "%s watch half:2 --count -z -o %s -- %s sizes", kprobe, out, prog);
	cli_read_file(out, r.out, sizeof(r.out));
	unlink(out);
	skip_without_watchpoints(&r);
	cr_assert_eq(r.status, 0, "%s", r.err);
	/* Five stores to it; those next to it are not counted. */
	cr_expect(strstr(r.out, " cli_watch                       5 "), "%s", r.out);
	cr_expect_eq(count_lines(r.out, "\n"), 3, "%s", r.out);
}

static int perf_fds_of(pid_t pid)
{
	char path[64], link[PATH_MAX], target[128];
	struct dirent *e;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	cr_assert(d);
	while ((e = readdir(d))) {
		ssize_t len;

		snprintf(link, sizeof(link), "%s/%s", path, e->d_name);
		len = readlink(link, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = '\0';
		n += strstr(target, "perf_event") != NULL;
	}
	closedir(d);
	return n;
}

Test(cli_watch, attach_and_detach)
{
	struct run r;
	char line[64];
	FILE *out;
	pid_t pid;
	int fds[2], st;

	cr_assert_eq(pipe(fds), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		execl(prog, prog, "loop", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	out = fdopen(fds[0], "r");
	cr_assert(fgets(line, sizeof(line), out) && !strcmp(line, "ready\n"));
	cli_run(&r, "%s watch watched --count --format json -d 0.5 -p %d", kprobe, (int)pid);
	if (r.status == 1)
		kill(pid, SIGKILL);
	skip_without_watchpoints(&r);
	cr_expect_eq(r.status, 0, "%s", r.err);
	/* Every 5 ms for half a second. */
	cr_expect_gt(hits_of(r.out, STORE_A), 20, "%s", r.out);
	/* Detached: still running, no descriptor of ours left. */
	usleep(50000);
	cr_expect_eq(waitpid(pid, &st, WNOHANG), 0, "the target died");
	cr_expect_eq(perf_fds_of(pid), 0);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	fclose(out);
}

Test(cli_watch, bad_input)
{
	static const char *const bad[][2] = {
		{ "watch nosuch_variable", "no variable 'nosuch_variable'" },
		{ "watch watched:3", "bad length '3'" },
		{ "watch 'watch*'", "watch takes a variable" },
		{ "watch watched extra", "watch takes one variable" },
		{ "watch --stack=0 watched", "bad stack depth '0'" },
		{ "watch --count --stack watched", "use one of them" },
		{ "watch", "watch needs a variable" },
	};
	struct run r;

	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cli_run(&r, "%s %s -- %s writes", kprobe, bad[i][0], prog);
		skip_without_watchpoints(&r);
		cr_expect_eq(r.status, 2, "%s: status %d", bad[i][0], r.status);
		cr_expect(strstr(r.err, bad[i][1]), "%s: %s", bad[i][0], r.err);
		cr_expect_eq(count_lines(r.err, "\n"), 1, "%s: %s", bad[i][0], r.err);
	}
}
