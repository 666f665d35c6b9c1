/* End-to-end tests of stacks in the CLI: trace --stack, count --stacks
 * (text and folded), --lines, C++ names, ustack in programs and watch
 * --stack, on programs built without frame pointers (tests/cli/cli_stack,
 * cli_stack_cxx), with gdb as the oracle where it can run. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <dlfcn.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <kprobes/symbols.h>

#include "arch/arch.h"
#include "core/arch_api.h"
#include "cli_helpers.h"

static char kprobe[PATH_MAX + 16];
static char prog[PATH_MAX + 32];
static char prog_cxx[PATH_MAX + 32];
static char prog_dl[PATH_MAX + 32];
static char source[PATH_MAX + 32];

static void init_paths(void)
{
	cli_build_path(kprobe, sizeof(kprobe), "kprobe");
	cli_build_path(prog, sizeof(prog), "tests/cli/cli_stack");
	cli_build_path(prog_cxx, sizeof(prog_cxx), "tests/cli/cli_stack_cxx");
	cli_build_path(prog_dl, sizeof(prog_dl), "tests/cli/cli_stack_dl");
	cli_build_path(source, sizeof(source), "../tests/cli/cli_stack.c");
}

TestSuite(cli_stack, .init = init_paths, .timeout = 60 * KP_TEST_SLOWDOWN);

/* Runs kprobe SUB -o FILE ARGS...: r->out gets the results from FILE
 * (the command's own output discarded), r->err its standard error. */
