/* The probe-program language: parser and checker errors (bpftrace's
 * wording and positions), programs compiled and run by the interpreter
 * against synthetic registers, maps, printf formatting, the verifier
 * against corrupted images, and bounded fuzzing of the compiler and the
 * verifier. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <kprobes.h>

#include "lang/lang.h"

/* ---- harness ---- */

struct env {
	void *image;
	size_t len;
	struct lang_image img;
	void *region;
	struct lang_ctx ctx;
	struct pt_regs regs;
	char out[16384];
	size_t outlen;
	uint64_t tid, pid, nsecs;
	int signals, last_signal;
	uint64_t overridden;
	int overrides;
	int exits;
};

static struct env *cur;

/* As the agent reads: the library's fault-safe copy. */
static int t_read(void *dst, uintptr_t src, size_t len, void *arg)
{
	(void)arg;
	return (int)kprobes_read_nofault(dst, (const void *)src, len);
}

static uint64_t t_get(int src, void *arg)
{
	struct env *e = arg;

	switch (src) {
	case LANG_SRC_PID: return e->pid;
	case LANG_SRC_TID: return e->tid;
	case LANG_SRC_UID: return 1000;
	case LANG_SRC_CPU: return 1;
	case LANG_SRC_NSECS: return e->nsecs;
	case LANG_SRC_ELAPSED: return e->nsecs - 100;
	case LANG_SRC_GID: return 1001;
	case LANG_SRC_RAND: return 0x1234;
	case LANG_SRC_NUMA: return 2;
	case LANG_SRC_CPID: return 98;
	default: return 0;
	}
}

static void t_comm(char *out, void *arg)
{
	strcpy(out, "target");
}

static int t_ustack(const struct pt_regs *r, uint64_t *pcs, int max, void *arg)
{
	int i;

	for (i = 0; i < max && i < 3; i++)
		pcs[i] = 0x1000 + 0x10 * (uint64_t)i;
	return i;
}

static int t_sym(uint64_t addr, int with_offset, char *out, size_t n, void *arg)
{
	if (addr < 0x1000 || addr >= 0x2000)
		return -1;
	if (with_offset)
		snprintf(out, n, "fn_%lx+%lu", (unsigned long)(addr & ~0xfful), (unsigned long)(addr & 0xff));
	else
		snprintf(out, n, "fn_%lx", (unsigned long)addr);
	return 0;
}

static int t_probe_name(uint64_t id, char *out, size_t n, void *arg)
{
	snprintf(out, n, "uprobe:/bin/t:f%lu", (unsigned long)id);
	return 0;
}

static const struct lang_fmt_ops fmt_ops = { t_sym, t_probe_name, NULL, NULL, NULL };

static void append(struct env *e, const char *s)
{
	size_t n = strlen(s);

	if (e->outlen + n < sizeof(e->out)) {
		memcpy(e->out + e->outlen, s, n + 1);
		e->outlen += n;
	}
}

static int t_emit(int type, uint32_t id, const void *data, size_t len, void *arg)
{
	struct env *e = arg;
	char buf[4096];

	switch (type) {
	case LANG_EV_PRINTF:
		cr_assert_geq(lang_format_printf(&e->img, id, data, len, &fmt_ops, buf, sizeof(buf)), 0);
		append(e, buf);
		break;
	case LANG_EV_PRINT_VALUE: {
		const struct lang_fmt_desc *d = &e->img.fmts[id];

		cr_assert_eq(len, d->rec_size);
		lang_format_value(&d->arg[0], data, &fmt_ops, buf, sizeof(buf));
		append(e, buf);
		append(e, "\n");
		break;
	}
	case LANG_EV_EXIT:
		e->exits++;
		append(e, "<exit>");
		break;
	case LANG_EV_CLEAR:
		lang_map_clear(&e->img, e->region, id);
		break;
	case LANG_EV_ZERO:
		lang_map_zero(&e->img, e->region, id);
		break;
	case LANG_EV_PRINT_MAP: {
		int64_t td[2];

		memcpy(td, data, 16);
		snprintf(buf, sizeof(buf), "<print %s %ld %ld>",
			 lang_image_str(&e->img, e->img.maps[id].name), (long)td[0], (long)td[1]);
		append(e, buf);
		break;
	}
	case LANG_EV_TIME:
		append(e, "<time>");
		break;
	case LANG_EV_JOIN: {
		uint64_t n;

		cr_assert_eq(len, LANG_JOIN_REC);
		memcpy(&n, data, 8);
		cr_assert_leq(n, LANG_JOIN_MAX);
		snprintf(buf, sizeof(buf), "<join %lu", (unsigned long)n);
		append(e, buf);
		for (uint64_t i = 0; i < n; i++) {
			append(e, i ? lang_image_str(&e->img, e->img.fmts[id].fmt) : " ");
			snprintf(buf, sizeof(buf), "%.*s", LANG_STRLEN,
				 (const char *)data + 8 + i * LANG_STRLEN);
			append(e, buf);
		}
		append(e, ">");
		break;
	}
	case LANG_EV_CAT:
	case LANG_EV_SYSTEM:
		cr_assert_geq(lang_format_printf(&e->img, id, data, len, &fmt_ops, buf, sizeof(buf)), 0);
		append(e, type == LANG_EV_CAT ? "<cat " : "<system ");
		append(e, buf);
		append(e, ">");
		break;
	default:
		cr_assert_fail("unexpected event %d", type);
	}
	return 0;
}

static int t_signal(int sig, void *arg)
{
	struct env *e = arg;

	e->signals++;
	e->last_signal = sig;
	return 0;
}

static int t_override(struct pt_regs *r, uint64_t v, void *arg)
{
	struct env *e = arg;

	e->overrides++;
	e->overridden = v;
	r->ax = v;
	return 0;
}

static const struct lang_ops ops = {
	t_read, t_get, t_comm, t_ustack, t_emit, t_signal, t_override,
};

static struct env *compile_with(const char *src, int nparams, char **params, uint32_t keys)
{
	struct lang_compile_opts o = { .filename = "stdin", .nparams = nparams, .params = params,
				       .map_keys = keys, .has_command = true };
	struct lang_error err;
	struct env *e = calloc(1, sizeof(*e));
	char why[256];
	int r;

	cr_assert(e);
	r = lang_compile(src, &o, &e->image, &e->len, &err);
	cr_assert_eq(r, 0, "compile failed: %s", err.text);
	r = lang_image_load(&e->img, e->image, e->len, why, sizeof(why));
	cr_assert_eq(r, 0, "load failed: %s", why);
	e->region = calloc(1, e->img.region_size);
	cr_assert(e->region);
	cr_assert_eq(lang_maps_init(&e->img, e->region, e->img.region_size), 0);
	e->ctx.regs = &e->regs;
	e->ctx.maps = e->region;
	e->ctx.ops = &ops;
	e->ctx.arg = e;
	e->tid = 100;
	e->pid = 99;
	e->nsecs = 1000;
	cur = e;
	return e;
}

static struct env *compile(const char *src)
{
	return compile_with(src, 0, NULL, 0);
}

static void env_free(struct env *e)
{
	free(e->region);
	free(e->image);
	free(e);
}

static int run(struct env *e, unsigned probe)
{
	return lang_run(&e->img, probe, &e->ctx);
}

static int map_index(struct env *e, const char *name)
{
	unsigned m;

	for (m = 0; m < e->img.hdr->nmaps; m++)
		if (!strcmp(lang_image_str(&e->img, e->img.maps[m].name), name))
			return (int)m;
	cr_assert_fail("no map %s", name);
	return -1;
}

/* The value of a map at an integer key (or keyless). */
static int64_t map_int(struct env *e, const char *name, const int64_t *key, int *found)
{
	int m = map_index(e, name);
	size_t pos = 0;
	const void *k, *v;
	struct lang_agg a;

	uint64_t sum[2];

	*found = 0;
	while (lang_map_next(&e->img, e->region, (unsigned)m, &pos, &k, &v)) {
		if (key && memcmp(k, key, 8))
			continue;
		*found = 1;
		if (e->img.maps[m].val_size <= sizeof(sum))
			v = lang_map_value(&e->img, e->region, (unsigned)m, v, sum);
		lang_map_agg(&e->img, (unsigned)m, v, &a);
		return a.value;
	}
	return 0;
}

static int64_t map_val(struct env *e, const char *name, int64_t key)
{
	int found;
	int64_t v = map_int(e, name, &key, &found);

	cr_assert(found, "%s[%ld] absent", name, (long)key);
	return v;
}

static int64_t scalar(struct env *e, const char *name)
{
	int found;
	int64_t v = map_int(e, name, NULL, &found);

	cr_assert(found, "%s absent", name);
	return v;
}

static unsigned map_count(struct env *e, const char *name)
{
	int m = map_index(e, name);
	size_t pos = 0;
	const void *k, *v;
	unsigned n = 0;

	while (lang_map_next(&e->img, e->region, (unsigned)m, &pos, &k, &v))
		n++;
	return n;
}

/* ---- errors: exact text as bpftrace 0.17 prints them ---- */

static void expect_all_errors(const char *src, const char *all);

/* A program that must compile (without a target to resolve its probes). */
static void expect_compiles(const char *src)
{
	struct lang_error err;
	void *img = NULL;
	size_t len;

	cr_expect_eq(lang_compile(src, NULL, &img, &len, &err), 0, "%s: %s", src, err.text);
	free(img);
}

static void expect_error(const char *src, const char *text)
{
	struct lang_error err;
	void *img = NULL;
	size_t len;
	int r = lang_compile(src, NULL, &img, &len, &err);

	cr_assert_eq(r, -EINVAL, "compiled: %s", src);
	cr_assert_null(img);
	cr_assert_str_eq(err.text, text, "for %s:\n%s", src, err.text);
}

/* An error whose reason holds the given words. */
static void expect_error_has(const char *src, const char *words)
{
	struct lang_error err;
	void *img = NULL;
	size_t len;
	int r = lang_compile(src, NULL, &img, &len, &err);

	cr_assert_eq(r, -EINVAL, "compiled: %s", src);
	cr_assert(strstr(err.msg, words), "for %s: got '%s'", src, err.msg);
	cr_assert(!strncmp(err.text, "stdin:", 6));
	cr_assert(strstr(err.text, ": ERROR: "));
	/* three lines: message, source line, underline */
	cr_assert_eq(strchr(strchr(strchr(err.text, '\n') + 1, '\n') + 1, '\n')[1], 0, "%s", err.text);
}

Test(lang_errors, bpftrace_exact)
{
	expect_error("BEGIN { foo(); }",
		     "stdin:1:9-12: ERROR: Unknown function: foo\nBEGIN { foo(); }\n        ~~~\n");
	expect_error("BEGIN { @x = 1 + \"a\"; }",
		     "stdin:1:14-21: ERROR: Type mismatch for '+': comparing 'int64' with 'string[2]'\n"
		     "BEGIN { @x = 1 + \"a\"; }\n             ~~~~~~~\n");
	expect_error("BEGIN { @x[1] = 1; @x[2,3]=1 }",
		     "stdin:1:20-27: ERROR: Argument mismatch for @x: trying to access with arguments: "
		     "[unsigned int64, unsigned int64] when map expects arguments: [unsigned int64]\n"
		     "BEGIN { @x[1] = 1; @x[2,3]=1 }\n                   ~~~~~~~\n");
	expect_error("BEGIN { $x = ; }",
		     "stdin:1:14-15: ERROR: syntax error, unexpected ;\nBEGIN { $x = ; }\n             ~\n");
	expect_error("BEGIN { 1 + }",
		     "stdin:1:13-14: ERROR: syntax error, unexpected }\nBEGIN { 1 + }\n            ~\n");
	expect_error("BEGIN { @x = 1",
		     "stdin:1:14-15: ERROR: syntax error, unexpected end of file, expecting }\n"
		     "BEGIN { @x = 1\n             ~\n");
	expect_error("BEGIN { if 1 { } }",
		     "stdin:1:12-13: ERROR: syntax error, unexpected integer, expecting (\n"
		     "BEGIN { if 1 { } }\n           ~\n");
	expect_error("uprobe:/bin/ls:main { @x = arg9; }",
		     "stdin:1:28-32: ERROR: x86_64 doesn't support arg9\n"
		     "uprobe:/bin/ls:main { @x = arg9; }\n                           ~~~~\n");
	expect_error("BEGIN { @x = count(1); }",
		     "stdin:1:14-22: ERROR: count() requires no arguments (1 provided)\n"
		     "BEGIN { @x = count(1); }\n             ~~~~~~~~\n");
	expect_error("BEGIN { @x = count(); @x = 1; }",
		     "stdin:1:23-25: ERROR: Type mismatch for @x: trying to assign value of type 'int64' "
		     "when map already contains a value of type 'count\n"
		     "BEGIN { @x = count(); @x = 1; }\n                      ~~\n");
	expect_error("BEGIN { printf(\"%d\\n\"); }",
		     "stdin:1:9-23: ERROR: printf: Not enough arguments for format string (0 supplied, 1 expected)\n"
		     "BEGIN { printf(\"%d\\n\"); }\n        ~~~~~~~~~~~~~~\n");
	expect_error("BEGIN { $x = 1; $x = \"a\"; }",
		     "stdin:1:20-21: ERROR: Type mismatch for $x: trying to assign value of type 'string[2]' "
		     "when variable already contains a value of type 'int64'\n"
		     "BEGIN { $x = 1; $x = \"a\"; }\n                   ~\n");
	expect_error("BEGIN { @x = $y; }",
		     "stdin:1:14-16: ERROR: Undefined or undeclared variable: $y\nBEGIN { @x = $y; }\n             ~~\n");
	expect_error("BEGIN { @x = hist(); }",
		     "stdin:1:14-20: ERROR: hist() requires one argument (0 provided)\nBEGIN { @x = hist(); }\n             ~~~~~~\n");
	expect_error("BEGIN { @x = lhist(1,2,3); }",
		     "stdin:1:14-26: ERROR: lhist() requires 4 arguments (3 provided)\n"
		     "BEGIN { @x = lhist(1,2,3); }\n             ~~~~~~~~~~~~\n");
	expect_error("BEGIN { @x = retval; }",
		     "stdin:1:14-20: ERROR: The retval builtin can only be used with 'kretprobe' and 'uretprobe' and 'kfunc' probes\n"
		     "BEGIN { @x = retval; }\n             ~~~~~~\n");
	expect_error("BEGIN { unroll(200) { } }",
		     "stdin:1:9-20: ERROR: unroll maximum value is 100\nBEGIN { unroll(200) { } }\n        ~~~~~~~~~~~\n");
	expect_error("BEGIN { @x = str(1,2,3); }",
		     "stdin:1:14-24: ERROR: str() takes up to 2 arguments (3 provided)\n"
		     "BEGIN { @x = str(1,2,3); }\n             ~~~~~~~~~~\n");
	expect_error("BEGIN { @x = foo; }",
		     "stdin:1:14-17: ERROR: Unknown identifier: 'foo'\nBEGIN { @x = foo; }\n             ~~~\n");
	expect_error("BEGIN { @x[1]=1; @x[\"a\"]=1; }",
		     "stdin:1:18-25: ERROR: Argument mismatch for @x: trying to access with arguments: [string[2]] "
		     "when map expects arguments: [unsigned int64]\n"
		     "BEGIN { @x[1]=1; @x[\"a\"]=1; }\n                 ~~~~~~~\n");
	expect_error("BEGIN { @x = 1 } END { @x = \"a\" }",
		     "stdin:1:24-26: ERROR: Type mismatch for @x: trying to assign value of type 'string[2]' "
		     "when map already contains a value of type 'int64\n"
		     "BEGIN { @x = 1 } END { @x = \"a\" }\n                       ~~\n");
	expect_error("BEGIN { exit(1); }",
		     "stdin:1:9-16: ERROR: exit() requires no arguments (1 provided)\nBEGIN { exit(1); }\n        ~~~~~~~\n");
	expect_error("BEGIN { @x = delete(@y); }",
		     "stdin:1:14-24: ERROR: delete() should not be used in an assignment or as a map key\n"
		     "BEGIN { @x = delete(@y); }\n             ~~~~~~~~~~\n");
	expect_error("BEGIN { @x = 1; print(@x, 1, 2, 3); }",
		     "stdin:1:17-35: ERROR: print() takes up to 3 arguments (4 provided)\n"
		     "BEGIN { @x = 1; print(@x, 1, 2, 3); }\n                ~~~~~~~~~~~~~~~~~~\n");
	expect_error("BEGIN { printf(\"%d\", \"a\"); }",
		     "stdin:1:9-26: ERROR: printf: %d specifier expects a value of type integer (string supplied)\n"
		     "BEGIN { printf(\"%d\", \"a\"); }\n        ~~~~~~~~~~~~~~~~~\n");
	expect_error("BEGIN { printf(1); }",
		     "stdin:1:9-18: ERROR: printf() expects a string literal (integer provided)\n"
		     "BEGIN { printf(1); }\n        ~~~~~~~~~\n");
	expect_error("BEGIN { @x = count(); @y = @x + 1 }",
		     "stdin:1:28-34: ERROR: Type mismatch for '+': comparing 'count' with 'int64'\n"
		     "BEGIN { @x = count(); @y = @x + 1 }\n                           ~~~~~~\n");
	expect_error("BEGIN { @x = 1; clear(1); }",
		     "stdin:1:17-25: ERROR: clear() expects a map to be provided\n"
		     "BEGIN { @x = 1; clear(1); }\n                ~~~~~~~~\n");
	expect_error("BEGIN { @ = sum(\"a\"); }",
		     "stdin:1:13-21: ERROR: sum() only supports integer arguments (string provided)\n"
		     "BEGIN { @ = sum(\"a\"); }\n            ~~~~~~~~\n");
	expect_error("BEGIN { @ = 1 == \"a\"; }",
		     "stdin:1:13-21: ERROR: Type mismatch for '==': comparing 'int64' with 'string[2]'\n"
		     "BEGIN { @ = 1 == \"a\"; }\n            ~~~~~~~~\n");
	expect_error("BEGIN { @ = \"a\" < \"b\"; }",
		     "stdin:1:17-18: ERROR: The < operator can not be used on expressions of types string[2], string[2]\n"
		     "BEGIN { @ = \"a\" < \"b\"; }\n                ~\n");
	expect_error("BEGIN { @ = !\"a\"; }",
		     "stdin:1:13-14: ERROR: The ! operator can not be used on expressions of type 'string[2]'\n"
		     "BEGIN { @ = !\"a\"; }\n            ~\n");
	expect_error("BEGIN { @ = lhist(1, 0, 10, 0); }",
		     "stdin:1:13-31: ERROR: lhist() step must be >= 1 (0 provided)\n"
		     "BEGIN { @ = lhist(1, 0, 10, 0); }\n            ~~~~~~~~~~~~~~~~~~\n");
	expect_error("BEGIN { printf(\"%s\", 1); }",
		     "stdin:1:9-24: ERROR: printf: %s specifier expects a value of type string (integer supplied)\n"
		     "BEGIN { printf(\"%s\", 1); }\n        ~~~~~~~~~~~~~~~\n");
	expect_error("BEGIN { @x = count(); } END { @x = sum(1); }",
		     "stdin:1:31-33: ERROR: Type mismatch for @x: trying to assign value of type 'sum' "
		     "when map already contains a value of type 'count\n"
		     "BEGIN { @x = count(); } END { @x = sum(1); }\n                              ~~\n");
	expect_error("BEGIN { @x[\"a\", 1] = 1; @x[1, \"a\"] = 2; }",
		     "stdin:1:25-35: ERROR: Argument mismatch for @x: trying to access with arguments: "
		     "[unsigned int64, string[2]] when map expects arguments: [string[2], unsigned int64]\n"
		     "BEGIN { @x[\"a\", 1] = 1; @x[1, \"a\"] = 2; }\n                        ~~~~~~~~~~\n");
	expect_error("BEGIN { $s = \"a\"; $s = 1; }",
		     "stdin:1:22-23: ERROR: Type mismatch for $s: trying to assign value of type 'int64' "
		     "when variable already contains a value of type 'string[2]'\n"
		     "BEGIN { $s = \"a\"; $s = 1; }\n                     ~\n");
	expect_error("BEGIN { print(); }",
		     "stdin:1:9-16: ERROR: print() requires at least one argument (0 provided)\n"
		     "BEGIN { print(); }\n        ~~~~~~~\n");
}

