/* kprobe-bench-extra: what the kprobe tool adds per hit in the target, on
 * top of the probe itself, measured in one process with the agent's own
 * handlers and session memory:
 *
 *   probe_ns       a jump-optimized probe with an empty pre-handler
 *   count_extra    `kprobe count`'s handler, minus probe_ns
 *   trace_extra    `kprobe trace` with two arguments, minus probe_ns
 *   events_per_s   events per second one thread can put through a ring
 *                  to a reader thread without losing any
 *   ro_ns          a return probe with an empty handler (the kretprobe
 *                  `kprobe run` uses for uretprobe)
 *   prog_count     `kprobe run` of  @[tid] = count()  on the function
 *   prog_count_keyless  @ = count()  (the thread's shard of the map)
 *   prog_filter    a program whose filter is false (on arg0)
 *   prog_filter_tid  the same filter on tid, a source read without pt_regs
 *   prog_hist      @ = hist(arg0)
 *   prog_latency   the tid-keyed entry/return latency pattern, per call
 *   (whole ns per call, probe included: compare prog_count and
 *   prog_filter with probe_ns (`o`), prog_latency with ro_ns (`ro`))
 *   var_fetch      what fetching two variables by fetch plan adds per
 *                  hit: one probe, one handler writing one record, run
 *                  with no plan and with the two plans the tool compiles
 *                  for `h->len b` (a 4-byte field behind the pointer in
 *                  rdi, a register), difference of the medians
 *   usdt           ns per hit of `kprobe count` on an SDT probe site in
 *                  optimized code (a mid-function site: what the hit adds
 *                  to the loop around it), timed in turns with o,
 *                  kprobes-bench's row: ns per call of a function with an
 *                  empty optimized probe on its entry (bench_ref)
 *   usdt_trace     `kprobe trace` of the SDT site with its two register
 *                  operands (events that fit in the ring), next to the
 *                  same on a function entry
 *   clock          ns per read of the time stamps' clock (kp_cycles(),
 *                  what `nsecs` and record events read), reads back to
 *                  back: a read among other work costs less, as the
 *                  processor runs that work meanwhile
 *   prog_latency_floor  the least any code can make the latency pattern
 *                  cost a call here: an optimized entry probe and one on
 *                  the function's exit site (bench_lat: its way out is
 *                  not its first instruction), each with a handler that
 *                  reads the clock, the entry's storing it and the exit's
 *                  subtracting it, and nothing else; next to an empty
 *                  return probe on bench_lat's twin (ratio as prog_latency)
 *
 * Usage: kprobe-bench-extra [--json].  Medians of several runs. */
#include <fcntl.h>
#include <kprobes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "kp_arch.h"
#include "lang/lang.h"
#include "sdt_probe.h"
#include "spec.h"

#define CALLS 2000000
#define RUNS 7

long bench_target(long a, long b);
__attribute__((noinline, noclone, used)) long bench_target(long a, long b)
{
	__asm__ volatile("" ::: "memory");
	return a + b;
}

/* The same again: the reference probe (empty) sits here while a program
 * runs on bench_target, so that each program row is timed next to its
 * reference, run by run (ns_pair). */
long bench_ref(long a, long b);
__attribute__((noinline, noclone, used)) long bench_ref(long a, long b)
{
	__asm__ volatile("" ::: "memory");
	return a + b;
}

/* A function whose way out is not its first instruction (the branch's
 * target is), so that its exit site is a probepoint of its own, as in
 * most functions; and its twin, for the return probe timed in turns with
 * it (prog_latency_floor). */
long bench_lat(long a, long b);
__attribute__((noinline, noclone, used)) long bench_lat(long a, long b)
{
	if (a == -42)
		__asm__ volatile("" : "+r"(b));
	return a + b;
}

long bench_lat_ref(long a, long b);
__attribute__((noinline, noclone, used)) long bench_lat_ref(long a, long b)
{
	if (a == -42)
		__asm__ volatile("" : "+r"(b));
	return a + b;
}

