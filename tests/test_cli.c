/* End-to-end tests of the kprobe CLI (build/kprobe) on real programs:
 * tests/cli/cli_target.c and the library tests/cli/cli_plugin.c. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_helpers.h"
#include "kprobes.h"

/* Whether the library jump-optimizes probes on this architecture (the
 * agent in the target is the same library). */
static bool arch_optimizes(void)
{
	kprobes_set_optimization(true);
	return kprobes_optimization();
}

/* Whether setpriv(1) of util-linux is there to run a command as another
 * user (busybox's setpriv cannot change uids). */
static bool setpriv_changes_uids(void)
{
	return system("setpriv --reuid=0 --regid=0 --clear-groups true >/dev/null 2>&1") == 0;
}

/* ---- paths: everything lives in the build directory above this test ---- */

static char build_dir[PATH_MAX];
static char kprobe[PATH_MAX + 16];
static char target[PATH_MAX + 32];
static char plugin[PATH_MAX + 32];
static char zlib_prog[PATH_MAX + 32];
static char agent[PATH_MAX + 32];
static char static_prog[PATH_MAX + 32];
static char hostile_prog[PATH_MAX + 32];
static char fake_agent[PATH_MAX + 32];
static char odd[PATH_MAX + 32];
static char slowctor[PATH_MAX + 32];

static void init_paths(void)
{
	snprintf(build_dir, sizeof(build_dir), "%s", cli_build_dir());
	cli_build_path(kprobe, sizeof(kprobe), "kprobe");
	cli_build_path(target, sizeof(target), "tests/cli/cli_target");
	cli_build_path(plugin, sizeof(plugin), "tests/cli/libcliplugin.so");
	cli_build_path(zlib_prog, sizeof(zlib_prog), "tests/cli/cli_zlib");
	cli_build_path(agent, sizeof(agent), "libkprobe-agent.so");
	cli_build_path(static_prog, sizeof(static_prog), "tests/cli/cli_static");
	cli_build_path(hostile_prog, sizeof(hostile_prog), "tests/cli/cli_hostile");
	cli_build_path(fake_agent, sizeof(fake_agent), "tests/cli/fake_agent");
	cli_build_path(odd, sizeof(odd), "tests/cli/odd_target");
	cli_build_path(slowctor, sizeof(slowctor), "tests/cli/libslowctor.so");
}

TestSuite(cli, .init = init_paths, .timeout = 20 * KP_TEST_SLOWDOWN);

/* ---- running commands: cli_run() (cli_helpers.h) ---- */

/* The file's content; "" if it does not exist (yet). */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	size_t len = 0, cap = 4096, n;
	char *buf;

	if (!f && errno == ENOENT)
		return strdup("");
	cr_assert(f, "cannot open %s", path);
	buf = malloc(cap);
	cr_assert(buf);
	while ((n = fread(buf + len, 1, cap - 1 - len, f)) > 0) {
		len += n;
		if (len == cap - 1) {
			cap *= 2;
			buf = realloc(buf, cap);
			cr_assert(buf);
		}
	}
	buf[len] = '\0';
	fclose(f);
	return buf;
}

static void temp_path(char *buf, size_t len, const char *what)
{
	static int seq;

	snprintf(buf, len, "/tmp/kprobe-test-%d-%d-%s", (int)getpid(), seq++, what);
}

/* A target running in the background with its stdout in a file. */
struct bg {
	pid_t pid;
	char out[128];
};

/* The target dies with the test, even a failed one; its output goes to a
 * file, nothing to the test's own stdout or stderr. */
static void bg_start_prog(struct bg *b, const char *prog, const char *args)
{
	char cmd[3 * PATH_MAX];

	temp_path(b->out, sizeof(b->out), "bg.out");
	snprintf(cmd, sizeof(cmd), "exec %s %s > %s 2>&1 < /dev/null", prog, args, b->out);
	b->pid = fork();
	cr_assert(b->pid >= 0);
	if (b->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
}

static void bg_start(struct bg *b, const char *args)
{
	bg_start_prog(b, target, args);
}

/* Shell words that wait (30 s at most) until the agent of process %d
 * lists a probe on target_add (the tool's path, then the pid, as
 * arguments): a session armed, however long the attach took. */
#define WAIT_ARMED "i=0; while [ $i -lt 600 ] && ! %s list -p %d 2>/dev/null | " \
	"grep -q target_add; do i=$((i+1)); sleep 0.05; done; "

/* bg_start() with the arguments as a printf format: a target's lifetime
 * stretched by KP_TEST_SLOWDOWN, as cli_run() stretches -d. */
static void bg_start_fmt(struct bg *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bg_start_fmt(struct bg *b, const char *fmt, ...)
{
	char args[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	bg_start(b, args);
}

/* Waits until the background target's output contains what. */
static void bg_wait_for(struct bg *b, const char *what)
{
	for (int i = 0; i < 500; i++) {
		char *s = slurp(b->out);
		bool found = strstr(s, what) != NULL;

		free(s);
		if (found)
			return;
		usleep(10000);
	}
	cr_assert_fail("the target never printed '%s'", what);
}

static int bg_stop(struct bg *b)
{
	int st;

	kill(b->pid, SIGKILL);
	waitpid(b->pid, &st, 0);
	unlink(b->out);
	return st;
}

static bool alive(pid_t pid)
{
	int st;

	return waitpid(pid, &st, WNOHANG) == 0;
}

/* ---- a minimal JSON validator ---- */

static const char *json_value(const char *p);

static const char *ws(const char *p)
{
	while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
		p++;
	return p;
}

static const char *json_string_end(const char *p)
{
	if (*p++ != '"')
		return NULL;
	for (; *p && *p != '"'; p++) {
		if ((unsigned char)*p < 0x20)
			return NULL;
		if (*p == '\\') {
			p++;
			if (*p == 'u') {
				for (int i = 1; i <= 4; i++)
					if (!strchr("0123456789abcdefABCDEF", p[i]) || !p[i])
						return NULL;
				p += 4;
			} else if (!*p || !strchr("\"\\/bfnrt", *p)) {
				return NULL;
			}
		}
	}
	return *p == '"' ? p + 1 : NULL;
}

static const char *json_number_end(const char *p)
{
	const char *start;

	if (*p == '-')
		p++;
	start = p;
	while (*p >= '0' && *p <= '9')
		p++;
	if (p == start)
		return NULL;
	if (*p == '.') {
		p++;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	return p;
}

static const char *json_container(const char *p, char close, bool object)
{
	p = ws(p + 1);
	if (*p == close)
		return p + 1;
	for (;;) {
		if (object) {
			p = json_string_end(ws(p));
			if (!p || *(p = ws(p)) != ':')
				return NULL;
			p++;
		}
		p = json_value(p);
		if (!p)
			return NULL;
		p = ws(p);
		if (*p == close)
			return p + 1;
		if (*p++ != ',')
			return NULL;
	}
}

static const char *json_value(const char *p)
{
	p = ws(p);
	switch (*p) {
	case '{':
		return json_container(p, '}', true);
	case '[':
		return json_container(p, ']', false);
	case '"':
		return json_string_end(p);
	case 't':
		return strncmp(p, "true", 4) ? NULL : p + 4;
	case 'f':
		return strncmp(p, "false", 5) ? NULL : p + 5;
	case 'n':
		return strncmp(p, "null", 4) ? NULL : p + 4;
	default:
		return json_number_end(p);
	}
}

static bool json_valid(const char *text)
{
	const char *end = json_value(text);

	return end && *ws(end) == '\0';
}

/* Every line a valid JSON document. */
static int json_lines_valid(const char *text)
{
	char *copy = strdup(text), *save = NULL;
	int n = 0;

	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!json_valid(line)) {
			free(copy);
			return -1;
		}
		n++;
	}
	free(copy);
	return n;
}

/* The number after "key": at or after p, or -1 (also when p is NULL: an
 * entry that is not there). */
static long long json_num(const char *p, const char *key)
{
	char pat[128];
	const char *at;

	if (!p)
		return -1;
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	at = strstr(p, pat);
	return at ? strtoll(at + strlen(pat), NULL, 10) : -1;
}

/* The count object of probe name in a count JSON document. */
static const char *count_entry(const char *json, const char *name)
{
	char pat[256];

	snprintf(pat, sizeof(pat), "{\"probe\":\"%s\"", name);
	return strstr(json, pat);
}

/* Without strstr(): sanitizers check its whole haystack on every call. */
static int count_occurrences(const char *s, const char *what)
{
	size_t len = strlen(what);
	int n = 0;

	for (; *s; s++)
		if (*s == what[0] && !strncmp(s, what, len))
			n++;
	return n;
}

static bool matches(const char *s, const char *re)
{
	regex_t r;
	bool m;

	cr_assert(!regcomp(&r, re, REG_EXTENDED | REG_NEWLINE));
	m = regexec(&r, s, 0, NULL, 0) == 0;
	regfree(&r);
	return m;
}

/* stderr past the line a registration of over a second prints first (as
 * stderr is no terminal): progress, not what the test looks at. */
static const char *past_progress(const char *err)
{
	if (!strncmp(err, "kprobe: registering ", 20) && strchr(err, '\n'))
		return strchr(err, '\n') + 1;
	return err;
}

/* An error: exit status 2 and one line naming the culprit. */
static void assert_bad(struct run *r, const char *culprit)
{
	const char *err = past_progress(r->err);

	cr_assert_eq(r->status, 2, "status %d, stderr: %s", r->status, r->err);
	cr_assert(!strncmp(err, "kprobe: ", 8), "stderr: %s", r->err);
	cr_assert_eq(count_occurrences(err, "\n"), 1, "not one line: %s", r->err);
	cr_assert(strstr(err, culprit), "'%s' not named in: %s", culprit, r->err);
}

/* ---- counts ---- */

Test(cli, count_exact)
{
	struct run r;

	cli_run(&r, "%s count target_add --format json -- %s calls 1000", kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	/* The results go to stderr: the command's stdout is its own. */
	cr_assert_str_eq(r.out, "sum 1498500\n", "program output changed: %s", r.out);
	cr_assert(count_entry(r.err, "target_add"), "%s", r.err);
	cr_assert_eq(json_num(count_entry(r.err, "target_add"), "hits"), 1000, "%s", r.err);
}

/* OBJECT as a path relative to the current directory, in PROBE syntax and
 * in a program, launched and attached: it names that file. */
Test(cli, object_by_relative_path)
{
	struct run r;
	struct bg b;

	cli_run(&r, "cd %s && %s count tests/cli/cli_target:target_add --format json -- "
	    "tests/cli/cli_target calls 100", build_dir, kprobe);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(json_num(count_entry(r.err, "target_add"), "hits"), 100, "%s", r.err);
	cli_run(&r, "cd %s && %s run -e 'uprobe:tests/cli/cli_target:target_add { @c = count(); }' "
	    "-- tests/cli/cli_target calls 100", build_dir, kprobe);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.err, "@c: 100\n"), "%s", r.err);
	bg_start(&b, "loop");
	usleep(100000);
	cli_run(&r, "cd %s && %s count tests/cli/cli_target:target_add --format json -d 0.3 -p %d",
	    build_dir, kprobe, (int)b.pid);
	bg_stop(&b);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_gt(json_num(count_entry(r.out, "target_add"), "hits"), 0, "%s", r.out);
}

Test(cli, count_exact_across_threads)
{
	struct run r;
	char out[128];
	char *json;
	const char *e;

	temp_path(out, sizeof(out), "count.json");
	cli_run(&r, "%s count target_add 'target_add%%return' --format json -o %s -- %s threads 8 5000",
	    kprobe, out, target);
	cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.err);
	json = slurp(out);
	cr_assert(json_valid(json), "invalid JSON: %s", json);
	e = count_entry(json, "target_add");
	cr_assert(e, "%s", json);
	cr_assert_eq(json_num(e, "hits"), 40000, "%s", json);
	cr_assert_eq(json_num(e, "missed"), 0, "%s", json);
	cr_assert(strstr(e, "\"object\":\"cli_target\""), "%s", json);
	cr_assert(matches(e, "\"address\":\"0x[0-9a-f]+\""), "%s", json);
	e = count_entry(json, "target_add%return");
	cr_assert(e, "%s", json);
	cr_assert_eq(json_num(e, "hits"), 40000, "%s", json);
	cr_assert_eq(json_num(json, "lost"), 0, "%s", json);
	free(json);
	unlink(out);
}