Test(lang_errors, every_path_names_the_problem)
{
	static const struct { const char *src, *words; } cases[] = {
		{ "", "No probes to attach" },
		{ "// only a comment\n", "No probes to attach" },
		{ "BEGIN { /* open", "unterminated comment" },
		{ "BEGIN { $x = \"abc }", "unterminated string" },
		{ "BEGIN { $x = \"a\\q\"; }", "invalid escape" },
		{ "BEGIN { @x = 99999999999999999999999; }", "invalid integer literal" },
		{ "BEGIN { @x = 12ab; }", "invalid integer literal" },
		{ "BEGIN { @x = $; }", "syntax error, unexpected $" },
		{ "BEGIN { @x = 1 # 2; }", "syntax error, unexpected #" },
		{ "#include <x.h>\nBEGIN { }", "#include" },
		{ "struct S { int a; }\nBEGIN { }", "struct definitions are not supported" },
		{ "BEGIN { printf(\"%rx\\n\", 1); }", "%rx specifier expects a value of type buffer" },
		{ "BEGIN { printf(\"%-8r\\n\", 1); }", "%r specifier expects a value of type buffer" },
		{ "BEGIN { printf(\"%rh\\n\", \"s\"); }", "%rh specifier expects a value of type buffer (string supplied)" },
		{ "BEGIN { printf(\"%s\\n\", buf(\"a\", 1)); }", "%s specifier expects a value of type string (buffer supplied)" },
		{ "BEGIN { printf(\"%d\\n\", buf(\"a\", 1)); }", "%d specifier expects a value of type integer (buffer supplied)" },
		{ "BEGIN { printf(\"%r\\n\", buf(1)); }", "buf() expects a length argument for non-array type integer" },
		{ "BEGIN { printf(\"%r\\n\", buf(\"a\", \"b\")); }", "buf() expects an integer length (string provided)" },
		{ "BEGIN { printf(\"%r\\n\", buf(ustack, 2)); }", "buf() expects an integer, a pointer or a string (ustack provided)" },
		{ "BEGIN { @x = buf(\"a\", 1, 2); }", "buf() takes up to 2 arguments (3 provided)" },
		{ "BEGIN { @x = ((1, ustack), 3); }", "a tuple can not hold a value of type 'ustack' here" },
		{ "BEGIN { @x = (1, ustack); }", "a tuple can not hold a value of type 'ustack' here" },
		{ "BEGIN { @x = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17); }",
		  "a tuple has at most 16 parts" },
		{ "BEGIN { @x = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, (15, 16, 17)); }",
		  "a tuple holds at most 16 values, those of the tuples inside it included" },
		{ "BEGIN { @x = ((1, 2, 3, 4, 5, 6, 7, 8), (9, 10, 11, 12, 13, 14, 15, 16), 17); }",
		  "a tuple holds at most 16 values" },
		{ "BEGIN { @x[(1, 2)] = 1; }", "tuple cannot be used as a map key" },
		{ "BEGIN { @x[1, (1, (2, 3))] = 1; }", "tuple cannot be used as a map key" },
		{ "BEGIN { $t = (1, 2); @x = $t + 1; }", "tuple" },
		{ "BEGIN { @x = arg0[1]; }", "array indexing is not supported" },
		{ "BEGIN { @x = (int32 **)arg0; }", "pointers to pointers" },
		{ "BEGIN { return 1; }", "syntax error, unexpected integer" },
		{ "BEGIN { { } }", "syntax error, unexpected {" },
		{ "BEGIN { 1 = 2; }", "syntax error, unexpected =" },
		{ "BEGIN { @x = 1 ? 2; }", "expecting :" },
		{ "BEGIN { @x = (1; }", "expecting )" },
		{ "BEGIN { @x = foo(1; }", "syntax error" },
		{ "BEGIN { @x[1 = 1; }", "syntax error" },
		{ "BEGIN { unroll 5 { } }", "expecting (" },
		{ "BEGIN { unroll(x) { } }", "expecting integer" },
		{ "BEGIN { unroll(5 { } }", "expecting )" },
		{ "BEGIN { unroll(0) { } }", "unroll minimum value is 1" },
		{ "BEGIN { while 1 { } }", "expecting (" },
		{ "BEGIN { if (1) @x = 1; }", "expecting {" },
		{ "BEGIN { @x = 1 @y = 2 }", "expecting }" },
		{ "BEGIN", "unexpected end of file, expected {" },
		{ "BEGIN /1 { }", "expecting /" },
		{ "BEGIN { }}", "unexpected }, expecting {" },
		{ "kprobe:do_sys_open { }", "kprobe probes are not supported" },
		{ "tracepoint:a:b { }", "tracepoint probes are not supported" },
		{ "usdt:/bin/ls:p:n { @x = retval; }", "retval builtin can only be used" },
		{ "usdt:/bin/ls:p:n { override(1); }", "override() can only be used" },
		{ "usdt:/bin/ls:p:n { @x = arg8; }", "doesn't support arg8" },
		{ "usdt:/bin/ls:p:n, uprobe:/bin/ls:f { @x = arg6; }", "doesn't support arg6" },
		{ "foo:bar { }", "Invalid probe type: foo" },
		{ "uprobe:/bin/ls { }", "Invalid probe" },
		{ "uprobe:/bin/ls:main+zz { }", "invalid offset" },
		{ "uretprobe:/bin/ls:main+4 { }", "uretprobe can not take an offset" },
		{ "interval:m:1 { }", "interval probe unit not supported" },
		{ "interval:s:0 { }", "positive count" },
		{ "interval:s { }", "Invalid probe" },
		{ "BEGIN { @x = arg0; }", "The arg0 builtin can only be used" },
		{ "BEGIN { @x = func; }", "func builtin can not be used" },
		{ "BEGIN { @x = kstack; }", "kstack builtin is not supported" },
		{ "BEGIN { @x = arg1x; }", "Unknown identifier" },
		{ "BEGIN { system(\"ls\"); }", "system() is an unsafe function being used in safe mode" },
		{ "BEGIN { @x = count(); @x = sum(1); }", "Type mismatch for @x" },
		{ "BEGIN { @x = 1; @y = @x[1]; }", "Argument mismatch for @x" },
		{ "BEGIN { @y = @nope; }", "Undefined map: @nope" },
		{ "BEGIN { clear(@nope); }", "Undefined map: @nope" },
		{ "BEGIN { @x = 1; @y = hist(@x) + 1; }", "hist() should be directly assigned to a map" },
		{ "BEGIN { @x = hist(\"a\"); }", "hist() only supports integer arguments" },
		{ "BEGIN { @x = lhist(1, $x, 2, 3); }", "Undefined or undeclared variable" },
		{ "BEGIN { @x = lhist(1, 5, 2, 1); }", "min must be less than max" },
		{ "BEGIN { @x = lhist(1, -1, 2, 1); }", "min must be non-negative" },
		{ "BEGIN { @x = lhist(1, 0, 100000, 1); }", "too many buckets" },
		{ "BEGIN { @x = lhist(1, 0, 10, 1); @x = lhist(1, 0, 20, 1); }", "Different lhist bounds" },
		{ "BEGIN { @x = lhist(arg0, 0, 10, 1); }", "The arg0 builtin" },
		{ "BEGIN { @x = lhist(1, 0, 10, pid); }", "lhist() expects a integer literal (integer provided)" },
		{ "BEGIN { @x = 1; print(@x[1]); }", "should not be indexed by a key" },	/* as bpftrace */
		{ "BEGIN { @x[1] = 1; print(@x[1], 2); }", "should not be indexed by a key" },	/* as bpftrace */
		{ "BEGIN { print(1, 2); }", "Non-map print() only takes 1 argument" },
		{ "BEGIN { @x[1] = 1; clear(@x[1]); }", "should not be indexed by a key" },
		{ "BEGIN { @x[1] = 1; print(@x[1]); }", "The map passed to print() should not be indexed by a key" },
		{ "BEGIN { delete(1); }", "delete() expects a map to be provided" },
		{ "BEGIN { time(1); }", "time() expects a string literal (integer provided)" },
		{ "BEGIN { signal(9); }", "signal can only be used with uprobe" },
		{ "uprobe:a:b { signal(\"SIGNOPE\"); }", "is not a valid signal" },
		{ "uprobe:a:b { signal(99); }", "not a valid signal" },
		{ "uprobe:a:b { signal(\"x\" == \"y\" ? \"a\" : \"b\"); }", "signal() only accepts" },
		{ "uretprobe:a:b { override(1); }", "override() can only be used with uprobe" },
		{ "uprobe:a:b+4 { override(1); }", "function entry" },
		{ "uprobe:a:b { override(\"x\"); }", "override() only supports integer" },
		{ "uprobe:a:b { @x = str(arg0, \"b\"); }", "str() only supports integer arguments (string provided)" },
		{ "uprobe:a:b { @x = str(ustack); }", "str() expects an integer or a pointer" },
		{ "uprobe:a:b { @x = usym(\"a\"); }", "usym() expects an integer" },
		{ "uprobe:a:b { @x = ustack(0); }", "frames must be in" },
		{ "uprobe:a:b { @x = ustack(3, perf); }", "takes the mode first" },
		{ "uprobe:a:b { @x = ustack(arg0); }", "expects an integer literal" },
		{ "BEGIN { printf(\"%d %d\\n\", 1, 2, 3); }", "Too many arguments for format string" },
		{ "BEGIN { printf(); }", "printf() requires at least one argument (0 provided)" },
		{ "BEGIN { @x = printf(\"a\"); }", "should not be used in an assignment" },
		{ "BEGIN { $x = printf(\"a\"); }", "should not be used in an assignment" },
		{ "BEGIN { @x = \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"; }", "too long" },
		{ "BEGIN { @x = -\"a\"; }", "The - operator can not be used" },
		{ "BEGIN { @x = 1 ? \"a\" : 2; }", "must return the same type: have 'string' and 'integer'" },
		{ "BEGIN { @x = arg1; }", "The arg1 builtin can only be used with" },
		{ "BEGIN { @x = \"a\" ? 1 : 2; }", "Invalid condition in ternary" },
		{ "BEGIN { if (\"a\") { } }", "Invalid condition in if()" },
		{ "BEGIN { while (\"a\") { } }", "Invalid condition in while()" },
		{ "BEGIN /\"a\"/ { }", "Invalid type for predicate" },
		{ "BEGIN { break; }", "break used outside of a loop" },
		{ "BEGIN { continue; }", "continue used outside of a loop" },
		{ "BEGIN { @x = (uint8)\"a\"; }", "Casts are not supported for type: \"string[2]\"" },
		{ "BEGIN { @x = *\"a\"; }", "Can not dereference" },
		{ "BEGIN { 1++; }", "syntax error, unexpected ++, expecting }" },
		{ "BEGIN { $y = nsecs++; }", "must be applied to a map or variable" },
		{ "BEGIN { $s = \"a\"; $s++; }", "must be applied to an integer" },
		{ "BEGIN { $x += 1; }", "Undefined or undeclared variable" },
		{ "BEGIN { @x = count(); @x += 1; }", "Type mismatch for @x" },
		{ "BEGIN { @x += count(); }", "compound assignment of count() is not supported" },
		{ "BEGIN { @s = \"a\"; @s += 1; }", "Type mismatch" },
		{ "BEGIN { @x = hist(1); @y = @x; }", "can not be read in an expression" },
		{ "BEGIN { @x = 1; @x[1,2,3,4,5,6,7,8,9] = 1; }", "too many map keys" },
		{ "BEGIN { @x = printf; }", "Unknown identifier" },
		{ "BEGIN { @a = 1 > \"a\"; }", "Type mismatch for '>'" },
		{ "BEGIN { printf(\"%d\", ustack); }", "specifier expects a value of type integer" },
		{ "BEGIN { @c = count(); printf(\"%d\", @c); }", "expects a value of type integer (count supplied)" },
		{ "BEGIN { printf(\"\", 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,"
		  "31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63,64,65); }",
		  "too many arguments" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		expect_error_has(cases[i].src, cases[i].words);
}

/* Hostile nesting ends in an error, not in a stack overflow of the
 * parser or of the passes after it. */
Test(lang_errors, deep_nesting_is_bounded)
{
	static const char *const unit[][3] = {
		{ "BEGIN { @x = ", "(", "1" },
		{ "BEGIN { @x = ", "- ", "1" },
		{ "BEGIN { @x = ", "!", "1" },
		{ "BEGIN { @x = ", "1 ? 2 : ", "3" },
		{ "BEGIN { @x = 1", " + 1", "" },
		{ "BEGIN { ", "if (1) { ", "" },
		{ "BEGIN { if (1) { } ", "else if (1) { } ", "" },
	};
	size_t n = 100000, i, k;
	char *src = malloc(n * 20 + 64);

	cr_assert(src);
	for (k = 0; k < sizeof(unit) / sizeof(unit[0]); k++) {
		size_t o = 0, ul = strlen(unit[k][1]);
		struct lang_error err;
		void *img = NULL;
		size_t len;

		o += (size_t)sprintf(src, "%s", unit[k][0]);
		for (i = 0; i < n; i++, o += ul)
			memcpy(src + o, unit[k][1], ul);
		sprintf(src + o, "%s; }", unit[k][2]);
		cr_assert_eq(lang_compile(src, NULL, &img, &len, &err), -EINVAL, "case %zu", k);
		cr_assert(strstr(err.msg, "nested too deeply"), "case %zu: %s", k, err.msg);
	}
	free(src);
}

Test(lang_errors, filename_and_multiline_positions)
{
	struct lang_compile_opts o = { .filename = "prog.bt" };
	struct lang_error err;
	void *img = NULL;
	size_t len;

	cr_assert_eq(lang_compile("BEGIN {\n  @x = 1;\n  @y = nope;\n}\n", &o, &img, &len, &err), -EINVAL);
	cr_assert_str_eq(err.text, "prog.bt:3:8-12: ERROR: Unknown identifier: 'nope'\n  @y = nope;\n       ~~~~\n");
	cr_assert_eq(err.line, 3);
	cr_assert_eq(err.col, 8);
	cr_assert_eq(err.col_end, 12);
}

/* $0 does not exist; unroll($N) needs a number there, as bpftrace says. */
Test(lang_errors, positional_zero_and_unroll_param)
{
	char *params[] = { "x", "200" };
	struct lang_compile_opts o = { .filename = "stdin", .nparams = 2, .params = params };
	struct lang_error err;
	void *img = NULL;
	size_t len;

	expect_error("BEGIN { @x = $0; }",
		     "stdin:1:14-16: ERROR: param $0 is out of integer range [1, 9223372036854775807]\n"
		     "BEGIN { @x = $0; }\n             ~~\n");
	cr_assert_eq(lang_compile("BEGIN { unroll($1) { @x = 1; } }", &o, &img, &len, &err), -EINVAL);
	cr_assert_str_eq(err.text, "stdin:1:9-18: ERROR: $1 used numerically but given \"x\"\n"
			 "BEGIN { unroll($1) { @x = 1; } }\n        ~~~~~~~~~\n");
	cr_assert_eq(lang_compile("BEGIN { unroll($2) { @x = 1; } }", &o, &img, &len, &err), -EINVAL);
	cr_assert_str_eq(err.msg, "unroll maximum value is 100");
	cr_assert_eq(lang_compile("BEGIN { unroll($3) { @x = 1; } }", &o, &img, &len, &err), -EINVAL);
	cr_assert_str_eq(err.msg, "unroll minimum value is 1");
	cr_assert_eq(lang_compile("BEGIN { unroll($#) { @x = $#; } }", &o, &img, &len, &err), 0, "%s", err.text);
	free(img);
}

/* str() of a string other than a positional parameter, and a negative
 * literal length, are refused with bpftrace's words. */
Test(lang_errors, str_of_a_string_and_negative_length)
{
	expect_error("BEGIN { @x = str(\"abc\"); }",
		     "stdin:1:14-24: ERROR: str() expects an integer or a pointer type as first argument "
		     "(string[4] provided)\nBEGIN { @x = str(\"abc\"); }\n             ~~~~~~~~~~\n");
	expect_error("BEGIN { printf(\"%s\", str(comm)); }",
		     "stdin:1:22-31: ERROR: str() expects an integer or a pointer type as first argument "
		     "(string[16] provided)\nBEGIN { printf(\"%s\", str(comm)); }\n"
		     "                     ~~~~~~~~~\n");
	expect_error("BEGIN { @x = str(0, -1); }",
		     "stdin:1:14-24: ERROR: strcannot use negative length (-1)\n"
		     "BEGIN { @x = str(0, -1); }\n             ~~~~~~~~~~\n");
}

/* bpftrace's lexer moves a location's start only over blanks: a token
 * right after another begins where that one did, so an error in an
 * expression right after "(" or "[" points from there. */
Test(lang_errors, locations_start_after_blanks)
{
	expect_error("BEGIN { @x = (1 + \"a\"); }",
		     "stdin:1:14-22: ERROR: Type mismatch for '+': comparing 'int64' with 'string[2]'\n"
		     "BEGIN { @x = (1 + \"a\"); }\n             ~~~~~~~~\n");
	expect_error("BEGIN { @x[1 + \"a\"] = 1; }",
		     "stdin:1:9-19: ERROR: Type mismatch for '+': comparing 'int64' with 'string[2]'\n"
		     "BEGIN { @x[1 + \"a\"] = 1; }\n        ~~~~~~~~~~\n");
	expect_error("BEGIN { @x =foo(); }",
		     "stdin:1:12-16: ERROR: Unknown function: foo\nBEGIN { @x =foo(); }\n           ~~~~\n");
	expect_error("BEGIN { @x = (-\"a\"); }",
		     "stdin:1:14-16: ERROR: The - operator can not be used on expressions of type 'string[2]'\n"
		     "BEGIN { @x = (-\"a\"); }\n             ~~\n");
	expect_error("BEGIN { @x = 1 + \"a\"; }",
		     "stdin:1:14-21: ERROR: Type mismatch for '+': comparing 'int64' with 'string[2]'\n"
		     "BEGIN { @x = 1 + \"a\"; }\n             ~~~~~~~\n");
}

/* bpftrace prints each tab of the source line as four spaces, in the
 * line and in the underline alike, so the tildes stay under the code. */
Test(lang_errors, tabs_in_the_source_line)
{
	struct lang_compile_opts o = { .filename = "prog.bt" };
	struct lang_error err;
	void *img = NULL;
	size_t len;

	cr_assert_eq(lang_compile("BEGIN {\n\t\t@y = 1;  \t@x = hist(1, 2);\n}\n", &o, &img, &len, &err),
		     -EINVAL);
	cr_assert_str_eq(err.text, "prog.bt:2:18-28: ERROR: hist() requires one argument (2 provided)\n"
			 "        @y = 1;      @x = hist(1, 2);\n"
			 "                          ~~~~~~~~~~\n");
	cr_assert_eq(err.col, 18);
}

Test(lang_errors, bad_arguments)
{
	void *img;
	size_t len;
	struct lang_compile_opts o = { .nparams = 2, .params = NULL };

	cr_assert_eq(lang_compile(NULL, NULL, &img, &len, NULL), -EINVAL);
	cr_assert_eq(lang_compile("BEGIN { }", NULL, NULL, &len, NULL), -EINVAL);
	cr_assert_eq(lang_compile("BEGIN { }", &o, &img, &len, NULL), -EINVAL);
	cr_assert_eq(lang_compile("BEGIN { @ = nope; }", NULL, &img, &len, NULL), -EINVAL);
}

/* ---- programs that compile: what the image says ---- */

Test(lang_compile, probes_as_written)
{
	struct env *e = compile("BEGIN { } END { }\n"
				"uprobe:libc:mall*, uretprobe:/usr/lib/x86_64-linux-gnu/libc.so.6:free,"
				"u:/bin/ls:main+16 { }\n"
				"interval:ms:250 { } i:s:2 { } ur:libz:inflate { }");
	const struct lang_probe_desc *p = e->img.probes;

	cr_assert_eq(e->img.hdr->nprobes, 8);
	cr_assert_eq(p[0].kind, LANG_P_BEGIN);
	cr_assert_eq(p[1].kind, LANG_P_END);
	cr_assert_eq(p[2].kind, LANG_P_UPROBE);
	cr_assert_str_eq(lang_image_str(&e->img, p[2].target), "libc");
	cr_assert_str_eq(lang_image_str(&e->img, p[2].func), "mall*");
	cr_assert_eq(p[3].kind, LANG_P_URETPROBE);
	cr_assert_str_eq(lang_image_str(&e->img, p[3].target), "/usr/lib/x86_64-linux-gnu/libc.so.6");
	cr_assert_str_eq(lang_image_str(&e->img, p[3].func), "free");
	cr_assert_eq(p[4].kind, LANG_P_UPROBE);
	cr_assert_eq(p[4].offset, 16);
	cr_assert_str_eq(lang_image_str(&e->img, p[4].text), "u:/bin/ls:main+16");
	/* a shared block: one code range */
	cr_assert_eq(p[2].code, p[3].code);
	cr_assert_eq(p[3].code, p[4].code);
	cr_assert_eq(p[5].kind, LANG_P_INTERVAL);
	cr_assert_eq(p[5].interval_ns, 250000000ull);
	cr_assert_eq(p[6].interval_ns, 2000000000ull);
	cr_assert_eq(p[7].kind, LANG_P_URETPROBE);
	cr_assert_str_eq(lang_image_str(&e->img, p[7].target), "libz");
	env_free(e);
}

/* usdt probes: OBJ, PROVIDER (or none), NAME in the image; arg0.. come
 * from the values the runtime fetched (ctx.argv), signed 64-bit as
 * bpftrace types them, 0 past the operands the site has. */
Test(lang_vm, usdt_args_from_fetched_operands)
{
	struct env *e = compile("usdt:/bin/py:python:function__entry { @[arg0] = sum(arg7); @n = count(); }\n"
				"U:/bin/py:gc__start /arg1 < 0/ { @neg = count(); }");
	const struct lang_probe_desc *p = e->img.probes;
	uint64_t argv[8] = { (uint64_t)-5, 0, 0, 0, 0, 0, 0, 40 };
	int64_t key = -5;
	int found;

	cr_assert_eq(e->img.hdr->nprobes, 2);
	cr_assert_eq(p[0].kind, LANG_P_USDT);
	cr_assert_str_eq(lang_image_str(&e->img, p[0].target), "/bin/py");
	cr_assert_str_eq(lang_image_str(&e->img, p[0].provider), "python");
	cr_assert_str_eq(lang_image_str(&e->img, p[0].func), "function__entry");
	cr_assert_str_eq(lang_image_str(&e->img, p[1].provider), "");
	cr_assert_str_eq(lang_image_str(&e->img, p[1].func), "gc__start");
	cr_assert(e->img.maps[map_index(e, "@")].keys[0].is_signed);
	/* the registers are not the arguments */
	e->regs.di = 1;
	e->regs.si = (uint64_t)-1;
	e->ctx.argv = argv;
	e->ctx.nargv = 8;
	cr_assert_eq(run(e, 0), 0);
	cr_assert_eq(run(e, 1), 0);
	cr_assert_eq(map_int(e, "@", &key, &found), 40);
	cr_assert(found);
	map_int(e, "@neg", NULL, &found);
	cr_assert(!found);
	argv[1] = (uint64_t)-3;
	e->ctx.nargv = 1;	/* a site with one operand: arg1.. read 0 */
	cr_assert_eq(run(e, 1), 0);
	map_int(e, "@neg", NULL, &found);
	cr_assert(!found);
	e->ctx.nargv = 2;
	cr_assert_eq(run(e, 1), 0);
	cr_assert_eq(scalar(e, "@neg"), 1);
	env_free(e);
}

/* A debug-information reader for args->NAME: "n" is the second
 * parameter, an int; "p" the first, a pointer. */
static int stub_param(const char *obj, const char *func, const char *name, int *index,
		      struct lang_type *type, char *why, size_t whylen, void *arg)
{
	(void)arg;
	cr_assert_str_eq(obj, "/bin/x");
	cr_assert_str_eq(func, "f");
	if (!strcmp(name, "n") || !strcmp(name, "p")) {
		*index = name[0] == 'n' ? 1 : 0;
		*type = (struct lang_type){ LANG_T_INT, name[0] == 'n', name[0] == 'n' ? 4 : 8 };
		return 0;
	}
	snprintf(why, whylen, "f has no parameter %s (it has: p, n)", name);
	return -1;
}

Test(lang_vm, args_fields_from_debug_information)
{
	struct lang_compile_opts o = { .filename = "stdin", .param = stub_param };
	const char *src = "uprobe:/bin/x:f /args->n < 0/ { @[args.n] = sum(args->p); }";
	struct lang_error err;
	struct env *e = calloc(1, sizeof(*e));
	char why[256];
	int64_t key = -1;
	int found;

	cr_assert(e);
	cr_assert_eq(lang_compile(src, &o, &e->image, &e->len, &err), 0, "%s", err.text);
	cr_assert_eq(lang_image_load(&e->img, e->image, e->len, why, sizeof(why)), 0, "%s", why);
	e->region = calloc(1, e->img.region_size);
	cr_assert(e->region);
	cr_assert_eq(lang_maps_init(&e->img, e->region, e->img.region_size), 0);
	e->ctx.regs = &e->regs;
	e->ctx.maps = e->region;
	e->ctx.ops = &ops;
	e->ctx.arg = e;
	cur = e;
	/* an int in the low half of its register: garbage above is ignored */
	e->regs.si = 0x12345678ffffffffull;
	e->regs.di = 40;
	cr_assert_eq(run(e, 0), 0);
	e->regs.si = 0xabcdef0000000005ull;
	cr_assert_eq(run(e, 0), 0);
	cr_assert_eq(map_int(e, "@", &key, &found), 40);
	cr_assert(found);
	cr_assert_eq(map_count(e, "@"), 1);
	env_free(e);
}

Test(lang_errors, args_fields)
{
	struct lang_compile_opts o = { .filename = "stdin", .param = stub_param };
	static const struct { const char *src, *words; } cases[] = {
		{ "uprobe:/bin/x:f { @ = args->q; }", "f has no parameter q (it has: p, n)" },
		{ "uprobe:/bin/x:f* { @ = args->n; }", "wildcard" },
		{ "uretprobe:/bin/x:f { @ = args->n; }", "only be used with uprobe probes at a function entry" },
		{ "uprobe:/bin/x:f+4 { @ = args->n; }", "function entry" },
		{ "uprobe:/bin/x:f { @ = args->; }", "expecting identifier" },
		{ "uprobe:/bin/x:f { @ = args; }", "args" },
	};
	struct lang_error err;
	void *img = NULL;
	size_t len;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cr_assert_eq(lang_compile(cases[i].src, &o, &img, &len, &err), -EINVAL, "%s", cases[i].src);
		cr_assert(strstr(err.msg, cases[i].words), "%s: %s", cases[i].src, err.msg);
	}
	/* without a debug-information reader */
	cr_assert_eq(lang_compile("uprobe:/bin/x:f { @ = args->n; }", NULL, &img, &len, &err), -EINVAL);
	cr_assert(strstr(err.msg, "args"), "%s", err.msg);
}

/* A debug-information reader for casts: struct req { long pad; short len;
 * struct in { int a, v; } in; struct req *next; } as the tool reads it. */
struct test_req {
	long pad;
	short len;
	struct {
		int a, v;
	} in;
	struct test_req *next;
};

static int stub_field(const char *obj, const char *sname, const char *field,
		      struct lang_field *out, char *why, size_t whylen, void *arg)
{
	(void)arg;
	cr_assert_str_eq(obj, "/bin/x");
	memset(out, 0, sizeof(*out));
	if (strcmp(sname, "req") && strcmp(sname, "in")) {
		snprintf(why, whylen, "struct %s is not in the debug information", sname);
		return -1;
	}
	if (!field)
		return 0;
	if (!strcmp(sname, "req") && !strcmp(field, "len")) {
		*out = (struct lang_field){ offsetof(struct test_req, len), LANG_F_INT, 2, 1, "" };
	} else if (!strcmp(sname, "req") && !strcmp(field, "in")) {
		*out = (struct lang_field){ offsetof(struct test_req, in), LANG_F_STRUCT, 0, 0, "in" };
	} else if (!strcmp(sname, "req") && !strcmp(field, "next")) {
		*out = (struct lang_field){ offsetof(struct test_req, next), LANG_F_STRUCT_PTR, 8, 0,
					    "req" };
	} else if (!strcmp(sname, "in") && !strcmp(field, "v")) {
		*out = (struct lang_field){ 4, LANG_F_INT, 4, 0, "" };
	} else {
		snprintf(why, whylen, "struct %s has no field '%s'", sname, field);
		return -1;
	}
	return 0;
}

Test(lang_vm, casts_to_struct_types)
{
	struct lang_compile_opts o = { .filename = "stdin", .field = stub_field };
	const char *src = "uprobe:/bin/x:f { @l = ((struct req *)arg0)->len; @v = ((struct req *)arg0)->in.v;"
			  " @n = ((struct req *)arg0)->next->len; @nn = ((struct req *)arg0)->next->next->in.v; }";
	static struct test_req b = { 0, 7, { 0, 9 }, NULL };
	struct test_req a = { 0, -5, { 1, 0xfffffff0 }, &b };
	struct lang_error err;
	struct env *e = calloc(1, sizeof(*e));
	char why[256];

	cr_assert(e);
	cr_assert_eq(lang_compile(src, &o, &e->image, &e->len, &err), 0, "%s", err.text);
	cr_assert_eq(lang_image_load(&e->img, e->image, e->len, why, sizeof(why)), 0, "%s", why);
	e->region = calloc(1, e->img.region_size);
	cr_assert(e->region);
	cr_assert_eq(lang_maps_init(&e->img, e->region, e->img.region_size), 0);
	e->ctx.regs = &e->regs;
	e->ctx.maps = e->region;
	e->ctx.ops = &ops;
	e->ctx.arg = e;
	cur = e;
	e->regs.di = (uint64_t)(uintptr_t)&a;
	cr_assert_eq(run(e, 0), 0);
	cr_assert_eq(scalar(e, "@l"), -5);		/* a short, sign-extended */
	cr_assert_eq(scalar(e, "@v"), 0xfffffff0);	/* an unsigned int */
	cr_assert_eq(scalar(e, "@n"), 7);		/* through a pointer field */
	cr_assert_eq(scalar(e, "@nn"), 0);		/* through NULL: a failed read */
	env_free(e);
}

Test(lang_errors, casts_to_struct_types)
{
	struct lang_compile_opts o = { .filename = "stdin", .field = stub_field };
	static const struct { const char *src, *words; } cases[] = {
		{ "uprobe:/bin/x:f { @ = ((struct nosuch *)arg0)->len; }", "struct nosuch is not in" },
		{ "uprobe:/bin/x:f { @ = ((struct req *)arg0)->nosuch; }", "has no field 'nosuch'" },
		{ "uprobe:/bin/x:f { @ = ((struct req *)arg0).len; }", "needs a struct" },
		{ "uprobe:/bin/x:f { @ = ((struct req *)arg0)->in->v; }", "needs a pointer to a struct" },
		{ "uprobe:/bin/x:f { @ = arg0->len; }", "needs a pointer to a struct" },
		{ "uprobe:/bin/x:f { @ = ((struct req *)arg0)->; }", "expecting identifier" },
		{ "BEGIN { @ = ((struct req *)0)->len; }", "needs a uprobe or usdt probe" },
	};
	struct lang_error err;
	void *img = NULL;
	size_t len;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cr_assert_eq(lang_compile(cases[i].src, &o, &img, &len, &err), -EINVAL, "%s", cases[i].src);
		cr_assert(strstr(err.msg, cases[i].words), "%s: %s", cases[i].src, err.msg);
	}
	/* without a debug-information reader */
	cr_assert_eq(lang_compile("uprobe:/bin/x:f { @ = ((struct req *)arg0)->len; }", NULL, &img, &len,
				  &err), -EINVAL);
	cr_assert(strstr(err.msg, "no debug information reader"), "%s", err.msg);
}

/* The SDT notes of usdt:/bin/x:p:two give it two operands; p:none none. */
static int stub_usdt_nargs(const char *obj, const char *provider, const char *name, int *nargs,
			   void *arg)
{
	(void)arg;
	cr_assert_str_eq(obj, "/bin/x");
	cr_assert_str_eq(provider, "p");
	if (strcmp(name, "two") && strcmp(name, "none"))
		return -1;	/* not known here: left to the resolver */
	*nargs = name[0] == 't' ? 2 : 0;
	return 0;
}

Test(lang_errors, usdt_args_against_the_notes)
{
	struct lang_compile_opts o = { .filename = "stdin", .usdt_nargs = stub_usdt_nargs };
	struct lang_error err;
	void *img = NULL;
	size_t len;

	cr_assert_eq(lang_compile("usdt:/bin/x:p:two { @ = arg0 + arg1; }", &o, &img, &len, &err), 0,
		     "%s", err.text);
	free(img);
	img = NULL;
	cr_assert_eq(lang_compile("usdt:/bin/x:p:two { @ = arg2; }", &o, &img, &len, &err), -EINVAL);
	cr_assert(strstr(err.msg, "arg2: usdt probe p:two has 2 arguments (arg0..arg1)"), "%s", err.msg);
	cr_assert_eq(err.col, 25, "%d", err.col);	/* under arg2 */
	cr_assert_eq(lang_compile("usdt:/bin/x:p:none { @ = arg0; }", &o, &img, &len, &err), -EINVAL);
	cr_assert(strstr(err.msg, "usdt probe p:none has no arguments"), "%s", err.msg);
	/* unknown to the notes reader: not refused here */
	cr_assert_eq(lang_compile("usdt:/bin/x:p:other { @ = arg5; }", &o, &img, &len, &err), 0,
		     "%s", err.text);
	free(img);
}

Test(lang_compile, map_descriptors)
{
	struct env *e = compile("uprobe:a:f { @c[tid] = count(); @h = hist(arg0); @l[comm] = lhist(arg1, 0, 100, 10);"
				" @s = stats(arg2); @a = avg(arg2); @mn = min(arg0); @mx = max(arg0); @sum = sum(1);"
				" @str[pid, \"x\"] = str(arg0); @st = ustack; @i = -5; }");
	int m;

	m = map_index(e, "@c");
	cr_assert_eq(e->img.maps[m].kind, LANG_M_COUNT);
	cr_assert_eq(e->img.maps[m].nkeys, 1);
	cr_assert_eq(e->img.maps[m].max_keys, 4096);
	m = map_index(e, "@h");
	cr_assert_eq(e->img.maps[m].kind, LANG_M_HIST);
	cr_assert_eq(e->img.maps[m].nkeys, 0);
	m = map_index(e, "@l");
	cr_assert_eq(e->img.maps[m].kind, LANG_M_LHIST);
	cr_assert_eq(e->img.maps[m].lhist_max, 100);
	cr_assert_eq(e->img.maps[m].val_size, 8 * 12);
	cr_assert_eq(e->img.maps[m].keys[0].kind, LANG_T_STR);
	m = map_index(e, "@str");
	cr_assert_eq(e->img.maps[m].kind, LANG_M_STR);
	cr_assert_eq(e->img.maps[m].nkeys, 2);
	cr_assert_eq(e->img.maps[m].key_size, 8 + LANG_STRLEN);
	m = map_index(e, "@st");
	cr_assert_eq(e->img.maps[m].kind, LANG_M_USTACK);
	m = map_index(e, "@i");
	cr_assert_eq(e->img.maps[m].kind, LANG_M_INT);
	cr_assert_eq(e->img.maps[m].val.is_signed, 1);
	cr_assert_eq(e->img.probes[0].fast, LANG_FAST_NONE);
	env_free(e);
}

static char warnings[4096];

static void collect_warning(const char *text, void *arg)
{
	(void)arg;
	if (strlen(warnings) + strlen(text) < sizeof(warnings))
		strcat(warnings, text);
}

/* The program compiles, with exactly these warnings (bpftrace 0.17's). */
static void expect_warnings(const char *src, const char *text)
{
	struct lang_compile_opts o = { .filename = "stdin", .warning = collect_warning };
	struct lang_error err;
	void *img = NULL;
	size_t len;

	warnings[0] = 0;
	cr_assert_eq(lang_compile(src, &o, &img, &len, &err), 0, "%s: %s", src, err.text);
	free(img);
	cr_assert_str_eq(warnings, text, "for %s:\n%s", src, warnings);
}

/* Integers of different signs and signed division, as bpftrace 0.17
 * warns of them: a non-negative literal takes the other side's sign. */