struct bench_hdr {
	long pad;
	int len;
};

/* Takes a pointer: the field behind it is what var_fetch reads. */
long bench_struct(struct bench_hdr *h, long b);
__attribute__((noinline, noclone, used)) long bench_struct(struct bench_hdr *h, long b)
{
	__asm__ volatile("" ::: "memory");
	return h->len + b;
}

__attribute__((section(".probes"), used)) volatile unsigned short bench_sdt_semaphore;

/* An SDT probe site inside a loop of optimized code. */
long bench_sdt(long n);
__attribute__((noinline, noclone, used)) long bench_sdt(long n)
{
	long sum = 0;

	for (long i = 0; i < n; i++) {
		SDT_PROBE3(kprobe_bench, site, bench_sdt_semaphore, "r", i, "r", sum, "n", 1);
		sum += i;
	}
	return sum;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* ns per kp_cycles(), median of RUNS loops of CALLS reads; the sum keeps
 * the reads from being dropped. */
static double clock_read_ns(void)
{
	double t[RUNS];
	volatile uint64_t sink = 0;

	for (int r = 0; r < RUNS; r++) {
		uint64_t sum = 0;
		double t0 = now_s();

		for (long i = 0; i < CALLS; i++)
			sum += kp_cycles();
		t[r] = (now_s() - t0) * 1e9 / CALLS;
		sink += sum;
	}
	(void)sink;
	qsort(t, RUNS, sizeof(t[0]), cmp_double);
	return t[RUNS / 2];
}

/* The session memory, as the CLI makes it. */
static int shm_fd = -1;
static size_t shm_size;
static struct kps_map map;

static uint64_t ring_backlog(void)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < map.hdr->rings_hint; i++)
		n += __atomic_load_n(&map.rings[i].head, __ATOMIC_ACQUIRE) -
		     __atomic_load_n(&map.rings[i].tail, __ATOMIC_ACQUIRE);
	return n;
}

/* ns per call of bench_target (or bench_struct), median of RUNS.  With
 * chunk > 0 the calls come in bursts of chunk that fit in a ring, each
 * timed on its own after the reader has emptied the ring: an event's cost
 * without loss. */
enum bench_fn { FN_TARGET, FN_STRUCT };

static double ns_per_call_of(long chunk, enum bench_fn fn)
{
	static struct bench_hdr hdr = { 0, 42 };
	double v[RUNS];
	long sum = 0;

	for (int r = 0; r < RUNS; r++) {
		double busy = 0;

		for (long done = 0; done < CALLS;) {
			long n = chunk ? chunk : CALLS;
			double t0;

			while (chunk && ring_backlog())
				sched_yield();
			t0 = now_s();
			if (fn == FN_STRUCT)
				for (long i = 0; i < n; i++)
					sum += bench_struct(&hdr, i);
			else
				for (long i = 0; i < n; i++)
					sum += bench_target(i, 1);
			busy += now_s() - t0;
			done += n;
		}
		v[r] = busy * 1e9 / CALLS;
	}
	if (sum == 42)
		puts("");
	qsort(v, RUNS, sizeof(v[0]), cmp_double);
	return v[RUNS / 2];
}

static double ns_per_call(long chunk)
{
	return ns_per_call_of(chunk, FN_TARGET);
}

/* ns per call of fx (*x) and of fref (*ref), timed in turns, RUNS of
 * each: medians of both and of their ratios (*ratio), so that a machine
 * whose load changes during the run still compares the two under the
 * same load. */
