/* End-to-end tests of `kprobe load` (the module model) on
 * tests/cli/cli_target.c, with the example module and tests/cli/cli_module.c. */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_helpers.h"

static char kprobe[PATH_MAX + 16];
static char target[PATH_MAX + 32];
static char example[PATH_MAX + 64];
static char module[PATH_MAX + 32];
static char plugin[PATH_MAX + 32];
static char run_target[PATH_MAX + 32];
static char cxx_target[PATH_MAX + 32];

static void init_paths(void)
{
	cli_build_path(kprobe, sizeof(kprobe), "kprobe");
	cli_build_path(target, sizeof(target), "tests/cli/cli_target");
	cli_build_path(example, sizeof(example), "examples/kprobe_module_example.so");
	cli_build_path(module, sizeof(module), "tests/cli/cli_module.so");
	cli_build_path(plugin, sizeof(plugin), "tests/cli/libcliplugin.so");
	cli_build_path(run_target, sizeof(run_target), "tests/cli/run_target");
	cli_build_path(cxx_target, sizeof(cxx_target), "tests/cli/cli_stack_cxx");
	/* Programs and modules take their time under load; every output
	 * here must be seen whole. */
	cli_run_quiet_ms = 25000;
	cli_run_output_must_fit = true;
}

TestSuite(load, .init = init_paths, .timeout = 30 * KP_TEST_SLOWDOWN);

static int count_lines(const char *text, const char *prefix)
{
	int n = 0;
	size_t len = strlen(prefix);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		n += !strncmp(p, prefix, len);
	return n;
}

/* A program in the background, killed with the test. */
static pid_t bg_start_of(const char *prog, const char *args)
{
	char cmd[PATH_MAX + 256];
	pid_t pid;

	snprintf(cmd, sizeof(cmd), "exec %s %s > /dev/null 2>&1 < /dev/null", prog, args);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	usleep(200000);
	return pid;
}

static pid_t bg_start(const char *args)
{
	return bg_start_of(target, args);
}

Test(load, example_module_before_main)
{
	struct run r;
	char exp[256];
	const char *p;

	cli_run(&r, "%s load -o /dev/stderr %s target_add 3 -- %s calls 5", kprobe, example, target);
	cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.err);
	cr_assert_str_eq(r.out, "sum 30\n");
	cr_assert(!strncmp(r.err, "probing target_add at 0x", 24), "%s", r.err);
	p = strchr(r.err, '\n') + 1;
	/* Only the first 3 calls are printed, all on the main thread. */
	for (int i = 0; i < 3; i++) {
		snprintf(exp, sizeof(exp), "target_add(%d, %d) = %d [tid ", i, 2 * i, 3 * i);
		cr_assert(!strncmp(p, exp, strlen(exp)), "line %d: %s", i, p);
		p = strchr(p, '\n') + 1;
	}
	cr_assert_str_eq(p, "target_add: 5 calls, 0 missed\n");
}