Test(cli, count_text_and_glob)
{
	struct run r;

	cli_run(&r, "%s count 'target_*' -z -- %s calls 7", kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(matches(r.err, "^PROBE +ADDRESS +OBJECT +HITS +MISSED$"), "%s", r.err);
	cr_assert(matches(r.err, "^target_add +0x[0-9a-f]{16} +cli_target +7 +0$"), "%s", r.err);
	cr_assert(matches(r.err, "^target_greet +0x[0-9a-f]{16} +cli_target +0 +0$"), "%s", r.err);
}

/* Rows by hits, most first; probes without hits only with -z (JSON keeps
 * them all). */
Test(cli, count_sorted_by_hits_zeros_on_request)
{
	struct run r;
	const char *lines, *add;

	cli_run(&r, "%s count target_greet target_lines target_add target_recurse -- %s recurse 3",
	    kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(!strstr(r.err, "target_greet") && !strstr(r.err, "target_add"), "%s", r.err);
	cr_assert(matches(r.err, "^\\(3 probes with no hits not shown: -z shows them\\)$"), "%s",
		  r.err);
	cr_assert(matches(r.err, "^target_recurse +0x[0-9a-f]{16} +cli_target +4 +0$"), "%s", r.err);
	cli_run(&r, "%s count target_greet target_lines target_add -z -- %s lines 3", kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	lines = strstr(r.err, "\ntarget_lines ");
	cr_assert(lines, "%s", r.err);
	cr_assert(matches(r.err, "^PROBE +ADDRESS +OBJECT +HITS +MISSED\ntarget_lines "), "%s",
		  r.err);
	/* Ties keep the probes' order. */
	add = strstr(r.err, "\ntarget_add ");
	cr_assert(add && strstr(r.err, "\ntarget_greet ") < add, "%s", r.err);
	cli_run(&r, "%s count target_greet target_lines --format json -- %s lines 3", kprobe, target);
	cr_assert_eq(json_num(count_entry(r.err, "target_greet"), "hits"), 0, "%s", r.err);
	cli_run(&r, "%s trace target_greet -z -- %s lines 3", kprobe, target);
	assert_bad(&r, "-z");
}

/* With -f over several processes the table says which row is whose. */
Test(cli, count_pid_column_for_several_processes)
{
	struct run r;

	cli_run(&r, "%s count -f target_add -- %s spawn 3", kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(matches(r.err, "^ +PID +PROBE +ADDRESS +OBJECT +HITS +MISSED$"), "%s", r.err);
	cr_assert(matches(r.err, "^ +[0-9]+ +target_add +0x[0-9a-f]{16} +cli_target +3 +0\n"
			  " +[0-9]+ +target_add +0x[0-9a-f]{16} +cli_target +1 +0$"), "%s", r.err);
	cli_run(&r, "%s count target_add -- %s calls 3", kprobe, target);
	cr_assert(matches(r.err, "^PROBE +ADDRESS"), "%s", r.err);
}

/* A glob over all of libc: thousands of probes, registered in batches,
 * those libkprobes refuses skipped with a note; exact counts still. */
Test(cli, count_huge_glob)
{
	struct run r;
	char out[128];
	char *json;
	const char *e;

	temp_path(out, sizeof(out), "glob.json");
	cli_run(&r, "%s count 'libc.so.6:*' --format json -o %s -- %s threads 4 100", kprobe, out,
	    target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_str_eq(r.out, "threads done\n");
	json = slurp(out);
	cr_assert(json_valid(json));
	cr_assert_gt(count_occurrences(json, "{\"probe\":"), 1000, "%s", r.err);
	e = count_entry(json, "pthread_create");
	cr_assert(e, "%s", r.err);
	cr_assert_eq(json_num(e, "hits"), 4);
	cr_assert_eq(json_num(count_entry(json, "pthread_join"), "hits"), 4);
	cr_assert(!r.err[0] || strstr(r.err, "skipped"), "%s", r.err);
	free(json);
	unlink(out);
}

Test(cli, count_source_line)
{
	struct run r;

	cli_run(&r, "%s count cli_target.c:1003 --format json -- %s lines 5", kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(json_num(count_entry(r.err, "cli_target.c:1003"), "hits"), 5, "%s", r.err);
}

/* A statement spread over several line-table rows is one probe, at its
 * first address; a line inlined into two functions is one per copy. */
Test(cli, source_line_is_one_probe_per_statement)
{
	struct run r;
	const char *e;

	cli_run(&r, "%s count cli_target.c:2003 cli_target.c:2009 --format json -- %s statements 5",
	    kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(count_occurrences(r.err, "\"probe\":\"cli_target.c:2003\""), 1, "%s", r.err);
	cr_assert_eq(json_num(count_entry(r.err, "cli_target.c:2003"), "hits"), 5, "%s", r.err);
	cr_assert_eq(count_occurrences(r.err, "\"probe\":\"cli_target.c:2009\""), 2, "%s", r.err);
	e = count_entry(r.err, "cli_target.c:2009");
	cr_assert_eq(json_num(e, "hits"), 5, "%s", r.err);
	cr_assert_eq(json_num(count_entry(e + 1, "cli_target.c:2009"), "hits"), 5, "%s", r.err);
}

/* ---- the agent's footprint in the target ---- */

/* The agent needs no shared library but libc and the loader, and exports
 * none of the libraries it carries. */
Test(cli, agent_needs_only_libc)
{
	struct run r;

	if (system("readelf --version >/dev/null 2>&1 && nm --version >/dev/null 2>&1"))
		cr_skip_test("binutils' readelf and nm are not installed here");
	cli_run(&r, "readelf -dW %s | grep NEEDED", agent);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(matches(r.out, "\\[libc\\.so\\.6\\]"), "%s", r.out);
	cr_assert_eq(count_occurrences(r.out, "NEEDED"), 2, "%s", r.out);
#if defined(__aarch64__)
	cr_assert(matches(r.out, "\\[ld-linux-aarch64\\.so\\.1\\]"), "%s", r.out);
#else
	cr_assert(matches(r.out, "\\[ld-linux-x86-64\\.so\\.2\\]"), "%s", r.out);
#endif
	cli_run(&r, "nm -D --defined-only %s | grep -E ' (Zydis|Zyan|elf_|gelf_|dwarf_|deflate|inflate"
	    "|adler32|crc32|lzma_|BZ2_)'", agent);
	cr_assert_eq(r.status, 1, "exported: %s", r.out);
}

/* adler32 is in the program's libz and in the agent's static copy: an
 * unqualified probe counts the program's calls. */
Test(cli, unqualified_symbol_resolves_into_the_program)
{
	struct run r;

	cli_run(&r, "%s count adler32 --format json -- %s 25", kprobe, zlib_prog);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "adler32 "), "program output changed: %s", r.out);
	cr_assert(count_entry(r.err, "adler32"), "%s", r.err);
	cr_assert_eq(json_num(count_entry(r.err, "adler32"), "hits"), 26, "%s", r.err);
	cr_assert(strstr(count_entry(r.err, "adler32"), "\"object\":\"libz.so"), "%s", r.err);
}

/* A program without libz has no adler32: the agent's copy is not one. */
Test(cli, unqualified_symbol_never_resolves_into_the_agent)
{
	struct run r;

	cli_run(&r, "%s count adler32 -- %s calls 1", kprobe, target);
	assert_bad(&r, "adler32");
	cli_run(&r, "%s count 'Zydis*' -- %s calls 1", kprobe, target);
	assert_bad(&r, "Zydis*");
}

/* The program's own lookups find nothing of the agent's libraries. */
Test(cli, program_lookups_never_find_the_agents_libraries)
{
	struct run r;

	cli_run(&r, "%s count target_add -- %s dlsym ZydisDecoderInit elf_begin dwarf_begin deflate "
	    "lzma_code BZ2_bzDecompress malloc", kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "ZydisDecoderInit: absent\nelf_begin: absent\n"
			 "dwarf_begin: absent\ndeflate: absent\nlzma_code: absent\n"
			 "BZ2_bzDecompress: absent\nmalloc: found\n"), "%s", r.out);
}

/* ---- trace ---- */

Test(cli, trace_args_and_retval)
{
	struct run r;
	char out[128];
	char *text;

	temp_path(out, sizeof(out), "trace.json");
	cli_run(&r, "%s trace 'target_add a=arg1:s64 b=arg2:u64' 'target_add%%return r=retval:s64' "
	    "--format json -o %s -- %s calls 3", kprobe, out, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "sum 9\n"), "%s", r.out);
	text = slurp(out);
	cr_assert_eq(json_lines_valid(text), 6, "%s", text);
	cr_assert(matches(text, "^\\{\"time_ns\":[0-9]+,\"pid\":[0-9]+,\"tid\":[0-9]+,"
			  "\"probe\":\"target_add\",\"address\":\"0x[0-9a-f]+\","
			  "\"args\":\\{\"a\":0,\"b\":0\\}\\}$"), "%s", text);
	cr_assert(strstr(text, "\"args\":{\"a\":1,\"b\":2}"), "%s", text);
	cr_assert(strstr(text, "\"args\":{\"a\":2,\"b\":4}"), "%s", text);
	cr_assert(strstr(text, "\"probe\":\"target_add%return\""), "%s", text);
	cr_assert(strstr(text, "\"args\":{\"r\":3}"), "%s", text);
	cr_assert(strstr(text, "\"args\":{\"r\":6}"), "%s", text);
	free(text);
	unlink(out);
}

/* The narrow integer types keep the low bits, sign-extended for sNN. */
Test(cli, trace_narrow_integer_types)
{
	struct run r;

	cli_run(&r, "%s trace 'target_add a=arg1:s32 b=arg1:u32 c=arg1:s16 d=arg1:u16 e=arg1:s8 "
	    "f=arg1:u8 g=arg2:s16 h=arg2:u8' -- %s narrow", kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(matches(r.err, " target_add a=-2 b=4294967294 c=-2 d=65534 e=-2 f=254 g=-128 "
			  "h=128$"), "%s", r.err);
	cli_run(&r, "%s trace 'target_add%%return r=retval:s16 u=retval:u16 s=retval:s64' --format json "
	    "-- %s narrow", kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.err, "\"args\":{\"r\":-130,\"u\":65406,\"s\":33554302}"), "%s", r.err);
	cli_run(&r, "%s trace 'target_add arg1:s12' -- %s narrow", kprobe, target);
	assert_bad(&r, "arg1:s12");
}

/* argN:f64 is the N-th floating-point argument (xmm0..xmm7), numbered apart
 * from the integer ones; retval:f64 is xmm0 at the return. */
Test(cli, trace_floating_point_arguments)
{
	struct run r;
	char out[128];
	char *json;

	temp_path(out, sizeof(out), "f64.json");
	cli_run(&r, "%s trace 'target_scale n=arg1:s64 k=arg2:s32 x=arg1:f64 y=arg2:f64' "
	    "'target_scale%%return r=retval:f64' -- %s float 3", kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "15\n"), "program output changed: %s", r.out);
	cr_assert_eq(count_occurrences(r.err, " target_scale n=3 k=2 x=1.5 y=0.25\n"), 3, "%s",
		     r.err);
	cr_assert_eq(count_occurrences(r.err, " target_scale%return r=5\n"), 3, "%s", r.err);
	cli_run(&r, "%s trace 'target_scale y=arg2:f64' --format json -o %s -- %s float 1", kprobe, out,
	    target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	json = slurp(out);
	cr_assert(strstr(json, "\"args\":{\"y\":0.25}"), "%s", json);
	free(json);
	unlink(out);
	/* Only where the vector registers hold them. */
	cli_run(&r, "%s trace 'target_scale+4 arg1:f64' -- %s float", kprobe, target);
	assert_bad(&r, "arg1:f64");
	cli_run(&r, "%s trace 'target_scale%%return arg1:f64' -- %s float", kprobe, target);
	assert_bad(&r, "arg1:f64");
	cli_run(&r, "%s trace 'target_scale arg9:f64' -- %s float", kprobe, target);
	assert_bad(&r, "arg9:f64");
	cli_run(&r, "%s trace 'target_scale arg7:s64' -- %s float", kprobe, target);
	assert_bad(&r, "arg7:s64");
}

Test(cli, trace_strings_never_crash)
{
	struct run r;

	cli_run(&r, "%s trace 'target_greet who=arg1:string n=arg2:u64' --format json -- %s greet",
	    kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "30 40\n"), "the program misbehaved: %s", r.out);
	cr_assert(strstr(r.err, "\"args\":{\"who\":\"hello\",\"n\":3}"), "%s", r.err);
	cr_assert(strstr(r.err, "\"args\":{\"who\":null,\"n\":4}"), "%s", r.err);
	cli_run(&r, "%s trace 'target_greet who=arg1:string' -- %s greet", kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.err, "who=\"hello\""), "%s", r.err);
	cr_assert(strstr(r.err, "who=(fault 0x1)"), "%s", r.err);
}

Test(cli, trace_text_lines)
{
	struct run r;

	cli_run(&r, "%s trace 'target_add arg1:u64' -- %s calls 2", kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(matches(r.err, "^ *[0-9]+\\.[0-9]{6} +[0-9]+/[0-9]+ +target_add arg1=0$"),
		  "%s", r.err);
	cr_assert(matches(r.err, "^ *[0-9]+\\.[0-9]{6} +[0-9]+/[0-9]+ +target_add arg1=1$"),
		  "%s", r.err);
}

Test(cli, trace_chrome_pairs)
{
	struct run r;
	char out[128];
	char *text;

	temp_path(out, sizeof(out), "chrome.json");
	cli_run(&r, "%s trace target_recurse%%return --format chrome -o %s -- %s recurse 5", kprobe,
	    out, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	text = slurp(out);
	cr_assert(json_valid(text), "invalid JSON: %s", text);
	cr_assert(!strncmp(text, "{\"traceEvents\":[", 16), "%s", text);
	cr_assert_eq(count_occurrences(text, "\"ph\":\"B\""), 6, "%s", text);
	cr_assert_eq(count_occurrences(text, "\"ph\":\"E\""), 6, "%s", text);
	free(text);
	/* With an entry probe too, the entry is the "B" and carries the args. */
	cli_run(&r, "%s trace 'target_greet n=arg2:u64' 'target_greet%%return' --format chrome -o %s "
	    "-- %s greet", kprobe, out, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	text = slurp(out);
	cr_assert(json_valid(text), "invalid JSON: %s", text);
	cr_assert_eq(count_occurrences(text, "\"ph\":\"B\""), 2, "%s", text);
	cr_assert_eq(count_occurrences(text, "\"ph\":\"E\""), 2, "%s", text);
	cr_assert(strstr(text, "\"args\":{\"n\":3}"), "%s", text);
	free(text);
	unlink(out);
}

/* Every event either arrives or is counted as lost; none is invented. */
Test(cli, trace_events_arrive_or_count_as_lost)
{
	struct run r;
	char out[128];
	char *text;
	long long lost = 0;
	const char *l;
	int lines;

	temp_path(out, sizeof(out), "burst.json");
	cli_run(&r, "%s trace target_add --format json -o %s -- %s threads 4 20000", kprobe, out,
	    target);
	cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.err);
	l = strstr(r.err, "lost ");
	if (l)
		lost = strtoll(l + 5, NULL, 10);
	text = slurp(out);
	lines = count_occurrences(text, "\n");
	cr_assert_eq(lines + lost, 80000, "%d events + %lld lost", lines, lost);
	free(text);
	unlink(out);
}

/* ---- latency ---- */

Test(cli, latency_buckets)
{
	struct run r;
	long long total = 0, next_low = 0;
	const char *b;

	cli_run(&r, "%s latency target_spin_ns --format json -- %s spin 300000 20", kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(json_valid(past_progress(r.err)), "invalid JSON: %s", r.err);
	cr_assert(strstr(r.err, "{\"function\":\"target_spin_ns\",\"count\":20,\"histogram\":["),
		  "%s", r.err);
	/* 300 us lies in [262144, 524287]; preemption can only make it longer. */
	b = strstr(r.err, "\"histogram\":[{\"low_ns\":262144,\"high_ns\":524287,\"count\":");
	cr_assert(b, "%s", r.err);
	cr_assert_geq(json_num(b, "count"), 10, "%s", r.err);
	for (b = strstr(r.err, "\"low_ns\""); b; b = strstr(b + 1, "\"low_ns\"")) {
		long long low = json_num(b, "low_ns"), high = json_num(b, "high_ns");

		cr_assert(low == 262144 || low == next_low, "%s", r.err);
		cr_assert_eq(high, 2 * low - 1, "%s", r.err);
		next_low = 2 * low;
		total += json_num(b, "count");
	}
	cr_assert_eq(total, 20, "%s", r.err);
	cli_run(&r, "%s latency target_spin_ns -- %s spin 300000 3", kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.err, "latency of target_spin_ns: 3 calls"), "%s", r.err);
	/* The text form: log2 buckets as funclatency prints them.  Which
	 * bucket 3 calls land in depends on preemption on a loaded machine
	 * (only upward: never below 300 us's). */
	cr_assert(matches(r.err, "^ +[0-9]+ -> [0-9]+ +: [1-3] +\\|\\*+ *\\|$"), "%s", r.err);
	cr_assert(!matches(r.err, "^ +131072 -> 262143 +:"), "%s", r.err);
}

/* ---- the command ---- */

Test(cli, exit_status_passes_through)
{
	struct run r;

	cr_assert_eq(cli_run(&r, "%s count target_add -- %s exit 42", kprobe, target), 42, "%s", r.err);
	cr_assert_eq(cli_run(&r, "%s count target_add -- %s kill 9", kprobe, target), 137, "%s",
		     r.err);
	cr_assert_eq(cli_run(&r, "%s trace target_add -- %s calls 1", kprobe, target), 0, "%s", r.err);
	/* The command's stdin, stdout and stderr are its own. */
	cli_run(&r, "echo hi | %s count target_add -- /bin/cat", kprobe);
	cr_assert_eq(r.status, 2, "%s", r.err);	/* cat has no target_add */
	cli_run(&r, "echo hi | %s count 'libc.so.6:read' -- /bin/cat", kprobe);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(!strncmp(r.out, "hi\n", 3), "%s", r.out);
}

/* A library named by a path through a symbolic link (on Debian /lib is
 * usr/lib: the loader maps /lib/.../libc.so.6, whose real path is
 * /usr/lib/...), by that real path, and by bpftrace's short name
 * ("libc"), in PROBE syntax and in a program: the same library each time,
 * and its functions found. */
/* (a suite of its own for its longer time: Criterion leaks a little when a
 * test's own timeout overrides its suite's) */
TestSuite(cli_long, .init = init_paths, .timeout = 60 * KP_TEST_SLOWDOWN);

Test(cli_long, library_by_linked_path_and_short_name)
{
	char real[PATH_MAX], dir[] = "/tmp/kprobe-test-shortXXXXXX";
	const char *names[3];
	struct link_map *map;
	struct run r;
	void *libc;
	int n = 0;

	/* libc's path as the loader mapped it (not through a symbol: under
	 * ASan, read is the sanitizer's) */
	cr_assert_not_null(libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD));
	cr_assert_eq(dlinfo(libc, RTLD_DI_LINKMAP, &map), 0);
	cr_assert(map->l_name && map->l_name[0] == '/', "%s", map->l_name);
	cr_assert_not_null(realpath(map->l_name, real));
	names[n++] = map->l_name;
	if (strcmp(real, map->l_name))
		names[n++] = real;
	names[n++] = "libc";
	for (int i = 0; i < n; i++) {
		cli_run(&r, "echo hi | %s count '%s:read' --format json -- /bin/cat", kprobe, names[i]);
		cr_assert_eq(r.status, 0, "%s: %s", names[i], r.err);
		cr_assert(!strncmp(r.out, "hi\n", 3), "%s", r.out);
		cr_assert_geq(json_num(count_entry(r.err, "read"), "hits"), 1, "%s: %s", names[i],
			      r.err);
		cli_run(&r, "echo hi | %s run -e 'uprobe:%s:read { @c = count(); }' -- /bin/cat",
			kprobe, names[i]);
		cr_assert_eq(r.status, 0, "%s: %s", names[i], r.err);
		cr_assert(strstr(r.err, "@c: "), "%s: %s", names[i], r.err);
	}
	/* record: a probe and -F with the short name */
	cr_assert(mkdtemp(dir));
	cli_run(&r, "echo hi | %s record -o %s/p 'libc:read' -- /bin/cat && %s report %s/p", kprobe,
		dir, kprobe, dir);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, " read\n"), "%s\n%s", r.out, r.err);
	cli_run(&r, "echo hi | %s record -o %s/f -F libc -- /bin/cat && %s report %s/f", kprobe, dir,
		kprobe, dir);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, " read\n"), "%s\n%s", r.out, r.err);
	cli_run(&r, "rm -rf %s", dir);
	dlclose(libc);
}