Test(lang_errors, warnings_as_bpftrace_prints_them)
{
	expect_warnings("BEGIN { @ = -5 / 3; exit(); }",
			"stdin:1:16-17: WARNING: signed operands for '/' can lead to undefined behavior (cast to unsigned to silence warning)\n"
			"BEGIN { @ = -5 / 3; exit(); }\n"
			"               ~\n");
	expect_warnings("BEGIN { @ = pid / -2; exit(); }",
			"stdin:1:17-18: WARNING: arithmetic on integers of different signs: 'unsigned int64' and 'int64' can lead to undefined behavior\n"
			"BEGIN { @ = pid / -2; exit(); }\n"
			"                ~\n"
			"stdin:1:17-18: WARNING: signed operands for '/' can lead to undefined behavior (cast to unsigned to silence warning)\n"
			"BEGIN { @ = pid / -2; exit(); }\n"
			"                ~\n");
	expect_warnings("BEGIN { $a = (int64)1; @b = $a != pid; exit(); }",
			"stdin:1:32-34: WARNING: comparison of integers of different signs: 'int64' and 'unsigned int64' can lead to undefined behavior\n"
			"BEGIN { $a = (int64)1; @b = $a != pid; exit(); }\n"
			"                               ~~\n");
	expect_warnings("BEGIN { $x = 5; $x /= 2; @ = $x; exit(); }",
			"stdin:1:20-22: WARNING: signed operands for '/' can lead to undefined behavior (cast to unsigned to silence warning)\n"
			"BEGIN { $x = 5; $x /= 2; @ = $x; exit(); }\n"
			"                   ~~\n");
	expect_warnings("BEGIN { @ = pid / 2; @b = pid * 2; @c = pid == 1; @d = pid & -1; exit(); }", "");
	expect_warnings("BEGIN { @s = stats(1); print(@s, 2); @h = hist(1); print(@h, 2); exit(); }",
			"stdin:1:24-36: WARNING: print()'s top and div arguments are ignored when used on stats() maps.\n"
			"BEGIN { @s = stats(1); print(@s, 2); @h = hist(1); print(@h, 2); exit(); }\n"
			"                       ~~~~~~~~~~~~\n");
}

/* Tuples as values, and a for loop (which bpftrace 0.17 does not have):
 * exact messages as bpftrace 0.17 words them. */
Test(lang_errors, tuples_and_for_as_bpftrace_words_them)
{
	expect_error("BEGIN { $t = (1, \"a\"); print($t.5); }",
		     "stdin:1:24-34: ERROR: Invalid tuple index: 5. Found 2 elements in tuple.\n"
		     "BEGIN { $t = (1, \"a\"); print($t.5); }\n"
		     "                       ~~~~~~~~~~\n");
	expect_error("BEGIN { $t = 1; print($t.0); }",
		     "stdin:1:17-27: ERROR: Can not access index 0 on expression of type 'int64'\n"
		     "BEGIN { $t = 1; print($t.0); }\n"
		     "                ~~~~~~~~~~\n");
	expect_error("BEGIN { @x = (1, 2); @x = (1, \"a\"); }",
		     "stdin:1:25-26: ERROR: Tuple type mismatch: (int64,int64) != (int64,string[2]).\n"
		     "BEGIN { @x = (1, 2); @x = (1, \"a\"); }\n"
		     "                        ~\n");
	expect_error("BEGIN { $t = (1, 2); $t = (1, \"a\"); }",
		     "stdin:1:25-26: ERROR: Tuple type mismatch: (int64,int64) != (int64,string[2]).\n"
		     "BEGIN { $t = (1, 2); $t = (1, \"a\"); }\n"
		     "                        ~\n");
	expect_error("BEGIN { @x = (1, \"a\"); @x = (pid, \"b\"); exit(); }",
		     "stdin:1:27-28: ERROR: Tuple type mismatch: (int64,string[2]) != (unsigned int64,string[2]).\n"
		     "BEGIN { @x = (1, \"a\"); @x = (pid, \"b\"); exit(); }\n"
		     "                          ~\n");
	expect_error("BEGIN { @x[1]=1; for ($kv : @x) { print($kv); } }",
		     "stdin:1:18-21: ERROR: syntax error, unexpected for, expecting }\n"
		     "BEGIN { @x[1]=1; for ($kv : @x) { print($kv); } }\n"
		     "                 ~~~\n");
	expect_error("BEGIN { $t = nsecs ? (1,2) : (3,4); print($t); exit(); }",
		     "stdin:1:14-35: ERROR: Ternary return type unsupported tuple\n"
		     "BEGIN { $t = nsecs ? (1,2) : (3,4); print($t); exit(); }\n"
		     "             ~~~~~~~~~~~~~~~~~~~~~\n");
	expect_error("BEGIN { @x = (1, (2, 3)); @x = (1, (2, \"a\")); }",
		     "stdin:1:30-31: ERROR: Tuple type mismatch: (int64,(int64,int64)) != (int64,(int64,string[2])).\n"
		     "BEGIN { @x = (1, (2, 3)); @x = (1, (2, \"a\")); }\n"
		     "                             ~\n");
	expect_error("BEGIN { $x = (1, (2, 3)); $x = (1, (2, (3, 4))); }",
		     "stdin:1:30-31: ERROR: Tuple type mismatch: (int64,(int64,int64)) != (int64,(int64,(int64,int64))).\n"
		     "BEGIN { $x = (1, (2, 3)); $x = (1, (2, (3, 4))); }\n"
		     "                             ~\n");
	expect_error("BEGIN { $x = (1, (2, 3)); printf(\"%d\\n\", $x.1); }",
		     "stdin:1:27-47: ERROR: printf: %d specifier expects a value of type integer (tuple supplied)\n"
		     "BEGIN { $x = (1, (2, 3)); printf(\"%d\\n\", $x.1); }\n"
		     "                          ~~~~~~~~~~~~~~~~~~~~\n");
	expect_error("BEGIN { $x = (1, (2, 3)); print($x.1.5); }",
		     "stdin:1:27-39: ERROR: Invalid tuple index: 5. Found 2 elements in tuple.\n"
		     "BEGIN { $x = (1, (2, 3)); print($x.1.5); }\n"
		     "                          ~~~~~~~~~~~~\n");
	expect_error("BEGIN { @x[(1,(2,3))] = 1; exit(); }",
		     "stdin:1:9-22: ERROR: tuple cannot be used as a map key. Try a multi-key associative "
		     "array instead (eg `@map[$1, $2] = ...)`.\n"
		     "BEGIN { @x[(1,(2,3))] = 1; exit(); }\n"
		     "        ~~~~~~~~~~~~~\n");
	expect_error("BEGIN { $t = (1, 2); printf(\"%d\\n\", $t); }",
		     "stdin:1:22-40: ERROR: printf: %d specifier expects a value of type integer (tuple supplied)\n"
		     "BEGIN { $t = (1, 2); printf(\"%d\\n\", $t); }\n"
		     "                     ~~~~~~~~~~~~~~~~~~\n");
}

/* The parts laid out one after the other, read back by .N, through a
 * map and a variable; strings at their full size, integers as 8 bytes. */
/* strncmp(), sizeof() and reg(): bpftrace's words for every error. */
Test(lang_errors, strncmp_sizeof_and_reg)
{
	expect_error("BEGIN { $n = 2; printf(\"%d\\n\", strncmp(\"abc\", \"abd\", $n)); exit(); }",
		     "stdin:1:32-57: ERROR: strncmp() expects a integer literal (integer provided)\n"
		     "BEGIN { $n = 2; printf(\"%d\\n\", strncmp(\"abc\", \"abd\", $n)); exit(); }\n"
		     "                               ~~~~~~~~~~~~~~~~~~~~~~~~~\n");
	expect_error("BEGIN { printf(\"%d\\n\", strncmp(\"abc\", 5, 2)); exit(); }",
		     "stdin:1:24-44: ERROR: strncmp() only supports string arguments (integer provided)\n"
		     "BEGIN { printf(\"%d\\n\", strncmp(\"abc\", 5, 2)); exit(); }\n"
		     "                       ~~~~~~~~~~~~~~~~~~~~\n");
	expect_error("BEGIN { printf(\"%d\\n\", strncmp(\"abc\", \"x\")); exit(); }",
		     "stdin:1:24-43: ERROR: strncmp() requires 3 arguments (2 provided)\n"
		     "BEGIN { printf(\"%d\\n\", strncmp(\"abc\", \"x\")); exit(); }\n"
		     "                       ~~~~~~~~~~~~~~~~~~~\n");
	expect_error("BEGIN { printf(\"%lx\\n\", reg(\"ip\")); exit(); }",
		     "stdin:1:25-34: ERROR: reg can not be used with \"BEGIN\" probes\n"
		     "BEGIN { printf(\"%lx\\n\", reg(\"ip\")); exit(); }\n"
		     "                        ~~~~~~~~~\n");
	expect_error("uprobe:a:f { printf(\"%d\\n\", reg(\"xx\")); }",
		     "stdin:1:29-38: ERROR: 'xx' is not a valid register on this architecture ("
#ifdef __x86_64__
		     "x86_64"
#else
		     "arm64"
#endif
		     ")\nuprobe:a:f { printf(\"%d\\n\", reg(\"xx\")); }\n"
		     "                            ~~~~~~~~~\n");
	expect_error("uprobe:a:f { printf(\"%d\\n\", reg(1)); }",
		     "stdin:1:29-35: ERROR: reg() expects a string literal (integer provided)\n"
		     "uprobe:a:f { printf(\"%d\\n\", reg(1)); }\n"
		     "                            ~~~~~~\n");
	expect_error_has("interval:s:1 { @ = reg(\"sp\"); }", "reg can not be used with \"interval\" probes");
	expect_error_has("BEGIN { @ = sizeof(1, 2); }", "sizeof() requires one argument (2 provided)");
	expect_error_has("BEGIN { @ = sizeof(nosuch); }", "Unknown identifier: 'nosuch'");
}

/* strftime(): bpftrace's errors; the value is the time stamp and its
 * format's index, which the tool formats (lang_strftime: %f is the
 * microseconds, %%f stays). */
Test(lang_errors, strftime_as_bpftrace_words_it)
{
	expect_error("BEGIN { printf(\"%s\\n\", strftime(\"%Y\")); exit(); }",
		     "stdin:1:24-38: ERROR: strftime() requires at least 2 arguments (1 provided)\n"
		     "BEGIN { printf(\"%s\\n\", strftime(\"%Y\")); exit(); }\n"
		     "                       ~~~~~~~~~~~~~~\n");
	expect_error("BEGIN { printf(\"%s\\n\", strftime(\"%Y\", nsecs, 1)); exit(); }",
		     "stdin:1:24-48: ERROR: strftime() takes up to 2 arguments (3 provided)\n"
		     "BEGIN { printf(\"%s\\n\", strftime(\"%Y\", nsecs, 1)); exit(); }\n"
		     "                       ~~~~~~~~~~~~~~~~~~~~~~~~\n");
	expect_error("BEGIN { $f = \"%Y\"; printf(\"%s\\n\", strftime($f, nsecs)); exit(); }",
		     "stdin:1:35-54: ERROR: strftime() expects a string literal (string provided)\n"
		     "BEGIN { $f = \"%Y\"; printf(\"%s\\n\", strftime($f, nsecs)); exit(); }\n"
		     "                                  ~~~~~~~~~~~~~~~~~~~\n");
	expect_error("BEGIN { printf(\"%s\\n\", strftime(\"%Y\", \"x\")); exit(); }",
		     "stdin:1:24-43: ERROR: strftime() only supports integer arguments (string provided)\n"
		     "BEGIN { printf(\"%s\\n\", strftime(\"%Y\", \"x\")); exit(); }\n"
		     "                       ~~~~~~~~~~~~~~~~~~~\n");
	expect_error("BEGIN { printf(\"%d\\n\", strftime(\"%Y\", nsecs)); exit(); }",
		     "stdin:1:9-46: ERROR: printf: %d specifier expects a value of type integer (string supplied)\n"
		     "BEGIN { printf(\"%d\\n\", strftime(\"%Y\", nsecs)); exit(); }\n"
		     "        ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~\n");
	expect_error_has("BEGIN { @x = strftime(\"%Y\", nsecs) + 1; }", "Type mismatch for '+'");
}

Test(lang_vm, strftime_values)
{
	struct env *e = compile("uprobe:a:f { @t = strftime(\"%H:%M:%S.%f\", arg0); "
				"@k[strftime(\"%Y\", arg0)] = count(); }");
	int m = map_index(e, "@t");
	const struct lang_fmt_desc *fd;
	const void *k, *v;
	size_t pos = 0;
	uint64_t ns;
	uint32_t id, zero;
	char out[64];

	cr_assert_eq(e->img.maps[m].kind, LANG_M_TIMESTAMP);
	cr_assert_eq(e->img.maps[m].val_size, 16);
	e->regs.di = 3723000456789ull;
	cr_assert_eq(run(e, 0), 0);
	cr_assert(lang_map_next(&e->img, e->region, (unsigned)m, &pos, &k, &v));
	memcpy(&ns, v, 8);
	memcpy(&id, (const char *)v + 8, 4);
	memcpy(&zero, (const char *)v + 12, 4);
	cr_assert_eq(ns, 3723000456789ull);
	cr_assert_eq(zero, 0);
	cr_assert_lt(id, e->img.hdr->nfmts);
	fd = &e->img.fmts[id];
	cr_assert_str_eq(lang_image_str(&e->img, fd->fmt), "%H:%M:%S.%f");
	cr_assert_eq(map_count(e, "@k"), 1);
	env_free(e);

	setenv("TZ", "UTC", 1);
	tzset();
	cr_assert_eq(lang_strftime("%H:%M:%S.%f", 3723000456789ll, out, sizeof(out)), 15);
	cr_assert_str_eq(out, "01:02:03.000456");
	cr_assert_gt(lang_strftime("%Y-%m-%d %%f %f", 86400ll * 1000000000 + 999999999, out,
				   sizeof(out)), 0);
	cr_assert_str_eq(out, "1970-01-02 %f 999999");
	cr_assert_eq(lang_strftime("", 0, out, sizeof(out)), -1, "an empty result");
	cr_assert_eq(lang_strftime("%Y-%m-%d", 0, out, 4), -1, "a result that does not fit");
}

/* buf(): a length and up to LANG_STRLEN bytes, from the target's memory
 * (zeroes where it faults) or a string; %r, %rx and %rh as bpftrace
 * prints them, a token with a width as written. */
Test(lang_vm, buf_values_and_formats)
{
	static const char bytes[] = "ab\tc\x01\xff";
	struct env *e = compile("uprobe:a:f { printf(\"[%r] [%rx] [%rh] [%-4r]\\n\", buf(arg0, 6), buf(arg0, 2),"
				" buf(arg0, arg1), buf(arg0, 1)); @k[buf(\"key\", 3)] = count();"
				" @v = buf(arg2, 4); @long = buf(arg0, 1000); }");
	int m = map_index(e, "@v");
	const void *k, *v;
	size_t pos = 0;
	uint64_t len;

	cr_assert_eq(e->img.maps[m].kind, LANG_M_BUF);
	cr_assert_eq(e->img.maps[m].val_size, LANG_BUF_SIZE);
	e->regs.di = (uint64_t)(uintptr_t)bytes;
	e->regs.si = 3;
	e->regs.dx = 8;		/* unmapped: zeroes */
	cr_assert_eq(run(e, 0), 0);
	cr_assert_str_eq(e->out, "[ab\\x09c\\x01\\xff] [\\x61\\x62] [61 62 09] [%-4r]\n");
	cr_assert(lang_map_next(&e->img, e->region, (unsigned)m, &pos, &k, &v));
	memcpy(&len, v, 8);
	cr_assert_eq(len, 4);
	for (int i = 0; i < LANG_STRLEN; i++)
		cr_assert_eq(((const uint8_t *)v)[8 + i], 0, "byte %d", i);
	pos = 0;
	m = map_index(e, "@long");
	cr_assert(lang_map_next(&e->img, e->region, (unsigned)m, &pos, &k, &v));
	memcpy(&len, v, 8);
	cr_assert_eq(len, LANG_STRLEN, "a length past LANG_STRLEN is cut");
	cr_assert_eq(map_count(e, "@k"), 1);
	env_free(e);
}

/* cat() and system(): statements with a format, checked as printf's;
 * system() only with --unsafe (lang_compile_opts.unsafe), as bpftrace. */
Test(lang_errors, cat_and_system)
{
	struct lang_compile_opts unsafe = { .filename = "stdin", .unsafe = true };
	struct lang_error err;
	struct lang_image li;
	void *img = NULL;
	size_t len;

	expect_error("BEGIN { cat(); exit(); }",
		     "stdin:1:9-14: ERROR: cat() requires at least one argument (0 provided)\n"
		     "BEGIN { cat(); exit(); }\n        ~~~~~\n");
	expect_error("BEGIN { cat(\"/x%d\"); exit(); }",
		     "stdin:1:9-20: ERROR: cat: Not enough arguments for format string (0 supplied, 1 expected)\n"
		     "BEGIN { cat(\"/x%d\"); exit(); }\n        ~~~~~~~~~~~\n");
	expect_error("BEGIN { cat(\"/x\", 1); exit(); }",
		     "stdin:1:9-21: ERROR: cat: Too many arguments for format string (1 supplied, 0 expected)\n"
		     "BEGIN { cat(\"/x\", 1); exit(); }\n        ~~~~~~~~~~~~\n");
	expect_error("BEGIN { $x = cat(\"/x\"); exit(); }",
		     "stdin:1:14-23: ERROR: cat() should not be used in an assignment or as a map key\n"
		     "BEGIN { $x = cat(\"/x\"); exit(); }\n             ~~~~~~~~~\n");
	expect_error("BEGIN { cat(5); exit(); }",
		     "stdin:1:9-15: ERROR: cat() expects a string literal (integer provided)\n"
		     "BEGIN { cat(5); exit(); }\n        ~~~~~~\n");
	expect_error("BEGIN { system(\"echo hi %d\", 5); exit(); }",
		     "stdin:1:9-32: ERROR: system() is an unsafe function being used in safe mode\n"
		     "BEGIN { system(\"echo hi %d\", 5); exit(); }\n        ~~~~~~~~~~~~~~~~~~~~~~~\n");
	cr_assert_eq(lang_compile("BEGIN { system(\"echo %d\"); }", &unsafe, &img, &len, &err), -EINVAL);
	cr_assert_str_eq(err.msg, "system: Not enough arguments for format string (0 supplied, 1 expected)");
	cr_assert_eq(lang_compile("BEGIN { system(\"echo %d %s\", 5, comm); cat(\"/proc/%d/comm\", pid); }",
				  &unsafe, &img, &len, &err), 0, "%s", err.text);
	cr_assert_eq(lang_image_load(&li, img, len, NULL, 0), 0);
	cr_assert_eq(li.hdr->nfmts, 2);
	cr_assert_eq(li.fmts[0].nargs, 2);
	cr_assert_str_eq(lang_image_str(&li, li.fmts[1].fmt), "/proc/%d/comm");
	free(img);
}

/* join(): the array's strings up to its NULL (at most LANG_JOIN_MAX, each
 * cut to LANG_STRLEN - 1 bytes), an unreadable array an empty join. */
Test(lang_vm, join_arrays)
{
	static char longs[LANG_STRLEN + 20];
	char *words[] = { "one", "two words", "", "three", NULL, "after" };
	char *many[LANG_JOIN_MAX + 5], *cut[] = { longs, NULL };
	struct env *e = compile("uprobe:a:f { join(arg0); join(arg0, \"--\"); }");

	for (int i = 0; i < LANG_JOIN_MAX + 4; i++)
		many[i] = "x";
	many[LANG_JOIN_MAX + 4] = NULL;
	memset(longs, 'L', sizeof(longs) - 1);
	e->regs.di = (uint64_t)(uintptr_t)words;
	cr_assert_eq(run(e, 0), 0);
	cr_assert_str_eq(e->out, "<join 4 one two words  three><join 4 one--two words----three>");
	e->outlen = 0;
	e->out[0] = 0;
	e->regs.di = (uint64_t)(uintptr_t)many;
	cr_assert_eq(run(e, 0), 0);
	cr_assert(!strncmp(e->out, "<join 16 x x x", 14), "%s", e->out);
	e->outlen = 0;
	e->out[0] = 0;
	e->regs.di = 8;		/* unreadable */
	cr_assert_eq(run(e, 0), 0);
	cr_assert_str_eq(e->out, "<join 0><join 0>");
	e->outlen = 0;
	e->out[0] = 0;
	e->regs.di = (uint64_t)(uintptr_t)cut;
	cr_assert_eq(run(e, 0), 0);
	cr_assert_eq(strlen(e->out), 2 * (strlen("<join 1 >") + LANG_STRLEN - 1), "%s", e->out);
	env_free(e);
	expect_error_has("BEGIN { join(1, 2); }", "join() expects a string literal (integer provided)");
	expect_error_has("BEGIN { join(\"a\"); }", "join() only supports int or pointer arguments (string provided)");
	expect_error_has("BEGIN { join(); }", "join() requires at least one argument (0 provided)");
	expect_error_has("BEGIN { join(0, \",\", 3); }", "join() takes up to 2 arguments (3 provided)");
	expect_error_has("BEGIN { $x = join(0); }", "join() should not be used in an assignment or as a map key");
}

#ifdef __x86_64__
#define REG_IP "ip"
#define SARG_SKIP 1
#else
#define REG_IP "pc"
#define SARG_SKIP 0
#endif

/* gid, rand, numaid and cpid through the runtime's get(); sarg0.. from
 * the stack at the entry, past the return address on x86-64. */
Test(lang_vm, gid_rand_numaid_cpid_and_stack_args)
{
	uint64_t stack[4] = { 0xdead, 70, 80, 90 };
	struct env *e = compile("uprobe:a:f { @g = gid; @r = rand; @n = numaid; @c = cpid;"
				" @s0 = sarg0; @s1 = sarg1; }");

	user_stack_pointer(&e->regs) = (unsigned long)(uintptr_t)&stack[1 - SARG_SKIP];
	cr_assert_eq(run(e, 0), 0);
	cr_assert_eq(scalar(e, "@g"), 1001);
	cr_assert_eq(scalar(e, "@r"), 0x1234);
	cr_assert_eq(scalar(e, "@n"), 2);
	cr_assert_eq(scalar(e, "@c"), 98);
	cr_assert_eq(scalar(e, "@s0"), 70);
	cr_assert_eq(scalar(e, "@s1"), 80);
	user_stack_pointer(&e->regs) = 8;	/* unmapped: 0, as a bad pointer */
	cr_assert_eq(run(e, 0), 0);
	cr_assert_eq(scalar(e, "@s0"), 0);
	env_free(e);
	expect_error_has("uretprobe:a:f { @ = sarg0; }", "The sarg0 builtin can only be used with 'kprobes' and 'uprobes' probes");
	expect_error_has("BEGIN { @ = cpid; }", "cpid cannot be used without child command");
	expect_error_has("BEGIN { @ = sarg6; }", "Unknown identifier: 'sarg6'");
}

/* strncmp() compares at most N bytes up to the strings' ends; sizeof()
 * is the value's size as bpftrace gives it; reg() reads pt_regs, the
 * instruction pointer at an entry less the breakpoint's bias. */
Test(lang_vm, strncmp_sizeof_and_reg)
{
	struct env *e = compile("uprobe:a:f { @a = strncmp(\"abc\", \"abd\", 2); @b = strncmp(\"abc\", \"abd\", 3);"
				" @c = strncmp(\"abc\", \"abc\", 100); @d = strncmp(str(arg0), \"ab\", 2);"
				" $x = (int16)1; @s = sizeof(int32) * 1000000 + sizeof($x) * 10000 +"
				" sizeof(comm) * 100 + sizeof(\"abc\");"
				" @sp = reg(\"sp\"); @ip = reg(\"" REG_IP "\"); }");

	e->regs.di = (uint64_t)(uintptr_t)"abzz";
	user_stack_pointer(&e->regs) = 0x7ffd1234;
	instruction_pointer_set(&e->regs, 0x401001);
	e->ctx.ip_bias = 1;
	cr_assert_eq(run(e, 0), 0);
	cr_assert_eq(scalar(e, "@a"), 0);
	cr_assert_eq(scalar(e, "@b"), 1);
	cr_assert_eq(scalar(e, "@c"), 0);
	cr_assert_eq(scalar(e, "@d"), 0);
	cr_assert_eq(scalar(e, "@s"), 4021604);
	cr_assert_eq(scalar(e, "@sp"), 0x7ffd1234);
	cr_assert_eq(scalar(e, "@ip"), 0x401000);
	e->ctx.ip_bias = 0;
	e->regs.di = (uint64_t)(uintptr_t)"xb";
	cr_assert_eq(run(e, 0), 0);
	cr_assert_eq(scalar(e, "@ip"), 0x401001);
	cr_assert_eq(scalar(e, "@d"), 1);
	env_free(e);
}

Test(lang_vm, tuples_in_maps_and_variables)
{
	struct env *e = compile("uprobe:a:f { @t[arg0] = (arg1, \"s\", -arg1); $v = @t[arg0];"
				" @b[arg0] = $v.0 + $v.2; @c = (1, 2); print((arg0, \"p\")); }");
	int m = map_index(e, "@t");
	const struct lang_map_desc *d = &e->img.maps[m];
	const void *k, *v;
	size_t pos = 0;
	int64_t part;

	cr_assert_eq(d->kind, LANG_M_TUPLE);
	cr_assert_eq(d->nvparts, 3);
	cr_assert_eq(d->vparts[0].kind, LANG_T_INT);
	cr_assert_eq(d->vparts[1].kind, LANG_T_STR);
	cr_assert_eq(d->vparts[1].size, LANG_STRLEN);
	cr_assert_eq(d->val_size, 8 + LANG_STRLEN + 8);
	e->regs.di = 4;
	e->regs.si = 9;
	cr_assert_eq(run(e, 0), 0);
	cr_assert(lang_map_next(&e->img, e->region, (unsigned)m, &pos, &k, &v));
	memcpy(&part, v, 8);
	cr_assert_eq(part, 9);
	cr_assert_str_eq((const char *)v + 8, "s");
	memcpy(&part, (const char *)v + 8 + LANG_STRLEN, 8);
	cr_assert_eq(part, -9);
	cr_assert_eq(map_val(e, "@b", 4), 0);
	cr_assert_eq(e->img.fmts[0].nargs, 2);	/* print(tuple): its parts */
	env_free(e);
}

/* A tuple inside a tuple is its values in place, the description saying
 * where it begins and ends; .N of it is a tuple, .N.M its part. */
Test(lang_vm, nested_tuples_in_maps_and_variables)
{
	struct env *e = compile("uprobe:a:f { @t = (arg0, (arg1, (\"s\", 5)), 9); $v = @t;"
				" @b = $v.1.1.1 + $v.1.0; @i = $v.1; print(((1, 2), 3)); }");
	const struct lang_map_desc *d = &e->img.maps[map_index(e, "@t")], *i;
	const struct lang_fmt_desc *f = &e->img.fmts[0];
	const void *k, *v;
	size_t pos = 0;
	int64_t part;

	cr_assert_eq(d->kind, LANG_M_TUPLE);
	cr_assert_eq(d->nvparts, 5);
	cr_assert_eq(d->vparts[2].kind, LANG_T_STR);
	cr_assert_eq(d->val_size, 8 + 8 + LANG_STRLEN + 8 + 8);
	/* (a, (b, (s, 5)), 9) */
	cr_assert_eq(d->vnest[0], 0);
	cr_assert_eq(d->vnest[1], LANG_NEST(1, 0));
	cr_assert_eq(d->vnest[2], LANG_NEST(1, 0));
	cr_assert_eq(d->vnest[3], LANG_NEST(0, 2));
	cr_assert_eq(d->vnest[4], 0);
	i = &e->img.maps[map_index(e, "@i")];
	cr_assert_eq(i->nvparts, 3);
	cr_assert_eq(i->vnest[1], LANG_NEST(1, 0));
	cr_assert_eq(i->vnest[2], LANG_NEST(0, 1));
	cr_assert_eq(f->nargs, 3);
	cr_assert_eq(f->nest[0], LANG_NEST(1, 0));
	cr_assert_eq(f->nest[1], LANG_NEST(0, 1));
	cr_assert_eq(f->nest[2], 0);
	e->regs.di = 4;
	e->regs.si = 11;
	cr_assert_eq(run(e, 0), 0);
	cr_assert_eq(scalar(e, "@b"), 16);
	cr_assert(lang_map_next(&e->img, e->region, (unsigned)map_index(e, "@i"), &pos, &k, &v));
	memcpy(&part, v, 8);
	cr_assert_eq(part, 11);
	cr_assert_str_eq((const char *)v + 8, "s");
	memcpy(&part, (const char *)v + 8 + LANG_STRLEN, 8);
	cr_assert_eq(part, 5);
	env_free(e);
}

/* The agent checks a tuple map's description again. */
Test(lang_compile, a_tuple_map_that_lies_is_refused)
{
	struct env *e = compile("BEGIN { @t = (1, \"s\"); }");
	struct lang_image img;
	uint8_t *copy = malloc(e->len);
	struct lang_map_desc *d;
	char why[128];

	cr_assert_not_null(copy);
	memcpy(copy, e->image, e->len);
	cr_assert_eq(lang_image_load(&img, copy, e->len, why, sizeof(why)), 0, "%s", why);
	d = (struct lang_map_desc *)img.maps;
	d->vparts[1].size = 8;		/* a string part said to be 8 bytes */
	cr_assert_eq(lang_image_load(&img, copy, e->len, why, sizeof(why)), -EINVAL);
	d->vparts[1].size = LANG_STRLEN;
	d->vparts[1].kind = LANG_T_USTACK;
	cr_assert_eq(lang_image_load(&img, copy, e->len, why, sizeof(why)), -EINVAL);
	d->vparts[1].kind = LANG_T_STR;
	d->vnest[0] = LANG_NEST(0, 1);	/* a tuple inside that ends first */
	cr_assert_eq(lang_image_load(&img, copy, e->len, why, sizeof(why)), -EINVAL);
	d->vnest[0] = LANG_NEST(1, 0);	/* one that never ends */
	cr_assert_eq(lang_image_load(&img, copy, e->len, why, sizeof(why)), -EINVAL);
	d->vnest[1] = LANG_NEST(0, 1);
	cr_assert_eq(lang_image_load(&img, copy, e->len, why, sizeof(why)), 0, "%s", why);
	d->nvparts = 1;
	cr_assert_eq(lang_image_load(&img, copy, e->len, why, sizeof(why)), -EINVAL);
	free(copy);
	env_free(e);
}

