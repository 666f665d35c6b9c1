/* The unwind rules cache of kprobes_stack() (src/core/stack.c): the walk
 * with it must equal the walk from the tables alone (kp_stack_uncached)
 *
 *  - at random instruction boundaries of libc functions, the first walk
 *    (filling the cache) and the second (from it) alike;
 *  - in many threads at once, while other threads load and unload a
 *    library (each time a new set of tables, with a new, empty cache);
 *  - after dlclose: a library loaded where another one was, whose code at
 *    the same address needs another rule, is unwound with its own. */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/internal.h"
#include "core/stack.h"
#include "elf/cfi.h"
#include "testutil.h"
#include "libc_workload.h"

TestSuite(cache, .timeout = 60);

#define MAXF 64
#define BARRIER() __asm__ volatile("" : : : "memory")
#define NOFP __attribute__((noinline, noclone, used, optimize("omit-frame-pointer")))

static bool same_stacks(const unsigned long *a, int na, const unsigned long *b, int nb)
{
	return na == nb && !memcmp(a, b, (size_t)na * sizeof(*a));
}

/* ---- random instruction boundaries of libc ---- */

static const char *const libc_fns[] = {
	"qsort_r", "strtod", "strtol", "snprintf", "vsnprintf", "getenv", "strtoul", "bsearch",
	"atoi", "strtok_r",
};

static struct kprobe libc_kps[24];
static long libc_hits, libc_diffs, libc_cached, libc_deep;


/* Whether a frame walked after the caller's (the pcs looked up are the
 * first ip and each return address - 1) shares the caller's cache slot. */
static bool slot_taken_deeper(const unsigned long *ips, int n)
{
	unsigned int slot = kp_stack_cache_slot(ips[1] - 1);

	for (int i = 2; i < n; i++)
		if (kp_stack_cache_slot(ips[i] - 1) == slot && ips[i] != ips[1])
			return true;
	return false;
}

static int libc_pre(struct kprobe *p, struct pt_regs *regs)
{
	unsigned long fill[MAXF], again[MAXF], tables[MAXF];
	int nf = kprobes_stack(regs, fill, MAXF);
	int na = kprobes_stack(regs, again, MAXF);
	int nt = kp_stack_uncached(regs, tables, MAXF);

	libc_hits++;
	if (!same_stacks(fill, nf, tables, nt) || !same_stacks(again, na, tables, nt))
		libc_diffs++;
	/* the caller's rule, unless a deeper frame's took its slot in the
	 * direct-mapped cache (where libc lands decides: ASLR) */
	if (nt > 2 && !slot_taken_deeper(tables, nt)) {
		libc_deep++;
		/* the caller's return address: its rule is cached now */
		if (kp_stack_cached_kind(tables[1] - 1) >= 0)
			libc_cached++;
	}
	return 0;
}

Test(cache, equals_tables_at_random_libc_instruction_boundaries)
{
	const char *env = getenv("KP_STACK_FUZZ_SEED");
	unsigned int seed = env ? (unsigned int)strtoul(env, NULL, 0) : (unsigned int)time(NULL);
	int placed = 0;

	cr_log_info("seed %#x (KP_STACK_FUZZ_SEED)", seed);
	srand(seed);
	for (int round = 0; round < 2; round++) {
		/* breakpoints at arbitrary boundaries, then whatever optimizes */
		kprobes_set_optimization(round == 1);
		placed = 0;
		for (int tries = 0; tries < 600 && placed < 24; tries++) {
			const char *name = libc_fns[rand() % (int)(sizeof(libc_fns) / sizeof(libc_fns[0]))];
			void *fn = dlsym(RTLD_DEFAULT, name);
			const ElfW(Sym) *sym;
			Dl_info di;

			if (!fn || !dladdr1(fn, &di, (void **)&sym, RTLD_DL_SYMENT) || !sym ||
			    !sym->st_size)
				continue;
			memset(&libc_kps[placed], 0, sizeof(libc_kps[placed]));
			libc_kps[placed].addr = (kprobe_opcode_t *)fn + rand() % sym->st_size;
			libc_kps[placed].pre_handler = libc_pre;
			if (register_kprobe(&libc_kps[placed]) == 0)
				placed++;
		}
		cr_assert_gt(placed, 0, "no probe placed in libc");
		for (int i = 0; i < 5; i++)
			libc_workload();
		for (int i = 0; i < placed; i++)
			unregister_kprobe(&libc_kps[i]);
	}
	cr_log_info("%ld hits, %ld of them deeper than two frames", libc_hits, libc_deep);
	cr_assert_gt(libc_hits, 0, "no probe was hit");
	cr_expect_eq(libc_diffs, 0, "%ld of %ld stacks differ from the tables' (seed %#x)",
		     libc_diffs, libc_hits, seed);
	cr_expect_eq(libc_cached, libc_deep, "the cache held no rule for %ld of %ld callers",
		     libc_deep - libc_cached, libc_deep);
}

/* ---- many threads, and tables replaced under them ---- */

