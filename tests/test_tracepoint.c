/*
 * Static tracepoints: attaching and detaching handlers, typed arguments
 * (decoded with kprobes_tp_arg_kind() and the declared sizes), several
 * handlers, the errors, a detach while other threads fire the tracepoint
 * (the handler's data freed right after), nmissed on recursion, the
 * kprobes_list() line, foreach/find, and tracepoints in shared objects.
 */
#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <kprobes/tracepoint.h>

#include "testutil.h"
#include "jump_label/jlplugin.h"

TestSuite(tracepoint, .timeout = 60);

KPROBES_TRACEPOINT(tpt, six, (int, i), (long, l), (unsigned, u), (const char *, s), (double, d),
		   (void *, p));
KPROBES_TRACEPOINT(tpt, small, (short, sh), (unsigned char, uc), (float, f), (size_t, z),
		   (int8_t, i8), (uint64_t, u64));
KPROBES_TRACEPOINT(tpt, one, (long, n));
KPROBES_TRACEPOINT(tpt, listed, (int, x));
KPROBES_TRACEPOINT(tpt, recur, (int, depth));
KPROBES_TRACEPOINT(tpt, busy, (long, n));

void fire_six(int i, long l, unsigned u, const char *s, double d, void *p);
TEST_FN void fire_six(int i, long l, unsigned u, const char *s, double d, void *p)
{
	trace_tpt_six(i, l, u, s, d, p);
}

void fire_small(short sh, unsigned char uc, float f, size_t z, int8_t i8, uint64_t u64);
TEST_FN void fire_small(short sh, unsigned char uc, float f, size_t z, int8_t i8, uint64_t u64)
{
	trace_tpt_small(sh, uc, f, z, i8, u64);
}

void fire_one(long n);
TEST_FN void fire_one(long n)
{
	trace_tpt_one(n);
}

/* An argument as the declared type says: sign-extended from its size for
 * 's', the bits of a float or double for 'f'. */
union tp_val {
	int64_t s;
	uint64_t u;
	double f;
	const char *str;
	void *p;
};

static union tp_val decode_arg(const struct kprobes_tp_arg *a, uint64_t raw)
{
	union tp_val v = { .u = raw };

	switch (kprobes_tp_arg_kind(a)) {
	case 's':
		if (a->size < 8) {
			int sh = 64 - 8 * (int)a->size;

			v.s = (int64_t)(raw << sh) >> sh;
		}
		break;
	case 'f':
		if (a->size == 4) {
			float f;
			uint32_t b = (uint32_t)raw;

			memcpy(&f, &b, 4);
			v.f = f;
		} else {
			memcpy(&v.f, &raw, 8);
		}
		break;
	}
	return v;
}

static uint64_t got[6];
static int got_n, got_calls;
static struct kprobes_tracepoint *got_tp;
static void *got_data;

static void record(struct kprobes_tracepoint *tp, const uint64_t *args, void *data)
{
	got_tp = tp;
	got_data = data;
	got_n = (int)tp->nargs;
	memcpy(got, args, tp->nargs * sizeof(*args));
	got_calls++;
}

Test(tracepoint, descriptor)
{
	struct kprobes_tracepoint *tp = &KPROBES_TP_DESC(tpt, six);
	static const char *names[] = { "i", "l", "u", "s", "d", "p" };
	static const char kinds[] = "ssuSfp";
	static const unsigned sizes[] = { 4, 8, 4, 8, 8, 8 };

	cr_assert_str_eq(tp->provider, "tpt");
	cr_assert_str_eq(tp->name, "six");
	cr_assert_eq(tp->nargs, 6);
	cr_assert_eq(tp->__magic, KPROBES_TP_MAGIC);
	for (int i = 0; i < 6; i++) {
		cr_expect_str_eq(tp->args[i].name, names[i]);
		cr_expect_eq(kprobes_tp_arg_kind(&tp->args[i]), kinds[i], "arg %d (%s): %c", i,
			     tp->args[i].type, kprobes_tp_arg_kind(&tp->args[i]));
		cr_expect_eq(tp->args[i].size, sizes[i], "arg %d", i);
	}
	cr_expect_str_eq(tp->args[3].type, "const char *");
	cr_expect_str_eq(tp->args[5].type, "void *");
	cr_assert_not(static_branch_value(&tp->key));
	cr_assert_eq(kprobes_tracepoint_find("tpt", "six"), tp);
	cr_assert_null(kprobes_tracepoint_find("tpt", "nonesuch"));
	cr_assert_null(kprobes_tracepoint_find("nonesuch", "six"));
	cr_assert_null(kprobes_tracepoint_find(NULL, "six"));
}

