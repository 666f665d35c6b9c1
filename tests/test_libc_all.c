/*
 * Probe every function entry of libc.so.6 at once — breakpoints, then
 * jump-optimized — and run a workload through stdio, string, sorting,
 * formatting and memory functions: its output must be byte-identical to an
 * unprobed run, and the probes must really be hit.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "elf/symbols.h"

#define MAX_PROBES 6000
#define BATCH 64

static long hits;
static struct kprobe probes[MAX_PROBES];
static struct kprobe *ptrs[MAX_PROBES];
static int nprobes;

static int count_hit(struct kprobe *p, struct pt_regs *regs)
{
	__atomic_fetch_add(&hits, 1, __ATOMIC_RELAXED);
	return 0;
}

static int add_probe(const struct ksym *s, void *arg)
{
	if (!s->size || nprobes == MAX_PROBES)
		return 0;
	for (int i = nprobes - 1; i >= 0 && i >= nprobes - 8; i--)
		if ((uintptr_t)probes[i].addr == s->addr)
			return 0;
	probes[nprobes].addr = (kprobe_opcode_t *)s->addr;
	probes[nprobes].pre_handler = count_hit;
	ptrs[nprobes] = &probes[nprobes];
	nprobes++;
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

static void workload(char *out, size_t cap)
{
	char *buf = malloc(1000), tmp[128];
	int arr[200];
	size_t o = 0;
	FILE *f;

	for (int i = 0; i < 200; i++)
		arr[i] = (i * 7919) % 211;
	qsort(arr, 200, sizeof(int), cmp_int);
	for (int i = 0; i < 30; i++)
		o += snprintf(out + o, cap - o, "%d:%x:%5.2f:%s ", arr[i], arr[i] * 3, arr[i] / 3.0, "abc");
	strcpy(buf, "hello world");
	strcat(buf, " again");
	o += snprintf(out + o, cap - o, "[%s %zu %d %s]", buf, strlen(buf), strcmp(buf, "hello"),
		      strstr(buf, "wor"));
	snprintf(tmp, sizeof(tmp), "%e %g", 12345.678, 1e-7);
	o += snprintf(out + o, cap - o, "%s %ld %lu", tmp, strtol("12345", NULL, 10),
		      strtoul("ff", NULL, 16));
	f = fmemopen(tmp, sizeof(tmp), "w");
	fprintf(f, "%s-%d-%08.3f", "x", 42, 3.14159);
	fclose(f);
	o += snprintf(out + o, cap - o, " %s", tmp);
	buf = realloc(buf, 5000);
	memset(buf, 'z', 4999);
	buf[4999] = 0;
	o += snprintf(out + o, cap - o, " %zu", strlen(buf));
	free(buf);
}

static void probe_all_of_libc(bool optimize)
{
	static char want[8192], got[8192];
	int err, optimized = 0;
	double t_start, t_armed;

	kprobes_set_optimization(optimize);
	if (optimize && !kprobes_optimization())
		cr_skip_test("no jump optimization on this architecture");
	workload(want, sizeof(want));
	cr_assert_eq(ksym_foreach("libc.so.6", "*", add_probe, NULL), 0);
	cr_assert_gt(nprobes, 1000, "only %d functions in libc", nprobes);
	t_start = now_s();
	/* In batches of BATCH (one rewrite and one synchronization of the
	 * other threads per batch: one by one, thousands of them take a
	 * minute in an emulator), one by one in a batch that has a refused
	 * function: the few that are refused (the signal restorer, code that
	 * runs with every signal blocked as a thread starts and exits) are
	 * left out. */
	int refused = 0;

	for (int i = 0; i < nprobes; i += BATCH) {
		int n = nprobes - i < BATCH ? nprobes - i : BATCH;

		err = register_kprobes(ptrs + i, n);
		if (!err)
			continue;
		cr_assert_eq(err, -EINVAL, "register_kprobes: %d", err);
		for (int j = i; j < i + n; j++) {
			err = register_kprobe(ptrs[j]);
			if (err) {
				cr_assert_eq(err, -EINVAL, "register_kprobe: %d", err);
				refused++;
				probes[j] = probes[--nprobes];
				ptrs[j] = &probes[j];
				j--;
				n = nprobes - i < n ? nprobes - i : n;
			}
		}
	}
	cr_assert_lt(refused, 16, "%d libc functions refused", refused);
	for (int tries = 0; optimize && tries < 300; tries++) {
		optimized = 0;
		for (int i = 0; i < nprobes; i++)
			optimized += !!(probes[i].flags & KPROBE_FLAG_OPTIMIZED);
		if (optimized > nprobes * 9 / 10)
			break;
		usleep(10000);
	}
	hits = 0;
	t_armed = now_s();
	workload(got, sizeof(got));
	unregister_kprobes(ptrs, nprobes);
	cr_log_info("%d probes registered in %.1f s, the workload took %.1f s (%ld hits)",
		    nprobes, t_armed - t_start, now_s() - t_armed, hits);
	cr_assert_str_eq(got, want);
	cr_assert_gt(hits, 50, "only %ld hits", hits);
	if (optimize)
		cr_assert_gt(optimized, nprobes * 9 / 10, "%d of %d optimized", optimized, nprobes);
}

Test(libc_all, breakpoints, .timeout = 60 * KP_TEST_SLOWDOWN) { probe_all_of_libc(false); }
Test(libc_all, optimized, .timeout = 60 * KP_TEST_SLOWDOWN) { probe_all_of_libc(true); }