/* A C++ name with spaces in its signature, or after operator, is one
 * PROBE word (the shell passes it whole; the matching ignores spaces),
 * and a return probe on it is shown with %return, as other names are. */
Test(cli, cxx_names_with_spaces_and_return)
{
	char cxx[PATH_MAX];
	struct run r;

	cli_build_path(cxx, sizeof(cxx), "tests/cli/cli_record_cxx");
	cli_run(&r, "%s count --format json 'catcher( int )%%return' "
		"'libstdc++:std::runtime_error::runtime_error(char const*)' "
		"'libstdc++:operator new(unsigned long)%%return' -- %s 5", kprobe, cxx);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(json_num(count_entry(r.err, "catcher(int)%return"), "hits"), 5, "%s", r.err);
	/* its complete and base object constructors are one function, one
	 * probe (aliases: C1 and C2 at one address) */
	cr_assert_eq(json_num(count_entry(r.err, "std::runtime_error::runtime_error(char const*)"),
			      "hits"), 5, "%s", r.err);
	cr_assert_eq(count_occurrences(r.err, "\"std::runtime_error::runtime_error(char const*)\""),
		     1, "%s", r.err);
	cr_assert_not_null(count_entry(r.err, "operator new(unsigned long)%return"), "%s", r.err);
	cli_run(&r, "%s trace 'catcher(int) arg1' -- %s 2", kprobe, cxx);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.err, "catcher(int) arg1=0x1"), "%s", r.err);
}

/* A probe waiting for an object the command never loads placed nothing:
 * said at the end, after the others' results. */
Test(cli, probe_on_an_object_never_loaded_is_reported)
{
	struct run r;

	cli_run(&r, "%s count 'libnever_loaded.so.7:f' target_add -- %s calls 3", kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.err, "nothing was probed for 'libnever_loaded.so.7:f'"), "%s", r.err);
	cr_assert(matches(r.err, "^target_add .* 3 +0$"), "%s", r.err);
	cli_run(&r, "%s count target_add -- %s calls 3", kprobe, target);
	cr_assert_null(strstr(r.err, "nothing was probed"), "%s", r.err);
}

Test(cli, duration_ends_probing_not_the_command)
{
	struct run r;
	char out[128];
	char *json;

	/* (cli_run() stretches -d by KP_TEST_SLOWDOWN: the loop too) */
	const int ticks = 100 * KP_TEST_SLOWDOWN;
	char last[64];

	temp_path(out, sizeof(out), "dur.json");
	cli_run(&r, "%s count target_add -d 0.2 --format json -o %s -- %s loop %d", kprobe, out,
	    target, ticks);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(last, sizeof(last), "tick %d sum %d\n", ticks - 1, ticks * (ticks - 1) / 2);
	cr_assert(strstr(r.out, last), "%s", r.out);
	json = slurp(out);
	cr_assert_gt(json_num(count_entry(json, "target_add"), "hits"), 0, "%s", json);
	cr_assert_lt(json_num(count_entry(json, "target_add"), "hits"), ticks, "%s", json);
	free(json);
	unlink(out);
}

Test(cli, dlopen_deferred)
{
	struct run r;

	cli_run(&r, "%s count %s:plugin_work --format json -- %s dlopen %s 7", kprobe, plugin, target,
	    plugin);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(json_num(count_entry(r.err, "plugin_work"), "hits"), 7, "%s", r.err);
	cr_assert(strstr(r.err, "\"object\":\"libcliplugin.so\""), "%s", r.err);
	/* By file name: found beside the program, armed when it loads. */
	cli_run(&r, "%s count libcliplugin.so:plugin_work --format json -- %s dlopen %s 5", kprobe,
	    target, plugin);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(json_num(count_entry(r.err, "plugin_work"), "hits"), 5, "%s", r.err);
}

/* A library dlopen'ed by full path from a directory off the search path,
 * probed by file name: armed when it loads. */
Test(cli, dlopen_deferred_by_file_name_anywhere)
{
	struct run r;
	char dir[128], lib[256];

	temp_path(dir, sizeof(dir), "far");
	cr_assert(!mkdir(dir, 0700) || errno == EEXIST);
	snprintf(lib, sizeof(lib), "%s/libkpfar.so", dir);
	cli_run(&r, "cp %s %s", plugin, lib);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cli_run(&r, "%s count libkpfar.so:plugin_work --format json -- %s dlopen %s 4", kprobe, target,
	    lib);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(json_num(count_entry(r.err, "plugin_work"), "hits"), 4, "%s", r.err);
	cr_assert(strstr(r.err, "\"object\":\"libkpfar.so\""), "%s", r.err);
	/* Never loaded: no probe, no error, the command runs. */
	cli_run(&r, "%s count libkpfar.so:plugin_work --format json -- %s calls 2", kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(!count_entry(r.err, "plugin_work"), "%s", r.err);
	unlink(lib);
	rmdir(dir);
}

/* What Linux uprobes count for dl_iterate_phdr in libc over `args` run by
 * the target, through bpftrace (only the target's: a uprobe is on the file
 * for every process); -1 when bpftrace cannot run here. */
static long uprobe_dl_iterate_count(const char *args)
{
	struct run r;
	Dl_info libc;
	const char *at;

	if (!dladdr((void *)dl_iterate_phdr, &libc) || !libc.dli_fname)
		return -1;
	cli_run(&r, "command -v bpftrace >/dev/null && timeout 60 bpftrace -e "
	    "'uprobe:%s:dl_iterate_phdr /pid == cpid/ { @ = count(); }' -c '%s %s' 2>&1",
	    libc.dli_fname, target, args);
	at = strstr(r.out, "\n@: ");
	if (r.status != 0 || !at)
		return -1;
	return strtol(at + 4, NULL, 10);
}

/* The agent's dlclose() interposer walks the loader's list on the
 * program's thread: those calls are the library's, not the program's.
 * Exactly the program's own dl_iterate_phdr() calls count, as with
 * uprobes (the next test). */
#define DLWALK_ARGS(buf) snprintf(buf, sizeof(buf), "dlwalk %s 5 3", plugin)

Test(cli, count_leaves_out_library_calls_on_program_threads)
{
	char args[PATH_MAX + 64];
	const char *e;
	struct run r;

	DLWALK_ARGS(args);
	cli_run(&r, "%s count dl_iterate_phdr --format json -- %s %s", kprobe, target, args);
	cr_assert_eq(r.status, 0, "%s", r.err);
	e = count_entry(r.err, "dl_iterate_phdr");
	cr_assert(e, "%s", r.err);
	cr_assert_eq(json_num(e, "hits"), 3, "%s", r.err);
}

Test(cli, dl_iterate_phdr_calls_counted_as_uprobes_count_them)
{
	char args[PATH_MAX + 64];
	long oracle;

	DLWALK_ARGS(args);
	oracle = uprobe_dl_iterate_count(args);
	if (oracle < 0)
		cr_skip_test("bpftrace cannot run here: the uprobe oracle is skipped");
	cr_assert_eq(oracle, 3, "uprobes counted %ld", oracle);
}

Test(cli, fork_children_keep_working)
{
	struct run r;

	cli_run(&r, "%s count target_add --format json -- %s fork 10", kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "child status 7\n"), "%s", r.out);
	cr_assert_eq(json_num(count_entry(r.err, "target_add"), "hits"), 10, "%s", r.err);
	/* -f: the child's hits count too. */
	cli_run(&r, "%s count -f target_add --format json -- %s fork 10", kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "child status 7\n"), "%s", r.out);
	cr_assert_eq(json_num(count_entry(r.err, "target_add"), "hits"), 20, "%s", r.err);
}