static void ns_pair_of(long (*fx)(long, long), long (*fref)(long, long), double *x,
		       double *ref, double *ratio)
{
	double vx[RUNS], vr[RUNS], q[RUNS];
	long sum = 0;

	for (int r = 0; r < RUNS; r++) {
		double t0 = now_s(), t1;

		for (long i = 0; i < CALLS; i++)
			sum += fx(i, 1);
		t1 = now_s();
		for (long i = 0; i < CALLS; i++)
			sum += fref(i, 1);
		vx[r] = (t1 - t0) * 1e9 / CALLS;
		vr[r] = (now_s() - t1) * 1e9 / CALLS;
		q[r] = vx[r] / vr[r];
	}
	if (sum == 42)
		puts("");
	qsort(vx, RUNS, sizeof(vx[0]), cmp_double);
	qsort(vr, RUNS, sizeof(vr[0]), cmp_double);
	qsort(q, RUNS, sizeof(q[0]), cmp_double);
	*x = vx[RUNS / 2];
	*ref = vr[RUNS / 2];
	*ratio = q[RUNS / 2];
}

/* bench_target (the program's) against bench_ref (the reference's). */
static void ns_pair(double *x, double *ref, double *ratio)
{
	ns_pair_of(bench_target, bench_ref, x, ref, ratio);
}

/* ns per pass of bench_sdt's loop, median of RUNS; with chunk > 0 in
 * passes of chunk, each after the reader has emptied the rings. */
static double ns_per_sdt_hit(long chunk)
{
	double v[RUNS];
	long sum = 0;

	for (int r = 0; r < RUNS; r++) {
		double busy = 0;

		for (long done = 0; done < CALLS;) {
			long n = chunk ? chunk : CALLS;
			double t0;

			while (chunk && ring_backlog())
				sched_yield();
			t0 = now_s();
			sum += bench_sdt(n);
			busy += now_s() - t0;
			done += n;
		}
		v[r] = busy * 1e9 / CALLS;
	}
	if (sum == 42)
		puts("");
	qsort(v, RUNS, sizeof(v[0]), cmp_double);
	return v[RUNS / 2];
}

/* ns per hit on bench_sdt's site (a pass of its loop less base, the pass
 * unprobed) and per call of bench_ref, which has an empty optimized
 * probe (o), timed in turns, RUNS of each: medians of both and of their
 * ratios, as ns_pair() does for the program rows. */
static void sdt_pair(double base, double *x, double *ref, double *ratio)
{
	double vx[RUNS], vr[RUNS], q[RUNS];
	long sum = 0;

	for (int r = 0; r < RUNS; r++) {
		double t0 = now_s(), t1;

		sum += bench_sdt(CALLS);
		t1 = now_s();
		for (long i = 0; i < CALLS; i++)
			sum += bench_ref(i, 1);
		vx[r] = (t1 - t0) * 1e9 / CALLS - base;
		vr[r] = (now_s() - t1) * 1e9 / CALLS;
		q[r] = vx[r] / vr[r];
	}
	if (sum == 42)
		puts("");
	qsort(vx, RUNS, sizeof(vx[0]), cmp_double);
	qsort(vr, RUNS, sizeof(vr[0]), cmp_double);
	qsort(q, RUNS, sizeof(q[0]), cmp_double);
	*x = vx[RUNS / 2];
	*ref = vr[RUNS / 2];
	*ratio = q[RUNS / 2];
}

/* The address of bench_sdt's probe site: the one site this program's
 * SDT_PROBE3 listed. */
extern const uintptr_t __start_sdt_sites[] __attribute__((weak, visibility("hidden")));
extern const uintptr_t __stop_sdt_sites[] __attribute__((weak, visibility("hidden")));

static uintptr_t sdt_site(void)
{
	return (uintptr_t)__start_sdt_sites != (uintptr_t)__stop_sdt_sites ? __start_sdt_sites[0] : 0;
}

static void make_shm_sized(size_t size)
{
	int fd;
	void *base;

	if (shm_fd >= 0) {
		munmap(map.base, shm_size);
		close(shm_fd);
	}
	fd = memfd_create("kprobe-bench", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, (off_t)size) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW)) {
		perror("session memory");
		exit(1);
	}
	base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	shm_fd = fd;
	shm_size = size;
	if (base == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	kps_map_views(&map, base);
}

static void make_shm(void)
{
	make_shm_sized(kps_size());
}