Test(tracepoint, arg_kinds)
{
	static const struct {
		const char *type;
		char kind;
	} cases[] = {
		{ "int", 's' }, { "long", 's' }, { "long long", 's' }, { "short", 's' },
		{ "signed char", 's' }, { "int8_t", 's' }, { "int64_t", 's' }, { "pid_t", 's' },
		{ "ssize_t", 's' }, { "off_t", 's' }, { "char", 's' },
		{ "unsigned", 'u' }, { "unsigned int", 'u' }, { "unsigned long", 'u' },
		{ "unsigned char", 'u' }, { "size_t", 'u' }, { "uint8_t", 'u' },
		{ "uint64_t", 'u' }, { "uintptr_t", 'u' }, { "bool", 'u' }, { "_Bool", 'u' },
		{ "uid_t", 'u' }, { "const size_t", 'u' },
		{ "char *", 'S' }, { "const char *", 'S' }, { "char const *", 'S' },
		{ "const char *const", 'S' }, { "unsigned char *", 'S' },
		{ "char **", 'p' }, { "void *", 'p' }, { "const void *", 'p' }, { "int *", 'p' },
		{ "struct foo *", 'p' }, { "const struct character *", 'p' },
		{ "float", 'f' }, { "double", 'f' }, { "long double", 'f' },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct kprobes_tp_arg a = { "x", cases[i].type, 8 };

		cr_expect_eq(kprobes_tp_arg_kind(&a), cases[i].kind, "\"%s\": '%c', want '%c'",
			     cases[i].type, kprobes_tp_arg_kind(&a), cases[i].kind);
	}
}

Test(tracepoint, arguments)
{
	struct kprobes_tracepoint *tp = &KPROBES_TP_DESC(tpt, six);
	static int object;
	const char *str = "hello, tracepoint";
	int tag;
	union tp_val v;

	got_calls = 0;
	fire_six(1, 2, 3, "x", 4.0, NULL);
	cr_assert_eq(got_calls, 0);
	cr_assert_eq(kprobes_tracepoint_attach(tp, record, &tag), 0);
	cr_assert(static_branch_value(&tp->key));
	fire_six(-5, -1234567890123L, 4000000000u, str, -2.75, &object);
	cr_assert_eq(got_calls, 1);
	cr_assert_eq(got_tp, tp);
	cr_assert_eq(got_data, &tag);
	cr_assert_eq(got_n, 6);
	/* raw: zero-extended */
	cr_expect_eq(got[0], (uint64_t)(uint32_t)-5, "int raw %#lx", (unsigned long)got[0]);
	cr_expect_eq(got[2], 4000000000u);
	v = decode_arg(&tp->args[0], got[0]);
	cr_expect_eq(v.s, -5);
	v = decode_arg(&tp->args[1], got[1]);
	cr_expect_eq(v.s, -1234567890123L);
	v = decode_arg(&tp->args[2], got[2]);
	cr_expect_eq(v.u, 4000000000u);
	v = decode_arg(&tp->args[3], got[3]);
	cr_expect_eq(v.str, str);
	cr_expect_str_eq(v.str, "hello, tracepoint");
	v = decode_arg(&tp->args[4], got[4]);
	cr_expect_eq(v.f, -2.75);
	v = decode_arg(&tp->args[5], got[5]);
	cr_expect_eq(v.p, &object);

	fire_six(INT32_MIN, LONG_MAX, 0, "", 1e300, (void *)-1L);
	cr_assert_eq(got_calls, 2);
	cr_expect_eq(decode_arg(&tp->args[0], got[0]).s, INT32_MIN);
	cr_expect_eq(decode_arg(&tp->args[1], got[1]).s, LONG_MAX);
	cr_expect_eq(got[2], 0);
	cr_expect_str_eq((const char *)(uintptr_t)got[3], "");
	cr_expect_eq(decode_arg(&tp->args[4], got[4]).f, 1e300);
	cr_expect_eq(got[5], UINT64_MAX);

	cr_assert_eq(kprobes_tracepoint_detach(tp, record, &tag), 0);
	cr_assert_not(static_branch_value(&tp->key));
	fire_six(1, 2, 3, "x", 4.0, NULL);
	cr_assert_eq(got_calls, 2);
}