static void run_results(struct run *r, const char *sub, const char *fmt, ...)
{
	char args[4096], results[64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	cli_tmpfile(results, sizeof(results), "kpstack-out");
	cli_run(r, "%s %s -o %s %s >/dev/null", kprobe, sub, results, args);
	cli_read_file(results, r->out, sizeof(r->out));
	unlink(results);
}

static int count_of(const char *s, const char *needle)
{
	int n = 0;

	for (const char *p = s; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* The line of the source that holds marker. */
static int line_of(const char *marker)
{
	char line[512];
	FILE *f = fopen(source, "r");
	int n = 0, found = 0;

	cr_assert(f, "cannot read %s", source);
	while (!found && fgets(line, sizeof(line), f)) {
		n++;
		if (strstr(line, marker))
			found = n;
	}
	fclose(f);
	cr_assert(found, "no %s in %s", marker, source);
	return found;
}

/* Each traced event's stack (JSON Lines) as one string of frame names
 * joined by '|', offsets cut: "stack_leaf|stack_mid|...". */
static int stacks_of(const char *json, char stacks[][512], int max)
{
	int n = 0;

	for (const char *p = json; n < max && (p = strstr(p, "\"stack\":[")); n++) {
		char *o = stacks[n];

		p += 9;
		o[0] = '\0';
		while (*p == '"') {
			const char *end = strchr(p + 1, '"'), *plus = strstr(p + 1, "+0x");
			size_t len = (size_t)((plus && plus < end ? plus : end) - (p + 1));

			cr_assert(end);
			snprintf(o + strlen(o), 512 - strlen(o), "%s%.*s", o[0] ? "|" : "", (int)len,
				 p + 1);
			p = end + 1;
			if (*p == ',')
				p++;
		}
	}
	return n;
}

Test(cli_stack, trace_chain_without_frame_pointers)
{
	static const char top[] = "stack_leaf|stack_mid|stack_top|stack_run|main|";
	static const char side[] = "stack_leaf|stack_side|stack_run|main|";
	char stacks[16][512];
	struct run r;
	int n, ntop = 0, nside = 0;

	run_results(&r, "trace", "--stack --format json stack_leaf -- %s 3 2", prog);
	cr_assert_eq(r.status, 0, "%s", r.err);
	n = stacks_of(r.out, stacks, 16);
	cr_assert_eq(n, 5, "%s", r.out);
	for (int i = 0; i < n; i++) {
		/* every frame up to main, then libc's start and _start */
		ntop += !strncmp(stacks[i], top, strlen(top));
		nside += !strncmp(stacks[i], side, strlen(side));
		cr_expect(strstr(stacks[i], "|_start"), "%s", stacks[i]);
	}
	cr_expect_eq(ntop, 3, "%s", r.out);
	cr_expect_eq(nside, 2, "%s", r.out);
	/* the probed address itself first */
	cr_expect_eq(count_of(r.out, "\"stack\":[\"stack_leaf+0x0\","), 5, "%s", r.out);
}

/* At a return probe, the stack of the caller returned to; a frame in the
 * middle whose function is return-probed too shows its real caller, not
 * the library's trampoline. */
Test(cli_stack, return_probes_in_the_middle)
{
	static const char leaf[] = "stack_mid|stack_top|stack_run|main|";
	static const char mid[] = "stack_top|stack_run|main|";
	char stacks[16][512];
	struct run r;
	int n, nleaf = 0, nmid = 0;

	run_results(&r, "trace", "--stack --format json 'stack_leaf%%return' 'stack_mid%%return' "
	    "-- %s 2 0", prog);
	cr_assert_eq(r.status, 0, "%s", r.err);
	n = stacks_of(r.out, stacks, 16);
	cr_assert_eq(n, 4, "%s", r.out);
	for (int i = 0; i < n; i++) {
		nleaf += !strncmp(stacks[i], leaf, strlen(leaf));
		nmid += !strncmp(stacks[i], mid, strlen(mid));
		cr_expect(strstr(stacks[i], "|_start"), "%s", stacks[i]);
	}
	cr_expect_eq(nleaf, 2, "%s", r.out);
	cr_expect_eq(nmid, 2, "%s", r.out);
}

Test(cli_stack, trace_text_depth_and_lines)
{
	char want[128];
	struct run r;

	run_results(&r, "trace", "--stack=3 --lines stack_leaf -- %s 1 0", prog);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(want, sizeof(want), "\n        stack_leaf+0x0 cli_stack.c:%d\n",
		 line_of("LINE_LEAF"));
	cr_expect(strstr(r.out, want), "%s", r.out);
	snprintf(want, sizeof(want), " cli_stack.c:%d\n", line_of("LINE_MID"));
	cr_expect(strstr(r.out, "        stack_mid+0x") && strstr(r.out, want), "%s", r.out);
	snprintf(want, sizeof(want), " cli_stack.c:%d\n", line_of("LINE_TOP"));
	cr_expect(strstr(r.out, "        stack_top+0x") && strstr(r.out, want), "%s", r.out);
	/* three frames, no more */
	cr_expect_eq(count_of(r.out, "\n        "), 3, "%s", r.out);
}

/* gdb's bt at a breakpoint on the same function: the same functions,
 * files and lines, frame by frame, up to main; and past it, libc's frame
 * that calls main when gdb names it with a line (libc's debug file is
 * installed: then ours comes from the same file). */
#define MAXF 16

struct frame_text {
	char fn[256], where[256];
};

static int gdb_frames(struct frame_text *f)
{
	char cmd[PATH_MAX + 256], line[2048];
	int n = 0;
	FILE *g;

	snprintf(cmd, sizeof(cmd), "gdb -batch -nx -ex 'set backtrace past-main on' "
		 "-ex 'break stack_leaf' -ex run -ex bt %s 1 0 2>/dev/null", prog);
	g = popen(cmd, "r");
	cr_assert(g);
	while (n < MAXF && fgets(line, sizeof(line), g)) {
		const char *in = strstr(line, " in "), *at = strstr(line, ") at ");
		char file[200];
		int ln;

		if (line[0] != '#')
			continue;
		if (sscanf(in ? in + 4 : strchr(line, ' ') + 2, "%255s", f[n].fn) != 1)
			break;
		f[n].where[0] = '\0';
		if (at && sscanf(at + 5, "%199[^:]:%d", file, &ln) == 2)
			snprintf(f[n].where, sizeof(f[n].where), "%s:%d",
				 strrchr(file, '/') ? strrchr(file, '/') + 1 : file, ln);
		n++;
	}
	pclose(g);
	return n;
}

Test(cli_stack, same_as_gdb)
{
	struct frame_text gdb[MAXF], ours[MAXF];
	int ng, no = 0, k;
	const char *p;
	struct run r;

	if (system("gdb --version >/dev/null 2>&1"))
		cr_skip_test("gdb is not installed: no oracle");
	ng = gdb_frames(gdb);
	for (k = 0; k < ng && strcmp(gdb[k].fn, "main"); k++)
		;
	if (k == ng)
		cr_skip_test("gdb could not run the program here: no oracle");
	run_results(&r, "trace", "--stack --lines stack_leaf -- %s 1 0", prog);
	cr_assert_eq(r.status, 0, "%s", r.err);
	/* ours: "        NAME+0xOFF [OBJECT] FILE:LINE" */
	for (p = strstr(r.out, "\n        "); p && no < MAXF; p = strstr(p, "\n        ")) {
		const char *eol = strchr(p + 1, '\n'), *sp;

		p += 9;
		if (sscanf(p, "%255[^+]+0x", ours[no].fn) != 1)
			break;
		sp = memrchr(p, ' ', (size_t)((eol ? eol : p + strlen(p)) - p));
		snprintf(ours[no].where, sizeof(ours[no].where), "%.*s",
			 sp ? (int)((eol ? eol : p + strlen(p)) - sp - 1) : 0, sp ? sp + 1 : "");
		if (strchr(ours[no].where, ':') == NULL)
			ours[no].where[0] = '\0';
		no++;
	}
	cr_assert_gt(no, k, "%s", r.out);
	for (int i = 0; i <= k; i++) {
		cr_expect_str_eq(ours[i].fn, gdb[i].fn, "frame %d:\n%s", i, r.out);
		cr_expect_str_eq(ours[i].where, gdb[i].where, "frame %d:\n%s", i, r.out);
	}
	if (k + 1 < ng && gdb[k + 1].where[0]) {
		cr_expect_str_eq(ours[k + 1].fn, gdb[k + 1].fn, "%s", r.out);
		cr_expect_str_eq(ours[k + 1].where, gdb[k + 1].where, "%s", r.out);
	} else {
		cr_log_info("gdb names no line past main (no debug file for libc): compared up to main");
	}
}

/* Debian's python3.11 (built without frame pointers, libpython linked
 * in, stripped of its local symbols): at the first PyObject_Repr() the
 * interpreter makes, from deep inside its start-up, every frame equals
 * gdb's, by name where gdb names it and by address where it cannot
 * (the executable is not position-independent: its addresses are its
 * link-time ones, which is how ours name a frame without a symbol). */
#define PY "/usr/bin/python3.11"
#define PY_ARGS "-I -S -c 'repr(1)'"
#define PY_MAXF 64

struct py_frame {
	char fn[256];
	unsigned long pc;
};

static int python_gdb_frames(struct py_frame *f)
{
	char line[4096];
	int n = 0;
	FILE *g = popen("gdb -batch -nx -ex 'set backtrace past-main on' "
			"-ex 'break PyObject_Repr' -ex run -ex bt --args " PY " " PY_ARGS
			" 2>/dev/null", "r");

	cr_assert(g);
	while (n < PY_MAXF && fgets(line, sizeof(line), g)) {
		const char *in = strstr(line, " in ");
		int k;

		if (line[0] != '#' || sscanf(line, "#%d", &k) != 1 || k != n)
			continue;
		f[n].pc = 0;
		if (in)
			sscanf(strchr(line, ' '), " %lx", &f[n].pc);
		else	/* frame 0, "#0  PyObject_Repr ()" with no pc */
			f[n].pc = 0;
		if (sscanf(in ? in + 4 : strchr(line, ' ') + 2, "%255s", f[n].fn) != 1)
			break;
		n++;
	}
	pclose(g);
	return n;
}

/* ET_DYN: run-time addresses are not the file's. */
static bool executable_is_pie(const char *path)
{
	unsigned char h[18] = { 0 };
	FILE *f = fopen(path, "rb");

	cr_assert(f, "cannot read %s", path);
	cr_assert_eq(fread(h, 1, sizeof(h), f), sizeof(h));
	fclose(f);
	return h[16] == 3;	/* e_type, little-endian */
}

Test(cli_stack, same_as_gdb_in_python)
{
	struct py_frame gdb[PY_MAXF];
	char ours[PY_MAXF][256];
	int ng, no = 0, k;
	bool pie;
	const char *p;
	struct run r;

	if (system("gdb --version >/dev/null 2>&1"))
		cr_skip_test("gdb is not installed: no oracle");
	if (access(PY, X_OK))
		cr_skip_test(PY " is not installed");
	pie = executable_is_pie(PY);
	ng = python_gdb_frames(gdb);
	for (k = 0; k < ng && strcmp(gdb[k].fn, "Py_BytesMain"); k++)
		;
	if (k == ng)
		cr_skip_test("gdb could not run " PY " here: no oracle");
	run_results(&r, "trace", "--stack=64 PyObject_Repr -- " PY " " PY_ARGS);
	cr_assert_eq(r.status, 0, "%s", r.err);
	/* the first event's frames: "        NAME+0xOFF [OBJECT]" */
	for (p = strstr(r.out, "\n        "); p && no < PY_MAXF; p = strstr(p, "\n        ")) {
		p += 9;
		if (sscanf(p, "%255s", ours[no]) != 1)
			break;
		no++;
		if (p[strcspn(p, "\n")] == '\n' && p[strcspn(p, "\n") + 1] != ' ')
			break;	/* the next event */
	}
	cr_assert_gt(no, k + 2, "%s", r.out);
	for (int i = 0; i <= k; i++) {
		char want[300];

		if (!strcmp(gdb[i].fn, "??") && !pie)
			snprintf(want, sizeof(want), "[python3.11]+0x%lx", gdb[i].pc);
		else if (!strcmp(gdb[i].fn, "??"))	/* load address unknown here */
			snprintf(want, sizeof(want), "[python3.11]+0x");
		else
			snprintf(want, sizeof(want), "%.255s+0x", gdb[i].fn);
		cr_expect(!strncmp(ours[i], want, strlen(want)), "frame %d: %s, gdb %s (%#lx)\n%s",
			  i, ours[i], gdb[i].fn, gdb[i].pc, r.out);
	}
	/* past the interpreter's main: libc's two frames, then _start */
	cr_expect(!strncmp(ours[k + 1], "__libc_start_call_main+0x", 25), "%s", ours[k + 1]);
	cr_expect(!strncmp(ours[no - 1], "_start+0x", 9), "%s", r.out);
}

Test(cli_stack, count_folded_exact_per_chain_across_threads)
{
	struct run r;
	const char *a, *b;

	run_results(&r, "count", "--stacks --format folded stack_leaf -- %s 7 4 3", prog);
	cr_assert_eq(r.status, 0, "%s", r.err);
	/* threads start in libc's thread start (no symbols in Debian's libc):
	 * its frames first, then ours */
	a = strstr(r.out, ";stack_run;stack_top;stack_mid;stack_leaf 21\n");
	b = strstr(r.out, ";stack_run;stack_side;stack_leaf 12\n");
	cr_expect(a && b, "%s", r.out);
	cr_expect_eq(count_of(r.out, "\n"), 2, "%s", r.out);
	cr_expect_eq(count_of(r.out, " "), 2, "%s", r.out);
}

/* The sum of the counts of the folded lines whose stack ends with what
 * (its innermost frames; a signal handler's stack holds the interrupted
 * one's further out). */
static unsigned long folded_sum(const char *folded, const char *what)
{
	unsigned long sum = 0;

	for (const char *line = folded; *line;) {
		const char *nl = strchr(line, '\n'), *sp;

		if (!nl)
			break;
		sp = memrchr(line, ' ', (size_t)(nl - line));
		if (sp && (!what || ((size_t)(sp - line) >= strlen(what) &&
				     !memcmp(sp - strlen(what), what, strlen(what)))))
			sum += strtoul(sp + 1, NULL, 10);
		line = nl + 1;
	}
	return sum;
}

/* Many hits of the same stacks by threads (each entry counted by the
 * thread that made it with plain increments, by the others atomically),
 * and hits inside signal handlers interrupting them anywhere, the probe's
 * own handler included: every chain counted exactly, the stacks add up to
 * the probe's hits, and every call from a signal handler is a hit or
 * missed (one that interrupted the probe's handler), none unaccounted. */
Test(cli_stack, count_exact_with_threads_and_signals)
{
	const unsigned long threads = 3, top = 100000, side = 50000;
	struct run r, h;
	unsigned long hits, missed, sig_hits, runs, h_runs;
	const char *p;

	run_results(&h, "count", "--stacks --format json stack_leaf -- %s %lu %lu %lu 200", prog,
		    top, side, threads);
	cr_assert_eq(h.status, 0, "%s", h.err);
	p = strstr(h.out, "\"hits\":");
	cr_assert(p, "%s", h.out);
	hits = strtoul(p + 7, NULL, 10);
	p = strstr(h.out, "\"missed\":");
	cr_assert(p, "%s", h.out);
	missed = strtoul(p + 9, NULL, 10);
	p = strstr(h.err, "signals ");
	cr_assert(p, "%s", h.err);
	h_runs = strtoul(p + 8, NULL, 10);
	run_results(&r, "count", "--stacks --format folded stack_leaf -- %s %lu %lu %lu 200", prog,
		    top, side, threads);
	cr_assert_eq(r.status, 0, "%s", r.err);
	p = strstr(r.err, "signals ");
	cr_assert(p, "%s", r.err);
	runs = strtoul(p + 8, NULL, 10);
	cr_expect_eq(folded_sum(r.out, ";stack_run;stack_top;stack_mid;stack_leaf"), threads * top,
		     "%s", r.out);
	cr_expect_eq(folded_sum(r.out, ";stack_run;stack_side;stack_leaf"), threads * side, "%s",
		     r.out);
	sig_hits = folded_sum(r.out, ";stack_on_signal;stack_leaf");
	cr_expect_eq(folded_sum(r.out, NULL), threads * (top + side) + sig_hits, "%s", r.out);
	cr_expect_leq(sig_hits, runs, "%s", r.out);
	/* the json run: its stacks add up to the probe's hits */
	{
		unsigned long sum = 0;

		for (p = strstr(h.out, "\"count\":"); p; p = strstr(p + 8, "\"count\":"))
			sum += strtoul(p + 8, NULL, 10);
		cr_expect_eq(sum, hits, "%s", h.out);
		cr_expect_geq(hits, threads * (top + side), "%s", h.out);
	}
	/* the probes are armed before main and removed after exit: every
	 * run of the handler called stack_leaf once while they were */
	cr_expect_eq(hits - threads * (top + side) + missed, h_runs,
		     "%lu hits in signal handlers, %lu missed, %lu handler runs", hits -
		     threads * (top + side), missed, h_runs);
}

/* What libkprobes' handler analysis finds each of the agent's handlers
 * (loaded here) needs kept around a hit: expected to be pt_regs alone (the
 * light level, with the registers the handler reads), not errno nor the
 * vector registers, which a thread's first hit reaching its ring through
 * system calls and stores through %fs would cost every hit. */
static void expect_light_handlers(const char *const *handlers, size_t n)
{
#if !defined(__SANITIZE_ADDRESS__)
	char agent[PATH_MAX + 32];
	void *h;

	cli_build_path(agent, sizeof(agent), "libkprobe-agent.so");
	h = dlopen(agent, RTLD_NOW | RTLD_LOCAL);
	cr_assert(h, "%s", dlerror());
	for (size_t i = 0; i < n; i++) {
		struct kprobes_sym sym = { .sz = sizeof(sym) };
		char spec[64];
		uint8_t need;

		snprintf(spec, sizeof(spec), "libkprobe-agent.so:%s", handlers[i]);
		cr_assert_eq(kprobes_sym_lookup_name(spec, &sym), 0, "%s", spec);
		need = kp_code_needs(sym.addr) & ~KP_OPT_SAVE_SCRATCH;
		cr_expect_eq(need, KP_OPT_SAVE_REGS, "%s needs %#x", handlers[i], need);
	}
#else
	(void)handlers;
	(void)n;
	cr_skip_test("the analysis is the library's, tested without sanitizers");
#endif
}

/* The count-by-stack handlers. */
Test(cli_stack, count_handlers_keep_the_light_level)
{
	static const char *const handlers[] = { "count_stack_entry", "count_stack_return" };

	expect_light_handlers(handlers, sizeof(handlers) / sizeof(handlers[0]));
}

/* trace's handlers for integer arguments: an entry's, and a return's two
 * (the entry keeping its time and arguments, the return writing them). */
Test(cli_stack, trace_handlers_keep_the_light_level)
{
	static const char *const handlers[] = { "record_entry_args", "trace_return_entry",
						"trace_return" };

	expect_light_handlers(handlers, sizeof(handlers) / sizeof(handlers[0]));
}

/* At a return (a return probe without an entry handler): the stack of
 * the caller it returns to, exact per chain across threads. */
Test(cli_stack, count_folded_at_returns)
{
	struct run r;

	run_results(&r, "count", "--stacks --format folded 'stack_leaf%%return' -- %s 7 4 3", prog);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_eq(folded_sum(r.out, ";stack_run;stack_top;stack_mid"), 21, "%s", r.out);
	cr_expect_eq(folded_sum(r.out, ";stack_run;stack_side"), 12, "%s", r.out);
	cr_expect_eq(folded_sum(r.out, NULL), 33, "%s", r.out);
}

/* Attached to a running process: the target's mappings are read when the
 * tool arms it, the table is read when it detaches. */
Test(cli_stack, count_attached)
{
	struct run r;
	pid_t pid = fork();
	char *line;

	cr_assert(pid >= 0);
	if (pid == 0) {
		execl(prog, prog, "2000000000", "0", (char *)NULL);
		_exit(127);
	}
	usleep(200000);
	run_results(&r, "count", "--stacks --format folded stack_leaf -p %d -d 0.3", (int)pid);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	line = strstr(r.out, ";main;stack_run;stack_top;stack_mid;stack_leaf ");
	cr_assert(line, "%s", r.out);
	cr_expect_gt(strtol(strchr(line, ' ') + 1, NULL, 10), 0, "%s", r.out);
	cr_expect_eq(count_of(r.out, "\n"), 1, "%s", r.out);
}

Test(cli_stack, count_text_as_bpftrace_maps)
{
	struct run r;

	run_results(&r, "count", "--stacks=4 stack_leaf -- %s 5 2", prog);
	cr_assert_eq(r.status, 0, "%s", r.err);
	/* the totals as count prints them, then one map entry per stack */
	cr_expect(strstr(r.out, "stack_leaf  "), "%s", r.out);
	cr_expect(strstr(r.out, "@[stack_leaf,\n    stack_leaf+0x0\n    stack_side+0x"), "%s",
		  r.out);
	cr_expect(strstr(r.out, "    stack_run+0x"), "%s", r.out);
	cr_expect(strstr(r.out, "\n]: 2\n@[stack_leaf,\n    stack_leaf+0x0\n    stack_mid+0x"),
		  "%s", r.out);
	cr_expect(strstr(r.out, "    stack_top+0x"), "%s", r.out);
	cr_expect(strstr(r.out, "\n]: 5\n"), "%s", r.out);
}

Test(cli_stack, count_json_has_the_stacks)
{
	struct run r;

	run_results(&r, "count", "--stacks=4 --format json stack_leaf -- %s 3 2", prog);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "\"hits\":5,"), "%s", r.out);
	/* most hits first */
	cr_expect(strstr(r.out, ",\"stacks\":[{\"probe\":\"stack_leaf\",\"stack\":[\"stack_leaf+0x0\","
				"\"stack_mid+0x"), "%s", r.out);
	cr_expect(strstr(r.out, "\"],\"count\":3},{\"probe\":\"stack_leaf\",\"stack\":[\"stack_leaf+0x0\","
				"\"stack_side+0x"), "%s", r.out);
	cr_expect(strstr(r.out, "\"],\"count\":2}]}\n"), "%s", r.out);
}

Test(cli_stack, cxx_names_demangled)
{
	struct run r;

	run_results(&r, "trace", "--stack _ZN6shapes4leafEi -- %s", prog_cxx);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "\n        shapes::leaf(int)+0x0\n"
				"        shapes::Circle::area(int) const+0x"), "%s", r.out);
	cr_expect(strstr(r.out, "\n        int shapes::measure<shapes::Circle>(shapes::Circle "
				"const&, int)+0x"), "%s", r.out);
	cr_expect(strstr(r.out, "\n        main+0x"), "%s", r.out);
}