Test(load, module_args_and_formats)
{
	struct run r;
	char exp[2048];

	cli_run(&r, "%s load -o /dev/stderr %s args 'a b' '' -x -- %s calls 1", kprobe, module, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_str_eq(r.err, "argc 5\n[args]\n[a b]\n[]\n[-x]\nexit\n");

	cli_run(&r, "%s load -o /dev/stderr %s formats -- %s calls 1", kprobe, module, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(exp, sizeof(exp),
		 "d=%d i=%i neg=%d\n"
		 "w=[%5d] l=[%-5d] z=[%05d] zn=[%05d]\n"
		 "u=%u x=%x X=%X o=%o\n"
		 "ld=%ld lu=%lu lx=%lx lld=%lld llu=%llu\n"
		 "hhd=%hhd hd=%hd hu=%hu zu=%zu\n"
		 "s=[%s] p=[%.3s] w=[%6s] l=[%-6s] n=[(null)]\n"
		 "c=%c%c pct=%% star=[%*d] p=%p\n"
		 "trailing newline kept once\n"
		 "ctl=[??]\n"
		 "exit\n",
		 42, -7, -2147483647 - 1, 42, 42, 42, -42, 4000000000u, 0xbeefu, 0xbeefu, 8u, -1L,
		 18446744073709551615UL, 0xdeadbeefcafeUL, -9223372036854775807LL - 1, 12345ULL,
		 (signed char)300, (short)70000, 65535, (size_t)99, "abc", "abcdef", "ab", "ab",
		 'o', 'k', 4, 7, (void *)0x1234);
	cr_assert_str_eq(r.err, exp);
}

Test(load, long_line_is_cut)
{
	struct run r;
	char exp[1100];

	cli_run(&r, "%s load -o /dev/stderr %s long -- %s calls 1", kprobe, module, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	exp[0] = 'x';
	memset(exp + 1, 'y', 1023);
	strcpy(exp + 1024, "\nexit\n");
	cr_assert_str_eq(r.err, exp);
}

/* Every thread's lines arrive, none twice, none lost. */
Test(load, handler_lines_from_eight_threads)
{
	struct run r;

	cli_run(&r, "%s load -o /dev/stderr %s hits target_add -- %s threads 8 500", kprobe, module,
	    target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(count_lines(r.err, "hit "), 8 * 500);
	for (int i = 0; i < 500; i += 97) {
		char line[64];

		snprintf(line, sizeof(line), "\nhit %d 1\n", i);
		cr_assert_eq(count_lines(r.err, line + 1), 8, "%s", line + 1);
	}
	cr_assert(strstr(r.err, "\nexit\n"));
	cr_assert_null(strstr(r.err, "lost"));
}

Test(load, json_lines)
{
	struct run r;

	cli_run(&r, "%s load --format json -o /dev/stderr %s args '\"q\"' -- %s calls 1", kprobe,
	    module, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(count_lines(r.err, "{\"time_ns\":"), 4, "%s", r.err);
	cr_assert(strstr(r.err, ",\"text\":\"argc 3\"}\n"), "%s", r.err);
	cr_assert(strstr(r.err, ",\"text\":\"[\\\"q\\\"]\"}\n"), "%s", r.err);
}

/* Attached twice to one process: each session loads the module afresh
 * (its data initialised), runs its exit at detach, and the process goes
 * on unprobed. */
Test(load, attach_twice_and_detach)
{
	struct run r;
	pid_t pid = bg_start("loop");

	for (int round = 0; round < 2; round++) {
		struct timespec t0, t1;
		long ms, ticks;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		cli_run(&r, "%s load -d 0.3 -o /dev/stderr %s target_add 2 -p %d", kprobe, example,
		    (int)pid);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		cr_assert_eq(r.status, 0, "round %d: %s", round, r.err);
		cr_assert(!strncmp(r.err, "probing target_add at 0x", 24), "%s", r.err);
		cr_assert_eq(count_lines(r.err, "target_add("), 2, "%s", r.err);
		/* 5 ms ticks for the session: counted from 0 again in each,
		 * so no more than this run's own time holds (the first
		 * round's ~60 would break it in the second).  The run's time,
		 * not 0.3 s: attaching and detaching take seconds under an
		 * emulator. */
		ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
		cr_assert_eq(count_lines(r.err, "target_add: "), 1, "%s", r.err);
		ticks = atol(strstr(r.err, "target_add: ") + 12);
		cr_assert_gt(ticks, 0, "%s", r.err);
		cr_assert_leq(ticks, ms / 5 + 1, "round %d: %ld ticks in %ld ms: %s", round, ticks, ms,
			      r.err);
	}
	cli_run(&r, "%s list -p %d", kprobe, (int)pid);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_null(strstr(r.out, "target_add"), "%s", r.out);
	cr_assert_eq(waitpid(pid, NULL, WNOHANG), 0, "the target died");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

Test(load, errors)
{
	struct run r;

	cli_run(&r, "%s load /nonexistent/mod.so -- %s calls 1", kprobe, target);
	cr_assert_eq(r.status, 2);
	cr_assert(strstr(r.err, "cannot load module '/nonexistent/mod.so'"), "%s", r.err);
	cli_run(&r, "%s load %s formats", kprobe, module);
	cr_assert_eq(r.status, 2);
	cr_assert(strstr(r.err, "give a command after '--' or a process with -p PID"));
	cli_run(&r, "%s load -- %s calls 1", kprobe, target);
	cr_assert_eq(r.status, 2);
	cr_assert(strstr(r.err, "load needs a module"), "%s", r.err);

	/* Not a module: the command never runs. */
	cli_run(&r, "%s load %s -- %s calls 1", kprobe, plugin, target);
	cr_assert_eq(r.status, 1);
	cr_assert(strstr(r.err, "does not export kprobe_module_init"), "%s", r.err);
	cr_assert_str_eq(r.out, "");

	/* Init fails: what it printed, then why, and the command never runs. */
	cli_run(&r, "%s load -o /dev/stderr %s fail -5 -- %s calls 1", kprobe, module, target);
	cr_assert_eq(r.status, 1);
	cr_assert(strstr(r.err, "failing with -5\nkprobe: "), "%s", r.err);
	cr_assert(strstr(r.err, "kprobe_module_init failed: Input/output error"), "%s", r.err);
	cr_assert_str_eq(r.out, "");
	cli_run(&r, "%s load %s fail 3 -- %s calls 1", kprobe, module, target);
	cr_assert_eq(r.status, 1);
	cr_assert(strstr(r.err, "kprobe_module_init returned 3"), "%s", r.err);
}

/* ---- kprobe run: the command line ---- */

Test(load, run_usage_errors)
{
	struct run r;

	cli_run(&r, "%s run -- %s calls 1", kprobe, target);
	cr_assert_eq(r.status, 2);
	cr_assert(strstr(r.err, "run needs a program"), "%s", r.err);
	cli_run(&r, "%s run -e 'BEGIN { exit(); }'", kprobe);
	cr_assert_eq(r.status, 2);
	cr_assert(strstr(r.err, "give a command after '--' or with -c"), "%s", r.err);
	cli_run(&r, "%s run -e 'BEGIN { exit(); }' -c '%s calls 1' -- %s calls 1", kprobe, target,
	    target);
	cr_assert_eq(r.status, 2);
	cr_assert(strstr(r.err, "give one command"), "%s", r.err);
	cli_run(&r, "%s run -e 'BEGIN { exit(); }' -c '%s calls 1' -p 1", kprobe, target);
	cr_assert_eq(r.status, 2);
	cr_assert(strstr(r.err, "not both"), "%s", r.err);
	cli_run(&r, "%s run -f yaml -e 'BEGIN { exit(); }' -c '%s calls 1'", kprobe, target);
	cr_assert_eq(r.status, 2);
	cr_assert(strstr(r.err, "bad format 'yaml'"), "%s", r.err);
	cli_run(&r, "%s run --format chrome -e 'BEGIN { exit(); }' -c '%s calls 1'", kprobe, target);
	cr_assert_eq(r.status, 2);
	cr_assert(strstr(r.err, "text or json"), "%s", r.err);
	cli_run(&r, "%s run --map-keys 0 -e 'BEGIN { exit(); }' -c '%s calls 1'", kprobe, target);
	cr_assert_eq(r.status, 2);
	cr_assert(strstr(r.err, "bad --map-keys '0'"), "%s", r.err);
	cli_run(&r, "%s run -e 'BEGIN { exit(); }' -e 'END { }' -c '%s calls 1'", kprobe, target);
	cr_assert_eq(r.status, 2);
	cr_assert(strstr(r.err, "give one program"), "%s", r.err);
	cli_run(&r, "%s run /nonexistent/prog.bt -c '%s calls 1'", kprobe, target);
	cr_assert_eq(r.status, 2);
	cr_assert(strstr(r.err, "cannot read program '/nonexistent/prog.bt'"), "%s", r.err);
	cli_run(&r, "%s run -e 'BEGIN { exit(); }' -c ' '", kprobe);
	cr_assert_eq(r.status, 2);
	cr_assert(strstr(r.err, "-c needs a command"), "%s", r.err);
	cr_assert_str_eq(r.out, "");
}

/* Functions the target does not have: skipped while something is left to
 * attach (as bpftrace skips them), else the first is the error, exit 2,
 * and the command never runs. */
Test(load, run_missing_functions)
{
	struct run r;

	cli_run(&r, "%s run -e 'uprobe:%s:nosuch, uprobe:%s:target_add { @n = count(); }' -- %s "
		"calls 3", kprobe, target, target, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.err, "Attaching 1 probe...\n"), "%s", r.err);
	cr_assert(strstr(r.err, "@n: 3\n"), "%s", r.err);
	cli_run(&r, "%s run -e 'BEGIN { printf(\"begun\\n\"); exit(); } uprobe:%s:nosuch { }' -- %s "
		"calls 3", kprobe, target, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.err, "begun\n"), "%s", r.err);
	cli_run(&r, "%s run -e 'uprobe:%s:nosuch { } uprobe:%s:nosuch2* { }' -- %s calls 3", kprobe,
		target, target, target);
	cr_assert_eq(r.status, 2);
	cr_assert(strstr(r.err, "unknown symbol 'nosuch'"), "%s", r.err);
	cr_assert_null(strstr(r.out, "sum "), "%s", r.out);
	/* a file that does not exist is an error at once, at its probe, in
	 * bpftrace's words: a path, a name found nowhere, a usdt probe's */
	cli_run(&r, "%s run -e 'uprobe:/nonexistent/lib.so:f, uprobe:%s:target_add { }' -- %s calls 3",
		kprobe, target, target);
	cr_assert_eq(r.status, 2);
	cr_assert(strstr(r.err, "stdin:1:1-29: ERROR: uprobe target file '/nonexistent/lib.so' does "
			 "not exist or is not executable\n"), "%s", r.err);
	cr_assert_eq(r.out[0], '\0', "%s", r.out);
	cli_run(&r, "%s run -e 'uretprobe:libnosuchlib:f { }' -- %s calls 3", kprobe, target);
	cr_assert_eq(r.status, 2);
	cr_assert(strstr(r.err, "stdin:1:1-25: ERROR: uprobe target file 'libnosuchlib' does not "
			 "exist or is not executable\n"), "%s", r.err);
	cli_run(&r, "%s run -e 'usdt:/nonexistent/x:p:n { }' -- %s calls 3", kprobe, target);
	cr_assert_eq(r.status, 2);
	cr_assert(strstr(r.err, "stdin:1:1-24: ERROR: usdt target file '/nonexistent/x' does not "
			 "exist or is not executable\n"), "%s", r.err);
	/* names found as bpftrace finds them: the loader's short name, the
	 * command search path */
	cli_run(&r, "%s run -e 'uprobe:libc:nosuch_fn, uprobe:sh:nosuch_fn, uprobe:%s:target_add "
		"{ @n = count(); }' -- %s calls 3", kprobe, target, target);
	cr_assert_null(strstr(r.err, "target file"), "%s", r.err);
}

/* An object named by a symbolic link to it (uprobe:/usr/bin/python3:f,
 * python3 a link to python3.11): the file the process maps. */
Test(load, run_object_through_a_link)
{
	char link[64];
	struct run r;

	snprintf(link, sizeof(link), "/tmp/kprobe-test-%d-link", (int)getpid());
	unlink(link);
	cr_assert_eq(symlink(run_target, link), 0);
	cli_run(&r, "%s run -o /dev/stdout -e 'uprobe:%s:run_value { @n = count(); }' -- %s calls 4",
		kprobe, link, run_target);
	unlink(link);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "@n: 4\n"), "%s", r.out);
}

/* C++ names as bpftrace takes them (uprobe:OBJ:"ns::f", a glob, a full
 * signature): a probe per function, named by its mangled symbol as
 * bpftrace names it; a name matching nothing is an error. */
Test(load, run_cxx_names)
{
	char lib[PATH_MAX];
	struct run r;

	cli_run(&r, "%s run -o /dev/stdout -e 'uprobe:%s:\"shapes::leaf\" { @[probe] = count(); } "
		"uretprobe:%s:\"shapes::Circle::area(int) const\" { @r = sum(retval); }' -- %s",
		kprobe, cxx_target, cxx_target, cxx_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "Attaching 2 probes...\n"), "%s", r.out);
	cr_assert(strstr(r.out, ":_ZN6shapes4leafEi]: 1\n"), "%s", r.out);
	cr_assert(strstr(r.out, "@r: 15\n"), "%s", r.out);
	cli_run(&r, "%s run -o /dev/stdout -e 'uprobe:%s:\"shapes::*\" { @[probe] = count(); }' -- %s",
		kprobe, cxx_target, cxx_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, ":_ZNK6shapes6Circle4areaEi]: 1\n"), "%s", r.out);
	cr_assert(strstr(r.out, ":_ZN6shapes4leafEi]: 1\n"), "%s", r.out);
	/* names whose identifiers the ABI does not write out: std (St), a
	 * constructor and a destructor (C1, D1), an operator (nw) */
	cli_build_path(lib, sizeof(lib), "tests/cli/cli_record_cxx");
	cli_run(&r, "%s run -o /dev/stdout -e 'uprobe:libstdc++:\"std::runtime_error::runtime_error("
		"char const*)\" { @c = count(); } uprobe:libstdc++:\"std::runtime_error::"
		"~runtime_error()\" { @d = count(); } uprobe:libstdc++:\"operator new(unsigned long)\""
		" { @n = count(); }' -- %s 9", kprobe, lib);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "@c: ") && atol(strstr(r.out, "@c: ") + 4) >= 9 &&
		  atol(strstr(r.out, "@c: ") + 4) % 9 == 0, "%s", r.out);
	cr_assert(strstr(r.out, "@d: ") && atol(strstr(r.out, "@d: ") + 4) >= 9, "%s", r.out);
	cr_assert(strstr(r.out, "@n: "), "%s", r.out);
	cli_run(&r, "%s run -e 'uprobe:%s:\"shapes::nosuch\" { }' -- %s", kprobe, cxx_target,
		cxx_target);
	cr_assert_eq(r.status, 2);
	cr_assert(strstr(r.err, "no C++ function matches 'shapes::nosuch'"), "%s", r.err);
}