Test(tracepoint, small_and_float_arguments)
{
	struct kprobes_tracepoint *tp = &KPROBES_TP_DESC(tpt, small);
	static const char kinds[] = "sufusu";
	static const unsigned sizes[] = { 2, 1, 4, 8, 1, 8 };

	for (int i = 0; i < 6; i++) {
		cr_expect_eq(kprobes_tp_arg_kind(&tp->args[i]), kinds[i], "arg %d (%s)", i,
			     tp->args[i].type);
		cr_expect_eq(tp->args[i].size, sizes[i], "arg %d", i);
	}
	cr_assert_eq(kprobes_tracepoint_attach(tp, record, NULL), 0);
	got_calls = 0;
	fire_small(-300, 250, 1.5f, (size_t)-1, -7, 0x8000000000000001ull);
	cr_assert_eq(got_calls, 1);
	cr_expect_eq(got[0], 0xfed4u, "short raw %#lx", (unsigned long)got[0]);
	cr_expect_eq(decode_arg(&tp->args[0], got[0]).s, -300);
	cr_expect_eq(got[1], 250);
	cr_expect_eq(decode_arg(&tp->args[2], got[2]).f, 1.5);
	cr_expect_eq(got[2] >> 32, 0, "float raw %#lx", (unsigned long)got[2]);
	cr_expect_eq(got[3], UINT64_MAX);
	cr_expect_eq(got[4], 0xf9);
	cr_expect_eq(decode_arg(&tp->args[4], got[4]).s, -7);
	cr_expect_eq(got[5], 0x8000000000000001ull);
	cr_assert_eq(kprobes_tracepoint_detach(tp, record, NULL), 0);
}

static int count_a, count_b;

static void add_a(struct kprobes_tracepoint *tp, const uint64_t *args, void *data)
{
	count_a += (int)args[0];
}

static void add_b(struct kprobes_tracepoint *tp, const uint64_t *args, void *data)
{
	count_b += (int)args[0] * (int)(intptr_t)data;
}

Test(tracepoint, several_handlers)
{
	struct kprobes_tracepoint *tp = &KPROBES_TP_DESC(tpt, one);

	cr_assert_eq(kprobes_tracepoint_attach(tp, add_a, NULL), 0);
	cr_assert_eq(kprobes_tracepoint_attach(tp, add_b, (void *)10), 0);
	/* the same function with other data is another attachment */
	cr_assert_eq(kprobes_tracepoint_attach(tp, add_b, (void *)100), 0);
	cr_assert_eq(tp->key.key.enabled, 3);
	fire_one(1);
	cr_assert_eq(count_a, 1);
	cr_assert_eq(count_b, 110);
	cr_assert_eq(kprobes_tracepoint_detach(tp, add_b, (void *)10), 0);
	cr_assert(static_branch_value(&tp->key));
	fire_one(2);
	cr_assert_eq(count_a, 3);
	cr_assert_eq(count_b, 310);
	cr_assert_eq(kprobes_tracepoint_detach(tp, add_a, NULL), 0);
	cr_assert(static_branch_value(&tp->key));
	fire_one(1);
	cr_assert_eq(count_a, 3);
	cr_assert_eq(count_b, 410);
	cr_assert_eq(kprobes_tracepoint_detach(tp, add_b, (void *)100), 0);
	cr_assert_not(static_branch_value(&tp->key));
	cr_assert_eq(tp->key.key.enabled, 0);
	fire_one(1);
	cr_assert_eq(count_a + count_b, 413);
	cr_assert_eq(tp->nmissed, 0);
}

