/*
 * demo: libkprobes end to end on a small "request server".
 *
 * Worker threads handle requests (parse, then a lookup whose cost varies).
 * The demo attaches, while they run:
 *   - a kprobe on parse_request() that records each request's arguments into
 *     a lock-free ring, printed live as events by the main thread;
 *   - a kretprobe on lookup() whose entry handler stamps the time into the
 *     instance data and whose return handler adds the duration to a log2
 *     latency histogram;
 *   - a mid-function kprobe inside lookup() that counts cache misses.
 * Probes are jump-optimized where possible (see "[OPTIMIZED]" in the list).
 * At the end it prints the list, counts, and the histogram, detaches, and
 * checks that the workers computed exactly what they compute unprobed.
 *
 *   demo               the above
 *   demo --plain [N]   only the workload, N requests per worker, unprobed:
 *                      the program `make demo` then runs under the kprobe tool
 */
#include <kprobes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NWORKERS 2
static long NREQ = 200000;
#define RING 1024

/* ---- the probed program ---- */

struct request {
	long id;
	int kind;
	long key;
};

long parse_request(long id, int kind, long key);
__attribute__((noinline)) long parse_request(long id, int kind, long key)
{
	__asm__ volatile("" : "+r"(key));
	return key * 31 + kind;
}

/* A tiny cache per worker thread: the result depends on the key only. */
static __thread long table[4096], table_key[4096];

long lookup(long key);
__attribute__((noinline)) long lookup(long key)
{
	long v = table_key[key & 4095] == key + 1 ? table[key & 4095] : 0;

	__asm__ volatile("" : "+r"(v));
	if (v == 0) {
		/* a "miss": some work to fill the entry */
		for (long i = 0; i < (key & 63) * 20; i++)
			v += i ^ key;
		__asm__ volatile("demo_miss_site: .globl demo_miss_site" ::: "memory");
		v |= 1;
		table[key & 4095] = v;
		table_key[key & 4095] = key + 1;
	}
	return v;
}

extern char demo_miss_site[];

static long worker_sum[NWORKERS];

static void *worker(void *arg)
{
	long w = (long)(intptr_t)arg, sum = 0;

	for (long i = 0; i < NREQ; i++) {
		long key = (i * 2654435761u + w) % 100000;

		sum += lookup(parse_request(i, (int)(i % 3), key) % 100000);
	}
	worker_sum[w] = sum;
	return NULL;
}

/* ---- the instrumentation (handlers are async-signal-safe) ---- */

struct event {
	long seq, id, kind, key;
	pid_t tid;
};

static struct event ring[RING];
static unsigned long ring_head, parse_hits;
static unsigned long hist[64], misses;

static int on_parse(struct kprobe *p, struct pt_regs *regs)
{
	unsigned long seq;
	struct event *e;

	__atomic_fetch_add(&parse_hits, 1, __ATOMIC_RELAXED);
	/* Every 20,000th request is kept for the live view. */
	if (regs_get_kernel_argument(regs, 0) % 20000)
		return 0;
	seq = __atomic_fetch_add(&ring_head, 1, __ATOMIC_RELAXED);
	e = &ring[seq % RING];
	e->id = (long)regs_get_kernel_argument(regs, 0);
	e->kind = (long)regs_get_kernel_argument(regs, 1);
	e->key = (long)regs_get_kernel_argument(regs, 2);
	e->tid = 0;
	__atomic_store_n(&e->seq, (long)seq + 1, __ATOMIC_RELEASE);
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int lookup_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	*(uint64_t *)ri->data = now_ns();
	return 0;
}

static int lookup_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	uint64_t d = now_ns() - *(uint64_t *)ri->data;
	int b = d ? 63 - __builtin_clzll(d) : 0;

	__atomic_fetch_add(&hist[b], 1, __ATOMIC_RELAXED);
	return 0;
}

static int on_miss(struct kprobe *p, struct pt_regs *regs)
{
	__atomic_fetch_add(&misses, 1, __ATOMIC_RELAXED);
	return 0;
}