/* A program error: bpftrace's form on stderr (place, reason, the line, a
 * marker), exit 2, and the command never runs. */
Test(load, run_program_error)
{
	struct run r;

	cli_run(&r, "%s run -e 'BEGIN { printf(\"a\\n\") ' -c '%s calls 1'", kprobe, target);
	cr_assert_eq(r.status, 2, "%d: %s", r.status, r.err);
	cr_assert(!strncmp(r.err, "stdin:1:", 8), "%s", r.err);
	cr_assert(strstr(r.err, "ERROR: "), "%s", r.err);
	cr_assert(strstr(r.err, "\nBEGIN { printf(\"a\\n\") \n"), "%s", r.err);
	cr_assert_str_eq(r.out, "");
}

/* ---- kprobe run: what byte-for-byte comparisons cannot pin down ---- */

/* The sum of a hist's bucket counts in text output, from its "@name:"
 * line to the next blank line. */
static long hist_total(const char *text, const char *name)
{
	const char *p = strstr(text, name);
	long total = 0;

	cr_assert(p, "no %s in %s", name, text);
	p = strchr(p, '\n');
	while (p && p[1] && p[1] != '\n') {
		const char *bar = strchr(p + 1, '|');
		const char *q = bar;

		/* the count is the last number before the bar */
		while (q > p + 1 && q[-1] == ' ')
			q--;
		while (q > p + 1 && q[-1] >= '0' && q[-1] <= '9')
			q--;
		total += atol(q);
		p = strchr(p + 1, '\n');
	}
	return total;
}