Test(cli_stack, chrome_carries_the_stack)
{
	struct run r;

	run_results(&r, "trace", "--stack=2 --format chrome stack_leaf -- %s 1 0", prog);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "\"stack\":[\"stack_leaf+0x0\",\"stack_mid+0x"), "%s", r.out);
}

/* ustack in a program, on a function whose callers keep no frame
 * pointer: every caller listed, in bpftrace's format. */
Test(cli_stack, ustack_without_frame_pointers)
{
	char cmd[PATH_MAX * 2 + 256];
	struct run r;

	snprintf(cmd, sizeof(cmd), "-e 'uprobe:%s:stack_leaf { @[ustack(5)] = count(); }' "
		 "-c '%s 4 0'", prog, prog);
	run_results(&r, "run", "%s", cmd);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "@[\n    stack_leaf+0\n    stack_mid+"), "%s", r.out);
	cr_expect(strstr(r.out, "\n    stack_top+"), "%s", r.out);
	cr_expect(strstr(r.out, "\n    stack_run+"), "%s", r.out);
	cr_expect(strstr(r.out, "\n    main+"), "%s", r.out);
	cr_expect(strstr(r.out, "]: 4\n"), "%s", r.out);
}

/* ustack(perf[, N]) as bpftrace prints it: per frame a tab, the address
 * in hex, symbol+offset and the object's path in parentheses. */