Test(lang_compile, fast_forms_recognised)
{
	struct env *e = compile("uprobe:a:f { @[tid] = count(); } uprobe:a:g { @n = count(); }"
				" uprobe:a:h { @h = hist(arg0); } uprobe:a:i /arg0 == 7/ { @x = count(); }"
				" uprobe:a:j { @y[tid] = count(); @z = 1; }"
				" uprobe:a:k /tid != 3/ { @w = count(); @z = 2; }"
				" uprobe:a:l /pid > 9/ { @v[arg1] = count(); }"
				" uprobe:a:m /arg2 < 5/ { @u = hist(tid); }"
				" uprobe:a:n /arg0 + 1 == 7/ { @t = count(); }");
	const struct lang_probe_desc *pd = e->img.probes;

	cr_assert_eq(pd[0].fast, LANG_FAST_COUNT_KEY);
	cr_assert_eq(pd[0].fast_src, LANG_SRC_TID);
	cr_assert_eq(pd[0].pred, 0);
	cr_assert_eq(pd[1].fast, LANG_FAST_COUNT_KEYLESS);
	cr_assert_eq(pd[2].fast, LANG_FAST_HIST);
	cr_assert_eq(pd[2].fast_src, LANG_SRC_ARG);
	/* a filter in front of a count: both fast */
	cr_assert_eq(pd[3].fast, LANG_FAST_COUNT_KEYLESS);
	cr_assert_eq(pd[3].pred, 1);
	cr_assert_eq(pd[3].pred_src, LANG_SRC_ARG);
	cr_assert_eq(pd[3].pred_arg, 0);
	cr_assert_eq(pd[3].fast_cmp, LANG_OP_EQ);
	cr_assert_eq(pd[3].fast_imm, 7);
	cr_assert_eq(pd[4].fast, LANG_FAST_NONE);
	/* in front of a body the interpreter runs */
	cr_assert_eq(pd[5].fast, LANG_FAST_PRED_ONLY);
	cr_assert_eq(pd[5].pred_src, LANG_SRC_TID);
	cr_assert_eq(pd[5].fast_imm, 3);
	cr_assert_eq(pd[6].fast, LANG_FAST_COUNT_KEY);
	cr_assert_eq(pd[6].fast_src, LANG_SRC_ARG);
	cr_assert_eq(pd[6].fast_arg, 1);
	cr_assert_eq(pd[6].pred_src, LANG_SRC_PID);
	cr_assert_eq(pd[7].fast, LANG_FAST_HIST);
	cr_assert_eq(pd[7].fast_src, LANG_SRC_TID);
	cr_assert_eq(pd[7].pred_src, LANG_SRC_ARG);
	cr_assert_eq(pd[7].pred_arg, 2);
	/* not a filter on a plain source */
	cr_assert_eq(pd[8].fast, LANG_FAST_NONE);
	cr_assert_eq(pd[8].pred, 0);
	env_free(e);
}

Test(lang_compile, latency_forms_recognised)
{
	struct env *e = compile(
		"uprobe:a:f { @s[tid] = nsecs; }"
		" uretprobe:a:f /@s[tid]/ { @ns = hist(nsecs - @s[tid]); delete(@s[tid]); }"
		/* not the pattern: another key, another map, not nsecs, more */
		" uretprobe:a:g /@s[tid]/ { @ns = hist(nsecs - @s[pid]); delete(@s[tid]); }"
		" uretprobe:a:h /@s[tid]/ { @ns = hist(nsecs - @s[tid]); delete(@t[tid]); }"
		" uretprobe:a:i /@s[tid]/ { @ns = hist(elapsed - @s[tid]); delete(@s[tid]); }"
		" uretprobe:a:j /@s[tid]/ { @ns = hist(nsecs - @s[tid]); delete(@s[tid]); @n = count(); }"
		" uprobe:a:k { @t[tid] = elapsed; }"
		" uprobe:a:l { @s[tid] = nsecs; @n = count(); }");

	cr_assert_eq(e->img.probes[0].fast, LANG_FAST_STORE_KEY);
	cr_assert_eq(e->img.probes[0].fast_src, LANG_SRC_TID);
	cr_assert_eq(e->img.probes[0].fast_src2, LANG_SRC_NSECS);
	cr_assert_eq(e->img.probes[0].fast_map, map_index(e, "@s"));
	cr_assert_eq(e->img.probes[1].fast, LANG_FAST_DELTA_HIST);
	cr_assert_eq(e->img.probes[1].fast_map, map_index(e, "@ns"));
	cr_assert_eq(e->img.probes[1].fast_map2, map_index(e, "@s"));
	for (unsigned i = 2; i < 8; i++)
		cr_assert_eq(e->img.probes[i].fast, LANG_FAST_NONE, "probe %u", i);
	env_free(e);
}

Test(lang_compile, map_keys_option)
{
	struct env *e = compile_with("uprobe:a:f { @[arg0] = count(); }", 0, NULL, 3);

	cr_assert_eq(e->img.maps[0].max_keys, 3);
	env_free(e);
}

/* ---- running programs ---- */

Test(lang_vm, count_by_key_and_keyless)
{
	struct env *e = compile("uprobe:a:f { @[tid] = count(); @n = count(); @k[arg0, arg1] = count(); }");
	int i;

	for (i = 0; i < 10; i++) {
		e->tid = 100 + (uint64_t)(i % 3);
		e->regs.di = (uint64_t)(i % 2);
		e->regs.si = 7;
		cr_assert_eq(run(e, 0), 0);
	}
	cr_assert_eq(map_val(e, "@", 100), 4);
	cr_assert_eq(map_val(e, "@", 101), 3);
	cr_assert_eq(map_val(e, "@", 102), 3);
	cr_assert_eq(scalar(e, "@n"), 10);
	cr_assert_eq(map_count(e, "@k"), 2);
	env_free(e);
}

Test(lang_vm, fast_paths_match_interpreter)
{
	struct env *e = compile("uprobe:a:f { @a[arg0] = count(); } uprobe:a:g { @b = hist(arg0); }"
				" uprobe:a:h /arg0 > 5/ { @c = count(); }"
				" uprobe:a:i { @d[arg0] = count(); $x = 1; }"
				" uprobe:a:j { @e = hist(arg0); $y = 1; }"
				/* filtered forms (k-m) and the same interpreted (n-p) */
				" uprobe:a:k /arg0 < 4/ { @f[arg0] = count(); }"
				" uprobe:a:l /arg0 >= 8/ { @g = hist(arg0); }"
				" uprobe:a:m /arg0 != 1000/ { @h = count(); }"
				" uprobe:a:n /arg0 < 4/ { @i[arg0] = count(); $z = 1; }"
				" uprobe:a:o /arg0 >= 8/ { @j = hist(arg0); $z = 1; }"
				" uprobe:a:p /arg0 != 1000/ { @k = count(); $z = 1; }");
	static const int64_t vals[] = { -1, 0, 1, 2, 3, 4, 7, 8, 1000, 1 << 20, (int64_t)1 << 31,
					(int64_t)1 << 40, INT64_MAX };
	unsigned i;
	unsigned nb, nb2, k;

	cr_assert_eq(e->img.probes[5].fast, LANG_FAST_COUNT_KEY);
	cr_assert_eq(e->img.probes[6].fast, LANG_FAST_HIST);
	cr_assert_eq(e->img.probes[7].fast, LANG_FAST_COUNT_KEYLESS);
	for (k = 8; k < 11; k++)
		cr_assert_eq(e->img.probes[k].fast, LANG_FAST_PRED_ONLY);
	for (i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		e->regs.di = (uint64_t)vals[i];
		for (k = 0; k < 11; k++)
			run(e, k);
	}
	for (i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		cr_assert_eq(map_val(e, "@a", vals[i]), map_val(e, "@d", vals[i]));
		if ((uint64_t)vals[i] < 4)
			cr_assert_eq(map_val(e, "@f", vals[i]), map_val(e, "@i", vals[i]));
	}
	cr_assert_eq(map_count(e, "@i"), 4);
	/* arg0 is unsigned: only 0..3 are below 4 */
	cr_assert_eq(map_count(e, "@f"), 4);
	cr_assert_eq(map_val(e, "@f", 3), 1);
	cr_assert_eq(scalar(e, "@h"), (int64_t)(sizeof(vals) / sizeof(vals[0])) - 1);
	cr_assert_eq(scalar(e, "@k"), scalar(e, "@h"));
	{
		size_t p1 = 0, p2 = 0;
		const void *k1, *v1, *k2, *v2;
		const uint64_t *b1, *b2;

		cr_assert(lang_map_next(&e->img, e->region, (unsigned)map_index(e, "@g"), &p1, &k1, &v1));
		cr_assert(lang_map_next(&e->img, e->region, (unsigned)map_index(e, "@j"), &p2, &k2, &v2));
		b1 = lang_map_buckets(&e->img, (unsigned)map_index(e, "@g"), v1, &nb);
		b2 = lang_map_buckets(&e->img, (unsigned)map_index(e, "@j"), v2, &nb2);
		cr_assert_eq(nb2, nb);
		cr_assert_eq(memcmp(b1, b2, 8 * nb), 0);
		/* -1 (unsigned: above 8), 8, 1000, 2^20, 2^31, 2^40, INT64_MAX */
		cr_assert_eq(b1[0], 1);
		cr_assert_eq(b1[1] + b1[2] + b1[3] + b1[4], 0);
		cr_assert_eq(b1[5], 1);
	}
	{
		size_t p1 = 0, p2 = 0;
		const void *k1, *v1, *k2, *v2;
		const uint64_t *b1, *b2;

		cr_assert(lang_map_next(&e->img, e->region, (unsigned)map_index(e, "@b"), &p1, &k1, &v1));
		cr_assert(lang_map_next(&e->img, e->region, (unsigned)map_index(e, "@e"), &p2, &k2, &v2));
		b1 = lang_map_buckets(&e->img, (unsigned)map_index(e, "@b"), v1, &nb);
		b2 = lang_map_buckets(&e->img, (unsigned)map_index(e, "@e"), v2, &nb2);
		cr_assert_eq(nb, LANG_HIST_BUCKETS);
		cr_assert_eq(nb2, nb);
		cr_assert_eq(memcmp(b1, b2, 8 * nb), 0);
		cr_assert_eq(b1[0], 1);		/* -1 */
		cr_assert_eq(b1[1], 1);		/* 0 */
		cr_assert_eq(b1[2], 1);		/* 1 */
		cr_assert_eq(b1[3], 2);		/* 2, 3 */
		cr_assert_eq(b1[4], 2);		/* 4, 7 */
		cr_assert_eq(b1[5], 1);		/* 8 */
		cr_assert_eq(b1[33], 3);	/* >= 2^31: bpftrace 0.17's last bucket */
	}
	/* arg0 is unsigned: -1 compares above 5, as in bpftrace; then 7, 8,
	 * 1000, 2^20, 2^31, 2^40, INT64_MAX */
	cr_assert_eq(scalar(e, "@c"), 8);
	env_free(e);
}

/* The latency pattern's fast forms (probes 0, 1) against the same program
 * interpreted (probes 2, 3: an extra statement keeps them off the fast
 * forms): entries overwritten before their return, returns without an
 * entry, several threads interleaved. */
Test(lang_vm, latency_fast_forms_match_interpreter)
{
	struct env *e = compile(
		"uprobe:a:f { @s[tid] = nsecs; }"
		" uretprobe:a:f /@s[tid]/ { @h = hist(nsecs - @s[tid]); delete(@s[tid]); }"
		" uprobe:a:g { @t[tid] = nsecs; $x = 1; }"
		" uretprobe:a:g /@t[tid]/ { @g = hist(nsecs - @t[tid]); delete(@t[tid]); $y = 1; }");
	static const struct { int probe; uint64_t tid, nsecs; } steps[] = {
		{ 1, 5, 100 },		/* a return without an entry */
		{ 0, 5, 1000 }, { 1, 5, 1003 },
		{ 0, 6, 2000 }, { 0, 7, 2001 }, { 1, 6, 2100 }, { 1, 7, 4001 },
		{ 0, 5, 5000 }, { 0, 5, 5500 }, { 1, 5, 5501 },	/* overwritten */
		{ 1, 5, 6000 },		/* deleted already */
		{ 0, 8, 7000 }, { 1, 8, 7000 + (1 << 20) },
		{ 0, 9, 9000 },		/* left live */
	};
	unsigned i, nb, nb2;
	size_t p1 = 0, p2 = 0;
	const void *k1, *v1, *k2, *v2;
	const uint64_t *b1, *b2;

	cr_assert_eq(e->img.probes[0].fast, LANG_FAST_STORE_KEY);
	cr_assert_eq(e->img.probes[1].fast, LANG_FAST_DELTA_HIST);
	cr_assert_eq(e->img.probes[2].fast, LANG_FAST_NONE);
	cr_assert_eq(e->img.probes[3].fast, LANG_FAST_NONE);
	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		e->tid = steps[i].tid;
		e->nsecs = steps[i].nsecs;
		run(e, (unsigned)steps[i].probe);
		run(e, (unsigned)steps[i].probe + 2);
	}
	cr_assert(lang_map_next(&e->img, e->region, (unsigned)map_index(e, "@h"), &p1, &k1, &v1));
	cr_assert(lang_map_next(&e->img, e->region, (unsigned)map_index(e, "@g"), &p2, &k2, &v2));
	b1 = lang_map_buckets(&e->img, (unsigned)map_index(e, "@h"), v1, &nb);
	b2 = lang_map_buckets(&e->img, (unsigned)map_index(e, "@g"), v2, &nb2);
	cr_assert_eq(nb, nb2);
	cr_assert_eq(memcmp(b1, b2, 8 * nb), 0);
	cr_assert_eq(b1[2], 1);		/* 1 */
	cr_assert_eq(b1[3], 1);		/* 3 */
	cr_assert_eq(b1[8], 1);		/* 100 */
	cr_assert_eq(b1[12], 1);	/* 2000 */
	cr_assert_eq(b1[22], 1);	/* 2^20 */
	cr_assert_eq(map_count(e, "@s"), 1);
	cr_assert_eq(map_count(e, "@t"), 1);
	cr_assert_eq(map_val(e, "@s", 9), 9000);
	cr_assert_eq(map_val(e, "@t", 9), 9000);
	env_free(e);
}

Test(lang_vm, hist_and_lhist_buckets_as_bpftrace)
{
	char l[64];

	cr_assert_eq(lang_hist_index(-5), 0);
	cr_assert_eq(lang_hist_index(0), 1);
	cr_assert_eq(lang_hist_index(1), 2);
	cr_assert_eq(lang_hist_index(2), 3);
	cr_assert_eq(lang_hist_index(3), 3);
	cr_assert_eq(lang_hist_index(1023), 11);
	cr_assert_eq(lang_hist_index(1024), 12);
	lang_hist_label(0, l, sizeof(l));
	cr_assert_str_eq(l, "(..., 0)");
	lang_hist_label(1, l, sizeof(l));
	cr_assert_str_eq(l, "[0]");
	lang_hist_label(2, l, sizeof(l));
	cr_assert_str_eq(l, "[1]");
	lang_hist_label(3, l, sizeof(l));
	cr_assert_str_eq(l, "[2, 4)");
	lang_hist_label(11, l, sizeof(l));
	cr_assert_str_eq(l, "[512, 1K)");
	lang_hist_label(12, l, sizeof(l));
	cr_assert_str_eq(l, "[1K, 2K)");
	lang_hist_label(22, l, sizeof(l));
	cr_assert_str_eq(l, "[1M, 2M)");
	lang_hist_label(33, l, sizeof(l));
	cr_assert_str_eq(l, "[2G, 4G)");
	cr_assert_eq(lang_lhist_nbuckets(0, 100, 10), 12);
	cr_assert_eq(lang_lhist_index(-1, 0, 100, 10), 0);
	cr_assert_eq(lang_lhist_index(0, 0, 100, 10), 1);
	cr_assert_eq(lang_lhist_index(9, 0, 100, 10), 1);
	cr_assert_eq(lang_lhist_index(10, 0, 100, 10), 2);
	cr_assert_eq(lang_lhist_index(100, 0, 100, 10), 11);
	cr_assert_eq(lang_lhist_index(1000, 0, 100, 10), 11);
	lang_lhist_label(0, 0, 100, 10, l, sizeof(l));
	cr_assert_str_eq(l, "(..., 0)");
	lang_lhist_label(1, 0, 100, 10, l, sizeof(l));
	cr_assert_str_eq(l, "[0, 10)");
	lang_lhist_label(11, 0, 100, 10, l, sizeof(l));
	cr_assert_str_eq(l, "[100, ...)");
	lang_lhist_label(1, 1024, 4096, 1024, l, sizeof(l));
	cr_assert_str_eq(l, "[1K, 2K)");
}

Test(lang_vm, aggregates)
{
	struct env *e = compile("uprobe:a:f { @s = sum(arg0); @a = avg(arg0); @mn = min(arg0); @mx = max(arg0);"
				" @st = stats(arg0); @l = lhist(arg0, 0, 10, 2); }");
	static const int64_t v[] = { 5, 3, 9, 1, 12 };
	unsigned i, nb;
	size_t pos = 0;
	const void *k, *val;
	struct lang_agg a;
	const uint64_t *b;

	for (i = 0; i < 5; i++) {
		e->regs.di = (uint64_t)v[i];
		run(e, 0);
	}
	cr_assert_eq(scalar(e, "@s"), 30);
	cr_assert_eq(scalar(e, "@a"), 6);
	cr_assert_eq(scalar(e, "@mn"), 1);
	cr_assert_eq(scalar(e, "@mx"), 12);
	cr_assert(lang_map_next(&e->img, e->region, (unsigned)map_index(e, "@st"), &pos, &k, &val));
	lang_map_agg(&e->img, (unsigned)map_index(e, "@st"), val, &a);
	cr_assert_eq(a.count, 5);
	cr_assert_eq(a.sum, 30);
	cr_assert_eq(a.value, 6);
	pos = 0;
	cr_assert(lang_map_next(&e->img, e->region, (unsigned)map_index(e, "@l"), &pos, &k, &val));
	b = lang_map_buckets(&e->img, (unsigned)map_index(e, "@l"), val, &nb);
	cr_assert_eq(nb, 7);
	cr_assert_eq(b[1], 1);	/* 1 in [0,2) */
	cr_assert_eq(b[2], 1);	/* 3 */
	cr_assert_eq(b[3], 1);	/* 5 */
	cr_assert_eq(b[5], 1);	/* 9 */
	cr_assert_eq(b[6], 1);	/* 12 > max */
	env_free(e);
}

Test(lang_vm, min_max_quirks_of_bpftrace)
{
	/* max of negative values never creates the entry (0 is the floor) */
	struct env *e = compile("uprobe:a:f { @mx = max(arg0); @mn = min(arg0); }");
	int found;

	e->regs.di = (uint64_t)-5;
	run(e, 0);
	map_int(e, "@mx", NULL, &found);
	cr_assert_not(found);
	cr_assert_eq(scalar(e, "@mn"), -5);
	env_free(e);
}

Test(lang_vm, extreme_values_stay_defined)
{
	struct env *e = compile("uprobe:a:f { @mn = min(arg0); @mx = max(arg0); @a = avg(arg0); @s = sum(arg0);"
				" @d = arg0 / arg1; @m = arg0 % arg1; @n = -arg0; @sh = arg0 << 70; @h = hist(arg0); }");
	static const uint64_t v[] = { 0x8000000000000000ull, 0x7fffffffffffffffull, 0xffffffffffffffffull, 0 };
	unsigned i, j;

	for (i = 0; i < 4; i++)
		for (j = 0; j < 4; j++) {
			e->regs.di = v[i];
			e->regs.si = v[j];
			run(e, 0);
		}
	cr_assert_eq(scalar(e, "@mx"), INT64_MAX);
	env_free(e);
}

Test(lang_vm, latency_pattern_with_delete)
{
	struct env *e = compile("uprobe:a:f { @s[tid] = nsecs; }"
				" uretprobe:a:f /@s[tid]/ { @ns = hist(nsecs - @s[tid]); @t = sum(nsecs - @s[tid]);"
				" delete(@s[tid]); }");
	int i;

	for (i = 0; i < 3; i++) {
		e->tid = 5;
		e->nsecs = 1000;
		run(e, 0);
		e->tid = 6;
		e->nsecs = 1100;
		run(e, 0);
		e->tid = 5;
		e->nsecs = 1500;
		run(e, 1);
		e->tid = 6;
		e->nsecs = 1400;
		run(e, 1);
	}
	/* a return without its entry: the filter is false */
	e->tid = 7;
	run(e, 1);
	cr_assert_eq(scalar(e, "@t"), 3 * (500 + 300));
	cr_assert_eq(map_count(e, "@s"), 0);
	env_free(e);
}

Test(lang_vm, printf_formats)
{
	struct env *e = compile("uprobe:a:f { printf(\"%d %u %x %5d|%-5d| %ld %s %c %lx %hd\\n\", arg0, arg0, 255,"
				" 42, 42, arg0, str(arg1), 65, arg0, 70000);"
				" printf(\"%s %s %s\\n\", comm, func, probe); printf(\"100%%\\n\");"
				" printf(\"%d%%%s\\n\", 5, \"x\"); printf(\"%p %08x %.3s\\n\", 4096, 255, \"abcdef\"); }");
	const char *s = "hello";

	e->regs.di = (uint64_t)-2;
	e->regs.si = (uint64_t)(uintptr_t)s;
	e->ctx.func_addr = 0x1040;
	e->ctx.probe_id = 3;
	run(e, 0);
	cr_assert_str_eq(e->out,
			 "-2 4294967294 ff    42|42   | -2 hello A fffffffffffffffe 4464\n"
			 "target fn_1040 uprobe:/bin/t:f3\n"
			 "100%%\n"
			 "5%x\n"
			 "0x1000 000000ff abc\n", "%s", e->out);
	env_free(e);
}

Test(lang_vm, str_on_bad_pointers_and_lengths)
{
	struct env *e = compile("uprobe:a:f { printf(\"[%s][%s][%s]\\n\", str(arg0), str(arg1), str(arg2, 3));"
				" @x = *(int32 *)arg0; @y = *(uint8 *)(arg3 + 1); @z = *(int16 *)arg3; }");
	char *page = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *edge;
	int16_t neg = -3;

	cr_assert_neq(page, MAP_FAILED);
	cr_assert_eq(mprotect(page + 4096, 4096, PROT_NONE), 0);
	/* a string running into an unmapped page ends there as bpftrace's
	 * probe_read_str would fail: "" */
	edge = page + 4096 - 4;
	memcpy(edge, "abcd", 4);
	e->regs.di = 8;		/* a bad pointer */
	e->regs.si = (uint64_t)(uintptr_t)edge;
	e->regs.dx = (uint64_t)(uintptr_t)"truncated";
	e->regs.cx = (uint64_t)(uintptr_t)&neg;
	run(e, 0);
	cr_assert_str_eq(e->out, "[][][tru]\n", "%s", e->out);
	cr_assert_eq(scalar(e, "@x"), 0);
	cr_assert_eq(scalar(e, "@y"), 0xff);
	cr_assert_eq(scalar(e, "@z"), -3);
	munmap(page, 8192);
	env_free(e);
}

Test(lang_vm, control_flow_and_arithmetic)
{
	struct env *e = compile(
		"uprobe:a:f { $i = 0; $sum = 0; while ($i < 10) { $i++; if ($i % 2 == 0) { continue; }"
		" if ($i > 7) { break; } $sum += $i; } @sum = $sum; @i = $i;"
		" unroll(4) { @u++; } @t = arg0 > 5 ? 1 : 2; @neg = -7 / 2; @mod = -7 % 3;"
		" @udiv = arg1 / 2; @sh = (1 << 40) >> 38; @sar = -16 >> 2; @bits = (0xf0 | 0x0f) ^ 0xff;"
		" @land = (arg0 && 0) || 1; @c8 = (uint8)300; @s8 = (int8)200; @div0 = 5 / arg2;"
		" @cmp = (int64)-1 < 1; @ucmp = arg1 < 1; @not = !arg2 + ~0; @s = \"a\" == \"a\"; @ns = \"a\" != \"a\";"
		" if (arg0 == 1) { @e = 1; } else if (arg0 == 9) { @e = 9; } else { @e = 0; } }");

	e->regs.di = 9;
	e->regs.si = (uint64_t)-4;
	e->regs.dx = 0;
	run(e, 0);
	cr_assert_eq(scalar(e, "@sum"), 1 + 3 + 5 + 7);
	cr_assert_eq(scalar(e, "@i"), 9);
	cr_assert_eq(scalar(e, "@u"), 4);
	cr_assert_eq(scalar(e, "@t"), 1);
	/* unsigned, as bpftrace 0.17 divides */
	cr_assert_eq(scalar(e, "@neg"), (int64_t)((uint64_t)-7 / 2));
	cr_assert_eq(scalar(e, "@mod"), (int64_t)((uint64_t)-7 % 3));
	cr_assert_eq(scalar(e, "@udiv"), (int64_t)((uint64_t)-4 / 2));
	cr_assert_eq(scalar(e, "@sh"), 4);
	cr_assert_eq(scalar(e, "@sar"), -4);
	cr_assert_eq(scalar(e, "@bits"), 0);
	cr_assert_eq(scalar(e, "@land"), 1);
	cr_assert_eq(scalar(e, "@c8"), 44);
	cr_assert_eq(scalar(e, "@s8"), -56);
	cr_assert_eq(scalar(e, "@div0"), 0);
	cr_assert_eq(scalar(e, "@cmp"), 1);
	cr_assert_eq(scalar(e, "@ucmp"), 0);
	cr_assert_eq(scalar(e, "@not"), 0);
	cr_assert_eq(scalar(e, "@s"), 1);
	cr_assert_eq(scalar(e, "@ns"), 0);
	cr_assert_eq(scalar(e, "@e"), 9);
	env_free(e);
}

Test(lang_vm, endless_loop_is_bounded)
{
	struct env *e = compile("uprobe:a:f { $i = 0; while (1) { $i++; } @never = 1; }");
	int found;

	cr_assert_eq(run(e, 0), -E2BIG);
	cr_assert_eq(lang_maps_aborted(&e->img, e->region), 1);
	map_int(e, "@never", NULL, &found);
	cr_assert_not(found);
	env_free(e);
}

Test(lang_vm, strings_in_maps_and_keys)
{
	struct env *e = compile("uprobe:a:f { @name[str(arg0)] = count(); @last = str(arg0); @c = comm;"
				" $s = str(arg0); if ($s == \"bob\") { @bob++; } print($s); print(@last); }");
	int m;
	size_t pos = 0;
	const void *k, *v;
	unsigned n = 0;

	e->regs.di = (uint64_t)(uintptr_t)"alice";
	run(e, 0);
	e->regs.di = (uint64_t)(uintptr_t)"bob";
	run(e, 0);
	run(e, 0);
	m = map_index(e, "@name");
	while (lang_map_next(&e->img, e->region, (unsigned)m, &pos, &k, &v)) {
		struct lang_agg a;

		lang_map_agg(&e->img, (unsigned)m, v, &a);
		if (!strcmp(k, "bob"))
			cr_assert_eq(a.value, 2);
		else
			cr_assert_str_eq(k, "alice");
		n++;
	}
	cr_assert_eq(n, 2);
	cr_assert_eq(scalar(e, "@bob"), 2);
	cr_assert_str_eq(e->out, "alice\n<print @last 0 1>bob\n<print @last 0 1>bob\n<print @last 0 1>",
			 "%s", e->out);
	env_free(e);
}

Test(lang_vm, ustack_usym_and_value_formatting)
{
	struct env *e = compile("uprobe:a:f { @[ustack(2)] = count(); printf(\"%s|%s|%s\\n\", usym(arg0), usym(arg1), usym(arg2)); print(ustack); }");
	char buf[512];
	size_t pos = 0;
	const void *k, *v;

	e->regs.di = 0x1234;
	e->regs.si = 0x9999;
	e->regs.dx = 0;
	run(e, 0);
	/* an address with no name in hex, 0 as bpftrace writes it: "0" */
	cr_assert_str_eq(e->out, "fn_1234|0x9999|0\n\n        fn_1000+0\n        fn_1000+16\n        fn_1000+32\n\n",
			 "%s", e->out);
	cr_assert(lang_map_next(&e->img, e->region, 0, &pos, &k, &v));
	lang_format_value(&e->img.maps[0].keys[0], k, &fmt_ops, buf, sizeof(buf));
	cr_assert_str_eq(buf, "\n        fn_1000+0\n        fn_1000+16\n", "%s", buf);
	env_free(e);
}

