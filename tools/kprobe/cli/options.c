/* Command-line parsing: subcommands, options, probe specs. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "dwarf_vars.h"
#include "nearmatch.h"

static const char *const commands[] = {
	[CMD_TRACE] = "trace", [CMD_COUNT] = "count", [CMD_LATENCY] = "latency",
	[CMD_WATCH] = "watch", [CMD_LOAD] = "load", [CMD_RUN] = "run", [CMD_RECORD] = "record",
	[CMD_LIST] = "list", [CMD_ENABLE] = "enable", [CMD_DISABLE] = "disable",
	[CMD_OPTIMIZE] = "optimize", [CMD_VARS] = "vars", [CMD_REPORT] = "report",
	[CMD_REPLAY] = "replay", [CMD_DUMP] = "dump",
};

static const char *const long_options[] = {
	"--output", "--format", "--duration", "--pid", "--follow", "--zeros", "--help",
	"--version", "--rw", "--count", "--stack", "--map-keys", "--no-inlines", "--stacks",
	"--lines", "--drop", "--sort", "--unsafe",
};

#ifndef KPROBE_VERSION
#define KPROBE_VERSION "unknown"
#endif

static void print_version(void)
{
	printf("kprobe (libkprobes) %s\n", KPROBE_VERSION);
	exit(fflush(stdout) || ferror(stdout) ? EXIT_FAIL : 0);
}

void cli_usage(FILE *f)
{
	fputs("usage: kprobe trace   [OPTIONS] PROBE...  (-- COMMAND [ARG...] | -p PID)\n"
	      "       kprobe count   [OPTIONS] PROBE...  (-- COMMAND [ARG...] | -p PID)\n"
	      "       kprobe latency [OPTIONS] FUNCTION  (-- COMMAND [ARG...] | -p PID)\n"
	      "       kprobe watch   [OPTIONS] VARIABLE [--rw] [--count] [--stack]  (-- COMMAND | -p PID)\n"
	      "       kprobe run     [OPTIONS] -e 'PROGRAM' [ARG...] (-- COMMAND [ARG...] | -c 'COMMAND' | -p PID)\n"
	      "       kprobe run     [OPTIONS] FILE.bt [ARG...]      (-- COMMAND [ARG...] | -c 'COMMAND' | -p PID)\n"
	      "       kprobe load    [OPTIONS] MODULE.so [ARG...]  (-- COMMAND [ARG...] | -p PID)\n"
	      "       kprobe record  [-o DIR] [-F OBJECT]... [PROBE...]  (-- COMMAND [ARG...] | -p PID)\n"
	      "       kprobe report  [--sort total|self|calls] [DIR]\n"
	      "       kprobe replay  [DIR]\n"
	      "       kprobe dump    --format chrome|json [-o FILE] [DIR]\n"
	      "       kprobe list    -p PID\n"
	      "       kprobe list    [-p PID] OBJECT|GLOB [GLOB]   (functions; or kprobe -l)\n"
	      "       kprobe enable|disable   -p PID\n"
	      "       kprobe optimize on|off  -p PID\n"
	      "       kprobe vars    PROBE (OBJECT | -- COMMAND | -p PID)   (variables there)\n"
	      "\n"
	      "PROBE: [OBJECT:]SYMBOL[+OFFSET][%return] [ARG...] | [OBJECT:]0xADDRESS | FILE.c:LINE\n"
	      "       | tp:PROVIDER:NAME [ARG...]   (a static tracepoint)\n"
	      "VARIABLE: [OBJECT:]SYMBOL[+OFFSET][:LEN] | 0xADDRESS[:LEN]   LEN: 1 2 4 8 (8)\n"
	      "ARG:   [NAME=]arg1..arg6|retval[:TYPE]   TYPE: u64 s64 x64 u32 s32 u16 s16 u8 s8\n"
	      "       string f64 (argN:f64, arg1..arg8: the N-th floating-point argument;\n"
	      "       retval:f64, retval:f32: xmm0; retval of a double or float function is one)\n"
	      "       | [NAME=]VAR[->FIELD|.FIELD|[N]]...[:TYPE] | *VAR | $params | $vars\n"
	      "       (a program variable, from DWARF; NAME= needed outside a quoted PROBE)\n"
	      "\n"
	      "options:\n"
	      "  -o, --output FILE          write the results to FILE (record: DIR, default\n"
	      "                             kprobe.data)\n"
	      "  -F OBJECT                  record: every function of OBJECT (main: the program)\n"
	      "      --drop                 a full buffer drops events (counted) instead of\n"
	      "                             making the target wait\n"
	      "      --sort total|self|calls   report's order\n"
	      "      --format text|json|chrome|folded   (folded: count --stacks)\n"
	      "  -d, --duration SECONDS     stop probing after SECONDS\n"
	      "  -p, --pid PID              attach to a running process\n"
	      "  -f, --follow               follow forks and execs of the command\n"
	      "  -z, --zeros                count: also list the probes with no hits\n"
	      "      --rw                   watch: reads too, not only writes\n"
	      "      --count                watch: accesses per instruction, not each one\n"
	      "      --no-inlines           not the inlined copies of a function (DWARF)\n"
	      "      --stack[=N]            trace, watch: each event's stack (N frames, 32)\n"
	      "      --stacks[=N]           count: hits per distinct stack too\n"
	      "      --lines                with stacks: FILE:LINE of each frame\n"
	      "  -e 'PROGRAM'               run: the program (bpftrace's language)\n"
	      "  -c 'COMMAND'               run: the command, split at spaces as bpftrace does\n"
	      "      --map-keys N           run: room for N keys per map (default 4096)\n"
	      "      --unsafe               run: allow system() (runs commands, as bpftrace's)\n"
	      "  run takes -f text|json as bpftrace does (--format); ARGs are $1, $2...\n"
	      "  -h, --help                 this help\n"
	      "      --version              the version\n", f);
}

static void bad(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

static void bad(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cli_die(EXIT_BAD, "%s", msg);
}

static enum cli_cmd parse_command(const char *word)
{
	struct nearmatch m;
	char hint[300];

	for (unsigned int i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(word, commands[i]))
			return (enum cli_cmd)i;
	nearmatch_init(&m, word);
	for (unsigned int i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		nearmatch_offer(&m, commands[i]);
	bad("unknown command '%s'%s; see kprobe --help", word,
	    nearmatch_hint(&m, hint, sizeof(hint)));
}

/* The value of an option given as "-x V", "-xV", "--long V" or "--long=V". */
static const char *option_value(int argc, char **argv, int *i, const char *name)
{
	const char *arg = argv[*i];
	const char *eq = strchr(arg, '=');

	if (arg[1] != '-' && arg[2])
		return arg + 2;
	if (arg[1] == '-' && eq)
		return eq + 1;
	if (*i + 1 >= argc)
		bad("option %s needs a value", name);
	return argv[++*i];
}