static struct kprobe kp_parse = { .symbol_name = "parse_request", .pre_handler = on_parse };
static struct kprobe kp_miss = { .pre_handler = on_miss };
static struct kretprobe rp_lookup = {
	.kp = { .symbol_name = "lookup" },
	.entry_handler = lookup_entry,
	.handler = lookup_return,
	.data_size = sizeof(uint64_t),
	.maxactive = 16,
};

static void print_histogram(void)
{
	unsigned long max = 1, total = 0;
	int lo = 63, hi = 0;

	for (int i = 0; i < 64; i++) {
		total += hist[i];
		if (hist[i]) {
			lo = i < lo ? i : lo;
			hi = i > hi ? i : hi;
			max = hist[i] > max ? hist[i] : max;
		}
	}
	printf("\nlookup() latency, %lu calls (log2 buckets):\n", total);
	printf("%12s .. %-12s %10s\n", "low ns", "high ns", "count");
	for (int i = lo; i <= hi; i++) {
		char bar[41];
		int n = (int)(40 * hist[i] / max);

		memset(bar, '#', (size_t)n);
		bar[n] = 0;
		printf("%12lu .. %-12lu %10lu |%-40s|\n", 1UL << i, (2UL << i) - 1, hist[i], bar);
	}
}

/* Runs the workers; while they run, prints the events the probes record. */
static long run_workers(bool live)
{
	pthread_t t[NWORKERS];
	bool joined[NWORKERS] = { false };
	unsigned long shown = 0;
	long sum = 0;
	int done = 0;

	for (long i = 0; i < NWORKERS; i++)
		pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
	while (done < NWORKERS) {
		unsigned long head = __atomic_load_n(&ring_head, __ATOMIC_ACQUIRE);

		for (unsigned long s = head > RING ? head - RING : 0; live && s < head; s++) {
			struct event *e = &ring[s % RING];

			if (s >= shown && __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE) == (long)s + 1) {
				printf("  parse_request(id=%ld, kind=%ld, key=%ld)\n", e->id, e->kind, e->key);
				shown = s + 1;
			}
		}
		for (int i = 0; i < NWORKERS; i++)
			if (!joined[i] && pthread_tryjoin_np(t[i], NULL) == 0) {
				joined[i] = true;
				done++;
			}
		usleep(2000);
	}
	for (int i = 0; i < NWORKERS; i++)
		sum += worker_sum[i];
	return sum;
}

int main(int argc, char **argv)
{
	struct kprobe *kps[] = { &kp_parse, &kp_miss };
	long unprobed, probed;
	int err;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "--plain")) {
		NREQ = argc > 2 ? atol(argv[2]) : NREQ;
		printf("demo --plain: %ld requests per worker, result %ld\n", NREQ, run_workers(false));
		return 0;
	}
	printf("libkprobes demo: %d worker threads, %ld requests each\n\n", NWORKERS, NREQ);
	unprobed = run_workers(false);

	kp_miss.addr = (kprobe_opcode_t *)demo_miss_site;
	err = register_kprobes(kps, 2);
	if (!err)
		err = register_kretprobe(&rp_lookup);
	if (err) {
		fprintf(stderr, "demo: registering probes failed: %s\n", strerror(-err));
		return 1;
	}
	usleep(20000);	/* let the optimizer put its jumps in */
	printf("probes (kprobes_list):\n");
	kprobes_list(stdout);
	printf("\nlive events (every 20,000th parse_request):\n");
	probed = run_workers(true);

	printf("\ncounts: parse_request hits %lu, cache misses %lu, lookup returns missed %d\n",
	       parse_hits, misses, rp_lookup.nmissed);
	print_histogram();
	unregister_kretprobe(&rp_lookup);
	unregister_kprobes(kps, 2);
	printf("\nresult unprobed %ld, probed %ld: %s\n", unprobed, probed,
	       unprobed == probed ? "identical" : "DIFFERENT");
	return unprobed == probed ? 0 : 1;
}