/* A bare program name on the command search path that is a symlink to a
 * file of another name (as python3 is to python3.11): the probe attaches
 * to the file it leads to, and `probe` names the path found, as bpftrace
 * does. */
Test(load, run_program_name_on_path_through_a_symlink)
{
	char dir[] = "/tmp/kprobe-run-pathXXXXXX", link[PATH_MAX], want[PATH_MAX + 64];
	struct run r;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(link, sizeof(link), "%s/rt_alias", dir);
	cr_assert_eq(symlink(run_target, link), 0);
	cli_run(&r, "PATH=%s:$PATH %s run -o /dev/stdout -e 'uprobe:rt_alias:run_value "
	    "{ @[probe] = count(); }' -c '%s threads 1 3'", dir, kprobe, link);
	unlink(link);
	rmdir(dir);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(want, sizeof(want), "@[uprobe:%s:run_value]: 3\n", link);
	cr_assert(strstr(r.out, want), "%s", r.out);
	cr_assert_null(strstr(r.err, "nothing was probed"), "%s", r.err);
}

/* A program's probe on an object the command never loads (the test
 * plugin, which run_target neither links nor opens) placed nothing: said
 * on stderr after the maps, as count says it; a program whose probes all
 * placed says nothing of the kind. */
Test(load, run_probe_on_an_object_never_loaded_is_reported)
{
	struct run r;

	cli_run(&r, "%s run -o /dev/stdout -e 'uprobe:%s:plugin_work { @a = count(); } "
	    "uprobe:%s:run_value { @b = count(); }' -c '%s threads 1 3'", kprobe, plugin,
	    run_target, run_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "\n@b: 3\n"), "%s", r.out);
	cr_assert(strstr(r.err, "nothing was probed for"), "%s", r.err);
	cr_assert(strstr(r.err, "libcliplugin.so:plugin_work'"), "%s", r.err);
	cli_run(&r, "%s run -o /dev/stdout -e 'uprobe:%s:run_value { @b = count(); }' "
	    "-c '%s threads 1 3'", kprobe, run_target, run_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_null(strstr(r.err, "nothing was probed"), "%s", r.err);
}

/* The classic latency pattern, real time stamps, 8 threads: every call
 * pairs with its own thread's entry, and nothing is left in @s. */
Test(load, run_latency_eight_threads)
{
	struct run r;

	cli_run(&r, "%s run -o /dev/stdout -e 'uprobe:%s:run_value { @s[tid] = nsecs; } "
	    "uretprobe:%s:run_value /@s[tid]/ { @ns = hist(nsecs - @s[tid]); @n = count(); "
	    "delete(@s[tid]); }' -c '%s threads 8 1000'", kprobe, run_target, run_target,
	    run_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "\n@n: 8000\n"), "%s", r.out);
	cr_assert_eq(hist_total(r.out, "@ns: \n"), 8000, "%s", r.out);
	cr_assert_null(strstr(r.out, "@s["), "%s", r.out);
}

/* The latency pattern exactly as written (the agent runs it without the
 * interpreter, each thread reusing the slot it deleted): eight threads,
 * then a recursion, where only the innermost return finds its entry (the
 * entries overwrote each other, the outer returns find it deleted). */