Test(cli, follow_exec)
{
	struct run r;
	const char *first, *second;

	cli_run(&r, "%s count -f target_add --format json -- %s exec 10", kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	first = count_entry(r.err, "target_add");
	cr_assert(first, "%s", r.err);
	second = count_entry(first + 1, "target_add");
	cr_assert(second, "no entry for the exec'd program: %s", r.err);
	cr_assert_eq(json_num(first, "hits") + json_num(second, "hits"), 11, "%s", r.err);
	/* Without -f the exec'd program runs without the agent. */
	cli_run(&r, "%s count target_add --format json -- %s exec 10", kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(json_num(count_entry(r.err, "target_add"), "hits"), 1, "%s", r.err);
}

/* ---- attach ---- */

/* The loop target prints "tick N sum S" with S = N(N+1)/2: any disturbance
 * shows in the numbers. */
static void assert_loop_output_correct(const char *path)
{
	char *text = slurp(path), *save = NULL;
	long prev_sum = -1, ticks = 0;

	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		long n, sum;

		cr_assert_eq(sscanf(line, "tick %ld sum %ld", &n, &sum), 2, "bad line '%s'", line);
		cr_assert_eq(sum, n * (n + 1) / 2, "wrong sum in '%s'", line);
		cr_assert(prev_sum < 0 || n == ticks, "tick out of order: '%s'", line);
		prev_sum = sum;
		ticks = n + 1;
	}
	free(text);
}

static void assert_untraced(pid_t pid)
{
	char path[64], *status;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	status = slurp(path);
	cr_assert(strstr(status, "\nTracerPid:\t0\n"), "still traced: %s", status);
	free(status);
}

/* After a -p session: no thread of the agent or the library, no
 * descriptor (the single-threaded loop target had none of its own). */
static void assert_nothing_of_ours_runs(pid_t pid)
{
	char path[64], cmd[192];
	struct run r;

	for (int i = 0; i < 100; i++) {	/* the control thread ends just after */
		snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
		cli_run(&r, "ls %s | wc -l", path);
		if (atoi(r.out) == 1)
			break;
		usleep(10000);
	}
	cr_assert_eq(atoi(r.out), 1, "threads left: %s", r.out);
	snprintf(cmd, sizeof(cmd), "ls -l /proc/%d/fd | grep -E 'socket:|/mem$|memfd:'", (int)pid);
	cli_run(&r, "%s", cmd);
	cr_assert_str_eq(r.out, "", "descriptors left: %s", r.out);
}

Test(cli, attach_and_detach_unharmed)
{
	struct bg b;
	struct run r;
	char *before, *after;

	bg_start(&b, "loop 4000");
	bg_wait_for(&b, "tick 3 ");
	cli_run(&r, "%s count target_add --format json -d 0.5 -p %d", kprobe, (int)b.pid);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(json_valid(r.out), "%s", r.out);
	cr_assert_gt(json_num(count_entry(r.out, "target_add"), "hits"), 10, "%s", r.out);
	/* Detached, unprobed, and still running correctly. */
	cr_assert(alive(b.pid));
	assert_untraced(b.pid);
	assert_nothing_of_ours_runs(b.pid);
	cli_run(&r, "%s list -p %d", kprobe, (int)b.pid);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_str_eq(r.out, "");
	before = slurp(b.out);
	usleep(100000);
	after = slurp(b.out);
	cr_assert_gt(strlen(after), strlen(before), "the target stopped printing");
	free(before);
	free(after);
	/* Again, with the agent already in place (dormant). */
	cli_run(&r, "%s trace 'target_add s=arg1:s64' --format json -d 0.3 -p %d", kprobe, (int)b.pid);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_gt(json_lines_valid(r.out), 5, "%s", r.out);
	cr_assert(alive(b.pid));
	usleep(50000);
	assert_loop_output_correct(b.out);
	bg_stop(&b);
}

Test(cli, attach_to_busy_threads)
{
	struct bg b;
	struct run r;
	int st;

	/* long enough for three attaches under ASan on a loaded machine */
	bg_start_fmt(&b, "busy 3 %d", 6 * KP_TEST_SLOWDOWN);
	bg_wait_for(&b, "started");
	for (int i = 0; i < 3; i++) {
		cli_run(&r, "%s count target_add 'target_add%%return' --format json -d 0.2 -p %d", kprobe,
		    (int)b.pid);
		cr_assert_eq(r.status, 0, "%s", r.err);
		cr_assert_gt(json_num(count_entry(r.out, "target_add"), "hits"), 0, "%s", r.out);
	}
	cr_assert_eq(waitpid(b.pid, &st, 0), b.pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
	{
		char *out = slurp(b.out);

		cr_assert_str_eq(out, "started\nbusy ok\n");
		free(out);
	}
	unlink(b.out);
}

/* 64 threads checking every result while held, patched and released.
 * Attaching to them takes 3 to 6 s here: the target runs until told to
 * stop (SIGUSR1), within a bound that no attach reaches. */
Test(cli, attach_to_many_threads)
{
	struct bg b;
	struct run r;
	char *out;
	int st;

	bg_start_fmt(&b, "busy 64 %d", 60 * KP_TEST_SLOWDOWN);
	bg_wait_for(&b, "started");
	cli_run(&r, "%s count target_add 'target_add%%return' --format json -d 0.3 -p %d", kprobe,
	    (int)b.pid);
	kill(b.pid, SIGUSR1);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_gt(json_num(count_entry(r.out, "target_add"), "hits"), 0, "%s", r.out);
	cr_assert_eq(waitpid(b.pid, &st, 0), b.pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
	out = slurp(b.out);
	cr_assert_str_eq(out, "started\nbusy ok\n");
	free(out);
	unlink(b.out);
}

/* Threads that block every signal would die at a breakpoint: attaching
 * takes SIGTRAP out of their masks. */
Test(cli, attach_to_threads_blocking_signals)
{
	struct bg b;
	struct run r;
	int st;
	char *out;

	bg_start_fmt(&b, "masked 2 %d", 2 * KP_TEST_SLOWDOWN);
	bg_wait_for(&b, "started");
	cli_run(&r, "%s count target_add --format json -d 0.3 -p %d", kprobe, (int)b.pid);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_gt(json_num(count_entry(r.out, "target_add"), "hits"), 0, "%s", r.out);
	cr_assert_eq(waitpid(b.pid, &st, 0), b.pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
	out = slurp(b.out);
	cr_assert_str_eq(out, "started\nbusy ok\n");
	free(out);
	unlink(b.out);
}

/* Where libc's first executable mapping starts in process pid (0: self). */
static uintptr_t libc_base(pid_t pid)
{
	char path[64], line[512];
	uintptr_t lo = 0, off;
	FILE *f;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/maps");
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *name = strrchr(line, '/');

		if (name && !strncmp(name, "/libc.so.6", 10) &&
		    sscanf(line, "%lx-%*x %*s %lx", &lo, &off) == 2 && off == 0)
			break;
		lo = 0;
	}
	fclose(f);
	return lo;
}

/* Whether process pid is traced (the tool holds its threads while the
 * agent arms the probes, and lets them go once the agent has answered). */
static bool traced(pid_t pid)
{
	char path[64], *status, *p;
	bool t;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	status = slurp(path);
	p = strstr(status, "TracerPid:");
	t = p && atoi(p + 10) != 0;
	free(status);
	return t;
}

/* Waits (at most 15 s, times the suite's slowdown) until libc's read() in process pid differs from
 * ours (a probe is armed on it) and the process is no longer held (the
 * tool has its answer); then creates flag, which the shell running the
 * tool waits for before its Ctrl-C. */
struct armed_wait {
	pid_t pid;
	const char *flag;
	bool armed;
	volatile bool stop;	/* the tool is done: give up */
};

static void *wait_read_probed(void *arg)
{
	struct armed_wait *w = arg;
	void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
	uint8_t *mine = libc ? dlsym(libc, "read") : NULL;
	uintptr_t base = libc_base(0), theirs = 0;
	char path[64];

	/* The memory file is opened for each look: one opened before the
	 * process exec'd cat (the fork's shell may not have by then) reads
	 * the memory it had then, which exec took away, and reads nothing. */
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)w->pid);
	for (int i = 0; i < 1500 * KP_TEST_SLOWDOWN && mine && base && !w->armed && !w->stop; i++) {
		uint8_t code[16];
		uintptr_t tb = libc_base(w->pid);
		int fd = tb ? open(path, O_RDONLY | O_CLOEXEC) : -1;

		if (tb)
			theirs = tb + ((uintptr_t)mine - base);
		if (fd >= 0 && pread(fd, code, sizeof(code), (off_t)theirs) == sizeof(code) &&
		    memcmp(code, mine, sizeof(code)) && !traced(w->pid))
			w->armed = true;
		else
			usleep(10000);
		if (fd >= 0)
			close(fd);
	}
	if (libc)
		dlclose(libc);
	close(open(w->flag, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
	return NULL;
}

/* A process blocked in read(): the system call goes on as if nothing had
 * happened, and its data flows through. */
Test(cli, attach_to_blocked_reader)
{
	char out[128], cmd[256], flag[128];
	struct armed_wait w = { 0 };
	pthread_t waiter;
	int in[2], st;
	struct run r;
	pid_t cat;
	char *text;

	temp_path(out, sizeof(out), "cat.out");
	cr_assert(!pipe(in));
	cat = fork();
	if (cat == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(in[0], 0);
		close(in[1]);
		snprintf(cmd, sizeof(cmd), "exec cat > %s", out);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	cr_assert_eq(write(in[1], "before\n", 7), 7);
	usleep(100000);
	/* Ctrl-C once the probes are armed in the reader, however long the
	 * tool takes to get there (a fixed delay raced its start-up). */
	temp_path(flag, sizeof(flag), "armed");
	unlink(flag);
	w.pid = cat;
	w.flag = flag;
	cr_assert_eq(pthread_create(&waiter, NULL, wait_read_probed, &w), 0);
	cli_run(&r, "%s count 'libc.so.6:read' 'libc.so.6:write' --format json -p %d & k=$!; "
	    "while [ ! -e %s ] && kill -0 $k 2>/dev/null; do sleep 0.01; done; kill -INT $k; wait $k", kprobe,
	    (int)cat, flag);
	w.stop = true;
	pthread_join(waiter, NULL);
	unlink(flag);
	cr_assert(w.armed, "read() in the reader was never probed: %s", r.err);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(alive(cat), "the reader died: %s", r.err);
	cr_assert_eq(write(in[1], "after\n", 6), 6);
	close(in[1]);
	cr_assert_eq(waitpid(cat, &st, 0), cat);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
	text = slurp(out);
	cr_assert_str_eq(text, "before\nafter\n");
	free(text);
	unlink(out);
}

Test(cli, attach_interrupted_by_sigint)
{
	struct bg b;
	struct run r;

	bg_start(&b, "loop 4000");
	bg_wait_for(&b, "tick 1 ");
	cli_run(&r, "%s count target_add -p %d & k=$!; " WAIT_ARMED "sleep 0.5; kill -INT $k; "
	    "wait $k", kprobe, (int)b.pid, kprobe, (int)b.pid);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(matches(r.out, "^target_add +0x[0-9a-f]{16} +cli_target +[1-9][0-9]* +0$"), "%s",
		  r.out);
	cr_assert(alive(b.pid));
	assert_untraced(b.pid);
	cli_run(&r, "%s list -p %d", kprobe, (int)b.pid);
	cr_assert_str_eq(r.out, "");
	bg_stop(&b);
}

Test(cli, attach_dlopen_deferred)
{
	struct bg b;
	struct run r;
	char args[PATH_MAX + 64];

	snprintf(args, sizeof(args), "dlopen %s 9 800", plugin);
	bg_start(&b, args);
	bg_wait_for(&b, "waiting");
	cli_run(&r, "%s count %s:plugin_work --format json -p %d", kprobe, plugin, (int)b.pid);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(json_num(count_entry(r.out, "plugin_work"), "hits"), 9, "%s", r.out);
	bg_stop(&b);
}

Test(cli, list_and_knobs_on_a_live_process)
{
	struct bg b;
	struct run r, session;
	char out[128];
	pid_t tool;

	temp_path(out, sizeof(out), "knobs.json");
	bg_start(&b, "loop 4000");
	bg_wait_for(&b, "tick 1 ");
	tool = fork();
	if (tool == 0) {
		/* a return probe, not kprobes on the exit sites: its own line */
		cli_run(&session, "KPROBE_RETURN_PROBES=1 %s count target_add 'target_add%%return' "
			"--format json -o %s -d 3 -p %d", kprobe, out, (int)b.pid);
		_exit(session.status);
	}
	for (int i = 0; i < 200; i++) {
		cli_run(&r, "%s list -p %d", kprobe, (int)b.pid);
		if (count_occurrences(r.out, "\n") == 2)
			break;
		usleep(20000);
	}
	cr_assert(matches(r.out, "^[0-9a-f]{16}  k  target_add\\+0x0( |$)"), "%s", r.out);
	cr_assert(matches(r.out, "^[0-9a-f]{16}  r  target_add\\+0x0( |$)"), "%s", r.out);
	cr_assert(!strstr(r.out, "# probing is disabled"), "%s", r.out);
	cr_assert_eq(cli_run(&r, "%s disable -p %d", kprobe, (int)b.pid), 0, "%s", r.err);
	/* Globally disabled: a header says so; the probe lines keep their
	 * format. */
	cli_run(&r, "%s list -p %d", kprobe, (int)b.pid);
	cr_assert(matches(r.out, "^# probing is disabled in process [0-9]+: no probe fires "
			  "\\(kprobe enable -p [0-9]+\\)\n[0-9a-f]{16}  [kr]  target_add\\+0x0"),
		  "%s", r.out);
	cr_assert_eq(cli_run(&r, "%s enable -p %d", kprobe, (int)b.pid), 0, "%s", r.err);
	cli_run(&r, "%s list -p %d", kprobe, (int)b.pid);
	cr_assert(!strstr(r.out, "# probing is disabled"), "%s", r.out);
	cr_assert_eq(cli_run(&r, "%s optimize off -p %d", kprobe, (int)b.pid), 0, "%s", r.err);
	cli_run(&r, "%s list -p %d", kprobe, (int)b.pid);
	cr_assert(!strstr(r.out, "[OPTIMIZED]"), "%s", r.out);
	cr_assert_eq(cli_run(&r, "%s optimize on -p %d", kprobe, (int)b.pid), 0, "%s", r.err);
	if (arch_optimizes()) {
		for (int i = 0; i < 100 && !strstr(r.out, "[OPTIMIZED]"); i++) {
			usleep(20000);
			cli_run(&r, "%s list -p %d", kprobe, (int)b.pid);
		}
		cr_assert(strstr(r.out, "k  target_add+0x0  [OPTIMIZED]"), "%s", r.out);
	} else {
		cr_log_info("no jump optimization on this architecture: "
			    "[OPTIMIZED] not awaited");
		cli_run(&r, "%s list -p %d", kprobe, (int)b.pid);
		cr_assert(strstr(r.out, "k  target_add+0x0") && !strstr(r.out, "[OPTIMIZED]"),
			  "%s", r.out);
	}
	{
		int st;
		char *json;

		cr_assert_eq(waitpid(tool, &st, 0), tool);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		json = slurp(out);
		cr_assert(json_valid(json), "%s", json);
		cr_assert_gt(json_num(count_entry(json, "target_add"), "hits"), 0, "%s", json);
		free(json);
	}
	cr_assert(alive(b.pid));
	assert_loop_output_correct(b.out);
	bg_stop(&b);
	unlink(out);
}

/* count's return of a function whose exits can take jumps is taken by
 * kprobes on its exit sites (target_add: straight code, one site: on
 * x86-64 its entry, the run's start; on arm64 its RET), listed as such,
 * with the entry's counts. */
Test(cli, return_counted_at_exit_sites)
{
	struct bg b;
	struct run r, session;
	char out[128];
	pid_t tool;
	int st;
	char *json;

	temp_path(out, sizeof(out), "exits.json");
	bg_start(&b, "loop 4000");
	bg_wait_for(&b, "tick 1 ");
	tool = fork();
	if (tool == 0) {
		cli_run(&session, "%s count target_add 'target_add%%return' --format json -o %s -d 2 -p %d",
			kprobe, out, (int)b.pid);
		_exit(session.status);
	}
	for (int i = 0; i < 200; i++) {
		cli_run(&r, "%s list -p %d", kprobe, (int)b.pid);
		if (count_occurrences(r.out, "\n") >= 2)
			break;
		usleep(20000);
	}
	cr_assert_eq(count_occurrences(r.out, "  k  target_add+0x"), 2, "%s", r.out);
	cr_assert(strstr(r.out, "  k  target_add+0x0 "), "%s", r.out);
	cr_assert(!strstr(r.out, "  r  "), "%s", r.out);
	cr_assert_eq(waitpid(tool, &st, 0), tool);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	json = slurp(out);
	cr_assert(json_valid(json), "%s", json);
	cr_assert_gt(json_num(count_entry(json, "target_add"), "hits"), 0, "%s", json);
	{
		double entries = json_num(count_entry(json, "target_add"), "hits");
		double returns = json_num(count_entry(json, "target_add%return"), "hits");

#ifdef __x86_64__
		/* both at one address, in one hit: never one without the other */
		cr_assert_eq(returns, entries, "%s", json);
#else
		/* a call running when the probes went in or out */
		cr_assert(returns >= entries - 1 && returns <= entries + 1, "%s", json);
#endif
	}
	free(json);
	cr_assert(alive(b.pid));
	assert_loop_output_correct(b.out);
	bg_stop(&b);
	unlink(out);
}

/* The functions probes can name, of a file (by path, or by file name where
 * the loader looks) or of a running process, with a glob. */
Test(cli, list_functions_of_objects_and_processes)
{
	struct bg b;
	struct run r;

	cli_run(&r, "%s list %s 'target_a*'", kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(matches(r.out, "^.*/cli_target:target_add$"), "%s", r.out);
	cr_assert_eq(count_occurrences(r.out, "\n"), 1, "%s", r.out);
	cli_run(&r, "%s -l libz.so.1 'inflate*'", kprobe);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(matches(r.out, "^libz\\.so\\.1:inflate$"), "%s", r.out);
	cr_assert(!strstr(r.out, ":deflate"), "%s", r.out);
	cli_run(&r, "%s list libz.so.1", kprobe);
	cr_assert(matches(r.out, "^libz\\.so\\.1:deflate$"), "%s", r.out);
	cli_run(&r, "%s list libz 'inflateInit_'", kprobe);	/* bpftrace's short name */
	cr_assert_str_eq(r.out, "libz:inflateInit_\n", "%s", r.err);
	cli_run(&r, "%s list nosuch.so", kprobe);
	assert_bad(&r, "nosuch.so");
	cli_run(&r, "%s list %s 'zz*'", kprobe, target);
	assert_bad(&r, "zz*");

	bg_start(&b, "loop 4000");
	bg_wait_for(&b, "tick 1 ");
	cli_run(&r, "%s list -p %d 'target_a*'", kprobe, (int)b.pid);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_str_eq(r.out, "cli_target:target_add\n");
	cli_run(&r, "%s list -p %d libc.so.6 'pthread_create'", kprobe, (int)b.pid);
	cr_assert_str_eq(r.out, "libc.so.6:pthread_create\n", "%s", r.err);
	cli_run(&r, "%s list -p %d libc 'pthread_create'", kprobe, (int)b.pid);
	cr_assert_str_eq(r.out, "libc.so.6:pthread_create\n", "%s", r.err);
	/* Reading files only: the process got no agent. */
	cli_run(&r, "grep -c libkprobe-agent /proc/%d/maps", (int)b.pid);
	cr_assert_str_eq(r.out, "0\n");
	cr_assert(alive(b.pid));
	/* the same short name in a PROBE attached: the library it maps */
	cli_run(&r, "%s count 'libc:pthread_create' --format json -z -d 0.2 -p %d", kprobe,
		(int)b.pid);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "{\"probe\":\"pthread_create\",") &&
		  strstr(r.out, "\"object\":\"libc.so.6\""), "%s %s", r.out, r.err);
	bg_stop(&b);
}

Test(cli, attach_refused_without_ptrace_permission)
{
	struct run r;
	pid_t child;
	int st;

	/* A process with a tracer already cannot be attached to. */
	child = fork();
	if (child == 0) {
		ptrace(PTRACE_TRACEME, 0, 0, 0);
		raise(SIGSTOP);
		execl(target, target, "loop", "0", (char *)NULL);
		_exit(127);
	}
	cr_assert_eq(waitpid(child, &st, 0), child);
	cr_assert(WIFSTOPPED(st));
	ptrace(PTRACE_CONT, child, 0, 0);
	usleep(100000);
	cli_run(&r, "%s count target_add -p %d", kprobe, (int)child);
	cr_assert_eq(r.status, 1, "%s", r.err);
	cr_assert(strstr(r.err, "already traced by process"), "%s", r.err);
	cr_assert_eq(count_occurrences(r.err, "\n"), 1, "%s", r.err);
	kill(child, SIGKILL);
	waitpid(child, &st, 0);
}

/* ---- attach: odd targets are refused or handled, never harmed ---- */

/* Waits for the background target to exit; asserts status 0 and its
 * whole output. */
static void bg_expect_exit(struct bg *b, const char *output)
{
	char *out;
	int st;

	cr_assert_eq(waitpid(b->pid, &st, 0), b->pid);
	out = slurp(b->out);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x, output '%s'", st, out);
	cr_assert_str_eq(out, output);
	free(out);
	unlink(b->out);
}

static void assert_refused(const struct run *r, const char *why)
{
	cr_assert_eq(r->status, 1, "%s", r->err);
	cr_assert(strstr(r->err, why), "%s", r->err);
	cr_assert_eq(count_occurrences(r->err, "\n"), 1, "%s", r->err);
}

Test(cli, attach_refuses_zombie)
{
	struct run r;
	pid_t child = fork();
	int st;

	if (child == 0)
		_exit(5);
	for (int i = 0; i < 200; i++) {	/* until it is a zombie */
		char path[64], *stat;
		bool zombie;

		snprintf(path, sizeof(path), "/proc/%d/stat", (int)child);
		stat = slurp(path);
		zombie = strstr(stat, ") Z ") != NULL;
		free(stat);
		if (zombie)
			break;
		usleep(5000);
	}
	cli_run(&r, "%s count target_add -p %d", kprobe, (int)child);
	assert_refused(&r, "it has exited");
	cr_assert_eq(waitpid(child, &st, 0), child);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 5);
}

Test(cli, attach_refuses_exited_main_thread)
{
	struct bg b;
	struct run r;

	bg_start_prog(&b, odd, "mainexit 60");
	bg_wait_for(&b, "started");
	usleep(50000);
	cli_run(&r, "%s count odd_work -p %d", kprobe, (int)b.pid);
	assert_refused(&r, "its main thread has exited");
	bg_expect_exit(&b, "started\nticker ok\n");
}

Test(cli, attach_refuses_seccomp_strict)
{
	struct bg b;
	struct run r;

	char want[256] = "started\n";

	/* 25 ticks of busy work (about a second): the target must outlive a
	 * sanitized tool's start on a loaded machine. */
	bg_start_prog(&b, odd, "strict 25");
	bg_wait_for(&b, "started");
	cli_run(&r, "%s count odd_work -p %d", kprobe, (int)b.pid);
	assert_refused(&r, "seccomp strict mode");
	for (int i = 0; i < 25; i++)
		strcat(want, "tick\n");
	strcat(want, "strict ok\n");
	bg_expect_exit(&b, want);
}

Test(cli, attach_refuses_seccomp_filter)
{
	struct bg b;
	struct run r;

	bg_start_prog(&b, odd, "filter 60");
	bg_wait_for(&b, "started");
	cli_run(&r, "%s count odd_work -p %d", kprobe, (int)b.pid);
	assert_refused(&r, "seccomp filter");
	bg_expect_exit(&b, "started\nfilter ok\n");
}

static char proc_state(pid_t pid)
{
	char path[64], *status, *p, c;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	status = slurp(path);
	p = strstr(status, "State:\t");
	c = p ? p[7] : '?';
	free(status);
	return c;
}

/* A stopped process is probed while it stays stopped: not one tick is
 * printed until it is continued, then it runs correctly with its probes.
 * Twice: loading the agent, then with the agent there, dormant. */
Test(cli, attach_to_stopped_process)
{
	struct bg b;
	struct run r;
	char *before, *after;

	bg_start(&b, "loop 4000");
	bg_wait_for(&b, "tick 3 ");
	for (int round = 0; round < 2; round++) {
		kill(b.pid, SIGSTOP);
		while (proc_state(b.pid) != 'T')
			usleep(1000);
		before = slurp(b.out);
		/* (-d also bounds the arming: room for a loaded machine) */
		cli_run(&r, "%s count target_add --format json -d 1 -p %d", kprobe, (int)b.pid);
		cr_assert_eq(r.status, 0, "%s", r.err);
		cr_assert_eq(json_num(count_entry(r.out, "target_add"), "hits"), 0, "%s", r.out);
		usleep(100000);
		after = slurp(b.out);
		cr_assert_str_eq(after, before, "the stopped process ran");
		cr_assert_eq(proc_state(b.pid), 'T');
		assert_untraced(b.pid);
		free(before);
		free(after);
		/* Continued while probed: the probes are there. */
		cli_run(&r, "(sleep 0.3; kill -CONT %d) & %s count target_add --format json -d 2 -p %d",
		    (int)b.pid, kprobe, (int)b.pid);
		cr_assert_eq(r.status, 0, "%s", r.err);
		cr_assert_gt(json_num(count_entry(r.out, "target_add"), "hits"), 10, "%s", r.out);
	}
	usleep(50000);
	cr_assert(alive(b.pid));
	assert_untraced(b.pid);
	assert_loop_output_correct(b.out);
	bg_stop(&b);
}

/* A stopped process whose agent was preloaded: list and the knobs are
 * answered at once (the agent's threads run, the program's stay stopped)
 * rather than after the request's 10 s timeout. */
Test(cli, knobs_on_a_stopped_process_answer_at_once)
{
	char prog[sizeof(agent) + sizeof(target) + 32], *before, *after;
	struct timespec t0, t1;
	struct bg b;
	struct run r;

	snprintf(prog, sizeof(prog), "env LD_PRELOAD=%s %s", agent, target);
	bg_start_prog(&b, prog, "loop 4000");
	bg_wait_for(&b, "tick 3 ");
	kill(b.pid, SIGSTOP);
	while (proc_state(b.pid) != 'T')
		usleep(1000);
	before = slurp(b.out);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cli_run(&r, "%s list -p %d", kprobe, (int)b.pid);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_str_eq(r.out, "");
	cr_assert_eq(cli_run(&r, "%s disable -p %d", kprobe, (int)b.pid), 0, "%s", r.err);
	/* The agent got it: its list says so now. */
	cli_run(&r, "%s list -p %d", kprobe, (int)b.pid);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "# probing is disabled"), "%s", r.out);
	cr_assert_eq(cli_run(&r, "%s enable -p %d", kprobe, (int)b.pid), 0, "%s", r.err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	cr_assert_lt(t1.tv_sec - t0.tv_sec, 5, "four requests took %ld s",
		     (long)(t1.tv_sec - t0.tv_sec));
	usleep(100000);
	after = slurp(b.out);
	cr_assert_str_eq(after, before, "the stopped process ran");
	cr_assert_eq(proc_state(b.pid), 'T');
	assert_untraced(b.pid);
	free(before);
	free(after);
	kill(b.pid, SIGCONT);
	bg_wait_for(&b, "tick 8 ");
	cr_assert(alive(b.pid));
	assert_loop_output_correct(b.out);
	bg_stop(&b);
}

/* The thread of pid named comm, 0 if none. */
static pid_t thread_named(pid_t pid, const char *comm)
{
	char path[96], name[32];
	struct dirent *de;
	pid_t tid = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	while (d && !tid && (de = readdir(d))) {
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%d/task/%.32s/comm", (int)pid, de->d_name);
		f = fopen(path, "r");
		if (f && fgets(name, sizeof(name), f) && !strncmp(name, comm, strlen(comm)) &&
		    name[strlen(comm)] == '\n')
			tid = (pid_t)atoi(de->d_name);
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return tid;
}

/* Trace stops: one of the program's threads held by a tracer leaves the
 * agent free to answer; the agent's own thread held, it cannot answer
 * until the tracer lets it go, and the tool says so at once rather than
 * after the request's timeout. */
Test(cli, knobs_with_threads_held_by_a_tracer)
{
	char prog[sizeof(agent) + sizeof(target) + 32];
	struct timespec t0, t1;
	pid_t held[2];
	struct bg b;
	struct run r;
	int st;

	snprintf(prog, sizeof(prog), "env LD_PRELOAD=%s %s", agent, target);
	bg_start_prog(&b, prog, "loop 4000");
	bg_wait_for(&b, "tick 1 ");
	held[0] = b.pid;
	held[1] = thread_named(b.pid, "kprobe-agent");
	cr_assert_neq(held[1], 0, "no agent thread in the process");
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(ptrace(PTRACE_SEIZE, held[i], 0, 0), 0, "%s", strerror(errno));
		cr_assert_eq(ptrace(PTRACE_INTERRUPT, held[i], 0, 0), 0, "%s", strerror(errno));
		cr_assert_eq(waitpid(held[i], &st, __WALL), held[i]);
		cr_assert(WIFSTOPPED(st));
		clock_gettime(CLOCK_MONOTONIC, &t0);
		cli_run(&r, "%s list -p %d", kprobe, (int)b.pid);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (i == 0) {
			cr_assert_eq(r.status, 0, "the main thread held: %s", r.err);
		} else {
			cr_assert_eq(r.status, 1, "%s", r.err);
			cr_assert(strstr(r.err, "held by a tracer"), "%s", r.err);
			cr_assert_eq(count_occurrences(r.err, "\n"), 1, "%s", r.err);
		}
		cr_assert_lt(t1.tv_sec - t0.tv_sec, 3, "the answer took %ld s",
			     (long)(t1.tv_sec - t0.tv_sec));
		cr_assert_eq(ptrace(PTRACE_DETACH, held[i], 0, 0), 0, "%s", strerror(errno));
	}
	bg_wait_for(&b, "tick 3 ");
	cr_assert(alive(b.pid));
	assert_loop_output_correct(b.out);
	bg_stop(&b);
}

/* Stopping threads to inject and to arm interrupts their blocking calls;
 * epoll_wait and sigtimedwait must not see EINTR for it. */
Test(cli, attach_keeps_blocking_waits)
{
	char args[64];
	struct bg b;
	struct run r;

	snprintf(args, sizeof(args), "waiters %d", 1500 * KP_TEST_SLOWDOWN);
	bg_start_prog(&b, odd, args);
	bg_wait_for(&b, "started");
	cli_run(&r, "%s count odd_work --format json -d 0.3 -p %d", kprobe, (int)b.pid);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_gt(json_num(count_entry(r.out, "odd_work"), "hits"), 0, "%s", r.out);
	{
		char *out;
		int st;

		cr_assert_eq(waitpid(b.pid, &st, 0), b.pid);
		out = slurp(b.out);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
		cr_assert(strstr(out, "epoll ok\n") && strstr(out, "sigwait ok\n"), "%s", out);
		free(out);
		unlink(b.out);
	}
}

/* Python's main thread between short sleeps, attached to again and again:
 * the injected call's answer is on the thread's stack, which the thread
 * took back before the tool could read it, and the tool never learnt that
 * the agent had loaded. */
Test(cli, attach_to_python_between_sleeps)
{
	static const char py[] = "/usr/bin/python3.11";
	struct bg b;
	struct run r;
	char *out;
	int st;

	if (access(py, X_OK)) {
		cr_skip_test("%s is not installed", py);
		return;
	}
	bg_start_prog(&b, py, "-c 'import time\nprint(\"started\", flush=True)\n"
		      "for i in range(100):\n  sum(range(10000)); time.sleep(0.1)\n"
		      "print(\"done\")'");
	usleep(300000);		/* early in its loop, as a user would attach */
	for (int i = 0; i < 2; i++) {
		cli_run(&r, "%s count /usr/bin/python3.11:PyObject_Free --format json -d 2 -p %d",
		    kprobe, (int)b.pid);
		cr_assert_eq(r.status, 0, "attach %d: %s", i, r.err);
	}
	cr_assert_eq(waitpid(b.pid, &st, 0), b.pid);
	out = slurp(b.out);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x, output '%s'", st, out);
	cr_assert_str_eq(out, "started\ndone\n");
	free(out);
	unlink(b.out);
}

/* The tool killed while the target is inside the injected dlopen (kept
 * waiting by a constructor that holds the loader lock): the hijacked
 * thread finishes the call and goes on by itself. */
Test(cli, attach_survives_tool_killed_mid_injection)
{
	struct bg b;
	struct run r;
	char args[PATH_MAX + 64], *out;
	int st;

	snprintf(args, sizeof(args), "slowload %s", slowctor);
	bg_start_prog(&b, odd, args);
	usleep(300000);		/* the constructor is sleeping now */
	cli_run(&r, "%s count odd_work -p %d & k=$!; sleep 0.4; kill -KILL $k; wait $k", kprobe,
	    (int)b.pid);
	cr_assert_eq(r.status, 128 + SIGKILL, "%s", r.err);
	cr_assert_eq(waitpid(b.pid, &st, 0), b.pid);
	out = slurp(b.out);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x, output '%s'", st, out);
	cr_assert_str_eq(out, "ctor done\nloaded\nwork ok\n");
	free(out);
	unlink(b.out);
}

/* The tool killed in the middle of a session: the agent sees its
 * connection gone, removes every probe and leaves. */
Test(cli, attach_tool_killed_mid_session_leaves_target_unprobed)
{
	struct bg b;
	struct run r;

	bg_start(&b, "loop 4000");
	bg_wait_for(&b, "tick 3 ");
	/* Killed once the probe is armed: mid-session, however long the
	 * attach took. */
	cli_run(&r, "%s count target_add -p %d & k=$!; " WAIT_ARMED "kill -KILL $k; wait $k",
	    kprobe, (int)b.pid, kprobe, (int)b.pid);
	cr_assert_eq(r.status, 128 + SIGKILL, "%s", r.err);
	assert_nothing_of_ours_runs(b.pid);
	assert_untraced(b.pid);
	cli_run(&r, "%s list -p %d", kprobe, (int)b.pid);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_str_eq(r.out, "");
	usleep(50000);
	cr_assert(alive(b.pid));
	assert_loop_output_correct(b.out);
	bg_stop(&b);
}

/* The injected thread is hijacked in the middle of a loop that keeps
 * values in caller-saved general and vector registers: the loading stub
 * must give every one of them back (three times: loading, then starting
 * the agent again). */
Test(cli, attach_restores_every_register)
{
	char args[64];
	struct bg b;
	struct run r;

	snprintf(args, sizeof(args), "vectors %d", 250 * KP_TEST_SLOWDOWN);
	bg_start_prog(&b, odd, args);
	bg_wait_for(&b, "started");
	for (int i = 0; i < 3; i++) {
		cli_run(&r, "%s count odd_work --format json -d 0.1 -p %d", kprobe, (int)b.pid);
		cr_assert_eq(r.status, 0, "%s", r.err);
	}
	bg_expect_exit(&b, "started\nregisters ok\n");
}

/* After an attach, the program installs its own SIGTRAP handler and
 * starts a thread that blocks every signal, with the probe not
 * jump-optimized (breakpoints): neither sees our traps, as in launch mode. */
Test(cli, attach_then_program_takes_sigtrap_and_blocks_signals)
{
	struct bg b;
	struct run r;
	pid_t tool;
	int st;

	bg_start_prog(&b, odd, "trapper");
	bg_wait_for(&b, "started");
	tool = fork();
	if (tool == 0) {
		cli_run(&r, "%s count odd_work --format json -d 1.8 -p %d", kprobe, (int)b.pid);
		_exit(r.status == 0 && json_num(count_entry(r.out, "odd_work"), "hits") > 0 ? 0 : 1);
	}
	for (int i = 0; i < 200; i++) {	/* until armed */
		cli_run(&r, "%s list -p %d", kprobe, (int)b.pid);
		if (strstr(r.out, "odd_work"))
			break;
		usleep(20000);
	}
	cr_assert_eq(cli_run(&r, "%s optimize off -p %d", kprobe, (int)b.pid), 0, "%s", r.err);
	kill(b.pid, SIGUSR1);
	bg_expect_exit(&b, "started\ntraps 0\nwork ok\n");
	cr_assert_eq(waitpid(tool, &st, 0), tool);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the session failed");
}

/* CPU time (clock ticks) of pid's thread called name, -1 if none. */
static long thread_cpu(pid_t pid, const char *name)
{
	char path[64];
	struct dirent *de;
	long ticks = -1;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	cr_assert(d);
	while (ticks < 0 && (de = readdir(d))) {
		char file[400], *comm, *stat, *p;
		unsigned long utime, stime;

		if (de->d_name[0] == '.')
			continue;
		snprintf(file, sizeof(file), "%s/%s/comm", path, de->d_name);
		comm = slurp(file);
		if (!strcmp(comm, name) || (strlen(comm) == strlen(name) + 1 &&
					    !strncmp(comm, name, strlen(name)))) {
			snprintf(file, sizeof(file), "%s/%s/stat", path, de->d_name);
			stat = slurp(file);
			p = strrchr(stat, ')');
			/* utime and stime: fields 14 and 15, 12 and 13 after ')' */
			if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
					&utime, &stime) == 2)
				ticks = (long)(utime + stime);
			free(stat);
		}
		free(comm);
	}
	closedir(d);
	return ticks;
}