static void reset_shm(void)
{
	memset(map.base, 0, kps_off_rings() + KPS_ALIGN(KPS_RINGS * sizeof(struct kps_ring)));
	map.hdr->nrings = KPS_RINGS;
	map.hdr->ring_bytes = KPS_RING_BYTES;
	map.hdr->max_probes = KPS_MAX_PROBES;
	map.hdr->magic = KPS_MAGIC;
	/* As the tool sets it on a CPU with an invariant TSC. */
	map.hdr->time_tsc = 1;
}

static void start(const char *action, const char *probe)
{
	char config[512], err[512];
	int kind;

	reset_shm();
	snprintf(config, sizeof(config), "shm passed\naction %s\nfollow 0\nprobe %s\n", action,
		 probe);
	if (agent_session_start(config, dup(shm_fd), false, err, sizeof(err), &kind)) {
		fprintf(stderr, "kprobe-bench-extra: %s\n", err);
		exit(1);
	}
	/* Let the optimizer put the jump in. */
	usleep(300000);
}

/* A program on bench_target, set up as `kprobe run` sets it up: compiled,
 * its image and maps in the session memory, its uprobes as config specs. */
static void start_prog(const char *body)
{
	char src[1024], self[512], why[256], *config, *p;
	struct lang_compile_opts co = { .filename = "bench" };
	struct lang_error e;
	struct lang_image img;
	void *image;
	size_t len;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	int kind;

	self[n > 0 ? n : 0] = '\0';
	snprintf(src, sizeof(src), body, self, self);
	if (lang_compile(src, &co, &image, &len, &e) ||
	    lang_image_load(&img, image, len, why, sizeof(why))) {
		fprintf(stderr, "kprobe-bench-extra: %s\n", e.text[0] ? e.text : "cannot compile");
		exit(1);
	}
	make_shm_sized(kps_total_size(len, img.region_size));
	reset_shm();
	memcpy((char *)map.base + kps_off_image(), image, len);
	lang_maps_init(&img, (char *)map.base + kps_off_region(len), img.region_size);
	config = calloc(1, 4096);
	p = config + sprintf(config, "shm passed\naction run\nfollow 0\n");
	for (uint32_t i = 0; i < img.hdr->nprobes; i++) {
		const struct lang_probe_desc *d = &img.probes[i];
		struct probe_spec ps = { .kind = SPEC_SYMBOL };

		if (d->kind != LANG_P_UPROBE && d->kind != LANG_P_URETPROBE)
			continue;
		snprintf(ps.object, sizeof(ps.object), "%s", lang_image_str(&img, d->target));
		snprintf(ps.symbol, sizeof(ps.symbol), "%s", lang_image_str(&img, d->func));
		ps.is_return = d->kind == LANG_P_URETPROBE;
		spec_format(&ps);
		p += sprintf(p, "probe %s\n", ps.text);
	}
	sprintf(p, "program %zu %zu\n", len, img.region_size);
	if (agent_session_start(config, dup(shm_fd), false, why, sizeof(why), &kind)) {
		fprintf(stderr, "kprobe-bench-extra: %s\n", why);
		exit(1);
	}
	free(config);
	free(image);
	usleep(300000);
}

/* var_fetch: the handler of one probe runs fetch_n of the plans in
 * fetch_args into the same record each hit (the record's slots without a
 * plan written as 0): the difference between 2 and 0 plans is the fetch. */
#define FETCH_RUNS 41

/* ns per call of bench_struct over n calls, once. */
static double ns_per_struct_call(long n)
{
	static struct bench_hdr hdr = { 0, 42 };
	long sum = 0;
	double t0 = now_s();

	for (long i = 0; i < n; i++)
		sum += bench_struct(&hdr, i);
	t0 = now_s() - t0;
	if (sum == 42)
		puts("");
	return t0 * 1e9 / (double)n;
}

static struct spec_arg fetch_args[2];
static volatile int fetch_n;
static uint64_t fetch_rec[2];
static unsigned long fetch_faults;