Test(tracepoint, errors)
{
	struct kprobes_tracepoint *tp = &KPROBES_TP_DESC(tpt, one);
	struct kprobes_tracepoint fake;

	cr_assert_eq(kprobes_tracepoint_attach(NULL, add_a, NULL), -EINVAL);
	cr_assert_eq(kprobes_tracepoint_detach(NULL, add_a, NULL), -EINVAL);
	cr_assert_eq(kprobes_tracepoint_attach(tp, NULL, NULL), -EINVAL);
	cr_assert_eq(kprobes_tracepoint_detach(tp, NULL, NULL), -EINVAL);
	memset(&fake, 0, sizeof(fake));
	fake.provider = "x";
	fake.name = "y";
	cr_assert_eq(kprobes_tracepoint_attach(&fake, add_a, NULL), -EINVAL);
	cr_assert_eq(kprobes_tracepoint_detach(tp, add_a, NULL), -ENOENT);
	cr_assert_eq(kprobes_tracepoint_attach(tp, add_a, NULL), 0);
	cr_assert_eq(kprobes_tracepoint_attach(tp, add_a, NULL), -EEXIST);
	cr_assert_eq(tp->key.key.enabled, 1);
	cr_assert_eq(kprobes_tracepoint_detach(tp, add_a, (void *)1), -ENOENT);
	cr_assert_eq(kprobes_tracepoint_detach(tp, add_b, NULL), -ENOENT);
	cr_assert_eq(kprobes_tracepoint_detach(tp, add_a, NULL), 0);
	cr_assert_eq(kprobes_tracepoint_detach(tp, add_a, NULL), -ENOENT);
	cr_assert_eq(tp->key.key.enabled, 0);
	cr_assert_not(static_branch_value(&tp->key));
}

/* A handler that passes its own tracepoint again: the inner hit runs no
 * handler and counts in nmissed. */
static int recur_calls;

void fire_recur(int depth);
TEST_FN void fire_recur(int depth)
{
	trace_tpt_recur(depth);
}

static void recur_handler(struct kprobes_tracepoint *tp, const uint64_t *args, void *data)
{
	recur_calls++;
	if ((int)args[0] < 3)
		fire_recur((int)args[0] + 1);
}

Test(tracepoint, recursion_counts_nmissed)
{
	struct kprobes_tracepoint *tp = &KPROBES_TP_DESC(tpt, recur);

	cr_assert_eq(kprobes_tracepoint_attach(tp, recur_handler, NULL), 0);
	fire_recur(0);
	cr_assert_eq(recur_calls, 1);
	cr_assert_eq(tp->nmissed, 1);
	for (int i = 0; i < 10; i++)
		fire_recur(0);
	cr_assert_eq(recur_calls, 11);
	cr_assert_eq(tp->nmissed, 11);
	fire_recur(3);
	cr_assert_eq(recur_calls, 12);
	cr_assert_eq(tp->nmissed, 11);
	cr_assert_eq(kprobes_tracepoint_detach(tp, recur_handler, NULL), 0);
}

/* A tracepoint passed inside a probe handler is a miss as well. */
static int probe_pre(struct kprobe *p, struct pt_regs *regs)
{
	fire_one(5);
	return 0;
}

long probed(long x);
TEST_FN long probed(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}

Test(tracepoint, inside_a_probe_handler)
{
	struct kprobes_tracepoint *tp = &KPROBES_TP_DESC(tpt, one);
	struct kprobe kp = { .addr = (kprobe_opcode_t *)probed, .pre_handler = probe_pre };

	count_a = 0;
	cr_assert_eq(kprobes_tracepoint_attach(tp, add_a, NULL), 0);
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert_eq(probed(1), 2);
	cr_assert_eq(count_a, 0);
	cr_assert_eq(tp->nmissed, 1);
	unregister_kprobe(&kp);
	fire_one(5);
	cr_assert_eq(count_a, 5);
	cr_assert_eq(kprobes_tracepoint_detach(tp, add_a, NULL), 0);
}