Test(lang_vm, actions_exit_signal_override_events)
{
	struct env *e = compile("uprobe:a:f { signal(\"SIGUSR1\"); override(arg0 + 1); time(); time(\"%Y\");"
				" print(@m); print(@m, 5, 2); clear(@m); zero(@m); @m[1] = count(); exit(); @after = 1; }"
				" END { @end = 1; }");
	int found;

	e->regs.di = 41;
	cr_assert_eq(run(e, 0), LANG_RUN_EXIT);
	cr_assert_eq(e->signals, 1);
	cr_assert_eq(e->last_signal, SIGUSR1);
	cr_assert_eq(e->overrides, 1);
	cr_assert_eq(e->regs.ax, 42);
	cr_assert_str_eq(e->out, "<time><time><print @m 0 1><print @m 5 2><exit>", "%s", e->out);
	map_int(e, "@after", NULL, &found);
	cr_assert_not(found);
	/* later runs do nothing, END still runs */
	cr_assert_eq(run(e, 0), LANG_RUN_EXIT);
	cr_assert_eq(e->exits, 1);
	cr_assert_eq(run(e, 1), 0);
	cr_assert_eq(scalar(e, "@end"), 1);
	env_free(e);
}

Test(lang_vm, positional_parameters)
{
	char *params[] = { "7", "name" };
	struct env *e = compile_with("BEGIN { @n = $1 + 1; @s = str($2); @missing = $3;"
				     " printf(\"%s|%s|%s\\n\", str($2), str($1), str($3)); }", 2, params, 0);
	struct lang_compile_opts o = { .filename = "stdin", .nparams = 2, .params = params };
	struct lang_error err;
	void *img = NULL;
	size_t len;

	run(e, 0);
	cr_assert_eq(scalar(e, "@n"), 8);
	cr_assert_eq(scalar(e, "@missing"), 0);
	cr_assert_str_eq(e->out, "name|7|\n", "%s", e->out);
	env_free(e);
	cr_assert_eq(lang_compile("BEGIN { printf(\"%d\\n\", $2); }", &o, &img, &len, &err), -EINVAL);
	cr_assert_str_eq(err.text, "stdin:1:24-26: ERROR: $2 used numerically but given \"name\". Try using str($2).\n"
			 "BEGIN { printf(\"%d\\n\", $2); }\n                       ~~\n", "%s", err.text);
}

Test(lang_vm, predicate_false_does_nothing)
{
	struct env *e = compile("uprobe:a:f /arg0 == 3/ { @hit = count(); } uprobe:a:g /pid != 99 && arg0/ { @x = 1; }");
	int found;

	e->regs.di = 2;
	run(e, 0);
	run(e, 1);
	map_int(e, "@hit", NULL, &found);
	cr_assert_not(found);
	map_int(e, "@x", NULL, &found);
	cr_assert_not(found);
	e->regs.di = 3;
	run(e, 0);
	cr_assert_eq(scalar(e, "@hit"), 1);
	env_free(e);
}

Test(lang_maps, full_map_drops_and_counts)
{
	struct env *e = compile_with("uprobe:a:f { @[arg0] = count(); }", 0, NULL, 5);
	int i;

	for (i = 0; i < 20; i++) {
		e->regs.di = (uint64_t)i;
		run(e, 0);
	}
	cr_assert_eq(map_count(e, "@"), 5);
	cr_assert_eq(lang_maps_dropped(&e->img, e->region, 0), 15);
	env_free(e);
}

/* A deleted key's slot stays counted until something claims it or needs
 * the room: new keys find the room wherever their hash puts them, and
 * the bound still holds once the live keys reach it. */
Test(lang_maps, deleted_keys_never_hold_a_map_full)
{
	struct env *e = compile_with("uprobe:a:f { @[arg0] = count(); } uprobe:a:g { delete(@[arg0]); }",
				     0, NULL, 4);
	uint64_t i;

	for (i = 0; i < 4; i++) {
		e->regs.di = i;
		run(e, 0);
	}
	for (i = 0; i < 4; i++) {
		e->regs.di = i;
		run(e, 1);
	}
	cr_assert_eq(map_count(e, "@"), 0);
	/* keys whose slots are elsewhere than the deleted ones */
	for (i = 1000; i < 1004; i++) {
		e->regs.di = i * 7919;
		run(e, 0);
	}
	cr_assert_eq(map_count(e, "@"), 4);
	cr_assert_eq(lang_maps_dropped(&e->img, e->region, 0), 0);
	e->regs.di = 5;
	run(e, 0);
	cr_assert_eq(map_count(e, "@"), 4);
	cr_assert_eq(lang_maps_dropped(&e->img, e->region, 0), 1);
	env_free(e);
}

/* The latency pattern deletes and re-creates each thread's key on every
 * call: any number of calls by more threads than the map holds at once,
 * none dropped, none left. */
Test(lang_maps, latency_pattern_reuses_its_slots)
{
	struct env *e = compile_with("uprobe:a:f { @s[tid] = nsecs; }"
				     " uretprobe:a:f /@s[tid]/ { @ns = hist(nsecs - @s[tid]);"
				     " delete(@s[tid]); }", 0, NULL, 3);

	for (uint64_t i = 0; i < 300; i++) {
		e->tid = 100 + i % 30;
		e->nsecs = 1000 + i;
		cr_assert_eq(run(e, 0), 0);
		e->nsecs = 1010 + i;
		cr_assert_eq(run(e, 1), 0);
	}
	cr_assert_eq(map_count(e, "@s"), 0);
	cr_assert_eq(lang_maps_dropped(&e->img, e->region, (unsigned)map_index(e, "@s")), 0);
	/* three at once fit, a fourth does not */
	for (uint64_t t = 0; t < 4; t++) {
		e->tid = 500 + t;
		cr_assert_eq(run(e, 0), 0);
	}
	cr_assert_eq(map_count(e, "@s"), 3);
	cr_assert_eq(lang_maps_dropped(&e->img, e->region, (unsigned)map_index(e, "@s")), 1);
	env_free(e);
}

static const uint64_t *keyless_value(struct env *e, const char *name, uint64_t *buf, int raw);

/* The latency pattern's start times as a map of thread values: each
 * thread with a shard keeps its own entry (written by it alone), which
 * the map's iteration gives after the slots' entries; a thread without
 * one uses a slot.  Only the pattern's two fast forms may use the map. */
Test(lang_maps, latency_starts_are_thread_values)
{
	struct env *e = compile("uprobe:a:f { @s[tid] = nsecs; }"
				" uretprobe:a:f /@s[tid]/ { @ns = hist(nsecs - @s[tid]);"
				" delete(@s[tid]); }");
	unsigned s = (unsigned)map_index(e, "@s");
	uint64_t buf[LANG_HIST_BUCKETS];
	const uint64_t *h;
	uint32_t shard = lang_maps_take_shard(e->region);

	cr_assert_neq(e->img.map_tval_off[s], 0);
	cr_assert_geq(e->img.map_tval_off[s], e->img.shards_off);
	cr_assert_leq(e->img.map_tval_off[s] + sizeof(struct lang_tval),
		      e->img.shards_off + e->img.shard_block);
	cr_assert_eq(shard, 1);
	/* thread 100 with the shard: its entry, then none once returned */
	e->ctx.shard = shard;
	e->nsecs = 5000;
	cr_assert_eq(run(e, 0), 0);
	cr_assert_eq(map_count(e, "@s"), 1);
	cr_assert_eq(map_val(e, "@s", 100), 5000);
	/* the slots hold nothing: the entry is the thread's, after them */
	{
		size_t pos = 0;
		const void *k, *v;

		cr_assert_eq(lang_map_next(&e->img, e->region, s, &pos, &k, &v), 1);
		cr_assert_gt(pos, e->img.map_cap[s]);
		cr_assert_eq(*(const uint64_t *)k, 100);
	}
	e->nsecs = 5300;
	cr_assert_eq(run(e, 1), 0);
	cr_assert_eq(map_count(e, "@s"), 0);
	h = keyless_value(e, "@ns", buf, 0);
	cr_assert(h);
	cr_assert_eq(h[lang_hist_index(300)], 1);
	/* a return without its entry finds nothing (the filter is false) */
	cr_assert_eq(run(e, 1), 0);
	cr_assert_eq(h[lang_hist_index(300)], 1);
	/* two threads in flight, one in its entry, one (no shard) in a slot */
	e->nsecs = 7000;
	cr_assert_eq(run(e, 0), 0);
	e->ctx.shard = 0;
	e->tid = 200;
	e->nsecs = 8000;
	cr_assert_eq(run(e, 0), 0);
	cr_assert_eq(map_count(e, "@s"), 2);
	cr_assert_eq(map_val(e, "@s", 100), 7000);
	cr_assert_eq(map_val(e, "@s", 200), 8000);
	e->nsecs = 8100;
	cr_assert_eq(run(e, 1), 0);
	cr_assert_eq(map_count(e, "@s"), 1);
	e->ctx.shard = shard;
	e->tid = 100;
	e->nsecs = 7050;
	cr_assert_eq(run(e, 1), 0);
	cr_assert_eq(map_count(e, "@s"), 0);
	h = keyless_value(e, "@ns", buf, 0);
	cr_assert_eq(h[lang_hist_index(100)], 1);
	cr_assert_eq(h[lang_hist_index(50)], 1);
	env_free(e);
}

/* `@[tid] = count()` counts in each thread's own entry of its shard (the
 * owner's add); a thread whose tid a dead thread had takes that thread's
 * entries over when it takes its shard, and a key that a slot holds too
 * (a thread without a shard) is listed once, with both counts. */
Test(lang_maps, counts_by_tid_are_thread_values)
{
	struct env *e = compile("uprobe:a:f { @[tid] = count(); }"
				" uprobe:a:g { @s[tid] = nsecs; }"
				" uretprobe:a:g /@s[tid]/ { @ns = hist(nsecs - @s[tid]); delete(@s[tid]); }");
	unsigned c = (unsigned)map_index(e, "@");
	uint32_t first, second;

	cr_assert_neq(e->img.map_tval_off[c], 0);
	first = lang_maps_take_thread_shard(&e->img, e->region, 100);
	cr_assert_eq(first, 1);
	e->ctx.shard = first;
	for (int i = 0; i < 5; i++)
		cr_assert_eq(run(e, 0), 0);
	e->nsecs = 4000;
	cr_assert_eq(run(e, 1), 0);	/* thread 100 in g when it dies */
	cr_assert_eq(map_count(e, "@"), 1);
	cr_assert_eq(map_val(e, "@", 100), 5);
	/* another thread, 101, in a shard of its own */
	e->ctx.shard = lang_maps_take_thread_shard(&e->img, e->region, 101);
	cr_assert_eq(e->ctx.shard, 2);
	e->tid = 101;
	cr_assert_eq(run(e, 0), 0);
	cr_assert_eq(map_count(e, "@"), 2);
	cr_assert_eq(map_val(e, "@", 101), 1);
	/* 100 again, a new thread: the dead one's count and start time are
	 * its own now, listed once */
	second = lang_maps_take_thread_shard(&e->img, e->region, 100);
	cr_assert_eq(second, 3);
	e->ctx.shard = second;
	e->tid = 100;
	for (int i = 0; i < 3; i++)
		cr_assert_eq(run(e, 0), 0);
	cr_assert_eq(map_count(e, "@"), 2);
	cr_assert_eq(map_val(e, "@", 100), 8);
	cr_assert_eq(map_count(e, "@s"), 1);
	cr_assert_eq(map_val(e, "@s", 100), 4000);
	e->nsecs = 4700;
	cr_assert_eq(run(e, 2), 0);
	cr_assert_eq(map_count(e, "@s"), 0);
	/* and 100 once more, without a shard: its slot's count and the
	 * entry's are one key */
	e->ctx.shard = 0;
	cr_assert_eq(run(e, 0), 0);
	cr_assert_eq(run(e, 0), 0);
	cr_assert_eq(map_count(e, "@"), 2);
	cr_assert_eq(map_val(e, "@", 100), 10);
	cr_assert_eq(map_val(e, "@", 101), 1);
	/* two entries of one live thread (a signal handler's hit took a
	 * shard while the thread took its own, and it kept the other): one
	 * key, both counts */
	e->tid = 300;
	e->ctx.shard = lang_maps_take_shard(e->region);
	cr_assert_eq(run(e, 0), 0);
	e->ctx.shard = lang_maps_take_shard(e->region);
	cr_assert_eq(run(e, 0), 0);
	cr_assert_eq(run(e, 0), 0);
	cr_assert_eq(map_count(e, "@"), 3);
	cr_assert_eq(map_val(e, "@", 300), 3);
	env_free(e);
}

/* What keeps the start times in the map's slots: any other use of the
 * map, another key or value, a key limit below the shards. */
Test(lang_maps, thread_values_only_for_the_pattern_alone)
{
	static const char *const other[] = {
		"uprobe:a:f { @s[tid] = nsecs; } uretprobe:a:f /@s[tid]/ { @ns = hist(nsecs - @s[tid]);"
		" delete(@s[tid]); } END { print(@s); }",
		"uprobe:a:f { @s[tid] = nsecs; } uretprobe:a:f /@s[tid]/ { @ns = hist(nsecs - @s[tid]);"
		" delete(@s[tid]); } uprobe:a:g { printf(\"%d\\n\", @s[tid]); }",
		"uprobe:a:f { @s[tid] = nsecs; } uretprobe:a:f /@s[tid]/ { @ns = hist(nsecs - @s[tid]);"
		" delete(@s[tid]); } interval:s:1 { clear(@s); }",
		"uprobe:a:f { @s[pid] = nsecs; } uretprobe:a:f /@s[pid]/ { @ns = hist(nsecs - @s[pid]);"
		" delete(@s[pid]); }",
		"uprobe:a:f { @s[tid] = elapsed; } uretprobe:a:f /@s[tid]/ { @ns = hist(nsecs - @s[tid]);"
		" delete(@s[tid]); }",
		"uprobe:a:f { @s[tid] = nsecs; } uprobe:a:g { @s[tid] = 5; }",
		/* counts: another key, another use, an aggregation's code */
		"uprobe:a:f { @s[tid] = count(); } uprobe:a:g { @s[pid] = count(); }",
		"uprobe:a:f { @s[tid] = count(); } uprobe:a:g { delete(@s[tid]); }",
		"uprobe:a:f { @s[tid] = count(); } END { print(@s, 3); }",
		"uprobe:a:f { @s[tid] = count(); } uprobe:a:g { @s[tid] = count(); @n = count(); }",
	};

	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
		struct env *e = compile(other[i]);

		cr_assert_eq(e->img.map_tval_off[map_index(e, "@s")], 0, "%s", other[i]);
		env_free(e);
	}
	{
		struct env *e = compile_with("uprobe:a:f { @s[tid] = nsecs; } uretprobe:a:f"
					     " /@s[tid]/ { @ns = hist(nsecs - @s[tid]);"
					     " delete(@s[tid]); }", 0, NULL, LANG_SHARDS - 1);

		cr_assert_eq(e->img.map_tval_off[map_index(e, "@s")], 0);
		env_free(e);
	}
}

Test(lang_maps, delete_frees_a_key_for_another)
{
	struct env *e = compile_with("uprobe:a:f { @[arg0] = count(); } uprobe:a:g { delete(@[arg0]); }", 0, NULL, 2);
	uint64_t i;

	for (i = 0; i < 100; i++) {
		e->regs.di = i;
		run(e, 0);
		run(e, 1);
	}
	cr_assert_eq(map_count(e, "@"), 0);
	cr_assert_eq(lang_maps_dropped(&e->img, e->region, 0), 0);
	e->regs.di = 1;
	run(e, 0);
	e->regs.di = 2;
	run(e, 0);
	cr_assert_eq(map_count(e, "@"), 2);
	env_free(e);
}

Test(lang_maps, clear_and_zero)
{
	struct env *e = compile("uprobe:a:f { @[arg0] = count(); @n = count(); }");
	int m = map_index(e, "@");
	int64_t k = 3;

	e->regs.di = 3;
	run(e, 0);
	run(e, 0);
	lang_map_zero(&e->img, e->region, (unsigned)m);
	cr_assert_eq(map_val(e, "@", 3), 0);
	lang_map_clear(&e->img, e->region, (unsigned)m);
	cr_assert_eq(map_count(e, "@"), 0);
	run(e, 0);
	cr_assert_eq(map_val(e, "@", k), 1);
	lang_map_clear(&e->img, e->region, (unsigned)map_index(e, "@n"));
	cr_assert_eq(map_count(e, "@n"), 0);
	env_free(e);
}

struct thr {
	struct env *e;
	uint64_t tid;
};

static void *count_thread(void *arg)
{
	struct thr *t = arg;
	struct env local;
	int i;

	/* each thread its own context and registers, shared image and maps */
	memcpy(&local, t->e, sizeof(local));
	local.tid = t->tid;
	local.ctx.regs = &local.regs;
	local.ctx.arg = &local;
	for (i = 0; i < 20000; i++) {
		local.regs.di = (uint64_t)(i % 7);
		lang_run(&t->e->img, 0, &local.ctx);
	}
	return NULL;
}

Test(lang_maps, concurrent_updates_add_up, .timeout = 60)
{
	struct env *e = compile("uprobe:a:f { @[tid] = count(); @n = count(); @k[arg0] = count(); @h = hist(arg0);"
				" @s = sum(arg0); }");
	pthread_t th[8];
	struct thr t[8];
	int i;
	int64_t total = 0;

	for (i = 0; i < 8; i++) {
		t[i].e = e;
		t[i].tid = 1000 + (uint64_t)i;
		cr_assert_eq(pthread_create(&th[i], NULL, count_thread, &t[i]), 0);
	}
	for (i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < 8; i++)
		cr_assert_eq(map_val(e, "@", 1000 + i), 20000);
	cr_assert_eq(scalar(e, "@n"), 160000);
	for (i = 0; i < 7; i++)
		total += map_val(e, "@k", i);
	cr_assert_eq(total, 160000);
	cr_assert_eq(map_count(e, "@k"), 7);
	env_free(e);
}

/* ---- per-thread shards of the keyless aggregations ---- */

#define SHARD_THREADS (LANG_SHARDS + 16)
#define SHARD_RUNS 3000

struct shard_thr {
	struct env *e;
	uint32_t shard;
	pthread_barrier_t *go;
};

static void *shard_thread(void *arg)
{
	struct shard_thr *t = arg;
	struct env local;

	memcpy(&local, t->e, sizeof(local));
	local.ctx.regs = &local.regs;
	local.ctx.arg = &local;
	t->shard = lang_maps_take_shard(t->e->region);
	local.ctx.shard = t->shard;
	pthread_barrier_wait(t->go);
	for (int i = 0; i < SHARD_RUNS; i++) {
		local.regs.di = (uint64_t)(i % 9);
		lang_run(&t->e->img, 0, &local.ctx);
		lang_run(&t->e->img, 1, &local.ctx);
	}
	return NULL;
}

/* The value of keyless map name as the tool reads it (lang_map_value),
 * into buf; NULL when it is not live. */
static const uint64_t *keyless_value(struct env *e, const char *name, uint64_t *buf, int raw)
{
	unsigned m = (unsigned)map_index(e, name);
	size_t pos = 0;
	const void *k, *v;

	if (!lang_map_next(&e->img, e->region, m, &pos, &k, &v))
		return NULL;
	return raw ? v : lang_map_value(&e->img, e->region, m, v, buf);
}

/* The word after a sharded hist's buckets in shard s: its late sample. */
static uint64_t *hist_late_word(struct env *e, unsigned m, uint32_t s)
{
	return (uint64_t *)((uint8_t *)e->region + e->img.map_shard_off[m] +
			    (size_t)(s - 1) * e->img.map_shard_stride[m]) +
	       LANG_HIST_BUCKETS;
}

/* The latency pattern's samples, added a sample late in each thread's
 * shard: a reader counts each shard's late sample in its bucket, zero()
 * and clear() take it away with the rest, a thread without a shard adds
 * at once, and a late word out of range (which no writer stores) counts
 * nowhere and is dropped by the next sample. */
Test(lang_maps, hist_late_samples_are_counted)
{
	struct env *e = compile("uprobe:a:f { @s[tid] = nsecs; }"
				" uretprobe:a:f /@s[tid]/ { @ns = hist(nsecs - @s[tid]);"
				" delete(@s[tid]); }");
	unsigned h = (unsigned)map_index(e, "@ns");
	uint32_t s1 = lang_maps_take_shard(e->region), s2 = lang_maps_take_shard(e->region);
	uint64_t buf[LANG_HIST_BUCKETS];
	const uint64_t *v;

	cr_assert(e->img.map_shard_off[h] && s1 && s2 && s1 != s2);
	cr_assert_leq(e->img.map_shard_off[h] + 8 * (LANG_HIST_BUCKETS + 1),
		      e->img.shards_off + e->img.shard_block);
	lang_map_hist_add_late(&e->img, e->region, h, s1, 3);
	cr_assert_eq(*hist_late_word(e, h, s1), 4);
	v = keyless_value(e, "@ns", buf, 0);
	cr_assert(v);
	cr_assert_eq(v[3], 1);	/* the late one alone */
	lang_map_hist_add_late(&e->img, e->region, h, s1, 3);
	lang_map_hist_add_late(&e->img, e->region, h, s1, 5);
	lang_map_hist_add_late(&e->img, e->region, h, s2, 5);
	lang_map_hist_add_late(&e->img, e->region, h, 0, 5);
	v = keyless_value(e, "@ns", buf, 0);
	cr_assert_eq(v[3], 2);
	cr_assert_eq(v[5], 3);
	lang_map_zero(&e->img, e->region, h);
	v = keyless_value(e, "@ns", buf, 0);
	for (int i = 0; i < LANG_HIST_BUCKETS; i++)
		cr_assert_eq(v[i], 0, "bucket %d", i);
	/* s1's late 5 lands in its bucket now, under the base */
	lang_map_hist_add_late(&e->img, e->region, h, s1, 7);
	v = keyless_value(e, "@ns", buf, 0);
	cr_assert_eq(v[5], 0);
	cr_assert_eq(v[7], 1);
	lang_map_clear(&e->img, e->region, h);
	cr_assert_eq(map_count(e, "@ns"), 0);
	lang_map_hist_add_late(&e->img, e->region, h, s2, 1);
	v = keyless_value(e, "@ns", buf, 0);
	cr_assert(v);
	cr_assert_eq(v[1], 1);
	cr_assert_eq(v[5], 0);
	cr_assert_eq(v[7], 0);
	*hist_late_word(e, h, s2) = 1000;
	v = keyless_value(e, "@ns", buf, 0);
	cr_assert_eq(v[1], 0);	/* s2's late 1 overwritten: gone, nothing else counted */
	lang_map_hist_add_late(&e->img, e->region, h, s2, 2);
	v = keyless_value(e, "@ns", buf, 0);
	cr_assert_eq(v[2], 1);
	for (int i = 0; i < LANG_HIST_BUCKETS; i++)
		cr_assert_leq(v[i], 1, "bucket %d", i);
	env_free(e);
}

struct late_race {
	struct env *e;
	unsigned m;
	uint32_t shard;
	volatile int started, stop;
	uint64_t runs;
};

static void *late_race_writer(void *arg)
{
	struct late_race *r = arg;

	r->started = 1;
	for (r->runs = 0; !r->stop; r->runs++)
		lang_map_hist_add_late(&r->e->img, r->e->region, r->m, r->shard,
				       (unsigned)(r->runs % LANG_HIST_BUCKETS));
	return NULL;
}

/* clear() and zero() racing with a thread that adds its samples a sample
 * late: no bucket ever reads below its base (a sample counted twice by a
 * clear would make it -1, read as huge), and every sample is in the
 * buckets or the late word once. */
Test(lang_maps, hist_late_samples_race_clears, .timeout = 60)
{
	struct env *e = compile("uprobe:a:f { @s[tid] = nsecs; }"
				" uretprobe:a:f /@s[tid]/ { @ns = hist(nsecs - @s[tid]);"
				" delete(@s[tid]); }");
	struct late_race r = { .e = e, .m = (unsigned)map_index(e, "@ns"),
			       .shard = lang_maps_take_shard(e->region) };
	uint64_t buf[LANG_HIST_BUCKETS], held = 0;
	const int64_t *sv;
	const uint64_t *v;
	pthread_t th;

	cr_assert(e->img.map_shard_off[r.m] && r.shard);
	cr_assert_eq(pthread_create(&th, NULL, late_race_writer, &r), 0);
	while (!r.started)
		sched_yield();
	for (int round = 0; round < 3000; round++) {
		if (round & 1)
			lang_map_clear(&e->img, e->region, r.m);
		else
			lang_map_zero(&e->img, e->region, r.m);
		v = keyless_value(e, "@ns", buf, 0);
		for (int i = 0; v && i < LANG_HIST_BUCKETS; i++)
			cr_assert_lt(v[i], 1ull << 40, "bucket %d reads %lu after a clear", i,
				     (unsigned long)v[i]);
		if (round % 64 == 0)
			sched_yield();
	}
	r.stop = 1;
	pthread_join(th, NULL);
	sv = (const int64_t *)hist_late_word(e, r.m, r.shard) - LANG_HIST_BUCKETS;
	for (int i = 0; i < LANG_HIST_BUCKETS; i++)
		held += (uint64_t)sv[i];
	held += *hist_late_word(e, r.m, r.shard) != 0;
	cr_assert_eq(held, r.runs, "the shard holds %lu of %lu samples", (unsigned long)held,
		     (unsigned long)r.runs);
	env_free(e);
}

/* More threads than shards: the first LANG_SHARDS get one, the others add
 * to the map's slot with locked adds, and every update is there once. */
Test(lang_maps, shards_run_out_to_the_locked_path, .timeout = 60)
{
	/* probe 0 is a fast form (the interpreter's run_fast), probe 1 the
	 * general code (MAP_AGG) */
	struct env *e = compile("uprobe:a:f { @n = count(); }"
				" uprobe:a:g { @h = hist(arg0); @s = sum(arg0); @a = avg(arg0);"
				" @l = lhist(arg0, 0, 10, 2); @c = count(); }");
	static struct shard_thr t[SHARD_THREADS];
	pthread_t th[SHARD_THREADS];
	pthread_barrier_t go;
	uint64_t buf[LANG_HIST_BUCKETS];
	const uint64_t *b;
	unsigned with = 0, n = (unsigned)SHARD_THREADS * SHARD_RUNS, fallback;
	int i;

	for (i = 0; i < (int)e->img.hdr->nmaps; i++)
		cr_assert_neq(e->img.map_shard_off[i], 0, "map %d not sharded", i);
	pthread_barrier_init(&go, NULL, SHARD_THREADS);
	for (i = 0; i < SHARD_THREADS; i++) {
		t[i].e = e;
		t[i].go = &go;
		cr_assert_eq(pthread_create(&th[i], NULL, shard_thread, &t[i]), 0);
	}
	for (i = 0; i < SHARD_THREADS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&go);
	for (i = 0; i < SHARD_THREADS; i++)
		with += t[i].shard != 0;
	cr_assert_eq(with, LANG_SHARDS);
	fallback = n - LANG_SHARDS * SHARD_RUNS;
	cr_assert_eq(scalar(e, "@n"), n);
	cr_assert_eq(scalar(e, "@c"), n);
	/* the slot holds the locked path's share only */
	cr_assert_eq(keyless_value(e, "@n", buf, 1)[0], fallback);
	cr_assert_eq(keyless_value(e, "@c", buf, 1)[0], fallback);
	/* i % 9 over 3000 runs: 334 each of 0..2, 333 of 3..8 */
	cr_assert_eq(scalar(e, "@s"), (int64_t)SHARD_THREADS * (334 * 3 + 333 * (3 + 4 + 5 + 6 + 7 + 8)));
	b = keyless_value(e, "@h", buf, 0);
	cr_assert(b);
	cr_assert_eq(b[1], SHARD_THREADS * 334u);		/* 0 */
	cr_assert_eq(b[2], SHARD_THREADS * 334u);		/* 1 */
	cr_assert_eq(b[3], SHARD_THREADS * (334u + 333));	/* 2, 3 */
	cr_assert_eq(b[4], SHARD_THREADS * 333u * 4);		/* 4..7 */
	cr_assert_eq(b[5], SHARD_THREADS * 333u);		/* 8 */
	b = keyless_value(e, "@l", buf, 0);
	cr_assert(b);
	cr_assert_eq(b[1], SHARD_THREADS * 668u);		/* [0, 2) */
	cr_assert_eq(b[5], SHARD_THREADS * 333u);		/* [8, 10) */
	b = keyless_value(e, "@a", buf, 0);
	cr_assert_eq(b[0], n);
	env_free(e);
}