static const char *test_lib(const char *name)
{
	static char path[2][PATH_MAX];
	static int k;
	char exe[PATH_MAX], *p = path[k++ & 1];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	cr_assert_gt(len, 0);
	exe[len] = 0;
	snprintf(p, PATH_MAX, "%s/../tests/%s", dirname(exe), name);
	cr_assert_eq(access(p, R_OK), 0, "%s missing (make it)", p);
	return p;
}

static volatile long sink;
static long thr_hits, thr_diffs;
static volatile int thr_stop;

long cache_leaf(long x);
NOFP long cache_leaf(long x)
{
	sink += x;
	BARRIER();
	return x + 1;
}

static int thr_pre(struct kprobe *p, struct pt_regs *regs)
{
	unsigned long a[MAXF], b[MAXF];
	int na = kprobes_stack(regs, a, MAXF), nb = kp_stack_uncached(regs, b, MAXF);

	__atomic_add_fetch(&thr_hits, 1, __ATOMIC_RELAXED);
	if (!same_stacks(a, na, b, nb))
		__atomic_add_fetch(&thr_diffs, 1, __ATOMIC_RELAXED);
	return 0;
}

/* Chains of three shapes of frame, to a random depth. */
NOFP long rec_a(long d, unsigned int *seed);
NOFP long rec_b(long d, unsigned int *seed);

long rec_c(long d, unsigned int *seed);
NOFP long rec_c(long d, unsigned int *seed)
{
	volatile char pad[200];
	long r;

	pad[0] = (char)d;
	r = d <= 0 ? cache_leaf(d) : rec_a(d - 1, seed);
	BARRIER();
	return r + pad[0];
}

NOFP long rec_b(long d, unsigned int *seed)
{
	volatile long pad[3];
	long r;

	pad[0] = d;
	r = d <= 0 ? cache_leaf(d) : (rand_r(seed) & 1 ? rec_c(d - 1, seed) : rec_a(d - 1, seed));
	BARRIER();
	return r + pad[0];
}

NOFP long rec_a(long d, unsigned int *seed)
{
	long r = d <= 0 ? cache_leaf(d) : (rand_r(seed) & 1 ? rec_b(d - 1, seed) : rec_c(d - 1, seed));

	BARRIER();
	return r + 1;
}

/* A comparison that hits the probe too: stacks through libc's sort, with
 * many more return addresses to cache (some of them sharing slots). */
static int thr_cmp(const void *a, const void *b, void *arg)
{
	cache_leaf(0);
	return *(const int *)a - *(const int *)b;
}

static void *thr_work(void *arg)
{
	unsigned int seed = (unsigned int)(uintptr_t)arg;
	int v[24];

	for (int i = 0; i < 3000; i++) {
		rec_a(rand_r(&seed) % 24, &seed);
		if (i % 16 == 0) {
			for (int k = 0; k < 24; k++)
				v[k] = (int)(rand_r(&seed) % 100);
			qsort_r(v, 24, sizeof(int), thr_cmp, NULL);
		}
	}
	return NULL;
}

/* Loads and unloads a library, the tables following it (as at a
 * registration, and after dlclose): each time a new set of tables is
 * published, with an empty cache, and the old one freed. */
static void *thr_churn(void *arg)
{
	const char *lib = arg;
	long *rounds = calloc(1, sizeof(*rounds));

	while (rounds && !__atomic_load_n(&thr_stop, __ATOMIC_ACQUIRE)) {
		void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);

		if (!h)
			break;
		kp_stack_tables_update();
		dlclose(h);
		++*rounds;
	}
	return rounds;
}

Test(cache, threads_while_tables_change)
{
	struct kprobe kp = { .addr = (void *)cache_leaf, .pre_handler = thr_pre };
	pthread_t th[8], churn;
	const char *lib = test_lib("libkpframe_a.so");
	long *rounds = NULL;

	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert_eq(pthread_create(&churn, NULL, thr_churn, (void *)lib), 0);
	for (int i = 0; i < 8; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, thr_work, (void *)(uintptr_t)(i + 1)), 0);
	for (int i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	__atomic_store_n(&thr_stop, 1, __ATOMIC_RELEASE);
	pthread_join(churn, (void **)&rounds);
	unregister_kprobe(&kp);
	cr_assert_not_null(rounds);
	cr_log_info("%ld hits, tables replaced %ld times", thr_hits, 2 * *rounds);
	cr_expect_gt(*rounds, 0, "the library was never loaded while the threads ran");
	free(rounds);
	cr_assert_gt(thr_hits, 8 * 3000);
	cr_expect_eq(thr_diffs, 0, "%ld of %ld stacks differ from the tables'", thr_diffs, thr_hits);
}

/* ---- the cache's slots under contention ----
 *
 * Threads write and read rules of pcs that all share one slot, as fast
 * as they can: a read must give the rule written for that pc, never one
 * written for another (a torn slot), or miss. */

static void *race_cache;
static long race_hits, race_wrong;

static uint32_t race_rule(uintptr_t pc)
{
	return (uint32_t)((pc * 0x9e3779b97f4a7c15ull) >> 32) | 1;
}