/* A program that closes every descriptor and opens files of its own gets
 * numbers the agent and the library used: they must notice, never write
 * into its files (disarming writes code), never spin, and attach again. */
Test(cli, attach_survives_closed_and_reused_descriptors)
{
	char dir[128], args[256];
	struct bg b;
	struct run r;
	pid_t tool;
	long cpu0, cpu1;
	int st;

	temp_path(dir, sizeof(dir), "fds");
	cr_assert(!mkdir(dir, 0700));
	snprintf(args, sizeof(args), "closeall %s", dir);
	bg_start_prog(&b, odd, args);
	bg_wait_for(&b, "started");
	tool = fork();
	if (tool == 0) {
		cli_run(&r, "%s count odd_work -d 1.2 -p %d", kprobe, (int)b.pid);
		_exit(0);
	}
	usleep(500000);		/* armed */
	kill(b.pid, SIGUSR1);
	usleep(300000);
	/* The tool's connection went with the rest: the agent disarms and
	 * leaves (no thread), or serves on without spinning. */
	cpu0 = thread_cpu(b.pid, "kprobe-agent");
	usleep(500000);
	cpu1 = thread_cpu(b.pid, "kprobe-agent");
	cr_assert(cpu1 < 0 || cpu1 - cpu0 < 10, "the agent thread spins: %ld ticks in 0.5 s",
		  cpu1 - cpu0);
	cr_assert_eq(waitpid(tool, &st, 0), tool);
	/* A new session works. */
	cli_run(&r, "%s count odd_work --format json -d 0.2 -p %d", kprobe, (int)b.pid);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_gt(json_num(count_entry(r.out, "odd_work"), "hits"), 0, "%s", r.out);
	kill(b.pid, SIGUSR2);	/* done: it checks its files and exits */
	bg_expect_exit(&b, "started\nfiles ok\n");
	for (int i = 0; i < 16; i++) {
		char f[192];

		snprintf(f, sizeof(f), "%s/f%d", dir, i);
		unlink(f);
	}
	rmdir(dir);
}