static bool is_option(const char *arg, char short_name, const char *long_name)
{
	size_t n = strlen(long_name);

	if (short_name && arg[0] == '-' && arg[1] == short_name && arg[1] != '-')
		return true;
	return !strncmp(arg, long_name, n) && (arg[n] == '\0' || arg[n] == '=');
}

static pid_t parse_pid(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v <= 0 || v > 0x3fffffff)
		bad("bad PID '%s'", s);
	return (pid_t)v;
}

static double parse_duration(const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !(v > 0) || v > 1e9)
		bad("bad duration '%s' (seconds, > 0)", s);
	return v;
}

static enum out_format parse_format(const char *s)
{
	if (!strcmp(s, "text"))
		return FMT_TEXT;
	if (!strcmp(s, "json"))
		return FMT_JSON;
	if (!strcmp(s, "chrome"))
		return FMT_CHROME;
	if (!strcmp(s, "folded"))
		return FMT_FOLDED;
	bad("bad format '%s' (text, json, chrome or folded)", s);
}

/* --stack, --stacks: KPS_STACK_DEFAULT frames; --stack=N: N. */
static unsigned int parse_stack_depth(const char *arg)
{
	const char *eq = strchr(arg, '=');
	char *end;
	unsigned long v;

	if (!eq)
		return KPS_STACK_DEFAULT;
	errno = 0;
	v = strtoul(eq + 1, &end, 10);
	if (errno || *end || !v || v > KPS_STACK_MAX || eq[1] == '-' || !eq[1])
		bad("bad stack depth '%s' (1 to %d frames)", eq + 1, KPS_STACK_MAX);
	return (unsigned int)v;
}

