/* kprobes-soak: libkprobes under continuous load for minutes.
 *
 *   kprobes-soak [--seconds N] [--threads N] [--seed N] [--signal-us N]
 *                [--fork-ms N] [--progress N] [--plugin PATH]
 *
 * Workers hammer probed functions while signals interrupt them, they fork,
 * exec and spawn, a plugin is loaded and unloaded, and probes come and go
 * and get optimized and unoptimized.  At the end: steady probes' hits
 * equal the calls exactly, churn intervals were plausible, no handler saw
 * anything unexpected, and the library's resources, malloc'd memory and
 * file descriptors are back to their baselines.  Exit 0 only then.
 * docs/soak.md describes the checks.
 */
#include <dirent.h>
#include <link.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <spawn.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "soak_probes.h"
#include "core/stats.h"
#include "elf/symbols.h"

struct opts opt = {
	.seconds = 30, .threads = 4, .seed = 1, .signal_us = 500, .fork_ms = 400,
	.progress_s = 5,
};
volatile int stop_all;
struct worker workers[MAX_WORKERS + 1];
int nworkers_counted;
struct totals tot;

/* A malloc'd-bytes difference at the end within this bound is not a leak:
 * see leak_check(). */
#ifndef MEM_TOLERANCE
#define MEM_TOLERANCE (64 * 1024L)
#endif

uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x2545f4914f6cdd1dULL;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Sleeps the whole time even when signals interrupt it. */
void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* ---- options ---- */

static void usage(void)
{
	fprintf(stderr, "usage: kprobes-soak [--seconds N] [--threads N] [--seed N] "
		"[--signal-us N] [--fork-ms N] [--progress N] [--plugin PATH]\n"
		"                    [--no churn,dl,opt] [--verbose]\n");
	exit(2);
}

/* --no churn,dl,opt: leave parts out, to narrow a failure down. */
static void parse_no(const char *v)
{
	opt.no_churn = strstr(v, "churn") != NULL;
	opt.no_dl = strstr(v, "dl") != NULL;
	opt.no_opt = strstr(v, "opt") != NULL;
}

static char self_path[PATH_MAX], plugin_path[PATH_MAX + 32];

static void parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--verbose")) {
			opt.verbose = true;
			continue;
		}
		if (!v)
			usage();
		i++;
		if (!strcmp(a, "--seconds"))
			opt.seconds = atoi(v);
		else if (!strcmp(a, "--threads"))
			opt.threads = atoi(v);
		else if (!strcmp(a, "--seed"))
			opt.seed = strtoul(v, NULL, 0);
		else if (!strcmp(a, "--signal-us"))
			opt.signal_us = atoi(v);
		else if (!strcmp(a, "--fork-ms"))
			opt.fork_ms = atoi(v);
		else if (!strcmp(a, "--progress"))
			opt.progress_s = atoi(v);
		else if (!strcmp(a, "--plugin"))
			opt.plugin = v;
		else if (!strcmp(a, "--no"))
			parse_no(v);
		else
			usage();
	}
	if (opt.threads < 1 || opt.threads > MAX_WORKERS || opt.seconds < 1 || opt.progress_s < 1)
		usage();
}

/* The plugin sits next to the binary: $(B)/kprobes-soak, $(B)/soak/. */
static void find_paths(void)
{
	ssize_t n = readlink("/proc/self/exe", self_path, sizeof(self_path) - 1);
	char dir[PATH_MAX];

	if (n <= 0) {
		perror("readlink /proc/self/exe");
		exit(2);
	}
	self_path[n] = 0;
	opt.self = self_path;
	if (!opt.plugin) {
		snprintf(dir, sizeof(dir), "%s", self_path);
		snprintf(plugin_path, sizeof(plugin_path), "%s/soak/libsoakplugin.so", dirname(dir));
		opt.plugin = plugin_path;
	}
	if (access(opt.plugin, R_OK)) {
		fprintf(stderr, "kprobes-soak: no plugin at %s (--plugin PATH)\n", opt.plugin);
		exit(2);
	}
}

/* ---- baselines ---- */

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static bool stats_equal(const struct kp_stats *a, const struct kp_stats *b)
{
	return a->probepoints == b->probepoints && a->xol_slots == b->xol_slots &&
	       a->retired_slots == b->retired_slots && a->detours == b->detours &&
	       a->rp_pools == b->rp_pools;
}