Test(load, run_latency_pattern_fast_form)
{
	struct run r;

	cli_run(&r, "%s run -o /dev/stdout -e 'uprobe:%s:run_value { @s[tid] = nsecs; } "
	    "uretprobe:%s:run_value /@s[tid]/ { @ns = hist(nsecs - @s[tid]); delete(@s[tid]); }' "
	    "-c '%s threads 8 1000'", kprobe, run_target, run_target, run_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(hist_total(r.out, "@ns: \n"), 8000, "%s", r.out);
	cr_assert_null(strstr(r.out, "@s["), "%s", r.out);
	cli_run(&r, "%s run -o /dev/stdout -e 'uprobe:%s:run_recurse { @s[tid] = nsecs; } "
	    "uretprobe:%s:run_recurse /@s[tid]/ { @ns = hist(nsecs - @s[tid]); delete(@s[tid]); }' "
	    "-c '%s recurse 5'", kprobe, run_target, run_target, run_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(hist_total(r.out, "@ns: \n"), 1, "%s", r.out);
	cr_assert_null(strstr(r.out, "@s["), "%s", r.out);
}

/* One start time left when the program ends: exit() two calls down a
 * recursion leaves the thread's entry in @s, printed at the end as the
 * slots' entries are (the start times kept as the thread's own, with
 * @s used by nothing else, and, for print(@s), in the map's slots). */
static void expect_one_start(const char *out)
{
	const char *at = strstr(out, "@s[");
	long key = 0, val = 0;

	cr_assert(at, "%s", out);
	cr_assert_eq(sscanf(at, "@s[%ld]: %ld", &key, &val), 2, "%s", out);
	cr_assert_gt(key, 0, "%s", out);
	cr_assert_gt(val, 0, "%s", out);
	cr_assert_null(strstr(at + 1, "@s["), "%s", out);
}

/* The pattern on 70 threads (64 keep their start times in their shards,
 * the others in the map's slots) while signals whose handler calls the
 * function land anywhere, inside the pattern's halves too (a call in a
 * signal handler that interrupts a probe's handler is not a hit): no
 * start time is left, and no return counts a sample it had no start for. */
Test(load, run_latency_threads_and_signals)
{
	struct run r;
	long calls = 0, total;
	const char *c;

	cli_run(&r, "%s run -o /dev/stdout -e 'uprobe:%s:run_value { @s[tid] = nsecs; } "
	    "uretprobe:%s:run_value /@s[tid]/ { @ns = hist(nsecs - @s[tid]); delete(@s[tid]); }' "
	    "-c '%s sigthreads 70 0 50'", kprobe, run_target, run_target, run_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	c = strstr(r.out, "calls ");
	cr_assert(c, "%s", r.out);
	calls = atol(c + 6);
	total = hist_total(r.out, "@ns: \n");
	cr_assert_gt(total, calls / 2, "%ld of %ld calls", total, calls);
	cr_assert_leq(total, calls, "%s", r.out);
	cr_assert_null(strstr(r.out, "@s["), "%s", r.out);
}

/* `@[tid] = count()` on 70 threads, 64 of them counting in their own
 * shards, the others in the map's slots: one line per thread, exact. */
Test(load, run_count_by_tid_past_the_shards)
{
	struct run r;
	int lines = 0;

	cli_run(&r, "%s run -o /dev/stdout -e 'uprobe:%s:run_value { @[tid] = count(); }' "
	    "-c '%s sigthreads 70 100 0'", kprobe, run_target, run_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	for (const char *l = strstr(r.out, "\n@["); l; l = strstr(l + 1, "\n@[")) {
		long key = 0, val = 0;

		cr_assert_eq(sscanf(l, "\n@[%ld]: %ld", &key, &val), 2, "%s", r.out);
		cr_assert_gt(key, 0, "%s", r.out);
		cr_assert_eq(val, 100, "%s", r.out);
		lines++;
	}
	cr_assert_eq(lines, 70, "%s", r.out);
}

Test(load, run_latency_start_left_at_exit)
{
	struct run r;

	cli_run(&r, "%s run -o /dev/stdout -e 'uprobe:%s:run_recurse { @s[tid] = nsecs; } "
	    "uretprobe:%s:run_recurse /@s[tid]/ { @ns = hist(nsecs - @s[tid]); delete(@s[tid]); } "
	    "uprobe:%s:run_recurse /arg0 == 2/ { exit(); }' -c '%s recurse 5'", kprobe, run_target,
	    run_target, run_target, run_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	expect_one_start(r.out);
	cr_assert_null(strstr(r.out, "@ns"), "%s", r.out);
	cli_run(&r, "%s run -o /dev/stdout -e 'uprobe:%s:run_recurse { @s[tid] = nsecs; } "
	    "uretprobe:%s:run_recurse /@s[tid]/ { @ns = hist(nsecs - @s[tid]); delete(@s[tid]); } "
	    "uprobe:%s:run_recurse /arg0 == 2/ { exit(); } END { print(@s); clear(@s); }' "
	    "-c '%s recurse 5'", kprobe, run_target, run_target, run_target, run_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	expect_one_start(r.out);
}

/* The fast forms' keyed counts, exact: by probe and func (a slot kept per
 * point: an entry and a return of one function are two keys), by tid
 * from eight threads (a slot per thread), by an argument whose value
 * changes at every call (the thread's slot cache missing each time). */
Test(load, run_fast_keyed_counts_exact)
{
	struct run r;
	char want[PATH_MAX + 128];

	cli_run(&r, "%s run -o /dev/stdout -e 'uprobe:%s:run_value, uretprobe:%s:run_value "
	    "{ @[probe] = count(); } uprobe:%s:run_value { @f[func] = count(); }' -c '%s calls 30'",
	    kprobe, run_target, run_target, run_target, run_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(want, sizeof(want), "@[uprobe:%s:run_value]: 30\n", run_target);
	cr_assert(strstr(r.out, want), "want %s in %s", want, r.out);
	snprintf(want, sizeof(want), "@[uretprobe:%s:run_value]: 30\n", run_target);
	cr_assert(strstr(r.out, want), "want %s in %s", want, r.out);
	cr_assert(strstr(r.out, "@f[run_value]: 30\n"), "%s", r.out);
	cr_assert_eq(count_lines(r.out, "@["), 2, "%s", r.out);

	cli_run(&r, "%s run -o /dev/stdout -e 'uprobe:%s:run_value { @[tid] = count(); }' "
	    "-c '%s threads 8 1000'", kprobe, run_target, run_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(count_lines(r.out, "@["), 8, "%s", r.out);
	for (const char *p = strstr(r.out, "@["); p; p = strstr(p + 1, "@["))
		cr_assert(!strncmp(strstr(p, "]: "), "]: 1000\n", 8), "%s", r.out);

	cli_run(&r, "%s run -o /dev/stdout -e 'uprobe:%s:run_value { @[arg0] = count(); } "
	    "uretprobe:%s:run_value { @r[retval] = count(); }' -c '%s calls 70'", kprobe,
	    run_target, run_target, run_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	for (int k = 0; k < 7; k++) {
		snprintf(want, sizeof(want), "\n@[%d]: 10\n", k);
		cr_assert(strstr(r.out, want), "want %s in %s", want, r.out);
	}
	cr_assert_eq(count_lines(r.out, "@["), 7, "%s", r.out);
	/* run_value(i % 7, i) returns i % 7 + i: 70 distinct values */
	cr_assert_eq(count_lines(r.out, "@r["), 70, "%s", r.out);
	cr_assert(strstr(r.out, "\n@r[75]: 1\n"), "%s", r.out);
}

/* A filter in front of a fast count or hist: only the hits it lets
 * through count, on an argument (a complete pt_regs), on tid (none), at
 * a return on retval; a filter in front of an interpreted body too. */
Test(load, run_fast_filtered_forms_exact)
{
	struct run r;

	cli_run(&r, "%s run -o /dev/stdout -e 'uprobe:%s:run_value /arg0 == 3/ { @a = count(); } "
	    "uprobe:%s:run_value /tid != 0/ { @b = count(); } "
	    "uprobe:%s:run_value /arg1 >= 60/ { @c[arg0] = count(); } "
	    "uretprobe:%s:run_value /retval < 8/ { @d = hist(retval); } "
	    "uprobe:%s:run_value /arg0 > 5/ { @e = count(); @f = 1; }' -c '%s calls 70'",
	    kprobe, run_target, run_target, run_target, run_target, run_target, run_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	/* run_value(i % 7, i), i < 70: arg0 == 3 ten times */
	cr_assert(strstr(r.out, "\n@a: 10\n"), "%s", r.out);
	cr_assert(strstr(r.out, "\n@b: 70\n"), "%s", r.out);
	/* i = 60..69: arg0 = 4, 5, 6, 0, 1, 2, 3, 4, 5, 6 */
	cr_assert_eq(count_lines(r.out, "@c["), 7, "%s", r.out);
	cr_assert(strstr(r.out, "\n@c[4]: 2\n"), "%s", r.out);
	cr_assert(strstr(r.out, "\n@c[0]: 1\n"), "%s", r.out);
	/* returns i % 7 + i below 8: i = 0, 1, 2, 3, 7 (0, 2, 4, 6, 7) */
	cr_assert_eq(hist_total(r.out, "@d: \n"), 5, "%s", r.out);
	cr_assert(strstr(r.out, "\n[4, 8)                 3 |"), "%s", r.out);
	cr_assert(strstr(r.out, "\n@e: 10\n"), "%s", r.out);
	cr_assert(strstr(r.out, "\n@f: 1\n"), "%s", r.out);
}

/* The slots the fast forms keep (per point, keyless, per thread) follow
 * a clear() and a zero() the tool applies between two calls: the counts
 * start again from nothing. */
/* The same fast forms alone on the function, one program each: the
 * filter's and the histogram's argument read at the library's args level
 * (an optimized entry hands the handler the registers it pushed). */
Test(load, run_fast_forms_on_arguments_alone_exact)
{
	struct run r;
	const char *b;

	cli_run(&r, "%s run -o /dev/stdout -e 'uprobe:%s:run_value /arg0 == 3/ { @a = count(); }' "
	    "-c '%s calls 70'", kprobe, run_target, run_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "\n@a: 10\n"), "%s", r.out);
	cli_run(&r, "%s run -o /dev/stdout -e 'uprobe:%s:run_value { @h = hist(arg1); }' "
	    "-c '%s calls 70'", kprobe, run_target, run_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	/* arg1 = i, 0..69: [0] 1, [1] 1, [2, 4) 2, [4, 8) 4, ..., [64, 128) 6 */
	cr_assert_eq(hist_total(r.out, "@h: \n"), 70, "%s", r.out);
	b = strstr(r.out, "[32, 64)");
	cr_assert(b && strtol(b + strlen("[32, 64)"), NULL, 10) == 32, "%s", r.out);
	b = strstr(r.out, "[64, 128)");
	cr_assert(b && strtol(b + strlen("[64, 128)"), NULL, 10) == 6, "%s", r.out);
	/* every comparison of a filter the handler tests first, on
	 * run_value(i % 7, i), i < 70 */
	cli_run(&r, "%s run -o /dev/stdout -e 'uprobe:%s:run_value /arg0 != 3/ { @ne = count(); } "
	    "uprobe:%s:run_value /arg0 < 2/ { @lt = count(); } "
	    "uprobe:%s:run_value /arg1 <= 9/ { @le = count(); } "
	    "uprobe:%s:run_value /arg1 > 65/ { @gt = count(); } "
	    "uprobe:%s:run_value /arg0 >= 6/ { @ge = count(); } "
	    "uprobe:%s:run_value /arg1 > 69/ { @none = count(); }' -c '%s calls 70'",
	    kprobe, run_target, run_target, run_target, run_target, run_target, run_target,
	    run_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "\n@ne: 60\n"), "%s", r.out);
	cr_assert(strstr(r.out, "\n@lt: 20\n"), "%s", r.out);
	cr_assert(strstr(r.out, "\n@le: 10\n"), "%s", r.out);
	cr_assert(strstr(r.out, "\n@gt: 4\n"), "%s", r.out);
	cr_assert(strstr(r.out, "\n@ge: 10\n"), "%s", r.out);
	/* never counted: bpftrace keeps a keyless count() from the start */
	cr_assert(strstr(r.out, "\n@none: 0\n"), "%s", r.out);
}

Test(load, run_fast_forms_after_clear_and_zero)
{
	struct run r;
	char want[PATH_MAX + 128];

	cli_run(&r, "%s run -o /dev/stdout -e 'uprobe:%s:run_tick { @[probe] = count(); } "
	    "uprobe:%s:run_tick { @n = count(); } uprobe:%s:run_tick { @t[tid] = count(); } "
	    "uprobe:%s:run_tick /arg0 == 1/ { clear(@); zero(@n); clear(@t); }' "
	    "-c '%s ticks 5 300'", kprobe, run_target, run_target, run_target, run_target,
	    run_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	/* calls 0 and 1 counted, then cleared; calls 2, 3 and 4 counted */
	snprintf(want, sizeof(want), "@[uprobe:%s:run_tick]: 3\n", run_target);
	cr_assert(strstr(r.out, want), "want %s in %s", want, r.out);
	cr_assert(strstr(r.out, "\n@n: 3\n"), "%s", r.out);
	cr_assert_eq(count_lines(r.out, "@t["), 1, "%s", r.out);
	cr_assert(strstr(strstr(r.out, "@t["), "]: 3\n"), "%s", r.out);
}

/* Keyless aggregations from more threads (70) than a map has shards (64):
 * the first threads add to their shards, the last ones to the map's slot
 * with locked adds, and every call counts once, in the fast forms and in
 * the interpreter. */
Test(load, run_keyless_shards_run_out_exact)
{
	struct run r;

	cli_run(&r, "%s run -o /dev/stdout -e 'uprobe:%s:run_value { @n = count(); } "
	    "uprobe:%s:run_value { @h = hist(arg0); } "
	    "uprobe:%s:run_value { @s = sum(arg0); @c = count(); }' -c '%s sigthreads 70 300 0'",
	    kprobe, run_target, run_target, run_target, run_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "\n@n: 21000\n"), "%s", r.out);
	cr_assert(strstr(r.out, "\n@c: 21000\n"), "%s", r.out);
	cr_assert_eq(hist_total(r.out, "@h: \n"), 21000, "%s", r.out);
	/* run_value(i % 5, 1), i < 300: 60 each of 0..4, 600 a thread */
	cr_assert(strstr(r.out, "\n@s: 42000\n"), "%s", r.out);
}

/* A full map drops and counts on the fast path too: four keys of room,
 * seven values of arg0 (10 calls each), the first four kept. */
Test(load, run_fast_count_map_full_drops)
{
	struct run r;

	cli_run(&r, "%s run --map-keys 4 -o /dev/stdout -e 'uprobe:%s:run_value { @[arg0] = count(); }' "
	    "-c '%s calls 70'", kprobe, run_target, run_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(count_lines(r.out, "@["), 4, "%s", r.out);
	for (int k = 0; k < 4; k++) {
		char want[64];

		snprintf(want, sizeof(want), "\n@[%d]: 10\n", k);
		cr_assert(strstr(r.out, want), "want %s in %s", want, r.out);
	}
	cr_assert(strstr(r.err, "30 map updates dropped"), "%s", r.err);
}

/* The loader's cache as `ldconfig -p` lists it: the 64-bit libc.so.6. */
static bool ldconfig_libc(char *path, size_t len)
{
	FILE *f = popen("/sbin/ldconfig -p 2>/dev/null", "r");
	char line[1024];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *arrow = strstr(line, " => ");

#if defined(__aarch64__)
		if (!strstr(line, "\tlibc.so.6 (libc6,AArch64") || !arrow)
#else
		if (!strstr(line, "\tlibc.so.6 (libc6,x86-64") || !arrow)
#endif
			continue;
		arrow[4 + strcspn(arrow + 4, "\n")] = '\0';
		snprintf(path, len, "%s", arrow + 4);
		found = true;
	}
	pclose(f);
	return found;
}

/* `probe` names a short library name's object as bpftrace prints it:
 * the path the loader's cache gives. */
Test(load, run_probe_names_short_library_by_its_path)
{
	struct run r;
	char libc[512], want[600];

	if (!ldconfig_libc(libc, sizeof(libc)))
		cr_skip_test("ldconfig -p lists no 64-bit libc.so.6 here");
	cli_run(&r, "%s run -o /dev/stdout -e 'uprobe:libc:exit { @[probe] = count(); }' -c '%s calls 1'",
	    kprobe, run_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(want, sizeof(want), "@[uprobe:%s:exit]: 1\n", libc);
	cr_assert(strstr(r.out, want), "want %s in %s", want, r.out);
}

/* A short library name in an SDT probe too: libstdc++'s own probes at
 * each throw and catch (where Debian's build has them). */
Test(load, run_usdt_short_library_name)
{
	char cxx[PATH_MAX];
	struct run r;

	cli_build_path(cxx, sizeof(cxx), "tests/cli/cli_record_cxx");
	cli_run(&r, "%s run -o /dev/stdout -e 'usdt:libstdc++:libstdcxx:throw { @t = count(); } "
	    "usdt:libstdc++:catch { @c = count(); }' -- %s 9", kprobe, cxx);
	if (r.status == 2 && strstr(r.err, "no SDT probe matches"))
		cr_skip_test("libstdc++ has no SDT probes here: %s", r.err);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "@t: 9\n") && strstr(r.out, "@c: 9\n"), "%s", r.out);
}

/* With -p, as bpftrace prints it there too: the path the process maps
 * the library from (/proc/PID/maps; on Debian /usr/lib/..., where the
 * loader's cache says /lib/...). */
Test(load, run_probe_names_short_library_as_mapped_with_pid)
{
	char maps[64], line[PATH_MAX + 128], mapped[PATH_MAX] = "", want[PATH_MAX + 64];
	struct run r;
	pid_t pid;
	FILE *f;

	pid = bg_start_of(run_target, "ticks 100000 2");
	snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)pid);
	/* (the loader may not have mapped it yet: an emulator is slow) */
	for (int i = 0; i < 500 * KP_TEST_SLOWDOWN && !mapped[0]; i++) {
		cr_assert_not_null(f = fopen(maps, "re"));
		while (!mapped[0] && fgets(line, sizeof(line), f)) {
			char *path = strchr(line, '/');

			if (path && strstr(path, "/libc.so.6\n"))
				snprintf(mapped, sizeof(mapped), "%.*s", (int)strcspn(path, "\n"),
					 path);
		}
		fclose(f);
		if (!mapped[0])
			usleep(10000);
	}
	cr_assert(mapped[0], "no libc.so.6 in %s", maps);
	cli_run(&r, "%s run -o /dev/stdout -e 'uprobe:libc:nanosleep { @[probe] = count(); exit(); }' "
	    "-p %d", kprobe, (int)pid);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(want, sizeof(want), "@[uprobe:%s:nanosleep]: ", mapped);
	cr_assert(strstr(r.out, want), "want %s in %s", want, r.out);
}

/* comm, ustack through a recursion, usym of func. */
Test(load, run_comm_ustack_usym)
{
	struct run r;
	const char *st;

	cli_run(&r, "%s run -o /dev/stdout -e 'uprobe:%s:run_recurse /arg0 == 0/ { @[ustack] = count(); "
	    "@c[comm] = count(); @f[func] = count(); }' -c '%s recurse 3'", kprobe,
	    run_target, run_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "@c[run_target]: 1\n"), "%s", r.out);
	cr_assert(strstr(r.out, "@f[run_recurse]: 1\n"), "%s", r.out);
	/* As bpftrace lists a uprobe's stack (frames indented by 4 in a key):
	 * the probed function, then every caller, unwound from the call-frame
	 * information (bpftrace's frame-pointer walk leaves out the immediate
	 * caller at a function's entry; the unwinder does not): the three
	 * recursive calls (each at the same return address: its offset is
	 * the compiler's), main. */
	st = strstr(r.out, "@[\n");
	cr_assert(st, "%s", r.out);
	cr_assert(strstr(st, "@[\n    run_recurse+0\n    run_recurse+"), "%s", r.out);
	{
		const char *ret = st + strlen("@[\n    run_recurse+0\n    run_recurse+");
		unsigned long off = strtoul(ret, NULL, 10);
		char want[160];

		cr_assert_gt(off, 0, "%s", r.out);
		snprintf(want, sizeof(want), "\n    run_recurse+%lu\n    run_recurse+%lu\n"
			 "    run_recurse+%lu\n    main+", off, off, off);
		cr_assert(strstr(st, want), "%s", r.out);
	}
}

/* -f json: a stack in a map key has its frames indented by 4, as in
 * the text output (bpftrace's JSON key is the text key's stack), while a
 * printed stack value keeps bpftrace's 8.  The recursion's return
 * address is the compiler's: its offset is read from the key. */
Test(load, run_json_stack_key_and_value)
{
	static const char key[] = "{\"type\": \"map\", \"data\": {\"@\": {\"\\n    run_recurse+0\\n"
				  "    run_recurse+";
	struct run r;
	const char *k;
	unsigned long off;
	char want[256];

	cli_run(&r, "%s run -f json -o /dev/stdout -e 'uprobe:%s:run_recurse /arg0 == 0/ "
	    "{ @[ustack(2)] = count(); print(ustack(1)); }' -c '%s recurse 3'", kprobe,
	    run_target, run_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	k = strstr(r.out, key);
	cr_assert(k, "%s", r.out);
	off = strtoul(k + strlen(key), NULL, 10);
	cr_assert_gt(off, 0, "%s", r.out);
	snprintf(want, sizeof(want), "%s%lu\\n\": 1}}}\n", key, off);
	cr_assert(strstr(r.out, want), "%s", r.out);
	cr_assert(strstr(r.out, "{\"type\": \"value\", \"data\": \"\\n        run_recurse+0\\n\"}\n"),
		  "%s", r.out);
}

/* Attached to a running process for a while: counts, END, and the
 * process goes on unprobed. */
Test(load, run_attach_interval_end)
{
	struct run r;
	pid_t pid;

	pid = bg_start_of(run_target, "ticks 100000 2");
	cli_run(&r, "%s run -o /dev/stdout -e 'uprobe:%s:run_tick { @t = count(); } "
	    "interval:ms:100 { @i = @i + 1; if (@i == 3) { exit(); } } END { printf(\"end\\n\"); }' "
	    "-p %d", kprobe, run_target, (int)pid);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "end\n"), "%s", r.out);
	cr_assert(strstr(r.out, "@i: 3\n"), "%s", r.out);
	cr_assert_gt(atol(strstr(r.out, "@t: ") + 4), 50, "%s", r.out);
	cli_run(&r, "%s list -p %d", kprobe, (int)pid);
	cr_assert_null(strstr(r.out, "run_tick"), "%s", r.out);
	cr_assert_eq(waitpid(pid, NULL, WNOHANG), 0, "the target died");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* What cannot be kept is dropped and reported, never waited for: threads
 * beyond the rings lose their printf lines ("Lost N events", as bpftrace
 * says it), a full map its new keys (--map-keys). */
Test(load, run_losses_reported)
{
	struct run r;
	const char *lost;

	cli_run(&r, "KPROBE_RINGS=1 %s run -o /dev/stdout -e 'uprobe:%s:run_value { printf(\"x\\n\"); }' "
	    "-c '%s threads 4 200'", kprobe, run_target, run_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	lost = strstr(r.out, "\nLost ");
	cr_assert(lost, "%s", r.err);
	cr_assert_eq(count_lines(r.out, "x") + atol(lost + 6), 800, "%s", r.err);

	cli_run(&r, "%s run --map-keys 3 -o /dev/stdout -e 'uprobe:%s:run_value { @[arg1] = count(); }' "
	    "-c '%s calls 30'", kprobe, run_target, run_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(count_lines(r.out, "@["), 3, "%s", r.out);
	cr_assert(strstr(r.err, "27 map updates dropped"), "%s", r.err);
}

/* A launched command's standard output is its own: the program's output,
 * maps and bpftrace's closing newlines go to the results' stream. */
Test(load, run_leaves_command_stdout_alone)
{
	struct run r;

	cli_run(&r, "%s run -e 'BEGIN { printf(\"hi\\n\"); } uprobe:%s:run_value { @c = count(); }' "
	    "-c '%s calls 3'", kprobe, run_target, run_target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_str_eq(r.out, "sum 6\n");
	cr_assert_str_eq(r.err, "Attaching 2 probes...\nhi\n\n\n@c: 3\n");
	cli_run(&r, "%s load %s target_add 0 -- %s calls 5", kprobe, example, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_str_eq(r.out, "sum 30\n");
	cr_assert(strstr(r.err, "target_add: 5 calls, 0 missed\n"), "%s", r.err);
}