static enum report_sort parse_sort(const char *s)
{
	if (!strcmp(s, "total"))
		return SORT_TOTAL;
	if (!strcmp(s, "self"))
		return SORT_SELF;
	if (!strcmp(s, "calls"))
		return SORT_CALLS;
	bad("bad sort key '%s' (total, self or calls)", s);
}

static void unknown_option(const char *arg)
{
	struct nearmatch m;
	char hint[300], name[64];
	const char *eq = strchr(arg, '=');

	snprintf(name, sizeof(name), "%.*s", (int)(eq ? eq - arg : (long)strlen(arg)), arg);
	nearmatch_init(&m, name);
	for (unsigned int i = 0; i < sizeof(long_options) / sizeof(long_options[0]); i++)
		nearmatch_offer(&m, long_options[i]);
	bad("unknown option '%s'%s", name, nearmatch_hint(&m, hint, sizeof(hint)));
}

/* A probe word: a new probe, an ARG of the current one, or a whole quoted
 * "PROBE ARG..." string. */
static void add_probe_word(struct cli_opts *o, const char *word)
{
	char err[600];
	struct probe_spec *cur = o->nspecs ? &o->specs[o->nspecs - 1] : NULL;

	if (strpbrk(word, " \t")) {
		if (o->nspecs == KPROBE_MAX_SPECS)
			bad("too many probes (at most %d)", KPROBE_MAX_SPECS);
		if (spec_parse(word, &o->specs[o->nspecs], err, sizeof(err)))
			bad("%s", err);
		o->nspecs++;
		return;
	}
	if (spec_token_is_arg(word)) {
		if (!cur)
			bad("argument '%s' comes before any probe", word);
		if (spec_add_arg(cur, word, err, sizeof(err)))
			bad("%s", err);
		if (spec_format(cur) && spec_too_long(cur, err, sizeof(err)))
			bad("%s", err);
		return;
	}
	if (o->nspecs == KPROBE_MAX_SPECS)
		bad("too many probes (at most %d)", KPROBE_MAX_SPECS);
	if (spec_parse_location(word, &o->specs[o->nspecs], err, sizeof(err)))
		bad("%s", err);
	if (spec_format(&o->specs[o->nspecs]) &&
	    spec_too_long(&o->specs[o->nspecs], err, sizeof(err)))
		bad("%s", err);
	o->nspecs++;
}

/* The :LEN suffix of a watched variable (1, 2, 4 or 8; 8 without). */
static unsigned int watch_length(char *word)
{
	char *colon = strrchr(word, ':');

	if (!colon || !colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1))
		return 8;
	if (colon[2] || !strchr("1248", colon[1]))
		bad("bad length '%s' for watch (1, 2, 4 or 8)", colon + 1);
	*colon = '\0';
	return (unsigned int)(colon[1] - '0');
}

/* watch VARIABLE: one, a symbol (no glob, no %return) or an address; the
 * trace shows each access's old and new value as two arguments. */
static void add_watch_word(struct cli_opts *o, const char *word)
{
	struct probe_spec *s = &o->specs[0];
	char loc[SPEC_TEXT_MAX], err[600];

	if (o->nspecs)
		bad("watch takes one variable, not also '%s'", word);
	snprintf(loc, sizeof(loc), "%s", word);
	o->watch_len = watch_length(loc);
	if (spec_parse_location(loc, s, err, sizeof(err)))
		bad("%s", err);
	if ((s->kind != SPEC_SYMBOL && s->kind != SPEC_ADDRESS) || s->is_return ||
	    spec_is_glob(s) || !loc[0])
		bad("watch takes a variable ([OBJECT:]SYMBOL[+OFFSET][:LEN] or 0xADDRESS[:LEN]), "
		    "not '%s'", word);
	spec_format(s);
	o->nspecs = 1;
}

/* Old and new value as the trace's two arguments (the count has none). */
static void finish_watch(struct cli_opts *o)
{
	static const char *const names[] = { "old=arg1:x64", "new=arg2:x64" };
	char err[600];

	if (!o->nspecs)
		bad("watch needs a variable; see kprobe --help");
	if (o->action == ACT_COUNT)
		return;
	for (int i = 0; i < 2; i++)
		if (spec_add_arg(&o->specs[0], names[i], err, sizeof(err)))
			bad("%s", err);
	spec_format(&o->specs[0]);
}