static int fetch_pre(struct kprobe *p, struct pt_regs *regs)
{
	int n = fetch_n;

	(void)p;
	for (int i = 0; i < 2; i++) {
		uint64_t v = 0;

		if (i < n && !agent_run_plan(regs, &fetch_args[i], &v))
			fetch_faults++;
		fetch_rec[i] = v;
	}
	return 0;
}

static double var_fetch_ns(double *with0, double *with2)
{
	struct probe_spec ps;
	struct kprobe kp = { .symbol_name = "bench_struct", .pre_handler = fetch_pre };
	char err[256];
	double v0[FETCH_RUNS], v2[FETCH_RUNS];

	/* As the tool compiles `h->len b` at bench_struct's entry. */
	if (spec_parse("bench_struct len=@r5+8*4:s32 b=@r4:u64", &ps, err, sizeof(err)) ||
	    ps.nargs != 2) {
		fprintf(stderr, "kprobe-bench-extra: %s\n", err);
		exit(1);
	}
	memcpy(fetch_args, ps.args, sizeof(fetch_args));
	if (register_kprobe(&kp)) {
		fprintf(stderr, "kprobe-bench-extra: cannot probe bench_struct\n");
		exit(1);
	}
	usleep(300000);
	/* Short runs, alternated, so that both see the same machine. */
	for (int r = 0; r < FETCH_RUNS; r++) {
		fetch_n = 0;
		v0[r] = ns_per_struct_call(CALLS / 8);
		fetch_n = 2;
		v2[r] = ns_per_struct_call(CALLS / 8);
	}
	unregister_kprobe(&kp);
	if (fetch_faults || fetch_rec[0] != 42) {
		fprintf(stderr, "kprobe-bench-extra: var_fetch read %lu, %lu faults\n",
			(unsigned long)fetch_rec[0], fetch_faults);
		exit(1);
	}
	qsort(v0, FETCH_RUNS, sizeof(v0[0]), cmp_double);
	qsort(v2, FETCH_RUNS, sizeof(v2[0]), cmp_double);
	*with0 = v0[FETCH_RUNS / 2];
	*with2 = v2[FETCH_RUNS / 2];
	return *with2 - *with0;
}

static int empty_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	(void)regs;
	return 0;
}

/* A reader that frees ring space as fast as it can. */
static volatile int reading;
static volatile unsigned long long events_read;

static void *reader(void *arg)
{
	(void)arg;
	while (__atomic_load_n(&reading, __ATOMIC_ACQUIRE)) {
		for (uint32_t i = 0; i < map.hdr->rings_hint; i++) {
			struct kps_ring *r = &map.rings[i];
			const unsigned char *data = map.ring_data + (size_t)i * KPS_RING_BYTES;
			uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE), tail = r->tail;

			while (tail < head) {
				const struct kps_event *ev =
					(const void *)(data + (tail & (KPS_RING_BYTES - 1)));

				events_read += ev->type != EV_PAD;
				tail += ev->size;
			}
			__atomic_store_n(&r->tail, tail, __ATOMIC_RELEASE);
		}
		/* The tool reads again after a millisecond when events keep
		 * coming; this reader is as fast as a reader can be. */
		sched_yield();
	}
	return NULL;
}

static int empty_handler(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	(void)regs;
	return 0;
}

/* prog_latency_floor: the least the latency pattern can cost a call
 * here, whatever runs it: the two hits its two halves need (an entry and
 * the way out, each an optimized probe with a light handler: no return
 * probe) and the two time stamps nsecs takes, and nothing else (no map,
 * no thread, no filter). */
static uint64_t floor_start, floor_sum;

static int floor_entry(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	(void)regs;
	floor_start = kp_cycles();
	return 0;
}

static int floor_exit(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	(void)regs;
	floor_sum += kp_cycles() - floor_start;
	return 0;
}

/* The floor on bench_lat (entry and exit site, both optimized) timed in
 * turns with an empty return probe on its twin; -1 when bench_lat's way
 * out cannot take a probe of its own. */