/* ---- errors: one line naming the culprit, exit 2, nothing half-done ---- */

Test(cli, error_unknown_symbol_suggests)
{
	struct run r;

	cli_run(&r, "%s count target_ad -- %s calls 1", kprobe, target);
	assert_bad(&r, "did you mean 'target_add'?");
	cr_assert_str_eq(r.out, "", "the command ran: %s", r.out);
}

Test(cli, error_all_or_none)
{
	struct run r;

	cli_run(&r, "%s count target_add no_such_function -- %s calls 1", kprobe, target);
	assert_bad(&r, "no_such_function");
	cr_assert_str_eq(r.out, "", "the command ran half-probed: %s", r.out);
	cli_run(&r, "%s count target_add target_add+0x1 -- %s calls 1", kprobe, target);
	assert_bad(&r, "target_add+0x1");
	cr_assert(strstr(r.err, "instruction boundary"), "%s", r.err);
	cr_assert_str_eq(r.out, "");
}

Test(cli, error_objects)
{
	struct run r;

	cli_run(&r, "%s count /nonexistent/nosuchobject.so:foo -- %s calls 1", kprobe, target);
	assert_bad(&r, "nosuchobject.so");
	cli_run(&r, "%s count nosuchobject.so:0x1000 -- %s calls 1", kprobe, target);
	assert_bad(&r, "nosuchobject.so");
	cli_run(&r, "%s count libc.so:malloc -- %s calls 1", kprobe, target);
	assert_bad(&r, "did you mean 'libc.so.6'?");
	cli_run(&r, "%s count libcliplugin.so:plugin_wrk -- %s calls 1", kprobe, target);
	assert_bad(&r, "did you mean 'plugin_work'?");
	cli_run(&r, "%s count 'zz_nothing*' -- %s calls 1", kprobe, target);
	assert_bad(&r, "zz_nothing*");
	cli_run(&r, "%s count cli_target.c:1006 -- %s calls 1", kprobe, target);
	assert_bad(&r, "cli_target.c:1006");
	cli_run(&r, "%s count target_add+0x10000 -- %s calls 1", kprobe, target);
	assert_bad(&r, "0x10000");
}

/* A return probe on the program's entry point would overwrite argc: it is
 * refused with the reason, and a glob of return probes skips it (and what
 * else cannot take one), leaving the program unharmed. */
Test(cli, return_probe_on_entry_point_refused)
{
	struct run r;
	char out[128];
	char *json;

	cli_run(&r, "%s count '_start%%return' -- %s calls 3", kprobe, target);
	assert_bad(&r, "_start%return");
	cr_assert(strstr(r.err, "entry point"), "%s", r.err);
	cr_assert_str_eq(r.out, "", "the command ran: %s", r.out);

	temp_path(out, sizeof(out), "returns.json");
	cli_run(&r, "%s count 'cli_target:*%%return' --format json -o %s -- %s calls 3", kprobe, out,
	    target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "sum 9\n"), "program output changed: %s", r.out);
	cr_assert(strstr(r.err, "skipped"), "%s", r.err);
	json = slurp(out);
	cr_assert_eq(json_num(count_entry(json, "target_add%return"), "hits"), 3, "%s", json);
	cr_assert_eq(json_num(count_entry(json, "main%return"), "hits"), 1, "%s", json);
	cr_assert_null(strstr(json, "\"_start"), "%s", json);
	free(json);
	unlink(out);
}

/* Offsets are checked per function: a glob's matches the offset does not
 * fit are skipped and counted (never probed inside an instruction or in
 * the next function); a single such probe is an error. */
Test(cli, glob_offsets_checked_per_match)
{
	struct run r;
	char out[128];
	char *json;

	temp_path(out, sizeof(out), "offsets.json");
	/* _start is 34 bytes long on x86-64, 52 on arm64. */
	cli_run(&r, "%s count target_add 'cli_target:_st*+256' --format json -o %s -- %s calls 3",
	    kprobe, out, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "sum 9\n"), "program output changed: %s", r.out);
	cr_assert(strstr(r.err, "skipped 1 function"), "%s", r.err);
	cr_assert(strstr(r.err, "beyond the end"), "%s", r.err);
	json = slurp(out);
	cr_assert_eq(json_num(count_entry(json, "target_add"), "hits"), 3, "%s", json);
	cr_assert_null(strstr(json, "_start+"), "%s", json);
	free(json);
	/* +2 is inside the first instruction of most functions. */
	cli_run(&r, "%s count 'cli_target:*+2' --format json -o %s -- %s calls 3", kprobe, out,
	    target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "sum 9\n"), "program output changed: %s", r.out);
	cr_assert(strstr(r.err, "skipped"), "%s", r.err);
	json = slurp(out);
	cr_assert(json_valid(json), "%s", json);
	free(json);
	unlink(out);
	/* A symbol of size 0, decoded from its start. */
	cli_run(&r, "%s count 'cli_target:deregister_tm_clones+2' -- %s calls 1", kprobe, target);
	assert_bad(&r, "deregister_tm_clones+0x2");
	cr_assert(strstr(r.err, "instruction boundary"), "%s", r.err);
	cr_assert_str_eq(r.out, "", "the command ran: %s", r.out);
}

Test(cli, error_specs_and_usage)
{
	struct run r;

	cli_run(&r, "%s trace 'target_add arg9' -- %s calls 1", kprobe, target);
	assert_bad(&r, "arg9");
	cli_run(&r, "%s trace 'target_add retval' -- %s calls 1", kprobe, target);
	assert_bad(&r, "retval");
	cli_run(&r, "%s trace 'target_add x=arg1:u12' -- %s calls 1", kprobe, target);
	assert_bad(&r, "x=arg1:u12");
	cli_run(&r, "%s trace 'target_add%%retrun' -- %s calls 1", kprobe, target);
	assert_bad(&r, "%retrun");
	cli_run(&r, "%s count target_add --formt json -- %s", kprobe, target);
	assert_bad(&r, "did you mean '--format'?");
	cli_run(&r, "%s count target_add --format yaml -- %s", kprobe, target);
	assert_bad(&r, "yaml");
	cli_run(&r, "%s count target_add --format chrome -- %s", kprobe, target);
	assert_bad(&r, "chrome");
	cli_run(&r, "%s trcae target_add -- %s", kprobe, target);
	assert_bad(&r, "did you mean 'trace'?");
	cli_run(&r, "%s count target_add", kprobe);
	assert_bad(&r, "-p PID");
	cli_run(&r, "%s count -- %s", kprobe, target);
	assert_bad(&r, "probe");
	cli_run(&r, "%s count 'target_add arg1' -- %s", kprobe, target);
	assert_bad(&r, "arg1");
	cli_run(&r, "%s latency target_add target_greet -- %s", kprobe, target);
	assert_bad(&r, "target_greet");
	cli_run(&r, "%s count target_add -d -1 -- %s", kprobe, target);
	assert_bad(&r, "-1");
	cli_run(&r, "%s optimize maybe -p 1", kprobe);
	assert_bad(&r, "on");
	cli_run(&r, "%s", kprobe);
	cr_assert_eq(r.status, 2);
	cr_assert_eq(cli_run(&r, "%s --help", kprobe), 0);
	cr_assert(strstr(r.out, "usage: kprobe trace"), "%s", r.out);
}

Test(cli, error_pid_and_command)
{
	struct run r;

	cli_run(&r, "%s count target_add -p 1073741823", kprobe);
	assert_bad(&r, "1073741823");
	cli_run(&r, "%s count target_add -p abc", kprobe);
	assert_bad(&r, "abc");
	cli_run(&r, "%s list -p 1073741823", kprobe);
	assert_bad(&r, "1073741823");
	cli_run(&r, "%s count target_add -- /nonexistent/program", kprobe);
	assert_bad(&r, "/nonexistent/program");
	cli_run(&r, "%s count target_add -- no_such_command_here", kprobe);
	assert_bad(&r, "no_such_command_here");
}

/* ---- static tracepoints (tp:PROVIDER:NAME) ---- */