static void stats_print(const char *what, const struct kp_stats *s)
{
	printf("%-10s probepoints %lu  xol_slots %lu  retired_slots %lu  detours %lu  rp_pools %lu\n",
	       what, s->probepoints, s->xol_slots, s->retired_slots, s->detours, s->rp_pools);
}

/* Past the 20 ms quarantine, reclaims until the counters are back to the
 * baseline (or give up after ~2.5 s: a leak). */
static bool settle(const struct kp_stats *base, struct kp_stats *now)
{
	for (int i = 0; i < 100; i++) {
		sleep_us(25000);
		kp_reclaim_now();
		kp_get_stats(now);
		if (stats_equal(now, base))
			return true;
	}
	return false;
}

static void *nop_thread(void *arg)
{
	return arg;
}

/* The library builds an object's symbol and function-bounds tables the
 * first time it needs them and keeps them while the object stays loaded
 * (libc's are some 100 KiB): which objects had theirs built by the end
 * depends on what the handler analysis happened to follow, so they are
 * all built before the baseline. */
static int warm_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct ksym sym;

	(void)size;
	(void)arg;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t at = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || !ph->p_memsz)
			continue;
		ksym_lookup_addr(at + ph->p_memsz / 2, &sym);
		ksym_lookup_unsized(at + ph->p_memsz / 2, &sym);	/* and the FDEs */
	}
	return 0;
}

static void warm_object_tables(void)
{
	struct ksym sym;

	ksym_lookup_name("kprobes_soak_no_such_symbol", &sym);
	dl_iterate_phdr(warm_object, NULL);
}

/* One-time state is created here, before the memory and fd baselines:
 * /proc/self/mem, the optimizer thread, thread records, symbol tables,
 * glibc's thread-stack cache and dynamic-linker data, stdio buffers. */
static void warm_up(void)
{
	static struct worker local;
	uint64_t rng = opt.seed;
	pthread_t th[MAX_WORKERS + 8];

	worker_bind(&local);
	steady_register();
	for (int i = 0; i < 2000; i++)
		call_one(&local, (unsigned int)i % NFUNC, i);
	sleep_us(20000);
	steady_unregister();
	dl_cycle_once(&rng);
	for (int i = 0; i < opt.threads + 6; i++)
		pthread_create(&th[i], NULL, nop_thread, NULL);
	for (int i = 0; i < opt.threads + 6; i++)
		pthread_join(th[i], NULL);
	worker_bind(NULL);
	tot.dl_cycles = tot.dl_hits = tot.dl_gone_checked = 0;
	warm_object_tables();
}

/* ---- progress and hangs ---- */

static double t_start;

static unsigned long sum_loops(void)
{
	unsigned long n = 0;

	for (int i = 0; i < opt.threads; i++)
		n += ld(&workers[i].loops);
	return n;
}

static unsigned long sum_sigs(void)
{
	unsigned long n = 0;

	for (int i = 0; i < nworkers_counted; i++)
		n += ld(&workers[i].sigs[0]) + ld(&workers[i].sigs[1]);
	return n;
}

static void progress(void)
{
	struct kp_stats st;

	kp_get_stats(&st);
	printf("[%4.0fs] calls %lu  steady hits %lu  signals %lu  forks %lu execs %lu  "
	       "dl %lu  churn ops %lu intervals %lu  opt toggles %lu | pp %lu slots %lu "
	       "(retired %lu) detours %lu pools %lu | anomalies %lu\n",
	       now_s() - t_start, sum_loops(), steady_hits_total(), sum_sigs(), ld(&tot.forks),
	       ld(&tot.execs) + ld(&tot.spawns), ld(&tot.dl_cycles), ld(&tot.churn_ops),
	       ld(&tot.churn_intervals), ld(&tot.opt_toggles), st.probepoints, st.xol_slots,
	       st.retired_slots, st.detours, st.rp_pools, anomalies_total());
}

/* After a hang of this process or a child: every thread's stack and the
 * library's thread records inside a read-side section (those a grace period
 * waits for), from gdb if
 * there is one.  posix_spawn runs no fork handlers, which could wait on the
 * very lock that hangs. */