/* list [OBJECT] [GLOB]: one word is the object (or, with -p, a glob if no
 * loaded object has that name), two are the object and the glob. */
static void add_list_word(struct cli_opts *o, const char *word)
{
	if (!o->list_object)
		o->list_object = word;
	else
		o->list_glob = word;
}

/* load MODULE.so [ARG...]: the first word is the module (made absolute:
 * an attached process has another working directory), the others its
 * ARGs, which travel one per config line; after the module, a word that
 * is not one of our options is an ARG even if it starts with '-'. */
static void add_module_word(struct cli_opts *o, char **argv, int i)
{
	static char path[PATH_MAX];
	const char *a = argv[i];

	if (o->module) {
		if (strchr(a, '\n'))
			bad("a module argument cannot contain a newline");
		if (o->nmodargs == KPROBE_MAX_MODARGS)
			bad("too many module arguments (at most %d)", KPROBE_MAX_MODARGS);
		if (!o->modargs)
			o->modargs = calloc(KPROBE_MAX_MODARGS, sizeof(*o->modargs));
		if (!o->modargs)
			cli_die(EXIT_FAIL, "out of memory");
		o->modargs[o->nmodargs++] = argv[i];
		return;
	}
	if (!realpath(a, path))
		bad("cannot load module '%s': %s", a, strerror(errno));
	if (access(path, R_OK))
		bad("cannot read module '%s': %s", a, strerror(errno));
	if (strchr(path, '\n') || strlen(path) > PROTO_LINE_MAX - 16)
		bad("bad module path '%s'", a);
	o->module = path;
}

/* -c 'COMMAND': split at spaces as bpftrace splits it (no shell, no
 * quoting). */
static void set_split_command(struct cli_opts *o, const char *cmd)
{
	char *copy = strdup(cmd), *save = NULL;
	char **argv;
	int n = 0;

	argv = calloc(strlen(cmd) / 2 + 2, sizeof(*argv));
	if (!copy || !argv)
		cli_die(EXIT_FAIL, "out of memory");
	for (char *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save))
		argv[n++] = w;
	if (!n)
		bad("-c needs a command");
	o->command = argv;
}

static uint32_t parse_map_keys(const char *s)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || !v || v > (1ul << 24) || s[0] == '-')
		bad("bad --map-keys '%s' (1 to %lu)", s, 1ul << 24);
	return (uint32_t)v;
}

/* run: the first word is the program file unless -e gave it; the rest
 * are its positional parameters. */
static void add_run_word(struct cli_opts *o, char **argv, int i)
{
	if (!o->prog_text && !o->prog_file) {
		o->prog_file = argv[i];
		return;
	}
	if (!o->params)
		o->params = calloc(256, sizeof(*o->params));
	if (!o->params)
		cli_die(EXIT_FAIL, "out of memory");
	if (o->nparams == 255)
		bad("too many positional parameters (at most 255)");
	o->params[o->nparams++] = argv[i];
}