Test(cli, tracepoint_args_by_declared_name)
{
	struct run r;
	int lines = 0;

	cli_run(&r, "%s trace --format json 'tp:cli:order' -- %s tp 7", kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_str_eq(r.out, "tp sum 21\n", "program output changed: %s", r.out);
	cr_assert_eq(json_lines_valid(r.err), 7, "%s", r.err);
	for (int i = 0; i < 7; i++) {
		static const char *const items[] = { "apple", "pear", "fig" };
		char want[256];

		snprintf(want, sizeof(want),
			 "\"probe\":\"cli:order\",\"address\":\"0x[0-9a-f]+\",\"args\":"
			 "\\{\"id\":%d,\"item\":\"%s\",\"price\":%g,\"qty\":%d,\"weight\":%g\\}",
			 i - 5, items[i % 3], i * 0.5, (unsigned short)(65530 + i), i / 4.0);
		cr_assert(matches(r.err, want), "no event %d (%s) in: %s", i, want, r.err);
		lines++;
	}
	cr_assert_eq(lines, 7);
}

Test(cli, tracepoint_count_and_glob)
{
	struct run r;

	cli_run(&r, "%s count --format json 'tp:cli:*' -- %s tp 100000", kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_str_eq(r.out, "tp sum 4999950000\n", "%s", r.out);
	cr_assert(json_valid(past_progress(r.err)), "%s", r.err);
	cr_assert_eq(json_num(count_entry(r.err, "cli:order"), "hits"), 100000, "%s", r.err);
	cr_assert_eq(json_num(count_entry(r.err, "cli:tick"), "hits"), 100000, "%s", r.err);
	cr_assert_eq(json_num(count_entry(r.err, "cli:tick"), "missed"), 0, "%s", r.err);
}

Test(cli, tracepoint_explicit_args)
{
	struct run r;

	cli_run(&r, "%s trace 'tp:cli:order what=arg2:string n=arg1:s64' -- %s tp 2", kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(matches(r.err, "cli:order what=\"apple\" n=-5$"), "%s", r.err);
	cr_assert(matches(r.err, "cli:order what=\"pear\" n=-4$"), "%s", r.err);
}

Test(cli, tracepoint_errors)
{
	struct run r;

	cli_run(&r, "%s trace 'tp:cli:nosuch' -- %s tp 1", kprobe, target);
	assert_bad(&r, "tp:cli:nosuch");
	cli_run(&r, "%s trace 'tp:cli:tick arg2' -- %s tp 1", kprobe, target);
	assert_bad(&r, "cli:tick has 1 argument");
	cli_run(&r, "%s trace 'tp:cli' -- %s tp 1", kprobe, target);
	assert_bad(&r, "tp:cli");
	cli_run(&r, "%s trace 'tp:cli:tick%%return' -- %s tp 1", kprobe, target);
	assert_bad(&r, "tracepoint");
	cli_run(&r, "%s latency 'tp:cli:tick' -- %s tp 1", kprobe, target);
	assert_bad(&r, "tp:cli:tick");
}

/* Attached to a running process: events while attached, the tracepoint in
 * the list as a 't' line, nothing left enabled after the tool leaves. */
Test(cli, tracepoint_attach_list_detach)
{
	struct bg b;
	struct run r, session;
	char out[128];
	pid_t tool;

	temp_path(out, sizeof(out), "tp.json");
	snprintf(b.out, sizeof(b.out), "unused");
	{
		char cmd[PATH_MAX + 256];

		temp_path(b.out, sizeof(b.out), "bg.out");
		snprintf(cmd, sizeof(cmd), "exec %s tploop > %s 2>&1 < /dev/null", target, b.out);
		b.pid = fork();
		cr_assert(b.pid >= 0);
		if (b.pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
			_exit(127);
		}
	}
	bg_wait_for(&b, "tick 1\n");
	tool = fork();
	if (tool == 0) {
		cli_run(&session, "%s trace --format json 'tp:cli:tick' -o %s -d 1.5 -p %d", kprobe, out,
		    (int)b.pid);
		_exit(session.status);
	}
	for (int i = 0; i < 200; i++) {
		cli_run(&r, "%s list -p %d", kprobe, (int)b.pid);
		if (strstr(r.out, "  t  "))
			break;
		usleep(20000);
	}
	cr_assert(matches(r.out, "^[0-9a-f]{16}  t  cli:tick$"), "%s", r.out);
	{
		int st;
		char *json;

		cr_assert_eq(waitpid(tool, &st, 0), tool);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		json = slurp(out);
		cr_assert_gt(json_lines_valid(json), 10, "%s", json);
		cr_assert(strstr(json, "\"probe\":\"cli:tick\""), "%s", json);
		free(json);
	}
	/* The tool left: the agent (dormant) lists nothing. */
	cli_run(&r, "%s count 'tp:cli:tick' -d 0.2 -p %d", kprobe, (int)b.pid);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cli_run(&r, "%s list -p %d", kprobe, (int)b.pid);
	cr_assert(!strstr(r.out, "  t  "), "%s", r.out);
	cr_assert(alive(b.pid));
	bg_stop(&b);
	unlink(out);
}

/* ---- nothing left behind; rings for every thread ---- */

/* Session memory objects of process pid in /dev/shm ("kprobe-PID-..."). */
static int shm_objects_of(pid_t pid)
{
	char prefix[32];
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	int n = 0;

	snprintf(prefix, sizeof(prefix), "kprobe-%d-", (int)pid);
	if (!d)
		return 0;
	while ((e = readdir(d)))
		n += !strncmp(e->d_name, prefix, strlen(prefix));
	closedir(d);
	return n;
}

/* Starts `kprobe ARGS` (its own process group, output to /dev/null);
 * returns its PID. */
static pid_t kprobe_start(const char *args)
{
	char cmd[PATH_MAX * 2 + 256];
	pid_t pid;

	snprintf(cmd, sizeof(cmd), "exec %s %s > /dev/null 2>&1 < /dev/null", kprobe, args);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	return pid;
}

static int kprobe_wait(pid_t pid)
{
	int st;

	cr_assert_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

Test(cli, nothing_left_after_failures)
{
	char args[PATH_MAX * 2];
	pid_t pid;

	pid = kprobe_start("count target_add -- /nonexistent/command");
	cr_assert_eq(kprobe_wait(pid), 2);
	cr_assert_eq(shm_objects_of(pid), 0, "left behind after a missing command");

	snprintf(args, sizeof(args), "count main -- %s", static_prog);
	pid = kprobe_start(args);
	cr_assert_eq(kprobe_wait(pid), 1);
	cr_assert_eq(shm_objects_of(pid), 0, "left behind after a static program");

	snprintf(args, sizeof(args), "count no_such_function_here -- %s calls 1", target);
	pid = kprobe_start(args);
	cr_assert_eq(kprobe_wait(pid), 2);
	cr_assert_eq(shm_objects_of(pid), 0, "left behind after a bad probe");
}

Test(cli, nothing_left_after_a_failed_ptrace)
{
	char args[64];
	pid_t child, pid;
	int st;

	/* A process with a tracer already cannot be attached to. */
	child = fork();
	cr_assert(child >= 0);
	if (child == 0) {
		ptrace(PTRACE_TRACEME, 0, 0, 0);
		raise(SIGSTOP);
		execl(target, target, "loop", "0", (char *)NULL);
		_exit(127);
	}
	cr_assert_eq(waitpid(child, &st, 0), child);
	ptrace(PTRACE_CONT, child, 0, 0);
	usleep(100000);
	snprintf(args, sizeof(args), "count target_add -p %d", (int)child);
	pid = kprobe_start(args);
	cr_assert_eq(kprobe_wait(pid), 1);
	cr_assert_eq(shm_objects_of(pid), 0, "left behind after a failed attach");
	kill(child, SIGKILL);
	waitpid(child, &st, 0);
}

Test(cli, nothing_left_by_a_killed_tool)
{
	char args[PATH_MAX * 2];
	pid_t pid;

	snprintf(args, sizeof(args), "trace target_add -- %s busy 1 4", target);
	pid = kprobe_start(args);
	usleep(700000);
	kill(pid, SIGKILL);
	cr_assert_eq(kprobe_wait(pid), 128 + SIGKILL);
	cr_assert_eq(shm_objects_of(pid), 0, "left behind by a killed tool");
	kill(-pid, SIGKILL);
}

/* Leftovers of killed tools (ours, their PID gone) are removed; those of
 * live processes stay. */
Test(cli, stale_session_memory_cleaned)
{
	char dead_path[64], live_path[64];
	struct run r;
	pid_t dead = fork();
	int fd;

	cr_assert(dead >= 0);
	if (dead == 0)
		_exit(0);
	cr_assert_eq(waitpid(dead, NULL, 0), dead);
	snprintf(dead_path, sizeof(dead_path), "/dev/shm/kprobe-%d-1f2e", (int)dead);
	snprintf(live_path, sizeof(live_path), "/dev/shm/kprobe-%d-3d4c", (int)getpid());
	fd = open(dead_path, O_CREAT | O_EXCL | O_WRONLY, 0600);
	cr_assert(fd >= 0, "%s: %s", dead_path, strerror(errno));
	close(fd);
	fd = open(live_path, O_CREAT | O_EXCL | O_WRONLY, 0600);
	cr_assert(fd >= 0, "%s: %s", live_path, strerror(errno));
	close(fd);
	cli_run(&r, "%s count target_add -- %s calls 1", kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(access(dead_path, F_OK) && errno == ENOENT, "a dead tool's memory stayed");
	cr_assert(!access(live_path, F_OK), "a live process's memory was removed");
	unlink(live_path);
}

/* The command does not keep the session memory's descriptor. */
Test(cli, command_keeps_no_descriptor_of_ours)
{
	struct run r;

	cli_run(&r, "%s count 'libc.so.6:getenv' -o /dev/null -- /bin/sh -c "
		"'for f in /proc/$$/fd/*; do readlink $f; done'", kprobe);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(!strstr(r.out, "memfd:kprobe"), "%s", r.out);
}

/* A ring for each of 250 threads: nothing lost on a finite run. */
Test(cli, trace_many_threads_loses_nothing)
{
	struct run r;
	char out[128];
	char *text;

	temp_path(out, sizeof(out), "threads.json");
	cli_run(&r, "%s trace target_add --format json -o %s -- %s threads 250 20", kprobe, out,
	    target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(!strstr(r.err, "lost"), "%s", r.err);
	text = slurp(out);
	cr_assert_eq(count_occurrences(text, "\n"), 5000);
	cr_assert_eq(json_lines_valid(text), 5000);
	free(text);
	unlink(out);
}

/* Threads one after another, four times as many as rings: a traced
 * entry with integer arguments takes the light path, whose first hit
 * waits for a free ring, and the tool gives back an exited thread's ring
 * once it has read it.  Every event arrives, each with its thread's
 * argument. */
Test(cli, trace_threads_past_the_rings_reuse_them)
{
	char out[128];
	struct run r;
	char *text;

	temp_path(out, sizeof(out), "seq.json");
	cli_run(&r, "KPROBE_RINGS=3 %s trace 'target_add a=arg1:s64' --format json -o %s -- %s "
		"seqthreads 12 500", kprobe, out, target);
	text = slurp(out);
	unlink(out);	/* read: gone whatever the assertions say */
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(!strstr(r.err, "lost"), "%s", r.err);
	cr_assert_eq(count_occurrences(text, "\n"), 6000);
	cr_assert_eq(json_lines_valid(text), 6000);
	/* target_add(i, 1) for i in 0..499 on each thread */
	cr_assert_eq(count_occurrences(text, "{\"a\":499}"), 12, "%.400s", text);
	cr_assert_eq(count_occurrences(text, "{\"a\":0}"), 12, "%.400s", text);
	free(text);
}

/* More threads at once than rings: their events are lost, and said so
 * with the cause (not "did not keep up"). */
Test(cli, trace_more_threads_than_rings_says_why)
{
	struct run r;
	char out[128];
	char *text;
	const char *l;
	long long lost;

	temp_path(out, sizeof(out), "rings.json");
	cli_run(&r, "KPROBE_RINGS=100 %s trace target_add --format json -o %s -- %s threads 250 20",
	    kprobe, out, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	l = strstr(r.err, "lost ");
	cr_assert(l, "%s", r.err);
	lost = strtoll(l + 5, NULL, 10);
	cr_assert(strstr(r.err, "100 rings"), "%s", r.err);
	cr_assert(!strstr(r.err, "keep up"), "%s", r.err);
	/* 150 threads without a ring, all alive at once: 150 * 20 lost */
	cr_assert_eq(lost, 3000, "%s", r.err);
	text = slurp(out);
	cr_assert_eq(count_occurrences(text, "\n"), 2000);
	free(text);
	unlink(out);
	cli_run(&r, "KPROBE_RINGS=0 %s trace target_add -- %s calls 1", kprobe, target);
	cr_assert_eq(r.status, 2, "%s", r.err);
	cr_assert(strstr(r.err, "KPROBE_RINGS"), "%s", r.err);
}

/* A target that writes over the whole session memory while it is probed:
 * every action finishes, the command's status passes through, nothing it
 * wrote reaches the output as a control character, and the trace says the
 * rings were corrupt. */
Test(cli, hostile_target_overwrites_the_session)
{
	static const char *const actions[] = { "count", "trace", "latency" };
	struct run r;
	char out[128];

	temp_path(out, sizeof(out), "hostile.out");
	for (int i = 0; i < 3; i++) {
		char *text;

		cli_run(&r, "%s %s hostile_work -o %s -- %s 200", kprobe, actions[i], out,
		    hostile_prog);
		cr_assert_eq(r.status, 0, "%s: %s", actions[i], r.err);
		cr_assert(strstr(r.out, "scribbled"), "%s: %s", actions[i], r.out);
		cr_assert(!strchr(r.err, '\033'), "%s: %s", actions[i], r.err);
		text = slurp(out);
		cr_assert(!strchr(text, '\033'), "%s printed the target's escapes", actions[i]);
		cr_assert_gt(strlen(text), 0, "%s wrote nothing", actions[i]);
		if (i == 1)
			cr_assert(strstr(r.err, "corrupt"), "%s", r.err);
		free(text);
	}
	unlink(out);
}

/* ---- the control channel, and what reaches the terminal ---- */

/* A fake agent serving its own socket: it passes the tool's checks. */
static void fake_start(struct bg *b, const char *mode)
{
	bg_start_prog(b, fake_agent, mode);
	bg_wait_for(b, "ready\n");
}

static void fake_stop(struct bg *b)
{
	char sock[96];

	snprintf(sock, sizeof(sock), "/tmp/.kprobe-%u/%d.sock", (unsigned int)geteuid(),
		 (int)b->pid);
	bg_stop(b);
	unlink(sock);
}

static bool has_escape_byte(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s == 0x1b || (unsigned char)*s == 0x9b || *s == '\a' ||
		    *s == '\r')
			return true;
	return false;
}

/* An agent that never answers ARM: with -d, a silence as long as the
 * duration (5 s at least) ends the wait, with a clear message, and the
 * target is left alone. */
Test(cli, unanswered_arm_ends_with_duration)
{
	struct bg b;
	struct run r;
	unsigned long long t0;
	struct timespec ts;

	fake_start(&b, "silent");
	clock_gettime(CLOCK_MONOTONIC, &ts);
	t0 = (unsigned long long)ts.tv_sec;
	cli_run(&r, "%s count target_add -d 1 -p %d", kprobe, (int)b.pid);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	cr_assert_eq(r.status, 1, "%s", r.err);
	cr_assert(strstr(r.err, "gave up waiting"), "%s", r.err);
	cr_assert_eq(count_occurrences(r.err, "\n"), 1, "%s", r.err);
	cr_assert_leq((unsigned long long)ts.tv_sec - t0, 8 * KP_TEST_SLOWDOWN);
	cr_assert(alive(b.pid));
	fake_stop(&b);
}

Test(cli, unanswered_arm_answers_sigterm_and_sigint)
{
	static const char *const sigs[] = { "TERM", "INT" };
	struct bg b;
	struct run r;

	fake_start(&b, "silent");
	for (int i = 0; i < 2; i++) {
		cli_run(&r, "%s count target_add -p %d & k=$!; sleep 0.5; kill -%s $k; wait $k",
		    kprobe, (int)b.pid, sigs[i]);
		cr_assert_eq(r.status, 1, "SIG%s: %s", sigs[i], r.err);
		cr_assert(strstr(r.err, "interrupted"), "SIG%s: %s", sigs[i], r.err);
	}
	cr_assert(alive(b.pid));
	fake_stop(&b);
}

/* What an agent sends is shown escaped: no terminal escape gets through. */
Test(cli, agent_replies_are_escaped)
{
	struct bg b;
	struct run r;

	fake_start(&b, "escapes");
	cli_run(&r, "%s list -p %d", kprobe, (int)b.pid);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "k  \\x1b]0;owned\\x07main+0x0\n"), "%s", r.out);
	cr_assert(strstr(r.out, "\\x1b[2J\\x1b[31mred\\x9b1m\n"), "%s", r.out);
	cr_assert(!has_escape_byte(r.out), "%s", r.out);
	cli_run(&r, "%s disable -p %d", kprobe, (int)b.pid);
	cr_assert_eq(r.status, 1, "%s", r.err);
	cr_assert(strstr(r.err, "\\x1b[31mthe agent\\x0dsays\\x07 no"), "%s", r.err);
	cr_assert(!has_escape_byte(r.err), "%s", r.err);
	cr_assert_eq(count_occurrences(r.err, "\n"), 1, "%s", r.err);
	fake_stop(&b);
}

/* A target of another uid whose socket directory someone else made first:
 * the tool talks to nothing there and injects nothing. */
Test(cli, impostor_socket_directory_refused)
{
	struct bg b;
	struct run r;
	char args[PATH_MAX + 128], dir[64], other[] = "/tmp/kprobe-test-other-XXXXXX";
	char *maps;
	unsigned int uid = 200000 + (unsigned int)(getpid() % 100000);

	if (geteuid() != 0)
		cr_skip_test("needs root to run a target as another uid");
	if (!setpriv_changes_uids())
		cr_skip_test("no setpriv(1) that changes uids (util-linux) here");
	snprintf(dir, sizeof(dir), "/tmp/.kprobe-%u", uid);
	/* --pdeathsig: the change of uid clears what bg_start_prog() set. */
	snprintf(args, sizeof(args), "--reuid=%u --regid=%u --clear-groups --pdeathsig KILL "
		 "%s loop 100000", uid, uid, target);
	bg_start_prog(&b, "setpriv", args);
	bg_wait_for(&b, "tick 1 ");
	/* Open to all, owned by someone else (root here). */
	rmdir(dir);
	cr_assert_eq(mkdir(dir, 0777), 0, "%s", strerror(errno));
	cr_assert_eq(chmod(dir, 0777), 0);
	cli_run(&r, "%s list -p %d", kprobe, (int)b.pid);
	cr_assert_eq(r.status, 1, "%s", r.err);
	cr_assert(strstr(r.err, "refusing"), "%s", r.err);
	cli_run(&r, "%s count target_add -d 0.3 -p %d", kprobe, (int)b.pid);
	cr_assert_eq(r.status, 1, "%s", r.err);
	cr_assert(strstr(r.err, "refusing"), "%s", r.err);
	rmdir(dir);
	/* A symlink to a directory that looks right. */
	cr_assert(mkdtemp(other));
	cr_assert_eq(chown(other, uid, uid), 0);
	cr_assert_eq(symlink(other, dir), 0);
	cli_run(&r, "%s count target_add -d 0.3 -p %d", kprobe, (int)b.pid);
	cr_assert_eq(r.status, 1, "%s", r.err);
	cr_assert(strstr(r.err, "symlink"), "%s", r.err);
	unlink(dir);
	rmdir(other);
	/* Refused before anything was loaded into the target. */
	snprintf(args, sizeof(args), "/proc/%d/maps", (int)b.pid);
	maps = slurp(args);
	cr_assert(!strstr(maps, "libkprobe-agent"), "the agent was injected");
	free(maps);
	cr_assert(alive(b.pid));
	bg_stop(&b);
}

/* A socket nobody listens on is stale: the tool removes it. */
Test(cli, stale_socket_removed)
{
	struct bg b;
	struct run r;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	char dir[64];
	int fd;

	bg_start(&b, "loop 100000");
	bg_wait_for(&b, "tick 1 ");
	snprintf(dir, sizeof(dir), "/tmp/.kprobe-%u", (unsigned int)geteuid());
	mkdir(dir, 0700);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%d.sock", dir, (int)b.pid);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "%s", strerror(errno));
	close(fd);
	cli_run(&r, "%s list -p %d", kprobe, (int)b.pid);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_str_eq(r.out, "");
	cr_assert_neq(lstat(sa.sun_path, &st), 0, "%s is still there", sa.sun_path);
	bg_stop(&b);
	/* The socket of a process that is gone: a run that finds it removes
	 * it (here the launched command's agent or the tool). */
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%d.sock", dir, (int)b.pid);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "%s", strerror(errno));
	close(fd);
	cli_run(&r, "%s count target_add -- %s calls 1", kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_neq(lstat(sa.sun_path, &st), 0, "%s is still there", sa.sun_path);
}

/* With -- COMMAND the command's stdout is its own: gzip's output stays a
 * valid archive. */
Test(cli, command_stdout_untouched)
{
	struct run r;
	char in[128], gz[128];
	FILE *f;

	temp_path(in, sizeof(in), "in.txt");
	temp_path(gz, sizeof(gz), "in.gz");
	f = fopen(in, "w");
	cr_assert(f);
	for (int i = 0; i < 2000; i++)
		fprintf(f, "line %d\n", i);
	fclose(f);
	cli_run(&r, "%s count 'libc.so.6:write' -- gzip -c %s > %s && gzip -t %s && echo intact",
	    kprobe, in, gz, gz);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_str_eq(r.out, "intact\n");
	cr_assert(matches(r.err, "^write +0x[0-9a-f]{16} +libc.so.6 +[1-9][0-9]* +0$"), "%s",
		  r.err);
	unlink(in);
	unlink(gz);
}

Test(cli, output_write_failure_is_exit_1)
{
	struct run r;

	cli_run(&r, "%s count target_add -o /dev/full -- %s calls 3", kprobe, target);
	cr_assert_eq(r.status, 1, "%s", r.err);
	cr_assert(strstr(r.err, "cannot write the results to /dev/full"), "%s", r.err);
	cr_assert_str_eq(r.out, "sum 9\n");
	/* The same with -p, the results on stdout. */
	cli_run(&r, "%s list -p %d > /dev/full", kprobe, (int)getpid());
	cr_assert_eq(r.status, 0, "nothing to list, nothing lost: %s", r.err);
}

Test(cli, version_several_pids_long_probes_control_chars)
{
	struct run r;
	char big[1200], *p = big;

	cr_assert_eq(cli_run(&r, "%s --version", kprobe), 0);
	cr_assert(matches(r.out, "^kprobe \\(libkprobes\\) [0-9]+\\.[0-9]+\\.[0-9]+$"), "%s", r.out);
	cli_run(&r, "%s count target_add -p %d -p %d", kprobe, (int)getpid(), (int)getppid());
	assert_bad(&r, "one process at a time");
	/* 250 + 200 characters of location and six named arguments: more
	 * than the agent's 511, refused rather than cut. */
	p += sprintf(p, "'");
	for (int i = 0; i < 250; i++)
		*p++ = 'o';
	*p++ = ':';
	for (int i = 0; i < 200; i++)
		*p++ = 's';
	for (int i = 1; i <= 6; i++)
		p += sprintf(p, " argument_name_%d=arg%d:u64", i, i);
	sprintf(p, "'");
	cli_run(&r, "%s trace %s -- %s calls 1", kprobe, big, target);
	assert_bad(&r, "probe too long");
	cr_assert_str_eq(r.out, "");
	/* A newline or an escape in bad input cannot split the line. */
	cli_run(&r, "%s count \"$(printf 'tar\\nget\\033[2J')\" -- %s calls 1", kprobe, target);
	assert_bad(&r, "tar\\x0aget\\x1b[2J");
	cr_assert(!has_escape_byte(r.err), "%s", r.err);
}

/* What a client of uid `as` gets for HELLO on the socket at path: 'O' (an
 * OK reply), 'E' (hung up on without a word), 'C' (cannot connect). */
static char hello_as(uid_t as, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int st;
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct pollfd p;
		char buf[64];
		ssize_t n;
		int fd;

		if (setgroups(0, NULL) || setresgid(as, as, as) || setresuid(as, as, as))
			_exit('C');
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
			_exit('C');
		/* An agent that hung up already: EPIPE, not SIGPIPE. */
		if (send(fd, "HELLO\n", 6, MSG_NOSIGNAL) != 6)
			_exit('E');
		p = (struct pollfd){ .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 5000) != 1)
			_exit('T');
		n = read(fd, buf, sizeof(buf));
		_exit(n > 3 && !strncmp(buf, "OK ", 3) ? 'O' : n <= 0 ? 'E' : '?');
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st));
	return (char)WEXITSTATUS(st);
}

/* The real agent serves only its own user and root: a third user who gets
 * past the directory (opened up here by root) is hung up on. */
Test(cli, agent_serves_only_its_user_and_root)
{
	struct bg b;
	char args[2 * PATH_MAX + 192], dir[64], sock[128] = "";
	uid_t uid = 200000 + (uid_t)(getpid() % 100000), other = uid + 100000;
	pid_t agent_pid = 0;

	if (geteuid() != 0)
		cr_skip_test("needs root to run processes as other uids");
	if (!setpriv_changes_uids())
		cr_skip_test("no setpriv(1) that changes uids (util-linux) here");
	snprintf(dir, sizeof(dir), "/tmp/.kprobe-%u", (unsigned int)uid);
	snprintf(args, sizeof(args), "--reuid=%u --regid=%u --clear-groups --pdeathsig KILL "
		 "%s count target_add -d 10 -- %s loop 2000", (unsigned int)uid,
		 (unsigned int)uid, kprobe, target);
	/* The command is kprobe's child: if the test fails, it outlives us,
	 * so it ends by itself (2000 ticks of 5 ms). */
	bg_start_prog(&b, "setpriv", args);
	bg_wait_for(&b, "tick 1 ");
	for (int i = 0; i < 500 && !agent_pid; i++) {
		DIR *d = opendir(dir);
		struct dirent *e;

		while (d && (e = readdir(d)))
			if (matches(e->d_name, "^[0-9]+\\.sock$"))
				agent_pid = atoi(e->d_name);
		if (d)
			closedir(d);
		if (!agent_pid)
			usleep(10000);
	}
	cr_assert(agent_pid, "no socket in %s", dir);
	snprintf(sock, sizeof(sock), "%s/%d.sock", dir, (int)agent_pid);
	cr_assert_eq(hello_as(uid, sock), 'O');
	cr_assert_eq(hello_as(0, sock), 'O');
	/* Its directory keeps the third user out ... */
	cr_assert_eq(hello_as(other, sock), 'C');
	/* ... and, past it, the agent's SO_PEERCRED check. */
	cr_assert_eq(chmod(dir, 0711), 0);
	cr_assert_eq(chmod(sock, 0666), 0);
	cr_assert_eq(hello_as(other, sock), 'E');
	cr_assert_eq(hello_as(uid, sock), 'O');
	kill(agent_pid, SIGKILL);
	bg_stop(&b);
	unlink(sock);
	rmdir(dir);
}

/* File names are their owner's choice: `list OBJECT` shows them escaped. */
Test(cli, list_of_an_object_escapes_names)
{
	struct run r;
	char dir[128], lib[256];

	temp_path(dir, sizeof(dir), "esc");
	cr_assert(!mkdir(dir, 0700) || errno == EEXIST);
	snprintf(lib, sizeof(lib), "%s/lib\033]0;x\a.so", dir);
	cli_run(&r, "cp %s '%s'", plugin, lib);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cli_run(&r, "%s list '%s' 'plugin_*'", kprobe, lib);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "/lib\\x1b]0;x\\x07.so:plugin_work\n"), "%s", r.out);
	cr_assert(!has_escape_byte(r.out), "%s", r.out);
	unlink(lib);
	rmdir(dir);
}