/* Exact counts from many threads. */
static struct kprobes_tracepoint *const busy_tp = &KPROBES_TP_DESC(tpt, busy);

void fire_busy(long n);
TEST_FN void fire_busy(long n)
{
	trace_tpt_busy(n);
}

static void busy_count(struct kprobes_tracepoint *tp, const uint64_t *args, void *data)
{
	__atomic_fetch_add((long *)data, (long)args[0], __ATOMIC_RELAXED);
}

#define COUNT_ITERS 200000

static void *count_thread(void *arg)
{
	for (int i = 0; i < COUNT_ITERS; i++)
		fire_busy(1);
	return NULL;
}

Test(tracepoint, exact_counts_from_threads)
{
	pthread_t th[4];
	long sum = 0;

	cr_assert_eq(kprobes_tracepoint_attach(busy_tp, busy_count, &sum), 0);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, count_thread, NULL), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	cr_assert_eq(kprobes_tracepoint_detach(busy_tp, busy_count, &sum), 0);
	cr_assert_eq(sum, 4L * COUNT_ITERS);
	cr_assert_eq(busy_tp->nmissed, 0);
}

/* Detach while other threads fire continuously, then free the handler's
 * data at once: after detach returns the handler does not run (ASan
 * reports any late access). */
struct busy_data {
	long hits;
	char pad[64];
};

static void busy_handler(struct kprobes_tracepoint *tp, const uint64_t *args, void *data)
{
	struct busy_data *d = data;

	__atomic_fetch_add(&d->hits, 1, __ATOMIC_RELAXED);
	memset(d->pad, (int)args[0], sizeof(d->pad));
}

static int busy_stop;
static struct busy_data *volatile busy_now;

static void *busy_firer(void *arg)
{
	long n = 0;

	while (!__atomic_load_n(&busy_stop, __ATOMIC_ACQUIRE)) {
		fire_busy(n & 0x7f);
		n++;
	}
	return (void *)n;
}

Test(tracepoint, detach_while_firing_then_free)
{
	pthread_t th[4];
	long fired = 0, hits = 0;
	void *n;

	for (int i = 0; i < 4; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, busy_firer, NULL), 0);
	for (int round = 0; round < 100; round++) {
		struct busy_data *d = calloc(1, sizeof(*d)), *d2 = calloc(1, sizeof(*d2));
		struct timespec ts = { 0, 200000 };

		cr_assert_eq(kprobes_tracepoint_attach(busy_tp, busy_handler, d), 0);
		if (round & 1)
			cr_assert_eq(kprobes_tracepoint_attach(busy_tp, busy_handler, d2), 0);
		nanosleep(&ts, NULL);
		cr_assert_eq(kprobes_tracepoint_detach(busy_tp, busy_handler, d), 0);
		hits += d->hits;
		/* poison, then free: a handler still running on d would
		 * show up as a use after free under ASan, or here */
		memset(d, 0xa5, sizeof(*d));
		free(d);
		if (round & 1) {
			cr_assert_eq(kprobes_tracepoint_detach(busy_tp, busy_handler, d2), 0);
			memset(d2, 0x5a, sizeof(*d2));
		}
		free(d2);
	}
	__atomic_store_n(&busy_stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], &n);
		fired += (long)n;
	}
	cr_log_info("%ld fired, %ld handled", fired, hits);
	cr_assert_gt(hits, 0);
	cr_assert_not(static_branch_value(&busy_tp->key));
}

/* ------------------------------------------------------------------ */
/* kprobes_list() and foreach                                          */
/* ------------------------------------------------------------------ */