static void parse_words(int argc, char **argv, int first, struct cli_opts *o,
			const char **knob)
{
	for (int i = first; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--")) {
			if (i + 1 >= argc)
				bad("no command after '--'");
			if (o->command)
				bad("give one command: -c 'COMMAND' or -- COMMAND");
			o->command = &argv[i + 1];
			return;
		}
		if (is_option(a, 'o', "--output")) {
			o->outfile = option_value(argc, argv, &i, "-o");
		} else if (o->cmd == CMD_RUN && is_option(a, 'e', "--program")) {
			if (o->prog_text || o->prog_file)
				bad("give one program: -e 'PROGRAM' or FILE.bt");
			o->prog_text = option_value(argc, argv, &i, "-e");
		} else if (o->cmd == CMD_RUN && is_option(a, 'c', "--command")) {
			if (o->command)
				bad("give one command: -c 'COMMAND' or -- COMMAND");
			set_split_command(o, option_value(argc, argv, &i, "-c"));
		} else if (o->cmd == CMD_RUN && !strcmp(a, "--unsafe")) {
			o->unsafe = true;
		} else if (o->cmd == CMD_RUN && is_option(a, 0, "--map-keys")) {
			o->map_keys = parse_map_keys(option_value(argc, argv, &i, "--map-keys"));
		} else if (o->cmd == CMD_RUN && is_option(a, 'f', "--format")) {
			/* bpftrace's -f FORMAT; run does not follow children */
			o->format = parse_format(option_value(argc, argv, &i, "-f"));
		} else if (is_option(a, 0, "--format")) {
			o->format = parse_format(option_value(argc, argv, &i, "--format"));
			o->format_given = true;
		} else if (is_option(a, 'd', "--duration")) {
			o->duration = parse_duration(option_value(argc, argv, &i, "-d"));
		} else if (is_option(a, 'p', "--pid")) {
			pid_t pid = parse_pid(option_value(argc, argv, &i, "-p"));

			/* One session probes one process: refuse rather than
			 * silently probe only the last one. */
			if (o->pid)
				bad("kprobe probes one process at a time, not -p %d and -p %d", (int)o->pid,
				    (int)pid);
			o->pid = pid;
		} else if (!strcmp(a, "-f") || !strcmp(a, "--follow")) {
			o->follow = true;
		} else if (!strcmp(a, "--drop")) {
			o->drop = true;
		} else if (is_option(a, 0, "--sort")) {
			o->sort = parse_sort(option_value(argc, argv, &i, "--sort"));
		} else if (is_option(a, 'F', "--function-object")) {
			if (o->cmd != CMD_RECORD)
				bad("-F is for record only");
			if (o->nobjects == CLI_MAX_OBJECTS)
				bad("too many -F objects (at most %d)", CLI_MAX_OBJECTS);
			o->objects[o->nobjects++] = option_value(argc, argv, &i, "-F");
		} else if (!strcmp(a, "-z") || !strcmp(a, "--zeros")) {
			o->zeros = true;
		} else if (o->cmd == CMD_WATCH && !strcmp(a, "--rw")) {
			o->watch_rw = true;
		} else if (o->cmd == CMD_WATCH && !strcmp(a, "--count")) {
			o->action = ACT_COUNT;
		} else if ((o->cmd == CMD_WATCH || o->cmd == CMD_TRACE) &&
			   is_option(a, 0, "--stack")) {
			o->stack_depth = parse_stack_depth(a);
		} else if (o->cmd == CMD_COUNT && is_option(a, 0, "--stacks")) {
			o->stack_depth = parse_stack_depth(a);
			o->stack_count = true;
		} else if (o->cmd <= CMD_WATCH && !strcmp(a, "--lines")) {
			o->lines = true;
		} else if (!strcmp(a, "--no-inlines")) {
			o->no_inlines = true;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			cli_usage(stdout);
			exit(0);
		} else if (!strcmp(a, "--version")) {
			print_version();
		} else if (o->cmd == CMD_LOAD && o->module) {
			add_module_word(o, argv, i);
		} else if (o->cmd == CMD_RUN && (o->prog_text || o->prog_file)) {
			add_run_word(o, argv, i);
		} else if (a[0] == '-' && a[1]) {
			unknown_option(a);
		} else if (CMD_READS_DATA(o->cmd)) {
			if (o->data_dir)
				bad("unexpected '%s' for %s", a, commands[o->cmd]);
			o->data_dir = a;
		} else if (o->cmd == CMD_LOAD) {
			add_module_word(o, argv, i);
		} else if (o->cmd == CMD_RUN) {
			add_run_word(o, argv, i);
		} else if (o->cmd == CMD_OPTIMIZE && !*knob) {
			*knob = a;
		} else if (o->cmd == CMD_LIST && !o->list_glob) {
			add_list_word(o, a);
		} else if (o->cmd == CMD_VARS) {
			if (o->nspecs && !o->list_object && !spec_token_is_arg(a))
				o->list_object = a;
			else
				add_probe_word(o, a);
		} else if (!CMD_PROBES(o->cmd)) {
			bad("unexpected '%s' for %s", a, commands[o->cmd]);
		} else if (o->cmd == CMD_WATCH) {
			add_watch_word(o, a);
		} else {
			add_probe_word(o, a);
		}
	}
}

static void check_load_command(struct cli_opts *o)
{
	if (!o->module)
		bad("load needs a module (MODULE.so); see kprobe --help");
	if (!o->command && !o->pid)
		bad("give a command after '--' or a process with -p PID");
	if (o->command && o->pid)
		bad("give either a command after '--' or -p PID, not both");
	if (o->format == FMT_CHROME || o->format == FMT_FOLDED)
		bad("--format %s is not for load", o->format == FMT_CHROME ? "chrome" : "folded");
	if (o->zeros)
		bad("-z (--zeros) is for count only");
}