void hang_report(pid_t target)
{
	extern char **environ;
	char pid[16];
	char *argv[] = { "gdb", "-q", "-batch", "-p", pid, "-ex", "info threads",
			 "-ex", "thread apply all bt 30", "-ex", "p records_used",
			 "-ex", "python [print('record', i, r) for i in "
			 "range(int(gdb.parse_and_eval('records_used'))) "
			 "for r in [gdb.parse_and_eval('records')[i]] if int(r['nest'])]",
			 NULL };
	pid_t child;
	int status;

	snprintf(pid, sizeof(pid), "%d", (int)target);
	prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
	if (posix_spawnp(&child, "gdb", NULL, NULL, argv, environ)) {
		dprintf(2, "kprobes-soak: no gdb for a stack dump\n");
		return;
	}
	for (int i = 0; i < 600 && waitpid(child, &status, WNOHANG) == 0; i++)
		sleep_us(100000);
}

/* A thread of its own that takes no library lock: if the library hangs,
 * this still reports it and ends the process instead of hanging make. */
static void *watchdog_thread(void *arg)
{
	unsigned long last[3] = { 0 }, now[3];
	double since = now_s(), deadline = now_s() + opt.seconds + 120;

	while (!stop_all || now_s() < deadline) {
		sleep_us(1000000);
		now[0] = sum_loops();
		now[1] = ld(&tot.churn_ops);
		now[2] = ld(&tot.dl_cycles);
		if (stop_all || (now[0] != last[0] && now[1] != last[1] && now[2] != last[2])) {
			memcpy(last, now, sizeof(last));
			since = now_s();
		}
		if (now_s() - since > 60 || now_s() > deadline) {
			dprintf(2, "kprobes-soak: HANG: no progress for %.0f s (calls %lu, churn ops "
				"%lu, dl cycles %lu, stopping %d)\n", now_s() - since, now[0],
				now[1], now[2], stop_all);
			hang_report(getpid());
			_exit(3);
		}
	}
	return NULL;
}

/* ---- the run ---- */

static pthread_t th_signal, th_churn, th_opt, th_dl, th_watch;

static void run(void)
{
	double next;

	nworkers_counted = opt.threads + 1;
	workers[opt.threads].idx = opt.threads;
	steady_register();
	churn_init();
	t_start = now_s();
	workers_start();
	pthread_create(&th_dl, NULL, dl_thread, &workers[opt.threads]);
	pthread_create(&th_churn, NULL, churn_thread, NULL);
	pthread_create(&th_opt, NULL, optimizer_thread, NULL);
	pthread_create(&th_signal, NULL, signal_thread, NULL);
	pthread_create(&th_watch, NULL, watchdog_thread, NULL);
	next = t_start + opt.progress_s;
	while (now_s() < t_start + opt.seconds) {
		sleep_us(100000);
		if (now_s() >= next) {
			progress();
			if (opt.verbose)
				anomalies_print();
			next += opt.progress_s;
		}
	}
	stop_all = 1;
	workers_join();
	pthread_join(th_signal, NULL);
	pthread_join(th_dl, NULL);
	pthread_join(th_churn, NULL);
	pthread_join(th_opt, NULL);
	progress();
}

static void summary(double secs)
{
	unsigned long in_probed = 0, in_lib = 0, in_anon = 0, in_handler = 0, nested = 0;

	for (int i = 0; i < nworkers_counted; i++) {
		in_probed += workers[i].sig_in_probed;
		in_lib += workers[i].sig_in_lib;
		in_anon += workers[i].sig_in_anon;
		in_handler += workers[i].sig_in_handler;
		nested += workers[i].sig_nested;
	}
	printf("ran %.1f s, %d workers, seed %lu\n", secs, opt.threads, opt.seed);
	printf("calls %lu, steady hits %lu, churn hits %lu\n", sum_loops(), steady_hits_total(),
	       tot.churn_hits);
	printf("signals %lu: landed in probed code %lu, in libkprobes %lu, in slots/detours/stubs "
	       "%lu, in probe handlers %lu; nested %lu\n", sum_sigs(), in_probed, in_lib, in_anon,
	       in_handler, nested);
	printf("forks %lu (failed %lu), execs %lu (failed %lu), spawns %lu, hung children %lu\n",
	       tot.forks, tot.fork_fail, tot.execs, tot.exec_fail, tot.spawns, tot.child_hung);
	printf("dlopen/dlclose cycles %lu (GONE checked %lu), plugin hits %lu\n", tot.dl_cycles,
	       tot.dl_gone_checked, tot.dl_hits);
	printf("churn ops %lu, intervals %lu (lost-hit bound checked %lu), failing batches %lu\n",
	       tot.churn_ops, tot.churn_intervals, tot.churn_lower_checked, tot.churn_batch_fail_ok);
	printf("optimization toggles %lu, optimizer flushes %lu\n", tot.opt_toggles, tot.opt_flushes);
}