/* A socket directory someone else made first: the agent puts no socket in
 * it, the tool says why it has no control socket, and the run still
 * counts. */
Test(cli, agent_refuses_a_directory_made_by_someone_else)
{
	struct run r;
	char dir[64];
	unsigned int uid = 200000 + (unsigned int)(getpid() % 100000);
	DIR *d;
	struct dirent *e;
	int entries = 0;

	if (geteuid() != 0)
		cr_skip_test("needs root to run the tool as another uid");
	if (!setpriv_changes_uids())
		cr_skip_test("no setpriv(1) that changes uids (util-linux) here");
	snprintf(dir, sizeof(dir), "/tmp/.kprobe-%u", uid);
	cli_run(&r, "rm -rf %s", dir);
	cr_assert_eq(mkdir(dir, 0777), 0, "%s", strerror(errno));
	cr_assert_eq(chmod(dir, 0777), 0);
	cli_run(&r, "setpriv --reuid=%u --regid=%u --clear-groups %s count target_add -- %s calls 3",
	    uid, uid, kprobe, target);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_str_eq(r.out, "sum 9\n");
	cr_assert(strstr(r.err, "refusing it"), "%s", r.err);
	cr_assert(matches(r.err, "^target_add +0x[0-9a-f]{16} +cli_target +3 +0$"), "%s", r.err);
	d = opendir(dir);
	cr_assert(d);
	while ((e = readdir(d)))
		entries += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	cr_assert_eq(entries, 0, "the agent used a directory it does not own");
	rmdir(dir);
}

/* Ctrl-C ends a session; while the tool then waits for the agent to
 * disarm, a second Ctrl-C ends that wait too (the agent disarms anyway
 * when its client goes). */
Test(cli, second_sigint_ends_the_disarm_wait)
{
	struct bg b;
	struct run r;
	struct timespec t0, t1;

	fake_start(&b, "nodisarm");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cli_run(&r, "%s count target_add -p %d & k=$!; sleep 0.7; kill -INT $k; sleep 0.5; "
	    "kill -INT $k; wait $k", kprobe, (int)b.pid);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(matches(r.out, "^PROBE +ADDRESS"), "%s", r.out);
	cr_assert_lt(t1.tv_sec - t0.tv_sec, 5, "the second SIGINT did not end the wait");
	cr_assert(alive(b.pid));
	fake_stop(&b);
}