static int latency_floor(double *x, double *ref, double *ratio)
{
	struct kretprobe rp = { .kp.symbol_name = "bench_lat_ref", .handler = empty_return,
				.maxactive = 64 };
	struct kprobe kp[1 + 4] = { { .symbol_name = "bench_lat", .pre_handler = floor_entry } };
	struct kprobe *kps[1 + 4] = { &kp[0] };
	unsigned long v[4];
	int n = kprobes_exit_sites((unsigned long)bench_lat, v, 4,
				   KPROBES_EXITS_JUMP | KPROBES_EXITS_RETURNS);

	if (n <= 0 || v[0] == (unsigned long)bench_lat)
		return -1;
	for (int i = 0; i < n; i++) {
		kp[1 + i].addr = (kprobe_opcode_t *)v[i];
		kp[1 + i].pre_handler = floor_exit;
		kps[1 + i] = &kp[1 + i];
	}
	if (register_kprobes(kps, 1 + n))
		return -1;
	if (register_kretprobe(&rp)) {
		unregister_kprobes(kps, 1 + n);
		return -1;
	}
	usleep(300000);
	ns_pair_of(bench_lat, bench_lat_ref, x, ref, ratio);
	unregister_kretprobe(&rp);
	unregister_kprobes(kps, 1 + n);
	return floor_sum ? 0 : -1;
}

static uint64_t lost(void)
{
	uint64_t n = map.hdr->ringless_lost;

	for (uint32_t i = 0; i < map.hdr->rings_hint; i++)
		n += map.rings[i].lost;
	return n;
}