/* Counters back to the baseline; malloc'd bytes within MEM_TOLERANCE: the
 * run makes hundreds of thousands of registrations, so a leak of even one
 * byte per registration would exceed it, while glibc keeps a few KiB of
 * its own caches (dynamic linker, stdio) whose size varies run to run.
 * Not counted: what the library keeps for good once made (its executable
 * pools' bookkeeping and unwind tables, which grow to the run's high-water
 * mark of slots and detours) and the caches libgcc's unwinder builds for
 * those tables. */
static int leak_check(const struct kp_stats *base, size_t mem0, unsigned long kept0, int fd0)
{
	struct kp_stats st;
	bool ok = settle(base, &st);
	long kept = (long)st.kept_bytes - (long)kept0;
	long unw = soak_alloc_unwinder_growth();
	long dmem = (long)soak_live_bytes() - (long)mem0 - kept - unw;
	int fds = count_fds(), bad = 0;

	stats_print("baseline", base);
	stats_print("end", &st);
	printf("malloc'd bytes: baseline %zu, end %zu (%+ld; not counted: kept for good %+ld, "
	       "unwinder caches %+ld; tolerance %ld)\n", mem0, soak_live_bytes(), dmem, kept, unw,
	       MEM_TOLERANCE);
	printf("file descriptors: baseline %d, end %d\n", fd0, fds);
	if (!ok && ++bad)
		printf("FAIL: libkprobes resources did not return to the baseline\n");
	if ((dmem > MEM_TOLERANCE || dmem < -MEM_TOLERANCE) && ++bad) {
		printf("FAIL: malloc'd memory grew by %ld bytes\n", dmem);
		fflush(stdout);
		soak_alloc_report(stdout);
	}
	if (fds != fd0 && ++bad)
		printf("FAIL: %d file descriptors leaked\n", fds - fd0);
	return bad;
}

/* Every activity that was asked for happened at least once. */
static int coverage_check(void)
{
	bool ok = (opt.fork_ms <= 0 || (tot.forks && tot.execs)) &&
		  (opt.signal_us <= 0 || sum_sigs()) && (opt.no_dl || tot.dl_cycles) &&
		  (opt.no_churn || tot.churn_intervals) && (opt.no_opt || tot.opt_toggles);

	if (!ok)
		printf("FAIL: something never ran (forks %lu execs %lu signals %lu dl %lu "
		       "intervals %lu toggles %lu)\n", tot.forks, tot.execs, sum_sigs(),
		       tot.dl_cycles, tot.churn_intervals, tot.opt_toggles);
	return !ok + (opt.no_opt ? 0 : steady_check_optimized());
}

int main(int argc, char **argv)
{
	struct kp_stats base, now;
	unsigned long kept0;
	size_t mem0;
	int fd0, bad;
	double t0;

	if (argc == 2 && !strcmp(argv[1], "--exec-child"))
		return exec_child_main();
	parse_args(argc, argv);
	setvbuf(stdout, NULL, _IOLBF, 0);
	find_paths();
	targets_init();
	signals_install();
	kp_get_stats(&base);	/* before any probe */
	warm_up();
	kp_get_stats(&now);
	kept0 = now.kept_bytes;
	mem0 = soak_live_bytes();
	soak_alloc_mark();
	fd0 = count_fds();
	printf("kprobes-soak: %d s, %d workers, seed %lu, signal every %d us per thread, "
	       "process op every %d ms per worker\n", opt.seconds, opt.threads, opt.seed,
	       opt.signal_us, opt.fork_ms);
	t0 = now_s();
	run();
	summary(now_s() - t0);
	bad = steady_verify(true);
	bad += coverage_check();
	steady_unregister();
	bad += leak_check(&base, mem0, kept0, fd0);
	bad += anomalies_total() != 0;
	anomalies_print();
	printf("%s\n", bad ? "SOAK FAILED" : "SOAK PASSED");
	return bad ? 1 : 0;
}
