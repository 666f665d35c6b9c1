/* The static-key rows of kprobes-bench: a site that is off (against the
 * same loop without it), a site that is on (its out-of-line call), a
 * tracepoint with an empty handler, and the time to switch a key that has
 * 100 sites. */
#include <kprobes/tracepoint.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "bench.h"

DEFINE_STATIC_KEY_FALSE(bench_key);
DEFINE_STATIC_KEY_FALSE(bench_key100);
KPROBES_TRACEPOINT(bench, tp, (long, i));

static volatile long jl_sink;

void bench_jl_handler(long i);
__attribute__((noinline)) void bench_jl_handler(long i)
{
	asm volatile("" : : "r"(i));
}

void loop_empty(long n)
{
	for (long i = 0; i < n; i++)
		asm volatile("" : "+r"(i));
}

/* The same loop with one site: a 5-byte NOP when off. */
void loop_jl(long n)
{
	for (long i = 0; i < n; i++) {
		if (static_branch_unlikely(&bench_key))
			bench_jl_handler(i);
		asm volatile("" : "+r"(i));
	}
}

void loop_tp(long n)
{
	for (long i = 0; i < n; i++) {
		trace_bench_tp(i);
		asm volatile("" : "+r"(i));
	}
}

int jl_on_setup(void)
{
	return static_branch_enable(&bench_key);
}

void jl_on_teardown(void)
{
	static_branch_disable(&bench_key);
}

static void tp_empty(struct kprobes_tracepoint *tp, const uint64_t *args, void *data)
{
}

int tp_on_setup(void)
{
	return kprobes_tracepoint_attach(&KPROBES_TP_DESC(bench, tp), tp_empty, NULL);
}

void tp_on_teardown(void)
{
	kprobes_tracepoint_detach(&KPROBES_TP_DESC(bench, tp), tp_empty, NULL);
}

/* 100 sites of one key, never run: what a switch rewrites. */
#define SITE if (static_branch_unlikely(&bench_key100)) jl_sink++;
#define SITE10 SITE SITE SITE SITE SITE SITE SITE SITE SITE SITE
void bench_jl_sites100(void);
__attribute__((noinline, used)) void bench_jl_sites100(void)
{
	SITE10 SITE10 SITE10 SITE10 SITE10 SITE10 SITE10 SITE10 SITE10 SITE10
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Median microseconds of one switch (enable or disable) of a key with 100
 * sites; NAN on failure. */
double jl_toggle_us(void)
{
	enum { N = 41 };
	double us[N];

	for (int i = 0; i < N; i++) {
		struct timespec t0, t1;
		int err;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		err = i % 2 ? static_branch_disable(&bench_key100) : static_branch_enable(&bench_key100);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (err)
			return NAN;
		us[i] = (t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3;
	}
	static_branch_disable(&bench_key100);
	qsort(us, N, sizeof(us[0]), cmp);
	return us[N / 2];
}