/* The lines of kprobes_list() that mention what. */
static int list_lines(const char *what, char lines[][256], int max)
{
	char *buf = NULL, *save, *line;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int n = 0;

	cr_assert_not_null(f);
	cr_assert_eq(kprobes_list(f), 0);
	fclose(f);
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (strstr(line, what)) {
			if (n < max)
				snprintf(lines[n], 256, "%s", line);
			n++;
		}
	free(buf);
	return n;
}

static void nop_handler(struct kprobes_tracepoint *tp, const uint64_t *args, void *data)
{
}

Test(tracepoint, list_line)
{
	struct kprobes_tracepoint *tp = &KPROBES_TP_DESC(tpt, listed);
	char lines[4][256], want[256];

	cr_assert_eq(list_lines("tpt:", lines, 4), 0);
	cr_assert_eq(kprobes_tracepoint_attach(tp, nop_handler, NULL), 0);
	cr_assert_eq(kprobes_tracepoint_attach(tp, nop_handler, (void *)1), 0);
	snprintf(want, sizeof(want), "%016lx  t  tpt:listed", (unsigned long)tp);
	cr_assert_eq(list_lines("tpt:", lines, 4), 1);
	cr_assert_str_eq(lines[0], want);
	cr_assert_eq(kprobes_tracepoint_detach(tp, nop_handler, NULL), 0);
	cr_assert_eq(list_lines("tpt:", lines, 4), 1);
	cr_assert_eq(kprobes_tracepoint_detach(tp, nop_handler, (void *)1), 0);
	cr_assert_eq(list_lines("tpt:", lines, 4), 0);
}

struct seen {
	int tpt, plugin;
	bool exe_object_empty;
	char plugin_object[PATH_MAX];
};

static int see(struct kprobes_tracepoint *tp, const char *object, void *arg)
{
	struct seen *s = arg;

	if (!strcmp(tp->provider, "tpt")) {
		s->tpt++;
		s->exe_object_empty = !*object;
	}
	if (!strcmp(tp->provider, "jlplugin")) {
		s->plugin++;
		snprintf(s->plugin_object, sizeof(s->plugin_object), "%s", object);
	}
	return 0;
}

static int stop_at_second(struct kprobes_tracepoint *tp, const char *object, void *arg)
{
	return ++*(int *)arg == 2 ? 42 : 0;
}

static void *plugin_open(void)
{
	char exe[PATH_MAX - 64], path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	void *h;

	cr_assert_gt(n, 0);
	exe[n] = 0;
	*strrchr(exe, '/') = 0;
	snprintf(path, sizeof(path), "%s/../tests/jl/libjlplugin.so", exe);
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	cr_assert_not_null(h, "%s", dlerror());
	return h;
}

Test(tracepoint, foreach_and_shared_objects)
{
	struct seen s = { 0 };
	struct kprobes_tracepoint *tp;
	char lines[4][256], want[256];
	int calls = 0;
	void *h;

	cr_assert_eq(kprobes_tracepoint_foreach(see, &s), 0);
	cr_assert_eq(s.tpt, 6);
	cr_assert(s.exe_object_empty);
	cr_assert_eq(s.plugin, 0);
	cr_assert_eq(kprobes_tracepoint_foreach(stop_at_second, &calls), 42);
	cr_assert_eq(calls, 2);

	h = plugin_open();
	memset(&s, 0, sizeof(s));
	cr_assert_eq(kprobes_tracepoint_foreach(see, &s), 0);
	cr_assert_eq(s.tpt, 6);
	cr_assert_eq(s.plugin, 1);
	cr_assert(strstr(s.plugin_object, "libjlplugin.so"), "object \"%s\"", s.plugin_object);
	tp = kprobes_tracepoint_find("jlplugin", "event");
	cr_assert_not_null(tp);
	cr_assert_eq(tp->nargs, 2);
	cr_assert_eq(kprobes_tp_arg_kind(&tp->args[0]), 's');
	cr_assert_eq(kprobes_tp_arg_kind(&tp->args[1]), 'S');

	cr_assert_eq(list_lines("jlplugin:", lines, 4), 0);
	cr_assert_eq(kprobes_tracepoint_attach(tp, nop_handler, NULL), 0);
	snprintf(want, sizeof(want), "%016lx  t  jlplugin:event  [libjlplugin.so]",
		 (unsigned long)tp);
	cr_assert_eq(list_lines("jlplugin:", lines, 4), 1);
	cr_assert_str_eq(lines[0], want);
	cr_assert_eq(kprobes_tracepoint_detach(tp, nop_handler, NULL), 0);
	cr_assert_eq(list_lines("jlplugin:", lines, 4), 0);

	cr_assert_eq(dlclose(h), 0);
	memset(&s, 0, sizeof(s));
	cr_assert_eq(kprobes_tracepoint_foreach(see, &s), 0);
	cr_assert_eq(s.plugin, 0);
	cr_assert_null(kprobes_tracepoint_find("jlplugin", "event"));
	cr_assert_eq(list_lines("jlplugin:", lines, 4), 0);
}