/* clear() and zero() of a sharded map move its base: what was counted
 * before reads as gone, what comes after counts, whichever shard (or the
 * slot) it went to. */
Test(lang_maps, sharded_clear_and_zero)
{
	struct env *e = compile("uprobe:a:f { @n = count(); @h = hist(arg0); }");
	unsigned n = (unsigned)map_index(e, "@n"), h = (unsigned)map_index(e, "@h");
	uint32_t s1 = lang_maps_take_shard(e->region), s2 = lang_maps_take_shard(e->region);
	uint64_t buf[LANG_HIST_BUCKETS];
	int i;

	cr_assert(e->img.map_shard_off[n] && e->img.map_shard_off[h]);
	cr_assert(s1 && s2 && s1 != s2);
	for (i = 0; i < 5; i++) {
		e->ctx.shard = i % 3 == 0 ? 0 : i % 3 == 1 ? s1 : s2;
		e->regs.di = 4;
		run(e, 0);
	}
	cr_assert_eq(scalar(e, "@n"), 5);
	lang_map_zero(&e->img, e->region, n);
	cr_assert_eq(scalar(e, "@n"), 0);	/* zero: still there, reading 0 */
	for (i = 0; i < 3; i++) {
		e->ctx.shard = i == 0 ? s2 : 0;
		run(e, 0);
	}
	cr_assert_eq(scalar(e, "@n"), 3);
	cr_assert_eq(keyless_value(e, "@h", buf, 0)[4], 8);
	lang_map_clear(&e->img, e->region, n);
	lang_map_clear(&e->img, e->region, h);
	cr_assert_eq(map_count(e, "@n"), 0);	/* clear: gone until updated */
	cr_assert_eq(map_count(e, "@h"), 0);
	e->ctx.shard = s1;
	e->regs.di = 1;
	run(e, 0);
	e->ctx.shard = 0;
	run(e, 0);
	cr_assert_eq(scalar(e, "@n"), 2);
	cr_assert_eq(keyless_value(e, "@h", buf, 0)[4], 0);
	cr_assert_eq(keyless_value(e, "@h", buf, 0)[2], 2);
	/* a program's own read of the map sums the shards too */
	env_free(e);
}

struct clear_race {
	struct env *e;
	uint32_t shard;
	volatile int started, stop;
	uint64_t runs;
};

static void *clear_race_writer(void *arg)
{
	struct clear_race *r = arg;
	struct env local;

	memcpy(&local, r->e, sizeof(local));
	local.ctx.regs = &local.regs;
	local.ctx.arg = &local;
	local.ctx.shard = r->shard;
	r->started = 1;
	for (r->runs = 0; !r->stop; r->runs++)
		lang_run(&r->e->img, 0, &local.ctx);
	return NULL;
}

/* clear() and zero() racing with a shard's writer never write the
 * writer's memory: every update stays counted in the slot and shards, and
 * the value after the last clear is what came after it (never more than
 * was counted: no update is taken away twice). */
Test(lang_maps, sharded_clear_races_writers, .timeout = 60)
{
	struct env *e = compile("uprobe:a:f { @n = count(); }");
	unsigned m = (unsigned)map_index(e, "@n");
	struct clear_race r = { .e = e, .shard = lang_maps_take_shard(e->region) };
	uint64_t buf[1], raw, base;
	const uint64_t *v;
	pthread_t th;

	cr_assert_eq(pthread_create(&th, NULL, clear_race_writer, &r), 0);
	while (!r.started)
		sched_yield();
	for (int round = 0; round < 3000; round++) {
		if (round & 1)
			lang_map_clear(&e->img, e->region, m);
		else
			lang_map_zero(&e->img, e->region, m);
		v = keyless_value(e, "@n", buf, 0);
		/* a sum below the base would wrap around: huge */
		cr_assert(!v || *v < (1ull << 40), "value %lu after a clear",
			  v ? (unsigned long)*v : 0ul);
		if (round % 64 == 0)
			sched_yield();
	}
	r.stop = 1;
	pthread_join(th, NULL);
	v = keyless_value(e, "@n", buf, 1);
	raw = v ? v[0] : 0;
	raw += ((uint64_t *)((char *)e->region + e->img.map_shard_off[m] +
			     (r.shard - 1) * (size_t)e->img.map_shard_stride[m]))[0];
	cr_assert_eq(raw, r.runs, "the slot and the shard hold %lu of %lu updates",
		     (unsigned long)raw, (unsigned long)r.runs);
	base = *(uint64_t *)((char *)e->region + e->img.map_base_off[m]);
	/* what the last clear or zero left is what came after it; the map
	 * may read empty only if nothing did, or if the one update after a
	 * clear was preempted between its look at the map's word and its add
	 * (it shows at the next update) */
	v = keyless_value(e, "@n", buf, 0);
	if (v)
		cr_assert_eq(*v, r.runs - base);
	else
		cr_assert_leq(r.runs - base, 1, "%lu updates hidden after a clear",
			      (unsigned long)(r.runs - base));
	env_free(e);
}

/* A count keyed by tid takes the owner's add only when no other probe
 * writes the map with another key (a thread's arg0 may be another's tid). */
Test(lang_maps, tid_owned_only_when_every_writer_keys_by_tid)
{
	struct env *e = compile("uprobe:a:f { @[tid] = count(); } uprobe:a:g { @[tid] = count(); }"
				" uprobe:a:h { @c[tid] = count(); } uprobe:a:i { @c[arg0] = count(); }"
				" uprobe:a:j { @d[tid] = count(); $x = 1; }");

	cr_assert(e->img.map_tid_owned[map_index(e, "@")]);
	cr_assert_not(e->img.map_tid_owned[map_index(e, "@c")]);
	cr_assert(e->img.map_tid_owned[map_index(e, "@d")]);	/* interpreted, by tid */
	e->tid = 7;
	run(e, 0);
	run(e, 1);
	e->regs.di = 7;
	run(e, 2);
	run(e, 3);
	cr_assert_eq(map_val(e, "@", 7), 2);
	cr_assert_eq(map_val(e, "@c", 7), 2);
	env_free(e);
	/* interpreted aggregations keyed by a tuple with tid in it, in the
	 * same part everywhere; elsewhere in another part, or not at all */
	e = compile("uprobe:a:f { @t[tid, arg0] = count(); @u[arg0, tid] = sum(arg1); $x = 1; }"
		    " uprobe:a:g { @t[tid, 5] = count(); @u[tid, arg0] = sum(arg1); }"
		    " uprobe:a:h { @w[tid, comm] = hist(arg0); @v[pid, arg0] = count(); }");
	cr_assert(e->img.map_tid_owned[map_index(e, "@t")]);
	cr_assert_not(e->img.map_tid_owned[map_index(e, "@u")]);
	cr_assert(e->img.map_tid_owned[map_index(e, "@w")]);
	cr_assert_not(e->img.map_tid_owned[map_index(e, "@v")]);
	env_free(e);
}

/* A hit in a signal handler that interrupts the same thread's update of
 * its shard: both updates count, with no locked instruction. */
static struct env sig_env;
static volatile long sig_hits;

static void shard_on_signal(int sig)
{
	(void)sig;
	lang_run(&sig_env.img, 0, &sig_env.ctx);
	sig_hits++;
}

/* The worker runs the program back to back while a 20 us timer signals
 * it (the signal arrives at whatever instruction the timer interrupt
 * found), until 5000 handlers ran or 8 seconds passed. */
static void *sig_worker_main(void *arg)
{
	struct env *e = arg;
	struct env local;
	struct sigevent sev;
	struct itimerspec its = { { 0, 20000 }, { 0, 20000 } };
	timer_t timer;
	time_t end = time(NULL) + 8;
	uint64_t sum = 0, *out = malloc(2 * sizeof(uint64_t));
	long runs;

	memcpy(&local, e, sizeof(local));
	local.ctx.regs = &local.regs;
	local.ctx.arg = &local;
	local.ctx.shard = sig_env.ctx.shard;	/* this thread's, as the handler's */
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = SIGUSR2;
	sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	cr_assert_eq(timer_create(CLOCK_MONOTONIC, &sev, &timer), 0);
	cr_assert_eq(timer_settime(timer, 0, &its, NULL), 0);
	for (runs = 0; sig_hits < 5000 && ((runs & 0xffff) || time(NULL) < end); runs++) {
		local.regs.di = (uint64_t)(runs & 7);
		sum += local.regs.di;
		lang_run(&e->img, 0, &local.ctx);
	}
	timer_delete(timer);
	out[0] = (uint64_t)runs;
	out[1] = sum;
	return out;
}

Test(lang_maps, shard_update_exact_under_signals, .timeout = 60)
{
	struct env *e = compile("uprobe:a:f { @n = count(); @h = hist(arg0); @s = sum(arg0); }");
	struct sigaction sa;
	uint64_t buf[LANG_HIST_BUCKETS], total = 0, *res;
	const uint64_t *h;
	long hits;
	pthread_t th;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = shard_on_signal;
	sa.sa_flags = SA_RESTART;
	cr_assert_eq(sigaction(SIGUSR2, &sa, NULL), 0);
	memcpy(&sig_env, e, sizeof(sig_env));
	sig_env.ctx.regs = &sig_env.regs;
	sig_env.ctx.arg = &sig_env;
	sig_env.ctx.shard = lang_maps_take_shard(e->region);
	sig_env.regs.di = 100;
	cr_assert(sig_env.ctx.shard);
	cr_assert_eq(pthread_create(&th, NULL, sig_worker_main, e), 0);
	pthread_join(th, (void **)&res);
	hits = sig_hits;
	cr_assert_gt(hits, 1000, "only %ld signals handled", hits);
	cr_assert_eq(scalar(e, "@n"), (int64_t)res[0] + hits, "%lu runs, %ld in handlers",
		     (unsigned long)res[0], hits);
	h = keyless_value(e, "@h", buf, 0);
	for (unsigned k = 0; k < LANG_HIST_BUCKETS; k++)
		total += h[k];
	cr_assert_eq(total, res[0] + (uint64_t)hits);
	cr_assert_eq((uint64_t)scalar(e, "@s"), res[1] + 100 * (uint64_t)hits);
	free(res);
	env_free(e);
}

/* BEGIN programs and what bpftrace 0.17 printed for them (run once with
 * its positional parameters 7 and name, recorded here). */
static const struct { const char *src, *out; } oracle[] = {
	{ "BEGIN { printf(\"%d %u %x %X %o %5d|%-5d|%05d %ld %lu %lx\\n\", -2, -2, 255, 255, 8, 42, 42, 42, -2, -2, -2); }",
	  "-2 4294967294 ff FF 10    42|42   |00042 -2 18446744073709551614 fffffffffffffffe\n" },
	{ "BEGIN { printf(\"%hd %hhd %hu %hhu %c%c\\n\", 70000, 300, -1, -1, 72, 105); }",
	  "4464 44 65535 255 Hi\n" },
	{ "BEGIN { printf(\"%s|%10s|%-10s|%.2s\\n\", \"abc\", \"abc\", \"abc\", \"abc\"); }",
	  "abc|       abc|abc       |ab\n" },
	{ "BEGIN { printf(\"100%%\\n\"); printf(\"%d%%\\n\", 5); printf(\"a%%b %d\\n\", 1); }",
	  "100%%\n5%%\na%b 1\n" },
	{ "BEGIN { $a = (uint8)300; $b = (int8)200; $c = (int16)70000; $d = (uint32)-1; printf(\"%d %d %d %lu\\n\", $a, $b, $c, $d); }",
	  "44 -56 4464 4294967295\n" },
	{ "BEGIN { $i = 0; while ($i < 5) { $i++; if ($i == 2) { continue; } printf(\"i=%d\\n\", $i); if ($i == 4) { break; } } }",
	  "i=1\ni=3\ni=4\n" },
	{ "BEGIN { $s = \"hello\"; if ($s == \"hello\") { printf(\"eq\\n\"); } if ($s != \"world\") { printf(\"ne\\n\"); } }",
	  "eq\nne\n" },
	{ "BEGIN { printf(\"%d %d %d\\n\", 1 < 2, 2 < 1, -1 < 0); printf(\"%d %d\\n\", 1 && 0, 1 || 0); printf(\"%d %d\\n\", !5, ~0); }",
	  "1 0 1\n0 1\n0 -1\n" },
	{ "BEGIN { printf(\"%d\\n\", 5 > 3 ? 10 : 20); printf(\"%s\\n\", 1 ? \"yes\" : \"no\"); }",
	  "10\nyes\n" },
	{ "BEGIN { printf(\"%d\\n\", 0xff & 0x0f | 0x30 ^ 0x01); printf(\"%d\\n\", 1 + 2 * 3 - 4 / 2); printf(\"%lld\\n\", 1 << 40); }",
	  "63\n5\n1099511627776\n" },
	{ "BEGIN { $x = -5; printf(\"%d %u\\n\", $x >> 1, $x); $y = 8; printf(\"%d\\n\", $y >> 1); }",
	  "-3 4294967291\n4\n" },
	{ "BEGIN { printf(\"%d %d\\n\", 7 / 0, 7 % 0); }",
	  "0 0\n" },
	{ "BEGIN { @m[1] = 10; @m[2] = 20; printf(\"%d %d %d\\n\", @m[1], @m[2], @m[3]); delete(@m[1]); printf(\"%d\\n\", @m[1]); }",
	  "10 20 0\n0\n" },
	{ "BEGIN { @s[\"a\"] = 1; @s[\"b\"] = 2; printf(\"%d %d\\n\", @s[\"a\"], @s[\"b\"]); }",
	  "1 2\n" },
	{ "BEGIN { printf(\"%-8s|%8d|\\n\", \"ab\", -12); printf(\"%x %X\\n\", 3054, 3054); }",
	  "ab      |     -12|\nbee BEE\n" },
	{ "BEGIN { print(5); print(\"str\"); }",
	  "5\nstr\n" },
	{ "BEGIN { $x = 1; if ($x) { printf(\"a\\n\"); } else { printf(\"b\\n\"); } if (!$x) { printf(\"c\\n\"); } else if ($x == 1) { printf(\"d\\n\"); } else { printf(\"e\\n\"); } }",
	  "a\nd\n" },
	{ "BEGIN { printf(\"%d\\n\", (int8)-1 < (int8)1); printf(\"%d\\n\", (uint64)-1 > 1); }",
	  "1\n1\n" },
	{ "BEGIN { printf(\"%p\\n\", 4096); printf(\"%p\\n\", 0); }",
	  "0x1000\n(nil)\n" },
	{ "BEGIN { printf(\"%d %s %s\\n\", $1, str($2), str($1)); }",
	  "7 name 7\n" },
	{ "BEGIN { $x = 10; $y = 3; printf(\"%d %d %d %d %d\\n\", $x / $y, $x % $y, -$x / $y, -$x % $y, $x << 2); }",
	  "3 1 1431655762 0 40\n" },
	{ "BEGIN { unroll(3) { @c++; printf(\"c=%d\\n\", @c); } }",
	  "c=1\nc=2\nc=3\n" },
	{ "BEGIN { @x = 5; @x += 3; @x -= 1; @x *= 2; printf(\"%d\\n\", @x); @y++; @y++; printf(\"%d\\n\", @y--); printf(\"%d\\n\", @y); }",
	  "14\n2\n1\n" },
	{ "BEGIN { $a = 0x7fffffffffffffff; printf(\"%ld %ld %lu\\n\", $a + 1, $a * 2, -1); printf(\"%d %x\\n\", 4294967296 + 5, -1); }",
	  "-9223372036854775808 -2 18446744073709551615\n5 ffffffff\n" },
	{ "BEGIN { $s = str($2); printf(\"[%s] [%5s] [%-6s]\\n\", $s, $s, $s); }",
	  "[name] [ name] [name  ]\n" },

};

Test(lang_vm, begin_programs_print_as_bpftrace)
{
	char *params[] = { "7", "name" };
	size_t i;

	for (i = 0; i < sizeof(oracle) / sizeof(oracle[0]); i++) {
		struct env *e = compile_with(oracle[i].src, 2, params, 0);

		run(e, 0);
		cr_assert_str_eq(e->out, oracle[i].out, "%s\ngave\n%s", oracle[i].src, e->out);
		env_free(e);
	}
}

/* ---- the verifier against corrupted images ---- */

static const char *const corpus[] = {
	"uprobe:a:f { @[tid] = count(); }",
	"uprobe:a:f /arg0 > 5/ { @h = hist(arg0); @l[comm] = lhist(arg1, 0, 100, 10); }",
	"uprobe:a:f { @s[tid] = nsecs; } uretprobe:a:f /@s[tid]/ { @ns = hist(nsecs - @s[tid]); delete(@s[tid]); }",
	"uprobe:a:f { $i = 0; while ($i < 5) { $i++; printf(\"%d %s\\n\", $i, str(arg0)); } @[ustack] = count(); }",
	"BEGIN { @x = 1; print(@x); clear(@x); time(); exit(); } END { printf(\"bye %s\\n\", comm); }",
	"interval:ms:10 { @v = avg(5); @m = min(3); @M = max(4); @st = stats(1); zero(@v); }",
	"uprobe:a:f { @p[probe, func] = count(); @u = usym(arg0); signal(9); override(0); @str = str(arg0, 5); }",
	"usdt:a:p:n /arg7 < 0/ { @[arg0, str(arg1)] = sum(arg2); } usdt:a:n { @c[arg3] = count(); }",
	"uprobe:a:f { @b[buf(arg0, arg1)] = count(); printf(\"%r %rx %rh %s\\n\", buf(\"ab\", 2), buf(arg0, 3),"
	" buf(arg0, arg2), strftime(\"%H\", nsecs)); @t = strftime(\"%f\", arg2); @s = strncmp(str(arg0),"
	" \"x\", 1) + sizeof(comm) + reg(\"sp\") + sarg1 + gid + rand + numaid;"
	" cat(\"/proc/%d/stat\", pid); join(arg3, \",\"); }",
	"uprobe:a:f { @n[arg0] = (arg1, (str(arg0), (func, 2))); $t = @n[arg0]; print($t.1);"
	" @i = $t.1.1; @s = sum($t.1.1.1); }",
};

static void *compile_corpus(size_t i, size_t *len)
{
	void *img = NULL;
	struct lang_error err;

	cr_assert_eq(lang_compile(corpus[i], NULL, &img, len, &err), 0, "%s", err.text);
	return img;
}

Test(lang_verify, accepts_compiled_images)
{
	size_t i, len;

	for (i = 0; i < sizeof(corpus) / sizeof(corpus[0]); i++) {
		void *img = compile_corpus(i, &len);
		struct lang_image li;
		char why[256];

		cr_assert_eq(lang_image_load(&li, img, len, why, sizeof(why)), 0, "%s: %s", corpus[i], why);
		free(img);
	}
}

static int load_copy(const void *img, size_t len, char *why)
{
	struct lang_image li;
	uint64_t *copy = malloc(len + 8);
	int r;

	memcpy(copy, img, len);
	r = lang_image_load(&li, copy, len, why, 256);
	free(copy);
	return r;
}

/* A fast filter is checked as the rest: its source, its compare, and
 * only on the forms that take one. */
Test(lang_verify, rejects_bad_fast_filters)
{
	static const char prog[] = "uprobe:a:f /arg0 == 1/ { @x = count(); }"
				   " uprobe:a:g { @s[tid] = nsecs; }"
				   " uprobe:a:h { @y = 1; }";
	struct lang_probe_desc *pd;
	struct lang_error err;
	struct lang_image li;
	void *img = NULL;
	char why[256];
	size_t len;

	cr_assert_eq(lang_compile(prog, NULL, &img, &len, &err), 0, "%s", err.text);
	cr_assert_eq(lang_image_load(&li, img, len, why, sizeof(why)), 0, "%s", why);
	pd = (struct lang_probe_desc *)li.probes;
	cr_assert_eq(pd[0].fast, LANG_FAST_COUNT_KEYLESS);
	cr_assert_eq(pd[0].pred, 1);
	cr_assert_eq(load_copy(img, len, why), 0, "%s", why);
	pd[0].pred_src = 0;
	cr_assert_eq(load_copy(img, len, why), -EINVAL, "a filter without a source");
	pd[0].pred_src = LANG_SRC_PROBE + 1;
	cr_assert_eq(load_copy(img, len, why), -EINVAL, "a filter's source out of range");
	pd[0].pred_src = LANG_SRC_ARG;
	pd[0].pred_arg = LANG_MAX_USDT_ARGS;
	cr_assert_eq(load_copy(img, len, why), -EINVAL, "a filter's argument out of range");
	pd[0].pred_arg = 0;
	pd[0].fast_cmp = LANG_OP_ADD;
	cr_assert_eq(load_copy(img, len, why), -EINVAL, "a filter that does not compare");
	pd[0].fast_cmp = LANG_OP_EQ;
	pd[0].fast = LANG_FAST_PRED_ONLY;
	pd[0].pred = 0;
	cr_assert_eq(load_copy(img, len, why), -EINVAL, "PRED_ONLY without its filter");
	pd[0].pred = 1;
	cr_assert_eq(load_copy(img, len, why), 0, "%s", why);
	pd[1].pred = 1;
	pd[1].pred_src = LANG_SRC_TID;
	pd[1].fast_cmp = LANG_OP_EQ;
	cr_assert_eq(load_copy(img, len, why), -EINVAL, "a filter on the latency form");
	pd[1].pred = 0;
	pd[2].pred = 1;
	pd[2].pred_src = LANG_SRC_TID;
	pd[2].fast_cmp = LANG_OP_EQ;
	cr_assert_eq(load_copy(img, len, why), -EINVAL, "a filter without a fast form");
	free(img);
}

/* Finds the first instruction with op in a compiled image. */
static struct lang_insn *find_op(void *img, int op)
{
	struct lang_image li;
	uint32_t i;

	cr_assert_eq(lang_image_load(&li, img, ((struct lang_image_hdr *)img)->total_len, NULL, 0), 0);
	for (i = 0; i < li.hdr->ninsns; i++)
		if (li.insns[i].op == op)
			return (struct lang_insn *)&li.insns[i];
	cr_assert_fail("no op %d", op);
	return NULL;
}

/* prog compiled, and its image accepted by the verifier. */
static void *compile_verified(const char *prog, size_t *len)
{
	struct lang_error err;
	void *img = NULL;
	char why[256];

	cr_assert_eq(lang_compile(prog, NULL, &img, len, &err), 0, "%s", err.text);
	cr_assert_eq(load_copy(img, *len, why), 0, "%s", why);
	return img;
}

/* reg(): a word of pt_regs, aligned and inside it. */
Test(lang_verify, rejects_bad_register_reads)
{
	static const char prog[] = "uprobe:a:f { @ = reg(\"sp\"); }";
	struct lang_insn *in;
	char why[256];
	size_t len;
	void *img = compile_verified(prog, &len);

	in = find_op(img, LANG_OP_REG);
	in->aux += 4;
	cr_assert_eq(load_copy(img, len, why), -EINVAL, "an unaligned register read");
	in->aux = sizeof(struct pt_regs);
	cr_assert_eq(load_copy(img, len, why), -EINVAL, "a read past pt_regs");
	in->aux = 0;
	in->imm = 2;
	cr_assert_eq(load_copy(img, len, why), -EINVAL, "a bad flag");
	in->imm = 1;
	cr_assert_eq(load_copy(img, len, why), 0, "%s", why);
	free(img);
}

/* join(): its record exactly LANG_JOIN_REC bytes, its delimiter a format. */
Test(lang_verify, rejects_bad_joins)
{
	static const char prog[] = "uprobe:a:f { join(arg0, \",\"); }";
	struct lang_insn *in, save;
	char why[256];
	size_t len;
	void *img = compile_verified(prog, &len);

	in = find_op(img, LANG_OP_EMIT);
	save = *in;
	cr_assert_eq(in->dst, LANG_EV_JOIN);
	in->imm = (int64_t)((uint64_t)(uint32_t)save.imm | ((uint64_t)(LANG_JOIN_REC - 8) << 32));
	cr_assert_eq(load_copy(img, len, why), -EINVAL, "a short record");
	*in = save;
	in->aux = 500;
	cr_assert_eq(load_copy(img, len, why), -EINVAL, "a bad delimiter format");
	*in = save;
	cr_assert_eq(load_copy(img, len, why), 0, "%s", why);
	free(img);
}

/* buf(): its destination, source and registers inside the image's. */
Test(lang_verify, rejects_bad_buffers)
{
	static const char prog[] = "uprobe:a:f { @m = buf(arg0, arg1); @s = buf(\"ab\", 2); }";
	struct lang_insn *in, save;
	char why[256];
	size_t len;
	void *img = compile_verified(prog, &len);

	in = find_op(img, LANG_OP_BUF);
	save = *in;
	cr_assert_eq(in->imm, -1, "the first reads memory");
	in->aux = LANG_MAX_STACK;
	cr_assert_eq(load_copy(img, len, why), -EINVAL, "a destination out of the scratch area");
	*in = save;
	in->b = 200;
	cr_assert_eq(load_copy(img, len, why), -EINVAL, "a length register out of range");
	*in = save;
	in->imm = LANG_MAX_STACK;
	cr_assert_eq(load_copy(img, len, why), -EINVAL, "a scratch source out of range");
	in->imm = -2;
	cr_assert_eq(load_copy(img, len, why), -EINVAL, "a bad source");
	*in = save;
	cr_assert_eq(load_copy(img, len, why), 0, "%s", why);
	free(img);
}

Test(lang_verify, rejects_targeted_corruptions)
{
	size_t len;
	void *img = compile_corpus(3, &len);
	struct lang_image_hdr *h = img;
	struct lang_insn *in, save;
	char why[256];

#define EXPECT_BAD(what)                                                            \
	do {                                                                        \
		cr_assert_eq(load_copy(img, len, why), -EINVAL, "accepted: %s", what); \
	} while (0)

	cr_assert_eq(load_copy(img, len, why), 0, "%s", why);
	h->magic ^= 1;
	EXPECT_BAD("magic");
	h->magic ^= 1;
	h->nregs = 0;
	EXPECT_BAD("no registers");
	h->nregs = LANG_MAX_REGS + 1;
	EXPECT_BAD("too many registers");
	h->nregs = 4;
	{
		struct lang_image li;

		cr_assert_eq(lang_image_load(&li, img, len, why, sizeof(why)), 0, "%s", why);
		h->nregs = (uint16_t)li.hdr->nregs;
	}
	h->stack_size = LANG_MAX_STACK + 8;
	EXPECT_BAD("stack");
	h->stack_size = 0;
	EXPECT_BAD("stack too small for the code");
	free(img);
	img = compile_corpus(3, &len);
	h = img;
	cr_assert_eq(load_copy(img, len - 8, why), -EINVAL);
	h->ninsns++;
	EXPECT_BAD("insn count");
	h->ninsns--;
	h->pool_len += 8;
	EXPECT_BAD("pool length");
	h->pool_len -= 8;

	in = find_op(img, LANG_OP_LOOP);
	save = *in;
	in->aux = save.aux + 1000;
	EXPECT_BAD("loop target outside");
	*in = save;
	in = find_op(img, LANG_OP_JZ);
	save = *in;
	in->aux = 0;
	EXPECT_BAD("backward conditional jump");
	in->aux = 1u << 30;
	EXPECT_BAD("jump out of range");
	in->a = 200;
	in->aux = save.aux;
	EXPECT_BAD("register out of range");
	*in = save;
	in = find_op(img, LANG_OP_EMIT);
	save = *in;
	in->aux = 77;
	EXPECT_BAD("format index");
	in->aux = save.aux;
	in->imm = (int64_t)(8000ull | (8ull << 32));
	EXPECT_BAD("event data out of the scratch area");
	in->imm = save.imm;
	in->dst = 99;
	EXPECT_BAD("event type");
	*in = save;
	in = find_op(img, LANG_OP_MAP_AGG);
	save = *in;
	in->b = 50;
	EXPECT_BAD("map index");
	in->b = save.b;
	in->aux = 1u << 20;
	EXPECT_BAD("key offset");
	*in = save;
	in = find_op(img, LANG_OP_USTACK);
	save = *in;
	in->imm = 1000;
	EXPECT_BAD("ustack frames");
	*in = save;
	in = find_op(img, LANG_OP_RET);
	save = *in;
	in->op = LANG_OP_MOVI;
	EXPECT_BAD("no RET at the end");
	in->op = 250;
	EXPECT_BAD("opcode");
	*in = save;
	cr_assert_eq(load_copy(img, len, why), 0, "%s", why);
	free(img);
#undef EXPECT_BAD
}