Test(cli_stack, ustack_perf_mode)
{
	char cmd[PATH_MAX * 2 + 256], want[PATH_MAX + 64];
	const char *at;
	unsigned long a1, a2;
	struct run r;

	snprintf(cmd, sizeof(cmd), "-e 'uprobe:%s:stack_leaf { @[ustack(perf, 3)] = count(); "
		 "@s = ustack(perf, 1); }' -c '%s 4 0'", prog, prog);
	run_results(&r, "run", "%s", cmd);
	cr_assert_eq(r.status, 0, "%s", r.err);
	at = strstr(r.out, "@[\n\t");
	cr_assert(at, "%s", r.out);
	cr_expect(sscanf(at, "@[\n\t%lx stack_leaf+0 (%*[^)])\n\t%lx stack_mid+", &a1, &a2) == 2,
		  "%s", r.out);
	snprintf(want, sizeof(want), " stack_leaf+0 (%s)\n\t", prog);
	cr_expect(strstr(at, want), "%s", r.out);
	cr_expect(strstr(at, " stack_top+") && strstr(at, ")\n]: 4\n"), "%s", r.out);
	cr_expect(strstr(r.out, "@s: \n\t"), "%s", r.out);	/* as bpftrace prints a stack value */
	run_results(&r, "run", "-e 'uprobe:%s:stack_leaf { @[ustack(3, perf)] = count(); }' -c '%s 1 0'",
		    prog, prog);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "ustack() takes the mode first"), "%s", r.err);
}

