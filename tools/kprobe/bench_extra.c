/* kprobe-bench-extra: what the kprobe tool adds per hit in the target, on
 * top of the probe itself, measured in one process with the agent's own
 * handlers and session memory:
 *
 *   probe_ns       a jump-optimized probe with an empty pre-handler
 *   count_extra    `kprobe count`'s handler, minus probe_ns
 *   trace_extra    `kprobe trace` with two arguments, minus probe_ns
 *   events_per_s   events per second one thread can put through a ring
 *                  to a reader thread without losing any
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

#define CALLS 2000000
#define RUNS 7

__attribute__((noinline, noclone, used)) long bench_target(long a, long b)
{
	__asm__ volatile("" ::: "memory");
	return a + b;
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

/* The session memory, as the CLI makes it. */
static int shm_fd = -1;
static struct kps_map map;

static uint64_t ring_backlog(void)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < map.hdr->rings_hint; i++)
		n += __atomic_load_n(&map.rings[i].head, __ATOMIC_ACQUIRE) -
		     __atomic_load_n(&map.rings[i].tail, __ATOMIC_ACQUIRE);
	return n;
}

/* ns per call of bench_target, median of RUNS.  With chunk > 0 the calls
 * come in bursts of chunk that fit in a ring, each timed on its own after
 * the reader has emptied the ring: an event's cost without loss. */
static double ns_per_call(long chunk)
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

static void make_shm(void)
{
	int fd;
	void *base;

	fd = memfd_create("kprobe-bench", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, (off_t)kps_size()) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW)) {
		perror("session memory");
		exit(1);
	}
	base = mmap(NULL, kps_size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	shm_fd = fd;
	if (base == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	kps_map_views(&map, base);
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
	double call, probe, count, trace, rate;
	pthread_t th;

	make_shm();
	call = ns_per_call(0);
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
	__atomic_store_n(&reading, 0, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	agent_session_stop();
	close(shm_fd);

	if (json) {
		printf("{\"call\":%.2f,\"probe_ns\":%.2f,\"count_extra\":%.2f,\"trace_extra\":%.2f,"
		       "\"events_per_s\":%.0f}\n", call, probe, count - probe, trace - probe, rate);
		return 0;
	}
	printf("call            %8.2f ns\n", call);
	printf("probe (empty)   %8.2f ns\n", probe);
	printf("count           %8.2f ns   count_extra %6.2f ns\n", count, count - probe);
	printf("trace (2 args)  %8.2f ns   trace_extra %6.2f ns\n", trace, trace - probe);
	printf("events_per_s    %8.0f\n", rate);
	return 0;
}