int main(int argc, char **argv)
{
	bool json = argc > 1 && !strcmp(argv[1], "--json");
	struct kprobe kp = { .symbol_name = "bench_target", .pre_handler = empty_handler };
	struct kretprobe rp = { .kp.symbol_name = "bench_target", .handler = empty_return,
				.maxactive = 64 };
	double call, probe, count, trace, rate, ret, pcount, pfilter, pfilter_tid, phist, plat;
	double pcount_o, pfilter_o, pfilter_tid_o, phist_o, plat_ro;
	double pcount_q, pfilter_q, pfilter_tid_q, phist_q, plat_q;
	double pkeyless, pkeyless_o, pkeyless_q;
	double fetch0, fetch2, fetch, sdt_call, sdt, sdt_o, sdt_q, sdt_trace, entry_trace;
	double clock_ns, lfloor = 0, lfloor_ro = 0, lfloor_q = 0;
	int lfloor_rc;
	pthread_t th;

	make_shm();
	call = ns_per_call(0);
	clock_ns = clock_read_ns();
	if (register_kprobe(&kp)) {
		fprintf(stderr, "kprobe-bench-extra: cannot probe bench_target\n");
		return 1;
	}
	usleep(300000);
	probe = ns_per_call(0);
	unregister_kprobe(&kp);

	start("count", "bench_target");
	count = ns_per_call(0);
	agent_session_stop();

	start("trace", "bench_target a=arg1:u64 b=arg2:u64");
	reading = 1;
	pthread_create(&th, NULL, reader, NULL);
	/* Bursts of 4096 events (40 bytes each) fit in one ring. */
	trace = ns_per_call(4096);
	/* Throughput: bursts as fast as the reader frees room, none lost. */
	{
		uint64_t lost_before = lost();
		unsigned long long before = events_read;
		double t0 = now_s();

		for (long done = 0; done < CALLS; done += 4096) {
			while (ring_backlog() > KPS_RING_BYTES / 2)
				sched_yield();
			for (long i = 0; i < 4096; i++)
				bench_target(i, 2);
		}
		while (ring_backlog())
			sched_yield();
		rate = (double)(events_read - before) / (now_s() - t0);
		if (lost() != lost_before)
			rate = 0;	/* not loss-free: no rate to claim */
	}
	agent_session_stop();

	/* usdt: count, and trace with the two register operands, on the
	 * SDT site in bench_sdt's loop; trace on an entry alike. */
	sdt_call = ns_per_sdt_hit(0);
	{
		char spec[96];

		struct kprobe ref = { .symbol_name = "bench_ref", .pre_handler = empty_handler };

		snprintf(spec, sizeof(spec), "0x%lx", (unsigned long)sdt_site());
		if (register_kprobe(&ref)) {
			fprintf(stderr, "kprobe-bench-extra: cannot probe bench_ref\n");
			return 1;
		}
		start("count", spec);
		sdt_pair(sdt_call, &sdt, &sdt_o, &sdt_q);
		agent_session_stop();
		unregister_kprobe(&ref);
		snprintf(spec, sizeof(spec), "0x%lx a=arg1:u64 b=arg2:u64", (unsigned long)sdt_site());
		start("trace", spec);
		sdt_trace = ns_per_sdt_hit(4096) - sdt_call;
		agent_session_stop();
		start("trace", "bench_target a=arg1:u64 b=arg2:u64");
		entry_trace = ns_per_call(4096) - call;
		agent_session_stop();
	}
	__atomic_store_n(&reading, 0, __ATOMIC_RELEASE);
	pthread_join(th, NULL);

	fetch = var_fetch_ns(&fetch0, &fetch2);

	if (register_kretprobe(&rp)) {
		fprintf(stderr, "kprobe-bench-extra: cannot return-probe bench_target\n");
		return 1;
	}
	usleep(300000);
	ret = ns_per_call(0);
	unregister_kretprobe(&rp);

	/* The program rows, each timed in turns with an empty probe on
	 * bench_ref (o) or, for the latency pattern, an empty return probe
	 * (ro). */
	memset(&kp, 0, sizeof(kp));
	kp.symbol_name = "bench_ref";
	kp.pre_handler = empty_handler;
	if (register_kprobe(&kp)) {
		fprintf(stderr, "kprobe-bench-extra: cannot probe bench_ref\n");
		return 1;
	}
	start_prog("uprobe:%s:bench_target { @[tid] = count(); }");
	ns_pair(&pcount, &pcount_o, &pcount_q);
	agent_session_stop();
	start_prog("uprobe:%s:bench_target { @ = count(); }");
	ns_pair(&pkeyless, &pkeyless_o, &pkeyless_q);
	agent_session_stop();
	start_prog("uprobe:%s:bench_target /arg0 == 0xfffffffff/ { @hit = count(); }");
	ns_pair(&pfilter, &pfilter_o, &pfilter_q);
	agent_session_stop();
	start_prog("uprobe:%s:bench_target /tid == 0/ { @hit = count(); }");
	ns_pair(&pfilter_tid, &pfilter_tid_o, &pfilter_tid_q);
	agent_session_stop();
	start_prog("uprobe:%s:bench_target { @ = hist(arg0); }");
	ns_pair(&phist, &phist_o, &phist_q);
	agent_session_stop();
	unregister_kprobe(&kp);
	memset(&rp, 0, sizeof(rp));
	rp.kp.symbol_name = "bench_ref";
	rp.handler = empty_return;
	rp.maxactive = 64;
	if (register_kretprobe(&rp)) {
		fprintf(stderr, "kprobe-bench-extra: cannot return-probe bench_ref\n");
		return 1;
	}
	start_prog("uprobe:%s:bench_target { @s[tid] = nsecs; }\n"
		   "uretprobe:%s:bench_target /@s[tid]/ { @ns = hist(nsecs - @s[tid]); "
		   "delete(@s[tid]); }");
	ns_pair(&plat, &plat_ro, &plat_q);
	agent_session_stop();
	unregister_kretprobe(&rp);
	lfloor_rc = latency_floor(&lfloor, &lfloor_ro, &lfloor_q);
	close(shm_fd);

	if (json) {
		printf("{\"call\":%.2f,\"probe_ns\":%.2f,\"count_extra\":%.2f,\"trace_extra\":%.2f,"
		       "\"events_per_s\":%.0f,\"ro_ns\":%.2f,\"prog_count\":%.2f,"
		       "\"prog_filter\":%.2f,\"prog_filter_tid\":%.2f,\"prog_hist\":%.2f,"
		       "\"prog_latency\":%.2f,\"prog_count_x_o\":%.2f,\"prog_filter_x_o\":%.2f,"
		       "\"prog_filter_tid_x_o\":%.2f,\"prog_hist_x_o\":%.2f,"
		       "\"prog_latency_x_ro\":%.2f,"
		       "\"var_fetch\":%.2f,\"usdt\":%.2f,\"usdt_x_o\":%.2f,\"usdt_trace\":%.2f,"
		       "\"trace_entry\":%.2f,\"clock\":%.2f,\"prog_count_keyless\":%.2f,"
		       "\"prog_count_keyless_x_o\":%.2f,", call, probe, count - probe,
		       trace - probe, rate, ret, pcount, pfilter, pfilter_tid, phist, plat, pcount_q,
		       pfilter_q, pfilter_tid_q, phist_q, plat_q, fetch, sdt, sdt_q, sdt_trace,
		       entry_trace, clock_ns, pkeyless, pkeyless_q);
		if (lfloor_rc)
			printf("\"prog_latency_floor\":null,\"prog_latency_floor_x_ro\":null}\n");
		else
			printf("\"prog_latency_floor\":%.2f,\"prog_latency_floor_x_ro\":%.2f}\n",
			       lfloor, lfloor_q);
		return 0;
	}
	printf("call            %8.2f ns\n", call);
	printf("probe (empty)   %8.2f ns\n", probe);
	printf("count           %8.2f ns   count_extra %6.2f ns\n", count, count - probe);
	printf("trace (2 args)  %8.2f ns   trace_extra %6.2f ns\n", trace, trace - probe);
	printf("events_per_s    %8.0f\n", rate);
	printf("ro (empty)      %8.2f ns\n", ret);
	/* each against its reference timed in turns with it (o, ro on
	 * bench_ref): the median of the ratios of the turns */
	printf("prog_count      %8.2f ns   %.2fx o  (o %.2f ns; target <= 2x)\n", pcount,
	       pcount_q, pcount_o);
	printf("prog_count_keyless %5.2f ns   %.2fx o  (o %.2f ns; @ = count())\n", pkeyless,
	       pkeyless_q, pkeyless_o);
	printf("prog_filter     %8.2f ns   %.2fx o  (o %.2f ns; target <= 1.3x)\n", pfilter,
	       pfilter_q, pfilter_o);
	printf("prog_filter_tid %8.2f ns   %.2fx o  (o %.2f ns; the filter on tid: no pt_regs)\n",
	       pfilter_tid, pfilter_tid_q, pfilter_tid_o);
	printf("prog_hist       %8.2f ns   %.2fx o  (o %.2f ns)\n", phist, phist_q, phist_o);
	printf("prog_latency    %8.2f ns   %.2fx ro (ro %.2f ns; target <= 2x)\n", plat, plat_q,
	       plat_ro);
	printf("var_fetch       %8.2f ns   (target <= 5; per hit: 2 plans %.2f ns - no plan %.2f ns)\n",
	       fetch, fetch2, fetch0);
	printf("usdt            %8.2f ns   %.2fx o  (o %.2f ns; target <= 2x; count on an SDT site)\n",
	       sdt, sdt_q, sdt_o);
	printf("usdt_trace      %8.2f ns   (trace, 2 operands; on a function entry %.2f ns)\n",
	       sdt_trace, entry_trace);
	printf("clock           %8.2f ns   (one time stamp, read back to back)\n", clock_ns);
	if (lfloor_rc)
		printf("prog_latency_floor  n/a   (bench_lat's exit site cannot take a probe)\n");
	else
		printf("prog_latency_floor %5.2f ns   %.2fx ro (ro %.2f ns; entry and exit site probes, "
		       "two time stamps, nothing else)\n", lfloor, lfloor_q, lfloor_ro);
	return 0;
}