static void *race_work(void *arg)
{
	unsigned int seed = (unsigned int)(uintptr_t)arg;
	long hits = 0, wrong = 0;

	for (int i = 0; i < 300000; i++) {
		uintptr_t pc = 0x400123 + (uintptr_t)(rand_r(&seed) % 64) * KP_STACK_CACHE_SAME_SLOT;
		uint32_t r;

		if (kp_stack_cache_get(race_cache, pc, &r)) {
			hits++;
			wrong += r != race_rule(pc);
		}
		pc = 0x400123 + (uintptr_t)(rand_r(&seed) % 64) * KP_STACK_CACHE_SAME_SLOT;
		kp_stack_cache_put(race_cache, pc, race_rule(pc));
	}
	__atomic_add_fetch(&race_hits, hits, __ATOMIC_RELAXED);
	__atomic_add_fetch(&race_wrong, wrong, __ATOMIC_RELAXED);
	return NULL;
}

Test(cache, one_slot_written_by_many_threads)
{
	pthread_t th[6];

	race_cache = calloc(1, kp_stack_cache_bytes());
	cr_assert_not_null(race_cache);
	for (int i = 0; i < 6; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, race_work, (void *)(uintptr_t)(i + 1)), 0);
	for (int i = 0; i < 6; i++)
		pthread_join(th[i], NULL);
	free(race_cache);
	cr_log_info("%ld reads found their pc", race_hits);
	cr_assert_gt(race_hits, 0);
	cr_expect_eq(race_wrong, 0, "%ld of %ld reads gave another pc's rule", race_wrong, race_hits);
}

/* ---- dlclose, and another library at the same address ---- */

typedef long (*kpframe_cb)(long);

static unsigned long lib_ra;		/* the callback's return address, in the library */
static unsigned long dl_ips[MAXF], dl_tables[MAXF];
static int dl_n, dl_nt, dl_cached_kind;

static int dl_pre(struct kprobe *p, struct pt_regs *regs)
{
	dl_n = kprobes_stack(regs, dl_ips, MAXF);
	dl_nt = kp_stack_uncached(regs, dl_tables, MAXF);
	dl_cached_kind = kp_stack_cached_kind(lib_ra - 1);
	return 0;
}

long dl_callback(long x);
NOFP long dl_callback(long x)
{
	lib_ra = (unsigned long)__builtin_return_address(0);
	return cache_leaf(x);
}

long dl_drive(long (*call)(kpframe_cb, long), long x);
NOFP long dl_drive(long (*call)(kpframe_cb, long), long x)
{
	long r = call(dl_callback, x);

	BARRIER();
	return r + 1;
}

/* dl_drive's own return address into the library's caller, the frame
 * after the library's in a right stack. */
static bool in_drive(unsigned long a)
{
	return a > (unsigned long)dl_drive && a < (unsigned long)dl_drive + 256;
}

/* Runs the library's function a few times with the probe's handler
 * recording the stack; the library's load address in *base. */
static void *run_lib(const char *path, unsigned long *base)
{
	struct kprobe tables = { .addr = (void *)in_drive };
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	long (*call)(kpframe_cb, long);
	Dl_info di;

	cr_assert_not_null(h, "%s: %s", path, dlerror());
	*(void **)&call = dlsym(h, "kpframe_call");
	cr_assert_not_null(call);
	cr_assert(dladdr((void *)call, &di));
	*base = (unsigned long)di.dli_fbase;
	/* a registration builds the new library's tables */
	cr_assert_eq(register_kprobe(&tables), 0);
	unregister_kprobe(&tables);
	for (int i = 0; i < 3; i++)
		dl_drive(call, i);
	return h;
}

static void expect_right_stack(const char *which)
{
	int k;

	cr_expect(same_stacks(dl_ips, dl_n, dl_tables, dl_nt),
		  "%s: the cached walk (%d frames) differs from the tables' (%d)", which, dl_n, dl_nt);
	for (k = 0; k < dl_n && dl_ips[k] != lib_ra; k++)
		;
	cr_assert_lt(k + 1, dl_n, "%s: the library's frame is not in the stack", which);
	cr_expect(in_drive(dl_ips[k + 1]), "%s: after the library's frame %#lx, not its caller",
		  which, dl_ips[k + 1]);
	cr_expect_geq(dl_cached_kind, 0, "%s: the library's return address was not cached", which);
}

Test(cache, dlclose_and_another_library_at_the_same_address)
{
	struct kprobe kp = { .addr = (void *)cache_leaf, .pre_handler = dl_pre };
	unsigned long base_a, base_b, ra_a;
	void *h;

	kprobes_set_optimization(false);
	cr_assert_eq(register_kprobe(&kp), 0);
	h = run_lib(test_lib("libkpframe_a.so"), &base_a);
	ra_a = lib_ra;
	expect_right_stack("first library");
	dlclose(h);
	h = run_lib(test_lib("libkpframe_b.so"), &base_b);
	expect_right_stack("second library");
	dlclose(h);
	unregister_kprobe(&kp);
	if (base_a != base_b || ra_a != lib_ra)
		cr_skip_test("the second library was loaded at %#lx, not at the first's %#lx: "
			     "no stale rule could have been met", base_b, base_a);
}