Test(lang_verify, rejects_bad_descriptors)
{
	size_t len;
	void *img = compile_corpus(1, &len);
	struct lang_image li;
	struct lang_map_desc *md;
	struct lang_probe_desc *pd;
	char why[256];

	cr_assert_eq(lang_image_load(&li, img, len, why, sizeof(why)), 0);
	md = (struct lang_map_desc *)li.maps;
	pd = (struct lang_probe_desc *)li.probes;
	md[1].lhist_step = 0;
	cr_assert_eq(load_copy(img, len, why), -EINVAL);
	md[1].lhist_step = 10;
	md[1].max_keys = 0;
	cr_assert_eq(load_copy(img, len, why), -EINVAL);
	md[1].max_keys = 4096;
	md[1].key_size = 8;
	cr_assert_eq(load_copy(img, len, why), -EINVAL);
	md[1].key_size = LANG_STRLEN;
	md[0].kind = 99;
	cr_assert_eq(load_copy(img, len, why), -EINVAL);
	md[0].kind = LANG_M_HIST;
	pd[0].fast = LANG_FAST_COUNT_KEYLESS;
	pd[0].fast_map = 0;
	cr_assert_eq(load_copy(img, len, why), -EINVAL, "count fast form on a hist map");
	pd[0].fast = LANG_FAST_PRED_ONLY;
	pd[0].fast_cmp = LANG_OP_ADD;
	cr_assert_eq(load_copy(img, len, why), -EINVAL);
	pd[0].fast = LANG_FAST_DELTA_HIST;
	pd[0].fast_src = LANG_SRC_TID;
	pd[0].fast_src2 = LANG_SRC_NSECS;
	pd[0].fast_map2 = 200;
	cr_assert_eq(load_copy(img, len, why), -EINVAL, "start map out of range");
	pd[0].fast_map2 = 0;
	cr_assert_eq(load_copy(img, len, why), -EINVAL, "start map not an integer map");
	pd[0].fast = LANG_FAST_STORE_KEY;
	cr_assert_eq(load_copy(img, len, why), -EINVAL, "store form on a hist map");
	pd[0].fast = LANG_FAST_PRED_ONLY;
	pd[0].fast_cmp = LANG_OP_GT;
	pd[0].ncode = 0;
	cr_assert_eq(load_copy(img, len, why), -EINVAL);
	pd[0].ncode = 1u << 31;
	cr_assert_eq(load_copy(img, len, why), -EINVAL);
	free(img);
}

/* ---- fuzzing (bounded) ---- */

static uint64_t rng_state = 0x1234567;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static int64_t fuzz_get_zero(void)
{
	return 0;
}

/* Runs every probe of an accepted image against hostile registers: the
 * verifier's word must be enough for the VM to stay in bounds. */
static int run_all(void *copy, size_t len)
{
	struct lang_image li;
	struct env *e;
	void *region;
	unsigned p;

	if (lang_image_load(&li, copy, len, NULL, 0))
		return 0;
	if (li.region_size > (1u << 20))
		return 0;	/* verified; too large to run here */
	region = calloc(1, li.region_size);
	cr_assert(region);
	lang_maps_init(&li, region, li.region_size);
	e = calloc(1, sizeof(*e));
	e->img = li;
	e->region = region;
	e->ctx.regs = &e->regs;
	e->ctx.maps = region;
	e->ctx.ops = &ops;
	e->ctx.arg = e;
	e->regs.di = (uint64_t)fuzz_get_zero() + 8;	/* a bad pointer */
	e->regs.si = (uint64_t)(uintptr_t)"fuzz";
	for (p = 0; p < li.hdr->nprobes; p++)
		lang_run(&li, p, &e->ctx);
	free(e);
	free(region);
	return 1;
}

Test(lang_fuzz, verifier_on_mutated_images, .timeout = 120)
{
	size_t i, len;
	int round, ran = 0, tried = 0;

	for (i = 0; i < sizeof(corpus) / sizeof(corpus[0]); i++) {
		void *img = compile_corpus(i, &len);
		uint64_t *copy = malloc(len + 8);

		for (round = 0; round < 700; round++) {
			int flips = 1 + (int)(rnd() % 4), f;

			memcpy(copy, img, len);
			for (f = 0; f < flips; f++) {
				size_t at = rnd() % len;

				switch (rnd() % 3) {
				case 0: ((uint8_t *)copy)[at] ^= (uint8_t)(1u << (rnd() % 8)); break;
				case 1: ((uint8_t *)copy)[at] = (uint8_t)rnd(); break;
				default: ((uint8_t *)copy)[at] = (uint8_t)(rnd() % 4 == 0 ? 0xff : 0); break;
				}
			}
			ran += run_all(copy, len);
			tried++;
		}
		/* truncations and random bytes */
		for (round = 0; round < 200; round++) {
			size_t cut = rnd() % len;
			struct lang_image li;

			memcpy(copy, img, len);
			cr_assert_neq(lang_image_load(&li, copy, cut, NULL, 0), 0);
			for (size_t k = 0; k < len; k++)
				((uint8_t *)copy)[k] = (uint8_t)rnd();
			lang_image_load(&li, copy, len, NULL, 0);
		}
		free(copy);
		free(img);
	}
	/* enough mutants pass (operands and strings still in range) to
	 * exercise the interpreter on what the verifier let through */
	cr_assert_gt(ran, tried / 20, "%d of %d ran", ran, tried);
	cr_assert_lt(ran, tried, "%d of %d ran", ran, tried);
}

static const char *const fragments[] = {
	"BEGIN", "END", "uprobe:a:f", "uretprobe:a:f", "interval:s:1", "{", "}", "(", ")", "[", "]",
	"/", ";", ",", "@", "@x", "@y[", "$a", "$b", "=", "+=", "++", "--", "+", "-", "*", "%", "<<",
	">>", "==", "!=", "<", ">=", "&&", "||", "!", "~", "?", ":", "1", "0", "-5", "0x10", "\"s\"",
	"\"%d\\n\"", "arg0", "arg1", "retval", "tid", "pid", "comm", "nsecs", "func", "probe",
	"ustack", "count()", "hist(", "lhist(", "sum(", "avg(", "min(", "max(", "stats(", "str(",
	"printf(", "print(", "delete(", "clear(", "exit()", "if", "else", "while", "unroll(3)",
	"(int8)", "(uint32 *)", "*(int64*)", "//c\n", "/*", "*/", "$1", "usym(", "signal(", "time(",
};

Test(lang_fuzz, compiler_on_random_and_mutated_programs, .timeout = 120)
{
	char src[512], *params[] = { "5", "x" };
	struct lang_compile_opts o = { .filename = "stdin", .nparams = 2, .params = params };
	int round, accepted = 0;
	size_t i;

	for (round = 0; round < 6000; round++) {
		struct lang_error err;
		void *img = NULL;
		size_t len = 0, n = 0;

		if (round % 2) {
			int k, parts = 1 + (int)(rnd() % 30);

			for (k = 0; k < parts && n < sizeof(src) - 40; k++)
				n += (size_t)snprintf(src + n, sizeof(src) - n, "%s ",
						      fragments[rnd() % (sizeof(fragments) / sizeof(fragments[0]))]);
		} else {
			const char *base = corpus[rnd() % (sizeof(corpus) / sizeof(corpus[0]))];
			int m, muts = 1 + (int)(rnd() % 3);

			n = strlen(base);
			memcpy(src, base, n + 1);
			for (m = 0; m < muts; m++) {
				size_t at = rnd() % n;

				switch (rnd() % 3) {
				case 0: src[at] = (char)(32 + rnd() % 95); break;
				case 1: memmove(src + at, src + at + 1, n - at); n--; break;
				default:
					if (n + 1 < sizeof(src)) {
						memmove(src + at + 1, src + at, n - at + 1);
						src[at] = "{}()[];/@$\"*"[rnd() % 12];
						n++;
					}
				}
			}
		}
		src[n] = 0;
		if (lang_compile(src, &o, &img, &len, &err) == 0) {
			uint64_t *copy = malloc(len + 8);

			accepted++;
			memcpy(copy, img, len);
			run_all(copy, len);
			free(copy);
			free(img);
		} else {
			cr_assert(!strncmp(err.text, "stdin:", 6), "%s -> %s", src, err.text);
			cr_assert_null(img);
		}
	}
	cr_assert_gt(accepted, 50);
	for (i = 0; i < sizeof(corpus) / sizeof(corpus[0]); i++) {
		struct lang_error err;
		void *img;
		size_t len;

		cr_assert_eq(lang_compile(corpus[i], &o, &img, &len, &err), 0);
		free(img);
	}
}

/* Numbers as bpftrace 0.17 reads them (checked against it): underscores
 * between digits, one-digit scientific literals up to e16, a leading 0
 * for octal; a script's "#!" line is skipped, as the tools in
 * /usr/sbin/ *.bt start with one. */
Test(lang_vm, literals_and_scripts_as_bpftrace_reads_them)
{
	struct env *e = compile(
		"#!/usr/bin/env bpftrace\n"
		"uprobe:a:f { @a = 1e6; @b = 1_000_000; @c = 010; @d = 0x1e3; @e = 3e1_0;"
		" @f = 1__0; @g = 1E6 / 1e3; @h = 0_10; @i = 9e16; @j = (nsecs - nsecs) / 1e6; }\n"
		"#!a line like it further on is skipped too\n");

	run(e, 0);
	cr_assert_eq(scalar(e, "@a"), 1000000);
	cr_assert_eq(scalar(e, "@b"), 1000000);
	cr_assert_eq(scalar(e, "@c"), 8);
	cr_assert_eq(scalar(e, "@d"), 0x1e3);
	cr_assert_eq(scalar(e, "@e"), 30000000000LL);
	cr_assert_eq(scalar(e, "@f"), 10);
	cr_assert_eq(scalar(e, "@g"), 1000);
	cr_assert_eq(scalar(e, "@h"), 8);
	cr_assert_eq(scalar(e, "@i"), 90000000000000000LL);
	cr_assert_eq(scalar(e, "@j"), 0);
	env_free(e);
}

Test(lang_errors, literals_as_bpftrace_words_them)
{
	expect_error("BEGIN { $x = 10e2; print($x); exit(); }",
		     "stdin:1:14-18: ERROR: Coefficient part of scientific literal must be in range "
		     "(0,9), got: 10\nBEGIN { $x = 10e2; print($x); exit(); }\n             ~~~~\n");
	expect_error("BEGIN { $x = 1e17; print($x); exit(); }",
		     "stdin:1:14-18: ERROR: Exponent will overflow integer range: 17\n"
		     "BEGIN { $x = 1e17; print($x); exit(); }\n             ~~~~\n");
	expect_error("BEGIN { $x = 08; print($x); exit(); }",
		     "stdin:1:14-16: ERROR: Found trailing non-numeric characters\n"
		     "BEGIN { $x = 08; print($x); exit(); }\n             ~~\n");
	expect_error_has("BEGIN { $x = 100_; }", "invalid integer literal");
	/* identifiers named as bpftrace's lexer classes them */
	expect_error_has("BEGIN { if count { } }", "syntax error, unexpected call, expecting (");
	expect_error_has("BEGIN { if pid { } }", "syntax error, unexpected builtin, expecting (");
	expect_error_has("BEGIN { @x = 1 arg3; }", "syntax error, unexpected builtin, expecting }");
	expect_error_has("BEGIN { @x = 1 ustack; }", "unexpected call_builtin, expecting }");
	expect_error_has("BEGIN { @x = 1 arg33; }", "unexpected identifier, expecting }");
	/* a stray token right after a block starts where its run starts */
	expect_error("BEGIN { exit(); }; END { }",
		     "stdin:1:17-19: ERROR: syntax error, unexpected ;, expecting {\n"
		     "BEGIN { exit(); }; END { }\n                ~~\n");
	/* lhist()'s checks, each of them, in bpftrace's order */
	expect_all_errors("BEGIN { @x = lhist(5, 10, 1, 1); }",
			  "stdin:1:14-32: ERROR: lhist() min must be less than max (provided min 10 and max 1)\n"
			  "BEGIN { @x = lhist(5, 10, 1, 1); }\n"
			  "             ~~~~~~~~~~~~~~~~~~\n"
			  "stdin:1:14-32: ERROR: lhist() step is too large for the given range (provided step 1 for range -9)\n"
			  "BEGIN { @x = lhist(5, 10, 1, 1); }\n"
			  "             ~~~~~~~~~~~~~~~~~~\n");
	expect_error_has("BEGIN { @x = lhist(5, 0, 10, 20); }",
			 "lhist() step is too large for the given range (provided step 20 for range 10)");
	expect_error_has("BEGIN { @x = buf(\"abc\", -1); }", "buf cannot use negative length (-1)");
	/* an if()'s condition: bpftrace's type name, and its empty place */
	expect_error("BEGIN { if (comm) { exit(); } }",
		     "stdin:1:1-1: ERROR: Invalid condition in if(): string\n"
		     "BEGIN { if (comm) { exit(); } }\n\n");
	/* a predicate's type error points at it whole, both slashes */
	expect_error("BEGIN / \"a\" / { exit(); }",
		     "stdin:1:7-14: ERROR: Invalid type for predicate: string\n"
		     "BEGIN / \"a\" / { exit(); }\n      ~~~~~~~\n");
	/* "#!" starts a skipped line only at its beginning */
	expect_error_has("BEGIN { #!x\n }", "");
}

/* A map's value as another map's key (ssllatency.bt: @hist[@func[tid]]),
 * the value assigned before or after the read in the text. */
Test(lang_compile, map_values_as_keys)
{
	static const char *const src[] = {
		"uprobe:a:f { @f[tid] = func; } uretprobe:a:f { @h[@f[tid]] = count(); }",
		"uretprobe:a:f { @h[@f[tid]] = count(); } uprobe:a:f { @f[tid] = func; }",
		"uprobe:a:f { @s[tid] = \"x\"; @n[@s[tid], 1] = sum(arg0); }",
		"uretprobe:a:f { @h[@f[tid]] = count(); @h[@g[tid]] = count(); }"
		" uprobe:a:f { @f[tid] = func; @g[tid] = func; }",
	};

	for (unsigned i = 0; i < sizeof(src) / sizeof(src[0]); i++)
		expect_compiles(src[i]);
	expect_error_has("uprobe:a:f { @f[tid] = func; @h[@f[tid]] = count(); @h[1] = count(); }",
			 "Argument mismatch for @h");
}

/* zero() of a min() map reads 0 afterwards, as bpftrace prints it (its
 * min keeps 0xffffffff - v, and 0 stands for a zeroed map), and the next
 * value is the new minimum. */
Test(lang_maps, zero_of_min_reads_zero)
{
	struct env *e = compile("uprobe:a:f { @lo = min(arg0); @hi = max(arg0); }");

	e->regs.di = 7;
	run(e, 0);
	cr_assert_eq(scalar(e, "@lo"), 7);
	lang_map_zero(&e->img, e->region, (unsigned)map_index(e, "@lo"));
	lang_map_zero(&e->img, e->region, (unsigned)map_index(e, "@hi"));
	cr_assert_eq(scalar(e, "@lo"), 0);
	cr_assert_eq(scalar(e, "@hi"), 0);
	e->regs.di = 9;
	run(e, 0);
	cr_assert_eq(scalar(e, "@lo"), 9);
	cr_assert_eq(scalar(e, "@hi"), 9);
	env_free(e);
}

/* Every error of the pass that finds one, as bpftrace reports them (its
 * output on these programs): the first in err.text, the others in
 * err.more; a variable whose value failed is still assigned (no error at
 * its uses); a pass with errors ends the check. */
static void expect_all_errors(const char *src, const char *all)
{
	struct lang_error err;
	char got[sizeof(err.text) + sizeof(err.more)];
	void *img = NULL;
	size_t len;

	cr_assert_eq(lang_compile(src, NULL, &img, &len, &err), -EINVAL, "compiled: %s", src);
	snprintf(got, sizeof(got), "%s%s", err.text, err.more);
	cr_assert_str_eq(got, all, "for %s:\n%s", src, got);
}

Test(lang_errors, every_error_of_a_pass)
{
	expect_all_errors("BEGIN { @x = count(1); @y = hist(); $z = foo; }",
			  "stdin:1:14-22: ERROR: count() requires no arguments (1 provided)\n"
			  "BEGIN { @x = count(1); @y = hist(); $z = foo; }\n"
			  "             ~~~~~~~~\n"
			  "stdin:1:29-35: ERROR: hist() requires one argument (0 provided)\n"
			  "BEGIN { @x = count(1); @y = hist(); $z = foo; }\n"
			  "                            ~~~~~~\n"
			  "stdin:1:42-45: ERROR: Unknown identifier: 'foo'\n"
			  "BEGIN { @x = count(1); @y = hist(); $z = foo; }\n"
			  "                                         ~~~\n");
	expect_all_errors("BEGIN { @a = $x; } END { @b = $y; }",
			  "stdin:1:14-16: ERROR: Undefined or undeclared variable: $x\n"
			  "BEGIN { @a = $x; } END { @b = $y; }\n"
			  "             ~~\n"
			  "stdin:1:31-33: ERROR: Undefined or undeclared variable: $y\n"
			  "BEGIN { @a = $x; } END { @b = $y; }\n"
			  "                              ~~\n");
	/* one error: $x and $y are still assigned */
	expect_all_errors("BEGIN { $x = \"a\" + 1; $y = $x; @z = $y * 2; }",
			  "stdin:1:14-21: ERROR: Type mismatch for '+': comparing 'string[2]' with 'int64'\n"
			  "BEGIN { $x = \"a\" + 1; $y = $x; @z = $y * 2; }\n"
			  "             ~~~~~~~\n");
	/* a map type error and an undefined variable, found in one pass */
	expect_all_errors("BEGIN { @x = 1; @x = \"s\"; @y = $u; }",
			  "stdin:1:17-19: ERROR: Type mismatch for @x: trying to assign value of type "
			  "'string[2]' when map already contains a value of type 'int64\n"
			  "BEGIN { @x = 1; @x = \"s\"; @y = $u; }\n"
			  "                ~~\n"
			  "stdin:1:32-34: ERROR: Undefined or undeclared variable: $u\n"
			  "BEGIN { @x = 1; @x = \"s\"; @y = $u; }\n"
			  "                               ~~\n");
}

/* Every operand of an operator, key of a map, and part of a ternary is
 * checked, and each one's errors are said; a tuple stops at its first
 * part that fails (bpftrace's output on this program). */
Test(lang_errors, every_operand_checked)
{
	expect_all_errors("BEGIN { @u = $y && $z; @c[$a, $b] = $c; $t = ($p, $q); @w = $m ? $n : $o; }",
			  "stdin:1:14-16: ERROR: Undefined or undeclared variable: $y\n"
			  "BEGIN { @u = $y && $z; @c[$a, $b] = $c; $t = ($p, $q); @w = $m ? $n : $o; }\n"
			  "             ~~\n"
			  "stdin:1:20-22: ERROR: Undefined or undeclared variable: $z\n"
			  "BEGIN { @u = $y && $z; @c[$a, $b] = $c; $t = ($p, $q); @w = $m ? $n : $o; }\n"
			  "                   ~~\n"
			  "stdin:1:24-29: ERROR: Undefined or undeclared variable: $a\n"
			  "BEGIN { @u = $y && $z; @c[$a, $b] = $c; $t = ($p, $q); @w = $m ? $n : $o; }\n"
			  "                       ~~~~~\n"
			  "stdin:1:31-33: ERROR: Undefined or undeclared variable: $b\n"
			  "BEGIN { @u = $y && $z; @c[$a, $b] = $c; $t = ($p, $q); @w = $m ? $n : $o; }\n"
			  "                              ~~\n"
			  "stdin:1:37-39: ERROR: Undefined or undeclared variable: $c\n"
			  "BEGIN { @u = $y && $z; @c[$a, $b] = $c; $t = ($p, $q); @w = $m ? $n : $o; }\n"
			  "                                    ~~\n"
			  "stdin:1:46-49: ERROR: Undefined or undeclared variable: $p\n"
			  "BEGIN { @u = $y && $z; @c[$a, $b] = $c; $t = ($p, $q); @w = $m ? $n : $o; }\n"
			  "                                             ~~~\n"
			  "stdin:1:61-63: ERROR: Undefined or undeclared variable: $m\n"
			  "BEGIN { @u = $y && $z; @c[$a, $b] = $c; $t = ($p, $q); @w = $m ? $n : $o; }\n"
			  "                                                            ~~\n"
			  "stdin:1:66-68: ERROR: Undefined or undeclared variable: $n\n"
			  "BEGIN { @u = $y && $z; @c[$a, $b] = $c; $t = ($p, $q); @w = $m ? $n : $o; }\n"
			  "                                                                 ~~\n"
			  "stdin:1:71-73: ERROR: Undefined or undeclared variable: $o\n"
			  "BEGIN { @u = $y && $z; @c[$a, $b] = $c; $t = ($p, $q); @w = $m ? $n : $o; }\n"
			  "                                                                      ~~\n");
}

/* A map that print(), clear(), zero() or delete() names, or an
 * expression reads, before its assignment (in source order), whose value
 * is another map's: defined, as bpftrace has it (chains of such copies
 * too); and a tuple holding the value of a map assigned later, typed as
 * bpftrace's next pass types it. */
Test(lang_errors, maps_assigned_later_are_defined)
{
	static const char *const progs[] = {
		"BEGIN { @q = 1; if (0) { print(@y); clear(@y); zero(@y); } @y = @q; exit(); }",
		"interval:s:1 { print(@y); delete(@y[1]); } BEGIN { @q = 1; @y[1] = @q; }",
		"BEGIN { print(@t); @t = (@x, 1); @x = 5; exit(); }",
		"BEGIN { @t = (@a, (@b, 1)); @a = 3; @b = -1; exit(); }",
		"BEGIN { if (0) { $a = @y; } @y = @q; @q = 7; exit(); }",
		"BEGIN { $s = @y; @y = @q; @q = \"str\"; printf(\"[%s]\\n\", $s); exit(); }",
		"BEGIN { @a = @b; @b = @c; @c = @d; @d = 1; exit(); }",
	};

	for (size_t k = 0; k < sizeof(progs) / sizeof(progs[0]); k++)
		expect_compiles(progs[k]);
}

/* A map nothing assigns is said at every use, print(), clear() and
 * delete() included, and bpftrace goes on with its value's type 'none':
 * what uses that value is an error too (an operator, a condition, a
 * predicate, printf(), an aggregate, a map or variable it is assigned
 * to).  bpftrace's output on these programs. */
/* A ternary's branches: the first an integer or a string (an aggregate's
 * value, a tuple, a stack, a probe... are refused), the second of its
 * kind, a map nothing assigns of type none in either (bpftrace's output
 * for each). */
Test(lang_errors, ternary_branches_as_bpftrace)
{
	expect_all_errors("BEGIN { @s = count(); @c = rand ? @s : \"x\"; }",
			  "stdin:1:28-43: ERROR: Ternary return type unsupported count\n"
			  "BEGIN { @s = count(); @c = rand ? @s : \"x\"; }\n"
			  "                           ~~~~~~~~~~~~~~~\n");
	expect_all_errors("BEGIN { @s = count(); @c = rand ? 1 : @s; }",
			  "stdin:1:28-41: ERROR: Ternary operator must return the same type: have 'integer' and 'count'\n"
			  "BEGIN { @s = count(); @c = rand ? 1 : @s; }\n"
			  "                           ~~~~~~~~~~~~~\n");
	expect_all_errors("BEGIN { @s = hist(2); @c = rand ? @s : @s; }",
			  "stdin:1:28-42: ERROR: Ternary return type unsupported hist\n"
			  "BEGIN { @s = hist(2); @c = rand ? @s : @s; }\n"
			  "                           ~~~~~~~~~~~~~~\n");
	expect_all_errors("BEGIN { $x = rand ? @k[1] : 95; }",
			  "stdin:1:21-26: ERROR: Undefined map: @k\n"
			  "BEGIN { $x = rand ? @k[1] : 95; }\n"
			  "                    ~~~~~\n"
			  "stdin:1:14-31: ERROR: Ternary operator must return the same type: have 'none' and 'integer'\n"
			  "BEGIN { $x = rand ? @k[1] : 95; }\n"
			  "             ~~~~~~~~~~~~~~~~~\n"
			  "stdin:1:12-13: ERROR: Undefined variable: $x\n"
			  "BEGIN { $x = rand ? @k[1] : 95; }\n"
			  "           ~\n"
			  "stdin:1:14-31: ERROR: Invalid expression for assignment: none\n"
			  "BEGIN { $x = rand ? @k[1] : 95; }\n"
			  "             ~~~~~~~~~~~~~~~~~\n");
	expect_all_errors("BEGIN { $x = rand ? \"a\" : @k[1]; }",
			  "stdin:1:27-32: ERROR: Undefined map: @k\n"
			  "BEGIN { $x = rand ? \"a\" : @k[1]; }\n"
			  "                          ~~~~~\n"
			  "stdin:1:14-32: ERROR: Ternary operator must return the same type: have 'string' and 'none'\n"
			  "BEGIN { $x = rand ? \"a\" : @k[1]; }\n"
			  "             ~~~~~~~~~~~~~~~~~~\n");
	expect_all_errors("BEGIN { $x = rand ? @k[1] : @j; }",
			  "stdin:1:21-26: ERROR: Undefined map: @k\n"
			  "BEGIN { $x = rand ? @k[1] : @j; }\n"
			  "                    ~~~~~\n"
			  "stdin:1:29-31: ERROR: Undefined map: @j\n"
			  "BEGIN { $x = rand ? @k[1] : @j; }\n"
			  "                            ~~\n"
			  "stdin:1:12-13: ERROR: Undefined variable: $x\n"
			  "BEGIN { $x = rand ? @k[1] : @j; }\n"
			  "           ~\n"
			  "stdin:1:14-31: ERROR: Invalid expression for assignment: none\n"
			  "BEGIN { $x = rand ? @k[1] : @j; }\n"
			  "             ~~~~~~~~~~~~~~~~~\n");
	expect_all_errors("BEGIN { $x = rand ? (1,2) : 95; $y = rand ? ustack : 1; $z = rand ? probe : probe; }",
			  "stdin:1:14-31: ERROR: Ternary return type unsupported tuple\n"
			  "BEGIN { $x = rand ? (1,2) : 95; $y = rand ? ustack : 1; $z = rand ? probe : probe; }\n"
			  "             ~~~~~~~~~~~~~~~~~\n"
			  "stdin:1:38-55: ERROR: Ternary return type unsupported ustack\n"
			  "BEGIN { $x = rand ? (1,2) : 95; $y = rand ? ustack : 1; $z = rand ? probe : probe; }\n"
			  "                                     ~~~~~~~~~~~~~~~~~\n"
			  "stdin:1:62-82: ERROR: Ternary return type unsupported probe\n"
			  "BEGIN { $x = rand ? (1,2) : 95; $y = rand ? ustack : 1; $z = rand ? probe : probe; }\n"
			  "                                                             ~~~~~~~~~~~~~~~~~~~~\n");
}

/* An if()'s condition failing, its branch failing, or an unroll() count
 * out of range: bpftrace goes on into every branch and body, and so does
 * the checker (bpftrace's output for each). */
Test(lang_errors, every_branch_and_body_is_checked)
{
	expect_all_errors("BEGIN { unroll(0) { printf(\"%d\\n\", $a); } }",
			  "stdin:1:9-18: ERROR: unroll minimum value is 1\n"
			  "BEGIN { unroll(0) { printf(\"%d\\n\", $a); } }\n"
			  "        ~~~~~~~~~\n"
			  "stdin:1:36-38: ERROR: Undefined or undeclared variable: $a\n"
			  "BEGIN { unroll(0) { printf(\"%d\\n\", $a); } }\n"
			  "                                   ~~\n");
	expect_all_errors("BEGIN /67/ { $a = \"\"; unroll(3) { unroll(0) { $a = 39; } } }",
			  "stdin:1:35-44: ERROR: unroll minimum value is 1\n"
			  "BEGIN /67/ { $a = \"\"; unroll(3) { unroll(0) { $a = 39; } } }\n"
			  "                                  ~~~~~~~~~\n"
			  "stdin:1:50-51: ERROR: Type mismatch for $a: trying to assign value of type 'int64' when variable already contains a value of type 'string[1]'\n"
			  "BEGIN /67/ { $a = \"\"; unroll(3) { unroll(0) { $a = 39; } } }\n"
			  "                                                 ~\n");
	expect_all_errors("BEGIN { unroll(101) { @k[uid] = $a; } }",
			  "stdin:1:9-20: ERROR: unroll maximum value is 100\n"
			  "BEGIN { unroll(101) { @k[uid] = $a; } }\n"
			  "        ~~~~~~~~~~~\n"
			  "stdin:1:33-35: ERROR: Undefined or undeclared variable: $a\n"
			  "BEGIN { unroll(101) { @k[uid] = $a; } }\n"
			  "                                ~~\n");
	expect_all_errors("BEGIN { if ($b) { $c = $d; } else { $e = $f; } }",
			  "stdin:1:12-15: ERROR: Undefined or undeclared variable: $b\n"
			  "BEGIN { if ($b) { $c = $d; } else { $e = $f; } }\n"
			  "           ~~~\n"
			  "stdin:1:24-26: ERROR: Undefined or undeclared variable: $d\n"
			  "BEGIN { if ($b) { $c = $d; } else { $e = $f; } }\n"
			  "                       ~~\n"
			  "stdin:1:42-44: ERROR: Undefined or undeclared variable: $f\n"
			  "BEGIN { if ($b) { $c = $d; } else { $e = $f; } }\n"
			  "                                         ~~\n");
	expect_all_errors("BEGIN { if (@u) { $c = $d; } else if (\"x\") { $e = $f; } else { $g = $h; } }",
			  "stdin:1:24-26: ERROR: Undefined or undeclared variable: $d\n"
			  "BEGIN { if (@u) { $c = $d; } else if (\"x\") { $e = $f; } else { $g = $h; } }\n"
			  "                       ~~\n"
			  "stdin:1:51-53: ERROR: Undefined or undeclared variable: $f\n"
			  "BEGIN { if (@u) { $c = $d; } else if (\"x\") { $e = $f; } else { $g = $h; } }\n"
			  "                                                  ~~\n"
			  "stdin:1:69-71: ERROR: Undefined or undeclared variable: $h\n"
			  "BEGIN { if (@u) { $c = $d; } else if (\"x\") { $e = $f; } else { $g = $h; } }\n"
			  "                                                                    ~~\n");
	expect_all_errors("BEGIN { if (1) { @s = ($b, 1); } else { @k[$a] = tid; } }",
			  "stdin:1:23-26: ERROR: Undefined or undeclared variable: $b\n"
			  "BEGIN { if (1) { @s = ($b, 1); } else { @k[$a] = tid; } }\n"
			  "                      ~~~\n"
			  "stdin:1:41-46: ERROR: Undefined or undeclared variable: $a\n"
			  "BEGIN { if (1) { @s = ($b, 1); } else { @k[$a] = tid; } }\n"
			  "                                        ~~~~~\n");
}