/* A library dlopen()ed after the probes were armed (libsqlite3, without
 * frame pointers) calls the probed function back: its tables are built
 * when it loads, so the stack goes on through its frames to main and
 * _start, in trace --stack, count --stacks and ustack alike. */
static void skip_without_sqlite(void)
{
	void *h = dlopen("libsqlite3.so.0", RTLD_NOW | RTLD_LOCAL);

	if (!h)
		cr_skip_test("libsqlite3.so.0 is not installed");
	dlclose(h);
}

Test(cli_stack, trace_through_a_library_loaded_later)
{
	char stacks[8][512];
	struct run r;
	int n;

	skip_without_sqlite();
	run_results(&r, "trace", "--stack --format json stack_dl_row -- %s 3", prog_dl);
	cr_assert_eq(r.status, 0, "%s", r.err);
	n = stacks_of(r.out, stacks, 8);
	cr_assert_eq(n, 3, "%s", r.out);
	for (int i = 0; i < n; i++) {
		cr_expect(!strncmp(stacks[i], "stack_dl_row|", 13), "%s", stacks[i]);
		cr_expect(strstr(stacks[i], "|main|"), "%s", stacks[i]);
		cr_expect(strstr(stacks[i], "|_start"), "%s", stacks[i]);
	}
}

Test(cli_stack, count_through_a_library_loaded_later)
{
	struct run r;

	skip_without_sqlite();
	run_results(&r, "count", "--stacks --format folded stack_dl_row -- %s 4", prog_dl);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "_start;") && strstr(r.out, ";main;") &&
		  strstr(r.out, ";stack_dl_row 4\n"), "%s", r.out);
}