static void check_run_command(struct cli_opts *o)
{
	if (!o->prog_text && !o->prog_file)
		bad("run needs a program: -e 'PROGRAM' or FILE.bt; see kprobe --help");
	if (!o->command && !o->pid)
		bad("give a command after '--' or with -c, or a process with -p PID");
	if (o->command && o->pid)
		bad("give either a command or -p PID, not both");
	if (o->format == FMT_CHROME || o->format == FMT_FOLDED)
		bad("run prints text or json (bpftrace's formats)");
	if (o->zeros)
		bad("-z (--zeros) is for count only");
	if (o->follow)
		bad("run does not follow children (-f FORMAT is the output format)");
}

/* An OBJECT given by a path relative to our directory names that file
 * (as the shell and bpftrace take it), wherever the target runs and
 * whatever the tool compares it with: made absolute when it exists. */
static void absolute_object(struct probe_spec *s)
{
	char path[PATH_MAX], err[600];

	if (!strchr(s->object, '/') || s->object[0] == '/' || !realpath(s->object, path))
		return;
	if (strlen(path) >= sizeof(s->object))
		bad("the path of '%s' is too long (at most %zu characters)", s->object,
		    sizeof(s->object) - 1);
	memcpy(s->object, path, strlen(path) + 1);
	if (spec_format(s) && spec_too_long(s, err, sizeof(err)))
		bad("%s", err);
}

/* bpftrace's short library names in the probes of every command, as in
 * programs: an OBJECT that no file of the loader's directories is named
 * ("libc") but the loader's cache resolves ("libc.so.6") names that
 * library, by its path; with -p, the library of that name the process
 * maps.  Without this such a probe waited, silently, for an object of
 * that name that never loads. */
static void short_library_name(const struct cli_opts *o, struct probe_spec *s)
{
	char path[PATH_MAX], err[600];

	if (!(o->pid && cli_short_library_of_pid(o->pid, s->object, path, sizeof(path))) &&
	    cli_short_library(s->object, path, sizeof(path)))
		return;
	if (strlen(path) >= sizeof(s->object))
		return;
	memcpy(s->object, path, strlen(path) + 1);
	if (spec_format(s) && spec_too_long(s, err, sizeof(err)))
		bad("%s", err);
}

static void check_record(struct cli_opts *o);

static void check_probe_command(struct cli_opts *o)
{
	char err[600];

	if (o->cmd == CMD_RECORD) {
		check_record(o);
		return;
	}
	if (o->drop && o->cmd == CMD_COUNT)
		bad("--drop is for trace, latency and record");
	if (!o->nspecs)
		bad("%s needs at least one probe; see kprobe --help", commands[o->cmd]);
	if (!o->command && !o->pid)
		bad("give a command after '--' or a process with -p PID");
	if (o->command && o->pid)
		bad("give either a command after '--' or -p PID, not both");
	if (o->format == FMT_CHROME && o->cmd != CMD_TRACE)
		bad("--format chrome is for trace only");
	if (o->format == FMT_FOLDED && !o->stack_count)
		bad("--format folded is for count --stacks only");
	if (o->stack_depth && !o->stack_count && o->action == ACT_COUNT)
		bad("watch --count --stack: use one of them");
	if (o->lines && !o->stack_depth)
		bad("--lines needs --stack (or count --stacks)");
	if (o->zeros && o->action != ACT_COUNT)
		bad("-z (--zeros) is for count only");
	if (o->cmd == CMD_COUNT)
		for (int i = 0; i < o->nspecs; i++)
			if (o->specs[i].nargs)
				bad("count records no arguments: '%s'", o->specs[i].text);
	for (int i = 0; i < o->nspecs; i++) {
		absolute_object(&o->specs[i]);
		short_library_name(o, &o->specs[i]);
	}
	if (o->cmd == CMD_LATENCY) {
		struct probe_spec *s = &o->specs[0];

		if (o->nspecs != 1)
			bad("latency takes one function, not '%s'", o->specs[1].text);
		if (s->nargs || s->is_return || s->kind != SPEC_SYMBOL || s->offset)
			bad("latency takes a function name, not '%s'", s->text);
		/* Durations come from return probes: entry time in the instance. */
		s->is_return = true;
		if (spec_format(s) && spec_too_long(s, err, sizeof(err)))
			bad("%s", err);
	}
}