/* bpftrace 0.17 types an aggregate's value by its aggregate ('count',
 * 'hist', ...): no arithmetic but between two of one kind, no condition,
 * cast, str(), key, ++ or printf integer, and a variable assigned one is
 * one.  Its first pass reports casts, str(), keys and variables; the rest
 * only a last pass that nothing failed before.  Each text is bpftrace's
 * output for the program (bpftrace -e). */
Test(lang_errors, aggregates_in_expressions_as_bpftrace)
{
	expect_all_errors("BEGIN { @x = count(); $z = -@x; $w = ~@x; }",
			  "stdin:1:28-29: ERROR: The - operator can not be used on expressions of type 'count'\n"
			  "BEGIN { @x = count(); $z = -@x; $w = ~@x; }\n"
			  "                           ~\n"
			  "stdin:1:38-39: ERROR: The ~ operator can not be used on expressions of type 'count'\n"
			  "BEGIN { @x = count(); $z = -@x; $w = ~@x; }\n"
			  "                                     ~\n");
	expect_all_errors("BEGIN { @x = count(); if (!@x) { exit(); } }",
			  "stdin:1:26-28: ERROR: The ! operator can not be used on expressions of type 'count'\n"
			  "BEGIN { @x = count(); if (!@x) { exit(); } }\n"
			  "                         ~~\n");
	expect_all_errors("BEGIN { @x = avg(3); $z = @x ? 1 : 2; $q = \"a\" ? 1 : 2; }",
			  "stdin:1:27-37: ERROR: Invalid condition in ternary: avg\n"
			  "BEGIN { @x = avg(3); $z = @x ? 1 : 2; $q = \"a\" ? 1 : 2; }\n"
			  "                          ~~~~~~~~~~\n"
			  "stdin:1:44-55: ERROR: Invalid condition in ternary: string\n"
			  "BEGIN { @x = avg(3); $z = @x ? 1 : 2; $q = \"a\" ? 1 : 2; }\n"
			  "                                           ~~~~~~~~~~~\n");
	expect_all_errors("BEGIN { @x = count(); $z = (uint32)@x; }",
			  "stdin:1:28-36: ERROR: Casts are not supported for type: \"count\"\n"
			  "BEGIN { @x = count(); $z = (uint32)@x; }\n"
			  "                           ~~~~~~~~\n");
	expect_all_errors("BEGIN /@x/ { exit(); } END { @x = count(); }",
			  "stdin:1:7-11: ERROR: Invalid type for predicate: count\n"
			  "BEGIN /@x/ { exit(); } END { @x = count(); }\n"
			  "      ~~~~\n");
	expect_all_errors("BEGIN { @x = stats(3); $a = @x == 1; }",
			  "stdin:1:29-36: ERROR: Type mismatch for '==': comparing 'stats' with 'int64'\n"
			  "BEGIN { @x = stats(3); $a = @x == 1; }\n"
			  "                            ~~~~~~~\n");
	expect_all_errors("BEGIN { @x = count(); @x++; @s = sum(1); @s--; }",
			  "stdin:1:23-27: ERROR: The ++ operator can not be used on expressions of type 'count'\n"
			  "BEGIN { @x = count(); @x++; @s = sum(1); @s--; }\n"
			  "                      ~~~~\n"
			  "stdin:1:42-46: ERROR: The -- operator can not be used on expressions of type 'sum'\n"
			  "BEGIN { @x = count(); @x++; @s = sum(1); @s--; }\n"
			  "                                         ~~~~\n");
	expect_all_errors("BEGIN { @x = lhist(1, 0, 10, 1); $y = @x + 1; }",
			  "stdin:1:39-45: ERROR: Type mismatch for '+': comparing 'lhist' with 'int64'\n"
			  "BEGIN { @x = lhist(1, 0, 10, 1); $y = @x + 1; }\n"
			  "                                      ~~~~~~\n");
	expect_all_errors("BEGIN { @x = count(); $s = str(@x); @h = hist(1); $t = str(@h); }",
			  "stdin:1:28-35: ERROR: str() expects an integer or a pointer type as first argument (count provided)\n"
			  "BEGIN { @x = count(); $s = str(@x); @h = hist(1); $t = str(@h); }\n"
			  "                           ~~~~~~~\n"
			  "stdin:1:56-63: ERROR: str() expects an integer or a pointer type as first argument (hist provided)\n"
			  "BEGIN { @x = count(); $s = str(@x); @h = hist(1); $t = str(@h); }\n"
			  "                                                       ~~~~~~~\n");
	expect_all_errors("BEGIN { @x = count(); $y = @x; $y = 1; }",
			  "stdin:1:35-36: ERROR: Type mismatch for $y: trying to assign value of type 'int64' when variable already contains a value of type 'count'\n"
			  "BEGIN { @x = count(); $y = @x; $y = 1; }\n"
			  "                                  ~\n");
	expect_all_errors("BEGIN { @x = hist(1); $z = @x ? 1 : 2; }",
			  "stdin:1:28-38: ERROR: Invalid condition in ternary: hist\n"
			  "BEGIN { @x = hist(1); $z = @x ? 1 : 2; }\n"
			  "                           ~~~~~~~~~~\n");
	expect_all_errors("BEGIN /@x/ { exit(); } END { @x = hist(1); }",
			  "stdin:1:7-11: ERROR: Invalid type for predicate: hist\n"
			  "BEGIN /@x/ { exit(); } END { @x = hist(1); }\n"
			  "      ~~~~\n");
	expect_all_errors("BEGIN { @x = stats(1); $s = -@x; @l = lhist(1, 0, 10, 1); $t = (uint8)@l; }",
			  "stdin:1:64-71: ERROR: Casts are not supported for type: \"lhist\"\n"
			  "BEGIN { @x = stats(1); $s = -@x; @l = lhist(1, 0, 10, 1); $t = (uint8)@l; }\n"
			  "                                                               ~~~~~~~\n");
	expect_all_errors("BEGIN { @x = hist(1); @x++; }",
			  "stdin:1:23-27: ERROR: The ++ operator can not be used on expressions of type 'hist'\n"
			  "BEGIN { @x = hist(1); @x++; }\n"
			  "                      ~~~~\n");
	expect_all_errors("BEGIN { @x = hist(1); printf(\"%d\\n\", @x); }",
			  "stdin:1:23-41: ERROR: printf: %d specifier expects a value of type integer (hist supplied)\n"
			  "BEGIN { @x = hist(1); printf(\"%d\\n\", @x); }\n"
			  "                      ~~~~~~~~~~~~~~~~~~\n");
	expect_all_errors("BEGIN { @x = sum(3); $y = @x; printf(\"%d\\n\", $y); $z = $y + 1; }",
			  "stdin:1:31-49: ERROR: printf: %d specifier expects a value of type integer (sum supplied)\n"
			  "BEGIN { @x = sum(3); $y = @x; printf(\"%d\\n\", $y); $z = $y + 1; }\n"
			  "                              ~~~~~~~~~~~~~~~~~~\n"
			  "stdin:1:56-62: ERROR: Type mismatch for '+': comparing 'sum' with 'int64'\n"
			  "BEGIN { @x = sum(3); $y = @x; printf(\"%d\\n\", $y); $z = $y + 1; }\n"
			  "                                                       ~~~~~~\n");
	expect_all_errors("BEGIN { @x = count(); if (@x) { exit(); } }",
			  "stdin:1:1-1: ERROR: Invalid condition in if(): count\n"
			  "BEGIN { @x = count(); if (@x) { exit(); } }\n"
			  "\n");
	expect_all_errors("BEGIN { @x = count(); @y[1] = 2; $a = @y[@x]; }",
			  "stdin:1:39-45: ERROR: Argument mismatch for @y: trying to access with arguments: [count] when map expects arguments: [unsigned int64]\n"
			  "BEGIN { @x = count(); @y[1] = 2; $a = @y[@x]; }\n"
			  "                                      ~~~~~~\n");
	expect_all_errors("BEGIN { @x = count(); $y = @x; $y++; }",
			  "stdin:1:32-36: ERROR: The ++ operator can not be used on expressions of type 'count'\n"
			  "BEGIN { @x = count(); $y = @x; $y++; }\n"
			  "                               ~~~~\n");
	expect_all_errors("BEGIN { @c = count(); @h = hist(1); $a = -@c; $b = @h ? 1 : 2; $d = (uint8)@c; @c++; $s = str(@h); }",
			  "stdin:1:69-76: ERROR: Casts are not supported for type: \"count\"\n"
			  "BEGIN { @c = count(); @h = hist(1); $a = -@c; $b = @h ? 1 : 2; $d = (uint8)@c; @c++; $s = str(@h); }\n"
			  "                                                                    ~~~~~~~\n"
			  "stdin:1:91-98: ERROR: str() expects an integer or a pointer type as first argument (hist provided)\n"
			  "BEGIN { @c = count(); @h = hist(1); $a = -@c; $b = @h ? 1 : 2; $d = (uint8)@c; @c++; $s = str(@h); }\n"
			  "                                                                                          ~~~~~~~\n");
	expect_all_errors("BEGIN { @c = min(1); @d = max(1); $a = @c + @d; $b = @c < 5; }",
			  "stdin:1:40-47: ERROR: Type mismatch for '+': comparing 'min' with 'max'\n"
			  "BEGIN { @c = min(1); @d = max(1); $a = @c + @d; $b = @c < 5; }\n"
			  "                                       ~~~~~~~\n"
			  "stdin:1:54-60: ERROR: Type mismatch for '<': comparing 'min' with 'int64'\n"
			  "BEGIN { @c = min(1); @d = max(1); $a = @c + @d; $b = @c < 5; }\n"
			  "                                                     ~~~~~~\n");
	expect_all_errors("BEGIN { @c = count(); $a = -@c; printf(\"%d\\n\", @c); }",
			  "stdin:1:28-29: ERROR: The - operator can not be used on expressions of type 'count'\n"
			  "BEGIN { @c = count(); $a = -@c; printf(\"%d\\n\", @c); }\n"
			  "                           ~\n"
			  "stdin:1:33-51: ERROR: printf: %d specifier expects a value of type integer (count supplied)\n"
			  "BEGIN { @c = count(); $a = -@c; printf(\"%d\\n\", @c); }\n"
			  "                                ~~~~~~~~~~~~~~~~~~\n");
	expect_all_errors("BEGIN { @c = count(); $a = -@c; @y[1] = 2; $b = @y[@c]; }",
			  "stdin:1:49-55: ERROR: Argument mismatch for @y: trying to access with arguments: [count] when map expects arguments: [unsigned int64]\n"
			  "BEGIN { @c = count(); $a = -@c; @y[1] = 2; $b = @y[@c]; }\n"
			  "                                                ~~~~~~\n");
	expect_all_errors("BEGIN { @c = count(); $a = -@c; $y = @c; $y = 1; }",
			  "stdin:1:45-46: ERROR: Type mismatch for $y: trying to assign value of type 'int64' when variable already contains a value of type 'count'\n"
			  "BEGIN { @c = count(); $a = -@c; $y = @c; $y = 1; }\n"
			  "                                            ~\n");
	expect_all_errors("BEGIN /@c/ { exit(); } END { @c = count(); $d = (uint8)@c; }",
			  "stdin:1:49-56: ERROR: Casts are not supported for type: \"count\"\n"
			  "BEGIN /@c/ { exit(); } END { @c = count(); $d = (uint8)@c; }\n"
			  "                                                ~~~~~~~\n");
	expect_all_errors("BEGIN { @c = count(); $a = @c + 1; $d = (uint8)@c; }",
			  "stdin:1:41-48: ERROR: Casts are not supported for type: \"count\"\n"
			  "BEGIN { @c = count(); $a = @c + 1; $d = (uint8)@c; }\n"
			  "                                        ~~~~~~~\n");
	expect_all_errors("BEGIN { @c = count(); if (@c) { exit(); } $d = (uint8)@c; }",
			  "stdin:1:48-55: ERROR: Casts are not supported for type: \"count\"\n"
			  "BEGIN { @c = count(); if (@c) { exit(); } $d = (uint8)@c; }\n"
			  "                                               ~~~~~~~\n");
	expect_all_errors("BEGIN { @c = count(); $a = -@c; $b = @c ? 1 : 2; $y = @c; $y++; }",
			  "stdin:1:28-29: ERROR: The - operator can not be used on expressions of type 'count'\n"
			  "BEGIN { @c = count(); $a = -@c; $b = @c ? 1 : 2; $y = @c; $y++; }\n"
			  "                           ~\n"
			  "stdin:1:38-48: ERROR: Invalid condition in ternary: count\n"
			  "BEGIN { @c = count(); $a = -@c; $b = @c ? 1 : 2; $y = @c; $y++; }\n"
			  "                                     ~~~~~~~~~~\n"
			  "stdin:1:59-63: ERROR: The ++ operator can not be used on expressions of type 'count'\n"
			  "BEGIN { @c = count(); $a = -@c; $b = @c ? 1 : 2; $y = @c; $y++; }\n"
			  "                                                          ~~~~\n");
	expect_all_errors("BEGIN { @c = count(); $a = @c + 1; $b = -@c; }",
			  "stdin:1:28-34: ERROR: Type mismatch for '+': comparing 'count' with 'int64'\n"
			  "BEGIN { @c = count(); $a = @c + 1; $b = -@c; }\n"
			  "                           ~~~~~~\n"
			  "stdin:1:41-42: ERROR: The - operator can not be used on expressions of type 'count'\n"
			  "BEGIN { @c = count(); $a = @c + 1; $b = -@c; }\n"
			  "                                        ~\n");
}

/* What bpftrace lets by: two values of one aggregate compared, one in a
 * tuple or copied to a map or variable; a hist(), lhist() or stats() value
 * (which has none to compute with) only where bpftrace refuses it too, or
 * with a message of ours where bpftrace runs a program that cannot use it. */
Test(lang_errors, aggregate_values_that_compile)
{
	expect_compiles("BEGIN { @c = avg(4); @d = avg(6); $e = @c == @d; exit(); }");
	expect_compiles("BEGIN { @c = count(); $t = (@c, 1); print($t); exit(); }");
	expect_compiles("BEGIN { @c = count(); @d = @c; $y = @c; @e = $y; exit(); }");
	expect_compiles("BEGIN { @h = hist(2); @s = stats(3); print(@h); clear(@s); exit(); }");
	expect_error("BEGIN { @x = hist(5); $y = @x; }",
		     "stdin:1:28-30: ERROR: the value of a hist() map can not be read in an expression\n"
		     "BEGIN { @x = hist(5); $y = @x; }\n"
		     "                           ~~\n");
	expect_error_has("BEGIN { @x = stats(5); @y = (@x, 1); }",
			 "the value of a stats() map can not be read in an expression");
	expect_error_has("BEGIN { @x = lhist(5, 0, 10, 1); if (@x == @x) { exit(); } }",
			 "the value of a lhist() map can not be read in an expression");
}

Test(lang_errors, undefined_maps_and_their_none_values)
{
	expect_all_errors("BEGIN { print(@x); clear(@x); @y = @z; delete(@r[1]); }",
			  "stdin:1:9-17: ERROR: Undefined map: @x\n"
			  "BEGIN { print(@x); clear(@x); @y = @z; delete(@r[1]); }\n"
			  "        ~~~~~~~~\n"
			  "stdin:1:20-28: ERROR: Undefined map: @x\n"
			  "BEGIN { print(@x); clear(@x); @y = @z; delete(@r[1]); }\n"
			  "                   ~~~~~~~~\n"
			  "stdin:1:36-38: ERROR: Undefined map: @z\n"
			  "BEGIN { print(@x); clear(@x); @y = @z; delete(@r[1]); }\n"
			  "                                   ~~\n"
			  "stdin:1:31-33: ERROR: Undefined map: @y\n"
			  "BEGIN { print(@x); clear(@x); @y = @z; delete(@r[1]); }\n"
			  "                              ~~\n"
			  "stdin:1:36-38: ERROR: Invalid expression for assignment: none\n"
			  "BEGIN { print(@x); clear(@x); @y = @z; delete(@r[1]); }\n"
			  "                                   ~~\n"
			  "stdin:1:40-52: ERROR: Undefined map: @r\n"
			  "BEGIN { print(@x); clear(@x); @y = @z; delete(@r[1]); }\n"
			  "                                       ~~~~~~~~~~~~\n");
	expect_all_errors("BEGIN { $x = @m; $z = $x + 1; printf(\"%d %s\\n\", $x, @k); }",
			  "stdin:1:14-16: ERROR: Undefined map: @m\n"
			  "BEGIN { $x = @m; $z = $x + 1; printf(\"%d %s\\n\", $x, @k); }\n"
			  "             ~~\n"
			  "stdin:1:12-13: ERROR: Undefined variable: $x\n"
			  "BEGIN { $x = @m; $z = $x + 1; printf(\"%d %s\\n\", $x, @k); }\n"
			  "           ~\n"
			  "stdin:1:14-16: ERROR: Invalid expression for assignment: none\n"
			  "BEGIN { $x = @m; $z = $x + 1; printf(\"%d %s\\n\", $x, @k); }\n"
			  "             ~~\n"
			  "stdin:1:23-29: ERROR: Type mismatch for '+': comparing 'none' with 'int64'\n"
			  "BEGIN { $x = @m; $z = $x + 1; printf(\"%d %s\\n\", $x, @k); }\n"
			  "                      ~~~~~~\n"
			  "stdin:1:53-55: ERROR: Undefined map: @k\n"
			  "BEGIN { $x = @m; $z = $x + 1; printf(\"%d %s\\n\", $x, @k); }\n"
			  "                                                    ~~\n"
			  "stdin:1:31-56: ERROR: printf: %d specifier expects a value of type integer (none supplied)\n"
			  "BEGIN { $x = @m; $z = $x + 1; printf(\"%d %s\\n\", $x, @k); }\n"
			  "                              ~~~~~~~~~~~~~~~~~~~~~~~~~\n");
	expect_all_errors("BEGIN { if (@u) { exit(); } @h = hist(@v); @c[@k2] = count(); }",
			  "stdin:1:12-15: ERROR: Undefined map: @u\n"
			  "BEGIN { if (@u) { exit(); } @h = hist(@v); @c[@k2] = count(); }\n"
			  "           ~~~\n"
			  "stdin:1:1-1: ERROR: Invalid condition in if(): none\n"
			  "BEGIN { if (@u) { exit(); } @h = hist(@v); @c[@k2] = count(); }\n"
			  "\n"
			  "stdin:1:34-41: ERROR: Undefined map: @v\n"
			  "BEGIN { if (@u) { exit(); } @h = hist(@v); @c[@k2] = count(); }\n"
			  "                                 ~~~~~~~\n"
			  "stdin:1:34-42: ERROR: hist() only supports integer arguments (none provided)\n"
			  "BEGIN { if (@u) { exit(); } @h = hist(@v); @c[@k2] = count(); }\n"
			  "                                 ~~~~~~~~\n"
			  "stdin:1:44-50: ERROR: Undefined map: @k2\n"
			  "BEGIN { if (@u) { exit(); } @h = hist(@v); @c[@k2] = count(); }\n"
			  "                                           ~~~~~~\n"
			  "stdin:1:44-50: ERROR: Invalid expression for assignment: \n"
			  "BEGIN { if (@u) { exit(); } @h = hist(@v); @c[@k2] = count(); }\n"
			  "                                           ~~~~~~\n");
	expect_all_errors("BEGIN /@p/ { @ = @q[1]; }",
			  "stdin:1:7-10: ERROR: Undefined map: @p\n"
			  "BEGIN /@p/ { @ = @q[1]; }\n"
			  "      ~~~\n"
			  "stdin:1:7-11: ERROR: Invalid type for predicate: none\n"
			  "BEGIN /@p/ { @ = @q[1]; }\n"
			  "      ~~~~\n"
			  "stdin:1:18-23: ERROR: Undefined map: @q\n"
			  "BEGIN /@p/ { @ = @q[1]; }\n"
			  "                 ~~~~~\n"
			  "stdin:1:14-15: ERROR: Undefined map: @\n"
			  "BEGIN /@p/ { @ = @q[1]; }\n"
			  "             ~\n"
			  "stdin:1:18-23: ERROR: Invalid expression for assignment: none\n"
			  "BEGIN /@p/ { @ = @q[1]; }\n"
			  "                 ~~~~~\n");
	expect_all_errors("BEGIN { @x = !@a; @w = @u ? 1 : 2; @t = (@b, 1); }",
			  "stdin:1:14-17: ERROR: Undefined map: @a\n"
			  "BEGIN { @x = !@a; @w = @u ? 1 : 2; @t = (@b, 1); }\n"
			  "             ~~~\n"
			  "stdin:1:14-15: ERROR: The ! operator can not be used on expressions of type 'none'\n"
			  "BEGIN { @x = !@a; @w = @u ? 1 : 2; @t = (@b, 1); }\n"
			  "             ~\n"
			  "stdin:1:24-26: ERROR: Undefined map: @u\n"
			  "BEGIN { @x = !@a; @w = @u ? 1 : 2; @t = (@b, 1); }\n"
			  "                       ~~\n"
			  "stdin:1:24-34: ERROR: Invalid condition in ternary: none\n"
			  "BEGIN { @x = !@a; @w = @u ? 1 : 2; @t = (@b, 1); }\n"
			  "                       ~~~~~~~~~~\n"
			  "stdin:1:41-44: ERROR: Undefined map: @b\n"
			  "BEGIN { @x = !@a; @w = @u ? 1 : 2; @t = (@b, 1); }\n"
			  "                                        ~~~\n"
			  "stdin:1:36-38: ERROR: Undefined map: @t\n"
			  "BEGIN { @x = !@a; @w = @u ? 1 : 2; @t = (@b, 1); }\n"
			  "                                   ~~\n"
			  "stdin:1:41-48: ERROR: Invalid expression for assignment: none\n"
			  "BEGIN { @x = !@a; @w = @u ? 1 : 2; @t = (@b, 1); }\n"
			  "                                        ~~~~~~~\n");
	expect_all_errors("BEGIN { @x = @n1 + @n2; @l = lhist(@v, 0, 10, 1); @s = sum(@w); }",
			  "stdin:1:14-17: ERROR: Undefined map: @n1\n"
			  "BEGIN { @x = @n1 + @n2; @l = lhist(@v, 0, 10, 1); @s = sum(@w); }\n"
			  "             ~~~\n"
			  "stdin:1:20-23: ERROR: Undefined map: @n2\n"
			  "BEGIN { @x = @n1 + @n2; @l = lhist(@v, 0, 10, 1); @s = sum(@w); }\n"
			  "                   ~~~\n"
			  "stdin:1:18-19: ERROR: The + operator can not be used on expressions of types none, none\n"
			  "BEGIN { @x = @n1 + @n2; @l = lhist(@v, 0, 10, 1); @s = sum(@w); }\n"
			  "                 ~\n"
			  "stdin:1:30-38: ERROR: Undefined map: @v\n"
			  "BEGIN { @x = @n1 + @n2; @l = lhist(@v, 0, 10, 1); @s = sum(@w); }\n"
			  "                             ~~~~~~~~\n"
			  "stdin:1:30-49: ERROR: lhist() only supports integer arguments (none provided)\n"
			  "BEGIN { @x = @n1 + @n2; @l = lhist(@v, 0, 10, 1); @s = sum(@w); }\n"
			  "                             ~~~~~~~~~~~~~~~~~~~\n"
			  "stdin:1:56-62: ERROR: Undefined map: @w\n"
			  "BEGIN { @x = @n1 + @n2; @l = lhist(@v, 0, 10, 1); @s = sum(@w); }\n"
			  "                                                       ~~~~~~\n"
			  "stdin:1:56-63: ERROR: sum() only supports integer arguments (none provided)\n"
			  "BEGIN { @x = @n1 + @n2; @l = lhist(@v, 0, 10, 1); @s = sum(@w); }\n"
			  "                                                       ~~~~~~~\n");
}

/* One error, as bpftrace prints it: its location and message, the line,
 * and the carets under [col, col_end). */
static void expect_one_error_at(const char *src, int col, int col_end, const char *msg)
{
	char want[1024];
	int o = snprintf(want, sizeof(want), "stdin:1:%d-%d: ERROR: %s\n%s\n", col, col_end, msg,
			 src);

	for (int i = 1; i < col_end && o < (int)sizeof(want) - 2; i++)
		want[o++] = i < col ? ' ' : '~';
	want[o++] = '\n';
	want[o] = '\0';
	expect_all_errors(src, want);
}

/* ++ and -- in bpftrace's grammar follow (or precede) a map, a variable
 * or an identifier only: anything else is a syntax error that names what
 * closes the construct around it; a builtin is the checker's error.  As
 * bpftrace 0.17 prints each of these. */
Test(lang_errors, increments_of_non_variables_as_bpftrace)
{
	static const struct {
		const char *src;
		int col, col_end;
		const char *msg;
	} cases[] = {
		{ "BEGIN { 14++; }", 9, 13, "syntax error, unexpected ++, expecting }" },
		{ "BEGIN { print(14++); }", 9, 19, "syntax error, unexpected ++, expecting ) or \",\"" },
		{ "BEGIN { if (3++) { } }", 12, 16, "syntax error, unexpected ++, expecting )" },
		{ "BEGIN { while (3++) { } exit(); }", 15, 19,
		  "syntax error, unexpected ++, expecting )" },
		{ "BEGIN { @x[3++] = 1; }", 9, 15, "syntax error, unexpected ++, expecting ] or \",\"" },
		{ "BEGIN { $y = 1 ? 3++ : 2; }", 18, 21, "syntax error, unexpected ++, expecting :" },
		{ "BEGIN { $y = 1 ? 2 : 3++; }", 22, 25, "syntax error, unexpected ++, expecting }" },
		{ "BEGIN /3++/ { }", 7, 11, "syntax error, unexpected ++, expecting end predicate" },
		{ "BEGIN { $t = (1, 3++); }", 18, 21, "syntax error, unexpected ++, expecting ) or \",\"" },
		{ "BEGIN { $y = (int8)3++; exit(); }", 14, 23,
		  "syntax error, unexpected ++, expecting }" },
		{ "BEGIN { $y = $1++; exit(); }", 14, 18, "syntax error, unexpected ++, expecting }" },
		{ "BEGIN { $x = 1; $x++++; }", 17, 23, "syntax error, unexpected ++, expecting }" },
		{ "BEGIN { ++14; }", 9, 13, "syntax error, unexpected integer" },
		{ "BEGIN { ++\"s\"; exit(); }", 9, 14, "syntax error, unexpected string" },
		{ "BEGIN { @x = ----1; }", 14, 18, "syntax error, unexpected --" },
		{ "BEGIN { $y = arg0++; exit(); }", 14, 18,
		  "The ++ operator must be applied to a map or variable" },
		{ "BEGIN { ++arg0; exit(); }", 9, 11,
		  "The ++ operator must be applied to a map or variable" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		expect_one_error_at(cases[i].src, cases[i].col, cases[i].col_end, cases[i].msg);
	/* a syntax error ends the program before any other pass */
	expect_one_error_at("BEGIN { @x = 1; @x[1]++; 5--; }", 26, 29,
			    "syntax error, unexpected --, expecting }");
}