/* The library stays loaded for 300 ms, long enough for the tool to see
 * it mapped, then is closed 300 ms before the end: its frames, taken
 * while it was there, still read as its functions. */
Test(cli_stack, frames_of_a_library_closed_since)
{
	struct run r;

	skip_without_sqlite();
	run_results(&r, "count", "--stacks --format folded stack_dl_row -- %s 4 300 300", prog_dl);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, ";main;sqlite3_exec;") && strstr(r.out, ";stack_dl_row 4\n"),
		  "%s", r.out);
}

/* The library closed as soon as its calls are done, long before the tool
 * reads the mappings again, then the program sleeps and ends: the agent
 * noted where the library was when it loaded. */
Test(cli_stack, frames_of_a_library_that_came_and_went)
{
	char cmd[PATH_MAX * 2 + 256];
	struct run r;

	skip_without_sqlite();
	run_results(&r, "count", "--stacks --format folded stack_dl_row -- %s 4 300", prog_dl);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, ";main;sqlite3_exec;stack_dl_row 4\n"), "%s", r.out);
	snprintf(cmd, sizeof(cmd), "-e 'uprobe:%s:stack_dl_row { @[ustack(perf, 2)] = count(); }' "
		 "-c '%s 2'", prog_dl, prog_dl);
	run_results(&r, "run", "%s", cmd);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, " sqlite3_exec+") && strstr(r.out, "libsqlite3.so"), "%s", r.out);
}