static void check_target(const struct cli_opts *o)
{
	if (!o->command && !o->pid)
		bad("give a command after '--' or a process with -p PID");
	if (o->command && o->pid)
		bad("give either a command after '--' or -p PID, not both");
}

/* record: -o names the directory; -F OBJECT (or no probe: the program)
 * becomes the entry and return probes of every function of OBJECT. */
static void check_record(struct cli_opts *o)
{
	check_target(o);
	if (o->format_given || o->zeros || o->duration < 0)
		bad("record takes no --format or -z (kprobe dump converts a recording)");
	o->data_dir = o->outfile ? o->outfile : "kprobe.data";
	o->outfile = NULL;
	if (!o->nspecs && !o->nobjects)
		o->objects[o->nobjects++] = "main";
	for (int i = 0; i < o->nspecs; i++) {
		if (o->specs[i].kind == SPEC_TRACEPOINT && o->specs[i].is_return)
			bad("a tracepoint has no return: '%s'", o->specs[i].text);
		absolute_object(&o->specs[i]);
		short_library_name(o, &o->specs[i]);
	}
}

/* report, replay, dump: a recording's directory. */
static void check_data_command(struct cli_opts *o)
{
	if (o->pid || o->command || o->nspecs || o->follow || o->duration > 0 || o->zeros ||
	    o->drop)
		bad("%s reads a recording: kprobe %s [OPTIONS] [DIR]", commands[o->cmd],
		    commands[o->cmd]);
	if (o->cmd == CMD_DUMP &&
	    (!o->format_given || (o->format != FMT_CHROME && o->format != FMT_JSON)))
		bad("dump needs --format chrome or --format json");
	if (o->cmd != CMD_DUMP && (o->format_given || o->outfile))
		bad("%s writes text to standard output", commands[o->cmd]);
	if (!o->data_dir)
		o->data_dir = "kprobe.data";
}

void cli_parse(int argc, char **argv, struct cli_opts *o)
{
	const char *knob = NULL;

	if (argc < 2) {
		cli_usage(stderr);
		exit(EXIT_BAD);
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		cli_usage(stdout);
		exit(0);
	}
	if (!strcmp(argv[1], "--version"))
		print_version();
	/* -l: list, as bpftrace -l lists what can be probed. */
	o->cmd = !strcmp(argv[1], "-l") || !strcmp(argv[1], "--list") ? CMD_LIST :
									   parse_command(argv[1]);
	o->action = o->cmd == CMD_TRACE || o->cmd == CMD_WATCH ? ACT_TRACE :
		    o->cmd == CMD_COUNT ? ACT_COUNT : o->cmd == CMD_LOAD ? ACT_LOAD :
		    o->cmd == CMD_RUN ? ACT_RUN : o->cmd == CMD_RECORD ? ACT_RECORD : ACT_LATENCY;
	parse_words(argc, argv, 2, o, &knob);
	if (o->cmd == CMD_VARS) {
		if (o->nspecs != 1)
			bad("vars takes one probe; see kprobe --help");
		if (!!o->list_object + !!o->command + !!o->pid != 1)
			bad("vars needs one of: an OBJECT, '--' COMMAND, -p PID");
		return;
	}
	if (o->cmd == CMD_RUN) {
		check_run_command(o);
		return;
	}
	if (o->cmd == CMD_LOAD) {
		check_load_command(o);
		return;
	}
	if (o->cmd == CMD_WATCH)
		finish_watch(o);
	if (CMD_PROBES(o->cmd)) {
		check_probe_command(o);
		return;
	}
	if (CMD_READS_DATA(o->cmd)) {
		check_data_command(o);
		return;
	}
	if (o->command)
		bad("%s works on a running process: use -p PID", commands[o->cmd]);
	if (o->cmd == CMD_LIST && o->list_object)
		return;
	if (!o->pid)
		bad("%s needs -p PID%s", commands[o->cmd],
		    o->cmd == CMD_LIST ? " or an OBJECT" : "");
	if (o->cmd == CMD_OPTIMIZE) {
		if (!knob || (strcmp(knob, "on") && strcmp(knob, "off")))
			bad("optimize takes 'on' or 'off'");
		o->optimize_on = !strcmp(knob, "on");
	}
}