/* A tracepoint of an object built at -O0. */
static long o0_a;
static char o0_b[32];

static void o0_handler(struct kprobes_tracepoint *tp, const uint64_t *args, void *data)
{
	o0_a = (long)args[0];
	snprintf(o0_b, sizeof(o0_b), "%s", (const char *)(uintptr_t)args[1]);
}

Test(tracepoint, in_an_object_built_at_O0)
{
	char exe[PATH_MAX - 64], path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	struct kprobes_tracepoint *tp;
	jl_o0_fire_fn fire;
	void *h;

	cr_assert_gt(n, 0);
	exe[n] = 0;
	*strrchr(exe, '/') = 0;
	snprintf(path, sizeof(path), "%s/../tests/jl/libjlo0.so", exe);
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	cr_assert_not_null(h, "%s", dlerror());
	fire = (jl_o0_fire_fn)dlsym(h, "o0_fire");
	cr_assert_not_null(fire);
	tp = kprobes_tracepoint_find("jlo0", "hit");
	cr_assert_not_null(tp);
	fire(1, "no");
	cr_assert_eq(o0_a, 0);
	cr_assert_eq(kprobes_tracepoint_attach(tp, o0_handler, NULL), 0);
	fire(-3, "zero");
	cr_assert_eq(o0_a, -3);
	cr_assert_str_eq(o0_b, "zero");
	cr_assert_eq(kprobes_tracepoint_detach(tp, o0_handler, NULL), 0);
	fire(8, "no");
	cr_assert_eq(o0_a, -3);
	cr_assert_eq(dlclose(h), 0);
}

/* Two threads attach and detach their own handlers on one tracepoint
 * while two others fire it: every attachment sees its own hits only, and
 * the key is off at the end. */
static void own_count(struct kprobes_tracepoint *tp, const uint64_t *args, void *data)
{
	__atomic_fetch_add((long *)data, 1, __ATOMIC_RELAXED);
}

static void *churner(void *arg)
{
	long fails = 0;

	for (int i = 0; i < 200; i++) {
		long *mine = malloc(sizeof(*mine));

		*mine = 0;
		fails += kprobes_tracepoint_attach(busy_tp, own_count, mine) != 0;
		sched_yield();
		fails += kprobes_tracepoint_detach(busy_tp, own_count, mine) != 0;
		fails += *mine < 0;
		free(mine);
	}
	return (void *)fails;
}

Test(tracepoint, attach_detach_from_threads_while_firing)
{
	pthread_t f[2], c[2];
	void *r;

	busy_stop = 0;
	for (int i = 0; i < 2; i++)
		cr_assert_eq(pthread_create(&f[i], NULL, busy_firer, NULL), 0);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(pthread_create(&c[i], NULL, churner, NULL), 0);
	for (int i = 0; i < 2; i++) {
		pthread_join(c[i], &r);
		cr_expect_eq((long)r, 0, "churner %d: %ld failures", i, (long)r);
	}
	__atomic_store_n(&busy_stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 2; i++)
		pthread_join(f[i], NULL);
	cr_assert_eq(busy_tp->key.key.enabled, 0);
	cr_assert_not(static_branch_value(&busy_tp->key));
	cr_assert_null(busy_tp->__handlers);
}