Test(cli_stack, ustack_through_a_library_loaded_later)
{
	char cmd[PATH_MAX * 2 + 256];
	struct run r;

	skip_without_sqlite();
	snprintf(cmd, sizeof(cmd), "-e 'uprobe:%s:stack_dl_row { @[ustack] = count(); }' "
		 "-c '%s 2'", prog_dl, prog_dl);
	run_results(&r, "run", "%s", cmd);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "@[\n    stack_dl_row+0\n"), "%s", r.out);
	cr_expect(strstr(r.out, "\n    main+"), "%s", r.out);
	cr_expect(strstr(r.out, "]: 2\n"), "%s", r.out);
}

Test(cli_stack, bad_input)
{
	static const char *const bad[][3] = {
		{ "trace", "--stack=0 stack_leaf", "bad stack depth '0'" },
		{ "trace", "--stack=1000 stack_leaf", "bad stack depth '1000'" },
		{ "trace", "--stack=x stack_leaf", "bad stack depth 'x'" },
		{ "count", "--format folded stack_leaf", "--format folded is for count --stacks" },
		{ "trace", "--lines stack_leaf", "--lines needs --stack" },
		{ "latency", "--stack stack_leaf", "unknown option '--stack'" },
	};
	struct run r;

	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		run_results(&r, bad[i][0], "%s -- %s", bad[i][1], prog);
		cr_expect_eq(r.status, 2, "%s: status %d", bad[i][1], r.status);
		cr_expect(strstr(r.err, bad[i][2]), "%s: %s", bad[i][1], r.err);
		cr_expect_eq(count_of(r.err, "\n"), 1, "%s: %s", bad[i][1], r.err);
	}
}
